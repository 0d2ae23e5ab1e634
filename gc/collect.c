/* collect.c: start-up, and a collection as a sequence of phases.
 *
 * lf_collect() runs the phases in order (prepare, stop, mark roots, finish
 * marking, sweep, protect, policy bookkeeping, restart) with two hook
 * points, for what must see the final marks with the world stopped
 * (finalization, disappearing links) and what must run once the world
 * runs again.  Whether to collect, full or minor, is policy.c's to say.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

LF_UNSCANNED struct gc_heap_stats lf_hs;
LF_UNSCANNED bool lf_print_stats;
/* Debug builds: check each minor collection's marks against a full trace
 * (LFGC_VERIFY_MINOR, lf_verify_minor_marks). */
static LF_UNSCANNED bool verify_minor;
LF_UNSCANNED bool lf_gc_initialized;
LF_UNSCANNED bool lf_heap_initialized;
static LF_UNSCANNED pthread_once_t init_once = PTHREAD_ONCE_INIT;
static LF_UNSCANNED bool collecting;

/* Internal callbacks run at a hook point, in the order registered. */
#define HOOKS_MAX 8
static LF_UNSCANNED lf_hook_fn hooks[LF_HOOK_POINTS][HOOKS_MAX];
static LF_UNSCANNED unsigned hook_count[LF_HOOK_POINTS];

LF_MALLOC_TEXT uint64_t lf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A size as bdwgc reads it from the environment: a number with an
 * optional k, m or g suffix. */
LF_MALLOC_TEXT size_t lf_env_size(const char *name, size_t dflt, bool *found)
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
LF_MALLOC_TEXT static int generational_by_environment(void)
{
    const char *gen = getenv(LF_STR("LFGC_GENERATIONAL"));
    if (gen && *gen)
        return *gen != '0';
    return getenv(LF_STR("GC_DISABLE_INCREMENTAL")) ? 0 : -1;
}

static void read_environment(void)
{
    lf_policy_init();
    if (getenv(LF_STR("GC_DONT_GC")) && !lf_gc_names_foreign)
        GC_dont_gc = 1;
    if (getenv(LF_STR("GC_PRINT_STATS")))
        lf_print_stats = true;
    if (LF_DEBUG)
        verify_minor = getenv(LF_STR("LFGC_VERIFY_MINOR")) != NULL;
}

/* The heap: enough for uncollectable allocation, which needs no
 * collection (see lf_ensure_init). */
LF_MALLOC_TEXT static void heap_once_fn(void)
{
    lf_gc_names_foreign = lf_gc_names_foreign_check();
    lf_threads_init();
    lf_alloc_init();
    lf_mark_init();
    if (!lf_gc_names_foreign)
        GC_parallel = (int)lf_mark_markers() - 1;
    read_environment();
    lf_hook_add(LF_HOOK_AFTER_MARK, lf_finalize_after_mark);
    lf_hook_add(LF_HOOK_AFTER_RESTART, lf_finalize_after_restart);
    lf_leak_init();
    lf_debug_alloc_init();
    lf_heap_initialized = true;
}

/* Collection on: what stopping the world needs of the process, and the
 * kernel's write tracking (a userfaultfd: a process that only mallocs
 * must not find a descriptor it never opened). */
static void init_once_fn(void)
{
    lf_dirty_init(generational_by_environment() != 0);
    lf_threads_collection_on();
    /* bdwgc's first collection at start-up, which sets its blacklist up;
     * a program that sets GC_dont_precollect wants to arrange its roots
     * first (the first collection then blacklists).  Not before: only
     * collectable spans heed the blacklist, and the scan reads every data
     * segment of the process, which a malloc-only process would pay for
     * in resident pages. */
    if (!GC_dont_precollect)
        lf_blacklist_initial_scan();
    lf_leak_collection_on();
    lf_gc_initialized = true;
}

/* The regions are reserved once, by the first of the library's
 * constructor and the first allocation: code that runs before the
 * constructor (the program's preinit functions, the constructors of
 * libraries initialised earlier, the dynamic linker) may allocate. */
static LF_UNSCANNED pthread_once_t layout_once = PTHREAD_ONCE_INIT;

LF_MALLOC_TEXT static void layout_once_fn(void)
{
    lf_kinds_init();
    lf_layout_ok = lf_layout_init() && lf_blacklist_init();
    lf_roots_init();
}

static LF_UNSCANNED pthread_once_t heap_once = PTHREAD_ONCE_INIT;

LF_MALLOC_TEXT void lf_ensure_heap(void)
{
    if (likely(lf_gc_initialized))
        return;
    pthread_once(&layout_once, layout_once_fn);
    refused_check();
    pthread_once(&heap_once, heap_once_fn);
}

/* Turns collection on: GC_init and every public entry but the
 * uncollectable allocators, GC_free and GC_realloc. */
void lf_ensure_init(void)
{
    if (likely(lf_gc_initialized))
        return;
    lf_ensure_heap();
    pthread_once(&init_once, init_once_fn);
}

/* Reserve the regions as soon as the library is loaded, before the program
 * maps anything else. */
LF_MALLOC_TEXT __attribute__((constructor(101))) static void lfgc_load(void)
{
    pthread_once(&layout_once, layout_once_fn);
}

/* ------------------------------------------------------------------ */
/* Hook points                                                         */

/* Register fn to run at hook point `at` of every collection, after those
 * registered before it.  Called during initialisation (a fixed table: an
 * internal caller that needs more slots gets a clear abort). */
LF_MALLOC_TEXT void lf_hook_add(enum lf_hook_point at, lf_hook_fn fn)
{
    if (at >= LF_HOOK_POINTS || hook_count[at] == HOOKS_MAX) {
        fprintf(stderr, "lfgc: internal error: no room for hook %d\n", (int)at);
        abort();
    }
    hooks[at][hook_count[at]++] = fn;
}

static void hooks_run(enum lf_hook_point at)
{
    for (unsigned i = 0; i < hook_count[at]; i++)
        hooks[at][i]();
}

bool lf_collect_in_progress(void)
{
    return collecting;
}

/* ------------------------------------------------------------------ */
/* The phases of a collection                                          */

/* Lock held, world running: no thread sweeps from here on; markers and
 * finalization get ready. */
static void phase_prepare(void)
{
    lf_sweepers_hold();
    lf_event(GC_EVENT_START);
    lf_mark_prepare();
    lf_finalize_before_stop();
    lf_roots_prepare();
}

/* Stop the other threads; returns when the pause started.  The global
 * free lists and unswept lists are dropped (the sweep rebuilds them). */
static uint64_t phase_stop(void)
{
    uint64_t t0 = lf_now_ns();
    lf_event(GC_EVENT_PRE_STOP_WORLD);
    lf_stop_world();
    lf_event(GC_EVENT_POST_STOP_WORLD);
    lf_caches_discard();
    return t0;
}

/* Everything a collection marks from, but the old objects on written
 * pages (minor collections): uncollectable objects, data segments and
 * added roots, stacks, the program's push procedure, finalization's. */
static void mark_every_root(void)
{
    lf_uncollectables_push();
    lf_roots_mark();
    lf_stacks_mark();
    lf_mark_push_other_roots();
    lf_finalize_mark_roots();
}

/* The policy chooses full or minor; the marks are cleared as that needs,
 * and every root is marked (the old objects on written pages too for a
 * minor collection). */
static void phase_mark_roots(struct lf_cycle *cy)
{
    lf_event(GC_EVENT_MARK_START);
    lf_policy_choose(cy);
    lf_mark_clear_cached();
    if (cy->minor) {
        lf_mark_clear_aging();
    } else {
        lf_mark_clear_all();
        lf_blacklist_new_epoch();
    }
    lf_caches_mark();
    lf_mark_begin(cy->expected_trace);
    if (cy->minor)
        cy->old_rescanned = lf_dirty_mark_old();
    mark_every_root();
}

static void phase_mark_finish(const struct lf_cycle *cy)
{
    lf_mark_finish();
    if (LF_DEBUG && cy->minor && verify_minor)
        lf_verify_minor_marks(mark_every_root);
}

/* Classify spans by their marks (the sweep itself is lazy); the counters
 * of allocation restart from here. */
static void phase_sweep(void)
{
    lf_event(GC_EVENT_RECLAIM_START);
    lf_sweep_after_mark(lf_dirty_enabled());
    /* The live bytes are new: what was allocated before is in them (for
     * the getters, which an event callback may call from here on). */
    lf_hs.allocd_since_gc = 0;
    lf_hs.freed_since_gc = 0;
    lf_hs.expl_freed_since_gc = 0;
    AO_store(&lf_hs.caches_allocd, 0);
    AO_store(&lf_hs.max_thread_allocd, 0);
    lf_hs.exited_allocd = 0;
    lf_event(GC_EVENT_RECLAIM_END);
}

static void phase_protect(const struct lf_cycle *cy)
{
    if (cy->tracked)
        lf_dirty_protect(!cy->minor);
}

static void phase_bookkeeping(const struct lf_cycle *cy)
{
    GC_gc_no++;
    lf_policy_after(cy);
    lf_release_idle_spans(false);
    /* Debug builds check the whole heap while it is still. */
    if (LF_DEBUG && lf_heap_verify(true))
        lf_assert_fail(__FILE__, __LINE__, "lf_heap_verify(true) == 0 after a collection");
}

static void phase_restart(uint64_t t0)
{
    lf_event(GC_EVENT_PRE_START_WORLD);
    lf_start_world();
    lf_roots_release();
    uint64_t pause = lf_now_ns() - t0;
    lf_event(GC_EVENT_POST_START_WORLD);
    lf_stats_record_pause(pause);
    if (lf_print_stats)
        lf_stats_print_collection(pause);
}

/* A collection, full or minor.  Lock held.  Everything from the stop to
 * the restart runs with the world stopped; reclaiming is deferred to
 * allocation (lazy sweep).  Callers run under lf_entered(), which records
 * where the program's frames end. */
void lf_collect(enum collect_reason why)
{
    /* Before collection is on nothing collectable exists, and the
     * world cannot be stopped: no handler is installed. */
    if (GC_dont_gc || collecting || !lf_layout_ok || !lf_gc_initialized)
        return;
    int cancel = nocancel_begin();
    /* The stack is scanned from where the thread entered the library
     * (lf_entered).  Should no entry be recorded, from here: every
     * callee-saved register goes into this frame, above `here`, and the
     * collector's own deeper frames (the phases below) are not scanned. */
    __builtin_unwind_init();
    volatile char here = 0;
    lf_stacks_set_scan_start((const void *)&here);
    collecting = true;
    struct lf_cycle cy = { .why = why };

    phase_prepare();
    uint64_t t0 = phase_stop();
    phase_mark_roots(&cy);
    phase_mark_finish(&cy);
    hooks_run(LF_HOOK_AFTER_MARK);      /* world stopped, marks final */
    lf_event(GC_EVENT_MARK_END);
    phase_sweep();
    phase_protect(&cy);
    phase_bookkeeping(&cy);
    phase_restart(t0);
    hooks_run(LF_HOOK_AFTER_RESTART);   /* world running, lock held */

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

/* bdwgc starts a collection cycle here in incremental mode, and does
 * nothing otherwise.  lfgc's nearest is its generational mode, whose
 * collections run whole: one runs now (minor if it can). */
LFGC_EXPORT void GC_start_incremental_collection(void)
{
    lf_ensure_init();
    if (lf_dirty_enabled())
        lf_entered(collect_minor_entered, 0, 0, 0);
}

LFGC_EXPORT void GC_enable_incremental(void)
{
    lf_ensure_init();
    /* The environment wins over the call, as GC_DISABLE_INCREMENTAL does
     * in bdwgc. */
    if (generational_by_environment() != 0) {
        lock();
        lf_dirty_init(true);
        lf_incremental_asked = lf_dirty_enabled();
        unlock();
    }
}

LF_UNSCANNED bool lf_incremental_asked;

LFGC_EXPORT int GC_is_incremental_mode(void)
{
    return lf_dirty_enabled();
}
