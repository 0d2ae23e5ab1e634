/* test_verify.c: the heap verifier, slot states and the heap walk.
 *
 * lfgc_verify_heap() must pass on a heap after varied workloads (kinds,
 * sizes, explicit frees, large objects, collections full and minor,
 * threads allocating while it runs) and must report a free slot written
 * after being freed: its canary, its link, a cycle.  lfgc_slot_state()
 * tells free, allocated, dead-awaiting-the-sweep and not-heap apart, also
 * in a span a thread is sweeping; lfgc_heap_walk() visits exactly the
 * allocated objects.  In builds configured with --enable-debug, the
 * assertions and the verifier run at each collection abort on a corrupt
 * free slot.
 */
#define GC_THREADS
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <pthread.h>
#include <signal.h>
#include <semaphore.h>
#include <stdatomic.h>

TestSuite(verify, .init = tu_warm_up);

/* Word 0 of a free slot: the link to the next one, with bit 63 set
 * (docs/design.md, "Free slots"). */
#define LINK_TAG (1ull << 63)

/* ------------------------------------------------------------------ */
/* A healthy heap passes                                               */

struct vnode {
    struct vnode *next;
    uint64_t value;
    char *blob;                 /* atomic, filled with a pattern */
    size_t blob_len;
};

static struct vnode *volatile v_list;   /* the live structure */
static void *volatile v_uncoll[64];

static uint64_t v_checksum(void)
{
    uint64_t sum = 0;
    for (struct vnode *n = v_list; n; n = n->next) {
        sum = sum * 31 + n->value;
        if (n->blob && tu_check_bytes(n->blob, n->blob_len, n->value) != n->blob_len)
            sum ^= 0xdeadbeef;      /* a corrupted blob changes the sum */
    }
    return sum;
}

/* Allocate `rounds` mixed objects: some join the live list, most are
 * garbage; explicit frees, reallocs, large and uncollectable objects
 * along the way. */
static TU_NOINLINE uint64_t v_workload(uint64_t seed, int rounds)
{
    uint64_t rng = seed;
    for (int i = 0; i < rounds; i++) {
        uint64_t r = tu_rand(&rng);
        size_t n = r % 32 == 0 ? 20000 + r % 200000 : 16 + r % 3000;
        if (r % 5 == 0) {
            struct vnode *v = GC_malloc(sizeof *v);
            cr_assert_not_null(v);
            v->value = r;
            v->blob_len = n;
            v->blob = GC_malloc_atomic(n);
            cr_assert_not_null(v->blob);
            tu_fill_bytes(v->blob, n, r);
            v->next = v_list;
            v_list = v;
        } else if (r % 7 == 0) {
            void *p = GC_malloc(n);
            cr_assert_not_null(p);
            if (r % 3 == 0) {
                p = GC_realloc(p, n / 2 + 1);
                cr_assert_not_null(p);
            }
            GC_free(p);
        } else if (r % 11 == 0) {
            unsigned j = (unsigned)(r >> 8) % 64;
            GC_free(v_uncoll[j]);
            v_uncoll[j] = (r & 1) ? GC_malloc_uncollectable(n) : GC_malloc_atomic_uncollectable(n);
            cr_assert_not_null(v_uncoll[j]);
        } else {
            void *p = (r & 1) ? GC_malloc(n) : GC_malloc_atomic(n);
            cr_assert_not_null(p);
        }
        /* The live list stays bounded: drop its tail now and then. */
        if (i % 500 == 499) {
            struct vnode *n2 = v_list;
            for (int d = 0; n2 && d < 40; d++)
                n2 = n2->next;
            if (n2)
                n2->next = NULL;
        }
    }
    return v_checksum();
}

/* n garbage objects of various sizes, recorded hidden.  No collection
 * may run meanwhile: it would reclaim them and hand their slots out
 * again. */
static TU_NOINLINE void v_garbage(GC_hidden_pointer *sample, size_t n)
{
    GC_disable();
    for (size_t i = 0; i < n; i++) {
        size_t len = i % 50 == 0 ? 30000 + i * 100 : 16 + i * 37 % 3000;
        void *p = i & 1 ? GC_malloc(len) : GC_malloc_atomic(len);
        cr_assert_not_null(p);
        sample[i] = tu_hide(p);
    }
    GC_enable();
}

static TU_NOINLINE size_t v_live_count(const GC_hidden_pointer *sample, size_t n)
{
    size_t live = 0;
    for (size_t i = 0; i < n; i++)
        live += tu_live(sample[i]) != 0;
    return live;
}

Test(verify, healthy_heap_after_workloads)
{
    enum { NSAMPLE = 300 };
    static GC_hidden_pointer sample[NSAMPLE];
    cr_assert_eq(lfgc_verify_heap(), 0, "the heap after the warm-up");
    uint64_t sum = v_workload(1, 3000);
    v_garbage(sample, NSAMPLE);
    /* Uncollected: spans being swept by this thread, explicit frees. */
    cr_assert_eq(lfgc_verify_heap(), 0, "the heap between collections");
    tu_collect();
    cr_assert_eq(lfgc_verify_heap(), 0, "the heap after a full collection");
    cr_assert_eq(v_checksum(), sum, "live data changed by the collection");
    cr_assert_eq(v_live_count(sample, NSAMPLE), 0, "garbage survived a full collection");

    sum = v_workload(2, 3000);
    cr_assert_eq(lfgc_verify_heap(), 0, "after more allocation, spans half swept");
    tu_clear_stack();
    lfgc_collect_minor();
    tu_clear_stack();
    cr_assert_eq(lfgc_verify_heap(), 0, "the heap after a minor (or full) collection");
    sum = v_workload(3, 2000);
    cr_assert_eq(lfgc_verify_heap(), 0);
    GC_gcollect_and_unmap();        /* pooled spans released */
    cr_assert_eq(lfgc_verify_heap(), 0, "the heap after GC_gcollect_and_unmap");
    cr_assert_eq(v_checksum(), sum, "live data changed");
    v_workload(4, 2000);   /* released spans reused */
    cr_assert_eq(lfgc_verify_heap(), 0);
}

/* Threads allocating (and exiting, their caches and half-swept spans
 * returned) while the main thread verifies. */
enum { VT_N = 3 };
static atomic_int vt_stop;
static atomic_int vt_done[VT_N];

struct vt_arg {
    int slot;
    uint64_t seed;
};

static void *vt_worker(void *arg)
{
    struct vt_arg *a = arg;
    uint64_t rng = a->seed;
    void *volatile keep[16] = { 0 };
    void *ret = NULL;
    while (!atomic_load(&vt_stop)) {
        for (int i = 0; i < 1000; i++) {
            uint64_t r = tu_rand(&rng);
            size_t n = 16 + r % 1200;
            void *p = (r & 1) ? GC_malloc(n) : GC_malloc_atomic(n);
            if (!p) {
                ret = (void *)1;
                break;
            }
            if (r % 13 == 0)
                GC_free(p);
            else
                keep[r % 16] = p;
        }
        if (ret || tu_rand(&rng) % 8 == 0)
            break;                  /* exit early: the main thread starts another */
    }
    (void)keep;
    atomic_store(&vt_done[a->slot], 1);
    return ret;
}

Test(verify, healthy_heap_with_threads, .timeout = 60)
{
    pthread_t t[VT_N];
    static struct vt_arg args[VT_N];
    uint64_t seed = 100;
    for (int i = 0; i < VT_N; i++) {
        args[i] = (struct vt_arg){ i, ++seed };
        cr_assert_eq(pthread_create(&t[i], NULL, vt_worker, &args[i]), 0);
    }
    int restarts = 0;
    for (int round = 0; round < 40; round++) {
        cr_assert_eq(lfgc_verify_heap(), 0, "round %d", round);
        if (round % 10 == 9)
            tu_collect();
        for (int i = 0; i < VT_N; i++) {
            if (!atomic_load(&vt_done[i]))
                continue;
            void *ret;
            cr_assert_eq(pthread_join(t[i], &ret), 0);
            cr_assert_null(ret, "a worker could not allocate");
            atomic_store(&vt_done[i], 0);
            args[i].seed = ++seed;
            cr_assert_eq(pthread_create(&t[i], NULL, vt_worker, &args[i]), 0);
            restarts++;
        }
        usleep(2000);
    }
    atomic_store(&vt_stop, 1);
    for (int i = 0; i < VT_N; i++) {
        void *ret;
        cr_assert_eq(pthread_join(t[i], &ret), 0);
        cr_assert_null(ret, "a worker could not allocate");
    }
    cr_log_info("%d threads exited and were replaced while verifying", restarts);
    cr_assert_eq(lfgc_verify_heap(), 0, "after the threads left");
    tu_collect();
    cr_assert_eq(lfgc_verify_heap(), 0);
}

/* ------------------------------------------------------------------ */
/* Corruption is detected                                              */

static void run_verify(void *arg)
{
    *(int *)arg = lfgc_verify_heap();
}

/* lfgc_verify_heap(), its report captured. */
static int verify_captured(char *out, size_t size)
{
    int problems = -1;
    tu_capture_stderr(run_verify, &problems, out, size);
    return problems;
}

Test(verify, detects_overwritten_canary)
{
    static char report[8192];
    uint64_t *a = GC_malloc(64);
    uint64_t *b = GC_malloc(64);
    cr_assert(a && b);
    GC_free(a);                     /* a is on the global free list */
    cr_assert_eq(lfgc_slot_state(a), LFGC_SLOT_FREE);
    cr_assert_eq(lfgc_verify_heap(), 0);
    uint64_t saved = a[1];
    a[1] = 0x1234;                  /* a write after the free */
    int n = verify_captured(report, sizeof report);
    cr_assert_geq(n, 1, "an overwritten canary went unnoticed");
    cr_assert_not_null(strstr(report, "canary"), "report: %s", report);
    char addr[32];
    snprintf(addr, sizeof addr, "%p", (void *)a);
    cr_assert_not_null(strstr(report, addr), "the report does not name %s: %s", addr, report);
    a[1] = saved;
    cr_assert_eq(lfgc_verify_heap(), 0, "repaired, the heap passes again");
    GC_free(b);
}

Test(verify, detects_corrupt_links)
{
    static char report[8192];
    uint64_t *a = GC_malloc(96);
    uint64_t *b = GC_malloc(96);
    cr_assert(a && b);
    GC_free(a);
    GC_free(b);                     /* the global list: b -> a */
    cr_assert_eq(lfgc_verify_heap(), 0);
    uint64_t saved = b[0];

    b[0] = LINK_TAG | 0x1000;       /* a link out of the heap */
    int n = verify_captured(report, sizeof report);
    cr_assert_geq(n, 1, "a link out of the heap went unnoticed");
    cr_assert_not_null(strstr(report, "no slot in use"), "report: %s", report);

    b[0] = LINK_TAG | (uint64_t)(uintptr_t)b;       /* b -> b: a cycle */
    n = verify_captured(report, sizeof report);
    cr_assert_geq(n, 1, "a cycle went unnoticed");
    cr_assert_not_null(strstr(report, "twice"), "report: %s", report);

    b[0] = (uint64_t)(uintptr_t)a;  /* untagged: a pointer stored after the free */
    n = verify_captured(report, sizeof report);
    cr_assert_geq(n, 1, "an untagged link went unnoticed");
    cr_assert_not_null(strstr(report, "untagged"), "report: %s", report);

    b[0] = saved;
    cr_assert_eq(lfgc_verify_heap(), 0, "repaired, the heap passes again");
}

/* A free slot on this thread's list, beside a fresh allocation of class
 * 2048 (the refill that made it swept a batch of eight slots of its
 * span). */
static TU_NOINLINE uint64_t *cached_free_slot(void)
{
    char *p = GC_malloc_atomic(2000);
    cr_assert_not_null(p);
    char *chunk = (char *)((uintptr_t)p & ~(uintptr_t)(TU_CHUNK - 1));
    for (char *s = lowfat_base(chunk + 2047); s < chunk + TU_CHUNK; s += 2048)
        if (lfgc_slot_state(s) == LFGC_SLOT_FREE)
            return (uint64_t *)s;
    return NULL;
}

Test(verify, detects_corruption_in_a_thread_cache)
{
    static char report[8192];
    uint64_t *s = cached_free_slot();
    cr_assert_not_null(s, "no free slot next to a fresh allocation");
    cr_assert_eq(lfgc_verify_heap(), 0);
    s[1] ^= 1;
    int n = verify_captured(report, sizeof report);
    cr_assert_geq(n, 1, "a corrupt slot on a thread's list went unnoticed");
    cr_assert_not_null(strstr(report, "thread cache"), "report: %s", report);
    s[1] ^= 1;
    cr_assert_eq(lfgc_verify_heap(), 0);
}

#ifdef LFGC_DEBUG
/* Debug builds: an allocation popping a corrupt free slot stops the
 * program (lf_assert in the pop), as does the verifier run at the end of
 * each collection. */
Test(verify, debug_pop_of_a_corrupt_slot_aborts, .signal = SIGABRT)
{
    uint64_t *a = GC_malloc_uncollectable(64);
    cr_assert_not_null(a);
    GC_free(a);                     /* the head of the uncollectable list */
    a[1] = 0x1234;
    GC_malloc_uncollectable(64);
    cr_assert_fail("the allocation took a corrupt free slot");
}

Test(verify, debug_collection_verifies_the_heap, .signal = SIGABRT)
{
    uint64_t *s = cached_free_slot();
    cr_assert_not_null(s);
    GC_gcollect();                  /* a sound heap passes */
    s[1] ^= 1;
    GC_gcollect();
    cr_assert_fail("the collection did not notice a corrupt free slot");
}
#endif

/* ------------------------------------------------------------------ */
/* Slot states                                                         */

static int v_static;

Test(verify, slot_states)
{
    int local = 0;
    void *m = malloc(64);
    cr_assert_eq(lfgc_slot_state(NULL), LFGC_SLOT_NOT_HEAP);
    cr_assert_eq(lfgc_slot_state(&local), LFGC_SLOT_NOT_HEAP);
    cr_assert_eq(lfgc_slot_state(&v_static), LFGC_SLOT_NOT_HEAP);
    cr_assert_eq(lfgc_slot_state(m), LFGC_SLOT_NOT_HEAP);
    free(m);
    /* Deep in the 16-byte region, far past anything allocated. */
    cr_assert_eq(lfgc_slot_state((char *)LOWFAT_HEAP_START + LOWFAT_REGION_SIZE / 2),
                 LFGC_SLOT_NOT_HEAP);

    char *p = GC_malloc(100);
    cr_assert_not_null(p);
    cr_assert_eq(lfgc_slot_state(p), LFGC_SLOT_ALLOCATED);
    cr_assert_eq(lfgc_slot_state(p + 50), LFGC_SLOT_ALLOCATED, "interior pointer");
    cr_assert(lfgc_is_live(p));
    GC_free(p);
    cr_assert_eq(lfgc_slot_state(p), LFGC_SLOT_FREE);
    cr_assert_eq(lfgc_slot_state(p + 50), LFGC_SLOT_FREE);
    cr_assert(!lfgc_is_live(p));

    char *a = GC_malloc_atomic(40);
    cr_assert_eq(lfgc_slot_state(a), LFGC_SLOT_ALLOCATED);

    char *u = GC_malloc_uncollectable(200);
    cr_assert_eq(lfgc_slot_state(u), LFGC_SLOT_ALLOCATED);
    GC_free(u);
    cr_assert_eq(lfgc_slot_state(u), LFGC_SLOT_FREE);
    cr_assert(!lfgc_is_live(u));

    char *big = GC_malloc(200000);
    cr_assert_not_null(big);
    cr_assert_eq(lfgc_slot_state(big + 199999), LFGC_SLOT_ALLOCATED);
    /* Past the object's pages, inside its 256 KiB slot: no object. */
    cr_assert_eq(lfgc_slot_state(big + GC_size(big)), LFGC_SLOT_NOT_HEAP);
    GC_free(big);
    cr_assert_eq(lfgc_slot_state(big), LFGC_SLOT_NOT_HEAP, "a freed large object's span is unused");
    cr_assert_eq(lfgc_verify_heap(), 0);
}

/* Dead objects await the lazy sweep; once a thread sweeps their span, it
 * turns them into free slots a batch at a time, the rest still dead. */
#define SD_N 3000
#define SD_SIZE 150                 /* class 160 */
static GC_hidden_pointer sd_obj[SD_N];
static void *volatile *sd_roots;    /* every other object */

/* Collections off meanwhile: one in the middle would reclaim the odd
 * objects built so far, and later ones would get their slots (a rooted
 * object at the address of a "dead" one). */
static TU_NOINLINE void sd_build(void)
{
    GC_disable();
    sd_roots = GC_malloc(SD_N / 2 * sizeof(void *));
    cr_assert_not_null(sd_roots);
    for (size_t i = 0; i < SD_N; i++) {
        uint64_t *p = GC_malloc(SD_SIZE);
        cr_assert_not_null(p);
        p[0] = tu_pattern(i, 0);
        sd_obj[i] = tu_hide(p);
        if (i % 2 == 0)
            sd_roots[i / 2] = p;
    }
    GC_enable();
}

static TU_NOINLINE int sd_state(size_t i)
{
    return lfgc_slot_state(GC_REVEAL_POINTER(sd_obj[i]));
}

static TU_NOINLINE int sd_intact(size_t i)
{
    uint64_t *p = GC_REVEAL_POINTER(sd_obj[i]);
    return p[0] == tu_pattern(i, 0);
}

Test(verify, dead_objects_then_swept)
{
    sd_build();
    tu_collect();
    for (size_t i = 0; i < SD_N; i++) {
        if (i % 2 == 0) {
            cr_assert_eq(sd_state(i), LFGC_SLOT_ALLOCATED, "rooted object %zu", i);
            cr_assert(sd_intact(i), "rooted object %zu changed", i);
        } else {
            cr_assert_eq(sd_state(i), LFGC_SLOT_DEAD, "unreachable object %zu", i);
            cr_assert(!tu_live(sd_obj[i]));
        }
    }
    cr_assert_eq(lfgc_verify_heap(), 0);

    /* New objects of the class: this thread claims the spans one by one
     * and sweeps them a batch at a time.  Allocate until some dead object
     * has been swept into a free slot. */
    static GC_hidden_pointer fresh[SD_N];
    size_t nfresh = 0, freed = 0, dead = 0;
    while (nfresh < SD_N) {
        fresh[nfresh++] = tu_hide(GC_malloc(SD_SIZE));
        freed = dead = 0;
        for (size_t i = 1; i < SD_N; i += 2) {
            int st = sd_state(i);
            freed += st == LFGC_SLOT_FREE;
            dead += st == LFGC_SLOT_DEAD;
        }
        if (freed)
            break;
    }
    cr_assert_gt(freed, 0, "no dead object was swept after %zu allocations", nfresh);
    cr_assert_gt(dead, 0, "the sweep went through all the dead objects at once");
    /* Dead objects in the span being swept, past the sweep, are not live
     * (nor are any others), unless a new object took their slot. */
    for (size_t i = 1; i < SD_N; i += 2) {
        int reused = 0;
        for (size_t j = 0; j < nfresh; j++)
            reused |= GC_REVEAL_POINTER(fresh[j]) == GC_REVEAL_POINTER(sd_obj[i]);
        if (reused)
            cr_assert_eq(sd_state(i), LFGC_SLOT_ALLOCATED);
        else
            cr_assert(!tu_live(sd_obj[i]), "dead object %zu (state %d) reported live", i,
                      sd_state(i));
    }
    for (size_t i = 0; i < SD_N; i += 2)
        cr_assert(sd_intact(i) && tu_live(sd_obj[i]), "rooted object %zu", i);
    cr_assert_eq(lfgc_verify_heap(), 0, "the heap with a span half swept");
}

/* ------------------------------------------------------------------ */
/* The heap walk                                                       */

#define HW_N 300
static void *hw_obj[HW_N];
static int hw_kind[HW_N];
static int hw_seen[HW_N];
static size_t hw_visits, hw_stray;
static GC_hidden_pointer hw_garbage[HW_N];

static int hw_visit(void *base, size_t bytes, int kind, void *arg)
{
    (void)arg;
    hw_visits++;
    if (lfgc_slot_state(base) != LFGC_SLOT_ALLOCATED || GC_base(base) != base ||
        GC_size(base) != bytes)
        hw_stray++;
    for (size_t i = 0; i < HW_N; i++)
        if (hw_obj[i] == base) {
            hw_seen[i]++;
            if (hw_kind[i] != kind)
                hw_stray++;
        }
    for (size_t i = 0; i < HW_N; i++)
        if (GC_REVEAL_POINTER(hw_garbage[i]) == base)
            hw_stray++;             /* garbage is not allocated */
    return 0;
}

static void hw_walk(void)
{
    memset(hw_seen, 0, sizeof hw_seen);
    hw_visits = hw_stray = 0;
    cr_assert_eq(lfgc_heap_walk(hw_visit, NULL), 0);
    cr_assert_eq(hw_stray, 0, "the walk visited objects that are not allocated, or "
                 "with a wrong size or kind");
}

static TU_NOINLINE void hw_make_garbage(void)
{
    for (size_t i = 0; i < HW_N; i++)
        hw_garbage[i] = tu_hide(GC_malloc(24 + i % 200));
}

static int hw_stop_calls;
static int hw_stop_at_third(void *base, size_t bytes, int kind, void *arg)
{
    (void)base, (void)bytes, (void)kind, (void)arg;
    return ++hw_stop_calls == 3 ? 42 : 0;
}

Test(verify, heap_walk_visits_allocated_objects)
{
    hw_make_garbage();
    for (size_t i = 0; i < HW_N; i++) {
        switch (i % 4) {
        case 0: hw_obj[i] = GC_malloc(16 + i * 7); hw_kind[i] = 1; break;
        case 1: hw_obj[i] = GC_malloc_atomic(16 + i * 13); hw_kind[i] = 0; break;
        case 2: hw_obj[i] = GC_malloc_uncollectable(32 + i); hw_kind[i] = 2; break;
        default: hw_obj[i] = GC_malloc_atomic(70000 + i * 100); hw_kind[i] = 0; break;
        }
        cr_assert_not_null(hw_obj[i]);
    }
    tu_collect();                   /* the garbage is dead, the objects rooted */
    hw_walk();
    for (size_t i = 0; i < HW_N; i++)
        cr_assert_eq(hw_seen[i], 1, "object %zu visited %d times", i, hw_seen[i]);
    size_t all = hw_visits;
    cr_assert_geq(all, HW_N);

    for (size_t i = 0; i < HW_N; i += 2) {
        GC_free(hw_obj[i]);
        hw_obj[i] = NULL;
    }
    hw_walk();
    for (size_t i = 1; i < HW_N; i += 2)
        cr_assert_eq(hw_seen[i], 1, "object %zu visited %d times", i, hw_seen[i]);
    cr_assert_eq(hw_visits, all - HW_N / 2, "freed objects were visited");

    hw_stop_calls = 0;
    cr_assert_eq(lfgc_heap_walk(hw_stop_at_third, NULL), 42);
    cr_assert_eq(hw_stop_calls, 3, "the walk went on after fn returned nonzero");
}

/* ------------------------------------------------------------------ */
/* A span a thread is sweeping is not left half swept                   */

/* Without the warm-up: class 1792 is fresh here.  A span of it has more
 * slots than a refill sweeps (8). */
TestSuite(verify_cursor);

static void *ex_first;

static void *ex_thread(void *arg)
{
    (void)arg;
    ex_first = GC_malloc_atomic(1700);      /* claims a span, sweeps a batch */
    return NULL;
}

/* A thread that exits returns the slots of the span it was sweeping. */
Test(verify_cursor, exiting_thread_returns_its_unswept_slots)
{
    GC_INIT();
    GC_disable();
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, ex_thread, NULL), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_not_null(ex_first);
    uintptr_t chunk = (uintptr_t)ex_first & ~(uintptr_t)(TU_CHUNK - 1);
    uintptr_t first = (uintptr_t)lowfat_base((void *)(chunk + 1791));
    size_t slots = 0;
    for (uintptr_t s = first; s < chunk + TU_CHUNK; s += 1792) {
        slots++;
        if ((void *)s != ex_first)
            cr_assert_eq(lfgc_slot_state((void *)s), LFGC_SLOT_FREE,
                         "slot %p of the exited thread's span is not free", (void *)s);
    }
    cr_assert_gt(slots, 8, "the span holds more than one batch");
    cr_assert_eq(lfgc_verify_heap(), 0);
    /* All of them are allocated again before any other span is taken. */
    for (size_t i = 0; i + 1 < slots; i++) {
        void *p = GC_malloc_atomic(1700);
        cr_assert_eq((uintptr_t)p & ~(uintptr_t)(TU_CHUNK - 1), chunk,
                     "allocation %zu of %zu went to another span", i, slots - 1);
    }
    GC_enable();
}

/* A refill while a heap walk holds the sweepers (as fork and
 * GC_stop_world_external do) goes on with the thread's span once the walk
 * is over, rather than claiming another and leaving the rest of this one
 * unswept until the next collection. */
static sem_t wk_holding;

static int wk_hold(void *base, size_t bytes, int kind, void *arg)
{
    (void)base, (void)bytes, (void)kind, (void)arg;
    sem_post(&wk_holding);
    usleep(300 * 1000);             /* the main thread's refill waits meanwhile */
    return 1;
}

static void *wk_thread(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)lfgc_heap_walk(wk_hold, NULL);
}

Test(verify_cursor, refill_during_a_walk_keeps_its_span)
{
    GC_INIT();
    GC_disable();
    /* The first allocation sweeps a batch of 8 slots into this thread's
     * list; 8 allocations empty it, the span still half unswept. */
    char *x = GC_malloc_atomic(1700);
    uintptr_t chunk = (uintptr_t)x & ~(uintptr_t)(TU_CHUNK - 1);
    for (int i = 1; i < 8; i++)
        cr_assert_eq((uintptr_t)GC_malloc_atomic(1700) & ~(uintptr_t)(TU_CHUNK - 1), chunk);
    cr_assert_eq(sem_init(&wk_holding, 0, 0), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wk_thread, NULL), 0);
    while (sem_wait(&wk_holding) != 0)
        ;
    char *y = GC_malloc_atomic(1700);
    void *ret;
    cr_assert_eq(pthread_join(t, &ret), 0);
    cr_assert_eq((intptr_t)ret, 1, "the walk did not stop when fn returned 1");
    cr_assert_eq((uintptr_t)y & ~(uintptr_t)(TU_CHUNK - 1), chunk,
                 "the refill took another span (%p) while %p's was half swept", (void *)y,
                 (void *)x);
    cr_assert_eq(lfgc_verify_heap(), 0);
    GC_enable();
}
