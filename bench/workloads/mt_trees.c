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
 * lfgc: threads need GC_pthread_create; until liblfgc exports it the bench
 * scripts build this file with lfgc only when it does (and pass
 * -DBENCH_LFGC_THREADS), and without that macro the program reports itself
 * unsupported (exit 77).
 */
#define GC_THREADS
#include <pthread.h>
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

static struct tree_node *build(int depth)
{
    struct tree_node *n;
    if (depth == 0) {
        n = GC_NEW(struct tree_node);
    } else {
        struct tree_node *l = build(depth - 1);
        struct tree_node *r = build(depth - 1);
        n = GC_NEW(struct tree_node);
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
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (int d = MIN_DEPTH; d <= w->max_depth; d += 2) {
        long iterations = 1L << (w->max_depth - d + MIN_DEPTH);
        long want = (2L << d) - 1;
        for (long i = w->index; i < iterations; i += w->nthreads) {
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

    struct tree_node *long_lived = build(max_depth);
    size_t words = ARRAY_BYTES / sizeof(uint32_t);
    uint32_t *array = GC_MALLOC_ATOMIC(ARRAY_BYTES);
    if (array == NULL) {
        fprintf(stderr, "mt_trees: out of memory (array)\n");
        return 3;
    }
    uint64_t seed = 0x2545F4914F6CDD1DULL;
    for (size_t i = 0; i < words; i++)
        array[i] = (uint32_t)(bench_rand(&seed) >> 32);
    uint64_t sum = bench_checksum32(array, words);

    static struct worker workers[MAX_THREADS];
    uint64_t t0 = bench_now_ns();
    for (int k = 0; k < nthreads; k++) {
        workers[k] = (struct worker){ .index = k, .nthreads = nthreads,
                                      .max_depth = max_depth };
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
