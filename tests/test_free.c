/* test_free.c: GC_free onto the calling thread's lists, and frees of
 * objects other threads allocated, while collections run. */
#include "test_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

TestSuite(free, .init = tu_warm_up);

/* A freed object goes to the thread's own list, without the lock: the
 * next allocation of its class is that slot, zeroed. */
Test(free, freed_slot_is_the_next_allocation)
{
    for (size_t size = 8; size <= 12000; size = size * 3 / 2 + 8) {
        char *p = GC_malloc(size);
        cr_assert_not_null(p);
        GC_hidden_pointer hp = tu_hide(p);
        memset(p, 0xee, size);
        GC_free(p);
        p = GC_malloc(size);
        cr_assert(tu_slot_is((void *volatile *)&p, hp, 0), "size %zu: slot not reused", size);
        cr_assert_eq(tu_first_nonzero(p, size), size, "size %zu: not zeroed", size);
        GC_free(p);
    }
}

/* Threads allocate objects, put them in shared boxes, and free what they
 * take out of the boxes: mostly objects another thread allocated, in the
 * same classes and kinds, while collections run.  Every object carries
 * its own checksum. */
#define WORKERS 4
#define BOXES 512
#define ROUNDS 60000
static _Atomic(uint64_t *) boxes[BOXES];
static atomic_ulong freed_ok;

static uint64_t sum_of(const uint64_t *p, size_t words)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 1; i < words; i++)
        s = (s ^ p[i]) * 0x100000001b3ull;
    return s;
}

static size_t words_of(uint64_t tag)
{
    return 2 + tag % 11;            /* 16..96 bytes: a few classes */
}

static void check(const uint64_t *p)
{
    size_t words = words_of(p[1]);
    cr_assert_eq(p[0], sum_of(p, words), "object %p damaged", (void *)p);
}

static void *worker(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 7919 + 1;
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t tag = tu_rand(&seed);
        size_t words = words_of(tag);
        bool atomic = tag & 0x100;
        uint64_t *p = atomic ? GC_malloc_atomic(words * 8) : GC_malloc(words * 8);
        cr_assert_not_null(p);
        p[1] = tag;
        for (size_t j = 2; j < words; j++)
            p[j] = tag * (j + 1);
        p[0] = sum_of(p, words);
        uint64_t *old = atomic_exchange(&boxes[tu_rand(&seed) % BOXES], p);
        if (old) {
            check(old);
            GC_free(old);
            atomic_fetch_add(&freed_ok, 1);
        }
        if (i % 20000 == 19999)
            GC_gcollect();
    }
    return NULL;
}

Test(free, cross_thread_frees_during_collections)
{
    pthread_t t[WORKERS];
    size_t heap0 = GC_get_heap_size();
    for (uintptr_t i = 0; i < WORKERS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    for (int b = 0; b < BOXES; b++) {
        uint64_t *p = atomic_load(&boxes[b]);
        if (p)
            check(p);
    }
    cr_assert_gt(atomic_load(&freed_ok), (unsigned long)WORKERS * ROUNDS / 2);
    cr_assert_gt(GC_get_gc_no(), 0);
    /* WORKERS * ROUNDS objects of 16..96 bytes (about 14 MiB) went
     * through a few hundred live ones. */
    size_t heap = GC_get_heap_size();
    cr_assert_lt(heap - heap0, 8 * MiB, "heap grew by %zu bytes", heap - heap0);
}

/* One thread allocates, another frees everything it is given: the
 * freeing thread's slots must come back to the allocating one, or the
 * heap grows with every object. */
#define RING 256
#define PRODUCED 1000000
static _Atomic(void *) ring[RING];

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < PRODUCED; i++) {
        uint64_t *p = GC_malloc(48);
        cr_assert_not_null(p);
        p[0] = (uint64_t)i;
        p[4] = ~(uint64_t)i;
        void *expected = NULL;
        while (!atomic_compare_exchange_weak(&ring[i % RING], &expected, p)) {
            expected = NULL;
            sched_yield();
        }
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (int i = 0; i < PRODUCED; i++) {
        uint64_t *p;
        while (!(p = atomic_exchange(&ring[i % RING], NULL)))
            sched_yield();
        cr_assert(p[0] == (uint64_t)i && p[4] == ~(uint64_t)i, "object %d damaged", i);
        GC_free(p);
    }
    return NULL;
}

Test(free, producer_consumer_heap_bounded)
{
    size_t heap0 = GC_get_heap_size();
    pthread_t a, b;
    cr_assert_eq(pthread_create(&b, NULL, consumer, NULL), 0);
    cr_assert_eq(pthread_create(&a, NULL, producer, NULL), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    size_t heap = GC_get_heap_size();
    /* 1,000,000 objects in 64-byte slots: 64 MB went through 256 live. */
    cr_assert_lt(heap - heap0, 8 * MiB, "heap grew by %zu bytes", heap - heap0);
}

/* Freeing an object that is already free, or was never allocated, is
 * still caught on the thread-local path. */
Test(free, double_free_caught_without_the_lock)
{
    GC_set_warn_proc(tu_warn_proc);
    tu_warn_reset();
    char *p = GC_malloc(40);
    GC_free(p);
    GC_free(p);
    cr_assert_eq(tu_warn_count, 1);
    cr_assert(strstr(tu_warnings[0].msg, "already freed"), "%s", tu_warnings[0].msg);
    /* The list is intact: two allocations, two different slots. */
    char *q = GC_malloc(40), *r = GC_malloc(40);
    cr_assert_neq(q, r);
}
