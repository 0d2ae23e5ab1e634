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

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static __thread unsigned long malloc_calls __attribute__((tls_model("initial-exec")));
/* Set: malloc, calloc and realloc call back into lfgc first, as an
 * interposer built on it does. */
static __thread bool call_back __attribute__((tls_model("initial-exec")));
static __thread void *called_back __attribute__((tls_model("initial-exec")));

void *malloc(size_t n)
{
    malloc_calls++;
    if (call_back)
        called_back = GC_malloc_uncollectable(n);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    malloc_calls++;
    if (call_back)
        called_back = GC_malloc_uncollectable(n * size);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    malloc_calls++;
    if (call_back)
        called_back = GC_malloc_uncollectable(n);
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
    void *volatile m = malloc(8);
    free(m);
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
        /* A sanitizer's runtime (UBSan's in CI) interposes malloc before
         * the program does: nothing to count with then. */
        if (r.probe == 0)
            TU_SKIP("the counting wrappers are not the process's malloc (a sanitizer "
                    "runtime takes its place)");
        cr_assert_eq(r.probe, 2, "the counting wrappers are not in use (%lu)", r.probe);
        cr_assert_eq(r.calls, 0,
                     "a new thread's first GC_malloc called the malloc family %lu times",
                     r.calls);
    }
    /* Threads that registered so and exited are gone from the registry:
     * a collection does not signal them. */
    GC_gcollect();
}

static void *call_back_thread(void *arg)
{
    (void)arg;
    call_back = true;
    void **p = GC_malloc(32);
    void *q = malloc(8);            /* calls back, registered now */
    call_back = false;
    bool ok = p && lfgc_is_live(p) && q && called_back && lfgc_is_live(called_back);
    free(q);
    GC_free(called_back);
    return ok ? p : NULL;
}

/* A thread whose malloc calls lfgc registers once, without recursing. */
Test(bare, malloc_calling_back_during_registration, .timeout = 20)
{
    GC_INIT();
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        void *r = NULL;
        cr_assert_eq(pthread_create(&t, NULL, call_back_thread, NULL), 0);
        cr_assert_eq(pthread_join(t, &r), 0);
        cr_assert_not_null(r, "allocation failed in a thread whose malloc calls back");
    }
    GC_gcollect();
}

static bool handler_installed(int sig)
{
    struct sigaction old;
    if (sigaction(sig, NULL, &old) != 0)
        return false;
    return (old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != NULL
                                       : old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN;
}

/* Exit codes of the child: 0 all well, else the first check that failed. */
static int collection_off_child(void)
{
    setenv("GC_MARKERS", "2", 1);       /* one marker thread when on */
    if (handler_installed(SIGPWR) || handler_installed(SIGXCPU) || tu_count_tasks() != 1)
        return 10;                      /* the test itself is wrong */
    void *p = GC_malloc_atomic_uncollectable(100);
    void *q = GC_malloc_uncollectable(5000);
    if (!p || !q)
        return 11;
    /* The heap exists: its objects' sizes are fixed. */
    int interior = GC_get_all_interior_pointers();
    GC_set_all_interior_pointers(!interior);      /* warns, ignored */
    if (GC_get_all_interior_pointers() != interior)
        return 18;
    memset(p, 1, 100);
    GC_free(p);
    GC_free(q);
    if (handler_installed(SIGPWR))
        return 12;
    if (handler_installed(SIGXCPU))
        return 13;
    if (tu_count_tasks() != 1)
        return 14;
    GC_INIT();
    if (!handler_installed(SIGPWR))
        return 15;
    if (!handler_installed(SIGXCPU))
        return 16;
    GC_gcollect();                      /* starts the marker thread */
    if (tu_count_tasks() < 2)
        return 17;
    return 0;
}

Test(bare, uncollectable_allocation_leaves_signals_and_threads_alone)
{
    tu_in_child(collection_off_child, 30, "collection off (the status is the failed check)");
}
