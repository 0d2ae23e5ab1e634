/* collect.c: start-up, when to collect, and the collection itself.
 *
 * Policy (bdwgc's free-space divisor): collect once the bytes allocated
 * since the last collection reach
 *     (2 * live pointerful bytes + live pointer-free bytes / 4 + roots
 *      + 2 * stacks) / divisor
 * times the number of threads allocating at once (at most
 * NURSERY_THREADS_MAX), when the heap would grow past its
 * expanded size; otherwise expand it.  A larger divisor means more
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

struct gc_heap_stats hs;
bool print_stats;
bool gc_initialized;
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
 * 1).  The bound caps the memory this costs. */
#define NURSERY_THREADS_MAX 4
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

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A size as bdwgc reads it from the environment: a number with an
 * optional k, m or g suffix. */
size_t env_size(const char *name, size_t dflt, bool *found)
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
    hs.heap_target = env_size("GC_INITIAL_HEAP_SIZE", MIN_EXPANSION, &found);
    size_t max = env_size("GC_MAXIMUM_HEAP_SIZE", 0, &found);
    if (found)
        hs.max_heap = max;
    size_t div = env_size("GC_FREE_SPACE_DIVISOR", 0, &found);
    if (found && div > 0)
        GC_free_space_divisor = div;
    if (getenv("GC_DONT_GC"))
        GC_dont_gc = 1;
    if (getenv("GC_PRINT_STATS"))
        print_stats = true;
    dirty_init(generational_by_environment() != 0);
}

static void init_once_fn(void)
{
    threads_init();
    alloc_init();
    mark_init();
    GC_parallel = (int)mark_markers() - 1;
    read_environment();
    gc_initialized = true;
}

void ensure_init(void)
{
    if (likely(gc_initialized))
        return;
    pthread_once(&init_once, init_once_fn);
}

/* Reserve the regions as soon as the library is loaded, before the program
 * maps anything else. */
__attribute__((constructor(101))) static void lfgc_load(void)
{
    layout_ok = layout_init();
    roots_init();
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

bool should_collect(void)
{
    if (GC_dont_gc || collecting)
        return false;
    uint64_t since = AO_load((volatile AO_t *)&hs.allocd_since_gc);
    uint64_t allocd = since > hs.freed_since_gc ? since - hs.freed_since_gc : 0;
    /* Stacks count twice, as in bdwgc: they are expensive to scan. */
    uint64_t scan = 2 * hs.est_ptrful + hs.est_ptrfree / 4 + roots_size() +
                    2 * stacks_size();
    uint64_t divisor = GC_free_space_divisor ? GC_free_space_divisor : 1;
    uint64_t threshold = scan / divisor;
    if (threshold < MIN_BYTES_ALLOCD)
        threshold = MIN_BYTES_ALLOCD;
    if (threshold < young_threshold(2))
        threshold = young_threshold(2);
    uint64_t most = AO_load(&hs.max_thread_allocd);
    uint64_t caches = AO_load(&hs.caches_allocd);
    uint64_t running = caches > hs.exited_allocd ? caches - hs.exited_allocd : 0;
    if (most && running > most) {
        if (running > NURSERY_THREADS_MAX * most)
            running = NURSERY_THREADS_MAX * most;
        threshold = (uint64_t)((unsigned __int128)threshold * running / most);
    }
    return allocd >= threshold;
}

static uint64_t expansion_step(uint64_t need)
{
    uint64_t divisor = GC_free_space_divisor ? GC_free_space_divisor : 1;
    uint64_t step = hs.heap_bytes / divisor;
    if (step < MIN_EXPANSION)
        step = MIN_EXPANSION;
    if (step > MAX_EXPANSION)
        step = MAX_EXPANSION;
    return step < need ? need : step;
}

/* Whether a full collection might find a growth step (at least `need`
 * bytes) that minor ones cannot: at most what they made old since the
 * last full one. */
bool full_may_reclaim(uint64_t need)
{
    uint64_t old = hs.live_bytes - hs.live_aging;
    return old > full_old && old - full_old >= expansion_step(need);
}

/* Whether a minor collection might find a growth step (at least `need`
 * bytes) before the heap grows: objects of aging spans, found live by the
 * last collection, often die soon after it (structures being built then).
 * Once such an early collection freed less than a step, none is tried
 * again before the next collection due to allocation. */
static bool early_minor_failed;

bool minor_may_reclaim(uint64_t need)
{
    uint64_t since = AO_load((volatile AO_t *)&hs.allocd_since_gc);
    return !early_minor_failed && dirty_enabled() &&
           hs.live_aging >= expansion_step(need) && since >= young_threshold(1);
}

/* Grow the expanded size by heap / divisor (at least `need`), so that the
 * next collections come after proportionally more allocation. */
void heap_expand_step(uint64_t need)
{
    uint64_t step = expansion_step(need);
    uint64_t target = hs.heap_bytes + step;
    if (hs.max_heap && target > hs.max_heap)
        target = hs.max_heap;
    if (target > hs.heap_target)
        hs.heap_target = target;
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
    return hs.live_bytes - hs.live_aging + promoted_last_minor <= full + room;
}

/* A collection, full or minor.  Lock held.  Every step runs with the
 * world stopped; reclaiming is deferred to allocation (lazy sweep). */
void collect(enum collect_reason why)
{
    if (GC_dont_gc || collecting || !layout_ok)
        return;
    /* Every callee-saved register goes into this frame, above `here`:
     * the program's pointers held in registers are scanned with the
     * stack from here on, and the collector's own deeper frames are not. */
    __builtin_unwind_init();
    volatile char here = 0;
    stacks_set_scan_start((const void *)&here);
    collecting = true;
    sweepers_hold();
    event(GC_EVENT_START);
    mark_prepare();
    uint64_t t0 = now_ns();
    event(GC_EVENT_PRE_STOP_WORLD);
    stop_world();
    event(GC_EVENT_POST_STOP_WORLD);

    caches_discard();

    event(GC_EVENT_MARK_START);
    /* Always asked, so that tracking starts (or recovers) at once, but
     * within a streak of full collections: the writes are learnt, and
     * pages protected, by the last one of the streak, in time for the
     * minor one after it. */
    bool tracked = fulls_left <= 1 || why == COLLECT_MINOR;
    bool minor = tracked && dirty_begin() && want_minor(why);
    /* What a minor collection starts with marked: the old objects. */
    uint64_t carried_ptrful = minor ? hs.live_ptrful - hs.live_aging_ptrful : 0;
    uint64_t carried_ptrfree =
        minor ? hs.live_ptrfree - (hs.live_aging - hs.live_aging_ptrful) : 0;
    uint64_t old_before = hs.live_bytes - hs.live_aging;
    if (minor)
        mark_clear_aging();
    else
        mark_clear_all();
    caches_mark();
    mark_begin(minor ? traced_last_minor : hs.live_ptrful);
    uint64_t old_rescanned = minor ? dirty_mark_old() : 0;
    uncollectables_push();
    roots_mark();
    stacks_mark();
    mark_finish();
    event(GC_EVENT_MARK_END);

    event(GC_EVENT_RECLAIM_START);
    sweep_after_mark(dirty_enabled());
    event(GC_EVENT_RECLAIM_END);
    if (tracked)
        dirty_protect();

    GC_gc_no++;
    hs.last_minor = minor;
    if (minor) {
        hs.minor_collections++;
        minors_since_full++;
        uint64_t new_ptrful = hs.live_ptrful > carried_ptrful ? hs.live_ptrful - carried_ptrful : 0;
        uint64_t new_ptrfree = hs.live_ptrfree > carried_ptrfree ? hs.live_ptrfree - carried_ptrfree : 0;
        traced_last_minor = new_ptrful;
        /* One the program asked for, at a moment of its choosing, tells
         * little of what those that allocation triggers will find. */
        if (why != COLLECT_MINOR)
            minor_traced_avg = (3 * minor_traced_avg + new_ptrful) / 4;
        uint64_t old_after = hs.live_bytes - hs.live_aging;
        promoted_last_minor = old_after > old_before ? old_after - old_before : 0;
        hs.est_ptrful = full_ptrful + new_ptrful;
        hs.est_ptrfree = full_ptrfree + new_ptrfree;
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
        full_ptrful = hs.est_ptrful = hs.live_ptrful;
        full_ptrfree = hs.est_ptrfree = hs.live_ptrfree;
        full_old = hs.live_bytes - hs.live_aging;
    }
    if (why == COLLECT_BEFORE_GROWTH)
        early_minor_failed = hs.reclaimed_last < expansion_step(0);
    else if (why == COLLECT_ALLOCATION)
        early_minor_failed = false;
    hs.allocd_since_gc = 0;
    hs.freed_since_gc = 0;
    AO_store(&hs.caches_allocd, 0);
    AO_store(&hs.max_thread_allocd, 0);
    hs.exited_allocd = 0;
    release_idle_spans(false);

    event(GC_EVENT_PRE_START_WORLD);
    start_world();
    uint64_t pause = now_ns() - t0;
    event(GC_EVENT_POST_START_WORLD);
    stats_record_pause(pause);
    if (print_stats)
        stats_print_collection(pause);
    sweepers_release();
    collecting = false;
    event(GC_EVENT_END);
}

LFGC_EXPORT void GC_gcollect(void)
{
    ensure_init();
    lock();
    collect(COLLECT_EXPLICIT);
    if (gcollect_unmaps())
        release_idle_spans(true);
    unlock();
}

LFGC_EXPORT void GC_gcollect_and_unmap(void)
{
    ensure_init();
    lock();
    collect(COLLECT_EXPLICIT);
    release_idle_spans(true);
    unlock();
}

/* bdwgc does a little of an incremental collection here.  lfgc has no
 * collection in progress between calls: it collects (minor if it can)
 * when the policy says it is time, as allocation would. */
LFGC_EXPORT int GC_collect_a_little(void)
{
    ensure_init();
    lock();
    if (should_collect())
        collect(COLLECT_ALLOCATION);
    unlock();
    return 0;
}

LFGC_EXPORT int lfgc_collect_minor(void)
{
    ensure_init();
    lock();
    uint64_t before = GC_gc_no;
    collect(COLLECT_MINOR);
    int minor = GC_gc_no != before && hs.last_minor;
    unlock();
    return minor;
}

LFGC_EXPORT void GC_enable_incremental(void)
{
    ensure_init();
    /* The environment wins over the call, as GC_DISABLE_INCREMENTAL does
     * in bdwgc. */
    if (generational_by_environment() != 0) {
        lock();
        dirty_init(true);
        unlock();
    }
}

LFGC_EXPORT int GC_is_incremental_mode(void)
{
    return dirty_enabled();
}
