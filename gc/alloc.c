/* alloc.c: allocation and explicit freeing.
 *
 * Small objects come from per-thread free lists (a pop, no lock, no
 * atomic); an empty list is refilled under the lock with a whole batch:
 * the global free list of the class and kind, else the next lazily swept
 * span, else a fresh span.  Large objects (a chunk or more) are one span
 * each.  The collection policy is applied where the heap would grow.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sched.h>
#include <unistd.h>

#include "internal.h"

LF_UNSCANNED uint64_t lf_free_canary;
LF_UNSCANNED_BSS struct thread_cache lf_empty_cache;
/* What free's fast path reads through lf_tl_free of a thread without a
 * cache: the free map's address, then magics, all zero (every free fails
 * the slot-base test and takes the slow path).  Only this much of a cache
 * is initialised data, the address being needed before any code runs; as
 * a whole cache it was 14 KiB of the data segment, which the first read
 * of any variable maps whole.  EMPTY_FREE is the cache it stands for. */
#define EMPTY_FREE_MAP_AT (offsetof(struct thread_cache, free_map_at) + 8 * FREE_MAP_AT(0))
#define EMPTY_FREE_BYTES                                                          \
    (offsetof(struct thread_cache, free_magic) + 8 * (FREE_MAGIC_OWN + 255) - EMPTY_FREE_MAP_AT)
LF_UNSCANNED_DATA uint8_t *lf_empty_free[EMPTY_FREE_BYTES / 8] = { lf_free_map_boot };
#define EMPTY_FREE ((struct thread_cache *)((char *)lf_empty_free - EMPTY_FREE_MAP_AT))
__thread struct thread_cache *lf_tl_cache __attribute__((tls_model("initial-exec"))) = &lf_empty_cache;
__thread struct thread_cache *lf_tl_free __attribute__((tls_model("initial-exec"))) = EMPTY_FREE;
/* The same variable, for liblfgc-malloc's free (see LF_PRIVATE_ABI). */
extern __thread struct thread_cache *LF_PRIVATE_TLS_CACHE(LF_PRIVATE_ABI)
    __attribute__((alias("lf_tl_free"), visibility("default")));
LFGC_EXPORT const uint64_t lfgc_private_layout LF_MALLOC_RODATA = LF_PRIVATE_LAYOUT;
/* malloc's table serves the collector's too, one entry on when a byte is
 * added to requests: one table of pages in every process, not two.  Until
 * lf_alloc_init fills it, every request reads class 0, whose list in the
 * empty cache is empty: the slow path, which initialises. */
LF_UNSCANNED_DATA const uint8_t *lf_request_class = lf_malloc_class + 1;
LF_UNSCANNED_DATA size_t lf_extra_bytes = 1;

static void groups_init(void);

/* What GC_all_interior_pointers decides for the collector's objects: a
 * byte more for each (so that a pointer just past one keeps it) and
 * base-only marking.  Malloc's objects take neither. */
LF_MALLOC_TEXT void lf_interior_setup(void)
{
    lf_extra_bytes = GC_all_interior_pointers ? 1 : 0;
    lf_base_only = !GC_all_interior_pointers;
    lf_request_class = lf_malloc_class + lf_extra_bytes;
}

LF_UNSCANNED bool lf_gc_objects_sized;

LF_MALLOC_TEXT void lf_alloc_init(void)
{
    unsigned c = 0;
    for (size_t n = 0; n <= SMALL_REQUEST_MAX + 1; n++) {
        while (c + 1 < NUM_CLASSES && lf_regions[c].size < n)
            c++;
        lf_malloc_class[n] = (uint8_t)c;
    }
    lf_interior_setup();
    /* The canary is the free map's address, so that free's fast path
     * has it in the register it reads the map with.  Never a heap
     * address (the map is made after the regions are reserved), and as
     * random as the kernel's placement of mappings; a program cannot
     * know it unless it reads a free slot, where any canary shows. */
    lf_free_canary = (uint64_t)(uintptr_t)lf_free_map;
    groups_init();
}

LF_MALLOC_TEXT void *lf_oom(size_t bytes)
{
    refused_check();            /* no heap: that is not running out of memory */
    GC_oom_func fn = GC_oom_fn;
    return fn ? fn(bytes) : NULL;
}

/* ------------------------------------------------------------------ */
/* Spans                                                               */

LF_MALLOC_TEXT static void span_set_kind(struct region *r, uint64_t j, unsigned kind)
{
    uint64_t first = region_chunk_entry(r, j);
    chunk_entries_set(lf_chunk_map, first, r->span_chunks, (uint8_t)(kind + 1));
    if (kind == KIND_MALLOC)
        chunk_entries_set(lf_free_map, first, r->span_chunks, (uint8_t)(r - lf_regions + 1));
}

/* Threads in each owner group (internal.h, FREE_GROUPS): changed with the
 * lock held, read without it by remote frees (a span of a group no
 * thread is in goes to the freeing thread's group). */
static LF_UNSCANNED unsigned group_threads[FREE_GROUPS];
/* When each group last gained a thread or lost its last: lock held. */
static LF_UNSCANNED uint64_t group_stamp[FREE_GROUPS], group_clock;
/* What the last thread of a group left in its cache of malloc's plain
 * kind, its lists and the spans it was linking, for the next thread to
 * join the group: handed over whole, with no walk, where the global lists
 * would have had the leaving thread walk them under the lock, and other
 * threads take them (a batch at a time, under the lock again) and
 * allocate in the group's chunks.  Lock held. */
static LF_UNSCANNED_BSS struct group_left {
    void *free[NUM_SMALL_CLASSES];
    struct sweep_cursor cursor[NUM_SMALL_CLASSES];
} group_left[FREE_GROUPS];
/* Whether group_left[g] holds anything: apart, so that asking, which
 * every thread's first refill does, reads no page of the 8 KiB table (a
 * read makes a page resident: the zero page, or on some kernels a fresh
 * one). */
static LF_UNSCANNED bool group_left_any[FREE_GROUPS];
static void group_left_take(struct thread_cache *tc, unsigned g);
/* Set while a thread registers on its first free: the group of the slot
 * it frees, when no thread is in that group (else -1). */
static __thread int tl_heir_of __attribute__((tls_model("initial-exec"))) = -1;

/* The group a new thread joins (lock held).  A thread whose first call
 * frees a slot of a group no thread is in takes over from that group's
 * last thread (a server's worker replaced by another, which frees what
 * the first allocated: larson).  Otherwise the group with fewest threads:
 * of the groups with none, the one whose last thread left last (a thread
 * that starts as another ends is likely its successor); of groups with
 * threads, the one joined longest ago. */
LF_MALLOC_TEXT static unsigned group_choose(void)
{
    int heir = tl_heir_of;
    if (heir >= 0 && !group_threads[heir])
        return (unsigned)heir;
    unsigned g = 0;
    for (unsigned i = 1; i < FREE_GROUPS; i++) {
        bool newer = group_stamp[i] > group_stamp[g];
        if (group_threads[i] < group_threads[g] ||
            (group_threads[i] == group_threads[g] && (group_threads[g] ? !newer : newer)))
            g = i;
    }
    return g;
}

LF_MALLOC_TEXT void lf_cache_arm_map(struct thread_cache *tc)
{
    if (!tc->free_grouped) {
        unsigned g = group_choose();
        group_stamp[g] = ++group_clock;
        /* Atomic: the remote free path reads the counts without the lock. */
        __atomic_fetch_add(&group_threads[g], 1, __ATOMIC_RELAXED);
        tc->free_group = (uint8_t)g;
        tc->free_grouped = 1;
        if (group_left_any[g])
            group_left_take(tc, g);
    }
    tc->free_map_at[FREE_MAP_AT(tc->free_group)] = __atomic_load_n(&lf_free_map, __ATOMIC_ACQUIRE);
}

LF_MALLOC_TEXT void lf_cache_arm_free(struct thread_cache *tc)
{
    lf_cache_arm_map(tc);
    if (!lf_heap_initialized)
        return;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++)
        tc->free_magic[FREE_MAGIC_OWN + c] = lowfat_magics[LOWFAT_FIRST_REGION + c];
}

/* The calling thread's id, as glibc records a mutex's owner
 * (lock_is_mine); 0 until asked, and in a child of fork. */
static __thread pid_t tl_tid __attribute__((tls_model("initial-exec")));

/* In a child of fork: only the calling thread (cache tc, or none) is
 * left in its group. */
LF_MALLOC_TEXT void lf_groups_after_fork(struct thread_cache *tc)
{
    tl_tid = 0;
    memset(group_threads, 0, sizeof group_threads);
    if (tc && tc->free_grouped)
        group_threads[tc->free_group] = 1;
}

LF_MALLOC_TEXT void lf_tl_cache_set(struct thread_cache *tc)
{
    lf_tl_cache = tc;
    lf_tl_free = tc == &lf_empty_cache
        ? EMPTY_FREE : (struct thread_cache *)((char *)tc - FREE_SHIFT(tc->free_group));
}

/* No mark bit in the span at chunk j (checked in debug builds): a span
 * out of use must have none, or its slots would pass for live ones when
 * it is swept again. */
static bool span_unmarked(const struct region *r, uint64_t j)
{
    uint64_t qa, qb;
    lf_span_slots(r, j, &qa, &qb);
    return !lf_bits_any(r->mark_bits, qa - r->q0, qb - r->q0);
}

/* Zero the slots of a span that held objects of another use before a kind
 * that reads its objects takes it.  A span taken empty is linked a batch
 * at a time (cache_refill), and until then its slots keep what they held;
 * a stale word that points at one makes the marker read it as an object
 * of the new kind: a leaf's integer taken for a gcj vtable pointer, or a
 * mark procedure handed another kind's data.  A pooled span's pages are
 * resident and zeroed whole; a released one kept only its partial pages
 * at either end (lf_span_release). */
LF_MALLOC_TEXT static void span_scrub(struct region *r, struct span *s, bool resident)
{
    uint64_t qa, qb;
    lf_span_slots(r, span_chunk_index(r, s), &qa, &qb);
    uint64_t first = qa * r->size, end = qb * r->size;
    if (resident) {
        memset((void *)first, 0, end - first);
    } else {
        uint64_t page_mask = ~(uint64_t)(PAGE_SIZE - 1);
        uint64_t a = (first + PAGE_SIZE - 1) & page_mask, b = end & page_mask;
        if (a > end)
            a = end;
        if (b < a)
            b = a;
        memset((void *)first, 0, a - first);
        memset((void *)b, 0, end - b);
    }
    s->dirty = 0;
}

/* Pages given back to the OS a batch of ranges at a time: freed large
 * malloc objects, and all that a collection gives back (idle spans, large
 * objects found dead, other classes' pooled room, the finalization
 * tables' tails).  Each madvise(MADV_DONTNEED) of a multi-threaded
 * process ends in a TLB flush on every CPU running one of its threads,
 * whatever the range's length (malloc_threadset's frees, and 600 calls in
 * Guile's workload: docs/performance.md).  process_madvise (Linux 6.13
 * for MADV_DONTNEED on the calling process, 6.14 for its PIDFD_SELF)
 * takes a vector of ranges and flushes once; where it is refused, each
 * range gets its madvise.  Lock held: a range in the batch is memory no
 * one writes until the flush (unused spans, which span_take flushes
 * before, and table pages past their entries). */
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#define PIDFD_SELF_PROCESS_ (-10001)        /* PIDFD_SELF_THREAD_GROUP */
#define RELEASE_RANGES 64
static LF_UNSCANNED struct iovec release_ranges[RELEASE_RANGES];
static LF_UNSCANNED unsigned release_count;
static LF_UNSCANNED bool release_one_by_one;    /* process_madvise refused */

LF_MALLOC_TEXT void lf_pages_release_flush(void)
{
    unsigned n = release_count;
    if (!n)
        return;
    release_count = 0;
    int saved_errno = errno;            /* free keeps errno, as glibc's does */
    long done = -1;
    if (n > 1 && !release_one_by_one) {
        done = syscall(SYS_process_madvise, PIDFD_SELF_PROCESS_, release_ranges, n,
                       MADV_DONTNEED, 0);
        if (done < 0 && errno != ENOMEM && errno != EAGAIN && errno != EINTR)
            release_one_by_one = true;
    }
    /* What it did not do (all, or the ranges past a failure), one range
     * at a time. */
    uint64_t skip = done > 0 ? (uint64_t)done : 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t len = release_ranges[i].iov_len;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        madvise((char *)release_ranges[i].iov_base + skip, len - skip, MADV_DONTNEED);
        skip = 0;
    }
    errno = saved_errno;
}

LF_MALLOC_TEXT void lf_pages_release_add(uint64_t base, uint64_t len)
{
    if (release_count) {
        /* Neighbours, or spans that share a page at their boundary
         * (neither in use), released one after the other (in chunk
         * order, or backwards as the sweep goes): one range. */
        struct iovec *last = &release_ranges[release_count - 1];
        uint64_t last_base = (uint64_t)(uintptr_t)last->iov_base;
        uint64_t last_end = last_base + last->iov_len;
        if (base <= last_end && base + len >= last_base) {
            uint64_t lo = base < last_base ? base : last_base;
            uint64_t hi = base + len > last_end ? base + len : last_end;
            last->iov_base = (void *)(uintptr_t)lo;
            last->iov_len = hi - lo;
            return;
        }
    }
    if (release_count == RELEASE_RANGES)
        lf_pages_release_flush();
    release_ranges[release_count].iov_base = (void *)(uintptr_t)base;
    release_ranges[release_count].iov_len = len;
    release_count++;
}

/* A span out of use becomes kind's (lock held); `resident`: it comes from
 * the pool, its pages mapped with the data they held. */
LF_MALLOC_TEXT static void span_take(struct region *r, struct span *s, unsigned kind, bool resident)
{
    lf_assert(s->state == SPAN_UNUSED);
    /* Pages of this span, or of a neighbour, may wait in the batch of
     * releases: they go before the span is written. */
    lf_assert(release_count == 0);
    if (unlikely(release_count))
        lf_pages_release_flush();
    if (!r->large && s->dirty && kind_reads_objects(&lf_kinds[kind]))
        span_scrub(r, s, resident);
    lf_assert(!lf_chunk_map[region_chunk_entry(r, span_chunk_index(r, s))]);
    lf_assert(span_unmarked(r, span_chunk_index(r, s)));
    s->next = NULL;
    s->kind = (uint8_t)kind;
    s->state = SPAN_SWEPT;
    s->nursery = !r->large;
    s->aging = 0;
    span_set_kind(r, span_chunk_index(r, s), kind);
}

/* Bytes a span counts for in the heap size: a small span its chunk, a
 * large one its object rounded to pages (the rest of its power-of-two
 * slot is never touched). */
LF_MALLOC_TEXT static uint64_t span_bytes(const struct region *r, const struct span *s)
{
    return r->large ? s->obj_bytes : (uint64_t)r->span_chunks << CHUNK_SHIFT;
}

/* May a span of this kind use chunk j?  Not if words that are no
 * pointers hit it (blacklist.c), nor if it starts at a multiple of 4 GiB:
 * there land the words that pack two 32-bit integers the second of which
 * is below 65536, whenever the program writes them (blacklisting only
 * sees those that are there before the chunk is used).  Pointer-free
 * kinds (such a word pins one object and nothing else) and uncollectable
 * ones (kept anyway) may use both. */
LF_MALLOC_TEXT static bool span_usable(struct region *r, uint64_t j, unsigned kind)
{
    if (lf_kinds[kind].ptrfree || lf_kinds[kind].uncollectable)
        return true;
    return (uint32_t)(r->start + (j << CHUNK_SHIFT)) != 0 && !lf_blacklisted(r, j);
}

/* Unlink and return the first span of *list that kind may use. */
LF_MALLOC_TEXT static struct span *list_take(struct region *r, struct span **list, unsigned kind)
{
    for (struct span **link = list; *link; link = &(*link)->next) {
        struct span *s = *link;
        if (span_usable(r, span_chunk_index(r, s), kind)) {
            *link = s->next;
            return s;
        }
    }
    return NULL;
}

/* A pooled span whose memory is still mapped: reusing it does not grow
 * the heap, so it needs no collection first.  NULL if there is none. */
LF_MALLOC_TEXT static struct span *span_reuse(unsigned c, unsigned kind)
{
    struct region *r = &lf_regions[c];
    struct span *s = list_take(r, &r->pool, kind);
    if (!s)
        return NULL;
    span_take(r, s, kind, true);
    return s;
}

LF_MALLOC_TEXT static void raise_heap_top(struct region *r, uint64_t j)
{
    uint64_t qa, qb;
    lf_span_slots(r, j, &qa, &qb);
    uint64_t top = qb * r->size;
    size_t idx = lowfat_index((void *)r->start);
    if (top > lowfat_heap_top[idx])
        AO_store_release((volatile AO_t *)&lowfat_heap_top[idx], top);
}

/* Bytes of freed large malloc'ed objects whose pages were kept (see
 * large_retain).  Lock held. */
static LF_UNSCANNED uint64_t large_retained;

/* A released large span that kept its pages, if the region has one. */
LF_MALLOC_TEXT static struct span *retained_take(struct region *r, unsigned kind)
{
    for (struct span **link = &r->released; *link; link = &(*link)->next) {
        struct span *s = *link;
        if (s->dirty && span_usable(r, span_chunk_index(r, s), kind)) {
            *link = s->next;
            return s;
        }
    }
    return NULL;
}

/* The heap grew within its expanded size: room that spans released
 * earlier stood for, counted unmapped, has been taken, as a class uses
 * fresh chunks while the released spans stay with theirs.  It is passed,
 * as pools_make_room passes pooled room, so that heap size plus unmapped
 * bytes stay the expanded size (without this, gctest with
 * GC_INITIAL_HEAP_SIZE=64M, large objects of ever new sizes, counted
 * 136-161 MB for a heap of 64). */
LF_MALLOC_TEXT static void room_taken(void)
{
    uint64_t unpassed = lf_hs.released_bytes > lf_hs.passed_bytes
                        ? lf_hs.released_bytes - lf_hs.passed_bytes : 0;
    uint64_t room = lf_hs.heap_target > lf_hs.heap_bytes ? lf_hs.heap_target - lf_hs.heap_bytes : 0;
    if (unpassed > room)
        lf_hs.passed_bytes += unpassed - room;
}

/* A span that grows the heap: a released pooled span, else a chunk the
 * frontier passed because it was blacklisted then, else one from the
 * frontier.  NULL when the region is full or the heap limit would be
 * passed. */
LF_MALLOC_TEXT static struct span *span_grow(unsigned c, unsigned kind, uint64_t bytes)
{
    struct region *r = &lf_regions[c];
    /* Where the layout failed part way (an address-space limit), no table
     * is mapped: the regions reserved before the failure stay unused. */
    if (!lf_layout_ok || !r->reserved || !lf_region_map_metadata(r))
        return NULL;
    if (lf_hs.max_heap && lf_hs.heap_bytes + bytes > lf_hs.max_heap)
        return NULL;
    struct span *s = r->large && large_retained ? retained_take(r, kind) : NULL;
    if (!s)
        s = list_take(r, &r->released, kind);
    if (s) {
        lf_hs.released_bytes -= span_bytes(r, s);
        if (lf_hs.passed_bytes > lf_hs.released_bytes)
            lf_hs.passed_bytes = lf_hs.released_bytes;
        if (r->large && s->dirty)
            large_retained -= r->size;
    } else if ((s = list_take(r, &r->skipped, kind))) {
        raise_heap_top(r, span_chunk_index(r, s));
    } else {
        for (;;) {
            if (r->next_chunk + r->span_chunks > r->max_chunks ||
                !lf_region_cover_bits(r, r->next_chunk + r->span_chunks))
                return NULL;
            uint64_t j = r->next_chunk;
            r->next_chunk += r->span_chunks;
            s = span_at(r, j);
            s->dirty = 0;
            if (span_usable(r, j, kind))
                break;
            /* Untouched: it costs address space only. */
            s->next = r->skipped;
            r->skipped = s;
        }
        raise_heap_top(r, span_chunk_index(r, s));
        lf_blacklist_horizon(r);
    }
    lf_hs.heap_bytes += bytes;
    if (!lf_kinds[kind].manual)
        room_taken();
    lf_heap_resized(lf_hs.heap_bytes);
    span_take(r, s, kind, false);
    return s;
}

/* Large malloc'ed objects freed keep their pages, up to a budget, on
 * their region's released list (marked dirty, which no span released with
 * MADV_DONTNEED is there): a program that frees and allocates such
 * objects in turn (a growing buffer, realloc) would otherwise fault every
 * page in again each time.  malloc_trim and GC_gcollect_and_unmap give
 * them back.  Lock held throughout.
 *
 * large_retained_trim gives retained spans' pages back to the OS until at
 * most `keep` bytes are retained, in one batch. */
LF_MALLOC_TEXT static bool large_retained_trim(uint64_t keep)
{
    bool any = false;
    for (unsigned c = NUM_SMALL_CLASSES; c < NUM_CLASSES && large_retained > keep; c++) {
        struct region *r = &lf_regions[c];
        for (struct span *s = r->released; s && large_retained > keep; s = s->next) {
            if (!s->dirty)
                continue;
            uint64_t base = r->start + (span_chunk_index(r, s) << CHUNK_SHIFT);
            lf_pages_release_add(base, r->size);
            s->dirty = 0;
            large_retained -= r->size;
            any = true;
        }
    }
    lf_pages_release_flush();
    return any;
}

LF_MALLOC_TEXT bool lf_large_retained_release(void)
{
    return large_retained_trim(0);
}

/* The largest large object freed so far, up to LARGE_RETAIN_TOP: as
 * glibc's mmap threshold rises to the size of a mapped chunk freed, so
 * that a program cycling buffers of that size (an lzma stream, a 16 MiB
 * scratch buffer) reuses one from the second cycle on instead of faulting
 * its pages in at every use. */
static LF_UNSCANNED uint64_t large_freed_most;

/* Whether a freed large span of `len` bytes keeps its pages.  The budget
 * follows malloc's heap down (after a bulk free the retained pages go
 * too), but not below twice the largest object freed before this one
 * (glibc trims its heap past twice its mmap threshold): a program cycling
 * buffers of two sizes keeps both.  Past the budget, spans up to
 * LARGE_RELEASE_BATCH bytes are kept until they make that much, then
 * given back together (pages_release_flush): a bulk free of 32 KiB
 * objects made one madvise, and one TLB flush on every CPU, per object
 * (malloc_threadset's main thread, 10,500 of them). */
LF_MALLOC_TEXT static bool large_retain(uint64_t len)
{
    uint64_t budget = lf_malloc_heap_bytes / 16;
    if (budget < LARGE_RETAIN_MIN)
        budget = LARGE_RETAIN_MIN;
    if (budget > LARGE_RETAIN_MAX)
        budget = LARGE_RETAIN_MAX;
    if (budget < 2 * large_freed_most)
        budget = 2 * large_freed_most;
    if (len > large_freed_most && len <= LARGE_RETAIN_TOP)
        large_freed_most = len;
    if (large_retained + len > budget) {
        if (len > LARGE_RELEASE_BATCH) {
            large_retained_trim(budget);
            return false;
        }
        if (large_retained + len > budget + LARGE_RELEASE_BATCH)
            large_retained_trim(budget);
    }
    large_retained += len;
    return true;
}

/* Put a span back in its region's pool.  Large spans give their pages
 * back at once; small ones when they have stayed unused (see
 * release_idle_spans), so that a span reused soon costs no page faults. */
LF_MALLOC_TEXT void lf_span_free(struct region *r, struct span *s)
{
    uint64_t j = span_chunk_index(r, s);
    lf_assert(s->state != SPAN_UNUSED);
    lf_assert(lf_chunk_map[region_chunk_entry(r, j)] == s->kind + 1);
    lf_assert(span_unmarked(r, j));
    chunk_entries_set(lf_chunk_map, region_chunk_entry(r, j), r->span_chunks, 0);
    if (s->kind == KIND_MALLOC)
        chunk_entries_set(lf_free_map, region_chunk_entry(r, j), r->span_chunks, 0);
    s->state = SPAN_UNUSED;
    s->old = 0;
    s->nursery = 0;
    s->aging = 0;
    s->free_since = (uint32_t)GC_gc_no;
    if (r->large) {
        uint64_t base = r->start + (j << CHUNK_SHIFT);
        uint64_t len = (s->obj_bytes + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
        /* malloc_usable_size promises the whole slot to a malloc'ed object. */
        bool keep = false;
        if (lf_kinds[s->kind].manual) {
            len = r->size;
            lf_malloc_heap_bytes -= s->obj_bytes;
            keep = large_retain(len);
        }
        if (keep) {
            s->dirty = 1;           /* its pages kept: retained, see above */
        } else {
            if (len)
                lf_pages_release_add(base, len);
            s->dirty = 0;
        }
        lf_assert(lf_hs.heap_bytes >= span_bytes(r, s));
        lf_hs.heap_bytes -= span_bytes(r, s);
        lf_hs.released_bytes += span_bytes(r, s);
        s->next = r->released;
        r->released = s;
        return;
    }
    s->dirty = 1;
    s->next = r->pool;
    r->pool = s;
}

/* Does a span in use own chunk j of r (lock held)? */
LF_MALLOC_TEXT static bool chunk_in_use(const struct region *r, uint64_t j)
{
    return j < r->next_chunk && span_at(r, j - j % r->span_chunks)->state != SPAN_UNUSED;
}

/* Give a pooled small span's pages back to the OS; the caller has taken
 * it off the pool.  Returns the bytes it counted for in the heap. */
/* Give back the pages of the pooled spans run[0..n), which lie in
 * consecutive chunks and which the caller took off the pool, in one
 * madvise, and put them on the released list.  Returns the bytes they
 * counted for in the heap. */
LF_MALLOC_TEXT static uint64_t spans_release(struct region *r, struct span *const *run, unsigned n)
{
    uint64_t ja = span_chunk_index(r, run[0]), jb = ja + (uint64_t)n * r->span_chunks, qa, qb;
    /* A span owns the bytes of its slots, which may run into the next
     * chunk.  A slot that straddles a chunk boundary puts a page in two
     * spans: that page goes when the other span holds nothing, else it
     * keeps the other's data (a page of every chunk of most small
     * classes stayed resident when it always did).  Between two spans of
     * the run, it goes. */
    lf_span_slots(r, ja, &qa, &qb);
    uint64_t first = qa * r->size;
    lf_span_slots(r, jb - r->span_chunks, &qa, &qb);
    uint64_t end = qb * r->size;
    uint64_t page_mask = ~(uint64_t)(PAGE_SIZE - 1);
    uint64_t lo = ja > 0 && !chunk_in_use(r, ja - 1) ? first & page_mask
                                                     : (first + PAGE_SIZE - 1) & page_mask;
    uint64_t hi = !chunk_in_use(r, jb) ? (end + PAGE_SIZE - 1) & page_mask : end & page_mask;
    if (hi > lo)
        lf_pages_release_add(lo, hi - lo);
    uint64_t bytes = (uint64_t)r->span_chunks << CHUNK_SHIFT;
    for (unsigned i = 0; i < n; i++) {
        struct span *s = run[i];
        lf_assert(s->state == SPAN_UNUSED && lf_hs.heap_bytes >= bytes);
        s->dirty = 1;                   /* pages shared with a span in use kept data */
        lf_hs.heap_bytes -= bytes;
        lf_hs.released_bytes += bytes;
        s->next = r->released;
        r->released = s;
    }
    return bytes * n;
}

LF_MALLOC_TEXT uint64_t lf_span_release(struct region *r, struct span *s)
{
    return spans_release(r, &s, 1);
}

void lf_release_idle_spans(bool all)
{
    if (all)
        lf_large_retained_release();
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        struct span **link = &r->pool;
        while (*link) {
            struct span *s = *link;
            if (!all && GC_gc_no - s->free_since < 2) {
                link = &s->next;
                continue;
            }
            *link = s->next;
            lf_span_release(r, s);
        }
    }
    lf_pages_release_flush();
}

/* Release the span at the head of r's pool together with the pool
 * entries after it that continue its run of chunks (a collection pools
 * the spans it empties in chunk order), up to RUN_SPANS_MAX spans: one
 * madvise for the run.  Each madvise ends in a TLB flush on every CPU
 * that runs a thread of the process, page by page for a short range: 8
 * spans of 32 KiB, one call each, cost a virtual machine about ten times
 * the system time of one call for all (docs/performance.md).  The pages
 * released are those the spans released one by one would give: pages
 * shared by two spans of the run belong to no span in use.  Returns the
 * bytes the run counted for in the heap; room beyond what the caller
 * asked for serves the next growths without a call. */
#define RUN_SPANS_MAX 8
static uint64_t pool_run_release(struct region *r)
{
    struct span *run[RUN_SPANS_MAX];
    unsigned n = 0;
    uint64_t next = span_chunk_index(r, r->pool);
    while (n < RUN_SPANS_MAX && r->pool && span_chunk_index(r, r->pool) == next) {
        run[n++] = r->pool;
        r->pool = r->pool->next;
        next += r->span_chunks;
    }
    return spans_release(r, run, n);
}

/* The heap must grow by `bytes` past its expanded size while other
 * classes hold pooled spans, mapped and idle: release those first, so
 * that the room is passed from class to class instead of the heap
 * growing or a collection running for it (the pooled memory is free
 * space, as a free block is in bdwgc, only sized for another class).
 * The regions are taken in turn, so that no class loses its pool
 * every time. */
static void pools_make_room(uint64_t bytes)
{
    static LF_UNSCANNED unsigned next_region;
    uint64_t freed = 0;
    for (unsigned i = 0; i < NUM_CLASSES && freed < bytes; i++) {
        struct region *r = &lf_regions[(next_region + i) % NUM_CLASSES];
        while (r->pool && freed < bytes)
            freed += pool_run_release(r);
    }
    lf_pages_release_flush();
    lf_hs.passed_bytes += freed;
    next_region = (next_region + 1) % NUM_CLASSES;
}

/* Sweep a whole span claimed under the lock (fresh spans have an empty
 * bitmap: every slot is free). */
static void *sweep_whole_span(struct region *r, struct span *s, bool fresh, size_t *count)
{
    uint64_t qa, qb;
    lf_span_slots(r, span_chunk_index(r, s), &qa, &qb);
    bool clear = lf_kinds[s->kind].clear && (!fresh || s->dirty);
    s->dirty = 0;
    uint64_t next = qa - r->q0;
    return lf_sweep_slots(r, &next, qb - r->q0, SIZE_MAX, clear, count);
}

/* ------------------------------------------------------------------ */
/* Batches of free slots                                               */

/* Bytes handed out (or, negative, given back); updated outside the lock
 * by sweeping threads, hence atomic everywhere. */
LF_MALLOC_TEXT static void count_allocated(int64_t bytes)
{
    AO_fetch_and_add((volatile AO_t *)&lf_hs.allocd_since_gc, (AO_t)bytes);
    if (bytes > 0)
        AO_fetch_and_add((volatile AO_t *)&lf_hs.total_allocd, (AO_t)bytes);
}

/* Bytes freed explicitly (GC_get_expl_freed_bytes_since_gc), added
 * without the lock by the threads' frees. */
LF_MALLOC_TEXT static void count_expl_freed(uint64_t bytes)
{
    __atomic_fetch_add(&lf_hs.expl_freed_since_gc, bytes, __ATOMIC_RELAXED);
}

/* bdwgc's GC_incr_bytes_allocd and GC_incr_bytes_freed, declared only in
 * its private gc_alloc_ptrs.h: an allocator built over the collector
 * counts what it hands out (which brings the next collection nearer) and
 * what it frees explicitly (GC_get_expl_freed_bytes_since_gc).  bdwgc's
 * gctest calls both. */
LFGC_EXPORT void GC_incr_bytes_allocd(size_t bytes)
{
    if (bytes <= (size_t)INT64_MAX)
        count_allocated((int64_t)bytes);
}

LFGC_EXPORT void GC_incr_bytes_freed(size_t bytes)
{
    count_expl_freed(bytes);
}

/* Bytes back where refills take slots from (see freed_since_gc). */
LF_MALLOC_TEXT static void count_freed_shared(uint64_t bytes)
{
    __atomic_fetch_add(&lf_hs.freed_since_gc, bytes, __ATOMIC_RELAXED);
}

static unsigned max_retries(void)
{
    return GC_max_retries ? (unsigned)GC_max_retries : 1;
}

/* The heap must grow by `bytes`: within the expanded size that is free;
 * past it, after passing on other classes' pooled room, the policy says
 * whether to collect first or to expand.  Returns the collection to run
 * first, or COLLECT_NONE to go ahead. */
static enum collect_reason must_collect_before_growing(uint64_t bytes, unsigned collections)
{
    if (lf_hs.heap_bytes + bytes > lf_hs.heap_target)
        pools_make_room(lf_hs.heap_bytes + bytes - lf_hs.heap_target);
    return lf_policy_before_growth(bytes, collections);
}

/* malloc's spans grow the heap without asking the policy: they are never
 * collected, and the room they take is added to the expanded size so
 * that they do not eat the collector's. */
LF_UNSCANNED uint64_t lf_malloc_heap_bytes;

LF_MALLOC_TEXT static struct span *manual_grow(unsigned c, unsigned kind, uint64_t bytes)
{
    struct span *s = span_grow(c, kind, bytes);
    if (s) {
        lf_hs.heap_target += bytes;
        lf_malloc_heap_bytes += bytes;
        room_taken();
    }
    return s;
}

LF_MALLOC_TEXT static void *large_alloc(unsigned c, unsigned kind, size_t bytes)
{
    struct region *r = &lf_regions[c];
    unsigned collections = 0;
    /* The extra byte is inside, so that a pointer just past the request
     * still lies in the object. */
    uint64_t want = (bytes + lf_extra_bytes + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
    if (want > r->size)
        want = r->size;
    struct span *s;
    if (lf_kinds[kind].manual) {
        s = manual_grow(c, kind, want);
        if (!s)
            return NULL;
        /* dirty stays: calloc clears a retained span's old data. */
        s->obj_bytes = want;
        return (void *)(r->start + (span_chunk_index(r, s) << CHUNK_SHIFT));
    }
    for (;;) {
        enum collect_reason why = must_collect_before_growing(want, collections);
        if (why != COLLECT_NONE) {
            lf_collect(why);
            collections++;
            continue;
        }
        s = span_grow(c, kind, want);
        if (s)
            break;
        if (collections >= max_retries() || GC_dont_gc)
            return NULL;
        lf_collect(COLLECT_HEAP_FULL);
        collections++;
    }
    uint64_t base = r->start + (span_chunk_index(r, s) << CHUNK_SHIFT);
    if (s->dirty && lf_kinds[kind].clear)
        memset((void *)base, 0, want);
    s->dirty = 0;
    s->obj_bytes = want;
    count_allocated(want);
    return (void *)base;
}

static size_t object_size(const struct region *r, const void *p);

static void set_alloc_bit(struct region *r, void *p, bool on)
{
    uint64_t bit = lowfat_slot_number(p) - r->q0;
    if (on)
        bit_set(r->alloc_bits, bit);
    else
        bit_clear(r->alloc_bits, bit);
}

/* A span to sweep, or a fresh one, for (class, kind), claimed under the
 * lock.  Collects or grows the heap as the policy says; NULL when out of
 * memory.  *fresh tells which. */
/* claim_span's answer when a collection it ran left free slots on the
 * class and kind's list: the caller takes them instead. */
static LF_UNSCANNED struct span claim_take_free;

LF_MALLOC_TEXT static struct span *claim_span(unsigned c, unsigned kind, bool *fresh)
{
    struct class_kind *ck = class_kind_of(c, kind);
    unsigned collections = 0;
    if (lf_kinds[kind].manual) {
        *fresh = true;
        struct span *s = span_reuse(c, kind);
        if (!s && lf_malloc_scavenge_before_growth())
            s = span_reuse(c, kind);
        if (s) {
            lf_malloc_heap_bytes += CHUNK_SIZE;
            return s;
        }
        return manual_grow(c, kind, CHUNK_SIZE);
    }
    for (;;) {
        struct span *s = ck->unswept;
        if (s) {
            lf_assert(s->state == SPAN_UNSWEPT && s->kind == kind && !lf_regions[c].large);
            ck->unswept = s->next;
            s->state = SPAN_SWEPT;      /* ours: nobody else sweeps it */
            *fresh = false;
            return s;
        }
        *fresh = true;
        s = span_reuse(c, kind);
        if (s)
            return s;
        /* The collection's disclaim procedures may have freed slots
         * (of spans it found full: their objects were marked until the
         * procedures ran): those come before any growth. */
        if (collections && ck->free)
            return &claim_take_free;
        enum collect_reason why = must_collect_before_growing(CHUNK_SIZE, collections);
        if (why != COLLECT_NONE) {
            lf_collect(why);
            collections++;
            continue;
        }
        s = span_grow(c, kind, CHUNK_SIZE);
        if (s)
            return s;
        if (collections < max_retries() && !GC_dont_gc) {
            lf_collect(COLLECT_HEAP_FULL);
            collections++;
            continue;
        }
        return NULL;
    }
}

/* A list of free slots of (class, kind), lock held, for allocations that
 * bypass the thread caches: the global free list, else a whole span
 * claimed and swept under the lock.  NULL when out of memory. */
static void *take_batch(unsigned c, unsigned kind, size_t *count)
{
    struct class_kind *ck = class_kind_of(c, kind);
    struct region *r = &lf_regions[c];
    for (;;) {
        if (ck->free) {
            void *list = ck->free;
            *count = ck->free_count;
            ck->free = NULL;
            ck->free_count = 0;
            return list;
        }
        bool fresh;
        struct span *s = claim_span(c, kind, &fresh);
        if (!s)
            return NULL;
        if (s == &claim_take_free)
            continue;
        void *list = sweep_whole_span(r, s, fresh, count);
        if (list)
            return list;
    }
}

/* One object of (class, kind) under the lock, bypassing the caches. */
static void *alloc_locked(unsigned c, unsigned kind, size_t bytes)
{
    struct region *r = &lf_regions[c];
    void *p;
    if (r->large) {
        p = large_alloc(c, kind, bytes);
    } else {
        struct class_kind *ck = class_kind_of(c, kind);
        size_t n = 0;
        void **list = take_batch(c, kind, &n);
        if (!list)
            return NULL;
        lf_assert(n >= 1);
        ck->free = list;
        p = free_list_pop(&ck->free);
        ck->free_count = (uint32_t)(n - 1);
        count_allocated(r->size);
    }
    if (p && lf_kinds[kind].uncollectable) {
        set_alloc_bit(r, p, true);
        /* bdwgc's count of explicitly managed bytes, which programs read. */
        GC_non_gc_bytes += object_size(r, p);
    }
    return p;
}

/* A thread sweeps (or builds the list of a fresh span) outside the lock
 * only between sweep_enter() and sweep_exit().  A collection, and fork(),
 * call lf_sweepers_hold() with the lock held: it raises gc_pending and waits
 * until no thread is sweeping, so that none sees a half-swept span.  Each
 * thread raises a flag of its own (Dekker's handshake: both sides store,
 * fence, then load the other's flag), so that refills of different
 * threads share no written cache line. */
LF_UNSCANNED volatile AO_t lf_gc_pending;

LF_MALLOC_TEXT void lf_sweepers_hold(void)
{
    AO_store_full(&lf_gc_pending, 1);
    while (lf_threads_sweeping())
        sched_yield();
}

LF_MALLOC_TEXT void lf_sweepers_release(void)
{
    AO_store_full(&lf_gc_pending, 0);
}

LF_MALLOC_TEXT static bool sweep_enter(struct thread_cache *tc)
{
    AO_store(&tc->sweeping, 1);
    AO_nop_full();
    if (AO_load(&lf_gc_pending)) {
        AO_store_release(&tc->sweeping, 0);
        return false;
    }
    return true;
}

LF_MALLOC_TEXT static void sweep_exit(struct thread_cache *tc)
{
    AO_store_release(&tc->sweeping, 0);
}

/* Refilled bytes are counted per thread and added to the shared counters
 * a few refills at a time. */
#define ALLOCD_FLUSH ((uint64_t)64 << 10)

LF_MALLOC_TEXT static void count_refill(struct thread_cache *tc, uint64_t bytes)
{
    tc->allocd += bytes;
    if (tc->allocd >= ALLOCD_FLUSH) {
        /* How much the thread allocated since the last collection, and
         * the most any thread did: their ratio to the total says how many
         * threads allocate at once (collect.c). */
        if (tc->cycle != GC_gc_no + 1) {
            tc->cycle = GC_gc_no + 1;
            tc->cycle_allocd = 0;
        }
        tc->cycle_allocd += tc->allocd;
        AO_fetch_and_add(&lf_hs.caches_allocd, tc->allocd);
        AO_t most = AO_load(&lf_hs.max_thread_allocd);
        while (tc->cycle_allocd > most &&
               !AO_compare_and_swap(&lf_hs.max_thread_allocd, most, tc->cycle_allocd))
            most = AO_load(&lf_hs.max_thread_allocd);
        count_allocated((int64_t)tc->allocd);
        tc->allocd = 0;
    }
}

/* Slots handed to a cache per refill: a few KiB, so that caches stay
 * short (collections walk them) and the sweep stays close to use. */
LF_MALLOC_TEXT static size_t batch_slots(const struct region *r)
{
    size_t n = r->size ? 4096 / r->size : 0;      /* 0: the layout failed first */
    return n < 8 ? 8 : n;
}

/* ------------------------------------------------------------------ */
/* Thread caches of every kind                                          */

/* Kinds other than the fast paths' get their lists on first use, so that
 * a runtime's kinds never take the lock per object.  Lists of threads
 * that left are kept for the next thread (lock held). */
static LF_UNSCANNED struct kind_cache *spare_kind_caches;

LF_MALLOC_TEXT static __attribute__((noinline)) struct kind_cache *
kind_cache_make(struct thread_cache *tc, unsigned kind)
{
    lock();
    struct kind_cache *kc = spare_kind_caches;
    if (kc) {
        spare_kind_caches = kc->next;
    } else {
        kc = mmap(NULL, sizeof *kc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                  -1, 0);
        if (kc == MAP_FAILED) {
            unlock();
            return NULL;
        }
    }
    memset(kc, 0, sizeof *kc);
    tc->more[kind] = kc;
    unlock();
    return kc;
}

static inline struct kind_cache *kind_cache_get(struct thread_cache *tc, unsigned kind)
{
    if (kind < NUM_CACHED_KINDS)
        return &tc->k[kind];
    if (kind >= KIND_FIRST_MANUAL)
        return &tc->mk;
    struct kind_cache *kc = tc->more[kind];
    return likely(kc) ? kc : kind_cache_make(tc, kind);
}

/* Whether a kind's small objects go through the thread caches.  Those of
 * uncollectable kinds do not: each carries an allocated bit, set and
 * cleared under the lock. */
static inline bool kind_cached(unsigned kind)
{
    return !lf_kinds[kind].uncollectable;
}

/* The remote stack of (class, kind): whole lists pushed by threads that
 * freed more than they allocate, taken whole by the next refill.  Both
 * happen between sweep_enter() and sweep_exit(), so a collection never
 * finds a list held only in a register.  remote_count counts its slots so
 * that a refill does not walk the (cold) lists to learn how many it took;
 * a push adds after its list is in and a take subtracts all it sees, so
 * the counts a take returns may be early or late by a concurrent push,
 * but their sum is exact (they are only used as byte counts). */
LF_MALLOC_TEXT static void remote_push(struct class_kind *ck, void **head, void **tail, size_t n)
{
    AO_t old;
    do {
        old = AO_load(&ck->remote);
        tail[0] = link_encode((void *)old);
    } while (!AO_compare_and_swap_full(&ck->remote, old, (AO_t)head));
    AO_fetch_and_add(&ck->remote_count, n);
}

/* Of a list of n slots taken whole from the lock-free stack at `head`
 * (its length in `count`), keep the first `cap` and put the rest back,
 * where every thread looks before the heap grows.  A thread whose frees
 * are all of other threads' objects never trims its list (cache_trim
 * runs on its own frees), so what a refill took whole and did not need
 * stayed on it for good: with 4 threads freeing each other's objects,
 * 6.7 MiB of a 19 MiB heap lay on the threads' lists, 6 MiB live.  For a
 * class's remote stack (trimmed slots, any thread's); not for a group's
 * remote list, which a producer's consumer keeps pushing onto: putting
 * the rest back there walks it to its tail at every refill (malloc_xthread
 * 134 -> 173 ms).  The rest goes back in one CAS while the stack is still
 * empty, else after a walk to its tail.  Returns the slots kept. */
LF_MALLOC_TEXT static size_t list_keep(void **list, size_t n, size_t cap, volatile AO_t *head,
                                       volatile AO_t *count)
{
    if (n <= cap)
        return n;
    void **last = list;
    size_t kept = 1;
    while (kept < cap && link_decode(last[0])) {
        last = link_decode(last[0]);
        kept++;
    }
    void **rest = link_decode(last[0]);
    if (!rest)
        return kept;
    last[0] = link_encode(NULL);
    if (!AO_compare_and_swap_release(head, 0, (AO_t)rest)) {
        /* Others pushed since the take: the rest takes their place, and
         * their list goes back on top of it, walked to its tail (it holds
         * what was freed in the meantime, usually far less than the rest:
         * mimalloc's test-stress, 32 threads, spent a tenth of its time
         * walking rests). */
        void **theirs = (void **)__atomic_exchange_n(head, (AO_t)rest, __ATOMIC_ACQ_REL);
        if (theirs) {
            void **tail = theirs;
            while (link_decode(tail[0]))
                tail = link_decode(tail[0]);
            AO_t old;
            do {
                old = AO_load(head);
                tail[0] = link_encode((void *)old);
            } while (!AO_compare_and_swap_release(head, old, (AO_t)theirs));
        }
    }
    /* What was taken less what is kept: the counts stay exact in sum. */
    AO_fetch_and_add(count, n - kept);
    return kept;
}

LF_MALLOC_TEXT static void *remote_take(struct class_kind *ck, size_t *count)
{
    if (!AO_load(&ck->remote))
        return NULL;
    void **head = (void **)__atomic_exchange_n(&ck->remote, 0, __ATOMIC_ACQ_REL);
    *count = head ? __atomic_exchange_n(&ck->remote_count, 0, __ATOMIC_ACQ_REL) : 0;
    return head;
}

/* The owner groups' remote lists of malloc's plain small kind: slots
 * freed by a thread of another group, pushed one at a time (a CAS, no
 * lock) and taken whole by the next refill of a thread of the group (or
 * moved to the global lists by a scavenge, or when the group's last
 * thread leaves).  One cache line per group. */
static LF_UNSCANNED struct {
    volatile AO_t head[NUM_SMALL_CLASSES];
    volatile AO_t count[NUM_SMALL_CLASSES];    /* as remote_count */
} __attribute__((aligned(64))) owner_remote[FREE_GROUPS];

/* The free map's byte k as group and class (no division on the remote
 * free path): 0xff for k = 0 and bytes no span has.  Made once the
 * regions are. */
static LF_UNSCANNED uint8_t k_group[256], k_class[256];
/* Slots a thread gathers per class before handing them over: a batch. */
static LF_UNSCANNED uint32_t pend_max[NUM_SMALL_CLASSES];

LF_MALLOC_TEXT static void groups_init(void)
{
    memset(k_group, 0xff, sizeof k_group);
    memset(k_class, 0xff, sizeof k_class);
    for (unsigned g = 0; g < FREE_GROUPS; g++)
        for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
            k_group[1 + c + g * FREE_GROUP_STRIDE] = (uint8_t)g;
            k_class[1 + c + g * FREE_GROUP_STRIDE] = (uint8_t)c;
        }
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++)
        pend_max[c] = (uint32_t)batch_slots(&lf_regions[c]);
}

/* The owner group of malloc's slot p, or -1 when its span has none (not
 * of the plain small kind). */
static inline int slot_group(const void *p)
{
    unsigned k = lf_free_map[chunk_entry((uintptr_t)p)];
    return k ? k_group[k] : -1;
}

/* The thread's gathered slots of class c onto their group's remote list.
 * Not counted in malloc.c's remote bytes: the group's next refill takes
 * them, and a scavenge is for memory nobody takes (the global stacks). */
LF_MALLOC_TEXT static __attribute__((noinline)) void pend_flush(struct thread_cache *tc, unsigned c)
{
    struct remote_pending *pd = &tc->pend[c];
    if (!pd->head)
        return;
    volatile AO_t *head = &owner_remote[pd->group].head[c];
    void **tail = pd->tail;
    AO_t old;
    do {
        old = AO_load(head);
        tail[0] = link_encode((void *)old);
    } while (!AO_compare_and_swap_release(head, old, (AO_t)pd->head));
    uint64_t n = pend_max[c] - (uint64_t)pd->left;
    AO_fetch_and_add(&owner_remote[pd->group].count[c], n);
    pd->head = pd->tail = NULL;
    pd->left = 0;
}

/* Malloc's slot p of class c, of group g's span, freed by a thread of
 * another group: gathered with others of the group, then handed over a
 * batch at a time.  Not in the thread's own list, so the thread does not
 * allocate it again beside its owners' objects. */
LF_MALLOC_TEXT static __attribute__((noinline)) void remote_defer_flush(struct thread_cache *tc, unsigned g,
                                                          unsigned c, void *p)
{
    struct remote_pending *pd = &tc->pend[c];
    if (pd->group != g) {
        pend_flush(tc, c);
        pd->group = (uint8_t)g;
    }
    slot_make_free(p, pd->head);
    if (!pd->head) {
        pd->tail = p;
        pd->left = (int32_t)pend_max[c];
    }
    pd->head = p;
    if (--pd->left <= 0)
        pend_flush(tc, c);
}

/* No call on the common path: a tail call when a batch is full, or
 * the slot another group's than the batch's. */
static inline void remote_defer(struct thread_cache *tc, unsigned g, unsigned c, void *p)
{
    struct remote_pending *pd = &tc->pend[c];
    if (unlikely(pd->group != g || --pd->left <= 0)) {
        pd->left++;
        remote_defer_flush(tc, g, c, p);
        return;
    }
    slot_make_free(p, pd->head);
    pd->head = p;
}

/* The free slots gathered by thread tc for other groups, of class c:
 * lock held, each checked before its link is followed (tc may be
 * handing them over meanwhile). */
LF_MALLOC_TEXT uint64_t lf_pending_count(struct thread_cache *tc, unsigned c, bool (*free_slot)(void *p, unsigned c))
{
    uint64_t n = 0, limit = (lf_regions[c].next_chunk << CHUNK_SHIFT) / lf_regions[c].size + 1;
    void **p = __atomic_load_n((void ***)&tc->pend[c].head, __ATOMIC_RELAXED);
    while (p && n < limit && free_slot(p, c)) {
        n++;
        p = link_decode(__atomic_load_n(&p[0], __ATOMIC_RELAXED));
    }
    return n;
}

/* Take group g's remote list of class c whole; its length in *count. */
LF_MALLOC_TEXT static void **owner_take(unsigned g, unsigned c, size_t *count)
{
    volatile AO_t *head = &owner_remote[g].head[c];
    if (!AO_load(head))
        return NULL;
    void **list = (void **)__atomic_exchange_n(head, 0, __ATOMIC_ACQUIRE);
    /* Early or late by a push in progress, as remote_take's. */
    *count = list ? __atomic_exchange_n(&owner_remote[g].count[c], 0, __ATOMIC_ACQ_REL) : 0;
    return list;
}

/* Group g's remote list of class c onto the global list; lock held.
 * With to >= 0, the chunks of its slots become group to's. */
LF_MALLOC_TEXT static void owner_to_global(unsigned g, unsigned c, int to)
{
    size_t n;
    void **list = owner_take(g, c, &n);
    if (!list)
        return;
    struct class_kind *ck = class_kind_of(c, KIND_MALLOC);
    void **tail = list;
    uint32_t exact = 1;
    uint8_t label = (uint8_t)(1 + c + (unsigned)to * FREE_GROUP_STRIDE);
    for (;; exact++) {
        if (to >= 0)
            __atomic_store_n(&lf_free_map[chunk_entry((uintptr_t)tail)], label,
                             __ATOMIC_RELAXED);
        if (!link_decode(tail[0]))
            break;
        tail = link_decode(tail[0]);
    }
    tail[0] = link_encode(ck->free);
    ck->free = list;
    ck->free_count += exact;
}

/* Move the remote lists of group g (every group: g < 0) to the global
 * lists of malloc's plain kind; lock held. */
LF_MALLOC_TEXT void lf_owner_remote_drain(int g)
{
    for (unsigned i = 0; i < FREE_GROUPS; i++) {
        if (g >= 0 && i != (unsigned)g)
            continue;
        for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
            owner_to_global(i, c, -1);
        }
    }
}

/* Before thread tc claims a span for class c (lock held): rather than
 * grow the heap, it takes the slots freed to groups that no thread is in
 * any more, and those that a group's threads leave piling up (two
 * batches or more: an idle thread's group, or one that frees enough of
 * its own not to refill), and their chunks become its group's, so that
 * its frees of them stay local.  Not a group's last few slots: taking
 * those would hand a thread back, beside its owners' objects, the slot
 * it has just freed (cache-scratch). */
static void group_left_release(unsigned g, unsigned c, int to);
static bool cursor_adopt(struct thread_cache *tc, unsigned c, unsigned k, struct sweep_cursor *cur,
                         bool owned);

LF_MALLOC_TEXT static void groups_take(struct thread_cache *tc, unsigned c)
{
    for (unsigned g = 0; g < FREE_GROUPS; g++) {
        /* What the last thread of a group nobody joined left, before
         * the heap grows. */
        if (g != tc->free_group && group_left_any[g] &&
            !__atomic_load_n(&group_threads[g], __ATOMIC_RELAXED))
            group_left_release(g, c, (int)tc->free_group);
        if (g == tc->free_group || !AO_load(&owner_remote[g].head[c]))
            continue;
        if (__atomic_load_n(&group_threads[g], __ATOMIC_RELAXED) &&
            AO_load(&owner_remote[g].count[c]) < 2 * (AO_t)pend_max[c])
            continue;
        owner_to_global(g, c, (int)tc->free_group);
    }
}

/* The free slots on the owner groups' remote lists of class c, counted
 * as count_cached (malloc.c) counts a thread's: lock held, each link
 * checked before it is followed (an owner may be taking them). */
static uint64_t group_left_count(unsigned g, unsigned c);

LF_MALLOC_TEXT uint64_t lf_owner_remote_count(unsigned c, bool (*free_slot)(void *p, unsigned c))
{
    uint64_t n = 0, limit = (lf_regions[c].next_chunk << CHUNK_SHIFT) / lf_regions[c].size + 1;
    for (unsigned g = 0; g < FREE_GROUPS; g++) {
        n += group_left_count(g, c);
        void **p = (void **)AO_load(&owner_remote[g].head[c]);
        while (p && n < limit && free_slot(p, c)) {
            n++;
            p = link_decode(__atomic_load_n(&p[0], __ATOMIC_RELAXED));
        }
    }
    return n;
}

/* Whether the heap can be used at all: liblfgc-malloc asks at load (its
 * free's fast path reads the free map, which a failed layout never made). */
LF_MALLOC_TEXT LFGC_EXPORT bool lfgc_private_heap_usable(void)
{
    return lf_layout_ok;
}

/* Free's path for malloc's small object p of another group's span, its
 * fast path having failed: onto that group's remote list, by way of the
 * thread's batch.  Anything else (not the base of an object in use of a
 * span of another group, a thread with no cache) goes to the full checks. */
LF_MALLOC_TEXT LFGC_EXPORT void lfgc_private_free_slow(void *p)
{
    if (unlikely(!lf_heap_initialized)) {
        lf_malloc_free_slow(p);
        return;
    }
    struct thread_cache *tc = lf_tl_cache;
    unsigned k = lf_free_map[chunk_entry((uintptr_t)p)];
    unsigned g = k_group[k], c = k_class[k];
    /* 0 until the cache is armed, and in lf_empty_cache. */
    uint64_t magic = tc->free_magic[FREE_MAGIC_OWN + (c & 63)];
    if (g == 0xff || g == tc->free_group || (uint64_t)(uintptr_t)p * magic >= magic ||
        slot_is_free(p)) {
        lf_malloc_free_slow(p);
        return;
    }
    if (unlikely(!__atomic_load_n(&group_threads[g], __ATOMIC_RELAXED))) {
        lf_manual_free_small(p, c);    /* adopts the span */
        return;
    }
    remote_defer(tc, g, c, p);
}

/* The next `want` slots of a span of a manual kind, from bitmap index
 * *next: every slot there is free (the span was taken empty and malloc's
 * spans are never swept), whatever the marker wrote in their mark bits. */
LF_MALLOC_TEXT static void *link_fresh(struct region *r, uint64_t *next, uint64_t end, size_t want,
                        size_t *count)
{
    uint64_t i = *next, stop = end - i > want ? i + want : end;
    char *lo = (char *)((i + r->q0) * r->size), *hi = (char *)((stop + r->q0) * r->size);
    void **prev = NULL;
    for (char *slot = hi - r->size; slot >= lo; slot -= r->size) {
        slot_make_free(slot, prev);
        prev = (void **)slot;
    }
    *next = stop;
    *count = stop - i;
    return prev;
}

/* Up to `want` free slots of bitmap indices [*next, end) of a span,
 * linked as the kind's lists are (or with plain pointers). */
LF_MALLOC_TEXT static void *span_piece(struct region *r, uint64_t *next, uint64_t end,
                                       unsigned kind, size_t want, bool plain, bool clear,
                                       size_t *n)
{
    if (lf_kinds[kind].manual)
        return link_fresh(r, next, end, want, n);
    if (plain)
        return lf_sweep_slots_plain(r, next, end, want, clear, n);
    return lf_sweep_slots(r, next, end, want, clear, n);
}

/* Where the linking of a span taken empty starts.  Slots sit at multiples
 * of their size from 32 KiB-aligned chunks, so the first objects of every
 * class would lie at the same offsets in their pages and compete for the
 * same few sets of the L1 cache (indexed by the offset in the page): a
 * program whose hot objects are the first few of each class missed there
 * on nearly every access (docs/performance.md, sed).  Each class starts at
 * its own line of the page instead; the slots skipped are linked after
 * the first piece. */
#define COLOR_SIZE_MAX (PAGE_SIZE / 8)

LF_MALLOC_TEXT static void cursor_color(const struct region *r, unsigned c,
                                        struct sweep_cursor *cur)
{
    cur->head = 0;
    if (r->size > COLOR_SIZE_MAX)
        return;
    uint64_t offset = (uint64_t)(c * 11 % 64) * 64;     /* a permutation of the lines */
    uint64_t skip = (offset + r->size - 1) / r->size;
    if (skip == 0 || skip >= cur->end - cur->next)
        return;
    cur->head = (uint32_t)skip;
    cur->next += skip;
}

/* A thread's piece of the span it is sweeping (or linking, for a manual
 * kind): the next `want` slots, and the first piece of a span taken empty
 * also the slots cursor_color skipped, at its end. */
LF_MALLOC_TEXT static void *cursor_take(struct region *r, struct sweep_cursor *cur, unsigned kind, size_t want,
                         bool plain, size_t *n)
{
    uint64_t head = cur->head, head_lo = cur->next - head;
    if (head) {
        /* The first piece ends with the page it starts in, so that with
         * the skipped slots it makes the page a piece from the span's
         * start would have made (no page more resident per class). */
        uint64_t at = (cur->next + r->q0) * r->size;
        uint64_t fit = (((at | (PAGE_SIZE - 1)) + 1) - at) / r->size;
        if (fit && fit < want)
            want = fit;
    }
    /* Leak-finding mode takes spans whole, the first piece too: a slot
     * left unlinked behind the cursor, never allocated, would pass for a
     * leak (leak.c). */
    if (unlikely(GC_find_leak))
        want = SIZE_MAX;
    void **list = span_piece(r, &cur->next, cur->end, kind, want, plain, cur->clear, n);
    if (likely(!head))
        return list;
    cur->head = 0;
    size_t m;
    void **rest = span_piece(r, &head_lo, head_lo + head, kind, SIZE_MAX, plain, cur->clear, &m);
    if (!list) {
        *n = m;
        return rest;
    }
    /* Nothing in a span taken empty is marked: the piece is the *n slots
     * before the cursor, the last one its tail. */
    void **tail = (void **)((cur->next - 1 + r->q0) * r->size);
    lf_assert(!(plain ? tail[0] : link_decode(tail[0])));
    tail[0] = plain ? (void *)rest : link_encode(rest);
    *n += m;
    return list;
}

/* Bounds of a thread's list, in batches (cache_trim). */
#define TRIM_HIGH 4
#define TRIM_MID  2
#define TRIM_LOW  1
/* malloc's kinds: high and mid this many times more.  A thread that frees
 * about as much of a class as it allocates (a server's worker: larson)
 * keeps its slots, rather than push them where any thread takes them,
 * where they lie in its group's chunks and come back as remote frees;
 * and its list is measured (walked) less often. */
#define TRIM_MANUAL 4

static inline size_t trim_scale(unsigned kind)
{
    return lf_kinds[kind].manual ? TRIM_MANUAL : 1;
}

/* The most slots a thread's list may hold (batch: the class's). */
static inline size_t trim_high(size_t batch, size_t scale)
{
    return TRIM_HIGH * scale * batch;
}

/* The credit of frees after a refill of `taken` slots: the list may hold
 * no more than those. */
LF_MALLOC_TEXT static int64_t refill_credit(size_t batch, size_t taken, size_t scale)
{
    size_t high = trim_high(batch, scale);
    return (int64_t)(taken + batch <= high ? high - taken : batch);
}

/* The credit of a manual kind's list that was just emptied. */
LF_MALLOC_TEXT int64_t lf_refill_credit_empty(unsigned c)
{
    return refill_credit(batch_slots(&lf_regions[c]), 0, TRIM_MANUAL);
}

/* Batches per refill of GC_generic_malloc_many's lists.  Those lists are
 * the caller's: each of its threads holds one per class and kind it
 * allocates, and collections keep every slot on them.  Longer pieces make
 * the sweep's writes a longer stream, and refills fewer, worth it where
 * the heap is large against what the lists hold: a batch more for each
 * 8 MiB of heap, up to four (docs/performance.md, Whippet's mt-gcbench and
 * Guile's threads). */
LF_MALLOC_TEXT static size_t plain_batches(void)
{
    uint64_t n = AO_load((volatile AO_t *)&lf_hs.heap_bytes) >> 23;
    return n < 1 ? 1 : n > 4 ? 4 : (size_t)n;
}

/* Point a thread's cursor at span s of class c from its first slot; the
 * span's chunks become the thread's group's when `owned`.  Lock held. */
LF_MALLOC_TEXT static void cursor_start(struct thread_cache *tc, unsigned c,
                                        struct sweep_cursor *cur, struct span *s, bool owned)
{
    struct region *r = &lf_regions[c];
    uint64_t qa, qb;
    lf_span_slots(r, span_chunk_index(r, s), &qa, &qb);
    if (owned)
        chunk_entries_set(lf_free_map, region_chunk_entry(r, span_chunk_index(r, s)),
                          r->span_chunks, (uint8_t)(1 + c + tc->free_group * FREE_GROUP_STRIDE));
    cur->span = s;
    cur->next = qa - r->q0;
    cur->end = qb - r->q0;
    cur->head = 0;
}

/* Refill the calling thread's list of (class, kind).
 * Most refills continue the thread's lazy sweep of a span it claimed, one
 * piece at a time, without the lock and straight into the cache (the
 * place a collection marks); slots other threads freed are taken first.
 * The lock is taken to claim the next span or to take explicitly freed
 * slots.  With `plain` (GC_generic_malloc_many), a piece of the sweep is
 * not put in the cache but returned, linked with plain pointers, its
 * length in *plain; other refills fill the cache as usual (*plain 0,
 * NULL returned).  Without, NULL means out of memory, else the cache's
 * list is returned. */
LF_MALLOC_TEXT static void *cache_refill(struct thread_cache *tc, struct kind_cache *kc, unsigned c,
                          unsigned kind, size_t *plain)
{
    struct class_kind *ck = class_kind_of(c, kind);
    struct region *r = &lf_regions[c];
    struct sweep_cursor *cur = &kc->cursor[c];
    size_t want = batch_slots(r);
    bool manual = lf_kinds[kind].manual;
    size_t taken;
    if (plain) {
        want *= plain_batches();
        *plain = 0;
    }
    bool owned = kind == KIND_MALLOC && tc->free_grouped;
    if (unlikely(owned && tc->pend[c].head))
        pend_flush(tc, c);
    for (;;) {
        if (sweep_enter(tc)) {
            size_t n;
            void *list = owned ? owner_take(tc->free_group, c, &n) : NULL;
            if (list) {
                /* Slots of the group's spans that other threads freed. */
                taken = n;
                kc->free[c] = list;
                sweep_exit(tc);
                break;
            }
            list = remote_take(ck, &n);
            if (list) {
                taken = manual ? list_keep(list, n, trim_high(want, TRIM_MANUAL), &ck->remote,
                                           &ck->remote_count) : n;
                n = taken;
                kc->free[c] = list;
                sweep_exit(tc);
                if (manual)
                    lf_malloc_remote_taken(n * r->size);
                else
                    count_refill(tc, n * r->size);
                break;
            }
            /* Slots on the global list are reused before the pages of
             * a span taken empty are touched (malloc's kinds: with 4
             * threads freeing each other's objects, as the remote-free
             * test, peak RSS at round 1000 was 15.9-16.4 MB, now
             * 14.9-15.2). */
            if (cur->span && !(cur->fresh && manual && __atomic_load_n(&ck->free, __ATOMIC_RELAXED))) {
                /* A span taken empty is linked a page at a time, two slots
                 * at least: a batch of large slots would write pages that
                 * may never be used (a program with one 4 KiB buffer had
                 * 32 KiB resident).  Two, so that the slot after a lone
                 * object is linked, free, and a free of it caught. */
                size_t link = cur->fresh && r->size > PAGE_SIZE / 8
                    ? (r->size < PAGE_SIZE / 2 ? PAGE_SIZE / r->size : 2) : want;
                list = cursor_take(r, cur, kind, link, plain != NULL, &n);
                if (cur->next >= cur->end)
                    cur->span = NULL;
                if (plain && list) {
                    /* The caller's from here: a collection that stops
                     * this thread finds it (a normal kind's: see
                     * GC_generic_malloc_many) from the registers. */
                    sweep_exit(tc);
                    count_refill(tc, n * r->size);
                    *plain = n;
                    return list;
                }
                kc->free[c] = list;
                sweep_exit(tc);
                if (list) {
                    taken = n;
                    if (!manual)
                        count_refill(tc, n * r->size);
                    break;
                }
                continue;
            }
            sweep_exit(tc);
        }
        lock();                       /* also waits for a collection */
        if (owned && !ck->free)
            groups_take(tc, c);
        if (ck->free) {
            /* Up to a batch of explicitly freed slots. */
            void **head = ck->free, **tail = head;
            size_t n = 1;
            while (n < want && link_decode(tail[0])) {
                tail = link_decode(tail[0]);
                n++;
            }
            ck->free = link_decode(tail[0]);
            tail[0] = link_encode(NULL);
            lf_assert(ck->free_count >= n);
            ck->free_count -= (uint32_t)n;
            kc->free[c] = head;
            taken = n;
            if (!manual)
                count_refill(tc, n * r->size);
            unlock();
            break;
        }
        if (cur->span) {
            /* The sweepers were held, but not by a collection (fork,
             * GC_stop_world_external, a heap walk): the span is still
             * ours to sweep.  Claiming another would leave the rest of
             * this one unswept until the next collection. */
            unlock();
            continue;
        }
        if (manual && cursor_adopt(tc, c, kind, cur, owned)) {
            unlock();
            continue;
        }
        bool fresh;
        struct span *s = claim_span(c, kind, &fresh);
        if (!s) {
            unlock();
            return NULL;
        }
        if (s == &claim_take_free) {
            unlock();
            continue;
        }
        cursor_start(tc, c, cur, s, owned);
        cur->clear = lf_kinds[kind].clear && (!fresh || s->dirty);
        cur->fresh = fresh;
        if (fresh)
            cursor_color(r, c, cur);
        s->dirty = 0;
        unlock();
    }
    kc->credit[c] = refill_credit(want, taken, trim_scale(kind));
    if (unlikely(lf_malloc_shuffle) && manual)
        lf_malloc_shuffle_list(&kc->free[c]);
    if (plain) {
        *plain = 0;
        return NULL;
    }
    return kc->free[c];
}

/* Refill the calling thread's list of (class, kind) and pop from it. */
LF_MALLOC_TEXT static void *cache_refill_pop(struct thread_cache *tc, struct kind_cache *kc, unsigned c,
                              unsigned kind)
{
    if (!cache_refill(tc, kc, c, kind, NULL))
        return NULL;
    return free_list_pop(&kc->free[c]);
}

static unsigned class_for(size_t bytes)
{
    if (bytes <= SMALL_REQUEST_MAX)
        return lf_request_class[bytes];
    if (bytes > SIZE_MAX - lf_extra_bytes)
        return NUM_CLASSES;
    return (unsigned)lf_class_of_size(bytes + lf_extra_bytes);
}

/* A thread that touches the heap holds heap pointers on its stack, so it
 * is registered (its stack scanned) whatever it does first: a large,
 * uncollectable or aligned allocation, a realloc or a free.  Only the
 * slow paths ask: a thread with objects on its cached lists is
 * registered already. */
static bool ensure_registered(void)
{
    struct thread_cache *tc = lf_tl_cache;
    return likely(tc != &lf_empty_cache && !tc->manual_only) || lf_thread_cache_create();
}

/* malloc's paths need a cache only: the thread need not be stopped or
 * scanned by collections (see manual_only). */
static bool ensure_cached(void)
{
    return likely(lf_tl_cache != &lf_empty_cache) || lf_thread_cache_create_manual();
}

static void *alloc_in_class(unsigned c, size_t bytes, unsigned kind)
{
    if (unlikely(c >= NUM_CLASSES || !lf_regions[c].reserved))
        return lf_oom(bytes);
    if (unlikely(!ensure_registered()))
        return lf_oom(bytes);
    if (c < NUM_SMALL_CLASSES && kind_cached(kind)) {
        struct thread_cache *tc = lf_tl_cache;
        struct kind_cache *kc = kind_cache_get(tc, kind);
        if (!kc)
            return lf_oom(bytes);
        if (kc->free[c])
            return free_list_pop(&kc->free[c]);
        void *p = cache_refill_pop(tc, kc, c, kind);
        return p ? p : lf_oom(bytes);
    }
    lock();
    void *p = alloc_locked(c, kind, bytes);
    unlock();
    return p ? p : lf_oom(bytes);
}

/* Uncollectable memory needs no collection: allocating it leaves
 * collection off (no signal handler, no fork handler, no thread). */
static void ensure_init_for(unsigned kind)
{
    if (lf_kinds[kind].uncollectable) {
        lf_ensure_heap();
        lf_gc_objects_sized = true;
    } else {
        lf_ensure_init();
    }
}

static void *alloc_kind_entered(uintptr_t bytes, uintptr_t kind, uintptr_t unused)
{
    (void)unused;
    ensure_init_for((unsigned)kind);
    void *p = alloc_in_class(class_for(bytes), bytes, (unsigned)kind);
    if (unlikely(AO_load(&lf_finalizers_due)))
        lf_finalize_due();
    return p;
}

void *lf_alloc_kind(size_t bytes, unsigned kind)
{
    void *p = lf_entered(alloc_kind_entered, bytes, kind, 0);
    if (unlikely(lf_disclaim_tracked[kind]) && p)
        lf_disclaim_track(p, true);
    return p;
}

/* Out of line, so that the fast paths need no stack frame: they reach it
 * by a tail call. */
static __attribute__((noinline)) void *alloc_slow(size_t bytes, unsigned kind)
{
    return lf_alloc_kind(bytes, kind);
}

static void *alloc_aligned_entered(uintptr_t align, uintptr_t bytes, uintptr_t kind_)
{
    unsigned kind = (unsigned)kind_;
    ensure_init_for(kind);
    if (align <= 16)
        return alloc_in_class(class_for(bytes), bytes, kind);
    if (bytes > SIZE_MAX - lf_extra_bytes)
        return lf_oom(bytes);
    /* Objects sit at multiples of their size: a class whose size is a
     * multiple of align gives the alignment with no padding. */
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        uint64_t s = lf_regions[c].size;
        if (lf_regions[c].reserved && s >= bytes + lf_extra_bytes && s % align == 0)
            return alloc_in_class(c, bytes, kind);
    }
    return lf_oom(bytes);
}

void *lf_alloc_aligned(size_t align, size_t bytes, unsigned kind)
{
    return lf_entered(alloc_aligned_entered, align, bytes, kind);
}

/* The fast paths: a pop from the thread's list, no frame, no lock; the
 * slow path is reached by a tail call. */
static inline __attribute__((always_inline)) void *cache_pop(size_t bytes, unsigned kind)
{
    if (likely(bytes <= SMALL_REQUEST_MAX)) {
        unsigned c = lf_request_class[bytes];
        struct thread_cache *tc = lf_tl_cache;
        if (likely(tc->k[kind].free[c]))
            return free_list_pop(&tc->k[kind].free[c]);
    }
    return alloc_slow(bytes, kind);
}

LFGC_EXPORT void *GC_malloc(size_t bytes)
{
    return cache_pop(bytes, KIND_NORMAL);
}

/* This library's own GC_malloc, whatever the loader bound the name to. */
extern __typeof__(GC_malloc) lf_own_malloc
    __attribute__((alias("GC_malloc"), copy(GC_malloc), visibility("hidden")));

LFGC_EXPORT void *GC_malloc_atomic(size_t bytes)
{
    return cache_pop(bytes, KIND_PTRFREE);
}

/* bdwgc's batch allocation: zeroed objects of `bytes` linked through
 * their first words (GC_NEXT), as many as the thread's list holds for the
 * class up to a page's worth, and at least one.  Each is popped as
 * GC_malloc pops it, so that the list built so far is an ordinary
 * reachable structure if a collection stops this thread meanwhile. */
LFGC_EXPORT void *GC_malloc_many(size_t bytes)
{
    refused_check();            /* GC_malloc would be the other copy's */
    void **list = GC_malloc(bytes);
    if (!list || bytes > SMALL_REQUEST_MAX)
        return list;
    unsigned c = lf_request_class[bytes];
    struct kind_cache *kc = &lf_tl_cache->k[KIND_NORMAL];
    size_t room = 4096 / lf_regions[c].size;
    for (size_t n = 1; n < room && kc->free[c]; n++) {
        void **p = free_list_pop(&kc->free[c]);
        p[0] = list;
        list = p;
    }
    return list;
}

/* GC_generic_malloc_many's refill, entered: a piece of the thread's
 * sweep linked as the caller wants it (*count objects), else NULL, with
 * the thread's list of the class filled if memory allows. */
static void *many_entered(uintptr_t bytes, uintptr_t kind_, uintptr_t count_)
{
    unsigned kind = (unsigned)kind_;
    size_t *count = (size_t *)count_;
    *count = 0;
    ensure_init_for(kind);
    if (unlikely(!ensure_registered()))
        return NULL;
    unsigned c = lf_request_class[bytes];
    struct thread_cache *tc = lf_tl_cache;
    struct kind_cache *kc = kind_cache_get(tc, kind);
    void *list = NULL;
    if (kc && !kc->free[c])
        list = cache_refill(tc, kc, c, kind, count);
    if (unlikely(AO_load(&lf_finalizers_due)))
        lf_finalize_due();
    return list;
}

/* GC_malloc_many for any kind (gc_inline.h): the list in *result, linked
 * with plain pointers in the objects' first words, as bdwgc's is:
 * gc_inline.h's macros and runtimes' inline allocators pop it.  Kinds
 * whose objects are tracked one by one (uncollectable ones, those with a
 * disclaim procedure) get one object per call.  Kinds with pointers get,
 * when the thread's list of the class is empty, the next piece of its
 * sweep linked that way from the start; other lists are popped from the
 * thread's, as GC_malloc pops them.  (The links of a list handed out hold
 * it together only for kinds that scan the first word, in bdwgc too.) */
LFGC_EXPORT void GC_generic_malloc_many(size_t bytes, int kind, void **result)
{
    *result = NULL;
    if (kind < 0 || !lf_kind_valid((unsigned)kind)) {
        lf_warn("GC Warning: GC_generic_malloc_many: no kind %p; returning NULL\n",
                (uintptr_t)kind);
        return;
    }
    const struct kind *kd = &lf_kinds[kind];
    bool batch = bytes - 1 < SMALL_REQUEST_MAX && !kd->uncollectable &&
                 !lf_disclaim_tracked[kind] && lf_request_class[bytes] < NUM_SMALL_CLASSES;
    if (batch && !kd->ptrfree && !kd->manual) {
        size_t n;
        void *plain = lf_entered(many_entered, bytes, (unsigned)kind, (uintptr_t)&n);
        if (plain) {
            *result = plain;
            return;
        }
    }
    void **list = lf_alloc_kind(bytes, (unsigned)kind);
    if (!list || !batch) {
        *result = list;
        return;
    }
    unsigned c = lf_request_class[bytes];
    struct thread_cache *tc = lf_tl_cache;
    struct kind_cache *kc = kind < NUM_CACHED_KINDS ? &tc->k[kind] : tc->more[kind];
    size_t room = 4096 / lf_regions[c].size;
    /* In the thread list's order (the sweep's: by address), which is the
     * order the program will use them in. */
    void **tail = list;
    for (size_t n = 1; kc && n < room && kc->free[c]; n++) {
        void **p = free_list_pop(&kc->free[c]);
        tail[0] = p;
        tail = p;
    }
    *result = list;
}

/* bdwgc prints its global free list of a kind and size; lfgc's lists are
 * per thread: the calling thread's, and the shared one. */
LFGC_EXPORT void GC_print_free_list(int kind, size_t granules)
{
    size_t bytes = granules * 16;
    if (kind < 0 || !lf_kind_valid((unsigned)kind) || bytes == 0 || bytes > SMALL_REQUEST_MAX) {
        dprintf(lf_log_fd, "GC_print_free_list: no list for kind %d, %zu granules\n", kind,
                granules);
        return;
    }
    /* The class GC_generic_malloc_many(bytes) fills. */
    unsigned c = lf_request_class[bytes];
    struct thread_cache *tc = lf_tl_cache;
    struct kind_cache *kc = kind < NUM_CACHED_KINDS ? &tc->k[kind] : tc->more[kind];
    size_t n = 0;
    dprintf(lf_log_fd, "Free list of kind %d, %zu-byte objects (this thread):\n", kind,
            (size_t)lf_regions[c].size);
    for (void **p = kc ? kc->free[c] : NULL; p; p = link_decode(p[0]), n++)
        dprintf(lf_log_fd, "\t%p\n", (void *)p);
    dprintf(lf_log_fd, "%zu objects; %u more on the shared list\n", n,
            class_kind_of(c, (unsigned)kind)->free_count);
}

/* ------------------------------------------------------------------ */
/* Explicit free                                                        */

/* Unmark the slots of a free list and return how many it holds. */
static uint32_t list_unmark(struct region *r, void **list)
{
    uint32_t n = 0;
    for (void **p = list; p; p = link_decode(p[0]), n++)
        mark_clear(r, p);
    return n;
}

/* At a collection the global free lists of collectable kinds are dropped,
 * and the remote stacks too: the sweep finds their slots again.  Their
 * slots may still be marked (freed while their span was being swept, or
 * left by an exiting thread): unmark them, or a minor collection would
 * take them for old objects.  Uncollectable spans are never swept, so
 * their lists (slots freed with GC_free, or not yet handed out) stay. */
void lf_caches_discard(void)
{
    unsigned kinds = lf_kinds_made();
    for (unsigned k = 0; k < kinds; k++) {
        for (unsigned c = 0; c < NUM_CLASSES; c++) {
            struct class_kind *ck = class_kind_of(c, k);
            ck->unswept = NULL;
            if (lf_kinds[k].uncollectable)
                continue;
            list_unmark(&lf_regions[c], ck->free);
            list_unmark(&lf_regions[c], (void **)AO_load(&ck->remote));
            ck->free = NULL;
            ck->free_count = 0;
            AO_store(&ck->remote, 0);
            AO_store(&ck->remote_count, 0);
        }
    }
}

static void kind_cache_mark(struct kind_cache *kc, unsigned kind)
{
    /* A span taken empty before leak mode was set is linked in pieces:
     * the slots its cursor has not reached were never allocated. */
    if (unlikely(GC_find_leak))
        for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
            const struct sweep_cursor *cur = &kc->cursor[c];
            if (cur->span && cur->fresh) {
                lf_leak_never_allocated(&lf_regions[c], cur->next - cur->head, cur->next);
                lf_leak_never_allocated(&lf_regions[c], cur->next, cur->end);
            }
        }
    /* The spans being swept are classified afresh by this collection. */
    memset(kc->cursor, 0, sizeof kc->cursor);
    bool ptrfree = lf_kinds[kind].ptrfree;
    uint64_t bytes = 0, aging = 0;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        for (void **p = kc->free[c]; p; p = link_decode(p[0])) {
            uint64_t bit = lowfat_slot_number(p) - r->q0;
            bit_set(r->mark_bits, bit);
            bytes += r->size;
            struct span *s = span_at(r, span_index_of(r, (uintptr_t)p));
            uint64_t *cached = lf_region_cached_bits(r, bit);
            if (cached) {
                bit_set(cached, bit);
                s->cached = 1;
            }
            /* The sweep counts a nursery span's marked slots as aging. */
            if (s->nursery)
                aging += r->size;
        }
    }
    /* The sweep counts marked slots as live: these are free. */
    if (ptrfree) {
        lf_hs.cached_ptrfree += bytes;
    } else {
        lf_hs.cached_ptrful += bytes;
        lf_hs.cached_aging_ptrful += aging;
    }
    lf_hs.cached_aging += aging;
}

/* Slots on a thread's lists stay with it across a collection: they are
 * marked (not scanned: they hold only a tagged link and the canary) so
 * that the sweep leaves them alone.  Clearing the lists instead would race
 * with a thread stopped in the middle of a pop. */
void lf_cache_mark(struct thread_cache *tc)
{
    /* Refilled bytes the thread has not added to the shared count yet
     * were allocated before this collection: they go to the total only,
     * so that GC_get_bytes_since_gc (which adds the caller's) starts at 0. */
    AO_fetch_and_add((volatile AO_t *)&lf_hs.total_allocd, (AO_t)tc->allocd);
    tc->allocd = 0;
    tc->freed_bytes = 0;            /* freed before this collection */
    for (unsigned k = 0; k < NUM_CACHED_KINDS; k++)
        kind_cache_mark(&tc->k[k], k);
    unsigned kinds = lf_kinds_made();
    for (unsigned k = NUM_CACHED_KINDS; k < kinds; k++)
        if (tc->more[k])
            kind_cache_mark(tc->more[k], k);
}

/* A thread leaves, or its group's leftovers go to the global lists, with
 * a span of a malloc kind taken empty and linked only in part: the rest,
 * never allocated, is never touched either.  Linking it whole would write
 * a link into each of its slots, so a page of every such span, for every
 * thread that leaves (glibc's bench-malloc-thread, 32 threads: peak RSS
 * 33.5 MB, 10.5 without; docs/performance.md).  The span goes to its
 * class's orphans instead, where the next refill that would take a span
 * resumes it.  Lock held.  False if the cursor is not such a span. */
LF_MALLOC_TEXT static bool cursor_orphan(unsigned c, unsigned k, struct sweep_cursor *cur)
{
    if (!cur->span || !lf_kinds[k].manual || !cur->fresh || cur->head || cur->clear ||
        cur->next >= cur->end)
        return false;
    struct class_kind *ck = class_kind_of(c, k);
    struct span *s = cur->span;
    s->obj_bytes = cur->next;
    s->next = ck->orphans;
    ck->orphans = s;
    cur->span = NULL;
    return true;
}

/* A span from c's orphans for the calling thread's cursor, or false.
 * Lock held. */
LF_MALLOC_TEXT static bool cursor_adopt(struct thread_cache *tc, unsigned c, unsigned k,
                                        struct sweep_cursor *cur, bool owned)
{
    struct class_kind *ck = class_kind_of(c, k);
    struct span *s = ck->orphans;
    if (!s)
        return false;
    ck->orphans = s->next;
    s->next = NULL;
    cursor_start(tc, c, cur, s, owned);
    cur->next = s->obj_bytes;
    cur->clear = false;
    cur->fresh = true;
    s->obj_bytes = 0;
    return true;
}

/* Unlinked slots of c's orphans (malloc_info).  Lock held. */
LF_MALLOC_TEXT uint64_t lf_orphan_slots(unsigned c, unsigned k)
{
    struct region *r = &lf_regions[c];
    uint64_t n = 0;
    for (struct span *s = class_kind_of(c, k)->orphans; s; s = s->next) {
        uint64_t qa, qb;
        lf_span_slots(r, span_chunk_index(r, s), &qa, &qb);
        n += qb - r->q0 - s->obj_bytes;
    }
    return n;
}

LF_MALLOC_TEXT static void kind_cache_return(struct kind_cache *kc, unsigned k)
{
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        struct class_kind *ck = class_kind_of(c, k);
        /* The rest of a span the thread was sweeping: swept now, to the
         * global list.  The span counts as swept, so nobody else would
         * sweep it before the next collection. */
        struct sweep_cursor *cur = &kc->cursor[c];
        if (cur->span && !cursor_orphan(c, k, cur)) {
            size_t n;
            void **list = cursor_take(&lf_regions[c], cur, k, SIZE_MAX, false, &n);
            cur->span = NULL;
            if (list) {
                uint32_t linked = free_list_prepend(ck, list);
                lf_assert(linked == n);
            }
        }
        void **head = kc->free[c];
        if (!head)
            continue;
        uint32_t n = free_list_prepend(ck, head);
        kc->free[c] = NULL;
        if (lf_kinds[k].manual)
            continue;
        uint64_t bytes = (uint64_t)n * lf_regions[c].size;
        uint64_t since = AO_load((volatile AO_t *)&lf_hs.allocd_since_gc);
        count_allocated(-(int64_t)(bytes < since ? bytes : since));
    }
}

/* The last thread of group g leaves its lists and cursors of malloc's
 * plain kind to the group's next thread (group_left).  Lock held. */
LF_MALLOC_TEXT static void group_left_put(struct thread_cache *tc, unsigned g)
{
    struct group_left *gl = &group_left[g];
    struct kind_cache *kc = &tc->mk;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        /* An empty entry is left as it is, empty (taken or released):
         * a thread of the collector's kinds only writes no page. */
        if (!kc->free[c] && !kc->cursor[c].span) {
            lf_assert(!gl->free[c] && !gl->cursor[c].span);
            continue;
        }
        gl->free[c] = kc->free[c];
        gl->cursor[c] = kc->cursor[c];
        group_left_any[g] = true;
        kc->free[c] = NULL;
        kc->cursor[c].span = NULL;
    }
}

/* A thread joins group g: it takes what the group's last thread left, as
 * its own lists (empty at registration; a class that is not goes to the
 * global list).  Lock held. */
LF_MALLOC_TEXT static void group_left_take(struct thread_cache *tc, unsigned g)
{
    struct group_left *gl = &group_left[g];
    struct kind_cache *kc = &tc->mk;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        if (kc->free[c] || kc->cursor[c].span) {
            group_left_release(g, c, -1);
            continue;
        }
        kc->free[c] = gl->free[c];
        kc->cursor[c] = gl->cursor[c];
        /* Not measured: the list may grow by a full allowance before the
         * first trim looks at it. */
        kc->credit[c] = lf_refill_credit_empty(c);
        gl->free[c] = NULL;
        gl->cursor[c].span = NULL;
    }
    group_left_any[g] = false;
}

/* What group g's last thread left of class c, to the global list, the
 * chunks of its slots becoming group to's (to >= 0).  Lock held. */
LF_MALLOC_TEXT static void group_left_release(unsigned g, unsigned c, int to)
{
    struct group_left *gl = &group_left[g];
    struct sweep_cursor *cur = &gl->cursor[c];
    void **list = gl->free[c];
    gl->free[c] = NULL;
    if (cur->span && !cursor_orphan(c, KIND_MALLOC, cur)) {
        size_t n;
        void **rest = cursor_take(&lf_regions[c], cur, KIND_MALLOC, SIZE_MAX, false, &n);
        cur->span = NULL;
        if (rest) {
            void **t = rest;
            while (link_decode(t[0]))
                t = link_decode(t[0]);
            t[0] = link_encode(list);
            list = rest;
        }
    }
    if (!list)
        return;
    if (to >= 0) {
        uint8_t label = (uint8_t)(1 + c + (unsigned)to * FREE_GROUP_STRIDE);
        for (void **p = list; p; p = link_decode(p[0]))
            __atomic_store_n(&lf_free_map[chunk_entry((uintptr_t)p)], label, __ATOMIC_RELAXED);
    }
    free_list_prepend(class_kind_of(c, KIND_MALLOC), list);
}

/* Every group with no thread: what its last thread left, to the global
 * lists (a scavenge looks at them there).  Lock held. */
LF_MALLOC_TEXT void lf_groups_left_release(void)
{
    for (unsigned g = 0; g < FREE_GROUPS; g++) {
        if (!group_left_any[g] || group_threads[g])
            continue;
        for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++)
            group_left_release(g, c, -1);
        group_left_any[g] = false;
    }
}

/* The free slots group g's last thread left of class c; lock held. */
LF_MALLOC_TEXT static uint64_t group_left_count(unsigned g, unsigned c)
{
    struct group_left *gl = &group_left[g];
    uint64_t n = 0;
    for (void **p = gl->free[c]; p; p = link_decode(p[0]))
        n++;
    if (gl->cursor[c].span && gl->cursor[c].end > gl->cursor[c].next)
        n += gl->cursor[c].end - gl->cursor[c].next;
    return n;
}

/* A thread leaves: its free slots go to the global lists.  Lock held. */
LF_MALLOC_TEXT void lf_cache_return(struct thread_cache *tc)
{
    count_allocated((int64_t)tc->allocd);
    count_expl_freed(tc->freed_bytes);      /* its lists' bytes are given back below */
    /* A thread gone has nothing in progress: what it allocated does not
     * widen the next threshold (threads started one after another would
     * otherwise look like threads allocating at once). */
    if (tc->cycle == GC_gc_no + 1)
        lf_hs.exited_allocd += tc->cycle_allocd;
    tc->allocd = 0;
    tc->freed_bytes = 0;
    tc->cycle = 0;
    for (unsigned k = 0; k < NUM_CACHED_KINDS; k++)
        kind_cache_return(&tc->k[k], k);
    unsigned kinds = lf_kinds_made();
    for (unsigned k = NUM_CACHED_KINDS; k < kinds; k++) {
        struct kind_cache *kc = tc->more[k];
        if (!kc)
            continue;
        kind_cache_return(kc, k);
        tc->more[k] = NULL;
        kc->next = spare_kind_caches;
        spare_kind_caches = kc;
    }
    unsigned g = tc->free_group;
    if (tc->free_grouped && lf_malloc_small_kind == KIND_MALLOC && group_threads[g] == 1 &&
        !group_left_any[g])
        group_left_put(tc, g);      /* the last of its group */
    else
        kind_cache_return(&tc->mk, lf_malloc_small_kind);
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++)
        pend_flush(tc, c);
    /* The last thread of its group leaves: the slots others freed to the
     * group go to the global lists (frees still on their way there wait
     * for the group's next thread, or a scavenge). */
    if (tc->free_grouped) {
        tc->free_grouped = 0;
        if (__atomic_sub_fetch(&group_threads[tc->free_group], 1, __ATOMIC_RELAXED) == 0) {
            group_stamp[tc->free_group] = ++group_clock;
            lf_owner_remote_drain(tc->free_group);
        }
    }
}

/* Validate p as the base of an object in use; warn and return false
 * otherwise.  Reads only what does not change while p is in use, so the
 * lock is not needed (frees racing for one object are the program's
 * error; a free that follows another is caught). */
LF_MALLOC_TEXT static bool check_base(void *p, struct region **rp, struct span **sp)
{
    if (!lowfat_is_ptr(p)) {
        lf_warn("GC Warning: free or realloc of %p: not a pointer lfgc allocated; "
             "ignored\n", (uintptr_t)p);
        return false;
    }
    struct region *r = region_of(p);
    void *base = lowfat_base(p);
    if (!r->mapped || (uintptr_t)p >= r->usable_end || !chunk_kind(r, (uintptr_t)base)) {
        if (r->mapped && (uintptr_t)p >= r->start &&
            (uintptr_t)p < lowfat_heap_top[lowfat_index(p)])
            lf_warn("GC Warning: free or realloc of %p: the object was already freed; ignored\n",
                 (uintptr_t)p);
        else
            lf_warn("GC Warning: free or realloc of %p: not a pointer lfgc allocated; ignored\n",
                 (uintptr_t)p);
        return false;
    }
    if (base != p) {
        lf_warn("GC Warning: free or realloc of %p: an interior pointer, not the start "
             "of an object; ignored\n", (uintptr_t)p);
        return false;
    }
    struct span *s = span_at(r, span_index_of(r, (uintptr_t)p));
    if (!r->large && slot_is_free(p)) {
        lf_warn("GC Warning: free or realloc of %p: the object was already freed; ignored\n",
             (uintptr_t)p);
        return false;
    }
    *rp = r;
    *sp = s;
    return true;
}

/* Free the object at p, lock held (also for a disclaim procedure's
 * object, after a collection).  False when p is no object's base. */
LF_MALLOC_TEXT bool lf_free_held(void *p)
{
    struct region *r;
    struct span *s;
    if (!check_base(p, &r, &s))
        return false;
    unsigned kind = s->kind;
    unsigned c = (unsigned)(r - lf_regions);
    if (lf_finalize_entries())
        lf_finalize_forget(p, object_size(r, p));
    if (lf_kinds[kind].uncollectable &&
        (r->large || bit_get(r->alloc_bits, lowfat_slot_number(p) - r->q0))) {
        size_t n = object_size(r, p);
        GC_non_gc_bytes = GC_non_gc_bytes > n ? GC_non_gc_bytes - n : 0;
    }
    if (unlikely(lf_disclaim_tracked[kind]))
        lf_disclaim_track(p, false);
    if (r->large) {
        count_freed_shared(s->obj_bytes);
        count_expl_freed(s->obj_bytes);
        mark_clear(r, p);
        lf_span_free(r, s);
        lf_pages_release_flush();
        return true;
    }
    if (lf_kinds[kind].uncollectable) {
        if (!bit_get(r->alloc_bits, lowfat_slot_number(p) - r->q0)) {
            lf_warn("GC Warning: free of %p: the object was already freed; ignored\n",
                 (uintptr_t)p);
            return false;
        }
        set_alloc_bit(r, p, false);
    }
    if (lf_kinds[kind].clear)
        memset(p, 0, r->size);
    count_freed_shared(r->size);
    count_expl_freed(r->size);
    if (s->state == SPAN_UNSWEPT) {
        /* The lazy sweep will find it: unmark it, mark it free. */
        mark_clear(r, p);
        slot_make_free(p, NULL);
    } else {
        struct class_kind *ck = class_kind_of(c, kind);
        slot_make_free(p, ck->free);
        ck->free = p;
        ck->free_count++;
    }
    return true;
}

/* Frees under the lock. */
LF_MALLOC_TEXT static void free_locked(void *p)
{
    lock();
    lf_free_held(p);
    unlock();
}

/* A thread that frees more of a class than it allocates (the consumer of
 * another thread's objects) would keep the slots for ever, so its list is
 * measured when it may have grown past TRIM_HIGH batches and cut back to
 * TRIM_LOW, the rest going to the remote stack, where the next refill of
 * any thread takes it.  The list's length is bounded, without counting
 * pops (the malloc fast path stays as it is), by what was measured or
 * refilled plus the frees since: kc->credit[c] is the frees left before
 * that bound passes TRIM_HIGH batches.  The gap between the bounds keeps a
 * thread that frees in bursts (then allocates as much again) from pushing
 * its slots away only to take them back at its next refill, and a measure
 * walks at most TRIM_HIGH batches (recently freed slots) and then leaves
 * at least as many frees as it walked slots before the next.  malloc's
 * kinds have TRIM_MANUAL times the high and middle bounds. */
LF_MALLOC_TEXT static size_t cache_trim(struct thread_cache *tc, struct kind_cache *kc, unsigned c,
                         unsigned kind, size_t batch)
{
    size_t high = trim_high(batch, trim_scale(kind)), low = TRIM_LOW * batch;
    size_t mid = TRIM_MID * trim_scale(kind) * batch;
    void **keep = NULL, **last = kc->free[c];
    size_t n = 1;
    for (void **next; n <= high && (next = link_decode(last[0])); n++) {
        if (n == low)
            keep = last;
        last = next;
    }
    /* n is now the list's length, or high + 1 and last its slot high + 1. */
    if (n <= mid || !keep || !sweep_enter(tc)) {
        /* Short enough (or a collection waits: look again soon). */
        kc->credit[c] = (int64_t)(n <= mid ? high - n : batch);
        return 0;
    }
    void **head = link_decode(keep[0]);
    keep[0] = last[0];              /* the rest, when the walk stopped short */
    size_t pushed = n - low;
    remote_push(class_kind_of(c, kind), head, last, pushed);
    sweep_exit(tc);
    if (!lf_kinds[kind].manual)
        count_freed_shared(pushed * lf_regions[c].size);
    /* Past high, what is left is not known: look again a batch later. */
    kc->credit[c] = (int64_t)(n > high ? batch : high - low);
    return pushed;
}

/* malloc's small object at p (class c, validated: a malloc'ed object in
 * use) onto the calling thread's list, where the free fast path would
 * have put it, wiped and at a random place in the hardened mode; the
 * list is trimmed once the fast path's credit of frees is spent. */
LF_MALLOC_TEXT void lf_manual_free_small(void *p, unsigned c)
{
    if (unlikely(lf_tl_cache == &lf_empty_cache)) {
        /* The thread registers: see group_choose. */
        int g = slot_group(p);
        tl_heir_of = g >= 0 && !__atomic_load_n(&group_threads[g], __ATOMIC_RELAXED) ? g : -1;
        struct thread_cache *made = lf_thread_cache_for_free(true);
        tl_heir_of = -1;
        if (!made) {
            free_locked(p);
            return;
        }
    }
    struct thread_cache *tc = lf_tl_cache;
    struct kind_cache *kc = &tc->mk;
    struct region *r = &lf_regions[c];
    if (unlikely(!tc->free_magic[FREE_MAGIC_OWN]))
        lf_cache_arm_free(tc);
    int g = slot_group(p);
    if (g >= 0 && (unsigned)g != tc->free_group) {
        if (__atomic_load_n(&group_threads[g], __ATOMIC_RELAXED)) {
            remote_defer(tc, (unsigned)g, c, p);
            return;
        }
        /* No thread is left in the span's group (a server's worker that
         * was replaced, whose successor frees what it allocated): the
         * span becomes the freeing thread's group's.  Only where its
         * slots are allocated and freed changes, not what is free. */
        __atomic_store_n(&lf_free_map[chunk_entry((uintptr_t)p)],
                         (uint8_t)(1 + c + tc->free_group * FREE_GROUP_STRIDE), __ATOMIC_RELAXED);
    }
    if (unlikely(lf_malloc_wipe))
        memset(p, 0, r->size);
    if (unlikely(lf_malloc_shuffle) && kc->free[c])
        lf_malloc_insert_random(&kc->free[c], p);
    else {
        slot_make_free(p, kc->free[c]);
        kc->free[c] = p;
    }
    if (--kc->credit[c] < 0) {
        size_t n = cache_trim(tc, kc, c, lf_malloc_small_kind, batch_slots(r));
        if (n)
            lf_malloc_remote_pushed(n * r->size);
    }
}

/* Does the calling thread hold the heap lock?  glibc records the owner's
 * thread id in the mutex.  In malloc mode the collector's own
 * allocations come from malloc, some with the lock held: the first
 * collection starts the marker's helpers, and pthread_create allocates. */
LF_MALLOC_TEXT static bool lock_is_mine(void)
{
    if (unlikely(!tl_tid))
        tl_tid = gettid();
    return __atomic_load_n(&lf_gc_lock.__data.__owner, __ATOMIC_RELAXED) == tl_tid;
}

/* A slot of malloc's small class c, the lock held by the caller: from the
 * global list, or a span claimed and linked whole onto it. */
LF_MALLOC_TEXT static void *manual_alloc_held(unsigned c, unsigned kind)
{
    struct class_kind *ck = class_kind_of(c, kind);
    struct region *r = &lf_regions[c];
    if (!ck->free) {
        bool fresh;
        struct span *s = claim_span(c, kind, &fresh);
        if (!s)
            return NULL;
        uint64_t qa, qb;
        lf_span_slots(r, span_chunk_index(r, s), &qa, &qb);
        uint64_t next = qa - r->q0;
        size_t n;
        void **list = link_fresh(r, &next, qb - r->q0, SIZE_MAX, &n);
        s->dirty = 0;
        free_list_prepend(ck, list);
    }
    lf_assert(ck->free_count >= 1);
    ck->free_count--;
    return free_list_pop((void **)&ck->free);
}

/* One object of malloc's (kind: a manual kind), class c, never through
 * the collection policy.  NULL when out of memory. */
LF_MALLOC_TEXT void *lf_alloc_manual(unsigned c, size_t bytes, unsigned kind)
{
    if (unlikely(c >= NUM_CLASSES || !lf_regions[c].reserved || !ensure_cached()))
        return NULL;
    if (c < NUM_SMALL_CLASSES) {
        struct thread_cache *tc = lf_tl_cache;
        if (tc->mk.free[c])
            return free_list_pop(&tc->mk.free[c]);
        if (unlikely(lock_is_mine()))
            return manual_alloc_held(c, kind);
        return cache_refill_pop(tc, &tc->mk, c, kind);
    }
    if (unlikely(lock_is_mine()))
        return large_alloc(c, kind, bytes);
    lock();
    void *p = large_alloc(c, kind, bytes);
    unlock();
    return p;
}

/* Bytes freed onto the thread's list are counted per thread and added to
 * the shared count a few at a time, as refills are: only for
 * GC_get_expl_freed_bytes_since_gc.  The policy sees them when cache_trim
 * takes them off the list. */
static void count_freed(struct thread_cache *tc, uint64_t bytes)
{
    tc->freed_bytes += bytes;
    if (tc->freed_bytes >= ALLOCD_FLUSH) {
        count_expl_freed(tc->freed_bytes);
        tc->freed_bytes = 0;
    }
}

/* A small object of a cached kind goes onto the calling thread's own
 * list, with no lock: its slot is either marked or behind the cursor of
 * the thread sweeping its span (it was allocated), so no sweep hands it
 * out again, whoever sweeps the span.  Only kinds whose objects are
 * cleared are zeroed, as the list hands the slot out as it is.  Large
 * and uncollectable objects, and any object while finalizers are
 * registered (their table is kept under the lock), are freed under it. */
static void free_object(void *p)
{
    if (!p)
        return;
    lf_ensure_heap();
    struct thread_cache *tc0 = lf_tl_cache;
    if (!(likely(tc0 != &lf_empty_cache && !tc0->manual_only) ||
          lf_thread_cache_for_free(false))) {
        free_locked(p);
        return;
    }
    struct region *r;
    struct span *s;
    if (!check_base(p, &r, &s))
        return;
    unsigned kind = s->kind;
    if (lf_kinds[kind].manual) {
        lf_malloc_free_checked(p, r);
        return;
    }
    struct thread_cache *tc = lf_tl_cache;
    struct kind_cache *kc;
    if (r->large || !kind_cached(kind) || lf_finalize_entries() || lf_disclaim_tracked[kind] ||
        !(kc = kind_cache_get(tc, kind))) {
        free_locked(p);
        return;
    }
    unsigned c = (unsigned)(r - lf_regions);
    if (lf_kinds[kind].clear)
        memset(p, 0, r->size);
    slot_make_free(p, kc->free[c]);
    kc->free[c] = p;
    count_freed(tc, r->size);
    if (--kc->credit[c] < 0)
        cache_trim(tc, kc, c, kind, batch_slots(r));
}

/* Usable bytes of the object at base p (lock not needed: spans of objects
 * in use do not change). */
static size_t object_size(const struct region *r, const void *p)
{
    if (r->large)
        return span_at(r, span_index_of(r, (uintptr_t)p))->obj_bytes;
    return r->size;
}

LFGC_EXPORT void GC_free(void *p)
{
    free_object(p);
}

LFGC_EXPORT void *GC_realloc(void *p, size_t bytes)
{
    if (!p)
        return GC_malloc(bytes);
    if (bytes == 0) {
        GC_free(p);
        return NULL;
    }
    lf_ensure_heap();
    ensure_registered();
    struct region *r;
    struct span *s;
    lock();
    bool ok = check_base(p, &r, &s);
    unsigned kind = ok ? s->kind : 0;
    unlock();
    if (!ok)
        return NULL;
    if (unlikely(lf_kinds[kind].fixed_layout)) {
        lf_warn("GC Warning: GC_realloc(%p): an object of explicit type (gc_typed.h) "
                "cannot be resized; returning NULL\n", (uintptr_t)p);
        return NULL;
    }
    size_t old = object_size(r, p);
    unsigned c = class_for(bytes);
    if (c == (unsigned)(r - lf_regions) &&
        (!r->large || bytes + lf_extra_bytes <= old)) {
        /* Same slot: clear what a shrink leaves behind so that stale
         * pointers there retain nothing. */
        if (bytes < old && lf_kinds[kind].clear)
            memset((char *)p + bytes, 0, old - bytes);
        return p;
    }
    void *q = lf_alloc_kind(bytes, kind);
    if (!q)
        return NULL;
    /* Everything GC_size reported as usable is copied. */
    memcpy(q, p, old < bytes ? old : bytes);
    free_object(p);
    return q;
}

/* As bdwgc: the start of the heap object p points into, from the address
 * alone (the object's memory is not read, so a free slot also has a
 * base; lfgc_is_live tells free from allocated). */
/* GC_base.  The library's own callers use lf_base, not GC_base: calls to
 * an exported function go through the PLT, and so in a second copy of
 * lfgc to the first one's (see lf_refused). */
static inline __attribute__((always_inline)) void *base_of(const void *p)
{
    if (unlikely(!lf_chunk_map)) {
        refused_check();        /* else: before the first allocation */
        return NULL;
    }
    if (!lowfat_is_ptr(p))
        return NULL;
    void *base = lowfat_base(p);
    if (!lf_chunk_map[chunk_entry((uintptr_t)base)])
        return NULL;
    struct region *r = region_of(p);
    if (r->large && (uintptr_t)p - (uintptr_t)base >= object_size(r, base))
        return NULL;
    return base;
}

void *lf_base(const void *p)
{
    return base_of(p);
}

LFGC_EXPORT void *GC_base(void *p)
{
    return base_of(p);
}

LFGC_EXPORT size_t GC_size(const void *p)
{
    void *base = lf_base(p);
    if (!base)
        return 0;
    return object_size(region_of(base), base);
}

LFGC_EXPORT int GC_is_heap_ptr(const void *p)
{
    return lf_base(p) != NULL;
}

LFGC_EXPORT int lfgc_is_live(const void *p)
{
    return lf_slot_state(p) == LFGC_SLOT_ALLOCATED;
}

/* GC_expand_hp: the reported heap size grows by `bytes`, and that much
 * more can be allocated before the policy is consulted.  (The reported
 * size is the expanded size less what of it was given back to the OS.) */
bool lf_heap_expand(size_t bytes)
{
    uint64_t now = GC_get_heap_size();
    if (lf_hs.max_heap && now + bytes > lf_hs.max_heap)
        return false;
    lf_hs.heap_target = now + bytes + lf_unmapped_bytes();
    lf_hs.heap_requested += bytes;
    return true;
}
