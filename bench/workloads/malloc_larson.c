/* malloc_larson.c: a larson-style server loop.
 *
 *   malloc_larson [threads] [millions]   (default 2 threads, 10 million ops)
 *
 * After Larson and Krishnan's benchmark of a server: each thread owns an
 * array of 1,000 live objects of 16..1024 bytes; one operation frees a
 * randomly chosen object and allocates a new one of random size in its
 * place.  After 10,000 operations a thread starts a new thread, hands it
 * the array and exits, as a server's worker is replaced: the newcomer frees
 * objects a thread that is gone allocated, and that thread's cache must
 * not be lost.  The work is fixed (not the time, as in the original), so
 * the key figure is the wall time.
 *
 * Extra RESULT fields: ops, threads_started, ns_per_op.
 */
#include "malloc_util.h"
#include <pthread.h>

#define CHUNKS 1000
#define ROUNDS 10000
#define MIN_SIZE 16
#define MAX_SIZE 1024

struct worker {
    void *obj[CHUNKS];
    uint32_t size[CHUNKS];
    uint64_t tag[CHUNKS];
    uint64_t seed;
    long ops_left;
    uint64_t bad;
    long started;
    pthread_t self;           /* the thread running it now */
};

static void *run(void *arg)
{
    struct worker *w = arg;
    uint64_t st = w->seed;
    long n = w->ops_left < ROUNDS ? w->ops_left : ROUNDS;
    for (long k = 0; k < n; k++) {
        uint64_t r = bench_rand(&st);
        size_t i = (size_t)(r % CHUNKS);
        if (!mb_check(w->obj[i], w->size[i], w->tag[i]))
            w->bad++;
        free(w->obj[i]);
        w->size[i] = (uint32_t)(MIN_SIZE + (r >> 32) % (MAX_SIZE - MIN_SIZE + 1));
        w->obj[i] = mb_xmalloc(w->size[i]);
        w->tag[i] = r;
        mb_fill(w->obj[i], w->size[i], w->tag[i]);
    }
    long left = w->ops_left - n;
    w->seed = st;
    if (left > 0) {
        /* Hand the objects to a new thread and end this one.  The new one
         * is detached: main waits for ops_left to reach 0. */
        pthread_t t;
        __atomic_store_n(&w->ops_left, left, __ATOMIC_RELAXED);
        w->started++;
        if (pthread_create(&t, NULL, run, w) != 0) {
            fprintf(stderr, "malloc_larson: pthread_create failed\n");
            exit(3);
        }
        pthread_detach(t);
    } else {
        /* The chain's last access to w: main may free it from here on. */
        __atomic_store_n(&w->ops_left, 0, __ATOMIC_RELEASE);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    double millions = argc > 2 ? atof(argv[2]) : 10;
    if (threads < 1 || threads > 64)
        threads = 2;
    long ops = (long)(millions * 1e6);
    if (ops < (long)threads * ROUNDS)
        ops = (long)threads * ROUNDS;
    mb_init();
    struct worker *w = calloc((size_t)threads, sizeof *w);
    if (!w)
        return 3;
    /* The first objects are allocated by main, as in the original. */
    for (int t = 0; t < threads; t++) {
        w[t].seed = 0xDA942042E4DD58B5ULL * (uint64_t)(t + 1);
        w[t].ops_left = ops / threads;
        for (size_t i = 0; i < CHUNKS; i++) {
            uint64_t r = bench_rand(&w[t].seed);
            w[t].size[i] = (uint32_t)(MIN_SIZE + r % (MAX_SIZE - MIN_SIZE + 1));
            w[t].obj[i] = mb_xmalloc(w[t].size[i]);
            w[t].tag[i] = r;
            mb_fill(w[t].obj[i], w[t].size[i], r);
        }
    }
    for (int t = 0; t < threads; t++) {
        pthread_t th;
        w[t].started = 1;
        if (pthread_create(&th, NULL, run, &w[t]) != 0)
            return 3;
        pthread_detach(th);
    }
    /* Wait for the chains of threads to finish their work. */
    for (int t = 0; t < threads; t++)
        while (__atomic_load_n(&w[t].ops_left, __ATOMIC_ACQUIRE) > 0)
            nanosleep(&(struct timespec){0, 200000}, NULL);
    uint64_t bad = 0;
    long started = 0, done = 0;
    for (int t = 0; t < threads; t++) {
        for (size_t i = 0; i < CHUNKS; i++) {
            if (!mb_check(w[t].obj[i], w[t].size[i], w[t].tag[i]))
                w[t].bad++;
            free(w[t].obj[i]);
        }
        bad += w[t].bad;
        started += w[t].started;
        done += ops / threads;
    }
    free(w);
    if (bad)
        fprintf(stderr, "malloc_larson: %llu objects damaged\n",
                (unsigned long long)bad);
    double wall = (double)(bench_now_ns() - mb_t0_ns);
    return mb_report("malloc_larson", bad == 0,
                     "threads=%d ops=%ld threads_started=%ld ns_per_op=%.2f",
                     threads, done, started, wall / (double)done);
}
