/* sweep.c: what happens to spans after marking.
 *
 * Right after the mark, every span's marks are counted (a popcount over
 * its part of the bitmap): spans with no mark go back to their region's
 * pool at once (and large ones give their pages back), spans with some go
 * on their class and kind's unswept list.  The unswept spans are swept
 * lazily, one at a time, when allocation needs a batch of free slots:
 * dead slots are zeroed (for kinds whose objects are cleared) and linked
 * into a free list in address order.  The counts also say which spans
 * hold old objects (dirty.c) and which are aging.
 */
#include <string.h>

#include "internal.h"

/* When collections may be minor, nursery spans with survivors become
 * aging rather than old, after a full collection as after a minor one: the
 * next minor collection gives their objects one more chance to die young.
 * (A full collection that finds structures under construction would
 * otherwise make them old, and garbage soon after.) */
void lf_sweep_after_mark(bool generational)
{
    uint64_t live_ptrful = 0, live_ptrfree = 0, live_aging = 0, aging_ptrful = 0;
    uint64_t aging_spans = 0;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped || !r->next_chunk)
            continue;
        /* Backwards, so that each unswept list comes out in address order. */
        uint64_t j = r->next_chunk;
        while (j > 0) {
            j -= r->span_chunks;
            struct span *s = span_at(r, j);
            bool nursery = s->nursery;
            s->old = s->nursery = s->aging = 0;
            uint8_t mapped_kind = lf_chunk_map[region_chunk_entry(r, j)];
            if (s->state == SPAN_UNUSED) {
                lf_assert(!mapped_kind);
                continue;
            }
            lf_assert(mapped_kind == s->kind + 1 && lf_kinds[s->kind].in_use);
            const struct kind *kd = &lf_kinds[s->kind];
            if (kd->manual)
                continue;               /* malloc's: freed explicitly only */
            uint64_t qa, qb;
            lf_span_slots(r, j, &qa, &qb);
            size_t n = lf_bits_count(kd->uncollectable ? r->alloc_bits : r->mark_bits,
                                     qa - r->q0, qb - r->q0);
            lf_assert(n <= qb - qa && (!r->large || n <= 1));
            uint64_t bytes = r->large ? s->obj_bytes * n : r->size * n;
            if (kd->ptrfree)
                live_ptrfree += bytes;
            else
                live_ptrful += bytes;
            if (kd->uncollectable)
                continue;
            if (generational && nursery && n > 0) {
                s->aging = 1;
                aging_spans++;
                live_aging += bytes;
                if (!kd->ptrfree)
                    aging_ptrful += bytes;
            } else {
                s->old = n > 0 && !kd->ptrfree;
            }
            if (n == 0) {
                lf_span_free(r, s);
            } else if (r->large || n == qb - qa) {
                s->state = SPAN_SWEPT;      /* nothing to reclaim */
            } else {
                struct class_kind *ck = class_kind_of(c, s->kind);
                s->state = SPAN_UNSWEPT;
                s->next = ck->unswept;
                ck->unswept = s;
            }
        }
    }
    /* The large spans freed above: their pages in one call (the world is
     * stopped, so that no other CPU needs its TLB flushed). */
    lf_pages_release_flush();
    /* The threads' lists' free slots were marked, not found live. */
    live_ptrful = sub_floor0(live_ptrful, lf_hs.cached_ptrful);
    live_ptrfree = sub_floor0(live_ptrfree, lf_hs.cached_ptrfree);
    live_aging = sub_floor0(live_aging, lf_hs.cached_aging);
    aging_ptrful = sub_floor0(aging_ptrful, lf_hs.cached_aging_ptrful);
    uint64_t before = lf_hs.live_bytes + lf_hs.allocd_since_gc;
    lf_hs.live_ptrful = live_ptrful;
    lf_hs.live_ptrfree = live_ptrfree;
    lf_hs.live_bytes = live_ptrful + live_ptrfree;
    lf_hs.live_aging = live_aging;
    lf_hs.live_aging_ptrful = aging_ptrful;
    lf_hs.aging_spans = aging_spans;
    lf_hs.reclaimed_last = before > lf_hs.live_bytes ? before - lf_hs.live_bytes : 0;
}

/* Link the slots of [lo, hi) with plain pointers, each to the next, and
 * zero the rest of each when `clear` (else the second word only).  One
 * pass, each slot written once, 16 bytes at a time (slots are multiples
 * of 16): a memset then a linking pass cost a store miss more per slot.
 * (Written so that the compiler does not make the zeroing a call to
 * memset per slot.) */
typedef uint64_t lf_pair __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) void link_plain(char *lo, char *hi, uint64_t size,
                                                             bool clear)
{
    const uint64_t pairs = clear ? size / 16 : 1;
    for (char *slot = lo; slot < hi; slot += size) {
        lf_pair *v = (lf_pair *)slot;
        v[0] = (lf_pair){(uint64_t)(slot + size), 0};
        for (uint64_t k = 1; k < pairs; k++) {
            v[k] = (lf_pair){0, 0};
            __asm__("" : : "r"(v) : "memory");
        }
    }
}

/* The same for the thread caches' lists: each slot's first pair is its
 * tagged link and the canary (slot_make_free), the rest zeros when
 * `clear`; the run's last slot links to nothing (the caller links runs).
 * Small slots are written once, pair by pair: a memset of the run first
 * wrote each 16-byte slot twice and cost a call per run (ECL's conses:
 * docs/performance.md).  Larger ones keep the memset, which streams the
 * zeros faster than pairs do, and rewrite the first pair only. */
#define TAGGED_ONE_PASS_MAX 128u

static inline __attribute__((always_inline)) void link_tagged(char *lo, char *hi, uint64_t size,
                                                              bool clear)
{
    const uint64_t canary = lf_free_canary;
    if (clear && size > TAGGED_ONE_PASS_MAX) {
        memset(lo, 0, (size_t)(hi - lo));
        clear = false;
    }
    const uint64_t pairs = clear ? size / 16 : 1;
    for (char *slot = lo; slot < hi; slot += size) {
        lf_pair *v = (lf_pair *)slot;
        v[0] = (lf_pair){(uint64_t)link_encode(slot + size), canary};
        for (uint64_t k = 1; k < pairs; k++) {
            v[k] = (lf_pair){0, 0};
            __asm__("" : : "r"(v) : "memory");
        }
    }
    ((void **)(hi - size))[0] = link_encode(NULL);
}

/* Sweep bitmap indices [*next, end) of region r until `want` dead slots
 * are found: return them as a free list in address order (NULL, count 0,
 * if none) and advance *next past what was examined.  Dead slots come in
 * runs (whole dead structures), linked either tagged with canaries for
 * the thread caches (link_tagged), or with plain pointers for
 * GC_generic_malloc_many (`plain`, link_plain), whose lists then need no
 * second pass to convert them; both clear as they link when `clear`. */
static inline __attribute__((always_inline)) void *
sweep_slots(struct region *r, uint64_t *next, uint64_t end, size_t want, bool clear,
            size_t *count, const bool plain)
{
    const uint64_t size = r->size;
    const uint64_t *bits = r->mark_bits;
    void *head = NULL;
    void **prev = NULL;
    size_t n = 0;
    uint64_t i = *next;
    while (i < end && n < want) {
        /* Skip marked slots, then find the end of the dead run. */
        uint64_t w = bits[i >> 6] >> (i & 63);
        if (w & 1) {
            uint64_t live = ~w;
            i += live ? (uint64_t)__builtin_ctzll(live) : 64;
            continue;
        }
        uint64_t j = i;
        uint64_t stop = end - i > want - n ? i + (want - n) : end;
        while (j < stop) {
            uint64_t v = bits[j >> 6] >> (j & 63);
            if (v & 1)
                break;
            j += v ? (uint64_t)__builtin_ctzll(v) : 64 - (j & 63);
        }
        if (j > stop)
            j = stop;
        char *lo = (char *)((i + r->q0) * size);
        char *hi = (char *)((j + r->q0) * size);
        if (plain) {
            /* One pass: each slot is written once, link and zeros. */
            if (prev)
                prev[0] = lo;
            else
                head = lo;
            link_plain(lo, hi, size, clear);
            prev = (void **)(hi - size);
            prev[0] = NULL;
        } else {
            if (prev)
                prev[0] = link_encode(lo);
            else
                head = lo;
            link_tagged(lo, hi, size, clear);
            prev = (void **)(hi - size);
        }
        n += j - i;
        i = j;
    }
    *next = i < end ? i : end;
    *count = n;
    return head;
}

void *lf_sweep_slots(struct region *r, uint64_t *next, uint64_t end, size_t want,
                     bool clear, size_t *count)
{
    return sweep_slots(r, next, end, want, clear, count, false);
}

void *lf_sweep_slots_plain(struct region *r, uint64_t *next, uint64_t end, size_t want,
                           bool clear, size_t *count)
{
    return sweep_slots(r, next, end, want, clear, count, true);
}
