/* test_gcj.c: gcj-style allocation (gc_gcj.h).
 *
 * An object's first word points to its type record (vtable), whose second
 * word is the descriptor that says which words of the object hold
 * pointers: only those retain what they point to.  Lengths, bitmaps and
 * long bitmaps in the vtable; objects whose type is not set yet; free
 * slots (whose first word is a free-list link, never to be followed);
 * threads and minor collections.
 */
#define GC_THREADS 1
#include "test_util.h"
#include "gc_gcj.h"
#include "gc_mark.h"
#include "gc_typed.h"

#include <pthread.h>

TestSuite(gcj, .init = tu_warm_up);

#define TARGET 48
#define BM_WORD(i) ((GC_word)1 << (63 - (i)))

/* A vtable as gcj lays one out: a class pointer, then the descriptor. */
struct vtable {
    void *klass;
    GC_word descr;
};

static struct vtable vt_len, vt_bits, vt_long;
static void *volatile root;

static void init_vtables(void)
{
    GC_init_gcj_malloc(0, NULL);
    vt_len.descr = 3 * 8 | GC_DS_LENGTH;                          /* words 0..2 */
    vt_bits.descr = BM_WORD(0) | BM_WORD(2) | BM_WORD(5) | GC_DS_BITMAP;
    GC_word bm[2] = {0};
    GC_set_bit(bm, 0);
    GC_set_bit(bm, 64);
    GC_set_bit(bm, 100);
    vt_long.descr = GC_make_descriptor(bm, 101);
    cr_assert_eq(vt_long.descr & GC_DS_TAGS, GC_DS_PROC);
}

/* Store fresh targets (seeds 1000 + word) at the given words of the
 * rooted object, hidden into h[]. */
static TU_NOINLINE void store_targets(size_t n, const size_t *words, GC_hidden_pointer *h)
{
    GC_disable();
    void **o = root;
    for (size_t i = 0; i < n; i++) {
        void *t = GC_malloc(TARGET);
        cr_assert_not_null(t);
        tu_fill_bytes(t, TARGET, 1000 + words[i]);
        o[words[i]] = t;
        h[i] = tu_hide(t);
    }
    GC_enable();
}

static void check_targets(size_t n, const size_t *words, const GC_hidden_pointer *h,
                          const bool *kept, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(tu_live(h[i]), kept[i], "%s: target at word %zu live %d, expected %d",
                     what, words[i], tu_live(h[i]), kept[i]);
        if (kept[i])
            cr_assert_eq(tu_check_bytes(GC_REVEAL_POINTER(h[i]), TARGET, 1000 + words[i]),
                         TARGET, "%s: target at word %zu damaged", what, words[i]);
    }
}

static TU_NOINLINE void root_gcj(size_t bytes, struct vtable *vt)
{
    void **p = GC_gcj_malloc(bytes, vt);
    cr_assert_not_null(p);
    cr_assert_eq(p[0], (void *)vt);
    cr_assert_eq(tu_first_nonzero(p + 1, bytes - 8), bytes - 8, "gcj object not cleared");
    root = p;
}

static void gcj_keeps(size_t bytes, struct vtable *vt, size_t n, const size_t *words,
                      const bool *kept, const char *what)
{
    root_gcj(bytes, vt);
    GC_hidden_pointer h[16];
    store_targets(n, words, h);
    tu_collect();
    tu_collect();
    check_targets(n, words, h, kept, what);
    root = NULL;
}

Test(gcj, length_descriptor_in_the_vtable)
{
    init_vtables();
    size_t w[] = {1, 2, 3, 5};
    bool kept[] = {true, true, false, false};
    gcj_keeps(48, &vt_len, 4, w, kept, "length");
}

Test(gcj, bitmap_descriptor_in_the_vtable)
{
    init_vtables();
    size_t w[] = {1, 2, 3, 4, 5};
    bool kept[] = {false, true, false, false, true};
    gcj_keeps(48, &vt_bits, 5, w, kept, "bitmap");
}

Test(gcj, long_bitmap_descriptor_in_the_vtable)
{
    init_vtables();
    size_t w[] = {1, 63, 64, 65, 99, 100};
    bool kept[] = {false, false, true, false, false, true};
    gcj_keeps(101 * 8, &vt_long, 6, w, kept, "long bitmap");
}

Test(gcj, large_objects)
{
    init_vtables();
    size_t w[] = {2, 3, 5, 8000};
    bool kept[] = {true, false, true, false};
    gcj_keeps(100 * KiB, &vt_bits, 4, w, kept, "large, bitmap");
}

Test(gcj, objects_of_different_types)
{
    init_vtables();
    size_t w[] = {1, 2, 3};
    bool len_kept[] = {true, true, false}, bits_kept[] = {false, true, false};
    gcj_keeps(64, &vt_len, 3, w, len_kept, "length type");
    gcj_keeps(64, &vt_bits, 3, w, bits_kept, "bitmap type");
}

Test(gcj, no_type_yet_scans_nothing)
{
    init_vtables();
    root_gcj(48, &vt_len);
    ((void **)root)[0] = NULL;
    size_t w[] = {1, 2};
    bool kept[] = {false, false};
    GC_hidden_pointer h[2];
    store_targets(2, w, h);
    tu_collect();
    check_targets(2, w, h, kept, "first word 0");
    root = NULL;
}

Test(gcj, debug_and_ignore_off_page_forms)
{
    init_vtables();
    void **p = GC_debug_gcj_malloc(40, &vt_len, __FILE__, __LINE__);
    void **q = GC_gcj_malloc_ignore_off_page(40, &vt_bits);
    void **r = GC_GCJ_MALLOC(40, &vt_bits);
    cr_assert(p && q && r);
    cr_assert(p[0] == &vt_len && q[0] == &vt_bits && r[0] == &vt_bits);
    cr_assert_eq(GC_gcj_debug_kind, GC_gcj_kind);
    cr_assert_geq(GC_gcj_kind, 4, "a kind of its own");
}

/* A mark procedure as gcj's: the type record's descriptor names it, with
 * an argument; it marks word 2 of the object only (and records what it
 * was given). */
static GC_word proc_env_seen;
static volatile unsigned proc_calls;

static struct GC_ms_entry *word2_proc(GC_word *addr, struct GC_ms_entry *msp,
                                      struct GC_ms_entry *lim, GC_word env)
{
    __atomic_store_n(&proc_env_seen, env, __ATOMIC_RELAXED);
    __atomic_fetch_add(&proc_calls, 1, __ATOMIC_RELAXED);
    return GC_MARK_AND_PUSH((void *)addr[2], msp, lim, (void **)&addr[2]);
}

static struct vtable vt_proc;

Test(gcj, mark_procedure_in_the_vtable)
{
    GC_init_gcj_malloc(GC_GCJ_RESERVED_MARK_PROC_INDEX, (void *)word2_proc);
    vt_proc.descr = GC_MAKE_PROC(GC_GCJ_RESERVED_MARK_PROC_INDEX, 5);
    size_t w[] = {1, 2, 3};
    bool kept[] = {false, true, false};
    gcj_keeps(48, &vt_proc, 3, w, kept, "mark procedure");
    cr_assert_gt(proc_calls, 0, "the procedure was never called");
    cr_assert_eq(proc_env_seen, 5, "the procedure got env %lu", (unsigned long)proc_env_seen);
}

Test(gcj, ignore_gcj_info_scans_conservatively)
{
    setenv("GC_IGNORE_GCJ_INFO", "1", 1);
    init_vtables();
    size_t w[] = {3, 5};
    bool kept[] = {true, true};
    gcj_keeps(48, &vt_len, 2, w, kept, "GC_IGNORE_GCJ_INFO");
}

Test(gcj, bad_index_aborts, .signal = SIGABRT)
{
    GC_init_gcj_malloc(64, NULL);
}

/* A free slot's first word is its free-list link: the marker must not
 * take it for a vtable.  The slot is freed by a thread that then leaves,
 * so that it lies on a global free list at the collection. */
struct freer {
    GC_hidden_pointer slot, target;
};

static void *alloc_store_free(void *arg)
{
    struct freer *f = arg;
    GC_disable();
    void **h = GC_gcj_malloc(48, &vt_len);
    void *t = GC_malloc(TARGET);
    h[1] = t;
    f->slot = tu_hide(h);
    f->target = tu_hide(t);
    root = h;                               /* the stale pointer */
    GC_free(h);
    GC_enable();
    return NULL;
}

Test(gcj, free_slot_is_not_read)
{
    init_vtables();
    /* Several, so that some link points to another slot, and one ends a
     * list (its link is NULL, tagged). */
    for (int i = 0; i < 4; i++) {
        struct freer f;
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, alloc_store_free, &f), 0);
        pthread_join(t, NULL);
        tu_collect();
        cr_assert_not(tu_live(f.target), "a free slot's old contents were scanned");
    }
    root = NULL;
}

/* ------------------------------------------------------------------ */
/* Lists on threads, minor collections                                 */

/* A node: vtable, next, a decoy word (an address that must not retain),
 * data. */
struct node {
    struct vtable *vt;
    struct node *next;
    uintptr_t decoy;
    char *data;
    uint64_t sum;
};
static struct vtable vt_node = {NULL, BM_WORD(1) | BM_WORD(3) | GC_DS_BITMAP};
#define DATA 32

static uint64_t data_sum(const char *d)
{
    uint64_t s = 0;
    for (int i = 0; i < DATA; i++)
        s = s * 31 + (unsigned char)d[i];
    return s;
}

static __thread size_t decoy_bytes = TARGET;

static TU_NOINLINE struct node *make_list(size_t n, uint64_t seed, GC_hidden_pointer *decoys)
{
    struct node *head = NULL;
    for (size_t i = 0; i < n; i++) {
        struct node *x = GC_GCJ_MALLOC(sizeof *x, &vt_node);
        cr_assert_not_null(x);
        x->data = GC_malloc_atomic(DATA);
        cr_assert_not_null(x->data);
        tu_fill_bytes(x->data, DATA, seed + i);
        x->sum = data_sum(x->data);
        char *decoy = GC_malloc(decoy_bytes);
        cr_assert_not_null(decoy);
        x->decoy = (uintptr_t)decoy;
        if (i < 64)
            decoys[i] = tu_hide(decoy);
        x->next = head;
        head = x;
    }
    return head;
}

static TU_NOINLINE size_t list_intact(const struct node *x)
{
    size_t n = 0;
    for (; x; x = x->next, n++)
        if (x->vt != &vt_node || data_sum(x->data) != x->sum || !lfgc_is_live(x->data))
            return (size_t)-1;
    return n;
}

static TU_NOINLINE unsigned decoys_live(const GC_hidden_pointer *d, unsigned n)
{
    unsigned live = 0;
    for (unsigned i = 0; i < n; i++)
        live += (unsigned)tu_live(d[i]);
    return live;
}

#define THREADS 4
struct worker {
    unsigned id;
    size_t bad;
    unsigned decoys;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    GC_hidden_pointer decoys[64];
    /* Decoys of a size of their own per thread: a slot freed by a
     * collection and taken by another thread's decoy would look live. */
    decoy_bytes = 100 + 200 * w->id;
    for (int round = 0; round < 5; round++) {
        struct node *volatile head = make_list(4000, w->id * 100000 + round, decoys);
        tu_clear_stack();
        GC_gcollect();
        if (list_intact(head) != 4000)
            w->bad++;
        w->decoys += decoys_live(decoys, 64);
        head = NULL;
    }
    return NULL;
}

Test(gcj, lists_on_threads)
{
    GC_init_gcj_malloc(0, NULL);
    struct worker w[THREADS];
    pthread_t t[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        w[i] = (struct worker){i, 0, 0};
        cr_assert_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    unsigned decoys = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(w[i].bad, 0, "thread %u: a list was damaged", i);
        decoys += w[i].decoys;
    }
    /* A collection may run while a thread is half-way through a node: a
     * few of 1280. */
    cr_assert_leq(decoys, 16, "%u decoys of live lists retained", decoys);
}

static void minor_rescan(struct vtable *vt, const bool *kept)
{
    root_gcj(64, vt);
    tu_collect();
    if (!tu_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    /* Past the slots the thread's cache held at the last collection,
     * which that collection marked (they count as allocated). */
    for (int i = 0; i < 2000; i++)
        cr_assert_not_null(GC_malloc(TARGET));
    size_t w[] = {1, 2, 5, 6};
    GC_hidden_pointer h[4];
    store_targets(4, w, h);
    cr_assert(tu_collect_minor(), "expected a minor collection");
    check_targets(4, w, h, kept, "after a minor collection");
    root = NULL;
}

Test(gcj, minor_collection_rescans_old_objects_precisely)
{
    init_vtables();
    bool kept[] = {false, true, true, false};
    minor_rescan(&vt_bits, kept);
}

Test(gcj, minor_collection_calls_the_mark_procedure)
{
    GC_init_gcj_malloc(GC_GCJ_RESERVED_MARK_PROC_INDEX, (void *)word2_proc);
    vt_proc.descr = GC_MAKE_PROC(GC_GCJ_RESERVED_MARK_PROC_INDEX, 5);
    bool kept[] = {false, true, false, false};
    minor_rescan(&vt_proc, kept);
}
