/* test_thread_hazards.c: how threads meet the collector at its edges.
 *
 * Each test runs in its own process (Criterion's default).  Worker threads
 * never call cr_assert: they record what they saw, and the test's thread
 * checks it.  Every wait is bounded (a deadline, alarm() in forked
 * children, Criterion's timeout), so that a hang fails instead of
 * blocking.  Liveness is checked with checksums: a slot reclaimed too
 * early is zeroed and handed out again, and the garbage the tests
 * allocate overwrites it.
 *
 * The tests:
 *   unregistered_thread_registered_by_any_entry   every allocation
 *       variant, GC_realloc and GC_free register a plain pthread
 *   suspend_a_finished_thread   GC_suspend_thread after the thread ended
 *       but before the join, as bdwgc
 *   cancelled_inside_a_collection   a cancellation point in the collector
 *       does not act (it would unwind with the lock held)
 *   cancelled_while_stopped   a stopped thread is not unwound
 *   cancelled_at_random_while_collecting   the same, at real cancellation points
 *   warn_proc_not_called_while_stopped   warnings wait for the restart
 *   default_warning_while_a_stopped_thread_holds_stderr   written with write(2)
 *   unregistered_collector_does_not_malloc_while_stopped
 *   join_does_not_drop_a_reused_record   GC_pthread_join vs a record reused
 *   cancelled_in_a_blocking_section   its cleanup handlers run as running code
 *   same_suspend_and_restart_signal_aborts   at GC_init, as bdwgc 8.2, rather
 *       than every collection waiting forever for threads to answer
 *   not_stopped_inside_the_unlock_of_call_with_alloc_lock   a caller that
 *       finishes after the call what its function began is never seen
 *       half-way by a collection that waited for the lock
 *
 * This program interposes malloc (section 4) to see who calls it when,
 * and pthread_mutex_unlock (section 7) to widen a window.
 */
#define GC_THREADS
#include "test_util.h"      /* first: it defines _GNU_SOURCE */
#include "gc_mark.h"

#define NOINLINE __attribute__((noinline))

/* ------------------------------------------------------------------ */
/* Data with checksums                                                  */

/* A checksummed list (test_util.h), handed back hidden: the caller's
 * frame never holds it. */
static NOINLINE GC_hidden_pointer list_build(uint64_t seed, size_t n)
{
    return GC_HIDE_POINTER(tu_list_build(seed, n));
}

static void fill(uint64_t *p, size_t words, uint64_t seed)
{
    for (size_t j = 0; j < words; j++)
        p[j] = tu_pat(seed, j);
}

/* Index of the first bad word + 1, or 0. */
static size_t check(const uint64_t *p, size_t words, uint64_t seed)
{
    for (size_t j = 0; j < words; j++)
        if (p[j] != tu_pat(seed, j))
            return j + 1;
    return 0;
}

/* Short-lived objects of several sizes, small and large, filled so that a
 * live slot handed out again is visibly overwritten. */
static NOINLINE void garbage(size_t bytes, uint64_t seed)
{
    size_t done = 0;
    for (unsigned i = 0; done < bytes; i++) {
        size_t sz = i % 64 == 0 ? 256 * KiB + (size_t)(tu_mix(seed + i) % (768 * KiB))
                                : 16 + (size_t)(tu_mix(seed + i) % 496);
        void *p = i & 1 ? GC_MALLOC_ATOMIC(sz) : GC_MALLOC(sz);
        if (!p)
            return;
        memset(p, 0xa5, sz);
        done += sz;
    }
}

/* Overwrite stack below the caller, removing stale pointers. */
static NOINLINE void clear_stack(void)
{
    char buf[64 * 1024];
    memset(buf, 0, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
}

static NOINLINE int live(GC_hidden_pointer h)
{
    return lfgc_is_live(GC_REVEAL_POINTER(h));
}

/* ================================================================== */
/* 1. A plain pthread is registered by whatever it does to the heap     */

/* A thread made with the real pthread_create receives a list built by
 * the test (the only reference is then on its stack) and touches the
 * heap one way only.  The collections the test runs meanwhile must scan
 * its stack: the list and what it allocated stay intact. */
enum ur_way {
    UR_LARGE, UR_LARGE_ATOMIC, UR_UNCOLLECTABLE, UR_ATOMIC_UNCOLLECTABLE,
    UR_ALIGNED_LARGE, UR_REALLOC_IN_PLACE, UR_FREE, UR_WAYS
};
static const char *const ur_names[UR_WAYS] = {
    "large GC_MALLOC", "large GC_MALLOC_ATOMIC", "GC_MALLOC_UNCOLLECTABLE",
    "GC_malloc_atomic_uncollectable", "GC_memalign(64 KiB)", "GC_REALLOC in place",
    "GC_FREE",
};

#define UR_NODES 4000
#define UR_BIG (1 * MiB)

struct ur {
    enum ur_way way;
    atomic_long phase;
    GC_hidden_pointer list;     /* handed over, then cleared */
    GC_hidden_pointer victim;   /* an object for realloc and free */
    GC_hidden_pointer obj;      /* what the thread allocated, for the test */
    size_t obj_words;
    size_t bad_list, bad_obj;
    int registered;
};

static NOINLINE void *ur_touch(struct ur *u, size_t *words)
{
    void *victim = GC_REVEAL_POINTER(u->victim);
    switch (u->way) {
    case UR_LARGE:                 *words = UR_BIG / 8; return GC_MALLOC(UR_BIG);
    case UR_LARGE_ATOMIC:          *words = UR_BIG / 8; return GC_MALLOC_ATOMIC(UR_BIG);
    case UR_UNCOLLECTABLE:         *words = 8; return GC_MALLOC_UNCOLLECTABLE(64);
    case UR_ATOMIC_UNCOLLECTABLE:  *words = 8; return GC_malloc_atomic_uncollectable(64);
    case UR_ALIGNED_LARGE:         *words = 16; return GC_memalign(64 * KiB, 128);
    case UR_REALLOC_IN_PLACE:      *words = 16; return GC_REALLOC(victim, 900);
    case UR_FREE:                  *words = 0; GC_FREE(victim); return NULL;
    default:                       return NULL;
    }
}

static NOINLINE void ur_body(struct ur *u)
{
    struct tu_node *volatile list = GC_REVEAL_POINTER(u->list);
    u->list = 0;
    size_t words = 0;
    uint64_t *volatile obj = ur_touch(u, &words);
    if (obj)
        fill(obj, words, 0x0b1);
    u->obj = GC_HIDE_POINTER(obj);
    u->obj_words = words;
    u->registered = GC_thread_is_registered();
    atomic_store(&u->phase, 1);
    if (!tu_wait_at_least(&u->phase, 2, 30))
        u->registered = -1;
    u->bad_list = tu_list_check(list, 0x11, UR_NODES);
    u->bad_obj = obj ? check(obj, words, 0x0b1) : 0;
    if (u->way == UR_UNCOLLECTABLE || u->way == UR_ATOMIC_UNCOLLECTABLE)
        GC_FREE(obj);
}

static void *ur_thread(void *arg)
{
    ur_body(arg);
    clear_stack();
    return NULL;
}

static NOINLINE GC_hidden_pointer ur_victim(void)
{
    uint64_t *v = GC_MALLOC(1000);
    fill(v, 16, 0x0b1);
    return GC_HIDE_POINTER(v);
}

static NOINLINE void ur_run(struct ur *u, enum ur_way way)
{
    memset(u, 0, sizeof *u);
    u->way = way;
    atomic_store(&u->phase, 0);
    u->list = list_build(0x11, UR_NODES);
    u->victim = ur_victim();
    clear_stack();
    GC_hidden_pointer list = u->list;
    pthread_t t;
    cr_assert_eq(tu_real_pthread_create(&t, NULL, ur_thread, u), 0);
    cr_assert(tu_wait_at_least(&u->phase, 1, 10), "%s: the thread did not start", ur_names[u->way]);
    for (int i = 0; i < 4; i++) {
        garbage(4 * MiB, (uint64_t)i);
        clear_stack();
        GC_gcollect();
    }
    atomic_store(&u->phase, 2);
    cr_assert_eq(tu_real_pthread_join(t, NULL), 0);
    cr_assert_neq(u->registered, -1, "%s: the test did not go on", ur_names[u->way]);
    cr_assert_eq(u->bad_list, 0, "%s: the list on the thread's stack was reclaimed (node %zu)",
                 ur_names[u->way], u->bad_list - 1);
    cr_assert_eq(u->bad_obj, 0, "%s: the thread's own object was reclaimed (word %zu)",
                 ur_names[u->way], u->bad_obj - 1);
    cr_assert(u->registered, "%s: the thread was not registered", ur_names[u->way]);
    /* The thread is gone: what only it held is garbage now. */
    clear_stack();
    GC_gcollect();
    clear_stack();
    GC_gcollect();
    cr_assert_not(live(list), "%s: the list outlived the thread", ur_names[u->way]);
    if (u->obj_words && u->way != UR_REALLOC_IN_PLACE)
        cr_assert_not(live(u->obj), "%s: the thread's object outlived it", ur_names[u->way]);
}

Test(hazards, unregistered_thread_registered_by_any_entry, .timeout = 60)
{
    GC_INIT();
    static struct ur u;
    for (int w = 0; w < UR_WAYS; w++)
        ur_run(&u, (enum ur_way)w);
}

/* ================================================================== */
/* 2. GC_suspend_thread on a thread that ended but is not joined        */

/* As bdwgc (whose own test suspends threads that may have ended): the
 * thread reads as suspended until resumed, resuming it is harmless, and
 * its return value stays a root until the join. */
static atomic_long sf_tid;

static NOINLINE void *sf_result(void)
{
    return GC_REVEAL_POINTER(list_build(0x5f, UR_NODES));
}

static void *sf_thread(void *arg)
{
    (void)arg;
    atomic_store(&sf_tid, (long)gettid());
    return sf_result();
}

Test(hazards, suspend_a_finished_thread, .timeout = 60)
{
    GC_INIT();
    for (int round = 0; round < 5; round++) {
        atomic_store(&sf_tid, 0);
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, sf_thread, NULL), 0);     /* GC_pthread_create */
        cr_assert(tu_wait_at_least(&sf_tid, 1, 10), "the thread did not start");
        cr_assert(tu_wait_task_gone(atomic_load(&sf_tid), 10), "the thread did not end");
        pthread_t id = t;   /* bdwgc's GC_SUSPEND_THREAD_ID under GC_THREADS */
        cr_assert_not(GC_is_thread_suspended(id));
        GC_suspend_thread(id);
        cr_assert(GC_is_thread_suspended(id), "an ended, unjoined thread not reported suspended");
        GC_suspend_thread(id);             /* no count */
        garbage(4 * MiB, (uint64_t)round);
        clear_stack();
        GC_gcollect();
        cr_assert(GC_is_thread_suspended(id), "a collection resumed it");
        GC_resume_thread(id);
        cr_assert_not(GC_is_thread_suspended(id), "still suspended after GC_resume_thread");
        GC_resume_thread(id);              /* harmless */
        GC_suspend_thread(id);
        cr_assert(GC_is_thread_suspended(id));
        void *ret = NULL;
        cr_assert_eq(pthread_join(t, &ret), 0);    /* GC_pthread_join, suspended or not */
        size_t bad = tu_list_check(ret, 0x5f, UR_NODES);
        cr_assert_eq(bad, 0, "the return value was reclaimed before the join (node %zu)", bad - 1);
        cr_assert_not(GC_is_thread_suspended(id), "a joined thread reads as suspended");
    }
}

/* ================================================================== */
/* 3. pthread_cancel and the collector                                  */

/* A cancellation point reached inside the collector (here a collection
 * event handler calling pthread_testcancel, with the world stopped) must
 * not act: unwinding there would leave the lock held and the world
 * stopped.  The request takes effect at the thread's next cancellation
 * point instead. */
static pthread_t cc_probe;
static atomic_long cc_returned;
static atomic_long cc_events;

static void cc_on_event(GC_EventType e)
{
    if (e == GC_EVENT_MARK_START && pthread_equal(pthread_self(), cc_probe)) {
        atomic_fetch_add(&cc_events, 1);
        pthread_testcancel();
    }
}

static void *cc_thread(void *arg)
{
    (void)arg;
    cc_probe = pthread_self();
    pthread_cancel(pthread_self());
    GC_gcollect();
    (void)GC_MALLOC(2 * MiB);     /* large: through the lock */
    atomic_store(&cc_returned, 1);
    pthread_testcancel();
    return NULL;
}

static struct tu_node *cc_root;

static int cc_child(void)
{
    GC_INIT();
    cc_root = GC_REVEAL_POINTER(list_build(0xcc, UR_NODES));
    GC_set_on_collection_event(cc_on_event);
    pthread_t t;
    if (pthread_create(&t, NULL, cc_thread, NULL) != 0)
        return 10;
    void *ret = NULL;
    if (pthread_join(t, &ret) != 0)
        return 11;
    if (ret != PTHREAD_CANCELED)
        return 12;
    if (atomic_load(&cc_returned) != 1 || atomic_load(&cc_events) != 1)
        return 13;
    garbage(4 * MiB, 1);
    GC_gcollect();                          /* the lock was given back */
    if (tu_list_check(cc_root, 0xcc, UR_NODES))
        return 14;
    return 0;
}

Test(hazards, cancelled_inside_a_collection, .timeout = 60)
{
    tu_in_child(cc_child, 20, "a thread cancelled in the collector");
}

/* A thread stopped by a collection (here GC_stop_world_external) waits
 * in sigsuspend, a cancellation point: a pthread_cancel then must not
 * unwind it while the world is stopped and its stack is being scanned. */
static atomic_long cs_count;
static atomic_long cs_unwound;
static atomic_int cs_may_cancel;

static void cs_cleanup(void *arg)
{
    (void)arg;
    atomic_store(&cs_unwound, 1);
}

static void *cs_thread(void *arg)
{
    (void)arg;
    pthread_cleanup_push(cs_cleanup, NULL);
    for (;;) {
        atomic_fetch_add(&cs_count, 1);
        if (atomic_load(&cs_may_cancel))
            pthread_testcancel();
    }
    pthread_cleanup_pop(0);
    return NULL;
}

Test(hazards, cancelled_while_stopped, .timeout = 60)
{
    GC_INIT();
    for (int round = 0; round < 5; round++) {
        atomic_store(&cs_count, 0);
        atomic_store(&cs_unwound, 0);
        atomic_store(&cs_may_cancel, 0);
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, cs_thread, NULL), 0);
        cr_assert(tu_wait_at_least(&cs_count, 1000, 10), "the thread never ran");
        GC_stop_world_external();
        long before = atomic_load(&cs_count);
        pthread_cancel(t);
        tu_sleep_ms(30);
        long unwound = atomic_load(&cs_unwound);
        long during = atomic_load(&cs_count);
        GC_start_world_external();
        atomic_store(&cs_may_cancel, 1);
        void *ret = NULL;
        cr_assert_eq(pthread_join(t, &ret), 0);
        cr_assert_eq(unwound, 0, "a stopped thread was unwound by a cancellation");
        cr_assert_eq(during, before, "the thread ran while the world was stopped");
        cr_assert_eq(ret, PTHREAD_CANCELED, "the cancellation was lost");
        cr_assert_eq(atomic_load(&cs_unwound), 1);
    }
}

/* The same with real cancellation points, at random moments: a thread
 * collecting in a loop is cancelled while other threads' answers, the
 * parallel markers or /proc are waited for. */
static atomic_int cr_stop;
static struct tu_node *cr_ballast;

static void *cr_worker(void *arg)
{
    (void)arg;
    while (!atomic_load(&cr_stop)) {
        GC_gcollect();
        for (int i = 0; i < 100; i++)
            (void)GC_MALLOC(64);
    }
    return NULL;
}

static void *cr_bystander(void *arg)
{
    (void)arg;
    while (!atomic_load(&cr_stop))
        garbage(64 * KiB, 7);
    return NULL;
}

static int cr_child(void)
{
    GC_INIT();
    cr_ballast = GC_REVEAL_POINTER(list_build(0xba, 200000));   /* work for the markers */
    pthread_t by;
    if (pthread_create(&by, NULL, cr_bystander, NULL) != 0)
        return 10;
    uint64_t seed = 1;
    for (int round = 0; round < 40; round++) {
        atomic_store(&cr_stop, 0);
        pthread_t t;
        if (pthread_create(&t, NULL, cr_worker, NULL) != 0)
            return 11;
        seed = tu_mix(seed);
        tu_sleep_ms((unsigned)(seed % 15));
        pthread_cancel(t);
        tu_sleep_ms(5);
        atomic_store(&cr_stop, 1);
        if (pthread_join(t, NULL) != 0)
            return 12;
        GC_gcollect();
    }
    atomic_store(&cr_stop, 1);
    pthread_join(by, NULL);
    return tu_list_check(cr_ballast, 0xba, 200000) ? 13 : 0;
}

Test(hazards, cancelled_at_random_while_collecting, .timeout = 90)
{
    tu_in_child(cr_child, 40, "threads cancelled while collecting");
}

/* ================================================================== */
/* 4. Nothing that may take a stopped thread's lock while stopped       */

/* malloc, interposed for this program: counts the calls the collecting
 * thread makes while the world is stopped (a stopped thread may hold
 * malloc's lock).  The window is told by the collection events. */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

static atomic_int ms_watch;
static _Atomic(pthread_t) ms_collector;
static atomic_long ms_calls;

static void ms_note(void)
{
    if (atomic_load_explicit(&ms_watch, memory_order_relaxed) &&
        pthread_equal(pthread_self(), atomic_load(&ms_collector)))
        atomic_fetch_add(&ms_calls, 1);
}

void *malloc(size_t n)
{
    ms_note();
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    ms_note();
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    ms_note();
    return __libc_realloc(p, n);
}

/* The world is stopped from POST_STOP_WORLD to PRE_START_WORLD. */
static atomic_int st_stopped;
static atomic_int st_warn_in_mark;      /* warn once from inside the pause */

static void st_on_event(GC_EventType e)
{
    if (e == GC_EVENT_POST_STOP_WORLD) {
        atomic_store(&ms_collector, pthread_self());
        atomic_store(&st_stopped, 1);
        atomic_store(&ms_watch, 1);
    } else if (e == GC_EVENT_PRE_START_WORLD) {
        atomic_store(&ms_watch, 0);
        atomic_store(&st_stopped, 0);
    } else if (e == GC_EVENT_MARK_START && atomic_exchange(&st_warn_in_mark, 0)) {
        /* A call that warns, made while the world is stopped. */
        GC_set_pages_executable(1);
    }
}

/* A program's warn proc is called after the world restarts, not while
 * the threads that may hold its locks are stopped. */
static atomic_long wp_calls, wp_calls_stopped;
static GC_word wp_arg;
static char wp_msg[256];

static void wp_proc(char *msg, GC_word arg)
{
    atomic_fetch_add(&wp_calls, 1);
    if (atomic_load(&st_stopped))
        atomic_fetch_add(&wp_calls_stopped, 1);
    snprintf(wp_msg, sizeof wp_msg, "%s", msg);
    wp_arg = arg;
}

Test(hazards, warn_proc_not_called_while_stopped, .timeout = 60)
{
    GC_INIT();
    GC_set_on_collection_event(st_on_event);
    GC_set_warn_proc(wp_proc);
    for (int round = 0; round < 3; round++) {
        atomic_store(&wp_calls, 0);
        atomic_store(&wp_calls_stopped, 0);
        atomic_store(&st_warn_in_mark, 1);
        GC_gcollect();
        cr_assert_eq(atomic_load(&st_warn_in_mark), 0, "the pause did not warn");
        cr_assert_eq(atomic_load(&wp_calls_stopped), 0,
                     "the warn proc was called while the world was stopped");
        cr_assert_eq(atomic_load(&wp_calls), 1, "the warning was lost (%ld calls)",
                     atomic_load(&wp_calls));
        cr_assert_not_null(strstr(wp_msg, "never executable"), "wrong warning: %s", wp_msg);
        cr_assert_eq(wp_arg, 1);
    }
    /* Outside a pause, at once. */
    atomic_store(&wp_calls, 0);
    GC_set_pages_executable(1);
    cr_assert_eq(atomic_load(&wp_calls), 1);
    GC_set_warn_proc(NULL);
    GC_set_on_collection_event(NULL);
}

/* With the default warn proc, a warning made while the world is stopped
 * reaches stderr even though a stopped thread holds stderr's lock (an
 * fprintf would wait for it for ever). */
static atomic_long sl_locked;
static atomic_int sl_release;

static void *sl_thread(void *arg)
{
    (void)arg;
    flockfile(stderr);
    atomic_store(&sl_locked, 1);
    while (!atomic_load(&sl_release))
        ;
    funlockfile(stderr);
    return NULL;
}

static int sl_child(void)
{
    char path[] = "/tmp/lfgc-hazards-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 10;
    unlink(path);
    GC_INIT();
    GC_set_on_collection_event(st_on_event);
    pthread_t t;
    if (pthread_create(&t, NULL, sl_thread, NULL) != 0)       /* registered */
        return 11;
    if (!tu_wait_at_least(&sl_locked, 1, 10))
        return 12;
    int saved = dup(2);
    dup2(fd, 2);
    atomic_store(&st_warn_in_mark, 1);
    GC_gcollect();
    dup2(saved, 2);
    atomic_store(&sl_release, 1);
    pthread_join(t, NULL);
    char out[512] = {0};
    if (pread(fd, out, sizeof out - 1, 0) <= 0)
        return 13;
    if (atomic_load(&st_warn_in_mark))
        return 14;
    const char *want = "GC Warning: GC_set_pages_executable(0x1): lfgc's heap is never "
                       "executable\n";
    return strcmp(out, want) == 0 ? 0 : 15;
}

Test(hazards, default_warning_while_a_stopped_thread_holds_stderr, .timeout = 60)
{
    tu_in_child(sl_child, 20, "a warning while stderr's holder was stopped");
}

/* A collection by a thread that is not registered finds its stack base
 * before the world stops: glibc's pthread_getattr_np calls malloc.  Its
 * stack is still scanned. */
struct uc {
    GC_hidden_pointer list;
    atomic_long done;
    long mallocs;
    int registered;
    size_t bad;
    size_t not_live;
};

static NOINLINE void uc_body(struct uc *u)
{
    struct tu_node *volatile list = GC_REVEAL_POINTER(u->list);
    u->list = 0;
    atomic_store(&ms_calls, 0);
    GC_gcollect();
    GC_gcollect();
    u->mallocs = atomic_load(&ms_calls);
    u->registered = GC_thread_is_registered();
    u->bad = tu_list_check(list, 0x0c, UR_NODES);
    u->not_live = 0;
    size_t i = 0;
    for (struct tu_node *x = list; x && i < UR_NODES; x = x->next, i++)
        if (!lfgc_is_live(x) && !u->not_live)
            u->not_live = i + 1;
}

static void *uc_thread(void *arg)
{
    uc_body(arg);
    atomic_store(&((struct uc *)arg)->done, 1);
    return NULL;
}

Test(hazards, unregistered_collector_does_not_malloc_while_stopped, .timeout = 60)
{
    GC_INIT();
    GC_set_on_collection_event(st_on_event);
    static struct uc u;
    u.list = list_build(0x0c, UR_NODES);
    clear_stack();
    pthread_t t;
    cr_assert_eq(tu_real_pthread_create(&t, NULL, uc_thread, &u), 0);
    cr_assert_eq(tu_real_pthread_join(t, NULL), 0);
    cr_assert_eq(u.registered, 0, "the test needs the collecting thread unregistered");
    cr_assert_eq(u.mallocs, 0, "%ld malloc calls by the collector while the world was stopped",
                 u.mallocs);
    cr_assert_eq(u.bad, 0, "the collector's own stack was not scanned (node %zu)", u.bad - 1);
    cr_assert_eq(u.not_live, 0, "node %zu not marked", u.not_live - 1);
    GC_set_on_collection_event(NULL);
}

/* ================================================================== */
/* 5. GC_pthread_join and records reused meanwhile                      */

/* A thread registered by its allocation leaves its record when it exits,
 * and the next thread to register may get it.  A GC_pthread_join that
 * began before must not then drop that other thread's record (whose
 * return value is a root until its own join).  The joiner is held
 * (GC_suspend_thread) while the joined thread exits and another takes its
 * record, ends, and waits to be joined. */
static atomic_long jr_x_tid, jr_x_go, jr_y_tid, jr_joined;

static void *jr_x(void *arg)
{
    (void)arg;
    (void)GC_MALLOC(64);                       /* registered by this */
    atomic_store(&jr_x_tid, (long)gettid());
    tu_wait_at_least(&jr_x_go, 1, 30);
    return NULL;
}

static void *jr_joiner(void *arg)
{
    pthread_t x = *(pthread_t *)arg;
    int err = pthread_join(x, NULL);          /* GC_pthread_join */
    atomic_store(&jr_joined, err == 0 ? 1 : -1);
    return NULL;
}

static void *jr_y(void *arg)
{
    (void)arg;
    atomic_store(&jr_y_tid, (long)gettid());
    return GC_REVEAL_POINTER(list_build(0x9e, UR_NODES));
}

Test(hazards, join_does_not_drop_a_reused_record, .timeout = 60)
{
    GC_INIT();
    pthread_t x, j, y;
    cr_assert_eq(tu_real_pthread_create(&x, NULL, jr_x, NULL), 0);
    cr_assert(tu_wait_at_least(&jr_x_tid, 1, 10), "X did not start");
    cr_assert_eq(pthread_create(&j, NULL, jr_joiner, &x), 0);
    tu_sleep_ms(20);                             /* J is waiting in the join */
    GC_suspend_thread(j);
    cr_assert(GC_is_thread_suspended(j));
    atomic_store(&jr_x_go, 1);
    cr_assert(tu_wait_task_gone(atomic_load(&jr_x_tid), 10), "X did not end");
    cr_assert_eq(pthread_create(&y, NULL, jr_y, NULL), 0);
    cr_assert(tu_wait_at_least(&jr_y_tid, 1, 10), "Y did not start");
    cr_assert(tu_wait_task_gone(atomic_load(&jr_y_tid), 10), "Y did not end");
    GC_resume_thread(j);
    cr_assert(tu_wait_at_least(&jr_joined, 1, 10), "J's join did not return (%ld)",
              atomic_load(&jr_joined));
    cr_assert_eq(pthread_join(j, NULL), 0);
    for (int i = 0; i < 3; i++) {
        garbage(4 * MiB, (uint64_t)i);
        clear_stack();
        GC_gcollect();
    }
    void *ret = NULL;
    cr_assert_eq(pthread_join(y, &ret), 0);
    size_t bad = tu_list_check(ret, 0x9e, UR_NODES);
    cr_assert_eq(bad, 0, "Y's return value was reclaimed before its join (node %zu)", bad - 1);
}

/* ================================================================== */
/* 6. A thread cancelled inside GC_do_blocking                          */

/* The cleanup handlers of a thread cancelled (or ending with
 * pthread_exit) in a blocking section run ordinary code, which may
 * allocate and hold objects on a stack deeper than where the section
 * began: the thread must count as running again (stopped, scanned from
 * where it is), not as still blocking. */
static atomic_long bc_blocked, bc_in_cleanup, bc_collected;
static size_t bc_bad;

static void *bc_read(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char c;
    atomic_store(&bc_blocked, 1);
    (void)read(fd, &c, 1);                    /* cancelled here */
    return NULL;
}

/* Deep below the frame that pushed the handler: holds the list in a slot
 * 32 KiB down. */
static NOINLINE void bc_deep(void)
{
    struct tu_node *volatile slots[4096];
    slots[0] = GC_REVEAL_POINTER(list_build(0xdc, UR_NODES));
    for (size_t i = 1; i < 4096; i++)
        slots[i] = NULL;
    atomic_store(&bc_in_cleanup, 1);
    tu_wait_at_least(&bc_collected, 1, 30);
    bc_bad = tu_list_check(slots[0], 0xdc, UR_NODES);
}

static void bc_cleanup(void *arg)
{
    (void)arg;
    bc_deep();
}

static void *bc_thread(void *arg)
{
    pthread_cleanup_push(bc_cleanup, NULL);
    GC_do_blocking(bc_read, arg);
    pthread_cleanup_pop(0);
    return NULL;
}

Test(hazards, cancelled_in_a_blocking_section, .timeout = 60)
{
    GC_INIT();
    int p[2];
    cr_assert_eq(pipe(p), 0);
    for (int round = 0; round < 3; round++) {
        atomic_store(&bc_blocked, 0);
        atomic_store(&bc_in_cleanup, 0);
        atomic_store(&bc_collected, 0);
        bc_bad = 0;
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, bc_thread, (void *)(intptr_t)p[0]), 0);
        cr_assert(tu_wait_at_least(&bc_blocked, 1, 10), "the thread did not block");
        tu_sleep_ms(10);
        cr_assert_eq(pthread_cancel(t), 0);
        cr_assert(tu_wait_at_least(&bc_in_cleanup, 1, 10), "the cleanup handler did not run");
        for (int i = 0; i < 3; i++) {
            garbage(4 * MiB, (uint64_t)i);
            clear_stack();
            GC_gcollect();
        }
        atomic_store(&bc_collected, 1);
        void *ret = NULL;
        cr_assert_eq(pthread_join(t, &ret), 0);
        cr_assert_eq(ret, PTHREAD_CANCELED);
        cr_assert_eq(bc_bad, 0, "a list held by a cleanup handler was reclaimed (node %zu)",
                     bc_bad - 1);
    }
    close(p[0]);
    close(p[1]);
}

/* ------------------------------------------------------------------ */
/* Misuse of the signals                                               */

static void *ss_thread(void *arg)
{
    (void)arg;
    for (;;)
        sleep(1);
    return NULL;
}

Test(hazards, same_suspend_and_restart_signal_aborts, .signal = SIGABRT, .timeout = 30)
{
    GC_set_suspend_signal(SIGUSR1);
    GC_set_thr_restart_signal(SIGUSR1);
    cr_assert_eq(GC_get_suspend_signal(), SIGUSR1, "the setter came after GC_init");
    cr_assert_eq(GC_get_thr_restart_signal(), SIGUSR1);
    GC_INIT();
    /* Not reached: with both handlers on one signal, this would wait
     * forever for a thread that cannot answer. */
    pthread_t t;
    cr_assert_eq(GC_pthread_create(&t, NULL, ss_thread, NULL), 0);
    GC_gcollect();
    cr_assert_fail("GC_init accepted one signal for suspend and restart");
}

/* ================================================================== */
/* 7. A stop while a thread leaves GC_call_with_alloc_lock             */

/* Guile 3.0 moves a thread's VM stack inside GC_call_with_alloc_lock and
 * sets the stack pointer after the call returns; its mark procedure, run
 * by a collection that stops the thread in between, walks from the old
 * stack to the new one.  The collection that does it is the one that
 * waited for the lock: the unlock's futex wake is a system call, and the
 * world stops before it returns.  Here the unlock of one thread waits
 * 300 us after releasing the mutex, as a slow wake would, and a second
 * thread collects in a loop; a roots callback, run with the world
 * stopped, looks at the change the first thread finishes after each call. */

/* glibc's own unlock, by its other name (the plain one is this file's). */
__asm__(".symver glibc_mutex_unlock, __pthread_mutex_unlock@GLIBC_2.2.5");
extern int glibc_mutex_unlock(pthread_mutex_t *m);

static __thread bool lu_slow;

static void spin_us(long us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static volatile int lu_half;            /* begun under the lock, finished after */
static volatile int lu_unlocking;       /* in the slow part of the unlock */
static atomic_long lu_stops, lu_seen_inside, lu_seen_half, lu_overlaps, lu_done;
static GC_push_other_roots_proc lu_previous;

int pthread_mutex_unlock(pthread_mutex_t *m)
{
    int r = glibc_mutex_unlock(m);
    if (lu_slow) {
        lu_unlocking = 1;
        spin_us(300);
        lu_unlocking = 0;
    }
    return r;
}

/* A collection begins (lock held, world running): count those that come
 * while the caller is inside its unlock. */
static void lu_start(void)
{
    if (lu_unlocking)
        atomic_fetch_add(&lu_overlaps, 1);
}

static void lu_roots(void)
{
    atomic_fetch_add(&lu_stops, 1);
    if (lu_unlocking)
        atomic_fetch_add(&lu_seen_inside, 1);
    if (lu_half)
        atomic_fetch_add(&lu_seen_half, 1);
    if (lu_previous)
        lu_previous();
}

static void *lu_begin(void *arg)
{
    lu_half = 1;
    spin_us(200);                       /* the collector queues for the lock */
    return arg;
}

static void *lu_caller(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000 && atomic_load(&lu_overlaps) < 40; i++) {
        lu_slow = true;
        (void)GC_call_with_alloc_lock(lu_begin, NULL);
        lu_slow = false;
        lu_half = 0;
        spin_us(50);
    }
    atomic_store(&lu_done, 1);
    return NULL;
}

static void *lu_collector(void *arg)
{
    (void)arg;
    while (!atomic_load(&lu_done))
        GC_gcollect();
    return NULL;
}

Test(hazards, not_stopped_inside_the_unlock_of_call_with_alloc_lock, .timeout = 120)
{
    GC_INIT();
    lu_previous = GC_get_push_other_roots();
    GC_set_push_other_roots(lu_roots);
    GC_set_start_callback(lu_start);
    pthread_t a, b;
    cr_assert_eq(pthread_create(&a, NULL, lu_caller, NULL), 0);
    cr_assert_eq(pthread_create(&b, NULL, lu_collector, NULL), 0);
    cr_assert_eq(pthread_join(a, NULL), 0);
    cr_assert_eq(pthread_join(b, NULL), 0);
    GC_set_push_other_roots(lu_previous);
    GC_set_start_callback(NULL);
    cr_assert_geq(atomic_load(&lu_overlaps), 10,
                  "only %ld collections began inside the unlock: the window was not tried",
                  atomic_load(&lu_overlaps));
    /* A stop inside the unlock is the collector's doing.  One between
     * the return and the caller's next instructions (lu_half still set)
     * is the caller's: lfgc lets it run on a little after it leaves
     * (LEAVE_SPINS), which a descheduled caller may outlast on a loaded
     * machine; Guile's own window is that one (docs/design.md). */
    cr_log_info("%ld of %ld collections saw the change half made",
                atomic_load(&lu_seen_half), atomic_load(&lu_stops));
    cr_assert_eq(atomic_load(&lu_seen_inside), 0,
                 "%ld of %ld collections stopped the caller inside the unlock, its change half made",
                 atomic_load(&lu_seen_inside), atomic_load(&lu_stops));
}
