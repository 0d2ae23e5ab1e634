/* malloc_threadset.c: many threads with working sets of their own, in
 * rounds of threads that start and leave.
 *
 *   malloc_threadset [threads] [rounds] [millions]
 *   (default 16 threads, 4 rounds, 4 million replacements in all)
 *
 * Each thread keeps 1024 objects and replaces a random one per step with
 * one of a random size, 8 bytes to 32 KiB, logarithmically distributed.
 * Half come from calloc and are read (they must be zero) before they are
 * written, as programs that check or accumulate into fresh memory do.
 * A thread leaves with its objects allocated; the main thread checks and
 * frees them after the round (a free of another thread's object each).
 * This is what many-threaded servers and thread pools do to an
 * allocator: per-thread caches and spans of every size class that their
 * threads leave behind, pages given back and faulted in again.
 *
 * Extra RESULT fields: threads, rounds, ops (replacements).
 */
#include "malloc_util.h"
#include <pthread.h>

#define SET 1024

struct worker {
    void *obj[SET];
    uint32_t size[SET];
    long steps;
    uint64_t seed;
    uint64_t bad;
    pthread_t thread;
};

static uint64_t tag_of(const void *p, uint32_t size)
{
    return (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull + size;
}

static void *replace(struct worker *w, int i, uint64_t *st)
{
    uint32_t size = (uint32_t)mb_log_size(st, 8, 32768);
    void *p;
    if (bench_rand(st) & 1) {
        p = calloc(1, size);
        if (!p) {
            fprintf(stderr, "bench: out of memory (calloc %u)\n", size);
            exit(3);
        }
        /* Read before written: every eighth word, all of a small one. */
        const uint64_t *q = p;
        uint64_t any = 0;
        for (size_t k = 0; k < size / 8; k += size > 512 ? 8 : 1)
            any |= q[k];
        if (any)
            w->bad++;
    } else {
        p = mb_xmalloc(size);
    }
    mb_fill(p, size, tag_of(p, size));
    w->obj[i] = p;
    w->size[i] = size;
    return p;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t st = w->seed;
    for (int i = 0; i < SET; i++)
        replace(w, i, &st);
    for (long s = 0; s < w->steps; s++) {
        int i = (int)(bench_rand(&st) % SET);
        if (!mb_check(w->obj[i], w->size[i], tag_of(w->obj[i], w->size[i])))
            w->bad++;
        free(w->obj[i]);
        replace(w, i, &st);
    }
    return NULL;                /* its objects stay for the main thread */
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 16;
    int rounds = argc > 2 ? atoi(argv[2]) : 4;
    double millions = argc > 3 ? atof(argv[3]) : 4;
    if (threads < 1 || threads > 256)
        threads = 16;
    if (rounds < 1)
        rounds = 1;
    long ops = (long)(millions * 1e6);
    if (ops < threads * rounds)
        ops = threads * rounds;
    mb_init();
    struct worker *w = calloc((size_t)threads, sizeof *w);
    if (!w)
        return 3;
    uint64_t bad = 0;
    for (int r = 0; r < rounds; r++) {
        for (int t = 0; t < threads; t++) {
            w[t].steps = ops / ((long)threads * rounds);
            w[t].seed = 0x853C49E6748FEA9BULL + (uint64_t)(r * threads + t);
            w[t].bad = 0;
            if (pthread_create(&w[t].thread, NULL, work, &w[t])) {
                fprintf(stderr, "malloc_threadset: pthread_create failed\n");
                return 3;
            }
        }
        for (int t = 0; t < threads; t++) {
            pthread_join(w[t].thread, NULL);
            bad += w[t].bad;
            for (int i = 0; i < SET; i++) {
                if (!mb_check(w[t].obj[i], w[t].size[i], tag_of(w[t].obj[i], w[t].size[i])))
                    bad++;
                free(w[t].obj[i]);
            }
        }
    }
    free(w);
    if (bad)
        fprintf(stderr, "malloc_threadset: %llu objects damaged or not zeroed\n",
                (unsigned long long)bad);
    return mb_report("malloc_threadset", bad == 0, "threads=%d rounds=%d ops=%ld", threads, rounds,
                     ops);
}
