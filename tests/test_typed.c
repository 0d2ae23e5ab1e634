/* test_typed.c: explicitly typed allocation (gc_typed.h).
 *
 * Only the words a descriptor names are scanned: a word it does not name
 * may hold the address of an object that nothing else references, and
 * that object is reclaimed; a word it names keeps its object, intact.
 * Short and long layouts, arrays, large objects, threads, minor
 * collections.
 */
#define GC_THREADS 1
#include "test_util.h"
#include "test_precise.h"
#include "gc_typed.h"
#include "gc_mark.h"

#include <pthread.h>

TestSuite(typed, .init = tu_warm_up);

/* A descriptor for a layout of `words` words whose pointer words are the
 * `n` indices given. */
static GC_descr descr_of(size_t words, size_t n, const size_t *ptr_words)
{
    GC_word bm[320] = {0};
    cr_assert_leq(words, 320 * GC_WORDSZ);
    for (size_t i = 0; i < n; i++)
        GC_set_bit(bm, ptr_words[i]);
    return GC_make_descriptor(bm, words);
}

static TU_NOINLINE void root_typed(size_t bytes, GC_descr d)
{
    tu_holder = GC_malloc_explicitly_typed(bytes, d);
    cr_assert_not_null(tu_holder);
    cr_assert_eq(tu_first_nonzero(tu_holder, bytes), bytes, "typed object not cleared");
}

/* An object of `words` words, pointers at ptr_words: targets at the
 * probe words are kept exactly when a pointer word holds them. */
static void typed_keeps_only_pointer_words(size_t words, size_t nptr, const size_t *ptr_words,
                                           size_t nprobe, const size_t *probe)
{
    GC_descr d = descr_of(words, nptr, ptr_words);
    root_typed(words * sizeof(GC_word), d);
    GC_hidden_pointer h[16];
    bool kept[16];
    cr_assert_leq(nprobe, 16);
    for (size_t i = 0; i < nprobe; i++) {
        kept[i] = false;
        for (size_t j = 0; j < nptr; j++)
            kept[i] |= probe[i] == ptr_words[j];
    }
    tu_store_targets(nprobe, probe, h);
    tu_collect();
    tu_collect();
    tu_check_targets(nprobe, probe, h, kept, "after two collections");
    tu_holder = NULL;
}

Test(typed, descriptor_forms)
{
    GC_word bm[4] = {0};
    cr_assert_eq(GC_make_descriptor(bm, 100), 0, "no pointers: 0");
    bm[0] = 0x7;                            /* words 0, 1, 2 */
    cr_assert_eq(GC_make_descriptor(bm, 10), 24 | GC_DS_LENGTH, "a prefix: a length");
    bm[0] = 0x5;                            /* words 0, 2 */
    cr_assert_eq(GC_make_descriptor(bm, 10),
                 ((GC_word)1 << 63) | ((GC_word)1 << 61) | GC_DS_BITMAP);
    cr_assert_eq(GC_make_descriptor(bm, 1), 8 | GC_DS_LENGTH, "bits past len ignored");
    bm[0] = 0;
    GC_set_bit(bm, 61);
    GC_set_bit(bm, 0);
    cr_assert_eq(GC_make_descriptor(bm, 62), ((GC_word)1 << 63) | 4 | GC_DS_BITMAP);
    GC_set_bit(bm, 62);
    cr_assert_eq(GC_make_descriptor(bm, 63) & GC_DS_TAGS, GC_DS_PROC,
                 "63 words: a long bitmap");
}

Test(typed, macros)
{
    struct s { void *a; long b; void *c; char d[20]; };
    cr_assert_eq(GC_WORD_LEN(struct s), 6);
    cr_assert_eq(GC_WORD_OFFSET(struct s, c), 2);
    cr_assert_eq(GC_BITMAP_SIZE(struct s), 1);
    GC_word bm[GC_BITMAP_SIZE(struct s)] = {0};
    GC_set_bit(bm, GC_WORD_OFFSET(struct s, c));
    cr_assert(GC_get_bit(bm, 2) && !GC_get_bit(bm, 1));
    cr_assert_eq(GC_MALLOC_EXPLICITLY_TYPED(sizeof(struct s), 0) != NULL, 1);
}

Test(typed, short_layout_scans_only_pointer_words)
{
    size_t ptrs[] = {0, 3, 5}, probe[] = {0, 1, 2, 3, 4, 5, 6};
    typed_keeps_only_pointer_words(8, 3, ptrs, 7, probe);
}

Test(typed, prefix_layout)
{
    size_t ptrs[] = {0, 1}, probe[] = {0, 1, 2, 5};
    typed_keeps_only_pointer_words(6, 2, ptrs, 4, probe);
}

Test(typed, long_layout_scans_only_pointer_words)
{
    size_t ptrs[] = {1, 63, 64, 70, 199}, probe[] = {0, 1, 62, 63, 64, 65, 70, 198, 199};
    typed_keeps_only_pointer_words(200, 5, ptrs, 9, probe);
}

Test(typed, large_object_with_long_layout)
{
    /* 20000 words (a large object, scanned in slices). */
    size_t ptrs[] = {2, 5000, 12001, 19999};
    size_t probe[] = {2, 3, 4999, 5000, 12000, 12001, 19998, 19999};
    typed_keeps_only_pointer_words(20000, 4, ptrs, 8, probe);
}

Test(typed, large_object_with_short_layout)
{
    GC_word bm[1] = {0x2};                  /* word 1 */
    root_typed(100 * KiB, GC_make_descriptor(bm, 2));
    size_t probe[] = {0, 1, 2, 6000};
    bool kept[] = {false, true, false, false};
    GC_hidden_pointer h[4];
    tu_store_targets(4, probe, h);
    tu_collect();
    tu_check_targets(4, probe, h, kept, "large");
    tu_holder = NULL;
}

/* ------------------------------------------------------------------ */
/* Arrays                                                              */

struct elem {
    void *ptr;
    uintptr_t num;
    void *ptr2;
};

static GC_descr elem_descr(void)
{
    GC_word bm[GC_BITMAP_SIZE(struct elem)] = {0};
    GC_set_bit(bm, GC_WORD_OFFSET(struct elem, ptr));
    GC_set_bit(bm, GC_WORD_OFFSET(struct elem, ptr2));
    return GC_make_descriptor(bm, GC_WORD_LEN(struct elem));
}

static TU_NOINLINE void root_array(size_t n, size_t elem_bytes, GC_descr d)
{
    tu_holder = GC_calloc_explicitly_typed(n, elem_bytes, d);
    cr_assert_not_null(tu_holder);
    cr_assert_geq(GC_size(tu_holder), n * elem_bytes);
    cr_assert_eq(tu_first_nonzero(tu_holder, n * elem_bytes), n * elem_bytes, "array not cleared");
}

/* Targets in elements i of an array of n struct elem: kept in ptr and
 * ptr2, not in num. */
static void array_keeps_pointer_fields(size_t n, size_t ni, const size_t *elems)
{
    root_array(n, sizeof(struct elem), elem_descr());
    size_t words[30];
    bool kept[30];
    GC_hidden_pointer h[30];
    cr_assert_leq(3 * ni, 30);
    for (size_t i = 0; i < ni; i++)
        for (size_t f = 0; f < 3; f++) {
            words[3 * i + f] = elems[i] * 3 + f;
            kept[3 * i + f] = f != 1;
        }
    tu_store_targets(3 * ni, words, h);
    tu_collect();
    tu_collect();
    tu_check_targets(3 * ni, words, h, kept, "array");
    tu_holder = NULL;
}

Test(typed, calloc_small_array)
{
    size_t e[] = {0, 1, 2};
    array_keeps_pointer_fields(3, 3, e);     /* one bitmap for all */
}

Test(typed, calloc_array)
{
    size_t e[] = {0, 1, 500, 998, 999};
    array_keeps_pointer_fields(1000, 5, e);
}

Test(typed, calloc_large_array)
{
    size_t e[] = {0, 7777, 20000, 39999};
    array_keeps_pointer_fields(40000, 4, e);  /* ~940 KiB, in slices */
}

Test(typed, calloc_array_of_long_layouts)
{
    /* Elements of 80 words, pointers at words 0 and 70. */
    size_t ptrs[] = {0, 70};
    GC_descr d = descr_of(80, 2, ptrs);
    cr_assert_eq(d & GC_DS_TAGS, GC_DS_PROC);
    root_array(7, 80 * sizeof(GC_word), d);
    size_t words[] = {0, 1, 70, 71, 3 * 80, 3 * 80 + 70, 3 * 80 + 69, 6 * 80 + 70, 6 * 80 + 79};
    bool kept[] = {true, false, true, false, true, true, false, true, false};
    GC_hidden_pointer h[9];
    tu_store_targets(9, words, h);
    tu_collect();
    tu_check_targets(9, words, h, kept, "array of long layouts");
    tu_holder = NULL;
}

Test(typed, calloc_with_prefix_elements)
{
    /* Elements of 4 words whose first is a pointer. */
    size_t ptrs[] = {0};
    root_array(100, 32, descr_of(4, 1, ptrs));
    size_t words[] = {0, 1, 40, 41, 396, 399};
    bool kept[] = {true, false, true, false, true, false};
    GC_hidden_pointer h[6];
    tu_store_targets(6, words, h);
    tu_collect();
    tu_check_targets(6, words, h, kept, "prefix elements");
    tu_holder = NULL;
}

Test(typed, calloc_overflow_gives_oom_result)
{
    /* Computed at run time: the compiler refuses a constant that large. */
    volatile size_t n = SIZE_MAX / 8;
    cr_assert_null(GC_calloc_explicitly_typed(n, 16, elem_descr()));
}

Test(typed, typed_objects_cannot_be_resized)
{
    GC_set_warn_proc(tu_warn_proc);
    tu_warn_reset();
    void *p = GC_malloc_explicitly_typed(32, elem_descr());
    cr_assert_null(GC_realloc(p, 64));
    cr_assert_eq(tu_warn_count, 1);
    cr_assert(strstr(tu_warnings[0].msg, "explicit type"), "%s", tu_warnings[0].msg);
}

/* ------------------------------------------------------------------ */
/* Many objects, threads, minor collections                            */

/* Nodes of a typed layout naming next and data only. */
static GC_descr node_descr(void)
{
    GC_word bm[1] = {TU_PNODE_BITS};
    return GC_make_descriptor(bm, GC_WORD_LEN(struct tu_pnode));
}

static void *alloc_node(void *d)
{
    return GC_malloc_explicitly_typed(sizeof(struct tu_pnode), (GC_descr)d);
}

Test(typed, list_survives_and_decoys_go)
{
    GC_hidden_pointer decoys[64];
    static struct tu_pnode *volatile head;
    struct tu_plist pl = {alloc_node, (void *)node_descr(), NULL};
    head = tu_plist_make(&pl, 20000, 7, decoys);
    tu_collect();
    cr_assert_eq(tu_plist_intact(&pl, head), 20000);
    unsigned nd = tu_decoys_live(decoys, 64);
    cr_assert_leq(nd, 1, "%u decoys retained by non-pointer words", nd);
    head = NULL;
}

Test(typed, lists_on_threads)
{
    struct tu_plist pl = {alloc_node, (void *)node_descr(), NULL};
    tu_plist_threads(&pl, 5000);
}

/* Old typed objects on written pages are rescanned by a minor collection:
 * only their pointer words. */
static void minor_rescan(bool array)
{
    if (array)
        root_array(2000, sizeof(struct elem), elem_descr());
    else
        root_typed(sizeof(struct elem), elem_descr());
    size_t base = array ? 3 * 1500 : 0;
    size_t words[] = {base, base + 1, base + 2};
    bool kept[] = {true, false, true};
    tu_minor_targets(3, words, kept);
}

Test(typed, minor_collection_rescans_typed_object_precisely)
{
    minor_rescan(false);
}

Test(typed, minor_collection_rescans_typed_array_precisely)
{
    minor_rescan(true);
}

/* ------------------------------------------------------------------ */
/* Arrays whose elements name a mark procedure                         */

/* Elements of two words: a type record's address, then an index into a
 * side table outside the heap (which lfgc neither scans nor protects).
 * The array's element descriptor is read from each element's record
 * (GC_DS_PER_OBJECT, as gcj's), and the record names side_proc, which
 * follows the side table's entry: encoded, so that no word of the table
 * is a heap address.  A minor collection sees no write to the table. */
static uintptr_t side[8];
static GC_word side_record[2];
static GC_descr per_elem_descr;

static struct GC_ms_entry *side_proc(GC_word *addr, struct GC_ms_entry *msp,
                                     struct GC_ms_entry *lim, GC_word env)
{
    (void)env;
    GC_word i = addr[1];
    if (i && i <= 8 && side[i - 1])
        msp = GC_MARK_AND_PUSH((void *)(side[i - 1] ^ TU_SIDE_MASK), msp, lim, NULL);
    return msp;
}

static void side_setup(void)
{
    side_record[1] = GC_MAKE_PROC(GC_new_proc(side_proc), 0);
    per_elem_descr = (GC_word)(-(GC_signed_word)8 - GC_INDIR_PER_OBJ_BIAS) | GC_DS_PER_OBJECT;
}

/* Only element 2 has a type, and so a procedure: a minor collection must
 * still call it on the old array, every element being decoded.  Large: a
 * span of its own, whose pages nothing else writes. */
static TU_NOINLINE void root_side_array(void)
{
    GC_word *a = GC_calloc_explicitly_typed(100 * KiB / 16, 16, per_elem_descr);
    cr_assert_not_null(a);
    a[2 * 2] = (GC_word)side_record;
    a[2 * 2 + 1] = 1;                       /* side[0] */
    tu_holder = a;
}

/* With the array rooted and old (its page protected): three rounds, each
 * putting a young object in side[0], which only the procedure that `who`
 * names reaches; each must survive two minor collections intact, the
 * replaced ones must go at a full collection, and the last once side[0]
 * is cleared. */
static void side_rounds(uint64_t seed, const char *who)
{
    GC_hidden_pointer h[3];
    for (int round = 0; round < 3; round++) {
        GC_disable();
        h[round] = tu_side_target(side, 0, seed + (uint64_t)round);
        GC_enable();
        cr_assert(tu_collect_minor(), "round %d: expected a minor collection", round);
        cr_assert(tu_collect_minor(), "round %d: expected a minor collection", round);
        cr_assert(tu_live(h[round]), "round %d: the young object %s reaches was freed", round,
                  who);
        cr_assert_eq(tu_check_bytes(GC_REVEAL_POINTER(h[round]), TU_TARGET, seed + (uint64_t)round),
                     TU_TARGET, "round %d: the young object was damaged", round);
    }
    tu_collect();
    cr_assert_not(tu_live(h[0]) || tu_live(h[1]), "replaced objects survived");
    side[0] = 0;
    tu_collect();
    cr_assert_not(tu_live(h[2]), "the object the side table no longer holds was kept");
    tu_holder = NULL;
}

Test(typed, minor_collection_calls_an_element_procedure_of_any_element)
{
    side_setup();
    root_side_array();
    tu_collect();
    if (!tu_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    cr_assert(tu_collect_minor());          /* the array is old, its page protected */
    side_rounds(50, "element 2's procedure");
}

/* Arrays whose trailer the program overwrote (a count past the array's
 * room) are scanned whole, conservatively, by every path: deciding
 * whether a minor collection rescans one must not decode its elements
 * either (their first word is not a record's address).  Those arrays lie
 * next to good ones whose elements call the procedure, in the spans a
 * minor collection looks into. */
#define DAMAGED_PAIRS 16
static void *volatile damaged_roots[2 * DAMAGED_PAIRS];

static TU_NOINLINE void make_damaged_pairs(GC_hidden_pointer *target)
{
    GC_disable();
    void *t = GC_malloc(TU_TARGET);
    cr_assert_not_null(t);
    tu_fill_bytes(t, TU_TARGET, 60);
    *target = tu_hide(t);
    for (int i = 0; i < DAMAGED_PAIRS; i++) {
        GC_word *good = GC_calloc_explicitly_typed(4, 16, per_elem_descr);
        GC_word *bad = GC_calloc_explicitly_typed(4, 16, per_elem_descr);
        cr_assert(good && bad);
        good[0] = (GC_word)side_record;
        size_t words = GC_size(bad) / sizeof(GC_word);
        /* Through GC_base: past the size asked for, as a stray write. */
        ((GC_word *)GC_base(bad))[words - 3] = (GC_word)1 << 40;   /* the count */
        bad[0] = 0x18;                      /* no record's address */
        bad[3] = (GC_word)t;                /* kept: scanned whole */
        damaged_roots[2 * i] = good;
        damaged_roots[2 * i + 1] = bad;
    }
    GC_enable();
}

Test(typed, minor_collection_with_damaged_array_trailers)
{
    side_setup();
    GC_hidden_pointer t;
    make_damaged_pairs(&t);
    tu_collect();
    if (!tu_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    cr_assert(tu_collect_minor(), "expected a minor collection");
    cr_assert(tu_live(t), "a damaged array was not scanned whole");
    cr_assert_eq(tu_check_bytes(GC_REVEAL_POINTER(t), TU_TARGET, 60), TU_TARGET);
    for (int i = 0; i < 2 * DAMAGED_PAIRS; i++)
        damaged_roots[i] = NULL;
    tu_collect();
    cr_assert_not(tu_live(t), "the target of the dropped arrays was kept");
}

/* ------------------------------------------------------------------ */
/* Finalization ignoring self                                          */

/* A typed object of 1000 words (a long layout, longer than a slice of the
 * marker's) naming word 1 (a target) and word 900 (the object itself);
 * word 500, not named, holds a decoy.  Registered with
 * GC_register_finalizer_ignore_self and dropped: it is finalized (its
 * pointer to itself is ignored), the target is intact when its finalizer
 * runs, and the decoy is not kept by it. */
#define SELF_WORDS 1000
static volatile int self_finalized, self_target_ok;
static GC_hidden_pointer self_target;

static TU_NOINLINE int self_target_intact(void)
{
    return tu_live(self_target) &&
           tu_check_bytes(GC_REVEAL_POINTER(self_target), TU_TARGET, 70) == TU_TARGET;
}

static void self_fin(void *obj, void *cd)
{
    (void)obj;
    (void)cd;
    self_finalized++;
    self_target_ok = self_target_intact();
}

static TU_NOINLINE GC_hidden_pointer self_object(void)
{
    size_t named[] = {1, 900};
    GC_descr d = descr_of(SELF_WORDS, 2, named);
    GC_disable();
    void **o = GC_malloc_explicitly_typed(SELF_WORDS * sizeof(GC_word), d);
    void *t = GC_malloc(TU_TARGET), *decoy = GC_malloc(TU_TARGET);
    cr_assert(o && t && decoy);
    tu_fill_bytes(t, TU_TARGET, 70);
    o[1] = t;
    o[500] = decoy;
    o[900] = o + 3;
    self_target = tu_hide(t);
    GC_register_finalizer_ignore_self(o, self_fin, NULL, NULL, NULL);
    GC_enable();
    return tu_hide(decoy);
}

Test(typed, finalizer_ignoring_self_scans_named_words_only)
{
    GC_hidden_pointer decoy = self_object();
    tu_collect();
    cr_assert_eq(self_finalized, 1, "finalized %d times", self_finalized);
    cr_assert(self_target_ok, "a named word's target was freed before the finalizer ran");
    cr_assert_not(tu_live(decoy), "a word the descriptor does not name kept its object");
    tu_collect();
    tu_collect();
    cr_assert_not(tu_live(self_target), "the target outlived its finalized object");
}

/* A way back to the object through another one is a cycle still: the
 * object is not finalized (nor freed), as with bdwgc. */
static TU_NOINLINE GC_hidden_pointer cycle_object(void)
{
    size_t named[] = {1};
    GC_descr d = descr_of(4, 1, named);
    GC_disable();
    void **o = GC_malloc_explicitly_typed(4 * sizeof(GC_word), d);
    void **b = GC_malloc(2 * sizeof(void *));
    cr_assert(o && b);
    o[1] = b;
    b[0] = o;
    GC_register_finalizer_ignore_self(o, self_fin, NULL, NULL, NULL);
    GC_enable();
    return tu_hide(o);
}

Test(typed, finalizer_ignoring_self_sees_a_longer_cycle)
{
    GC_hidden_pointer o = cycle_object();
    tu_collect();
    tu_collect();
    cr_assert_eq(self_finalized, 0, "an object in a cycle was finalized");
    cr_assert(tu_live(o), "an object in a finalization cycle was freed");
}

/* An array whose slot starts in one chunk and runs into the next, the
 * element naming the procedure lying past the boundary: the span noted
 * for minor collections is the array's own (its base's chunk), not the
 * next chunk's. */
#define STRADDLE_TRIES 4000
static void *volatile straddle_tries[STRADDLE_TRIES];

static TU_NOINLINE int root_straddling_array(void)
{
    GC_disable();
    int found = 0;
    /* All kept: the next chunk's span stays in use, its pages protected
     * (a page no span protects is rescanned anyway). */
    for (int i = 0; i < STRADDLE_TRIES; i++) {
        GC_word *a = GC_calloc_explicitly_typed(4, 16, per_elem_descr);
        cr_assert_not_null(a);
        straddle_tries[i] = a;
        uintptr_t el = (uintptr_t)(a + 2 * 3);
        if (!found && (uintptr_t)a >> 16 != el >> 16) {
            a[2 * 3] = (GC_word)side_record;
            a[2 * 3 + 1] = 1;               /* side[0] */
            tu_holder = a;
            found = 1;
        }
    }
    GC_enable();
    return found;
}

Test(typed, minor_collection_calls_the_procedure_of_an_element_past_a_chunk)
{
    side_setup();
    cr_assert(root_straddling_array(), "no array straddled a chunk boundary");
    tu_collect();
    if (!tu_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    cr_assert(tu_collect_minor());
    side_rounds(90, "the last element's procedure");
    for (int i = 0; i < STRADDLE_TRIES; i++)
        straddle_tries[i] = NULL;
}
