/* lfgc.h: lfgc's own extensions, beyond bdwgc's interface.
 *
 * Include after (or instead of) gc.h; both can be used together.
 */
#ifndef LFGC_H
#define LFGC_H

#include <stddef.h>
#include <stdint.h>
#include "gc.h"
#include "lowfat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Figures of the collector since start-up; times in nanoseconds. */
struct lfgc_stats {
    uint64_t collections;       /* completed collections                    */
    uint64_t heap_bytes;        /* as GC_get_heap_size()                    */
    uint64_t live_bytes;        /* bytes found live by the last collection  */
    uint64_t reclaimed_bytes;   /* bytes found dead by the last collection  */
    uint64_t total_allocated;   /* as GC_get_total_bytes()                  */
    uint64_t last_pause_ns;     /* world-stopped time of the last collection */
    uint64_t max_pause_ns;      /* longest world-stopped time               */
    uint64_t total_pause_ns;    /* sum of all world-stopped times           */
    uint64_t mark_stack_overflows; /* times the mark stack overflowed      */
    uint64_t minor_collections; /* of the collections, how many were minor  */
};

/* Copy the current figures into *out (under the lock, or the lock held
 * by the collection-event callback it is called from). */
extern void lfgc_get_stats(struct lfgc_stats *out);

/* Collect now, minor if possible: trace only from the roots, the objects
 * allocated since the last collection and the older objects on pages
 * written since then (generational collection, on by default where the
 * kernel can track writes: see docs/design.md).  Full otherwise.  Returns
 * 1 if the collection was minor, 0 if it was full. */
extern int lfgc_collect_minor(void);

/* Copy the world-stopped times of the most recent collections (up to
 * `max`, oldest first, at most the last 4096) into ns[]; returns how many
 * were copied.  For percentiles in benchmarks. */
extern size_t lfgc_get_pauses(uint64_t *ns, size_t max);

/* Nonzero when p points into an object that is allocated and that the last
 * collection did not find dead; zero for free slots, reclaimed objects and
 * addresses outside the heap.  For tests and debugging: the answer for an
 * object the program can no longer reach is only meaningful right after a
 * collection. */
extern int lfgc_is_live(const void *p);

/* Never write-protect the heap pages of [lo, hi): every minor collection
 * rescans the old objects on them, as if they had been written.  For
 * memory that something the kernel cannot track writes into, often and
 * for a long time (an io_uring registered buffer, an RDMA memory region,
 * a buffer mapped for device DMA), so that the program need not call
 * GC_end_stubborn_change after every write.  It covers the heap memory
 * lfgc has handed out so far in the range, including objects allocated
 * there later; parts of the range outside the heap are ignored (roots are
 * scanned at every collection anyway).  There is no undoing it: the cost
 * is a rescan of those pages at each minor collection.  hi < lo is
 * reported through the warn proc and ignored. */
extern void lfgc_exclude_from_write_tracking(const void *lo, const void *hi);

/* What the slot that p points into is, as far as the collector knows: */
enum lfgc_slot_state {
    LFGC_SLOT_NOT_HEAP = 0,  /* no object: p is outside the heap, in a part
                                no span in use owns, or past the end of a
                                large object                               */
    LFGC_SLOT_FREE = 1,      /* a free slot, ready to be allocated          */
    LFGC_SLOT_ALLOCATED = 2, /* an allocated object, not found dead: what
                                lfgc_is_live() reports as live             */
    LFGC_SLOT_DEAD = 3,      /* not allocated, awaiting the lazy sweep: an
                                object the last collection found
                                unreachable, or a slot of a span being
                                swept that the sweep has not reached yet   */
};

/* The state of the slot p points into (p may be interior).  Lock-free:
 * exact when no other thread allocates, frees or sweeps meanwhile. */
extern enum lfgc_slot_state lfgc_slot_state(const void *p);

/* Call fn(base, bytes, kind, arg) for every allocated object (state
 * LFGC_SLOT_ALLOCATED): its base, its usable size (GC_size) and its kind
 * (0 pointer-free as from GC_malloc_atomic, 1 normal as from GC_malloc, 2
 * uncollectable, 3 pointer-free uncollectable).  Objects come region by region (size class by size
 * class), in address order within one.  The walk stops when fn returns
 * nonzero, and returns that value (0 when it went through the heap).  It
 * runs with the allocation lock held: fn must not allocate from lfgc, free,
 * collect, or call anything else that takes the lock (GC_base, GC_size,
 * lfgc_slot_state and reading the objects are fine).  Other threads that
 * allocate meanwhile may or may not have their new objects visited. */
extern int lfgc_heap_walk(int (*fn)(void *base, size_t bytes, int kind, void *arg),
                          void *arg);

/* Check the heap's invariants: every span's state against the chunk map,
 * the span lists and pools, every free list (global and per thread: each
 * slot free, inside a span in use of its size class and kind, not marked
 * where the sweep would hand it out again, no cycle, no slot twice), the
 * sweep cursors, and the byte counts.  Stops the world while it runs.
 * Prints each problem on stderr and returns how many were found: 0 for a
 * sound heap.  A debugging aid: it takes time proportional to the heap.
 * (Builds configured with --enable-debug run it after every collection
 * and abort on a problem.) */
extern int lfgc_verify_heap(void);

#ifdef __cplusplus
}
#endif
#endif /* LFGC_H */
