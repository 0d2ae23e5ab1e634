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
#include "test_precise.h"
#include "gc_gcj.h"
#include "gc_mark.h"
#include "gc_typed.h"

#include <pthread.h>
#include <sys/mman.h>

TestSuite(gcj, .init = tu_warm_up);

#define BM_WORD(i) ((GC_word)1 << (63 - (i)))

/* A vtable as gcj lays one out: a class pointer, then the descriptor. */
struct vtable {
    void *klass;
    GC_word descr;
};

static struct vtable vt_len, vt_bits, vt_long;

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

static TU_NOINLINE void root_gcj(size_t bytes, struct vtable *vt)
{
    void **p = GC_gcj_malloc(bytes, vt);
    cr_assert_not_null(p);
    cr_assert_eq(p[0], (void *)vt);
    cr_assert_eq(tu_first_nonzero(p + 1, bytes - 8), bytes - 8, "gcj object not cleared");
    tu_holder = p;
}

static void gcj_keeps(size_t bytes, struct vtable *vt, size_t n, const size_t *words,
                      const bool *kept, const char *what)
{
    root_gcj(bytes, vt);
    GC_hidden_pointer h[16];
    tu_store_targets(n, words, h);
    tu_collect();
    tu_collect();
    tu_check_targets(n, words, h, kept, what);
    tu_holder = NULL;
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
    ((void **)tu_holder)[0] = NULL;
    size_t w[] = {1, 2};
    bool kept[] = {false, false};
    GC_hidden_pointer h[2];
    tu_store_targets(2, w, h);
    tu_collect();
    tu_check_targets(2, w, h, kept, "first word 0");
    tu_holder = NULL;
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

static struct GC_ms_entry *no_proc(GC_word *addr, struct GC_ms_entry *msp,
                                   struct GC_ms_entry *lim, GC_word env)
{
    (void)addr, (void)lim, (void)env;
    return msp;
}

/* An index neither reserved nor handed out by GC_new_proc is refused, as
 * bdwgc refuses it: GC_new_proc would later hand it to another procedure,
 * which would replace gcj's (or gcj's it). */
Test(gcj, index_not_reserved_nor_handed_out_aborts, .signal = SIGABRT)
{
    GC_init_gcj_malloc(GC_MAX_MARK_PROCS - 1, (void *)word2_proc);
}

Test(gcj, next_free_index_aborts_and_is_not_shared, .signal = SIGABRT)
{
    GC_init_gcj_malloc(GC_RESERVED_MARK_PROCS, (void *)word2_proc);
    /* Reached only when the index was taken: it must not be handed out. */
    unsigned i = GC_new_proc(no_proc);
    cr_assert_neq(i, GC_RESERVED_MARK_PROCS, "gcj's procedure index was handed out again");
}

/* An index GC_new_proc returned may be given to gcj: objects whose type
 * names it call gcj's procedure, and later GC_new_proc calls hand out
 * other indices. */
Test(gcj, index_from_new_proc)
{
    unsigned idx = GC_new_proc(no_proc);
    GC_init_gcj_malloc((int)idx, (void *)word2_proc);
    for (int i = 0; i < 8; i++)
        cr_assert_neq(GC_new_proc(no_proc), idx, "gcj's procedure index was handed out again");
    vt_proc.descr = GC_MAKE_PROC(idx, 5);
    unsigned calls = proc_calls;
    size_t w[] = {1, 2, 3};
    bool kept[] = {false, true, false};
    gcj_keeps(48, &vt_proc, 3, w, kept, "mark procedure from GC_new_proc");
    cr_assert_gt(proc_calls, calls, "gcj's procedure was never called");
    cr_assert_eq(proc_env_seen, 5);
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
    void *t = GC_malloc(TU_TARGET);
    h[1] = t;
    f->slot = tu_hide(h);
    f->target = tu_hide(t);
    tu_holder = h;                          /* the stale pointer */
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
    tu_holder = NULL;
}

/* ------------------------------------------------------------------ */
/* Lists on threads, minor collections                                 */

/* Nodes whose header is their vtable; the descriptor names next and data. */
static struct vtable vt_node = {NULL, BM_WORD(1) | BM_WORD(3) | GC_DS_BITMAP};

static void *alloc_node(void *vt)
{
    return GC_GCJ_MALLOC(sizeof(struct tu_pnode), vt);
}

Test(gcj, lists_on_threads)
{
    GC_init_gcj_malloc(0, NULL);
    struct tu_plist pl = {alloc_node, &vt_node, &vt_node};
    tu_plist_threads(&pl, 4000);
}

static void minor_rescan(struct vtable *vt, const bool *kept)
{
    root_gcj(64, vt);
    size_t w[] = {1, 2, 5, 6};
    tu_minor_targets(4, w, kept);
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

/* A procedure that follows a reference kept outside the heap, in memory
 * lfgc neither scans nor write-protects (as a runtime's side tables):
 * word 1 of the object indexes side[], whose entries are encoded so that
 * no word there is a heap address.  A minor collection sees no write
 * there, yet the old object must give the young one it now reaches. */
static uintptr_t *side;
static volatile unsigned side_calls;

static struct GC_ms_entry *side_proc(GC_word *addr, struct GC_ms_entry *msp,
                                     struct GC_ms_entry *lim, GC_word env)
{
    (void)env;
    side_calls++;
    GC_word i = addr[1];
    if (i && side[i - 1])
        msp = GC_MARK_AND_PUSH((void *)(side[i - 1] ^ TU_SIDE_MASK), msp, lim, NULL);
    return msp;
}

static struct vtable vt_side;

Test(gcj, minor_collection_calls_a_procedure_reading_outside_the_object)
{
    side = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(side, MAP_FAILED);
    GC_init_gcj_malloc(GC_GCJ_RESERVED_MARK_PROC_INDEX, (void *)side_proc);
    vt_side.descr = GC_MAKE_PROC(GC_GCJ_RESERVED_MARK_PROC_INDEX, 0);
    /* Large: a span of its own, whose page nothing else writes. */
    root_gcj(100 * KiB, &vt_side);
    ((GC_word *)tu_holder)[1] = 1;           /* side[0] */
    tu_collect();
    if (!tu_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    cr_assert(tu_collect_minor());          /* the holder is old, its page protected */
    /* The old object is never written again: only the side table is. */
    GC_hidden_pointer h[4];
    for (int round = 0; round < 4; round++) {
        GC_disable();
        h[round] = tu_side_target(side, 0, 77 + (uint64_t)round);
        GC_enable();
        unsigned calls = side_calls;
        cr_assert(tu_collect_minor(), "round %d: expected a minor collection", round);
        cr_assert_gt(side_calls, calls, "round %d: the procedure was not called", round);
        cr_assert(tu_collect_minor(), "round %d: expected a minor collection", round);
        cr_assert(tu_live(h[round]),
                  "round %d: the young object the procedure reaches was freed", round);
        cr_assert_eq(tu_check_bytes(GC_REVEAL_POINTER(h[round]), TU_TARGET, 77 + (uint64_t)round),
                     TU_TARGET, "round %d: the young object was damaged", round);
    }
    tu_collect();
    for (int round = 0; round < 3; round++)
        cr_assert_not(tu_live(h[round]), "replaced object %d survived", round);
    GC_hidden_pointer last = h[3];
    /* Dropped from the side table, it is garbage. */
    cr_assert(tu_live(last));
    side[0] = 0;
    tu_collect();
    cr_assert_not(tu_live(last), "the object the side table no longer holds was kept");
    tu_holder = NULL;
}

/* ------------------------------------------------------------------ */
/* Finalization: what a finalizable object reaches, through its type   */

/* A procedure that follows an encoded reference (word 1: no word of the
 * object is the target's address) and the object's word 3. */
static struct GC_ms_entry *encoded_proc(GC_word *addr, struct GC_ms_entry *msp,
                                        struct GC_ms_entry *lim, GC_word env)
{
    (void)env;
    if (addr[1])
        msp = GC_MARK_AND_PUSH((void *)(addr[1] ^ TU_SIDE_MASK), msp, lim, NULL);
    return GC_MARK_AND_PUSH((void *)addr[3], msp, lim, (void **)&addr[3]);
}

static struct vtable vt_encoded;
static volatile int enc_finalized, enc_target_ok;

static TU_NOINLINE int target_intact(const void *t, uint64_t seed)
{
    return lfgc_is_live(t) && tu_check_bytes(t, TU_TARGET, seed) == TU_TARGET;
}

static void enc_fin(void *obj, void *cd)
{
    GC_word *o = obj;
    enc_finalized++;
    enc_target_ok = target_intact((void *)(o[1] ^ TU_SIDE_MASK), (uint64_t)(uintptr_t)cd);
}

/* An object whose procedure reaches a target, and, in word 3, the object
 * itself (or nothing). */
static TU_NOINLINE GC_hidden_pointer encoded_object(uint64_t seed, bool self, bool ignore_self)
{
    GC_disable();
    GC_word *o = GC_gcj_malloc(48, &vt_encoded);
    void *t = GC_malloc(TU_TARGET);
    cr_assert(o && t);
    tu_fill_bytes(t, TU_TARGET, seed);
    o[1] = (GC_word)t ^ TU_SIDE_MASK;
    o[3] = self ? (GC_word)o : 0;
    if (ignore_self)
        GC_register_finalizer_ignore_self(o, enc_fin, (void *)(uintptr_t)seed, NULL, NULL);
    else
        GC_register_finalizer(o, enc_fin, (void *)(uintptr_t)seed, NULL, NULL);
    GC_enable();
    return tu_hide(t);
}

static void finalized_with_target(bool self, bool ignore_self)
{
    GC_init_gcj_malloc(GC_GCJ_RESERVED_MARK_PROC_INDEX, (void *)encoded_proc);
    vt_encoded.descr = GC_MAKE_PROC(GC_GCJ_RESERVED_MARK_PROC_INDEX, 0);
    GC_hidden_pointer t = encoded_object(80, self, ignore_self);
    tu_collect();
    cr_assert_eq(enc_finalized, 1, "finalized %d times", enc_finalized);
    cr_assert(enc_target_ok, "what the procedure reaches was freed before the finalizer ran");
    tu_collect();
    tu_collect();
    cr_assert_not(tu_live(t), "the target outlived its finalized object");
}

Test(gcj, finalizer_keeps_what_the_procedure_reaches)
{
    finalized_with_target(false, false);
}

Test(gcj, finalizer_ignoring_self_keeps_what_the_procedure_reaches)
{
    finalized_with_target(false, true);
}

/* The procedure's pointer back to the object is its own: ignored. */
Test(gcj, finalizer_ignoring_self_through_the_procedure)
{
    finalized_with_target(true, true);
}
