/* test_malloc_keys.c: lfgc as the process's malloc when 32 pthread keys
 * exist before it initialises.
 *
 * glibc keeps the values of keys 32 and up in a block it callocs in each
 * thread.  lfgc's thread-exit key is made by its constructor; a preinit
 * function (below) runs before any library constructor, so here lfgc's
 * key is 40 or more, and registering a thread calls calloc, which is
 * lfgc's.  The initialising thread's registration did so from inside the
 * malloc initialisation, and waited on it for ever: the whole program
 * hung at its first malloc.  alarm() turns such a hang into a failure.
 * Then every thread that exited left its record behind (second test).
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <pthread.h>

#define EARLY_KEYS 40
static pthread_key_t early_keys[EARLY_KEYS];

static void make_keys(void)
{
    alarm(20);              /* a hang at start-up fails, Criterion has not started */
    for (int i = 0; i < EARLY_KEYS; i++)
        if (pthread_key_create(&early_keys[i], NULL) != 0)
            abort();
}
__attribute__((section(".preinit_array"), used)) static void (*preinit)(void) = make_keys;

#define KT_THREADS 64
#define KT_OBJS 64

static void *kt_thread(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    unsigned char *p[KT_OBJS];
    for (int i = 0; i < KT_OBJS; i++) {
        size_t n = 24 + (size_t)i * 8;
        p[i] = malloc(n);
        if (!p[i])
            return (void *)1;
        tu_fill_bytes(p[i], n, seed + (uint64_t)i);
    }
    /* Keys of 32 and up hold their values in the block glibc callocs. */
    if (pthread_setspecific(early_keys[EARLY_KEYS - 1], p[0]) != 0)
        return (void *)2;
    for (int i = 0; i < KT_OBJS; i++) {
        size_t n = 24 + (size_t)i * 8;
        if (tu_check_bytes(p[i], n, seed + (uint64_t)i) != n)
            return (void *)3;
        free(p[i]);
    }
    return NULL;
}

Test(malloc_keys, threads_allocate_with_high_keys, .timeout = 30)
{
    alarm(0);               /* started: Criterion's timeout takes over */
    cr_assert_geq(early_keys[EARLY_KEYS - 1], 32, "the early keys are not above 32");
    void *q = malloc(100);
    cr_assert_not_null(q);
    free(q);
    for (int i = 0; i < KT_THREADS; i++) {
        pthread_t t;
        void *r = (void *)-1;
        cr_assert_eq(pthread_create(&t, NULL, kt_thread, (void *)(uintptr_t)(i * 1000)), 0);
        cr_assert_eq(pthread_join(t, &r), 0);
        cr_assert_null(r, "thread %d failed (%p)", i, r);
    }
}

/* glibc frees the block holding a thread's values of keys 32 and up after
 * the key destructors have run, lfgc's exit hook among them.  That free
 * registered the thread again, and nothing removed the record: about
 * 12 KiB per thread that ever ran (2000 threads: +25 MiB). */
#define EX_THREADS 2000

Test(malloc_keys, exited_threads_leave_nothing, .timeout = 60)
{
    alarm(0);
    /* The first threads set up what every later one reuses. */
    for (int i = 0; i < 50; i++) {
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, kt_thread, (void *)(uintptr_t)i), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
    }
    size_t before = tu_rss_bytes();
    for (int i = 0; i < EX_THREADS; i++) {
        pthread_t t;
        void *r = (void *)-1;
        cr_assert_eq(pthread_create(&t, NULL, kt_thread, (void *)(uintptr_t)i), 0);
        cr_assert_eq(pthread_join(t, &r), 0);
        cr_assert_null(r, "thread %d failed (%p)", i, r);
    }
    size_t after = tu_rss_bytes();
    cr_log_info("RSS %zu KiB before %d threads, %zu KiB after", before >> 10, EX_THREADS,
                after >> 10);
    cr_assert_lt(after, before + 4 * MiB, "RSS grew by %zu KiB over %d threads that exited",
                 (after - before) >> 10, EX_THREADS);
}
