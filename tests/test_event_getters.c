/* test_event_getters.c: the statistics getters inside collection-event
 * callbacks.
 *
 * bdwgc documents GC_get_heap_size, GC_get_free_bytes,
 * GC_get_unmapped_bytes, GC_get_bytes_since_gc, GC_get_total_bytes and
 * GC_get_gc_no as taking no lock, and programs (Whippet's bdwgc backend)
 * call them from the GC_set_on_collection_event callback, which runs with
 * the lock held: a getter that takes the lock deadlocks the first
 * collection.  Each test has a timeout, so that a deadlock fails it.  The
 * values must mean something at every event too: after the collection
 * has found what is live (RECLAIM_END on), the bytes in use are the live
 * bytes, not the live bytes plus everything allocated before the
 * collection, and the free bytes are the heap less those.
 */
#define GC_THREADS
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

TestSuite(getters, .init = tu_warm_up, .timeout = 20);

#define NUM_EVENTS (GC_EVENT_THREAD_UNSUSPENDED + 1)

struct figures {
    int seen;
    size_t heap, free, unmapped, since, total, memory_use, freed;
    GC_word gc_no;
    unsigned long total_time;
    GC_word safe_heap, safe_free, safe_unmapped, safe_since, safe_total;
    struct lfgc_stats stats;
    size_t pauses;
};

static struct figures at[NUM_EVENTS];
static int starts;
static size_t last_total;
static int total_went_down;

static void read_all(struct figures *f)
{
    f->seen++;
    f->heap = GC_get_heap_size();
    f->free = GC_get_free_bytes();
    f->unmapped = GC_get_unmapped_bytes();
    f->since = GC_get_bytes_since_gc();
    f->total = GC_get_total_bytes();
    f->gc_no = GC_get_gc_no();
    f->memory_use = GC_get_memory_use();
    f->freed = GC_get_expl_freed_bytes_since_gc();
    f->total_time = GC_get_full_gc_total_time();
    GC_get_heap_usage_safe(&f->safe_heap, &f->safe_free, &f->safe_unmapped,
                           &f->safe_since, &f->safe_total);
    lfgc_get_stats(&f->stats);
    uint64_t ns[4];
    f->pauses = lfgc_get_pauses(ns, 4);
    if (f->total < last_total)
        total_went_down++;
    last_total = f->total;
}

static void on_event(GC_EventType e)
{
    if ((unsigned)e < NUM_EVENTS)
        read_all(&at[e]);
}

static void on_start(void)
{
    starts++;
    GC_get_total_bytes();
    GC_get_free_bytes();
}

static void reset(void)
{
    memset(at, 0, sizeof at);
    starts = 0;
    last_total = 0;
    total_went_down = 0;
}

/* Every event of a collection was seen once, and each getter agreed with
 * its locked twin. */
static void check_every_event(int collections)
{
    static const GC_EventType events[] = {
        GC_EVENT_START, GC_EVENT_PRE_STOP_WORLD, GC_EVENT_POST_STOP_WORLD,
        GC_EVENT_MARK_START, GC_EVENT_MARK_END, GC_EVENT_RECLAIM_START,
        GC_EVENT_RECLAIM_END, GC_EVENT_PRE_START_WORLD, GC_EVENT_POST_START_WORLD,
        GC_EVENT_END,
    };
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
        struct figures *f = &at[events[i]];
        cr_assert_eq(f->seen, collections, "event %d seen %d times in %d collections",
                     events[i], f->seen, collections);
        cr_assert_eq(f->safe_heap, f->heap, "event %d", events[i]);
        cr_assert_eq(f->safe_free, f->free, "event %d", events[i]);
        cr_assert_eq(f->safe_unmapped, f->unmapped, "event %d", events[i]);
        cr_assert_eq(f->safe_since, f->since, "event %d", events[i]);
        cr_assert_eq(f->safe_total, f->total, "event %d", events[i]);
        cr_assert_eq(f->stats.total_allocated, f->total, "event %d", events[i]);
        cr_assert_eq(f->stats.heap_bytes, f->heap, "event %d", events[i]);
        cr_assert_leq(f->free, f->heap, "event %d", events[i]);
        cr_assert_eq(f->free + f->memory_use, f->heap > f->memory_use ? f->heap : f->memory_use,
                     "event %d: free %zu + in use %zu, heap %zu", events[i], f->free,
                     f->memory_use, f->heap);
    }
    cr_assert_eq(starts, collections);
    cr_assert_eq(total_went_down, 0, "GC_get_total_bytes went down between events");
}

#define LIVE_N 4096
#define OBJ 256
static void *volatile *live_list;

static TU_NOINLINE void make_live(void)
{
    live_list = GC_malloc(LIVE_N * sizeof(void *));
    cr_assert_not_null(live_list);
    for (int i = 0; i < LIVE_N; i++) {
        live_list[i] = GC_malloc(OBJ - 1);
        cr_assert_not_null(live_list[i]);
    }
}

static TU_NOINLINE void make_garbage(size_t bytes)
{
    for (size_t n = 0; n < bytes; n += OBJ) {
        char *p = GC_malloc(OBJ - 1);
        cr_assert_not_null(p);
        p[0] = 1;
    }
}

Test(getters, every_getter_in_every_event_of_explicit_collections)
{
    make_live();
    tu_collect();
    GC_set_on_collection_event(on_event);
    GC_set_start_callback(on_start);
    reset();
    GC_disable();
    make_garbage(16 * MiB);
    GC_enable();
    size_t since = GC_get_bytes_since_gc(), total = GC_get_total_bytes();
    GC_word n0 = GC_get_gc_no();
    tu_collect();
    GC_set_on_collection_event(NULL);
    GC_set_start_callback(NULL);
    check_every_event(1);

    /* Before marking: what was allocated since the last collection. */
    struct figures *s = &at[GC_EVENT_START], *r = &at[GC_EVENT_RECLAIM_END];
    cr_assert_geq(s->since, since, "bytes since gc at START: %zu, before: %zu",
                  s->since, since);
    cr_assert_geq(s->total, total);
    cr_assert_eq(s->gc_no, n0);
    cr_assert_eq(at[GC_EVENT_END].gc_no, n0 + 1);
    /* Once the collection found what is live: in use is the live data
     * (4096 objects of 256 bytes, with the warm-up's pinned slots), not
     * that plus the 16 MiB allocated before. */
    size_t live = (size_t)LIVE_N * OBJ + LIVE_N * sizeof(void *);
    cr_assert_lt(r->memory_use, live + tu_base_stats.live_bytes + 512 * KiB,
                 "in use at RECLAIM_END: %zu KiB, live about %zu KiB",
                 r->memory_use >> 10, (live + tu_base_stats.live_bytes) >> 10);
    cr_assert_geq(r->memory_use, live);
    cr_assert_eq(r->since, 0, "bytes since gc at RECLAIM_END: %zu", r->since);
    cr_assert_gt(r->free, 8 * MiB, "free bytes at RECLAIM_END: %zu KiB of a %zu KiB "
                 "heap whose 16 MiB of garbage was just found dead", r->free >> 10,
                 r->heap >> 10);
    cr_assert_eq(r->free, r->heap - r->memory_use);
    cr_assert_eq(at[GC_EVENT_END].free, r->free);
    cr_assert_eq(at[GC_EVENT_END].stats.collections, n0 + 1);
    cr_assert_eq(at[GC_EVENT_END].stats.live_bytes, r->memory_use);
}

/* Collections triggered by allocation, minor ones among them where the
 * kernel allows, the very first one of the process included. */
/* No warm-up here: the callback must be set before the first collection. */
TestSuite(first, .timeout = 20);

Test(first, every_getter_in_every_event_of_automatic_collections)
{
    GC_INIT();
    GC_set_on_collection_event(on_event);
    GC_set_start_callback(on_start);
    reset();
    GC_word n0 = GC_get_gc_no();
    make_live();
    make_garbage(64 * MiB);
    int collections = (int)(GC_get_gc_no() - n0);
    GC_set_on_collection_event(NULL);
    GC_set_start_callback(NULL);
    cr_assert_gt(collections, 1, "64 MiB of allocation ran %d collections", collections);
    check_every_event(collections);
    struct figures *r = &at[GC_EVENT_RECLAIM_END];
    cr_assert_eq(r->since, 0);
    cr_assert_gt(r->free, 0);
}

/* The callback may run on any thread that allocates. */
static void *alloc_thread(void *arg)
{
    (void)arg;
    make_garbage(32 * MiB);
    return NULL;
}

Test(getters, getters_in_callbacks_of_collections_on_other_threads)
{
    GC_set_on_collection_event(on_event);
    reset();
    GC_word n0 = GC_get_gc_no();
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, alloc_thread, NULL), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_join(t[i], NULL), 0);
    GC_set_on_collection_event(NULL);
    int collections = (int)(GC_get_gc_no() - n0);
    cr_assert_gt(collections, 0);
    cr_assert_eq(at[GC_EVENT_END].seen, collections);
    cr_assert_eq(at[GC_EVENT_RECLAIM_END].since, 0);
    cr_assert_eq(total_went_down, 0);
}

/* GC_call_with_alloc_lock holds the lock too: the unsynchronized getters
 * work there as in bdwgc. */
static void *getters_under_lock(void *arg)
{
    struct figures *f = arg;
    f->heap = GC_get_heap_size();
    f->free = GC_get_free_bytes();
    f->total = GC_get_total_bytes();
    f->since = GC_get_bytes_since_gc();
    f->unmapped = GC_get_unmapped_bytes();
    f->gc_no = GC_get_gc_no();
    return f;
}

Test(getters, unsynchronized_getters_under_the_allocation_lock)
{
    GC_disable();
    make_garbage(MiB);
    GC_enable();
    struct figures f;
    memset(&f, 0, sizeof f);
    cr_assert_eq(GC_call_with_alloc_lock(getters_under_lock, &f), &f);
    cr_assert_eq(f.total, GC_get_total_bytes());
    cr_assert_geq(f.since, MiB);
    cr_assert_eq(f.heap, GC_get_heap_size());
    cr_assert_eq(f.gc_no, GC_get_gc_no());
}
