/* test_blacklist.c: words that are not pointers must not pin what is
 * allocated later at the address they happen to hold.
 *
 * Unlike the other test programs, this one does NOT call tu_warm_up():
 * each test starts from a fresh process (Criterion forks one per test)
 * whose libraries' static data hold the usual small-integer words
 * (0x800000003 in the dynamic loader, 0x1000000010 in libcrypto, ...),
 * exactly as a real program does.  The program's own static data plant
 * words that hit the first slots of some classes, built from the layout's
 * constants so that they do in every layout.
 *
 * Every test checks both that what is kept survives intact and that what
 * is dropped is reclaimed.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#define CHUNK TU_CHUNK
/* Region base of class c, and where its chunks start, as constant
 * expressions. */
#define REGION_OF(c) (LOWFAT_HEAP_START + (uint64_t)(c) * LOWFAT_REGION_SIZE)
#define CHUNKS_OF(c) (REGION_OF(c) + TU_SMALL_CLASS_OFFSET(c))

/* Classes hit by the planted words below. */
#define PLANT_HEAD 4        /* 80 bytes */
#define PLANT_NODE 9        /* 160 bytes */

/* Static data, scanned as a root from the start: two words pointing 8
 * bytes into the first slot of class 4 and 40 bytes into that of class 9. */
uint64_t tb_planted[2] __attribute__((used)) = {
    CHUNKS_OF(PLANT_HEAD) + 8,
    CHUNKS_OF(PLANT_NODE) + 40,
};

/* A word into the middle of the third chunk of class 14's region (a slot
 * whose base is in that chunk: near its start, the word could be in a
 * slot that straddles from the second): no pair of small integers, but
 * there before the first allocation. */
#define PLANT_MID 14        /* 320 bytes */
uint64_t tb_planted_mid __attribute__((used)) = CHUNKS_OF(PLANT_MID) + 2 * CHUNK + CHUNK / 2;

/* A word set at run time, in static data. */
volatile uint64_t tb_runtime_word;

/* Small classes that exist: those below the chunk. */
#define SMALL_CLASSES TU_NUM_SMALL_CLASSES
#define FIRST_OBJECTS 32

static GC_hidden_pointer first_objs[SMALL_CLASSES][FIRST_OBJECTS];
static void *kept[SMALL_CLASSES];        /* a root: one live object per class */

static TU_NOINLINE void alloc_first_objects(void)
{
    for (unsigned c = 0; c < SMALL_CLASSES; c++) {
        size_t n = tu_class_sizes[c] - 1;      /* the extra byte: class c */
        for (unsigned i = 0; i < FIRST_OBJECTS; i++) {
            void **p = GC_malloc(n);
            cr_assert_not_null(p);
            cr_assert_eq(lowfat_size(p), tu_class_sizes[c], "class of a %zu-byte object", n);
            p[0] = p;                          /* something to retain */
            first_objs[c][i] = tu_hide(p);
        }
        kept[c] = GC_malloc(n);
        cr_assert_not_null(kept[c]);
        tu_fill_bytes(kept[c], n, c);
    }
}

/* The first objects allocated in each small class of a fresh process are
 * reclaimed once dropped: no false reference in any library's data (nor
 * in the program's) pins them. */
Test(blacklist, first_objects_of_each_class_reclaimed)
{
    GC_INIT();
    GC_disable();
    alloc_first_objects();
    GC_enable();
    tu_collect();
    tu_collect();
    unsigned pinned = 0;
    for (unsigned c = 0; c < SMALL_CLASSES; c++) {
        unsigned here = 0;
        for (unsigned i = 0; i < FIRST_OBJECTS; i++)
            here += tu_live(first_objs[c][i]) != 0;
        if (here)
            cr_log_error("class %u (%llu bytes): %u of its first objects still live", c,
                         (unsigned long long)tu_class_sizes[c], here);
        pinned += here;
        cr_assert(lfgc_is_live(kept[c]), "class %u: the kept object was reclaimed", c);
        cr_assert_eq(tu_check_bytes(kept[c], tu_class_sizes[c] - 1, c), tu_class_sizes[c] - 1,
                     "class %u: the kept object was corrupted", c);
    }
    cr_assert_eq(pinned, 0, "%u of the first objects were not reclaimed", pinned);
}

/* A head object of class PLANT_HEAD with a list of 4096 nodes of class
 * PLANT_NODE hanging from it; returned hidden. */
#define LIST_NODES 4096
static GC_hidden_pointer nodes[LIST_NODES];

static TU_NOINLINE GC_hidden_pointer build_list(void)
{
    void **head = GC_malloc(tu_class_sizes[PLANT_HEAD] - 1);
    cr_assert_not_null(head);
    void **prev = head;
    for (unsigned i = 0; i < LIST_NODES; i++) {
        void **p = GC_malloc(tu_class_sizes[PLANT_NODE] - 1);
        cr_assert_not_null(p);
        prev[0] = p;
        prev = p;
        nodes[i] = tu_hide(p);
    }
    return tu_hide(head);
}

/* The planted words hold the addresses of the first slots of two classes
 * from before the program's first allocation: the objects allocated
 * first in those classes are nevertheless reclaimed when dropped, with
 * all they reach. */
Test(blacklist, planted_static_word_does_not_pin)
{
    GC_INIT();
    GC_disable();
    GC_hidden_pointer head = build_list();
    void *keep = GC_malloc(tu_class_sizes[PLANT_HEAD] - 1);
    tu_fill_bytes(keep, tu_class_sizes[PLANT_HEAD] - 1, 7);
    GC_enable();
    tu_collect();
    cr_assert_not(tu_live(head), "the head object was pinned by a planted word");
    unsigned live = 0;
    for (unsigned i = 0; i < LIST_NODES; i++)
        live += tu_live(nodes[i]) != 0;
    cr_assert_eq(live, 0, "%u of %u list nodes were retained", live, LIST_NODES);
    cr_assert(lfgc_is_live(keep));
    cr_assert_eq(tu_check_bytes(keep, tu_class_sizes[PLANT_HEAD] - 1, 7),
                 tu_class_sizes[PLANT_HEAD] - 1);
    /* The words themselves are still there, unchanged. */
    cr_assert_eq(tb_planted[0], CHUNKS_OF(PLANT_HEAD) + 8);
    cr_assert_eq(tb_planted[1], CHUNKS_OF(PLANT_NODE) + 40);
}

/* ------------------------------------------------------------------ */
/* A word that appears at run time, ahead of the allocation frontier   */

#define AHEAD_CLASS 12              /* 256 bytes */
#define KEEP_MAX 8192               /* 2 MiB of objects: 32 chunks */
static void **tb_keep;              /* a root: every object allocated */
static unsigned tb_nkeep;

static uint64_t chunk_of(const void *p)
{
    return ((uintptr_t)p - CHUNKS_OF(AHEAD_CLASS)) / CHUNK;
}

/* Allocate objects of AHEAD_CLASS, all kept, until `count` more exist or
 * one lands in chunk `stop_at` (UINT64_MAX: none); returns how many
 * landed in chunk `bad`. */
static TU_NOINLINE unsigned fill(unsigned count, uint64_t bad, uint64_t stop_at)
{
    unsigned in_bad = 0;
    for (unsigned i = 0; i < count; i++) {
        cr_assert_lt(tb_nkeep, KEEP_MAX);
        uint64_t *p = GC_malloc(tu_class_sizes[AHEAD_CLASS] - 1);
        cr_assert_not_null(p);
        p[0] = tu_pattern(tb_nkeep, 0);
        tb_keep[tb_nkeep++] = p;
        in_bad += chunk_of(p) == bad;
        if (chunk_of(p) == stop_at)
            break;
    }
    return in_bad;
}

/* *where, a word the collector scans, holds an address two chunks ahead
 * of the frontier of AHEAD_CLASS: collections record it, the allocator
 * passes that chunk by; once the word is gone and two full collections
 * have not seen it again, the chunk is used. */
static void ahead_of_frontier(volatile uint64_t *where)
{
    tb_keep = GC_malloc(KEEP_MAX * sizeof(void *));
    cr_assert_not_null(tb_keep);
    fill(1, UINT64_MAX, UINT64_MAX);
    uint64_t bad = chunk_of(tb_keep[0]) + 3;
    *where = CHUNKS_OF(AHEAD_CLASS) + bad * CHUNK + 8;
    tu_collect();
    /* Past the chunk: five chunks' worth of objects. */
    unsigned per_chunk = CHUNK / tu_class_sizes[AHEAD_CLASS];
    cr_assert_eq(fill(5 * per_chunk, bad, UINT64_MAX), 0,
                 "objects were allocated in a chunk a scanned word points into");
    cr_assert_null(GC_base((void *)(uintptr_t)*where), "the word's chunk is in use");
    *where = 0;
    tu_collect();
    tu_collect();
    /* Blacklisted no more: the chunk is the next one taken. */
    cr_assert_gt(fill(2 * per_chunk, bad, bad), 0,
                 "the chunk was not used after the word went away");
    tu_collect();
    for (unsigned i = 0; i < tb_nkeep; i++)
        cr_assert_eq(*(uint64_t *)tb_keep[i], tu_pattern(i, 0), "object %u corrupted", i);
}

Test(blacklist, static_word_ahead_of_frontier)
{
    GC_INIT();
    ahead_of_frontier(&tb_runtime_word);
}

static uint64_t *tb_holder;          /* a root: a heap object holding the word */

Test(blacklist, heap_word_ahead_of_frontier)
{
    GC_INIT();
    tb_holder = GC_malloc(64);
    cr_assert_not_null(tb_holder);
    ahead_of_frontier(&tb_holder[3]);
    cr_assert(lfgc_is_live(tb_holder));
}

/* ------------------------------------------------------------------ */
/* A word written after allocation began                                */

/* The first small class whose chunks start at a multiple of 4 GiB: class
 * 0 (16 bytes) in the default layout, whose regions start there and whose
 * chunks start at its region's base; the other classes' start c MiB
 * further.  None in the valgrind layout (1 GiB regions from 2 GiB). */
static unsigned late_class(void)
{
    for (unsigned c = 0; c < SMALL_CLASSES; c++)
        if ((CHUNKS_OF(c) & 0xffffffffu) == 0)
            return c;
    TU_SKIP("no small class whose chunks start at a multiple of 4 GiB in this layout");
    return 0;
}
#define LATE_CLASS late_class()

static TU_NOINLINE GC_hidden_pointer build_late_list(void)
{
    void **head = GC_malloc(tu_class_sizes[LATE_CLASS] - 1);
    cr_assert_not_null(head);
    void **prev = head;
    for (unsigned i = 0; i < LIST_NODES; i++) {
        void **p = GC_malloc(tu_class_sizes[LATE_CLASS] - 1);
        cr_assert_not_null(p);
        prev[0] = p;
        prev = p;
        nodes[i] = tu_hide(p);
    }
    return tu_hide(head);
}

/* A word packing two 32-bit integers, (hi, lo) with lo small, lands at a
 * multiple of 4 GiB, here where a class's chunks start; written once
 * objects of that class exist, it is too late for blacklisting to keep
 * the chunk free.  Such chunks are never given to scanned kinds, so the
 * first objects of the class are reclaimed all the same. */
Test(blacklist, pair_written_after_allocation_does_not_pin)
{
    GC_INIT();
    GC_disable();
    GC_hidden_pointer head = build_late_list();
    void *keep = GC_malloc(tu_class_sizes[LATE_CLASS] - 1);
    tu_fill_bytes(keep, tu_class_sizes[LATE_CLASS] - 1, 9);
    GC_enable();
    tb_runtime_word = CHUNKS_OF(LATE_CLASS) + 8;
    tu_collect();
    cr_assert_not(tu_live(head), "the head object was pinned by a word written later");
    unsigned live = 0;
    for (unsigned i = 0; i < LIST_NODES; i++)
        live += tu_live(nodes[i]) != 0;
    cr_assert_eq(live, 0, "%u of %u list nodes were retained", live, LIST_NODES);
    cr_assert(lfgc_is_live(keep));
    cr_assert_eq(tu_check_bytes(keep, tu_class_sizes[LATE_CLASS] - 1, 9),
                 tu_class_sizes[LATE_CLASS] - 1);
}

/* ------------------------------------------------------------------ */
/* A word there before the first allocation, ahead of the frontier     */

static void **tb_mid_keep;          /* a root */

/* Allocate four chunks' worth of objects of class PLANT_MID, rooted, with
 * collections off; count those in the chunk tb_planted_mid points into
 * and those past it. */
static GC_hidden_pointer mid_hidden[1024];

static void alloc_mid_objects(unsigned n, unsigned *in_chunk, unsigned *past)
{
    cr_assert_leq(n, 1024);
    GC_disable();
    tb_mid_keep = GC_malloc(n * sizeof(void *));
    cr_assert_not_null(tb_mid_keep);
    *in_chunk = *past = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t *p = GC_malloc(tu_class_sizes[PLANT_MID] - 1);
        cr_assert_not_null(p);
        p[0] = tu_pattern(i, 0);
        tb_mid_keep[i] = p;
        mid_hidden[i] = tu_hide(p);
        uint64_t chunk = ((uintptr_t)p - CHUNKS_OF(PLANT_MID)) / CHUNK;
        *in_chunk += chunk == 2;
        *past += chunk > 2;
    }
    GC_enable();
}

static void mid_objects_intact(unsigned n)
{
    tu_collect();
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(*(uint64_t *)tb_mid_keep[i], tu_pattern(i, 0), "object %u corrupted", i);
}

/* The start-up scan sees tb_planted_mid before anything is allocated:
 * the chunk it points into is passed by, even with collections off. */
Test(blacklist, static_word_seen_before_first_allocation)
{
    GC_INIT();
    unsigned n = 4 * (unsigned)(CHUNK / tu_class_sizes[PLANT_MID]), in_chunk, past;
    alloc_mid_objects(n, &in_chunk, &past);
    cr_assert_gt(past, 0, "the allocation did not pass the chunk");
    cr_assert_eq(in_chunk, 0, "%u objects in the chunk a static word points into", in_chunk);
    cr_assert_null(GC_base((void *)(uintptr_t)tb_planted_mid));
    mid_objects_intact(n);
}

/* GC_dont_precollect set before GC_init: no start-up scan (bdwgc's first
 * collection), so the chunk is not passed by: the program wanted to
 * arrange its roots before any was looked at. */
Test(blacklist, dont_precollect_skips_the_start_up_scan)
{
    GC_dont_precollect = 1;
    GC_INIT();
    unsigned n = 4 * (unsigned)(CHUNK / tu_class_sizes[PLANT_MID]), in_chunk, past;
    alloc_mid_objects(n, &in_chunk, &past);
    cr_assert_gt(in_chunk, 0, "the chunk a static word points into was blacklisted at start-up");
    mid_objects_intact(n);
    /* The first collection scanned the word, as any collection does: an
     * object dropped in that chunk now stays only if the word hits it. */
    tb_mid_keep = NULL;
    tu_collect();
    cr_assert_not_null(GC_base((void *)(uintptr_t)tb_planted_mid),
                       "the object the static word points into was reclaimed");
    unsigned live = 0;
    for (unsigned i = 0; i < n; i++)
        live += tu_live(mid_hidden[i]) != 0;
    cr_assert_leq(live, 2, "%u of %u dropped objects retained", live, n);
}
