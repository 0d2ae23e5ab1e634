/* test_kinds.c: kinds made at run time (GC_new_kind), how their objects
 * are scanned, and GC_generic_malloc. */
#include "test_util.h"
#include "gc_mark.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>

TestSuite(kinds, .init = tu_warm_up);

/* The holder under test, rooted here. */
static void *volatile root;

#define TARGET 64

/* A holder of `size` bytes of kind k, rooted, with a fresh object at word
 * 0 and another at byte offset `second`; both returned hidden. */
static TU_NOINLINE void make_holder(int k, size_t size, size_t second, GC_hidden_pointer *ha,
                                    GC_hidden_pointer *hb)
{
    GC_disable();
    void **h = GC_generic_malloc(size, k);
    cr_assert_not_null(h);
    void *a = GC_malloc(TARGET), *b = GC_malloc(TARGET);
    cr_assert(a && b);
    tu_fill_bytes(a, TARGET, 1);
    tu_fill_bytes(b, TARGET, 2);
    h[0] = a;
    h[second / sizeof(void *)] = b;
    *ha = tu_hide(a);
    *hb = tu_hide(b);
    root = h;
    GC_enable();
}

static TU_NOINLINE size_t target_damage(GC_hidden_pointer h, uint64_t seed)
{
    return tu_check_bytes(GC_REVEAL_POINTER(h), TARGET, seed);
}

/* Which of the two targets the holder kept. */
static void holder_keeps(int k, size_t size, size_t second, bool first, bool other)
{
    GC_hidden_pointer ha, hb;
    make_holder(k, size, second, &ha, &hb);
    tu_collect();
    tu_collect();
    cr_assert_eq(tu_live(ha), first, "word 0's object: live %d, expected %d", tu_live(ha), first);
    if (first)
        cr_assert_eq(target_damage(ha, 1), TARGET, "word 0's object damaged");
    cr_assert_eq(tu_live(hb), other, "object at %zu: live %d, expected %d", second,
                 tu_live(hb), other);
    if (other)
        cr_assert_eq(target_damage(hb, 2), TARGET, "second object damaged");
    root = NULL;
}

Test(kinds, length_descriptor_scans_only_its_prefix)
{
    int k = (int)GC_new_kind(GC_new_free_list(), 8 | GC_DS_LENGTH, 0, 1);
    cr_assert_geq(k, 4, "kind %d: the first four are predefined", k);
    holder_keeps(k, 32, 8, true, false);
    /* The same holder of GC_malloc's kind keeps both: the test can fail. */
    holder_keeps(GC_I_NORMAL, 32, 8, true, true);
}

Test(kinds, length_descriptor_on_a_large_object)
{
    int k = (int)GC_new_kind(GC_new_free_list(), (64 * KiB) | GC_DS_LENGTH, 0, 1);
    holder_keeps(k, 256 * KiB, 128 * KiB, true, false);
    holder_keeps(k, 256 * KiB, 64 * KiB - 8, true, true);
}

Test(kinds, length_longer_than_the_object_scans_the_object)
{
    int k = (int)GC_new_kind(GC_new_free_list(), MiB | GC_DS_LENGTH, 0, 1);
    holder_keeps(k, 32, 24, true, true);
}

Test(kinds, pointer_free_and_conservative_kinds)
{
    int none = (int)GC_new_kind(GC_new_free_list(), 0 | GC_DS_LENGTH, 0, 1);
    int all = (int)GC_new_kind(GC_new_free_list(), 0 | GC_DS_LENGTH, 1, 1);
    cr_assert_neq(none, all);
    holder_keeps(none, 48, 40, false, false);
    holder_keeps(all, 48, 40, true, true);
    holder_keeps(GC_I_PTRFREE, 48, 40, false, false);
}

Test(kinds, cleared_kind_gives_zeroed_objects)
{
    int k = (int)GC_new_kind(GC_new_free_list(), 16 | GC_DS_LENGTH, 0, 1);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2000; i++) {
            char *p = GC_generic_malloc(200, k);
            cr_assert_not_null(p);
            cr_assert_eq(tu_first_nonzero(p, 200), 200, "object not zeroed");
            memset(p, 0xab, 200);
            if (i & 1)
                GC_free(p);
        }
        tu_collect();
    }
}

/* A free slot of a kind that is not cleared still holds what the object
 * held; a stale pointer that reaches it must not make the collector scan
 * it.  The slot is freed by a thread that then leaves, so that it lies on
 * a global free list (unmarked at the collection) rather than in a cache
 * (whose slots are marked and so never scanned). */
struct freer {
    int kind;
    GC_hidden_pointer slot, target;
};

static void *alloc_store_free(void *arg)
{
    struct freer *f = arg;
    GC_disable();
    void **h = GC_generic_malloc(32, f->kind);
    void *t = GC_malloc(TARGET);
    tu_fill_bytes(t, TARGET, 3);
    h[2] = t;
    f->slot = tu_hide(h);
    f->target = tu_hide(t);
    root = h;                       /* the stale pointer */
    GC_free(h);
    GC_enable();
    return NULL;
}

Test(kinds, free_slot_of_uncleared_kind_retains_nothing)
{
    struct freer f = {(int)GC_new_kind(GC_new_free_list(), 0, 1, 0), 0, 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, alloc_store_free, &f), 0);
    pthread_join(t, NULL);
    cr_assert(tu_slot_is(&root, f.slot, 0));
    tu_collect();
    tu_collect();
    cr_assert_not(tu_live(f.target), "a free slot's old contents were scanned");
    root = NULL;
}

/* Kinds are made from several threads at once: each gets its own. */
#define MAKERS 4
#define PER_MAKER 12
static unsigned made[MAKERS][PER_MAKER];

static void *make_kinds(void *arg)
{
    unsigned *out = arg;
    for (int i = 0; i < PER_MAKER; i++) {
        out[i] = GC_new_kind(GC_new_free_list(), (8u * (i + 1)) | GC_DS_LENGTH, 0, 1);
        /* Allocate of it at once: a thread-local list per kind. */
        for (int j = 0; j < 100; j++) {
            uint64_t *p = GC_generic_malloc(64, (int)out[i]);
            cr_assert_not_null(p);
            cr_assert_eq(p[7], 0);
            p[7] = out[i];
        }
    }
    return NULL;
}

Test(kinds, made_concurrently_all_distinct)
{
    pthread_t t[MAKERS];
    for (int i = 0; i < MAKERS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, make_kinds, made[i]), 0);
    for (int i = 0; i < MAKERS; i++)
        pthread_join(t[i], NULL);
    bool seen[256] = {false};
    for (int i = 0; i < MAKERS; i++)
        for (int j = 0; j < PER_MAKER; j++) {
            unsigned k = made[i][j];
            cr_assert(k >= 4 && k < 4 + MAKERS * PER_MAKER, "kind %u out of range", k);
            cr_assert_not(seen[k], "kind %u handed out twice", k);
            seen[k] = true;
        }
}

/* A kind's objects come from a thread-local list: a freed object is the
 * next one handed out. */
Test(kinds, new_kinds_have_thread_local_lists)
{
    int k = (int)GC_new_kind(GC_new_free_list(), 0, 1, 1);
    void *p = GC_generic_malloc(100, k);
    cr_assert_not_null(p);
    GC_hidden_pointer hp = tu_hide(p);
    memset(p, 0x5a, 100);
    GC_free(p);
    p = GC_generic_malloc(100, k);
    cr_assert(tu_slot_is((void *volatile *)&p, hp, 0), "freed slot not reused first");
    cr_assert_eq(tu_first_nonzero(p, 100), 100, "reused slot not zeroed");
}

Test(kinds, generic_malloc_of_predefined_kinds)
{
    for (int k = 0; k < 4; k++) {
        char *p = GC_generic_malloc(1000, k);
        cr_assert_not_null(p, "kind %d", k);
        cr_assert_geq(GC_size(p), 1000);
        GC_free(p);
    }
}

Test(kinds, generic_malloc_of_unknown_kind_warns)
{
    GC_set_warn_proc(tu_warn_proc);
    tu_warn_reset();
    cr_assert_null(GC_generic_malloc(16, 200));
    cr_assert_null(GC_generic_malloc(16, -1));
    cr_assert_null(GC_generic_malloc(16, 255));
    cr_assert_eq(tu_warn_count, 3);
    cr_assert(strstr(tu_warnings[0].msg, "no kind"), "%s", tu_warnings[0].msg);
}

/* The table holds 255 kinds (a chunk-map byte): 251 after the four
 * predefined ones, then GC_new_kind aborts, as bdwgc's does. */
Test(kinds, table_full_aborts, .signal = SIGABRT)
{
    for (unsigned i = 0; i < 251; i++)
        cr_assert_eq(GC_new_kind(GC_new_free_list(), 0, 1, 1), 4 + i);
    GC_new_kind(GC_new_free_list(), 0, 1, 1);
}

Test(kinds, bitmap_descriptor_not_supported_yet, .signal = SIGABRT)
{
    GC_new_kind(GC_new_free_list(), 0x100 | GC_DS_BITMAP, 0, 1);
}

Test(kinds, length_added_to_size_not_supported, .signal = SIGABRT)
{
    GC_new_kind(GC_new_free_list(), 16 | GC_DS_LENGTH, 1, 1);
}

/* Allocation and freeing of a kind's small objects take no lock: they go
 * on while another thread holds the allocation lock. */
struct lock_probe {
    int kind;
    sem_t ready, go, done;
};

static void *alloc_under_held_lock(void *arg)
{
    struct lock_probe *lp = arg;
    void *keep[8];
    GC_free(GC_generic_malloc(64, lp->kind));      /* the thread's list exists */
    sem_post(&lp->ready);
    sem_wait(&lp->go);
    for (int i = 0; i < 8; i++)
        keep[i] = GC_generic_malloc(64, lp->kind);
    for (int i = 0; i < 8; i++)
        GC_free(keep[i]);
    sem_post(&lp->done);
    return NULL;
}

static void *while_locked(void *arg)
{
    struct lock_probe *lp = arg;
    sem_post(&lp->go);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 3;
    return (void *)(uintptr_t)(sem_timedwait(&lp->done, &deadline) == 0);
}

static void no_lock_per_object(int kind)
{
    struct lock_probe lp = {.kind = kind};
    sem_init(&lp.ready, 0, 0);
    sem_init(&lp.go, 0, 0);
    sem_init(&lp.done, 0, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, alloc_under_held_lock, &lp), 0);
    sem_wait(&lp.ready);
    bool ok = GC_call_with_alloc_lock(while_locked, &lp) != NULL;
    pthread_join(t, NULL);
    cr_assert(ok, "kind %d: allocation or free waited for the lock", kind);
}

Test(kinds, no_lock_per_object_of_new_kind)
{
    no_lock_per_object((int)GC_new_kind(GC_new_free_list(), 16 | GC_DS_LENGTH, 0, 1));
}

Test(kinds, no_lock_per_object_of_predefined_kinds)
{
    no_lock_per_object(GC_I_NORMAL);
    no_lock_per_object(GC_I_PTRFREE);
}
