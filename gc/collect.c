/* collect.c: start-up, when to collect, and the collection itself.
 *
 * Policy (bdwgc's free-space divisor): collect once the bytes allocated
 * since the last collection reach
 *     (2 * live pointerful bytes + live pointer-free bytes / 4 + roots
 *      + 2 * stacks) / divisor
 * when the heap would grow past its expanded size; otherwise expand it.
 * A larger divisor means more collections and a smaller heap.  GC_INITIAL_HEAP_SIZE defers the first collections,
 * GC_MAXIMUM_HEAP_SIZE caps growth, GC_DONT_GC turns collection off.
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
}

static void init_once_fn(void)
{
    threads_init();
    alloc_init();
    mark_init();
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

bool should_collect(void)
{
    if (GC_dont_gc || collecting)
        return false;
    uint64_t since = AO_load((volatile AO_t *)&hs.allocd_since_gc);
    uint64_t allocd = since > hs.freed_since_gc ? since - hs.freed_since_gc : 0;
    /* Stacks count twice, as in bdwgc: they are expensive to scan. */
    uint64_t scan = 2 * hs.live_ptrful + hs.live_ptrfree / 4 + roots_size() +
                    2 * stacks_size();
    uint64_t divisor = GC_free_space_divisor ? GC_free_space_divisor : 1;
    uint64_t threshold = scan / divisor;
    if (threshold < MIN_BYTES_ALLOCD)
        threshold = MIN_BYTES_ALLOCD;
    return allocd >= threshold;
}

/* Grow the expanded size by heap / divisor (at least `need`), so that the
 * next collections come after proportionally more allocation. */
void heap_expand_step(uint64_t need)
{
    uint64_t divisor = GC_free_space_divisor ? GC_free_space_divisor : 1;
    uint64_t step = hs.heap_bytes / divisor;
    if (step < MIN_EXPANSION)
        step = MIN_EXPANSION;
    if (step > MAX_EXPANSION)
        step = MAX_EXPANSION;
    if (step < need)
        step = need;
    uint64_t target = hs.heap_bytes + step;
    if (hs.max_heap && target > hs.max_heap)
        target = hs.max_heap;
    if (target > hs.heap_target)
        hs.heap_target = target;
}

/* A full collection.  Lock held.  Every step runs with the world
 * stopped; reclaiming is deferred to allocation (lazy sweep). */
void collect(const char *why)
{
    (void)why;
    if (GC_dont_gc || collecting || !layout_ok)
        return;
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
    mark_clear_all();
    caches_mark();
    mark_begin();
    uncollectables_push();
    roots_mark();
    stacks_mark();
    mark_finish();
    event(GC_EVENT_MARK_END);

    event(GC_EVENT_RECLAIM_START);
    sweep_after_mark();
    event(GC_EVENT_RECLAIM_END);

    GC_gc_no++;
    hs.allocd_since_gc = 0;
    hs.freed_since_gc = 0;
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
    collect("explicit");
    if (gcollect_unmaps())
        release_idle_spans(true);
    unlock();
}

LFGC_EXPORT void GC_gcollect_and_unmap(void)
{
    ensure_init();
    lock();
    collect("explicit");
    release_idle_spans(true);
    unlock();
}

LFGC_EXPORT int GC_collect_a_little(void)
{
    return 0;
}
