/* blacklist.c: chunks that words which are not pointers hit.
 *
 * A word in the roots or in a scanned object that lands in a chunk no
 * span owns (never handed out, or pooled) is no pointer to anything yet,
 * but it would pin whatever is allocated there later, with all that
 * object reaches.  The marker records such hits (mark.c, off the path of
 * words that hit spans in use) by writing the current epoch into a byte
 * per chunk; span allocation then leaves those chunks to pointer-free and
 * uncollectable kinds, which a false reference can pin only one object
 * of.  The epoch advances at each full collection, which rescans
 * everything, and a chunk that none of the last two hit is usable again.
 * Before the first allocation, the data segments are scanned once so that
 * the words already there (the dynamic loader's, the libraries') are
 * known before anything is placed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

LF_UNSCANNED uint8_t *lf_blacklist;
LF_UNSCANNED_DATA uint8_t lf_bl_epoch = 1;

/* A chunk stays blacklisted while hit by one of the last BL_EPOCHS full
 * collections (or a minor collection since). */
#define BL_EPOCHS 2

LF_MALLOC_TEXT bool lf_blacklist_init(void)
{
    uint64_t bytes = LOWFAT_HEAP_END >> CHUNK_SHIFT;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "lfgc: cannot map the blacklist (%llu MiB of address "
                "space): %s\n", (unsigned long long)(bytes >> 20), strerror(errno));
        return false;
    }
    lf_blacklist = p;
    for (unsigned c = 0; c < NUM_CLASSES; c++)
        lf_blacklist_horizon(&lf_regions[c]);
    return true;
}

/* Hits are recorded up to twice the used part of a region plus
 * BL_HORIZON: where the region can grow before the next collection
 * records them again.  Recording everywhere would let random words over
 * terabytes of regions touch a page of the map each (4 KiB per 256 MiB
 * of region). */
#define BL_HORIZON ((uint64_t)256 << 20)

LF_MALLOC_TEXT void lf_blacklist_horizon(struct region *r)
{
    uint64_t room = r->usable_end > r->start ? r->usable_end - r->start : 0;
    uint64_t want = 2 * (r->next_chunk << CHUNK_SHIFT) + BL_HORIZON;
    r->bl_limit = want < room ? want : room;
}

void lf_blacklist_new_epoch(void)
{
    lf_bl_epoch = lf_bl_epoch == 255 ? 1 : lf_bl_epoch + 1;
}

bool lf_blacklisted(struct region *r, uint64_t j)
{
    /* A page of the map that no hit has written holds only zeroes, and
     * reading it would make it resident (the zero page, or on some kernels
     * a new one) in every region with a span, hit or not: ask the kernel
     * first.  The marker's store is what makes a page resident, and the
     * answer for the page of a region's first entry (its first chunks',
     * not always 4096 of them: the chunks start some MiB into the region)
     * is kept (lock held): a yes for good, a no until the next collection. */
    uintptr_t first = (uintptr_t)&lf_blacklist[r->start >> CHUNK_SHIFT];
    uint8_t *entry = &lf_blacklist[(r->start >> CHUNK_SHIFT) + j];
    bool first_page = (((uintptr_t)entry ^ first) & ~(uintptr_t)(PAGE_SIZE - 1)) == 0;
    if (!first_page || !r->bl_resident) {
        /* Only a collection writes hits: a no stays true until the next. */
        if (first_page && r->bl_clean_gc == (uint32_t)GC_gc_no + 1)
            return false;
        unsigned char in_core = 0;
        void *page = (void *)((uintptr_t)entry & ~(uintptr_t)(PAGE_SIZE - 1));
        if (mincore(page, PAGE_SIZE, &in_core) == 0 && !(in_core & 1)) {
            if (first_page)
                r->bl_clean_gc = (uint32_t)GC_gc_no + 1;
            return false;
        }
        if (first_page)
            r->bl_resident = 1;
    }
    uint8_t v = *entry;
    if (!v)
        return false;
    unsigned age = (unsigned)(lf_bl_epoch + 255 - v) % 255;
    return age < BL_EPOCHS;
}

/* The roots before anything is allocated: nothing is in use, so every
 * word that lands in a region only blacklists its chunk. */
void lf_blacklist_initial_scan(void)
{
    if (!lf_layout_ok)
        return;
    lf_mark_begin(0);
    lf_roots_mark();
    lf_mark_finish();
}
