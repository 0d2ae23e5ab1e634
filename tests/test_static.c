/* test_static.c: lfgc linked statically (liblfgc.a), and white-box checks
 * of layout edges that would take tens of GiB to reach through the API.
 *
 * Linked with the archive, this program can reach the library's hidden
 * internals (gc/internal.h): the layout tests move a region's frontier
 * to its end instead of filling 32 GiB.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */
#include "../gc/internal.h"

/* ------------------------------------------------------------------ */
/* Region edges                                                        */

/* The slot of the successor region that starts before it (its "partial
 * first slot"), or 0 when the successor starts on a slot boundary. */
static uint64_t partial_first_slot(const struct region *next)
{
    if (!next->magic)
        return 0;
    uint64_t base = next->start / next->size * next->size;
    return base < next->start ? base : 0;
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
