/* mt_trees.c: binary trees built and dropped by several threads at once.
 *
 *   mt_trees [threads [max_depth]]      (defaults: 2 threads, depth 16)
 *
 * The main thread builds a long-lived tree of depth D and a 4 MB pointer-free
 * array; then T worker threads share the short-lived work of trees.c: for
 * each depth d = 4, 6, ..., D the 2^(D - d + 4) trees are dealt out round
 * robin, so the total work does not depend on T and the wall time measures
 * how well the collector scales.  Every tree's node count is checked, and at
 * the end the long-lived tree and the array's checksum.
 *
 * Extra RESULT fields: threads, trees, mnodes_per_s (million tree nodes
 * allocated per second of wall time, the throughput).
 *
 * Built with -DBENCH_ARENA (collector "arena"), the same program runs with
 * no collector at all: each worker allocates its trees from its own
 * arena, made and touched before the clock starts, and rewinds it when
 * the next tree does not fit.  Memory is cleared before reuse as a
 * collector clears it, and as lfgc does: 4 KiB at a time, just before the
 * nodes in it are handed out, so that it is in cache when they are
 * written (clearing a whole used arena at once, as this program first
 * did, sends it to memory and back and makes two threads contend for the
 * memory bus: the ceiling it gave was lower than lfgc could reach).
 * Nodes take 32 bytes, as in lfgc and bdwgc (16 asked for plus their
 * extra byte).  That is the ideal memory manager for this workload: what
 * it achieves at 2 threads against 1 is the machine's own ceiling for the
 * scaling of this work, memory-bound as it is (shared cache and memory
 * bandwidth), whatever the collector.  Its RESULT has no collections and
 * no pauses.
 *
 * lfgc: threads need GC_pthread_create; until liblfgc exports it the bench
 * scripts build this file with lfgc only when it does (and pass
 * -DBENCH_LFGC_THREADS), and without that macro the program reports itself
 * unsupported (exit 77).
 */
#define GC_THREADS
#include <pthread.h>
#ifdef BENCH_ARENA
# define BENCH_COLLECTOR "arena"
#endif
#include "bench_util.h"

#if defined(LFGC_VERSION_STRING) && defined(BENCH_LFGC_THREADS) && \
    !defined(pthread_create)
/* lfgc exports GC_pthread_create but its gc.h does not redirect. */
extern int GC_pthread_create(pthread_t *, const pthread_attr_t *,
                             void *(*)(void *), void *);
# define pthread_create GC_pthread_create
#endif

#define MIN_DEPTH 4
#define MAX_THREADS 64
#define ARRAY_BYTES 4000000u

#ifdef BENCH_ARENA
# define ARENA_SLOT 32
# define ARENA_CLEAR 4096
struct arena {
    char *base, *next, *cleared, *end;
};
static __thread struct arena *my_arena;

/* Clear the next piece of the arena: what was used before the rewind. */
static __attribute__((noinline)) void arena_clear_more(struct arena *a)
{
    memset(a->cleared, 0, ARENA_CLEAR);
    a->cleared += ARENA_CLEAR;
}

static inline struct tree_node *node_new(void)
{
    struct arena *a = my_arena;
    if (a->next == a->cleared)
        arena_clear_more(a);
    struct tree_node *n = (struct tree_node *)a->next;
    a->next += ARENA_SLOT;
    return n;
}

/* Before a tree of `nodes` nodes: rewind when it would not fit. */
static void arena_make_room(long nodes)
{
    struct arena *a = my_arena;
    if (a->next + (size_t)nodes * ARENA_SLOT > a->end)
        a->next = a->cleared = a->base;
}

static size_t arena_bytes(int max_depth)
{
    return ((size_t)2 << max_depth) * ARENA_SLOT + ((size_t)1 << 20);
}
#else
# define node_new() GC_NEW(struct tree_node)
#endif

static struct tree_node *build(int depth)
{
    struct tree_node *n;
    if (depth == 0) {
        n = node_new();
    } else {
        struct tree_node *l = build(depth - 1);
        struct tree_node *r = build(depth - 1);
        n = node_new();
        if (n) {
            n->left = l;
            n->right = r;
        }
    }
    if (n == NULL) {
        fprintf(stderr, "mt_trees: out of memory\n");
        exit(3);
    }
    return n;
}

struct worker {
    pthread_t tid;
    int index, nthreads, max_depth;
    long trees, nodes, bad;
#ifdef BENCH_ARENA
    struct arena arena;
#endif
};

static void *work(void *arg)
{
    struct worker *w = arg;
#ifdef BENCH_ARENA
    my_arena = &w->arena;
#endif
    for (int d = MIN_DEPTH; d <= w->max_depth; d += 2) {
        long iterations = 1L << (w->max_depth - d + MIN_DEPTH);
        long want = (2L << d) - 1;
        for (long i = w->index; i < iterations; i += w->nthreads) {
#ifdef BENCH_ARENA
            arena_make_room(want);
#endif
            struct tree_node *t = build(d);
            if (bench_tree_count(t) != want)
                w->bad++;
            w->trees++;
            w->nodes += want;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int nthreads = argc > 1 ? atoi(argv[1]) : 2;
    int max_depth = argc > 2 ? atoi(argv[2]) : 16;
    if (nthreads < 1)
        nthreads = 1;
    if (nthreads > MAX_THREADS)
        nthreads = MAX_THREADS;
    if (max_depth < MIN_DEPTH + 2)
        max_depth = MIN_DEPTH + 2;

#if defined(LFGC_VERSION_STRING) && !defined(BENCH_LFGC_THREADS)
    bench_unsupported("mt_trees", "lfgc:threads-not-yet-supported");
#endif

    bench_init();
    int ok = 1;
    static struct worker workers[MAX_THREADS];

#ifdef BENCH_ARENA
    /* Every arena made and touched before the clock starts; the main
     * thread's holds the long-lived data. */
    static struct arena main_arena;
    size_t bytes = arena_bytes(max_depth);
    for (int k = 0; k <= nthreads; k++) {
        struct arena *a = k < nthreads ? &workers[k].arena : &main_arena;
        a->base = a->next = bench_map(bytes + (k == nthreads ? ARRAY_BYTES : 0));
        a->end = a->cleared = a->base + bytes;
        memset(a->base, 0, bytes);
    }
    my_arena = &main_arena;
#endif
    struct tree_node *long_lived = build(max_depth);
    size_t words = ARRAY_BYTES / sizeof(uint32_t);
#ifdef BENCH_ARENA
    uint32_t *array = (uint32_t *)main_arena.end;
#else
    uint32_t *array = GC_MALLOC_ATOMIC(ARRAY_BYTES);
#endif
    if (array == NULL) {
        fprintf(stderr, "mt_trees: out of memory (array)\n");
        return 3;
    }
    uint64_t seed = 0x2545F4914F6CDD1DULL;
    for (size_t i = 0; i < words; i++)
        array[i] = (uint32_t)(bench_rand(&seed) >> 32);
    uint64_t sum = bench_checksum32(array, words);

    uint64_t t0 = bench_now_ns();
    for (int k = 0; k < nthreads; k++) {
        workers[k].index = k;
        workers[k].nthreads = nthreads;
        workers[k].max_depth = max_depth;
        int e = pthread_create(&workers[k].tid, NULL, work, &workers[k]);
        if (e != 0) {
            fprintf(stderr, "mt_trees: pthread_create: %s\n", strerror(e));
            return 2;
        }
    }
    long trees = 0, nodes = 0;
    for (int k = 0; k < nthreads; k++) {
        pthread_join(workers[k].tid, NULL);
        trees += workers[k].trees;
        nodes += workers[k].nodes;
        if (workers[k].bad) {
            fprintf(stderr, "mt_trees: thread %d: %ld damaged trees\n", k,
                    workers[k].bad);
            ok = 0;
        }
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;

    long expected_trees = 0;
    for (int d = MIN_DEPTH; d <= max_depth; d += 2)
        expected_trees += 1L << (max_depth - d + MIN_DEPTH);
    if (trees != expected_trees) {
        fprintf(stderr, "mt_trees: %ld trees built, want %ld\n", trees,
                expected_trees);
        ok = 0;
    }
    if (bench_tree_count(long_lived) != (2L << max_depth) - 1) {
        fprintf(stderr, "mt_trees: long-lived tree damaged\n");
        ok = 0;
    }
    if (bench_checksum32(array, words) != sum) {
        fprintf(stderr, "mt_trees: pointer-free array damaged\n");
        ok = 0;
    }
    BENCH_KEEP(long_lived);
    BENCH_KEEP(array);

    return bench_report("mt_trees", ok,
                        "threads=%d depth=%d trees=%ld mnodes_per_s=%.2f",
                        nthreads, max_depth, trees, (double)nodes / secs / 1e6);
}
