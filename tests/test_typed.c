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
#include "gc_typed.h"
#include "gc_mark.h"

#include <pthread.h>

TestSuite(typed, .init = tu_warm_up);

#define TARGET 48

/* The holder under test, rooted here. */
static void *volatile root;

static TU_NOINLINE void *target(uint64_t seed)
{
    void *t = GC_malloc(TARGET);
    cr_assert_not_null(t);
    tu_fill_bytes(t, TARGET, seed);
    return t;
}

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

/* Store fresh targets (seeds 1000 + word index) at the given words of the
 * rooted holder; their hidden addresses go to h[]. */
static TU_NOINLINE void store_targets(size_t n, const size_t *words, GC_hidden_pointer *h)
{
    GC_disable();
    void **o = root;
    for (size_t i = 0; i < n; i++) {
        void *t = target(1000 + words[i]);
        o[words[i]] = t;
        h[i] = tu_hide(t);
    }
    GC_enable();
}

/* Each target's liveness is as expected; the live ones are intact. */
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

static TU_NOINLINE void root_typed(size_t bytes, GC_descr d)
{
    root = GC_malloc_explicitly_typed(bytes, d);
    cr_assert_not_null(root);
    cr_assert_eq(tu_first_nonzero(root, bytes), bytes, "typed object not cleared");
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
    store_targets(nprobe, probe, h);
    tu_collect();
    tu_collect();
    check_targets(nprobe, probe, h, kept, "after two collections");
    root = NULL;
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
    store_targets(4, probe, h);
    tu_collect();
    check_targets(4, probe, h, kept, "large");
    root = NULL;
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
    root = GC_calloc_explicitly_typed(n, elem_bytes, d);
    cr_assert_not_null(root);
    cr_assert_geq(GC_size(root), n * elem_bytes);
    cr_assert_eq(tu_first_nonzero(root, n * elem_bytes), n * elem_bytes, "array not cleared");
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
    store_targets(3 * ni, words, h);
    tu_collect();
    tu_collect();
    check_targets(3 * ni, words, h, kept, "array");
    root = NULL;
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
    store_targets(9, words, h);
    tu_collect();
    check_targets(9, words, h, kept, "array of long layouts");
    root = NULL;
}

Test(typed, calloc_with_prefix_elements)
{
    /* Elements of 4 words whose first is a pointer. */
    size_t ptrs[] = {0};
    root_array(100, 32, descr_of(4, 1, ptrs));
    size_t words[] = {0, 1, 40, 41, 396, 399};
    bool kept[] = {true, false, true, false, true, false};
    GC_hidden_pointer h[6];
    store_targets(6, words, h);
    tu_collect();
    check_targets(6, words, h, kept, "prefix elements");
    root = NULL;
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

/* A list node: next and data pointers, and a word that holds the address
 * of a decoy, which must not be retained. */
struct node {
    struct node *next;
    uintptr_t decoy;
    uint64_t sum;
    char *data;
};
#define DATA 40

static GC_descr node_descr(void)
{
    GC_word bm[1] = {0};
    GC_set_bit(bm, GC_WORD_OFFSET(struct node, next));
    GC_set_bit(bm, GC_WORD_OFFSET(struct node, data));
    return GC_make_descriptor(bm, GC_WORD_LEN(struct node));
}

static uint64_t data_sum(const char *d)
{
    uint64_t s = 0;
    for (int i = 0; i < DATA; i++)
        s = s * 31 + (unsigned char)d[i];
    return s;
}

/* Decoys of a size of their own per thread: a slot freed by a collection
 * and taken by another thread's decoy would look live. */
static __thread size_t decoy_bytes = TARGET;

/* A list of n nodes; its decoys' addresses are counted into decoys[] (up
 * to 64, hidden). */
static TU_NOINLINE struct node *make_list(size_t n, GC_descr d, uint64_t seed,
                                          GC_hidden_pointer *decoys)
{
    struct node *head = NULL;
    for (size_t i = 0; i < n; i++) {
        struct node *x = GC_malloc_explicitly_typed(sizeof *x, d);
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
        if (data_sum(x->data) != x->sum || !lfgc_is_live(x->data))
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

Test(typed, list_survives_and_decoys_go)
{
    GC_hidden_pointer decoys[64];
    static struct node *volatile head;
    head = make_list(20000, node_descr(), 7, decoys);
    tu_collect();
    cr_assert_eq(list_intact(head), 20000);
    cr_assert_leq(decoys_live(decoys, 64), 1, "decoys retained by non-pointer words");
    head = NULL;
}

#define THREADS 4
struct worker {
    GC_descr d;
    unsigned id;
    size_t bad;
    unsigned decoys;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    GC_hidden_pointer decoys[64];
    decoy_bytes = 100 + 200 * w->id;
    for (int round = 0; round < 5; round++) {
        struct node *volatile head = make_list(5000, w->d, w->id * 100000 + round, decoys);
        tu_clear_stack();
        GC_gcollect();
        /* The list is live: its decoys are not. */
        if (list_intact(head) != 5000)
            w->bad++;
        w->decoys += decoys_live(decoys, 64);
        head = NULL;
    }
    return NULL;
}

Test(typed, lists_on_threads)
{
    struct worker w[THREADS];
    pthread_t t[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        w[i] = (struct worker){node_descr(), i, 0, 0};
        cr_assert_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    unsigned decoys = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(w[i].bad, 0, "thread %u: a list was damaged", i);
        decoys += w[i].decoys;
    }
    /* A collection may run while a thread is half-way through a node
     * (the decoy's address still in a register): a few, of 1280. */
    cr_assert_leq(decoys, 16, "%u decoys of live lists retained", decoys);
}

/* Old typed objects on written pages are rescanned by a minor collection:
 * only their pointer words. */
static void minor_rescan(bool array)
{
    if (array)
        root_array(2000, sizeof(struct elem), elem_descr());
    else
        root_typed(sizeof(struct elem), elem_descr());
    tu_collect();
    if (!tu_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    /* Past the slots the thread's cache held at the last collection,
     * which that collection marked (they count as allocated). */
    for (int i = 0; i < 2000; i++)
        cr_assert_not_null(GC_malloc(TARGET));
    size_t base = array ? 3 * 1500 : 0;
    size_t words[] = {base, base + 1, base + 2};
    bool kept[] = {true, false, true};
    GC_hidden_pointer h[3];
    store_targets(3, words, h);
    cr_assert(tu_collect_minor(), "expected a minor collection");
    check_targets(3, words, h, kept, "after a minor collection");
    root = NULL;
}

Test(typed, minor_collection_rescans_typed_object_precisely)
{
    minor_rescan(false);
}

Test(typed, minor_collection_rescans_typed_array_precisely)
{
    minor_rescan(true);
}
