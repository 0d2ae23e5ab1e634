/* test_bare.c: what lfgc asks of libc and of the process before a program
 * uses the collector.
 *
 * A malloc interposer (malloc mode) runs lfgc from inside malloc: a
 * thread's registration on its first allocation must not call malloc and
 * co.  And a program that only takes uncollectable memory must find its
 * signals, fork handlers and threads untouched until collection is on.
 * The counting wrappers below replace libc's malloc family in this
 * program; each counts the calls made by its own thread. */
#include "test_util.h"

#include <pthread.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static __thread unsigned long malloc_calls __attribute__((tls_model("initial-exec")));

void *malloc(size_t n)
{
    malloc_calls++;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    malloc_calls++;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    malloc_calls++;
    return __libc_realloc(p, n);
}

void free(void *p)
{
    if (p)
        malloc_calls++;
    __libc_free(p);
}

struct first_alloc {
    unsigned long calls;        /* malloc family calls by the first GC_malloc */
    unsigned long probe;        /* by one malloc/free pair: the wrappers count */
    bool ok;
};

static void *first_alloc_thread(void *arg)
{
    struct first_alloc *r = arg;
    unsigned long c0 = malloc_calls;
    void **p = GC_malloc(32);
    r->calls = malloc_calls - c0;
    r->ok = p && lfgc_is_live(p);
    if (p)
        p[0] = p;
    c0 = malloc_calls;
    free(malloc(8));
    r->probe = malloc_calls - c0;
    return NULL;
}

/* Plain pthread_create: the thread registers itself on its first
 * allocation, reading its stack bounds and setting its exit hook. */
Test(bare, first_allocation_of_a_thread_calls_no_malloc)
{
    GC_INIT();
    for (int i = 0; i < 3; i++) {
        struct first_alloc r = {0, 0, false};
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, first_alloc_thread, &r), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_assert(r.ok, "GC_malloc failed in a new thread");
        cr_assert_eq(r.probe, 2, "the counting wrappers are not in use (%lu)", r.probe);
        cr_assert_eq(r.calls, 0,
                     "a new thread's first GC_malloc called the malloc family %lu times",
                     r.calls);
    }
    /* Threads that registered so and exited are gone from the registry:
     * a collection does not signal them. */
    GC_gcollect();
}
