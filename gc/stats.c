/* stats.c: figures, pause records, collection events, GC_dump. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define PAUSE_RING 4096

static LF_UNSCANNED_BSS uint64_t pauses[PAUSE_RING];
static LF_UNSCANNED uint64_t pause_count;
static LF_UNSCANNED uint64_t max_pause, total_pause, last_pause;
static LF_UNSCANNED GC_on_collection_event_proc on_event;
static LF_UNSCANNED GC_start_callback_proc on_start;

void lf_stats_record_pause(uint64_t ns)
{
    pauses[pause_count % PAUSE_RING] = ns;
    pause_count++;
    last_pause = ns;
    total_pause += ns;
    if (ns > max_pause)
        max_pause = ns;
}

/* To the log (GC_set_log_fd), after the world restarted. */
void lf_stats_print_collection(uint64_t pause_ns)
{
    char line[256];
    snprintf(line, sizeof line,
             "lfgc: collection %lu (%s): heap %llu KiB, live %llu KiB, "
             "reclaimed %llu KiB, pause %.3f ms\n",
             (unsigned long)GC_gc_no, lf_hs.last_minor ? "minor" : "full",
             (unsigned long long)(lf_hs.heap_bytes >> 10),
             (unsigned long long)(lf_hs.live_bytes >> 10),
             (unsigned long long)(lf_hs.reclaimed_last >> 10), pause_ns / 1e6);
    if (lf_log_fd == 2)
        fputs(line, stderr);
    else
        (void)!write(lf_log_fd, line, strlen(line));
}

/* Set while this thread runs a callback of a collection: the lock is held
 * then, and the figures that are read under it are read without it. */
static __thread bool in_callback;

void lf_event(GC_EventType e)
{
    in_callback = true;
    if (e == GC_EVENT_START && on_start)
        on_start();
    if (on_event)
        on_event(e);
    in_callback = false;
}

static bool lock_unless_in_callback(void)
{
    if (in_callback)
        return false;
    lock();
    return true;
}

LFGC_EXPORT void GC_set_on_collection_event(GC_on_collection_event_proc fn)
{
    lock();
    on_event = fn;
    unlock();
}

LFGC_EXPORT GC_on_collection_event_proc GC_get_on_collection_event(void)
{
    return on_event;
}

LFGC_EXPORT void GC_set_start_callback(GC_start_callback_proc fn)
{
    lock();
    on_start = fn;
    unlock();
}

LFGC_EXPORT GC_start_callback_proc GC_get_start_callback(void)
{
    return on_start;
}

/* The figures below are read without the lock, as bdwgc documents them
 * (programs call them from the event callbacks, lock held): each is one
 * aligned word, read once.  The collection sets the live bytes and clears
 * the counts of allocation since it in one step (the world stopped,
 * before GC_EVENT_RECLAIM_END), so that from then on the bytes in use are
 * the live ones. */
static inline uint64_t load(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static uint64_t in_use_bytes(void)
{
    uint64_t since = load(&lf_hs.allocd_since_gc), freed = load(&lf_hs.freed_since_gc);
    return load(&lf_hs.live_bytes) + (since > freed ? since - freed : 0);
}

/* Bytes handed out since start-up: the shared count, plus the calling
 * thread's batches not yet added to it (other threads' are left out: at
 * most 64 KiB each, and not readable without their lock). */
static uint64_t total_bytes(void)
{
    return load(&lf_hs.total_allocd) + load(&lf_tl_cache->allocd);
}

/* As bdwgc's, heap size plus unmapped bytes make the expanded size: a
 * span given back so that another class could take its room is in
 * neither (counted, a program passing through many classes, as bdwgc's
 * gctest does, saw its heap grow by each one); see also span_grow. */
uint64_t lf_unmapped_bytes(void)
{
    uint64_t released = load(&lf_hs.released_bytes), passed = load(&lf_hs.passed_bytes);
    uint64_t target = load(&lf_hs.heap_target), heap = load(&lf_hs.heap_bytes);
    uint64_t unmapped = released > passed ? released - passed : 0;
    uint64_t room = target > heap ? target - heap : 0;
    return unmapped < room ? unmapped : room;
}

LFGC_EXPORT size_t GC_get_heap_size(void)
{
    /* As bdwgc: the expanded size, less what was given back to the OS, in
     * whole pages as bdwgc's blocks (the policy's steps are not). */
    uint64_t target = load(&lf_hs.heap_target), unmapped = lf_unmapped_bytes();
    uint64_t heap = load(&lf_hs.heap_bytes);
    uint64_t expanded = target > unmapped ? target - unmapped : 0;
    expanded = (expanded + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
    return heap > expanded ? heap : expanded;
}

LFGC_EXPORT size_t GC_get_free_bytes(void)
{
    uint64_t heap = GC_get_heap_size(), used = in_use_bytes();
    return heap > used ? heap - used : 0;
}

LFGC_EXPORT size_t GC_get_unmapped_bytes(void)
{
    return lf_unmapped_bytes();
}

LFGC_EXPORT size_t GC_get_memory_use(void)
{
    return in_use_bytes();
}

LFGC_EXPORT size_t GC_get_expl_freed_bytes_since_gc(void)
{
    /* With what the calling thread freed and has not yet added. */
    return load(&lf_hs.expl_freed_since_gc) + lf_tl_cache->freed_bytes;
}

LFGC_EXPORT unsigned long GC_get_full_gc_total_time(void)
{
    return (unsigned long)(load(&total_pause) / 1000000u);
}

LFGC_EXPORT size_t GC_get_bytes_since_gc(void)
{
    /* With the calling thread's refills not yet added to the shared
     * count (up to 64 KiB), as GC_get_total_bytes does. */
    return load(&lf_hs.allocd_since_gc) + load(&lf_tl_cache->allocd);
}

LFGC_EXPORT size_t GC_get_total_bytes(void)
{
    return total_bytes();
}

LFGC_EXPORT GC_word GC_get_gc_no(void)
{
    return __atomic_load_n(&GC_gc_no, __ATOMIC_RELAXED);
}

LFGC_EXPORT void GC_get_heap_usage_safe(GC_word *heap_size, GC_word *free_bytes,
                                        GC_word *unmapped_bytes,
                                        GC_word *bytes_since_gc,
                                        GC_word *total_bytes)
{
    bool locked = lock_unless_in_callback();
    if (heap_size)
        *heap_size = GC_get_heap_size();
    if (free_bytes)
        *free_bytes = GC_get_free_bytes();
    if (unmapped_bytes)
        *unmapped_bytes = GC_get_unmapped_bytes();
    if (bytes_since_gc)
        *bytes_since_gc = GC_get_bytes_since_gc();
    if (total_bytes)
        *total_bytes = GC_get_total_bytes();
    if (locked)
        unlock();
}

LFGC_EXPORT void lfgc_get_stats(struct lfgc_stats *out)
{
    bool locked = lock_unless_in_callback();
    memset(out, 0, sizeof *out);
    out->collections = GC_gc_no;
    out->heap_bytes = GC_get_heap_size();
    out->live_bytes = lf_hs.live_bytes;
    out->reclaimed_bytes = lf_hs.reclaimed_last;
    out->total_allocated = total_bytes();
    out->last_pause_ns = last_pause;
    out->max_pause_ns = max_pause;
    out->total_pause_ns = total_pause;
    out->mark_stack_overflows = lf_hs.mark_overflows;
    out->minor_collections = lf_hs.minor_collections;
    if (locked)
        unlock();
}

LFGC_EXPORT size_t lfgc_get_pauses(uint64_t *ns, size_t max)
{
    bool locked = lock_unless_in_callback();
    uint64_t have = pause_count < PAUSE_RING ? pause_count : PAUSE_RING;
    if (max > have)
        max = have;
    uint64_t first = pause_count - max;
    for (size_t i = 0; i < max; i++)
        ns[i] = pauses[(first + i) % PAUSE_RING];
    if (locked)
        unlock();
    return max;
}

/* bdwgc's GC_dump_named: no lock (the caller holds it, or accepts a
 * racy picture: only this thread reads the pool lists without it). */
void lf_dump(const char *name)
{
    if (GC_quiet)               /* bdwgc's GC_printf prints nothing then */
        return;
    if (name)
        dprintf(lf_log_fd, "***GC Dump %s\n", name);
    else
        dprintf(lf_log_fd, "***GC Dump collection #%lu\n", (unsigned long)GC_gc_no);
    dprintf(lf_log_fd, "lfgc heap: %llu KiB in use or pooled, %llu KiB released, "
            "%llu KiB live after collection %lu\n",
            (unsigned long long)(lf_hs.heap_bytes >> 10),
            (unsigned long long)(lf_hs.released_bytes >> 10),
            (unsigned long long)(lf_hs.live_bytes >> 10), (unsigned long)GC_gc_no);
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped || !r->next_chunk)
            continue;
        uint64_t in_use = 0, unswept = 0, pooled = 0;
        for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
            uint8_t st = span_at(r, j)->state;
            in_use += st != SPAN_UNUSED;
            unswept += st == SPAN_UNSWEPT;
        }
        for (struct span *s = r->pool; s; s = s->next)
            pooled++;
        for (struct span *s = r->released; s; s = s->next)
            pooled++;
        dprintf(lf_log_fd, "  class %2u (%llu bytes) at %p: %llu spans in use "
                "(%llu unswept), %llu pooled\n", c,
                (unsigned long long)r->size, (void *)r->start,
                (unsigned long long)in_use, (unsigned long long)unswept,
                (unsigned long long)pooled);
    }
}

LFGC_EXPORT void GC_dump(void)
{
    lf_ensure_init();
    lock();
    lf_dump(NULL);
    unlock();
}

static const char *span_state_name(uint8_t st)
{
    return st == SPAN_SWEPT ? "in use" : st == SPAN_UNSWEPT ? "in use, unswept" : "free";
}

/* bdwgc's heap sections and blocks are lfgc's regions and spans: each
 * region that has handed out chunks, with its runs of spans alike (state
 * and kind).  Reads per-chunk bytes only, no lists: safe without the
 * lock, if racy. */
LFGC_EXPORT void GC_dump_regions(void)
{
    if (GC_quiet)
        return;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped || !r->next_chunk)
            continue;
        uint64_t end = r->start + (r->next_chunk << CHUNK_SHIFT);
        dprintf(lf_log_fd, "region %u (%llu-byte objects) [%p, %p):\n", c,
                (unsigned long long)r->size, (void *)r->start, (void *)end);
        uint64_t run = 0;
        for (uint64_t j = r->span_chunks; j <= r->next_chunk; j += r->span_chunks) {
            const struct span *a = span_at(r, run), *b = span_at(r, j);
            if (j < r->next_chunk && b->state == a->state &&
                (a->state == SPAN_UNUSED || b->kind == a->kind))
                continue;
            uint64_t lo = r->start + (run << CHUNK_SHIFT), hi = r->start + (j << CHUNK_SHIFT);
            uint64_t n = (j - run) / r->span_chunks;
            if (a->state == SPAN_UNUSED)
                dprintf(lf_log_fd, "  [%p, %p) %llu span%s free\n", (void *)lo, (void *)hi,
                        (unsigned long long)n, n == 1 ? "" : "s");
            else
                dprintf(lf_log_fd, "  [%p, %p) %llu span%s %s, kind %u\n", (void *)lo,
                        (void *)hi, (unsigned long long)n, n == 1 ? "" : "s",
                        span_state_name(a->state), (unsigned)a->kind);
            run = j;
        }
    }
}
