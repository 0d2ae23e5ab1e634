/* test_static.c: lfgc linked statically (liblfgc.a), and white-box checks
 * of layout edges that would take tens of GiB to reach through the API.
 *
 * Linked with the archive, this program can reach the library's hidden
 * internals (gc/internal.h): the layout tests move a region's frontier
 * to its end instead of filling 32 GiB.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */
#include "../gc/internal.h"
#include "lfgc_malloc.h"

#include <err.h>
#include <sys/mman.h>
#include <errno.h>
#include <fcntl.h>

/* The tests' copies of the chunk size and the number of small classes
 * (test_util.h) are the library's. */
_Static_assert(TU_CHUNK == CHUNK_SIZE, "test_util.h's TU_CHUNK is not CHUNK_SIZE");
_Static_assert(TU_SMALL_CLASS_OFFSET(1) == SMALL_CLASS_OFFSET(1) &&
               TU_SMALL_CLASS_OFFSET(NUM_SMALL_CLASSES - 1) ==
                   SMALL_CLASS_OFFSET(NUM_SMALL_CLASSES - 1) &&
               TU_SMALL_CLASS_OFFSET(NUM_SMALL_CLASSES) == 0,
               "test_util.h's TU_SMALL_CLASS_OFFSET is not SMALL_CLASS_OFFSET");
_Static_assert(TU_NUM_SMALL_CLASSES == NUM_SMALL_CLASSES,
               "test_util.h's TU_NUM_SMALL_CLASSES is not NUM_SMALL_CLASSES");

/* ------------------------------------------------------------------ */
/* Region edges                                                        */

/* The slot of the successor region that starts before it (its "partial
 * first slot"), or 0 when the successor starts on a slot boundary. */
static uint64_t partial_first_slot(const struct region *next)
{
    if (!next->magic)
        return 0;
    uint64_t region = region_base(next);
    uint64_t base = region / next->size * next->size;
    return base < region ? base : 0;
}

/* A word into the partial first slot of region c + 1 computes (with that
 * region's size) a base in the last chunk of region c and a slot number
 * one below the first of region c + 1.  That chunk must never be in use,
 * or the marker takes the word for an object and indexes the mark bitmap
 * at -1. */
Test(layout_edge, partial_first_slot_chunk_never_handed_out)
{
    GC_INIT();
    unsigned checked = 0;
    for (unsigned c = 0; c + 1 < NUM_CLASSES; c++) {
        const struct region *r = &lf_regions[c], *next = &lf_regions[c + 1];
        uint64_t partial = partial_first_slot(next);
        if (!r->magic || !partial)
            continue;
        uint64_t chunk = (partial - r->start) >> CHUNK_SHIFT;
        cr_expect_leq(r->max_chunks, chunk,
                      "region of %llu-byte objects may hand out chunk %llu, which "
                      "holds the base of the partial first slot of the %llu-byte region",
                      (unsigned long long)r->size, (unsigned long long)chunk,
                      (unsigned long long)next->size);
        checked++;
    }
    cr_assert_gt(checked, 0, "no region starts with a partial slot: the test checks nothing");
}

/* Free reads the chunk-map entry of every object it is given, and the
 * marker that of every candidate word.  Each small class's chunks start
 * SMALL_CLASS_OFFSET into its region, so that the entries of the first
 * chunks of the classes lie on lines of different L1 sets (64 sets of 64
 * bytes, 4 KiB apart); from the regions' bases, 2 MiB apart in the
 * table, they were all in one set. */
Test(layout_edge, first_chunk_map_entries_of_the_small_classes_use_different_l1_sets)
{
    GC_INIT();
    bool used[64] = {false};
    unsigned sets = 0, classes = 0;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        const struct region *r = &lf_regions[c];
        if (!r->magic)
            continue;
        uint64_t base = LOWFAT_HEAP_START + (uint64_t)c * LOWFAT_REGION_SIZE;
        cr_expect_eq(r->start, base + SMALL_CLASS_OFFSET(c), "class %u's chunks start at %#lx, "
                     "its region at %#lx", c, (unsigned long)r->start, (unsigned long)base);
        cr_assert(!r->reserved || r->max_chunks > 0);
        unsigned set = (unsigned)(((uintptr_t)&lf_chunk_map[chunk_entry(r->start)] >> 6) & 63);
        sets += !used[set];
        used[set] = true;
        classes++;
    }
    cr_assert_gt(classes, 0);
    cr_assert_eq(sets, classes, "the first chunk-map entries of %u small classes use %u L1 sets",
                 classes, sets);
    /* Nothing is handed out below a class's start: a word there finds no
     * object. */
    void *p = GC_malloc(100);
    cr_assert_not_null(p);
    unsigned c = (unsigned)lowfat_index(p) - LOWFAT_FIRST_REGION;
    cr_assert_geq((uintptr_t)p, lf_regions[c].start);
    cr_assert_null(GC_base((void *)(lf_regions[c].start - 64)));
}

/* Roots of the next test, in this program's data. */
static void *volatile edge_keep;
static volatile uintptr_t edge_stray;

#define EDGE_SIZE 8192            /* its successor's first slot is partial */

static TU_NOINLINE GC_hidden_pointer edge_alloc(uint64_t seed)
{
    char *p = GC_malloc(EDGE_SIZE - 100);
    cr_assert_not_null(p);
    tu_fill_bytes(p, EDGE_SIZE - 100, seed);
    return tu_hide(p);
}

static TU_NOINLINE int edge_intact(GC_hidden_pointer h, uint64_t seed)
{
    return tu_check_bytes(GC_REVEAL_POINTER(h), EDGE_SIZE - 100, seed) == EDGE_SIZE - 100;
}

/* The whole path: objects in the last chunk a region hands out, and a
 * root word into the next region's partial first slot.  The collection
 * must neither crash nor retain anything for that word; the kept object
 * survives intact and the dropped ones are reclaimed. */
Test(layout_edge, word_in_partial_first_slot_after_full_region)
{
    GC_INIT();
    unsigned c = (unsigned)lf_class_of_size(EDGE_SIZE);
    struct region *r = &lf_regions[c];
    cr_assert_eq(r->size, EDGE_SIZE);
    uint64_t partial = partial_first_slot(&lf_regions[c + 1]);
    cr_assert_neq(partial, 0, "the %d-byte region's successor starts on a slot", EDGE_SIZE);
    cr_assert(r->reserved && r->max_chunks > 0);

    /* As if the region had been filled: its next span is the last one. */
    lock();
    cr_assert_eq(r->next_chunk, 0, "the region was used before the test");
    r->next_chunk = r->max_chunks - 1;
    unlock();

    GC_disable();
    uint64_t qa, qb;
    lf_span_slots(r, r->max_chunks - 1, &qa, &qb);
    size_t n = qb - qa;
    cr_assert(n >= 2 && n <= 64);
    GC_hidden_pointer h[64];
    for (size_t i = 0; i < n; i++) {
        h[i] = edge_alloc(i + 1);
        cr_assert_eq((uintptr_t)GC_REVEAL_POINTER(h[i]) >> CHUNK_SHIFT,
                     (r->start >> CHUNK_SHIFT) + r->max_chunks - 1,
                     "object %zu is not in the region's last usable chunk", i);
    }
    /* The chunks jumped over were never used: the frontier passed them,
     * as it passes blacklisted ones (the heap verifier of debug builds
     * finds every unused span on a list). */
    lock();
    struct span *skipped = r->skipped;     /* those the test's allocations passed */
    for (uint64_t j = 0; j + 1 < r->max_chunks; j++) {
        struct span *s = span_at(r, j);
        bool listed = false;
        for (struct span *t = skipped; t && !listed; t = t->next)
            listed = t == s;
        if (s->state == SPAN_UNUSED && !listed) {
            s->next = r->skipped;
            r->skipped = s;
        }
    }
    unlock();
    tu_store(&edge_keep, h[0], 0);
    edge_stray = partial + 8;
    GC_enable();
    tu_collect();

    cr_assert(tu_live(h[0]), "the object kept by a root was reclaimed");
    cr_assert(edge_intact(h[0], 1), "the object kept by a root was corrupted");
    for (size_t i = 1; i < n; i++)
        cr_assert_not(tu_live(h[i]), "dropped object %zu was not reclaimed", i);
    cr_assert_eq(lfgc_is_live((void *)edge_stray), 0,
                 "a word into the partial first slot counts as an object");
}

/* ------------------------------------------------------------------ */
/* Static link                                                         */

static void call_warn(void *arg)
{
    (void)arg;
    errno = ENOENT;
    warn("the program's warning %d", 42);
}

/* lfgc's internal names are prefixed: a program's call to warn(3) reaches
 * libc's, which names the program and errno. */
Test(static_link, warn_is_libc)
{
    GC_INIT();
    Dl_info di;
    cr_assert(dladdr((void *)(uintptr_t)&warn, &di), "warn is not in any object");
    cr_assert_not_null(strstr(di.dli_fname, "libc"), "warn resolves to %s", di.dli_fname);
    char out[512], want[512];
    tu_capture_stderr(call_warn, NULL, out, sizeof out);
    snprintf(want, sizeof want, "%s: the program's warning 42: %s\n",
             program_invocation_short_name, strerror(ENOENT));
    cr_assert_str_eq(out, want);
}

static void *volatile first_keep;

/* An object of class c, its first slot if that is free.  Pointer-free:
 * scanned kinds never get a chunk that starts at a multiple of 4 GiB
 * (class 0's first), pointer-free ones do.  The linking of a span
 * taken empty starts a few lines into the page (a line per class) and
 * comes back for the slots it skipped, so the allocations go on until one
 * lands there (the others are garbage). */
static TU_NOINLINE GC_hidden_pointer first_alloc(unsigned c)
{
    size_t n = tu_class_sizes[c] - 1;
    const struct region *r = &lf_regions[c];
    uint64_t *p = NULL;
    for (int i = 0; i < 1024; i++) {
        p = GC_malloc_atomic(n);
        cr_assert_not_null(p, "GC_malloc(%zu)", n);
        if ((uintptr_t)p == r->q0 * r->size)
            break;
    }
    for (size_t j = 0; j < n / 8; j++)
        p[j] = tu_pattern(c, j);
    return tu_hide(p);
}

static TU_NOINLINE int first_intact(GC_hidden_pointer h, unsigned c)
{
    const uint64_t *p = GC_REVEAL_POINTER(h);
    for (size_t j = 0; j < (tu_class_sizes[c] - 1) / 8; j++)
        if (p[j] != tu_pattern(c, j))
            return 0;
    return 1;
}

/* Is the object the first slot of class c's region?  (Addresses are
 * computed here, not in the test's frame, where they would be roots.) */
static TU_NOINLINE int first_at(GC_hidden_pointer h, unsigned c)
{
    const struct region *r = &lf_regions[c];
    return (uintptr_t)GC_REVEAL_POINTER(h) == r->q0 * r->size;
}

/* The first class from `from` to `last` whose region starts with a slot
 * that no other shared object's data points to; 0 if none. */
static TU_NOINLINE unsigned first_slot_class(unsigned from, unsigned last)
{
    for (unsigned c = from; c <= last; c++) {
        const struct region *r = &lf_regions[c];
        if (r->q0 * r->size == r->start && !tu_foreign_refs(r->start, r->start + r->size))
            return c;
    }
    return 0;
}

/* Settings that lfgc keeps in its own data, each set to the address of
 * the first slot of a class (returned in cls[]); false if there are not
 * enough classes.  (Done here, not in the test's frame, where the
 * addresses would be roots.) */
#define N_SETTINGS 3
static TU_NOINLINE bool settings_at_first_slots(unsigned last, unsigned cls[N_SETTINGS])
{
    unsigned c = 0;
    for (int i = 0; i < N_SETTINGS; i++) {
        c = first_slot_class(c + 1, last);
        if (!c)
            return false;
        cls[i] = c;
    }
    GC_set_max_heap_size((size_t)lf_regions[cls[0]].start);    /* lf_hs */
    GC_set_min_bytes_allocd((size_t)lf_regions[cls[1]].start);  /* compat.c */
    GC_set_non_gc_bytes((GC_word)lf_regions[cls[2]].start);     /* exported */
    return true;
}

/* In a static link lfgc's own data are part of the program's: none of it
 * may retain an object (each region's bounds would pin its first slot).
 * The first object of each class is dropped and must be reclaimed, but
 * where a word in another shared object's data points to it (a false
 * reference the collector rightly honours). */
Test(static_link, first_objects_of_each_class_reclaimed)
{
    GC_INIT();
    enum { LAST = 47 };                     /* classes up to 1 MiB */
    /* Settings equal to the address of a region's first slot (a heap
     * limit, a count) must not pin that slot: lfgc keeps them in its
     * data. */
    unsigned set_cls[N_SETTINGS];
    cr_assert(settings_at_first_slots(LAST, set_cls), "too few classes for the settings' check");
    GC_hidden_pointer h[LAST + 1];
    bool first[LAST + 1];
    GC_disable();
    for (unsigned c = 0; c <= LAST; c++) {
        h[c] = first_alloc(c);
        /* Not there when that chunk was in use already. */
        first[c] = first_at(h[c], c);
    }
    GC_hidden_pointer keep = first_alloc(3);
    tu_store(&first_keep, keep, 0);
    GC_enable();
    tu_collect();

    cr_assert(tu_live(keep), "an object kept by a root was reclaimed");
    cr_assert(first_intact(keep, 3), "an object kept by a root was corrupted");
    unsigned checked = 0;
    for (unsigned c = 0; c <= LAST; c++) {
        const struct region *r = &lf_regions[c];
        uint64_t base = r->q0 * r->size;
        if (!first[c]) {
            cr_log_info("class %u: not the region's first slot", c);
            continue;
        }
        if (tu_foreign_refs(base, base + r->size)) {
            cr_log_info("class %u: a false reference in a shared object", c);
            continue;
        }
        checked++;
        cr_expect_not(tu_live(h[c]), "the first %llu-byte object was retained",
                      (unsigned long long)r->size);
    }
    cr_assert_geq(checked, LAST / 2, "only %u classes with their first slot free of false "
                  "references", checked);
    for (int i = 0; i < N_SETTINGS; i++)
        cr_assert(first[set_cls[i]], "class %u's object is not its region's first slot: "
                  "setting %d checks nothing", set_cls[i], i);
}

/* The first objects of the small classes, each from a span taken empty,
 * start on different cache lines of their pages: slots sit at multiples
 * of their size from chunk starts, and a span linked from its first slot
 * put the first objects of every class on the same few lines, which share
 * the few sets of an L1 cache indexed by the offset in the page. */
Test(static_link, first_objects_of_the_classes_spread_over_the_lines_of_a_page)
{
    GC_INIT();
    bool line_used[64] = {false};
    unsigned classes = 0, lines = 0;
    for (unsigned c = 0; c < TU_NUM_SMALL_CLASSES && tu_class_sizes[c] <= 512; c++) {
        uintptr_t p = (uintptr_t)GC_malloc_atomic(tu_class_sizes[c] - 1);
        cr_assert(p);
        unsigned line = (unsigned)(p & 4095) / 64;
        lines += !line_used[line];
        line_used[line] = true;
        classes++;
    }
    cr_assert_geq(classes, 16);
    cr_assert_geq(lines, classes * 3 / 4, "the first objects of %u classes lie on %u "
                  "lines of their pages", classes, lines);
}

/* bdwgc's plausible-heap bounds are exported data, which a program's own
 * data may hold a copy of (a copy relocation): they must bound the heap
 * without being an address in it. */
Test(static_link, plausible_bounds_are_no_heap_address)
{
    GC_INIT();
    uintptr_t lo = (uintptr_t)GC_least_plausible_heap_addr;
    uintptr_t hi = (uintptr_t)GC_greatest_plausible_heap_addr;
    cr_assert_not(lowfat_is_ptr((void *)lo), "GC_least_plausible_heap_addr %#lx is in the heap", lo);
    cr_assert_not(lowfat_is_ptr((void *)hi), "GC_greatest_plausible_heap_addr %#lx is in the heap", hi);
    cr_assert_lt(lo, LOWFAT_HEAP_START);
    cr_assert_geq(hi, LOWFAT_HEAP_END - 1);
    void *p = GC_malloc(100);
    cr_assert((uintptr_t)p >= lo && (uintptr_t)p <= hi);
}

extern char __start_lf_unscanned[], __stop_lf_unscanned[];
extern char __start_lf_unscanned_bss[], __stop_lf_unscanned_bss[];
extern char __start_lf_unscanned_zero[], __stop_lf_unscanned_zero[];

/* In one of the three sections the root scan leaves out (LF_UNSCANNED_DATA,
 * LF_UNSCANNED_BSS and LF_UNSCANNED). */
static int unscanned(const void *p, size_t n)
{
    const char *c = p;
    return (c >= __start_lf_unscanned && c + n <= __stop_lf_unscanned) ||
           (c >= __start_lf_unscanned_bss && c + n <= __stop_lf_unscanned_bss) ||
           (c >= __start_lf_unscanned_zero && c + n <= __stop_lf_unscanned_zero);
}

/* The globals that hold heap addresses or sizes are in the section the
 * root scan leaves out (with a blacklist, a word they held would cost a
 * chunk per region rather than retain: the test above sees it less). */
Test(static_link, own_state_is_unscanned)
{
    cr_assert(unscanned(lf_regions, sizeof lf_regions), "the region table is scanned");
    cr_assert(unscanned(lf_predefined_ck, sizeof lf_predefined_ck), "the free-list heads are scanned");
    cr_assert(unscanned(&lf_hs, sizeof lf_hs), "the heap figures are scanned");
}

/* ------------------------------------------------------------------ */
/* malloc: a worker replaced by another                                 */

/* A server replaces a worker thread by another, which frees what the
 * first allocated (larson).  The first's free slots are left for the
 * thread that takes its place, not spread on the global lists, and the
 * successor, whose first call frees one of the first's objects, joins
 * the first's owner group: its frees of the rest are its own group's. */
enum { HEIR_OBJS = 600, HEIR_SIZE = 12 };
struct heir {
    void *live[HEIR_OBJS];
    unsigned group_first, group_next;
};

static void *first_worker(void *arg)
{
    struct heir *h = arg;
    void *gone[HEIR_OBJS];
    for (int i = 0; i < HEIR_OBJS; i++) {
        h->live[i] = lfgc_malloc(HEIR_SIZE);
        gone[i] = lfgc_malloc(HEIR_SIZE);
    }
    for (int i = 0; i < HEIR_OBJS; i++)
        lfgc_free(gone[i]);
    h->group_first = lf_tl_cache->free_group;
    return NULL;
}

static void *next_worker(void *arg)
{
    struct heir *h = arg;
    lfgc_free(h->live[0]);
    h->group_next = lf_tl_cache->free_group;
    for (int i = 1; i < HEIR_OBJS; i++)
        lfgc_free(h->live[i]);
    return NULL;
}

Test(static_link, a_replaced_workers_slots_go_to_its_successor)
{
    GC_INIT();
    lfgc_free(lfgc_malloc(HEIR_SIZE));
    static struct heir h;
    struct class_kind *ck = class_kind_of(lf_malloc_class[HEIR_SIZE], KIND_MALLOC);
    pthread_t t;
    cr_assert_eq(tu_real_pthread_create(&t, NULL, first_worker, &h), 0);
    tu_real_pthread_join(t, NULL);
    uint32_t global = ck->free_count;
    cr_assert_eq(tu_real_pthread_create(&t, NULL, next_worker, &h), 0);
    tu_real_pthread_join(t, NULL);
    cr_assert_lt(global, 64, "the leaving worker's %u free slots went to the global list",
                 global);
    cr_assert_eq(h.group_next, h.group_first,
                 "the successor joined group %u, not its predecessor's %u", h.group_next,
                 h.group_first);
}

/* ------------------------------------------------------------------ */
/* Metadata pages                                                      */

/* A span is placed after asking the blacklist about its chunks; a region
 * that no word has hit must not get a page of the map for that (a read
 * makes the page resident, of zeroes, on every kernel: mincore counts a
 * mapped zero page, and some kernels give a fresh page). */
Test(metadata, blacklist_pages_only_where_words_hit)
{
    GC_INIT();
    static void *keep[NUM_SMALL_CLASSES];
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        /* Just above the class below, so that the extra byte that
         * interior pointers add keeps the request in class c. */
        keep[c] = GC_malloc(c ? lf_regions[c - 1].size + 1 : 1);
        cr_assert_not_null(keep[c]);
    }
    unsigned unhit = 0;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        const struct region *r = &lf_regions[c];
        cr_assert_geq(r->next_chunk, 1, "class %u: no span was claimed", c);
        uint8_t *entry = &lf_blacklist[r->start >> CHUNK_SHIFT];
        if (r->bl_resident)
            continue;           /* a word did hit it */
        void *page = (void *)((uintptr_t)entry & ~(uintptr_t)(PAGE_SIZE - 1));
        unsigned char v = 0;
        cr_assert_eq(mincore(page, PAGE_SIZE, &v), 0, "mincore: %s", strerror(errno));
        cr_assert_eq(v & 1, 0, "class %u (%llu bytes): a page of the blacklist is resident "
                     "though no word hit the region", c, (unsigned long long)r->size);
        unhit++;
    }
    cr_assert_geq(unhit, NUM_SMALL_CLASSES / 2, "only %u regions without a hit", unhit);
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++)
        keep[c] = NULL;
}

/* Resident pages of the chunk map over [lo, hi) of the address space. */
static size_t chunk_map_resident(uint64_t lo, uint64_t hi)
{
    uintptr_t a = (uintptr_t)&lf_chunk_map[chunk_entry(lo)] & ~(uintptr_t)(PAGE_SIZE - 1);
    uintptr_t b = (uintptr_t)&lf_chunk_map[chunk_entry(hi)];
    size_t pages = (b - a + PAGE_SIZE - 1) / PAGE_SIZE;
    unsigned char *v = malloc(pages);
    cr_assert_not_null(v);
    cr_assert_eq(mincore((void *)a, pages * PAGE_SIZE, v), 0, "mincore: %s", strerror(errno));
    size_t n = 0;
    for (size_t i = 0; i < pages; i++)
        n += v[i] & 1;
    free(v);
    return n;
}

/* Words that land in a region past its frontier (data that is no
 * pointer, pointer-sized numbers) must not make pages of the chunk map
 * resident: a page covers 64 MiB of a region, and reading it maps one
 * (the zero page, or on some kernels a fresh page).  Words are planted
 * in a root, one per 64 MiB of class 4's region past its frontier, and in
 * its first page: the latter still pins the object it points to. */
#define FAR_WORDS 256
static uintptr_t far_words[FAR_WORDS + 1];

Test(metadata, words_past_a_region_s_frontier_read_no_chunk_map)
{
    GC_INIT();
    const unsigned c = 4;
    const struct region *r = &lf_regions[c];
    void **kept = GC_malloc(r->size - 1);
    cr_assert_not_null(kept);
    cr_assert_eq(lowfat_index(kept) - LOWFAT_FIRST_REGION, c);
    kept[0] = kept;
    uint64_t window = (uint64_t)PAGE_SIZE / CHUNK_ENTRY * CHUNK_SIZE;   /* a page's worth */
    uint64_t from = (r->start + ((r->next_chunk + 1) << CHUNK_SHIFT) + 2 * window) & ~(window - 1);
    cr_assert_lt(from + FAR_WORDS * window, r->usable_end, "region too small for the test");
    size_t before = chunk_map_resident(from, from + FAR_WORDS * window);
    for (unsigned i = 0; i < FAR_WORDS; i++)
        far_words[i] = from + i * window + 8 * r->size + 8;
    far_words[FAR_WORDS] = (uintptr_t)kept + 8;
    GC_add_roots(far_words, far_words + FAR_WORDS + 1);
    uintptr_t hidden = (uintptr_t)GC_HIDE_POINTER(kept);
    kept = NULL;
    GC_gcollect();
    GC_gcollect();
    size_t after = chunk_map_resident(from, from + FAR_WORDS * window);
    cr_assert_leq(after, before + 2, "%zu pages of the chunk map resident past the frontier after "
                  "two collections, %zu before", after, before);
    void **back = GC_REVEAL_POINTER(hidden);
    cr_assert_eq(back[0], (void *)back, "the object a root points into was not kept");
    GC_remove_roots(far_words, far_words + FAR_WORDS + 1);
}

/* With interior pointers off, stack words are first taken to their
 * object's base (lf_mark_stack_range): the same holds there. */
static TU_NOINLINE size_t far_stack_words_collect(uint64_t from, uint64_t window)
{
    volatile uintptr_t words[FAR_WORDS];
    for (unsigned i = 0; i < FAR_WORDS; i++)
        words[i] = from + i * window + 24;
    GC_gcollect();
    uintptr_t sum = 0;
    for (unsigned i = 0; i < FAR_WORDS; i++)
        sum += words[i];
    return (size_t)sum;
}

Test(metadata, stack_words_past_a_region_s_frontier_read_no_chunk_map)
{
    GC_set_all_interior_pointers(0);
    GC_INIT();
    cr_assert(lf_base_only, "interior pointers are still on");
    const unsigned c = 4;
    const struct region *r = &lf_regions[c];
    void **kept = GC_malloc(r->size);
    cr_assert_not_null(kept);
    cr_assert_eq(lowfat_index(kept) - LOWFAT_FIRST_REGION, c);
    kept[1] = kept;
    uint64_t window = (uint64_t)PAGE_SIZE / CHUNK_ENTRY * CHUNK_SIZE;
    uint64_t from = (r->start + ((r->next_chunk + 1) << CHUNK_SHIFT) + 2 * window) & ~(window - 1);
    cr_assert_lt(from + FAR_WORDS * window, r->usable_end, "region too small for the test");
    size_t before = chunk_map_resident(from, from + FAR_WORDS * window);
    far_stack_words_collect(from, window);
    size_t after = chunk_map_resident(from, from + FAR_WORDS * window);
    cr_assert_leq(after, before + 2, "%zu pages of the chunk map resident past the frontier after "
                  "a collection, %zu before", after, before);
    cr_assert_eq(kept[1], (void *)kept, "an object the stack points to was not kept");
}

/* lf_blacklisted keeps, per region, whether the page of the map holding
 * its first chunk's entry is resident.  A class's chunks start some MiB
 * into its region, so its first 4096 chunks' entries can run onto the
 * next page: a hit recorded there must be seen though that first page is
 * known to hold none. */
Test(metadata, blacklist_hit_on_the_page_after_a_region_s_first_is_seen)
{
    GC_INIT();
    unsigned c = NUM_SMALL_CLASSES - 1;
    struct region *r = &lf_regions[c];
    cr_assert(lf_region_map_metadata(r));
    uint8_t *first = &lf_blacklist[r->start >> CHUNK_SHIFT];
    uint64_t to_next_page = PAGE_SIZE - ((uintptr_t)first & (PAGE_SIZE - 1));
    cr_assert_lt(to_next_page, PAGE_SIZE, "class %u's first entry starts a page: the test "
                 "needs it inside one", c);
    uint64_t j = to_next_page + 8;          /* on the next page, below 4096 */
    cr_assert_lt(j, PAGE_SIZE);
    lock();
    r->bl_resident = 0;
    r->bl_clean_gc = (uint32_t)GC_gc_no + 1;        /* the first page: no hit */
    first[j] = lf_bl_epoch;
    bool hit = lf_blacklisted(r, j);
    first[j] = 0;
    unlock();
    cr_assert(hit, "a hit on chunk %llu of class %u, on the map's page after the region's "
              "first, was not seen", (unsigned long long)j, c);
}

/* The chunk map and the free map are one table (internal.h): a class in
 * use costs a single page of it, where two maps cost two.  Every small
 * class gets a malloc'ed object; the table's resident pages must then
 * number at most the classes with metadata, and each object's chunk must
 * read as malloc's kind in the one and as its class in the other.  The
 * span entries of a class's first chunks are in a table all classes
 * share: the regions' own span tables stay untouched. */
Test(metadata, a_class_in_use_costs_one_page_of_tables)
{
    static void *keep[NUM_SMALL_CLASSES];
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        keep[c] = lfgc_malloc(c ? lf_regions[c - 1].size + 1 : 1);
        cr_assert_not_null(keep[c]);
        cr_assert_eq(lowfat_index(keep[c]) - LOWFAT_FIRST_REGION, c,
                     "request for class %u landed elsewhere", c);
    }
    unsigned classes = 0;
    for (unsigned c = 0; c < NUM_CLASSES; c++)
        classes += lf_regions[c].mapped;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        uint64_t e = chunk_entry((uintptr_t)keep[c]);
        cr_assert_eq(lf_chunk_map[e], lf_malloc_small_kind + 1, "class %u: chunk map", c);
        cr_assert_eq((lf_free_map[e] - 1) % FREE_GROUP_STRIDE, c, "class %u: free map", c);
        cr_assert_eq((uintptr_t)&lf_chunk_map[e] / PAGE_SIZE, (uintptr_t)&lf_free_map[e] / PAGE_SIZE,
                     "class %u: its two bytes on different pages", c);
    }
    size_t bytes = chunk_entry(LOWFAT_HEAP_END) + 1;
    size_t pages = (bytes + PAGE_SIZE - 1) / PAGE_SIZE;
    unsigned char *v = malloc(pages);
    cr_assert_not_null(v);
    cr_assert_eq(mincore(lf_chunk_map, pages * PAGE_SIZE, v), 0, "mincore: %s", strerror(errno));
    size_t resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += v[i] & 1;
    free(v);
    cr_assert_geq(resident, NUM_SMALL_CLASSES / 2, "only %zu pages resident: mincore unreliable?",
                  resident);
    cr_assert_leq(resident, classes, "%zu resident pages of the chunk and free maps for %u "
                  "classes in use", resident, classes);
    /* Each class has one chunk: its span entry is in the shared table,
     * and no page of the region's own span table is resident. */
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        const struct region *r = &lf_regions[c];
        uint64_t j = span_index_of(r, (uintptr_t)keep[c]);
        cr_assert_lt(j, SPAN_HEAD_CHUNKS, "class %u: %llu chunks", c, (unsigned long long)j);
        const struct span *s = span_at(r, j);
        cr_assert_eq(s->state, SPAN_SWEPT, "class %u: its span's state %u", c, s->state);
        cr_assert_eq(span_chunk_index(r, s), j, "class %u: entry and index disagree", c);
        unsigned char in = 0;
        cr_assert_eq(mincore(r->spans, PAGE_SIZE, &in), 0, "mincore: %s", strerror(errno));
        cr_assert_eq(in & 1, 0, "class %u: a page of its own span table is resident", c);
    }
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++)
        lfgc_free(keep[c]);
}

/* A thread's record (threads.c: its fields, then its cache) spans four
 * pages; a thread touches two of them whether it only mallocs (the
 * fields, then malloc's lists, remote batches and free-path tables) or
 * only uses the collector (the fields, and the collector's lists from a
 * page boundary).  With the cache first and the fields last, each touched
 * three. */
struct record_probe {
    bool collector;
    void *remote;                   /* freed by the thread: a remote free */
    size_t resident, pages;
    void *keep[NUM_SMALL_CLASSES];  /* on the main thread's stack: a root */
};
/* Both probes hold their records until both have looked: a record reused
 * keeps the pages its first thread wrote. */
static pthread_barrier_t record_barrier;

static void *record_worker(void *arg)
{
    struct record_probe *pr = arg;
    void **keep = pr->keep;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        size_t n = c ? lf_regions[c - 1].size + 1 : 1;
        keep[c] = pr->collector ? (c & 1 ? GC_malloc_atomic(n) : GC_malloc(n)) : lfgc_malloc(n);
        memset(keep[c], 1, n);
    }
    if (!pr->collector) {
        for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++)
            lfgc_free(keep[c]);
        lfgc_free(pr->remote);
    }
    /* The record is mapped on its own; the cache starts in its first page.
     * Written pages are the ones pagemap says are present and this
     * process's alone (bit 56): a page only read maps the shared zero
     * page, which counts for nothing. */
    uintptr_t rec = (uintptr_t)lf_tl_cache & ~(uintptr_t)(PAGE_SIZE - 1);
    pr->pages = (((uintptr_t)lf_tl_cache + sizeof(struct thread_cache)) - rec + PAGE_SIZE - 1) /
                PAGE_SIZE;
    int fd = open("/proc/self/pagemap", O_RDONLY);
    cr_assert_geq(fd, 0, "/proc/self/pagemap: %s", strerror(errno));
    pr->resident = 0;
    for (size_t i = 0; i < pr->pages; i++) {
        uint64_t e = 0;
        cr_assert_eq(pread(fd, &e, sizeof e, (off_t)((rec / PAGE_SIZE + i) * 8)), sizeof e);
        pr->resident += (e >> 63 & 1) && (e >> 56 & 1);
    }
    close(fd);
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++)
        keep[c] = NULL;
    pthread_barrier_wait(&record_barrier);
    return NULL;
}

Test(metadata, a_thread_touches_two_pages_of_its_record)
{
    GC_INIT();
    struct record_probe pr[2];
    pthread_t t[2];
    pthread_barrier_init(&record_barrier, NULL, 2);
    for (int collector = 0; collector < 2; collector++) {
        pr[collector] = (struct record_probe){.collector = collector, .remote = lfgc_malloc(40)};
        cr_assert_eq(tu_real_pthread_create(&t[collector], NULL, record_worker, &pr[collector]), 0);
    }
    for (int collector = 0; collector < 2; collector++)
        tu_real_pthread_join(t[collector], NULL);
    pthread_barrier_destroy(&record_barrier);
    for (int collector = 0; collector < 2; collector++) {
        cr_assert_geq(pr[collector].pages, 4, "a record of %zu pages", pr[collector].pages);
        cr_assert_eq(pr[collector].resident, 2, "a thread that %s touched %zu of the %zu pages "
                     "of its record", collector ? "only used the collector" : "only malloc'ed",
                     pr[collector].resident, pr[collector].pages);
    }
    lfgc_free(pr[1].remote);
}

/* A span taken empty is linked a page at a time (two slots at least): one
 * object of a large class leaves the rest of its span untouched, not a
 * batch of eight slots' pages.  Both malloc's kind and the collector's. */
static size_t resident_pages_of_chunk(const void *p)
{
    uintptr_t chunk = (uintptr_t)p & ~(CHUNK_SIZE - 1);
    unsigned char v[CHUNK_SIZE / PAGE_SIZE];
    cr_assert_eq(mincore((void *)chunk, CHUNK_SIZE, v), 0, "mincore: %s", strerror(errno));
    size_t n = 0;
    for (size_t i = 0; i < sizeof v; i++)
        n += v[i] & 1;
    return n;
}

Test(metadata, one_large_slot_touches_two_pages_of_its_span)
{
    GC_INIT();
    void *m = lfgc_malloc(4000), *g = GC_malloc_atomic(4000);
    cr_assert_not_null(m);
    cr_assert_not_null(g);
    cr_assert_eq(lowfat_size(m), 4096, "malloc(4000) in a %zu-byte class", lowfat_size(m));
    memset(m, 0x5a, 4000);
    memset(g, 0xa5, 4000);
    size_t rm = resident_pages_of_chunk(m), rg = resident_pages_of_chunk(g);
    cr_assert_geq(rm, 1, "mincore does not see the object's page");
    cr_assert_leq(rm, 2, "malloc'ed 4 KiB object: %zu pages of its span resident", rm);
    cr_assert_leq(rg, 2, "collected 4 KiB object: %zu pages of its span resident", rg);
    /* The slot after each is linked, free: freeing it is refused. */
    cr_assert_not(lfgc_is_live((char *)m + 4096));
    cr_assert_not(lfgc_is_live((char *)g + 4096));
    lfgc_free(m);
}
