/* collect.c: start-up, when to collect, and the collection itself.
 *
 * Policy (bdwgc's free-space divisor): collect once the bytes allocated
 * since the last collection reach
 *     (2 * live pointerful bytes + live pointer-free bytes / 4 + roots
 *      + 2 * stacks) / divisor
 * times the number of threads allocating at once (at most
 * NURSERY_THREADS_MAX) if the collection would be minor, when the heap
 * would grow past its expanded size; otherwise expand it (after passing
 * it the room other classes hold pooled: alloc.c).  A larger divisor means more
 * collections and a smaller heap.  GC_INITIAL_HEAP_SIZE defers the first
 * collections, GC_MAXIMUM_HEAP_SIZE caps growth, GC_DONT_GC turns
 * collection off.
 *
 * Generational collections: where the kernel tracks writes (dirty.c), a
 * collection triggered by allocation is minor: it keeps the marks of the
 * last one and traces only what is new or on written pages.  Objects
 * surviving it are thereby promoted (those of nursery spans only at the
 * next minor collection: see sweep.c and dirty.c), and dead promoted
 * objects wait for the next full collection, which comes after MAX_MINORS
 * minor ones, or once the old bytes (plus what the last minor one
 * promoted) would exceed those of the last full collection by
 * 1/PROMOTE_DIV (promoted garbage), or before the heap grows if minor
 * ones promoted at least a growth step since the last full one, or when
 * the program asks (GC_gcollect) or the heap is full.  Before growing,
 * when the last collection left at least a step of aging objects (often
 * structures under construction then, dead since), a minor collection
 * runs first, until one such early collection frees less than a step.
 * Minor collections cost what they trace: the allocation between two
 * collections is also at least twice what minor ones traced of late.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

LF_UNSCANNED struct gc_heap_stats lf_hs;
bool lf_print_stats;
bool lf_gc_initialized;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool collecting;

/* Below this, a collection would cost more than the memory it saves. */
#define MIN_BYTES_ALLOCD ((uint64_t)256 << 10)
/* Bounds of one expansion step of the heap.  bdwgc caps its steps at 16
 * MiB; space within the expanded size is used without consulting the
 * policy, so a smaller cap keeps the heap closer to it (binary trees: peak
 * RSS -9% for +3% collections). */
#define MIN_EXPANSION ((uint64_t)256 << 10)
#define MAX_EXPANSION ((uint64_t)8 << 20)
/* Allocating threads that widen the allocation between collections, at
 * most: each thread builds structures that a collection finds half-built
 * and traces.  With T threads allocating, a collection due every N bytes
 * comes T times as often per thread, finding as much in progress each
 * time, so that tracing grew with T (mt_trees, 2 threads: pauses 80 ms
 * against 37 at one thread, for the same work).  N times T keeps it per
 * thread as at one thread.  T is measured, not counted: the bytes running
 * threads allocated since the last collection over the most one of them
 * did (two alike: 2; one thread and another that allocates little: about
 * 1).  The bound caps the memory this costs, which grows with it: two
 * threads, where the gain was measured, need no more than 2, and six
 * alike (bdwgc's gctest) took a fifth more peak RSS at 4. */
#define NURSERY_THREADS_MAX 2
/* Minor collections between two full ones, at most: a backstop, as
 * promoted garbage is bounded by PROMOTE_DIV.  (16 forced a full
 * collection every 17 in programs whose old data does not change.) */
#define MAX_MINORS 64

static unsigned minors_since_full;
static uint64_t full_ptrful, full_ptrfree;  /* marked by the last full one */
static uint64_t full_old;               /* of which old (not aging) */
static uint64_t traced_last_minor;      /* bytes the last minor one marked   */
static uint64_t promoted_last_minor;    /* bytes it made old                 */
/* Bytes minor collections triggered by allocation traced, averaged (each
 * new one weighs 1/4). */
static uint64_t minor_traced_avg;
/* A minor collection is skipped when the bytes it would leave marked
 * exceed those of the last full one by more than 1/PROMOTE_DIV. */
#define PROMOTE_DIV 4
/* A minor collection saves the tracing of the old objects but for those
 * on written pages, and costs the asking about writes and protecting,
 * about as much as tracing MINOR_FIXED_BYTES.  When it saves less than
 * half of what a full one traces (allocation all over a small heap, old
 * data written all over), it is not worth it: the next collections are
 * full, as many as the streak, which doubles up to MAX_FULL_STREAK while
 * minor ones stay that way. */
#define MINOR_FIXED_BYTES ((uint64_t)32 << 10)
#define MAX_FULL_STREAK 64
static unsigned full_streak;            /* after the last unprofitable minor */
static unsigned fulls_left;             /* of that streak                     */

uint64_t lf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A size as bdwgc reads it from the environment: a number with an
 * optional k, m or g suffix. */
size_t lf_env_size(const char *name, size_t dflt, bool *found)
{
    const char *s = getenv(name);
    *found = false;
    if (!s || !*s)
        return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return dflt;
    switch (tolower((unsigned char)*end)) {
    case 'k': v <<= 10; break;
    case 'm': v <<= 20; break;
    case 'g': v <<= 30; break;
    default: break;
    }
    *found = true;
    return (size_t)v;
}

/* What the environment says of generational collection: 1 on, 0 off, -1
 * nothing.  LFGC_GENERATIONAL wins; bdwgc's GC_DISABLE_INCREMENTAL turns
 * off its (generational) incremental mode. */
static int generational_by_environment(void)
{
    const char *gen = getenv("LFGC_GENERATIONAL");
    if (gen && *gen)
        return *gen != '0';
    return getenv("GC_DISABLE_INCREMENTAL") ? 0 : -1;
}

static void read_environment(void)
{
    bool found;
    lf_hs.heap_target = lf_env_size("GC_INITIAL_HEAP_SIZE", MIN_EXPANSION, &found);
    size_t max = lf_env_size("GC_MAXIMUM_HEAP_SIZE", 0, &found);
    if (found)
        lf_hs.max_heap = max;
    size_t div = lf_env_size("GC_FREE_SPACE_DIVISOR", 0, &found);
    if (found && div > 0)
        GC_free_space_divisor = div;
    if (getenv("GC_DONT_GC"))
        GC_dont_gc = 1;
    if (getenv("GC_PRINT_STATS"))
        lf_print_stats = true;
    lf_dirty_init(generational_by_environment() != 0);
}

static void init_once_fn(void)
{
    lf_threads_init();
    lf_alloc_init();
    lf_mark_init();
    GC_parallel = (int)lf_mark_markers() - 1;
    read_environment();
    lf_blacklist_initial_scan();
    lf_gc_initialized = true;
}

void lf_ensure_init(void)
{
    if (likely(lf_gc_initialized))
        return;
    pthread_once(&init_once, init_once_fn);
}

/* Reserve the regions as soon as the library is loaded, before the program
 * maps anything else. */
__attribute__((constructor(101))) static void lfgc_load(void)
{
    lf_layout_ok = lf_layout_init() && lf_blacklist_init();
    lf_roots_init();
}

/* A minor collection costs what it traces: the young survivors, not the
 * live heap.  Where many survive (structures in progress on several
 * threads) collecting as often as the live size allows would spend most
 * of each collection on them again: allocation between collections is at
 * least `times` what minor ones traced of late (at the default divisor;
 * a larger one shortens it as it does the rule above). */
static uint64_t young_threshold(uint64_t times)
{
    uint64_t divisor = GC_free_space_divisor ? GC_free_space_divisor : 1;
    return times * 3 * minor_traced_avg / divisor;
}

static bool want_minor(enum collect_reason why);

bool lf_should_collect(void)
{
    if (GC_dont_gc || collecting)
        return false;
    uint64_t since = AO_load((volatile AO_t *)&lf_hs.allocd_since_gc);
    uint64_t allocd = since > lf_hs.freed_since_gc ? since - lf_hs.freed_since_gc : 0;
    if (lf_finalize_wants_collection(allocd))
        return true;
    /* Objects the last collection queued for finalization count as
     * allocated again: they were found dead, and survive only for their
     * finalizers (else a program that finalizes everything grows its heap
     * by what it finalizes, collection after collection). */
    allocd += lf_finalize_queued_bytes();
    /* Stacks count twice, as in bdwgc: they are expensive to scan. */
    uint64_t scan = 2 * lf_hs.est_ptrful + lf_hs.est_ptrfree / 4 + lf_roots_size() +
                    2 * lf_stacks_size();
    uint64_t divisor = GC_free_space_divisor ? GC_free_space_divisor : 1;
    uint64_t threshold = scan / divisor;
    if (threshold < MIN_BYTES_ALLOCD)
        threshold = MIN_BYTES_ALLOCD;
    if (threshold < young_threshold(2))
        threshold = young_threshold(2);
    uint64_t most = AO_load(&lf_hs.max_thread_allocd);
    uint64_t caches = AO_load(&lf_hs.caches_allocd);
    uint64_t running = caches > lf_hs.exited_allocd ? caches - lf_hs.exited_allocd : 0;
    /* Widened for a minor collection only: the structures in progress are
     * much of what it traces.  A full one traces all the live data, in
     * progress or not, and the rule above already weighs that. */
    if (most && running > most && lf_dirty_enabled() && want_minor(COLLECT_ALLOCATION)) {
        if (running > NURSERY_THREADS_MAX * most)
            running = NURSERY_THREADS_MAX * most;
        threshold = (uint64_t)((unsigned __int128)threshold * running / most);
    }
    return allocd >= threshold;
}

static uint64_t expansion_step(uint64_t need)
{
    uint64_t divisor = GC_free_space_divisor ? GC_free_space_divisor : 1;
    uint64_t step = lf_hs.heap_bytes / divisor;
    if (step < MIN_EXPANSION)
        step = MIN_EXPANSION;
    if (step > MAX_EXPANSION)
        step = MAX_EXPANSION;
    return step < need ? need : step;
}

/* Whether a full collection might find a growth step (at least `need`
 * bytes) that minor ones cannot: at most what they made old since the
 * last full one. */
bool lf_full_may_reclaim(uint64_t need)
{
    uint64_t old = lf_hs.live_bytes - lf_hs.live_aging;
    return old > full_old && old - full_old >= expansion_step(need);
}

/* Whether a minor collection might find a growth step (at least `need`
 * bytes) before the heap grows: objects of aging spans, found live by the
 * last collection, often die soon after it (structures being built then).
 * Once such an early collection freed less than a step, none is tried
 * again before the next collection due to allocation. */
static bool early_minor_failed;

bool lf_minor_may_reclaim(uint64_t need)
{
    uint64_t since = AO_load((volatile AO_t *)&lf_hs.allocd_since_gc);
    return !early_minor_failed && lf_dirty_enabled() &&
           lf_hs.live_aging >= expansion_step(need) && since >= young_threshold(1);
}

/* Grow the expanded size by heap / divisor (at least `need`), so that the
 * next collections come after proportionally more allocation. */
void lf_heap_expand_step(uint64_t need)
{
    uint64_t step = expansion_step(need);
    uint64_t target = lf_hs.heap_bytes + step;
    if (lf_hs.max_heap && target > lf_hs.max_heap)
        target = lf_hs.max_heap;
    if (target > lf_hs.heap_target)
        lf_hs.heap_target = target;
}

static bool want_minor(enum collect_reason why)
{
    if (why == COLLECT_MINOR)
        return true;
    if ((why != COLLECT_ALLOCATION && why != COLLECT_BEFORE_GROWTH) ||
        minors_since_full >= MAX_MINORS || fulls_left)
        return false;
    /* Promoted garbage takes room: bounded by a fraction of the live data. */
    uint64_t full = full_ptrful + full_ptrfree;
    uint64_t room = full / PROMOTE_DIV;
    /* The next minor collection will likely promote about as much as the
     * last one did.  Objects of aging spans are not old yet. */
    return lf_hs.live_bytes - lf_hs.live_aging + promoted_last_minor <= full + room;
}

/* A collection, full or minor.  Lock held.  Every step runs with the
 * world stopped; reclaiming is deferred to allocation (lazy sweep).
 * Callers run under lf_entered(), which records where the program's
 * frames end. */
void lf_collect(enum collect_reason why)
{
    if (GC_dont_gc || collecting || !lf_layout_ok)
        return;
    int cancel = nocancel_begin();
    /* The stack is scanned from where the thread entered the library
     * (lf_entered).  Should no entry be recorded, from here: every
     * callee-saved register goes into this frame, above `here`, and the
     * collector's own deeper frames are not scanned. */
    __builtin_unwind_init();
    volatile char here = 0;
    lf_stacks_set_scan_start((const void *)&here);
    collecting = true;
    lf_sweepers_hold();
    lf_event(GC_EVENT_START);
    lf_mark_prepare();
    lf_finalize_before_stop();
    uint64_t t0 = lf_now_ns();
    lf_event(GC_EVENT_PRE_STOP_WORLD);
    lf_stop_world();
    lf_event(GC_EVENT_POST_STOP_WORLD);

    lf_caches_discard();

    lf_event(GC_EVENT_MARK_START);
    /* Always asked, so that tracking starts (or recovers) at once, but
     * within a streak of full collections: the writes are learnt, and
     * pages protected, by the last one of the streak, in time for the
     * minor one after it. */
    bool tracked = fulls_left <= 1 || why == COLLECT_MINOR;
    bool minor = tracked && lf_dirty_begin() && want_minor(why);
    /* What a minor collection starts with marked: the old objects. */
    uint64_t carried_ptrful = minor ? lf_hs.live_ptrful - lf_hs.live_aging_ptrful : 0;
    uint64_t carried_ptrfree =
        minor ? lf_hs.live_ptrfree - (lf_hs.live_aging - lf_hs.live_aging_ptrful) : 0;
    uint64_t old_before = lf_hs.live_bytes - lf_hs.live_aging;
    if (minor) {
        lf_mark_clear_aging();
    } else {
        lf_mark_clear_all();
        lf_blacklist_new_epoch();
    }
    lf_caches_mark();
    lf_mark_begin(minor ? traced_last_minor : lf_hs.live_ptrful);
    uint64_t old_rescanned = minor ? lf_dirty_mark_old() : 0;
    lf_uncollectables_push();
    lf_roots_mark();
    lf_stacks_mark();
    lf_finalize_mark_roots();
    lf_mark_finish();
    lf_finalize_after_mark();
    lf_event(GC_EVENT_MARK_END);

    lf_event(GC_EVENT_RECLAIM_START);
    lf_sweep_after_mark(lf_dirty_enabled());
    /* The live bytes are new: what was allocated before is in them (for
     * the getters, which an event callback may call from here on). */
    lf_hs.allocd_since_gc = 0;
    lf_hs.freed_since_gc = 0;
    AO_store(&lf_hs.caches_allocd, 0);
    AO_store(&lf_hs.max_thread_allocd, 0);
    lf_hs.exited_allocd = 0;
    lf_event(GC_EVENT_RECLAIM_END);
    if (tracked)
        lf_dirty_protect();

    GC_gc_no++;
    lf_hs.last_minor = minor;
    if (minor) {
        lf_hs.minor_collections++;
        minors_since_full++;
        uint64_t new_ptrful = lf_hs.live_ptrful > carried_ptrful ? lf_hs.live_ptrful - carried_ptrful : 0;
        uint64_t new_ptrfree = lf_hs.live_ptrfree > carried_ptrfree ? lf_hs.live_ptrfree - carried_ptrfree : 0;
        traced_last_minor = new_ptrful;
        /* One the program asked for, at a moment of its choosing, tells
         * little of what those that allocation triggers will find. */
        if (why != COLLECT_MINOR)
            minor_traced_avg = (3 * minor_traced_avg + new_ptrful) / 4;
        uint64_t old_after = lf_hs.live_bytes - lf_hs.live_aging;
        promoted_last_minor = old_after > old_before ? old_after - old_before : 0;
        lf_hs.est_ptrful = full_ptrful + new_ptrful;
        lf_hs.est_ptrfree = full_ptrfree + new_ptrfree;
        if (2 * (old_rescanned + MINOR_FIXED_BYTES) >= full_ptrful) {
            full_streak = full_streak ? full_streak * 2 : 1;
            if (full_streak > MAX_FULL_STREAK)
                full_streak = MAX_FULL_STREAK;
            fulls_left = full_streak;
        } else {
            full_streak = 0;
        }
    } else {
        if (fulls_left)
            fulls_left--;
        minors_since_full = 0;
        traced_last_minor = 0;      /* unknown: try a minor one next */
        promoted_last_minor = 0;
        full_ptrful = lf_hs.est_ptrful = lf_hs.live_ptrful;
        full_ptrfree = lf_hs.est_ptrfree = lf_hs.live_ptrfree;
        full_old = lf_hs.live_bytes - lf_hs.live_aging;
    }
    if (why == COLLECT_BEFORE_GROWTH)
        early_minor_failed = lf_hs.reclaimed_last < expansion_step(0);
    else if (why == COLLECT_ALLOCATION)
        early_minor_failed = false;
    lf_release_idle_spans(false);

    lf_event(GC_EVENT_PRE_START_WORLD);
    lf_start_world();
    uint64_t pause = lf_now_ns() - t0;
    lf_event(GC_EVENT_POST_START_WORLD);
    lf_stats_record_pause(pause);
    if (lf_print_stats)
        lf_stats_print_collection(pause);
    lf_finalize_after_restart();
    lf_sweepers_release();
    collecting = false;
    lf_event(GC_EVENT_END);
    nocancel_end(cancel);
}

static void *gcollect_entered(uintptr_t unmap, uintptr_t unused1, uintptr_t unused2)
{
    (void)unused1;
    (void)unused2;
    lf_ensure_init();
    lock();
    lf_collect(COLLECT_EXPLICIT);
    if (unmap || lf_gcollect_unmaps())
        lf_release_idle_spans(true);
    unlock();
    if (unlikely(AO_load(&lf_finalizers_due)))
        lf_finalize_due();
    return NULL;
}

LFGC_EXPORT void GC_gcollect(void)
{
    lf_entered(gcollect_entered, 0, 0, 0);
}

LFGC_EXPORT void GC_gcollect_and_unmap(void)
{
    lf_entered(gcollect_entered, 1, 0, 0);
}

/* bdwgc does a little of an incremental collection here.  lfgc has no
 * collection in progress between calls: it collects (minor if it can)
 * when the policy says it is time, as allocation would. */
static void *collect_a_little_entered(uintptr_t unused0, uintptr_t unused1, uintptr_t unused2)
{
    (void)unused0;
    (void)unused1;
    (void)unused2;
    lf_ensure_init();
    lock();
    if (lf_should_collect())
        lf_collect(COLLECT_ALLOCATION);
    unlock();
    return NULL;
}

LFGC_EXPORT int GC_collect_a_little(void)
{
    lf_entered(collect_a_little_entered, 0, 0, 0);
    return 0;
}

/* Returns (void *)1 when the collection ran and was minor. */
static void *collect_minor_entered(uintptr_t unused0, uintptr_t unused1, uintptr_t unused2)
{
    (void)unused0;
    (void)unused1;
    (void)unused2;
    lf_ensure_init();
    lock();
    uint64_t before = GC_gc_no;
    lf_collect(COLLECT_MINOR);
    uintptr_t minor = GC_gc_no != before && lf_hs.last_minor;
    unlock();
    return (void *)minor;
}

LFGC_EXPORT int lfgc_collect_minor(void)
{
    return lf_entered(collect_minor_entered, 0, 0, 0) != NULL;
}

LFGC_EXPORT void GC_enable_incremental(void)
{
    lf_ensure_init();
    /* The environment wins over the call, as GC_DISABLE_INCREMENTAL does
     * in bdwgc. */
    if (generational_by_environment() != 0) {
        lock();
        lf_dirty_init(true);
        unlock();
    }
}

LFGC_EXPORT int GC_is_incremental_mode(void)
{
    return lf_dirty_enabled();
}
