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
