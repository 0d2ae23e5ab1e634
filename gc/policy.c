/* policy.c: when to collect, whether full or minor, and when to grow.
 *
 * Every decision of that kind is here, with the state it keeps (struct
 * policy); collect.c runs a collection as the policy chooses it and
 * reports back, and alloc.c asks it before the heap grows.
 *
 * Policy (bdwgc's free-space divisor): collect once the bytes allocated
 * since the last collection reach
 *     (2 * live pointerful bytes + live pointer-free bytes / 4 + roots
 *      + 2 * stacks) / divisor
 * (plus, for a minor one while two threads allocate at once, up to as
 * much again, capped by what minor ones trace: thread_widening), when the heap
 * would grow past its expanded size; otherwise expand it (after passing
 * it the room other classes hold pooled: alloc.c).  A larger divisor
 * means more collections and a smaller heap.  GC_INITIAL_HEAP_SIZE defers
 * the first collections, GC_MAXIMUM_HEAP_SIZE caps growth, GC_DONT_GC
 * turns collection off.
 *
 * Generational collections: where the kernel tracks writes (dirty.c), a
 * collection triggered by allocation is minor: it keeps the marks of the
 * last one and traces only what is new or on written pages.  Objects
 * surviving it are thereby promoted (those of nursery spans only at the
 * next minor collection: see sweep.c and dirty.c), and dead promoted
 * objects wait for the next full collection, which comes after
 * GC_full_freq minor ones (64 by default), or once the old bytes (plus what the last minor one
 * promoted) would exceed those of the last full collection by
 * 1/PROMOTE_DIV (promoted garbage), or before the heap grows if minor
 * ones promoted at least a growth step since the last full one (or kept
 * that much alive, where the last full collection found that what minor
 * ones keep is mostly garbage), or when
 * the program asks (GC_gcollect) or the heap is full.  Before growing,
 * when the last collection left at least a step of aging objects (often
 * structures under construction then, dead since), a minor collection
 * runs first, until one such early collection frees less than a step.
 * Minor collections cost what they trace: the allocation between two
 * collections is also at least twice what minor ones traced of late.
 * Within the expanded size, new memory is taken without a collection
 * until one is well overdue (unless GC_use_entire_heap is set), or due,
 * for a full one while several threads allocate (overdue_tenths).
 */
#include <stdlib.h>

#include "internal.h"

/* Below this, a collection would cost more than the memory it saves. */
#define MIN_BYTES_ALLOCD ((uint64_t)256 << 10)
/* Bounds of one expansion step of the heap.  bdwgc caps its steps at 16
 * MiB; space within the expanded size is used without consulting the
 * policy, so a smaller cap keeps the heap closer to it (docs/performance.md,
 * "Policy constants"). */
#define MIN_EXPANSION ((uint64_t)256 << 10)
#define MAX_EXPANSION ((uint64_t)8 << 20)
/* Minor collections between two full ones, at most: bdwgc's
 * GC_full_freq (api.c: 64 by default, a backstop, as promoted garbage is
 * bounded by PROMOTE_DIV; low values force full collections on programs
 * whose old data does not change), read at each decision as bdwgc reads
 * it, so that a program's setting before GC_init or later is honoured. */
static unsigned max_minors(void)
{
    int f = GC_full_freq;
    return f > 0 ? (unsigned)f : 0;
}
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

/* What the policy remembers between collections. */
static LF_UNSCANNED struct policy {
    unsigned minors_since_full;
    uint64_t full_ptrful, full_ptrfree;  /* marked by the last full one  */
    uint64_t full_old;                   /* of which old (not aging)     */
    uint64_t traced_last_minor;          /* bytes the last minor one marked */
    uint64_t promoted_last_minor;        /* bytes it made old            */
    /* Bytes minor collections triggered by allocation traced, averaged
     * (each new one weighs 1/4). */
    uint64_t minor_traced_avg;
    unsigned full_streak;                /* after the last unprofitable minor */
    unsigned fulls_left;                 /* of that streak               */
    /* An early minor collection (COLLECT_BEFORE_GROWTH) freed less than a
     * growth step: none is tried again before the next collection due to
     * allocation. */
    bool early_minor_failed;
    uint64_t live_before;                /* of the collection running    */
    uint64_t aging_before, aging_ptrful_before;   /* ... of which aging */
    /* The last full collection after minor ones found dead at least half
     * of what they had kept beyond the full one before (full_may_reclaim). */
    bool minors_keep_garbage;
    bool full_before_growth;             /* the running one is for that  */
} policy;

/* The settings bdwgc reads from the environment for its policy. */
LF_MALLOC_TEXT void lf_policy_init(void)
{
    bool found;
    lf_hs.heap_target = lf_env_size(LF_STR("GC_INITIAL_HEAP_SIZE"), MIN_EXPANSION, &found);
    lf_hs.heap_requested = lf_hs.heap_target;
    size_t max = lf_env_size(LF_STR("GC_MAXIMUM_HEAP_SIZE"), 0, &found);
    if (found)
        lf_hs.max_heap = max;
    if (lf_gc_names_foreign)
        return;                 /* the variables below are another collector's */
    if (getenv(LF_STR("GC_USE_ENTIRE_HEAP")))
        GC_use_entire_heap = 1;
    size_t div = lf_env_size(LF_STR("GC_FREE_SPACE_DIVISOR"), 0, &found);
    if (found && div > 0)
        GC_free_space_divisor = div;
    /* As bdwgc: a positive GC_FULL_FREQUENCY replaces GC_full_freq. */
    size_t freq = lf_env_size(LF_STR("GC_FULL_FREQUENCY"), 0, &found);
    if (found && freq > 0 && freq <= INT32_MAX)
        GC_full_freq = (int)freq;
}

/* Within the expanded size, a collection is overdue at this many tenths
 * of the allocation the rule asks for (at 1.0, as bdwgc, Guile, ECL and
 * neko took 4-12% more time for at most 6% less memory: design.md), but
 * see overdue_tenths. */
#define OVERDUE_TENTHS 15

static uint64_t divisor(void)
{
    return GC_free_space_divisor ? GC_free_space_divisor : 1;
}

/* A minor collection costs what it traces: the young survivors, not the
 * live heap.  Where many survive (structures in progress on several
 * threads) collecting as often as the live size allows would spend most
 * of each collection on them again: allocation between collections is at
 * least `times` what minor ones traced of late (at the default divisor;
 * a larger one shortens it as it does the rule above).  This is also what
 * spaces out collections when several threads allocate: each has its
 * structures in progress, which this measures; thread_widening adds to
 * it only as much as they are worth (design.md, "Threads and the
 * allocation between collections"). */
static uint64_t young_threshold(uint64_t times)
{
    return times * 3 * policy.minor_traced_avg / divisor();
}

/* Whether a collection for `why` would be minor, as far as the policy is
 * concerned (dirty.c must also be able to tell which pages were written). */
static bool want_minor(enum collect_reason why)
{
    if (why == COLLECT_MINOR)
        return true;
    if ((why != COLLECT_ALLOCATION && why != COLLECT_BEFORE_GROWTH) ||
        policy.minors_since_full >= max_minors() || policy.fulls_left)
        return false;
    /* Promoted garbage takes room: bounded by a fraction of the live data. */
    uint64_t full = policy.full_ptrful + policy.full_ptrfree;
    uint64_t room = full / PROMOTE_DIV;
    /* The next minor collection will likely promote about as much as the
     * last one did.  Objects of aging spans are not old yet. */
    return lf_hs.live_bytes - lf_hs.live_aging + policy.promoted_last_minor <= full + room;
}

/* What a full collection scans, weighted: pointer-free bytes a quarter
 * (only marked), stacks twice, as in bdwgc (they are expensive to scan). */
static uint64_t scan_cost(uint64_t ptrful, uint64_t ptrfree)
{
    return 2 * ptrful + ptrfree / 4 + lf_roots_size() + 2 * lf_stacks_size();
}

/* Two threads allocating at once each have structures in progress that a
 * minor collection traces; collecting every `threshold` bytes of their
 * combined allocation traces them twice as often per thread as at one
 * thread.  The allocation between minor collections is widened by the
 * measured number of threads allocating at once (the bytes running threads
 * allocated since the last collection over the most one of them did, at
 * most WIDEN_THREADS), but the extra allowance is capped at WIDEN_TRACED
 * times what minor collections traced of late: where they trace little
 * (few structures in progress), widening buys nothing and costs heap
 * (design.md, "Threads and the allocation between collections"). */
#define WIDEN_THREADS 2
#define WIDEN_TRACED 8
/* What running threads refilled since the last collection, and the most
 * one of them did (count_refill). */
static void threads_allocd(uint64_t *running, uint64_t *most)
{
    *most = AO_load(&lf_hs.max_thread_allocd);
    uint64_t caches = AO_load(&lf_hs.caches_allocd);
    *running = caches > lf_hs.exited_allocd ? caches - lf_hs.exited_allocd : 0;
}

/* Whether the next collection triggered by allocation would be minor, as
 * far as the policy and the write tracking can tell. */
static bool next_is_minor(void)
{
    return lf_dirty_enabled() && want_minor(COLLECT_ALLOCATION);
}

static uint64_t thread_widening(uint64_t threshold)
{
    uint64_t running, most;
    threads_allocd(&running, &most);
    if (!most || running <= most || !next_is_minor())
        return 0;
    if (running > WIDEN_THREADS * most)
        running = WIDEN_THREADS * most;
    uint64_t extra = (uint64_t)((unsigned __int128)threshold * (running - most) / most);
    uint64_t cap = WIDEN_TRACED * policy.minor_traced_avg / divisor();
    return extra < cap ? extra : cap;
}

/* Bytes allocated since the last collection, less those freed. */
static uint64_t allocd_net(void)
{
    uint64_t since = AO_load((volatile AO_t *)&lf_hs.allocd_since_gc);
    return since > lf_hs.freed_since_gc ? since - lf_hs.freed_since_gc : 0;
}

/* Whether the allocation since the last collection has reached
 * `tenths` tenths of what the rule asks for. */
static bool collection_due(uint64_t tenths)
{
    if (GC_dont_gc || lf_auto_collect_off || lf_collect_in_progress())
        return false;
    uint64_t allocd = allocd_net();
    /* Objects the last collection queued for finalization count as
     * allocated again, on top of lf_policy_discount leaving them out of
     * the live estimate: deliberate extra pressure, since they are garbage
     * that only the next collection frees (docs/design.md). */
    allocd += lf_finalize_queued_bytes();
    uint64_t threshold = scan_cost(lf_hs.est_ptrful, lf_hs.est_ptrfree) / divisor();
    if (threshold < MIN_BYTES_ALLOCD)
        threshold = MIN_BYTES_ALLOCD;
    if (threshold < young_threshold(2))
        threshold = young_threshold(2);
    return allocd * 10 >= (threshold + thread_widening(threshold)) * tenths;
}

bool lf_should_collect(void)
{
    return collection_due(10);
}

static uint64_t expansion_step(uint64_t need)
{
    uint64_t step = lf_hs.heap_bytes / divisor();
    if (step < MIN_EXPANSION)
        step = MIN_EXPANSION;
    if (step > MAX_EXPANSION)
        step = MAX_EXPANSION;
    return step < need ? need : step;
}

/* Whether a full collection might find a growth step (at least `need`
 * bytes) that minor ones cannot: what they made old since the last full
 * one, or, where the last full collection found dead most of what the
 * minor ones before it had kept, all they found live beyond what it did
 * (old or aging).  Minor collections keep garbage alive through dead old
 * objects on written pages (a dead list node still points to the node
 * unlinked after it, and so on to the live list): their survivors would
 * grow the heap, the next minor one would keep them again, and only a
 * full one frees them.  A program building up its data grows the
 * survivors of minor collections too, and there a full one finds them
 * live: hence the evidence of the last full collection. */
static bool full_may_reclaim(uint64_t need)
{
    uint64_t step = expansion_step(need);
    uint64_t old = lf_hs.live_bytes - lf_hs.live_aging;
    if (old > policy.full_old && old - policy.full_old >= step)
        return true;
    uint64_t full = policy.full_ptrful + policy.full_ptrfree;
    uint64_t grown = lf_hs.live_bytes > full ? lf_hs.live_bytes - full : 0;
    if (grown < step)
        return false;
    if (policy.minors_keep_garbage)
        return true;
    /* Without that evidence (it may date from a phase where the program
     * built up its data), as bdwgc does after a partial collection: when
     * the last minor collection freed almost nothing and what minor ones
     * keep exceeds the last full collection's live data by a whole
     * allocation between collections (computed from that live data).  A
     * program building up its data pays a full collection each time its
     * data grows by that fraction of itself, a bounded multiple of the
     * data in all; one whose minor collections keep all garbage (dead old
     * objects on written pages hold the young ones unlinked after them)
     * grows its heap by no more than that before a full one frees it. */
    return grown >= scan_cost(policy.full_ptrful, policy.full_ptrfree) / divisor() &&
           lf_hs.reclaimed_last < grown / 64;
}

/* Whether a minor collection might find a growth step (at least `need`
 * bytes) before the heap grows: objects of aging spans, found live by the
 * last collection, often die soon after it (structures being built then).
 * Once such an early collection freed less than a step, none is tried
 * again before the next collection due to allocation. */
static bool minor_may_reclaim(uint64_t need)
{
    uint64_t since = AO_load((volatile AO_t *)&lf_hs.allocd_since_gc);
    return !policy.early_minor_failed && lf_dirty_enabled() &&
           lf_hs.live_aging >= expansion_step(need) && since >= young_threshold(1);
}

/* Grow the expanded size by heap / divisor (at least `need`), so that the
 * next collections come after proportionally more allocation. */
static void expand_step(uint64_t need)
{
    uint64_t step = expansion_step(need);
    uint64_t target = lf_hs.heap_bytes + step;
    if (lf_hs.max_heap && target > lf_hs.max_heap)
        target = lf_hs.max_heap;
    if (target > lf_hs.heap_target)
        lf_hs.heap_target = target;
}

/* The point, in tenths of the rule's allocation, at which a collection is
 * overdue within the expanded size.  While several threads allocate
 * (others refilled at least a quarter of what the busiest did) and the
 * collection would be full, it is the rule's own point: each thread
 * refills past the point before the world stops and holds a list through
 * the collection, so that half again past it grew the heap well beyond
 * what one thread's allocation does (docs/performance.md).  A full
 * collection costs the live data, which the threads do not change; minor
 * ones while threads allocate have their allowance in thread_widening. */
static uint64_t overdue_tenths(void)
{
    uint64_t running, most;
    threads_allocd(&running, &most);
    if (most && running > most + most / 4 && !next_is_minor())
        return 10;
    return OVERDUE_TENTHS;
}

enum collect_reason lf_policy_before_growth(uint64_t bytes, unsigned collections)
{
    /* GC_dont_expand: grow only when a collection did not help. */
    bool no_collection = GC_dont_gc || lf_auto_collect_off;
    if (lf_hs.heap_bytes + bytes <= lf_hs.heap_target) {
        /* As bdwgc unless GC_use_entire_heap is set: within the expanded
         * size too, a collection well overdue comes before new memory is
         * taken (reused spans are taken first, before this is asked), once
         * the heap is past what the program asked for.  Allocation running
         * on past the rule's point only spreads over more spans: ECL's
         * peak heap was a third larger than bdwgc's for that.  In
         * bdwgc's incremental mode, the heap the program asked for
         * (GC_INITIAL_HEAP_SIZE, GC_expand_hp) defers nothing either. */
        if (collections == 0 && !GC_use_entire_heap && !no_collection &&
            (lf_hs.heap_bytes >= lf_hs.heap_requested || lf_incremental_asked) &&
            collection_due(overdue_tenths()))
            return COLLECT_ALLOCATION;
        return COLLECT_NONE;
    }
    if (collections == 0 && (GC_dont_expand ? !no_collection : lf_should_collect()))
        return COLLECT_ALLOCATION;
    /* Only where the heap would grow, as in bdwgc. */
    if (collections == 0 && !no_collection && !lf_collect_in_progress() &&
        lf_finalize_wants_collection(allocd_net()))
        return COLLECT_ALLOCATION;
    /* Promoted garbage must not make the heap grow: a full collection
     * first, when minor ones promoted enough to make it worth its cost. */
    if (lf_hs.last_minor && !no_collection && full_may_reclaim(bytes)) {
        policy.full_before_growth = true;
        return COLLECT_HEAP_FULL;
    }
    /* Young objects found live by the last collection often die soon
     * after it (a structure being built then): a minor collection, which
     * traces them again, before growing for them. */
    if (collections == 0 && !no_collection && minor_may_reclaim(bytes))
        return COLLECT_BEFORE_GROWTH;
    expand_step(bytes);
    return COLLECT_NONE;
}

void lf_policy_choose(struct lf_cycle *cy)
{
    /* Always asked, so that tracking starts (or recovers) at once, but
     * within a streak of full collections: the writes are learnt, and
     * pages protected, by the last one of the streak, in time for the
     * minor one after it. */
    cy->tracked = policy.fulls_left <= 1 || cy->why == COLLECT_MINOR;
    /* Pages the kernel pinned are written without a fault: asked last,
     * as it reads /proc (pins.c). */
    cy->minor = cy->tracked && lf_dirty_begin() && want_minor(cy->why) &&
                lf_pins_allow_minor();
    /* What a minor collection starts with marked: the old objects. */
    cy->carried_ptrful = cy->minor ? lf_hs.live_ptrful - lf_hs.live_aging_ptrful : 0;
    cy->carried_ptrfree =
        cy->minor ? lf_hs.live_ptrfree - (lf_hs.live_aging - lf_hs.live_aging_ptrful) : 0;
    cy->old_before = lf_hs.live_bytes - lf_hs.live_aging;
    cy->expected_trace = cy->minor ? policy.traced_last_minor : lf_hs.live_ptrful;
    cy->old_rescanned = 0;
    policy.live_before = lf_hs.live_bytes;
    policy.aging_before = lf_hs.live_aging;
    policy.aging_ptrful_before = lf_hs.live_aging_ptrful;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* The first minor collection after a full one traces again the objects
 * that one left aging (sweep.c), which the full one's figures already
 * count: those it finds live are neither new to the estimates nor
 * promoted in the sense that predicts the next minor ones (they are
 * promoted once).  Counted twice, they doubled the allocation allowed
 * before the next collection, and made the policy expect the promoted
 * garbage bound to be crossed, where the full one left the program's
 * whole data aging (Whippet's quads: a full collection followed at once). */
static void discount_first_minor(uint64_t *new_ptrful, uint64_t *new_ptrfree)
{
    uint64_t ptrful = min_u64(min_u64(policy.aging_ptrful_before, *new_ptrful), policy.full_ptrful);
    uint64_t ptrfree = min_u64(min_u64(policy.aging_before - policy.aging_ptrful_before,
                                       *new_ptrfree), policy.full_ptrfree);
    *new_ptrful -= ptrful;
    *new_ptrfree -= ptrfree;
    policy.promoted_last_minor -= min_u64(policy.promoted_last_minor, ptrful + ptrfree);
}

/* Bytes the last collection counted live that were dead: the objects
 * disclaim procedures freed right after it (`freed`: gone from the live
 * figures too), or those it queued for their finalizers (in the heap
 * until a later collection frees them, but garbage once their finalizers
 * have run).  The estimates the policy plans with must not keep them:
 * else minor collections, which cannot free the finalized ones (marked,
 * so old), look as good as full ones, and the heap grows instead. */
void lf_policy_discount(uint64_t ptrful, uint64_t ptrfree, bool freed)
{
#define SUB(x, n) ((x) = sub_floor0((x), (n)))
    if (freed) {
        SUB(lf_hs.live_bytes, ptrful + ptrfree);
        SUB(lf_hs.live_ptrful, ptrful);
        SUB(lf_hs.live_ptrfree, ptrfree);
        /* Found dead by the collection, not freed by the program. */
        SUB(lf_hs.freed_since_gc, ptrful + ptrfree);
    }
    SUB(lf_hs.est_ptrful, ptrful);
    SUB(lf_hs.est_ptrfree, ptrfree);
    if (!lf_hs.last_minor) {
        SUB(policy.full_ptrful, ptrful);
        SUB(policy.full_ptrfree, ptrfree);
        SUB(policy.full_old, ptrful + ptrfree);
    }
#undef SUB
}

/* A full collection after minor ones: did they keep garbage? */
static void judge_minors(void)
{
    uint64_t full = policy.full_ptrful + policy.full_ptrfree;
    uint64_t kept = policy.live_before > full ? policy.live_before - full : 0;
    /* Dead among what was live before: the survivors of what was
     * allocated since only make this smaller. */
    uint64_t dead = policy.live_before > lf_hs.live_bytes ? policy.live_before - lf_hs.live_bytes : 0;
    if (kept >= expansion_step(0))
        policy.minors_keep_garbage = 2 * dead >= kept;
    /* What the minor ones traced and this one found dead was garbage they
     * kept, not structures in progress: it must not space out the next
     * minor ones (young_threshold). */
    if (policy.full_before_growth)
        policy.minor_traced_avg = policy.minor_traced_avg > dead ? policy.minor_traced_avg - dead : 0;
}

void lf_policy_after(const struct lf_cycle *cy)
{
    if (!cy->minor && lf_hs.last_minor)
        judge_minors();
    policy.full_before_growth = false;
    lf_hs.last_minor = cy->minor;
    if (cy->minor) {
        lf_hs.minor_collections++;
        policy.minors_since_full++;
        uint64_t new_ptrful = lf_hs.live_ptrful > cy->carried_ptrful
                                  ? lf_hs.live_ptrful - cy->carried_ptrful : 0;
        uint64_t new_ptrfree = lf_hs.live_ptrfree > cy->carried_ptrfree
                                   ? lf_hs.live_ptrfree - cy->carried_ptrfree : 0;
        policy.traced_last_minor = new_ptrful;
        /* One the program asked for, at a moment of its choosing, tells
         * little of what those that allocation triggers will find. */
        if (cy->why != COLLECT_MINOR)
            policy.minor_traced_avg = (3 * policy.minor_traced_avg + new_ptrful) / 4;
        uint64_t old_after = lf_hs.live_bytes - lf_hs.live_aging;
        policy.promoted_last_minor = old_after > cy->old_before ? old_after - cy->old_before : 0;
        if (policy.minors_since_full == 1)
            discount_first_minor(&new_ptrful, &new_ptrfree);
        lf_hs.est_ptrful = policy.full_ptrful + new_ptrful;
        lf_hs.est_ptrfree = policy.full_ptrfree + new_ptrfree;
        if (2 * (cy->old_rescanned + MINOR_FIXED_BYTES) >= policy.full_ptrful) {
            policy.full_streak = policy.full_streak ? policy.full_streak * 2 : 1;
            if (policy.full_streak > MAX_FULL_STREAK)
                policy.full_streak = MAX_FULL_STREAK;
            policy.fulls_left = policy.full_streak;
        } else {
            policy.full_streak = 0;
        }
    } else {
        if (policy.fulls_left)
            policy.fulls_left--;
        policy.minors_since_full = 0;
        policy.traced_last_minor = 0;      /* unknown: try a minor one next */
        policy.promoted_last_minor = 0;
        policy.full_ptrful = lf_hs.est_ptrful = lf_hs.live_ptrful;
        policy.full_ptrfree = lf_hs.est_ptrfree = lf_hs.live_ptrfree;
        policy.full_old = lf_hs.live_bytes - lf_hs.live_aging;
    }
    if (cy->why == COLLECT_BEFORE_GROWTH)
        policy.early_minor_failed = lf_hs.reclaimed_last < expansion_step(0);
    else if (cy->why == COLLECT_ALLOCATION)
        policy.early_minor_failed = false;
}
