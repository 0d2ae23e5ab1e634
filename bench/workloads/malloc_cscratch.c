/* malloc_cscratch.c: cache-scratch, the false-sharing test of Hoard's
 * benchmarks, rewritten for this suite.
 *
 *   malloc_cscratch [threads] [iterations] [size] [repetitions]
 *                   (default 2 threads, 1000 iterations, 8 bytes, 20000)
 *
 * The main thread allocates one small object per thread, side by side as
 * most allocators place them, and hands one to each thread.  Each thread
 * frees the object it was given, then, many times over, allocates an
 * object of the same size, writes every byte of it `repetitions` times and
 * frees it.  An allocator that gives a thread back the very object it freed
 * (one that came from the main thread's memory, next to the other threads'
 * objects) makes the threads write to one cache line: the run is slow
 * although no object is shared.  Allocators with per-thread memory are not.
 *
 * Extra RESULT fields: threads, writes.
 */
#include "malloc_util.h"
#include <pthread.h>

struct job {
    char *given;
    size_t size;
    long iterations, repetitions;
    uint64_t bad;
    pthread_t th;
};

static void *work(void *arg)
{
    struct job *j = arg;
    if (!mb_check(j->given, j->size, (uint64_t)(uintptr_t)j))
        j->bad++;
    free(j->given);
    for (long i = 0; i < j->iterations; i++) {
        volatile unsigned char *p = mb_xmalloc(j->size);
        unsigned char first = p[0];
        for (long r = 0; r < j->repetitions; r++)
            for (size_t k = 0; k < j->size; k++)
                p[k] = (unsigned char)(p[k] + 1);
        /* Had another thread been given this object too, its writes
         * would show here. */
        if (p[0] != (unsigned char)(first + j->repetitions))
            j->bad++;
        free((void *)p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    long iterations = argc > 2 ? atol(argv[2]) : 1000;
    long size = argc > 3 ? atol(argv[3]) : 8;
    long reps = argc > 4 ? atol(argv[4]) : 20000;
    if (threads < 1 || threads > 256 || iterations < 1 || size < 1 ||
        size > 4096 || reps < 1) {
        fprintf(stderr, "usage: malloc_cscratch [threads] [iterations] "
                "[size] [repetitions]\n");
        return 2;
    }
    mb_init();
    struct job *jobs = calloc((size_t)threads, sizeof *jobs);
    if (!jobs)
        return 3;
    for (int t = 0; t < threads; t++) {
        jobs[t].size = (size_t)size;
        jobs[t].iterations = iterations;
        jobs[t].repetitions = reps;
        jobs[t].given = mb_xmalloc((size_t)size);
        mb_fill(jobs[t].given, (size_t)size, (uint64_t)(uintptr_t)&jobs[t]);
    }
    for (int t = 0; t < threads; t++)
        if (pthread_create(&jobs[t].th, NULL, work, &jobs[t]) != 0)
            return 3;
    uint64_t bad = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(jobs[t].th, NULL);
        bad += jobs[t].bad;
    }
    free(jobs);
    if (bad)
        fprintf(stderr, "malloc_cscratch: %llu objects damaged\n",
                (unsigned long long)bad);
    return mb_report("malloc_cscratch", bad == 0, "threads=%d writes=%lld",
                     threads, (long long)threads * iterations * size * reps);
}
