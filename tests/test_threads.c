/* test_threads.c: lfgc with several threads.
 *
 * Each test runs in its own process (Criterion's default), so every test
 * starts with a fresh collector.  Worker threads never call cr_assert
 * (Criterion's assertions abort the test from the thread that runs it):
 * they record failures with CHECK()/FAIL(), and the test's main thread
 * reports them with assert_no_failures().
 *
 * The collector is conservative: a stale copy of a pointer may keep an
 * object alive, so reclamation is checked with aggregate figures (heap
 * size, live bytes), never for single objects.  Premature reclamation is
 * what the checksums catch: a slot reclaimed too early is zeroed by the
 * sweep and handed out again, and the garbage the tests allocate
 * overwrites it.
 *
 * Every wait is bounded (a deadline, alarm() in forked children, and
 * Criterion's per-test timeout), so a hang fails instead of blocking.
 *
 * The tests:
 *   many_threads_share_structures      8 threads build, publish, cross-check
 *   is_live_on_young_objects_during_collections  lfgc_is_live straddling one
 *   ten_thousand_threads               create/join 10,000 threads, check results
 *   blocked_in_read                    a thread in read() across collections
 *   deep_recursion                     12,000 frames x 4 threads, stack-only refs
 *   return_value_survives_until_join   results held only by the thread record
 *   user_signals_during_collections    SIGUSR1 handlers, none lost, no EINTR trouble
 *   fork_with_threads_running          the child allocates, collects, makes threads
 *   register_foreign_thread            GC_register_my_thread & co. on a raw pthread
 *   implicitly_registered_thread       a raw pthread registered by its allocation
 *   do_blocking_and_call_with_gc_active
 *   parallel_markers_1/_2/_2_stack_overflow   GC_MARKERS (and a tiny mark stack)
 *   exiting_thread_returns_cached_slots  no slot handed out twice
 *   default_signals, pthread_sigmask_keeps_suspend_signal
 *   detached_and_cancelled_threads, call_with_alloc_lock
 *   registering_without_allow_warns_once, registering_after_gc_pthread_create_is_silent
 *   find_leak_set_and_read_quietly, thread_events_report_suspension
 *   stack_bottom_get_and_set, fork_handled_by_the_program, alloc_lock_functions
 *   stopped_on_a_signal_stack, stopped_on_a_registered_signal_stack,
 *   stopped_on_a_coroutine_stack, stop_world_external,
 *   parallel_and_stackbottom_variables, stackbottom_set_before_init,
 *   suspend_and_resume_another_thread, thread_suspends_itself
 *   thread_local_variables_are_roots   __thread and pthread_setspecific values
 *   main_thread_locals_are_roots       the main thread's __thread variables
 */
#define GC_THREADS
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <fcntl.h>
#include <sys/mman.h>
#include <ucontext.h>

#define NOINLINE __attribute__((noinline))

/* ------------------------------------------------------------------ */
/* Failures recorded by any thread                                     */

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int fail_count;
static char fail_msg[1024];

static void __attribute__((format(printf, 3, 4)))
fail_at(const char *file, int line, const char *fmt, ...)
{
    pthread_mutex_lock(&fail_lock);
    if (atomic_fetch_add(&fail_count, 1) == 0) {
        int n = snprintf(fail_msg, sizeof fail_msg, "%s:%d: ", file, line);
        va_list ap;
        va_start(ap, fmt);
        if (n > 0 && (size_t)n < sizeof fail_msg)
            vsnprintf(fail_msg + n, sizeof fail_msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&fail_lock);
}

#define FAIL(...) fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)

static bool failed(void)
{
    return atomic_load(&fail_count) != 0;
}

static void reset_failures(void)
{
    atomic_store(&fail_count, 0);
    fail_msg[0] = 0;
}

#define assert_no_failures() \
    cr_assert_eq(atomic_load(&fail_count), 0, "%d failure(s) in the threads; first: %s", \
                 atomic_load(&fail_count), fail_msg)

/* ------------------------------------------------------------------ */
/* /proc                                                               */

/* The system call thread tid is blocked in (/proc/.../syscall), -1 when
 * running, -2 when it cannot be told. */
static long task_syscall(pid_t tid)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -2;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -2;
    buf[n] = 0;
    if (!strncmp(buf, "running", 7))
        return -1;
    char *end;
    long nr = strtol(buf, &end, 10);
    return end == buf ? -2 : nr;
}

/* ------------------------------------------------------------------ */
/* Data with checksums                                                  */

static inline uint64_t rnd(uint64_t *state)
{
    *state = tu_mix(*state);
    return *state;
}

static uint64_t *blob_build(uint64_t seed, size_t words)
{
    uint64_t *b = GC_MALLOC_ATOMIC(words * sizeof *b);
    if (b)
        for (size_t j = 0; j < words; j++)
            b[j] = tu_pat(seed, j);
    return b;
}

static size_t blob_check(const uint64_t *b, uint64_t seed, size_t words)
{
    for (size_t j = 0; j < words; j++)
        if (b[j] != tu_pat(seed, j))
            return j + 1;
    return 0;
}

/* Allocate about `bytes` of short-lived objects of several classes and
 * kinds, filling them so that a live slot wrongly handed out again is
 * visibly overwritten. */
static NOINLINE void garbage(size_t bytes, uint64_t seed)
{
    size_t done = 0;
    while (done < bytes) {
        size_t sz = 16 + (size_t)(tu_mix(seed + done) % 496);
        void *p = (done / 512) & 1 ? GC_MALLOC_ATOMIC(sz) : GC_MALLOC(sz);
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

/* `rounds` collections, each after 2 MiB of garbage (seeds from `seed`). */
static NOINLINE void collect_rounds(int rounds, uint64_t seed)
{
    for (int i = 0; i < rounds && !failed(); i++) {
        garbage(2 * MiB, seed + (uint64_t)i);
        clear_stack();
        GC_gcollect();
    }
}

static size_t heap_size(void)
{
    return GC_get_heap_size();
}

static uint64_t live_bytes(void)
{
    struct lfgc_stats st;
    lfgc_get_stats(&st);
    return st.live_bytes;
}

/* Garbage was reclaimed: after allocating at least `min_alloc` bytes since
 * the total was `total0`, the heap is still below `bound`. */
static void heap_bounded(const char *test, size_t total0, size_t min_alloc, size_t bound)
{
    size_t allocated = GC_get_total_bytes() - total0;
    size_t heap = heap_size();
    cr_log_info("%s: allocated %zu KiB, heap %zu KiB, live %llu KiB, %lu collections",
                test, allocated >> 10, heap >> 10, (unsigned long long)(live_bytes() >> 10),
                (unsigned long)GC_get_gc_no());
    cr_assert_geq(allocated, min_alloc, "%s: the test allocated only %zu bytes", test, allocated);
    cr_assert_lt(heap, bound, "%s: heap of %zu bytes after allocating %zu: garbage not reclaimed",
                 test, heap, allocated);
}

static void start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
    int err = pthread_create(t, NULL, fn, arg);   /* GC_pthread_create */
    cr_assert_eq(err, 0, "pthread_create: %s", strerror(err));
}

static void *join_thread(pthread_t t)
{
    void *ret = NULL;
    int err = pthread_join(t, &ret);              /* GC_pthread_join */
    cr_assert_eq(err, 0, "pthread_join: %s", strerror(err));
    return ret;
}

/* ================================================================== */
/* 1. Many threads building, sharing and checking structures            */

#define SH_THREADS 8
#define SH_SLOTS 256
#define SH_ITERS 6000

struct item {
    uint64_t seed;
    size_t n;               /* list length */
    struct tu_node *list;
    size_t words;           /* blob length */
    uint64_t *blob;         /* pointer-free */
    uint64_t sum;           /* over every key and blob word */
};

static struct item *sh_slots[SH_SLOTS];
static pthread_mutex_t sh_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long sh_checked;

static uint64_t item_sum(const struct item *it)
{
    uint64_t s = it->seed;
    size_t i = 0;
    for (const struct tu_node *x = it->list; x && i < it->n; x = x->next, i++)
        s = s * 31 + x->key + x->val[0] + x->val[1];
    for (size_t j = 0; j < it->words; j++)
        s = s * 17 + it->blob[j];
    return s;
}

static struct item *item_new(uint64_t seed)
{
    struct item *it = GC_MALLOC(sizeof *it);
    if (!it)
        return NULL;
    it->seed = seed;
    it->n = 4 + (size_t)(tu_mix(seed) % 60);
    it->list = tu_list_build(seed, it->n);
    it->words = 1 + (size_t)(tu_mix(seed ^ 0xb10b) % 200);
    it->blob = blob_build(~seed, it->words);
    if (!it->list || !it->blob)
        return NULL;
    it->sum = item_sum(it);
    return it;
}

/* NULL when the item is intact, else what is wrong. */
static const char *item_check(const struct item *it)
{
    if (!lfgc_is_live(it))
        return "item not live";
    if (it->n < 4 || it->n >= 64 || it->words < 1 || it->words > 200)
        return "item header overwritten";
    if (tu_list_check(it->list, it->seed, it->n))
        return "list corrupted";
    if (blob_check(it->blob, ~it->seed, it->words))
        return "blob corrupted";
    if (item_sum(it) != it->sum)
        return "checksum mismatch";
    return NULL;
}

static void *sh_worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t r = 0x5eed0000ull + id;
    struct item *mine[8] = { 0 };     /* recent items, on this stack only */
    for (unsigned i = 0; i < SH_ITERS && !failed(); i++) {
        uint64_t seed = ((uint64_t)id << 40) | i;
        struct item *it = item_new(seed);
        if (!it) {
            FAIL("thread %u: allocation failed", id);
            break;
        }
        garbage(1024, seed);
        if (i % 2 == 0) {
            pthread_mutex_lock(&sh_lock);
            sh_slots[rnd(&r) % SH_SLOTS] = it;     /* the old one is garbage */
            pthread_mutex_unlock(&sh_lock);
        }
        mine[i % 8] = it;
        /* Read somebody's structure; our local copy keeps it alive even
         * when it is replaced in the array meanwhile. */
        pthread_mutex_lock(&sh_lock);
        struct item *other = sh_slots[rnd(&r) % SH_SLOTS];
        pthread_mutex_unlock(&sh_lock);
        if (other) {
            const char *err = item_check(other);
            CHECK(!err, "thread %u reading item %#llx: %s", id,
                  (unsigned long long)other->seed, err);
            atomic_fetch_add(&sh_checked, 1);
        }
        if (i % 64 == 63)
            for (unsigned k = 0; k < 8; k++) {
                const char *err = mine[k] ? item_check(mine[k]) : NULL;
                CHECK(!err, "thread %u own item %#llx: %s", id,
                      (unsigned long long)mine[k]->seed, err);
            }
        if (id < 2 && i % 400 == 399)
            GC_gcollect();
    }
    return NULL;
}

Test(threads, many_threads_share_structures, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    GC_word gc0 = GC_get_gc_no();
    pthread_t t[SH_THREADS];
    for (unsigned i = 0; i < SH_THREADS; i++)
        start_thread(&t[i], sh_worker, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < SH_THREADS; i++)
        join_thread(t[i]);
    assert_no_failures();
    cr_expect_gt(atomic_load(&sh_checked), SH_THREADS * SH_ITERS / 2,
                 "too few cross-thread checks: %ld", atomic_load(&sh_checked));
    cr_assert_geq(GC_get_gc_no() - gc0, 20, "only %lu collections ran",
                  (unsigned long)(GC_get_gc_no() - gc0));

    for (int round = 0; round < 2; round++) {
        for (unsigned s = 0; s < SH_SLOTS; s++) {
            if (!sh_slots[s])
                continue;
            const char *err = item_check(sh_slots[s]);
            cr_assert(!err, "slot %u (item %#llx) after the threads: %s", s,
                      (unsigned long long)sh_slots[s]->seed, err);
        }
        clear_stack();
        GC_gcollect();
    }
    heap_bounded("share", total0, 128 * MiB, 24 * MiB);
    cr_assert_lt(live_bytes(), 16 * MiB, "%llu bytes live for %d shared items",
                 (unsigned long long)live_bytes(), SH_SLOTS);
}

/* lfgc_is_live on an object allocated since the last collection, while
 * other threads collect: it read the (clear) mark bit, was stopped by a
 * collection that marked the object and put its span on the unswept list,
 * and then found the span unswept: "dead awaiting the sweep" for an object
 * the thread held (once in many_threads_share_structures). */
#define YL_CHECKERS 3
#define YL_SECONDS 1.5

static atomic_bool yl_stop;
static atomic_long yl_young_checks, yl_collections;

static void *yl_collector(void *arg)
{
    (void)arg;
    while (!atomic_load(&yl_stop)) {
        GC_gcollect();
        atomic_fetch_add(&yl_collections, 1);
    }
    return NULL;
}

static void *yl_checker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (uint64_t i = 0; !atomic_load(&yl_stop) && !failed(); i++) {
        GC_word gc = GC_get_gc_no();
        uint64_t *volatile p = GC_MALLOC(4 * sizeof(uint64_t));
        if (!p) {
            FAIL("checker %u: allocation failed", id);
            break;
        }
        p[0] = i;
        for (int k = 0; k < 16; k++)
            if (!lfgc_is_live(p)) {
                FAIL("checker %u: object %p (allocated %lu collection(s) ago) not live",
                     id, (void *)p, (unsigned long)(GC_get_gc_no() - gc));
                break;
            }
        if (p[0] != i)
            FAIL("checker %u: object %p overwritten", id, (void *)p);
        if (GC_get_gc_no() != gc)
            atomic_fetch_add(&yl_young_checks, 1);
    }
    return NULL;
}

Test(threads, is_live_on_young_objects_during_collections, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    pthread_t c, t[YL_CHECKERS];
    start_thread(&c, yl_collector, NULL);
    for (unsigned i = 0; i < YL_CHECKERS; i++)
        start_thread(&t[i], yl_checker, (void *)(uintptr_t)i);
    double end = tu_now_s() + YL_SECONDS;
    while (tu_now_s() < end && !failed())
        usleep(10000);
    atomic_store(&yl_stop, true);
    for (unsigned i = 0; i < YL_CHECKERS; i++)
        join_thread(t[i]);
    join_thread(c);
    assert_no_failures();
    cr_log_info("is_live: %ld collections, %ld checks across one",
                atomic_load(&yl_collections), atomic_load(&yl_young_checks));
    cr_assert_gt(atomic_load(&yl_young_checks), 10,
                 "too few collections came during a check: %ld",
                 atomic_load(&yl_young_checks));
}

/* ================================================================== */
/* 2. Ten thousand threads created and joined while collections run     */

#define TT_TOTAL 10000
#define TT_CREATORS 2
#define TT_BATCH 25            /* per creator: 50 threads at a time */
#define TT_BLOB_WORDS 512      /* 4 KiB returned by every thread   */

struct tt_result {
    uint64_t idx;
    uint64_t *blob;
    struct tu_node *list;
};

static atomic_int tt_done_creators;
static atomic_long tt_verified;

static void *tt_thread(void *arg)
{
    uint64_t idx = (uint64_t)(uintptr_t)arg;
    struct tt_result *res = GC_MALLOC(sizeof *res);
    if (!res)
        return NULL;
    res->idx = idx;
    res->blob = blob_build(idx, TT_BLOB_WORDS);
    res->list = tu_list_build(idx ^ 0x77, 8);
    garbage(512, idx);
    return res;
}

static void *tt_creator(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    unsigned per = TT_TOTAL / TT_CREATORS;
    pthread_t t[TT_BATCH];
    for (unsigned base = 0; base < per && !failed(); base += TT_BATCH) {
        unsigned n = per - base < TT_BATCH ? per - base : TT_BATCH;
        for (unsigned k = 0; k < n; k++) {
            uint64_t idx = (uint64_t)id * per + base + k;
            int err = pthread_create(&t[k], NULL, tt_thread, (void *)(uintptr_t)idx);
            if (err) {
                FAIL("pthread_create of thread %llu: %s", (unsigned long long)idx,
                     strerror(err));
                n = k;
                break;
            }
        }
        for (unsigned k = 0; k < n; k++) {
            uint64_t idx = (uint64_t)id * per + base + k;
            void *ret = NULL;
            int err = pthread_join(t[k], &ret);
            if (err) {
                FAIL("pthread_join of thread %llu: %s", (unsigned long long)idx, strerror(err));
                continue;
            }
            struct tt_result *res = ret;
            if (!res) {
                FAIL("thread %llu returned NULL", (unsigned long long)idx);
                continue;
            }
            /* A result reclaimed before the join has been reused: do not
             * follow its pointers. */
            if (res->idx != idx) {
                FAIL("thread %llu: its result (%p) now holds %#llx, not its index: "
                     "reclaimed before pthread_join returned it?", (unsigned long long)idx,
                     (void *)res, (unsigned long long)res->idx);
                continue;
            }
            if (GC_base(res->blob) != res->blob || GC_base(res->list) != res->list) {
                FAIL("thread %llu: result's pointers overwritten", (unsigned long long)idx);
                continue;
            }
            size_t bad = blob_check(res->blob, idx, TT_BLOB_WORDS);
            CHECK(!bad, "thread %llu: result blob word %zu corrupted",
                  (unsigned long long)idx, bad - 1);
            bad = tu_list_check(res->list, idx ^ 0x77, 8);
            CHECK(!bad, "thread %llu: result list node %zu corrupted",
                  (unsigned long long)idx, bad - 1);
            atomic_fetch_add(&tt_verified, 1);
        }
    }
    atomic_fetch_add(&tt_done_creators, 1);
    return NULL;
}

static void *tt_collector(void *arg)
{
    (void)arg;
    uint64_t i = 0;
    while (atomic_load(&tt_done_creators) < TT_CREATORS) {
        GC_gcollect();
        garbage(32 * KiB, i++);
        tu_sleep_ms(2);
    }
    return NULL;
}

Test(threads, ten_thousand_threads, .timeout = 90)
{
    reset_failures();
    int tasks0 = tu_count_tasks();
    GC_INIT();
    GC_gcollect();              /* starts the marker threads, if any */
    size_t total0 = GC_get_total_bytes();
    int tasks_base = tu_count_tasks();
    cr_assert_geq(tasks_base, tasks0);
    GC_word gc0 = GC_get_gc_no();
    pthread_t coll, cr[TT_CREATORS];
    start_thread(&coll, tt_collector, NULL);
    for (unsigned i = 0; i < TT_CREATORS; i++)
        start_thread(&cr[i], tt_creator, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < TT_CREATORS; i++)
        join_thread(cr[i]);
    join_thread(coll);
    assert_no_failures();
    cr_assert_eq(atomic_load(&tt_verified), TT_TOTAL);
    cr_assert_geq(GC_get_gc_no() - gc0, 10, "only %lu collections ran during the test",
                  (unsigned long)(GC_get_gc_no() - gc0));
    cr_assert_eq(tu_count_tasks(), tasks_base, "threads left behind: %d, expected %d",
                 tu_count_tasks(), tasks_base);

    /* Every result is garbage now.  Records of joined threads that stayed
     * in the registry would keep their 4 KiB results alive. */
    clear_stack();
    GC_gcollect();
    GC_gcollect();
    uint64_t live = live_bytes();
    cr_assert_lt(live, 8 * MiB,
                 "%llu bytes still live after joining %d threads (%zu bytes each were "
                 "returned): results of joined threads retained?",
                 (unsigned long long)live, TT_TOTAL, TT_BLOB_WORDS * sizeof(uint64_t));
    heap_bounded("10000 threads", total0, 64 * MiB, 16 * MiB);
}

/* ================================================================== */
/* 3. A thread blocked in read() while collections run                  */

static int rd_pipe[2];
static atomic_long rd_ready;
static atomic_long rd_tid;
static atomic_long rd_returned;

#define RD_BYTES 64
#define RD_NODES 500

static NOINLINE void *rd_thread(void *arg)
{
    (void)arg;
    struct tu_node *volatile list = tu_list_build(0x4ead, RD_NODES);   /* stack only */
    unsigned char buf[RD_BYTES + 16];
    memset(buf, 0, sizeof buf);
    atomic_store(&rd_tid, (long)gettid());
    atomic_store(&rd_ready, 1);
    errno = 0;
    ssize_t n = read(rd_pipe[0], buf, sizeof buf);
    int err = errno;
    atomic_store(&rd_returned, 1);
    CHECK(n == RD_BYTES, "read returned %zd (errno %d: %s), expected %d", n, err,
          strerror(err), RD_BYTES);
    for (int i = 0; i < RD_BYTES && n == RD_BYTES; i++)
        CHECK(buf[i] == (unsigned char)(i * 7 + 3), "byte %d read as %u", i, buf[i]);
    size_t bad = tu_list_check(list, 0x4ead, RD_NODES);
    CHECK(!bad, "list held on the reader's stack: node %zu corrupted", bad - 1);
    CHECK(lfgc_is_live(list), "list head reclaimed while its thread was in read()");
    return NULL;
}

Test(threads, blocked_in_read, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    cr_assert_eq(pipe(rd_pipe), 0);
    pthread_t t;
    start_thread(&t, rd_thread, NULL);
    cr_assert(tu_wait_at_least(&rd_ready, 1, 10), "reader did not start");
    pid_t tid = (pid_t)atomic_load(&rd_tid);
    /* Wait until the reader is really inside read() (syscall 0). */
    double end = tu_now_s() + 10;
    long sc;
    while ((sc = task_syscall(tid)) != 0 && sc != -2 && tu_now_s() < end)
        tu_sleep_ms(1);
    if (sc == -2)
        tu_sleep_ms(100);      /* /proc/.../syscall unavailable: give it time */
    else
        cr_assert_eq(sc, 0, "the reader is not blocked in read() (syscall %ld)", sc);

    GC_word gc0 = GC_get_gc_no();
    for (int i = 0; i < 100 && !atomic_load(&rd_returned); i++) {
        garbage(512 * KiB, (uint64_t)i);
        GC_gcollect();
    }
    if (atomic_load(&rd_returned)) {
        join_thread(t);
        assert_no_failures();
        cr_assert_fail("read() returned before anything was written");
    }
    cr_assert_geq(GC_get_gc_no() - gc0, 100);
    if (sc == 0) {
        /* Stopping and restarting the reader takes it through the signal
         * handlers; with SA_RESTART it must go back into read(). */
        end = tu_now_s() + 10;
        while ((sc = task_syscall(tid)) != 0 && !atomic_load(&rd_returned) && tu_now_s() < end)
            tu_sleep_ms(1);
        if (atomic_load(&rd_returned)) {
            join_thread(t);
            assert_no_failures();
            cr_assert_fail("read() returned before anything was written");
        }
        cr_assert_eq(sc, 0, "the reader is not back in read() after the collections "
                     "(syscall %ld)", sc);
    }

    unsigned char out[RD_BYTES];
    for (int i = 0; i < RD_BYTES; i++)
        out[i] = (unsigned char)(i * 7 + 3);
    cr_assert_eq(write(rd_pipe[1], out, sizeof out), (ssize_t)sizeof out);
    join_thread(t);
    close(rd_pipe[0]);
    close(rd_pipe[1]);
    assert_no_failures();
    heap_bounded("read", total0, 40 * MiB, 16 * MiB);
}

/* ================================================================== */
/* 4. Deep recursion, one heap pointer per frame, only on the stack     */

#define DR_THREADS 4
#define DR_DEPTH 12000
#define DR_COLLECTIONS 10

static atomic_long dr_at_bottom;
static atomic_long dr_finished;

static NOINLINE uint64_t dr_bottom(unsigned id)
{
    atomic_fetch_add(&dr_at_bottom, 1);
    /* Stay at the bottom until the collector thread has completed several
     * collections, with every thread's deep stack in place. */
    GC_word g0 = GC_get_gc_no();
    double end = tu_now_s() + 30;
    while (GC_get_gc_no() < g0 + DR_COLLECTIONS && tu_now_s() < end) {
        garbage(4 * KiB, id);
        tu_sleep_ms(1);
    }
    CHECK(GC_get_gc_no() >= g0 + DR_COLLECTIONS, "thread %u: collections stalled", id);
    return 0;
}

static NOINLINE uint64_t dr_descend(unsigned id, unsigned depth)
{
    /* The only reference: this frame's slot (volatile: kept in memory). */
    uint64_t *volatile obj = depth & 1 ? GC_MALLOC_ATOMIC(3 * sizeof(uint64_t))
                                       : GC_MALLOC(3 * sizeof(uint64_t));
    if (!obj) {
        FAIL("allocation failed at depth %u", depth);
        return 0;
    }
    uint64_t seed = ((uint64_t)id << 32) | depth;
    obj[0] = tu_pat(seed, 0);
    obj[1] = tu_pat(seed, 1);
    obj[2] = depth | (1ull << 63);
    if (depth % 64 == 0)
        garbage(256, seed);
    uint64_t sub = depth + 1 < DR_DEPTH ? dr_descend(id, depth + 1) : dr_bottom(id);
    uint64_t *o = obj;
    CHECK(o[0] == tu_pat(seed, 0) && o[1] == tu_pat(seed, 1) && o[2] == (depth | (1ull << 63)),
          "thread %u: object of frame %u corrupted", id, depth);
    CHECK(lfgc_is_live(o), "thread %u: object of frame %u reclaimed", id, depth);
    return sub + depth;
}

static void *dr_thread(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t sum = dr_descend(id, 0);
    uint64_t want = (uint64_t)DR_DEPTH * (DR_DEPTH - 1) / 2;
    CHECK(sum == want, "thread %u: sum of depths %llu, expected %llu", id,
          (unsigned long long)sum, (unsigned long long)want);
    atomic_fetch_add(&dr_finished, 1);
    return NULL;
}

static void *dr_collector(void *arg)
{
    (void)arg;
    uint64_t i = 0;
    /* At least 20 rounds: 40 MiB of garbage to reclaim. */
    while ((atomic_load(&dr_finished) < DR_THREADS || i < 20) && !failed()) {
        GC_gcollect();
        /* Objects of the same classes as the frames' objects, filled: a
         * frame's object reclaimed by mistake gets overwritten. */
        for (int k = 0; k < 2000; k++) {
            uint64_t *p = k & 1 ? GC_MALLOC_ATOMIC(24) : GC_MALLOC(24);
            if (p)
                memset(p, 0x5a, 24);
        }
        garbage(2 * MiB, i);
        i++;
    }
    return NULL;
}

Test(threads, deep_recursion, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    pthread_t coll, t[DR_THREADS];
    start_thread(&coll, dr_collector, NULL);
    for (unsigned i = 0; i < DR_THREADS; i++)
        start_thread(&t[i], dr_thread, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < DR_THREADS; i++)
        join_thread(t[i]);
    join_thread(coll);
    assert_no_failures();
    cr_assert_eq(atomic_load(&dr_at_bottom), DR_THREADS);
    clear_stack();
    GC_gcollect();
    heap_bounded("deep recursion", total0, 32 * MiB, 16 * MiB);
}

/* ================================================================== */
/* 5. A thread's return value, its only reference, kept until the join  */

#define RV_NODES 2000

static atomic_long rv_tid[2];

/* Exits from a few frames down; returns only if pthread_exit does. */
static NOINLINE int rv_exit_deep(struct tu_node *list, int depth)
{
    if (depth == 0) {
        if (list)
            pthread_exit(list);                 /* GC_pthread_exit */
        return 0;
    }
    int r = rv_exit_deep(list, depth - 1);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

static void *rv_thread(void *arg)
{
    int which = (int)(uintptr_t)arg;
    struct tu_node *list = tu_list_build(0x7e70 + (uint64_t)which, RV_NODES);
    garbage(256 * KiB, 1);
    atomic_store(&rv_tid[which], (long)gettid());
    if (which == 1 && rv_exit_deep(list, 10) >= 0)
        return NULL;                            /* not reached */
    return list;
}

Test(threads, return_value_survives_until_join, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    pthread_t t[2];
    for (int w = 0; w < 2; w++)
        start_thread(&t[w], rv_thread, (void *)(uintptr_t)w);
    /* Let both threads finish: from here on only the collector's record
     * of each thread holds its result. */
    for (int w = 0; w < 2; w++) {
        cr_assert(tu_wait_at_least(&rv_tid[w], 1, 10), "thread %d did not run", w);
        cr_assert(tu_wait_task_gone((pid_t)atomic_load(&rv_tid[w]), 10), "thread %d did not exit", w);
    }
    size_t total0 = GC_get_total_bytes();
    for (int i = 0; i < 40; i++) {
        garbage(1 * MiB, (uint64_t)i);
        clear_stack();
        GC_gcollect();
        tu_sleep_ms(1);
    }
    for (int w = 0; w < 2; w++) {
        struct tu_node *list = join_thread(t[w]);
        cr_assert_not_null(list, "thread %d returned NULL", w);
        cr_assert(lfgc_is_live(list), "the result of thread %d was reclaimed before the join", w);
        size_t bad = tu_list_check(list, 0x7e70 + (uint64_t)w, RV_NODES);
        cr_assert_eq(bad, 0, "the result of thread %d (%s): node %zu corrupted", w,
                     w ? "pthread_exit" : "return", bad - 1);
    }
    heap_bounded("return value", total0, 32 * MiB, 16 * MiB);
}

/* ================================================================== */
/* 6. User signal handlers firing during collections                    */

#define SG_WORKERS 3
#define SG_SIGNALS 3000

static atomic_long sg_count;           /* deliveries seen by the handler */
static atomic_long sg_sum;
static uint64_t *volatile sg_obj;      /* read by the handler */
static atomic_int sg_stop;
static pthread_t sg_workers[SG_WORKERS + 1];   /* + the spawner */
static atomic_long sg_sent;

static void sg_handler(int sig)
{
    (void)sig;
    int saved = errno;
    uint64_t *o = sg_obj;
    if (o)
        atomic_fetch_add(&sg_sum, (long)(o[0] & 0xff));
    atomic_fetch_add(&sg_count, 1);
    errno = saved;
}

static void *sg_worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t i = 0;
    while (!atomic_load(&sg_stop) && !failed()) {
        uint64_t seed = ((uint64_t)id << 40) | i;
        struct tu_node *volatile l = tu_list_build(seed, 200);
        garbage(8 * KiB, seed);
        if (id == 0 && i % 8 == 0)
            GC_gcollect();
        size_t bad = tu_list_check(l, seed, 200);
        CHECK(!bad, "worker %u: list %llu node %zu corrupted", id, (unsigned long long)i, bad - 1);
        i++;
    }
    return NULL;
}

static void *sg_child(void *arg)
{
    return tu_list_build((uint64_t)(uintptr_t)arg, 10);
}

/* Creates and joins threads while signals arrive (EINTR inside
 * GC_pthread_create and GC_pthread_join). */
static void *sg_spawner(void *arg)
{
    (void)arg;
    uint64_t i = 0;
    while (!atomic_load(&sg_stop) && !failed()) {
        pthread_t t;
        int err = pthread_create(&t, NULL, sg_child, (void *)(uintptr_t)i);
        if (err) {
            FAIL("pthread_create: %s", strerror(err));
            break;
        }
        void *ret = NULL;
        err = pthread_join(t, &ret);
        CHECK(!err, "pthread_join: %s", strerror(err));
        CHECK(ret && !tu_list_check(ret, i, 10), "spawned thread %llu: bad result",
              (unsigned long long)i);
        i++;
    }
    return NULL;
}

static void *sg_sender(void *arg)
{
    (void)arg;
    for (long n = 0; n < SG_SIGNALS && !failed(); n++) {
        long before = atomic_load(&sg_count);
        unsigned target = (unsigned)(n % (SG_WORKERS + 2));
        int err = target == SG_WORKERS + 1
                      ? (kill(getpid(), SIGUSR1) ? errno : 0)
                      : pthread_kill(sg_workers[target], SIGUSR1);
        if (err) {
            FAIL("sending signal %ld: %s", n, strerror(err));
            break;
        }
        atomic_fetch_add(&sg_sent, 1);
        /* Wait for this one to be handled, so that none is merged with
         * the next (a pending signal is not queued twice). */
        if (!tu_wait_at_least(&sg_count, before + 1, 10)) {
            FAIL("signal %ld (target %u) not handled within 10 s", n, target);
            break;
        }
    }
    return NULL;
}

Test(threads, user_signals_during_collections, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    uint64_t *o = GC_MALLOC_ATOMIC(64);
    cr_assert_not_null(o);
    for (int j = 0; j < 8; j++)
        o[j] = tu_pat(0x516, (uint64_t)j);
    sg_obj = o;
    o = NULL;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sg_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;                   /* no SA_RESTART: EINTR everywhere */
    cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);

    for (unsigned i = 0; i < SG_WORKERS; i++)
        start_thread(&sg_workers[i], sg_worker, (void *)(uintptr_t)i);
    start_thread(&sg_workers[SG_WORKERS], sg_spawner, NULL);
    pthread_t sender;
    start_thread(&sender, sg_sender, NULL);
    GC_word gc0 = GC_get_gc_no();
    join_thread(sender);
    atomic_store(&sg_stop, 1);
    for (unsigned i = 0; i <= SG_WORKERS; i++)
        join_thread(sg_workers[i]);
    signal(SIGUSR1, SIG_IGN);
    assert_no_failures();
    cr_assert_eq(atomic_load(&sg_sent), SG_SIGNALS);
    cr_assert_eq(atomic_load(&sg_count), SG_SIGNALS, "%ld signals handled, %d sent",
                 atomic_load(&sg_count), SG_SIGNALS);
    cr_assert_gt(GC_get_gc_no() - gc0, 5, "only %lu collections ran",
                 (unsigned long)(GC_get_gc_no() - gc0));
    for (int j = 0; j < 8; j++)
        cr_assert_eq(sg_obj[j], tu_pat(0x516, (uint64_t)j), "object read by the handler corrupted");
    clear_stack();
    GC_gcollect();
    heap_bounded("signals", total0, 32 * MiB, 16 * MiB);
}

/* ================================================================== */
/* 7. fork() while threads allocate                                     */

#define FK_WORKERS 3
#define FK_FORKS 8
#define FK_NODES 3000

static struct tu_node *fk_main_list;              /* a root in .bss */
static _Atomic(struct item *) fk_published[FK_WORKERS];
static atomic_int fk_stop;
static atomic_long fk_rounds[FK_WORKERS];

static void *fk_worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t i = 0;
    while (!atomic_load(&fk_stop) && !failed()) {
        uint64_t seed = ((uint64_t)(id + 1) << 40) | i;
        struct item *it = item_new(seed);
        if (!it) {
            FAIL("worker %u: allocation failed", id);
            break;
        }
        atomic_store(&fk_published[id], it);   /* complete before published */
        garbage(16 * KiB, seed);
        if (id == 0 && i % 16 == 0)
            GC_gcollect();
        const char *err = item_check(it);
        CHECK(!err, "worker %u, item %llu: %s", id, (unsigned long long)i, err);
        atomic_fetch_add(&fk_rounds[id], 1);
        i++;
    }
    return NULL;
}

static void *fk_child_thread(void *arg)
{
    return tu_list_build((uint64_t)(uintptr_t)arg, 100);
}

/* In the child: no cr_assert (it would report to the runner as the
 * test); an exit code per kind of failure. */
static NOINLINE int fk_child(void)
{
    alarm(20);                         /* a deadlock kills the child */
    if (tu_list_check(fk_main_list, 0xf0f0, FK_NODES))
        return 10;
    for (unsigned w = 0; w < FK_WORKERS; w++) {
        struct item *it = atomic_load(&fk_published[w]);
        if (it && item_check(it))
            return 11;
    }
    struct tu_node *mine = tu_list_build(0xc41d, 1000);
    if (!mine)
        return 12;
    for (int i = 0; i < 10; i++) {
        garbage(512 * KiB, (uint64_t)i);
        GC_gcollect();
    }
    if (tu_list_check(mine, 0xc41d, 1000))
        return 13;
    if (tu_list_check(fk_main_list, 0xf0f0, FK_NODES))
        return 14;
    /* Threads work in the child too. */
    pthread_t t;
    if (pthread_create(&t, NULL, fk_child_thread, (void *)(uintptr_t)0xabc))
        return 15;
    void *ret = NULL;
    if (pthread_join(t, &ret) || !ret || tu_list_check(ret, 0xabc, 100))
        return 16;
    GC_gcollect();
    if (tu_list_check(mine, 0xc41d, 1000) || tu_list_check(fk_main_list, 0xf0f0, FK_NODES))
        return 17;
    if (heap_size() > 64 * MiB)
        return 18;
    return 0;
}

Test(threads, fork_with_threads_running, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    fk_main_list = tu_list_build(0xf0f0, FK_NODES);
    cr_assert_not_null(fk_main_list);
    pthread_t t[FK_WORKERS];
    for (unsigned i = 0; i < FK_WORKERS; i++)
        start_thread(&t[i], fk_worker, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < FK_WORKERS; i++)
        cr_assert(tu_wait_at_least(&fk_rounds[i], 2, 10), "worker %u does not run", i);

    for (int f = 0; f < FK_FORKS; f++) {
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
        if (pid == 0)
            _exit(fk_child());
        int status = 0;
        pid_t w;
        while ((w = waitpid(pid, &status, 0)) == -1 && errno == EINTR)
            ;
        cr_assert_eq(w, pid);
        cr_assert(WIFEXITED(status), "fork %d: the child died of signal %d%s", f,
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0,
                  WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? " (hung)" : "");
        cr_assert_eq(WEXITSTATUS(status), 0, "fork %d: the child failed with code %d", f,
                     WEXITSTATUS(status));
        /* The parent carries on: its threads allocate between forks. */
        long r0 = atomic_load(&fk_rounds[0]);
        cr_assert(tu_wait_at_least(&fk_rounds[0], r0 + 2, 10), "worker 0 stalled after fork %d", f);
    }
    /* The forks take as long as the machine makes them: let the workers
     * go on until they have allocated enough for the heap's bound below to
     * say something about reclaiming (a slow or loaded machine otherwise
     * ends the test short of it). */
    double until = tu_now_s() + 30;
    while (GC_get_total_bytes() - total0 < 64 * MiB && tu_now_s() < until && !failed())
        tu_sleep_ms(5);
    atomic_store(&fk_stop, 1);
    for (unsigned i = 0; i < FK_WORKERS; i++)
        join_thread(t[i]);
    assert_no_failures();
    GC_gcollect();
    cr_assert_eq(tu_list_check(fk_main_list, 0xf0f0, FK_NODES), 0, "parent's list corrupted");
    heap_bounded("fork", total0, 64 * MiB, 24 * MiB);
}

/* ================================================================== */
/* 8. Threads not created by GC_pthread_create                          */

#define RG_NODES 1000

static atomic_long rg_phase;           /* handshake with the test */
static atomic_long rg_collected;

/* Runs in a thread made by the real pthread_create. */
static NOINLINE void rg_body(const struct GC_stack_base *given)
{
    volatile int local = 0;
    CHECK(!GC_thread_is_registered(), "thread registered before GC_register_my_thread");
    struct GC_stack_base sb = { 0 };
    if (given) {
        sb = *given;
    } else {
        CHECK(GC_get_stack_base(&sb) == GC_SUCCESS, "GC_get_stack_base failed");
    }
    CHECK((uintptr_t)sb.mem_base > (uintptr_t)&local &&
          (uintptr_t)sb.mem_base - (uintptr_t)&local < 64 * MiB,
          "stack base %p is not above this frame (%p)", sb.mem_base, (void *)&local);
    int rc = GC_register_my_thread(&sb);
    CHECK(rc == GC_SUCCESS, "GC_register_my_thread returned %d", rc);
    rc = GC_register_my_thread(&sb);
    CHECK(rc == GC_DUPLICATE, "second GC_register_my_thread returned %d, not GC_DUPLICATE", rc);
    CHECK(GC_thread_is_registered() == 1, "GC_thread_is_registered() after registering");

    struct tu_node *volatile list = tu_list_build(0x5e9, RG_NODES);     /* this stack only */
    CHECK(list != NULL, "allocation failed");
    atomic_store(&rg_phase, 1);
    /* The test collects (and allocates) while we wait. */
    if (!tu_wait_at_least(&rg_collected, 1, 30))
        FAIL("the test did not collect");
    size_t bad = tu_list_check(list, 0x5e9, RG_NODES);
    CHECK(!bad, "list on the registered thread's stack: node %zu corrupted", bad - 1);
    CHECK(lfgc_is_live(list), "list on the registered thread's stack reclaimed");

    rc = GC_unregister_my_thread();
    CHECK(rc == GC_SUCCESS, "GC_unregister_my_thread returned %d", rc);
    CHECK(GC_thread_is_registered() == 0, "GC_thread_is_registered() after unregistering");
    rc = GC_unregister_my_thread();
    CHECK(rc == GC_NOT_FOUND, "second GC_unregister_my_thread returned %d", rc);

    /* Unknown to the collector again: it must not try to stop us.  With
     * the suspend signal blocked, a collection that did would hang. */
    sigset_t s, old;
    sigemptyset(&s);
    sigaddset(&s, GC_get_suspend_signal());
    tu_real_pthread_sigmask(SIG_BLOCK, &s, &old);
    atomic_store(&rg_phase, 2);
    if (!tu_wait_at_least(&rg_collected, 2, 30))
        FAIL("the test did not collect after the unregistration");
    tu_real_pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void *rg_thread(void *arg)
{
    (void)arg;
    rg_body(NULL);
    return NULL;
}

static void *rg_with_base(struct GC_stack_base *sb, void *arg)
{
    (void)arg;
    rg_body(sb);
    return NULL;
}

static void *rg_thread_call_with_base(void *arg)
{
    return GC_call_with_stack_base(rg_with_base, arg);
}

typedef int (*rg_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*rg_join_fn)(pthread_t, void **);

static void rg_run_with(rg_create_fn create, rg_join_fn join, void *(*fn)(void *))
{
    atomic_store(&rg_phase, 0);
    atomic_store(&rg_collected, 0);
    pthread_t t;
    cr_assert_eq(create(&t, NULL, fn, NULL), 0);
    cr_assert(tu_wait_at_least(&rg_phase, 1, 10) || failed(), "thread did not register");
    for (int i = 0; i < 20 && !failed(); i++) {
        garbage(1 * MiB, (uint64_t)i);
        GC_gcollect();
    }
    atomic_store(&rg_collected, 1);
    cr_assert(tu_wait_at_least(&rg_phase, 2, 10) || failed(), "thread did not unregister");
    for (int i = 0; i < 5 && !failed(); i++)
        GC_gcollect();
    atomic_store(&rg_collected, 2);
    cr_assert_eq(join(t, NULL), 0);
    assert_no_failures();
}

/* With a thread the collector does not know about until it registers. */
static void rg_run(void *(*fn)(void *))
{
    rg_run_with(tu_real_pthread_create, tu_real_pthread_join, fn);
}

Test(threads, register_foreign_thread, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    GC_allow_register_threads();
    cr_assert_eq(GC_thread_is_registered(), 1, "the main thread is not registered");
    cr_assert_eq(GC_register_my_thread(NULL), GC_DUPLICATE);
    rg_run(rg_thread);
    rg_run(rg_thread_call_with_base);
    clear_stack();
    GC_gcollect();
    heap_bounded("register", total0, 32 * MiB, 8 * MiB);
}

/* A thread of the real pthread_create that just allocates: registered by
 * its first allocation, unregistered when it exits. */
static atomic_long au_phase;

static void *au_thread(void *arg)
{
    (void)arg;
    struct tu_node *volatile list = tu_list_build(0xa070, RG_NODES);
    atomic_store(&au_phase, 1);
    if (!tu_wait_at_least(&au_phase, 2, 30))
        FAIL("the test did not collect");
    CHECK(GC_thread_is_registered(), "not registered by its allocation");
    size_t bad = tu_list_check(list, 0xa070, RG_NODES);
    CHECK(!bad, "list on an implicitly registered thread's stack: node %zu corrupted", bad - 1);
    return NULL;
}

Test(threads, implicitly_registered_thread, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    GC_allow_register_threads();
    for (int round = 0; round < 3; round++) {
        atomic_store(&au_phase, 0);
        pthread_t t;
        cr_assert_eq(tu_real_pthread_create(&t, NULL, au_thread, NULL), 0);
        cr_assert(tu_wait_at_least(&au_phase, 1, 10), "thread did not start");
        for (int i = 0; i < 10; i++) {
            garbage(1 * MiB, (uint64_t)i);
            GC_gcollect();
        }
        atomic_store(&au_phase, 2);
        cr_assert_eq(tu_real_pthread_join(t, NULL), 0);
        assert_no_failures();
        /* The exited thread must be gone from the registry: collections
         * still complete. */
        for (int i = 0; i < 5; i++)
            GC_gcollect();
    }
    heap_bounded("implicit registration", total0, 24 * MiB, 16 * MiB);
}

/* ================================================================== */
/* 9. GC_do_blocking and GC_call_with_gc_active                         */

static pthread_mutex_t bk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bk_cond = PTHREAD_COND_INITIALIZER;
static atomic_long bk_state;
/* 0 start, 1 thread blocking, 2 test collected: leave blocking,
 * 3 thread active inside, 4 test collected: finish. */

static bool bk_wait_for(long want, double secs)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)secs;
    pthread_mutex_lock(&bk_lock);
    while (atomic_load(&bk_state) < want) {
        if (pthread_cond_timedwait(&bk_cond, &bk_lock, &deadline) == ETIMEDOUT)
            break;
    }
    bool ok = atomic_load(&bk_state) >= want;
    pthread_mutex_unlock(&bk_lock);
    return ok;
}

static void bk_set(long s)
{
    pthread_mutex_lock(&bk_lock);
    atomic_store(&bk_state, s);
    pthread_cond_broadcast(&bk_cond);
    pthread_mutex_unlock(&bk_lock);
}

static void *bk_active(void *arg)
{
    (void)arg;
    struct tu_node *volatile list = tu_list_build(0xac7, 1000);
    CHECK(list != NULL, "allocation inside GC_call_with_gc_active failed");
    bk_set(3);
    if (!bk_wait_for(4, 30))
        FAIL("the test did not collect while the thread was active");
    size_t bad = tu_list_check(list, 0xac7, 1000);
    CHECK(!bad, "list allocated in GC_call_with_gc_active: node %zu corrupted", bad - 1);
    CHECK(lfgc_is_live(list), "list allocated in GC_call_with_gc_active reclaimed");
    return list;
}

static void *bk_blocked(void *arg)
{
    (void)arg;
    /* The collector must not stop a thread inside GC_do_blocking: block
     * the suspend signal, so that collections would hang if it tried. */
    sigset_t s, old;
    sigemptyset(&s);
    sigaddset(&s, GC_get_suspend_signal());
    tu_real_pthread_sigmask(SIG_BLOCK, &s, &old);
    bk_set(1);
    bool ok = bk_wait_for(2, 30);
    tu_real_pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!ok) {
        FAIL("collections did not complete while a thread was in GC_do_blocking");
        return NULL;
    }
    return GC_call_with_gc_active(bk_active, NULL);
}

static NOINLINE void *bk_thread(void *arg)
{
    (void)arg;
    /* Held in the frame that calls GC_do_blocking: still scanned. */
    struct tu_node *volatile before = tu_list_build(0xbef, 1000);
    struct tu_node *inner = GC_do_blocking(bk_blocked, NULL);
    size_t bad = tu_list_check(before, 0xbef, 1000);
    CHECK(!bad, "list held above GC_do_blocking: node %zu corrupted", bad - 1);
    bad = inner ? tu_list_check(inner, 0xac7, 1000) : 1;
    CHECK(!bad, "list returned through GC_do_blocking: node %zu corrupted", bad - 1);
    return NULL;
}

Test(threads, do_blocking_and_call_with_gc_active, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    pthread_t t;
    start_thread(&t, bk_thread, NULL);
    cr_assert(bk_wait_for(1, 10), "thread did not enter GC_do_blocking");
    GC_word g0 = GC_get_gc_no();
    for (int i = 0; i < 20; i++) {
        garbage(1 * MiB, (uint64_t)i);
        GC_gcollect();
    }
    cr_assert_geq(GC_get_gc_no(), g0 + 20, "collections did not advance: %lu -> %lu",
                  (unsigned long)g0, (unsigned long)GC_get_gc_no());
    bk_set(2);
    cr_assert(bk_wait_for(3, 10) || failed(), "thread did not call GC_call_with_gc_active");
    g0 = GC_get_gc_no();
    for (int i = 0; i < 20 && !failed(); i++) {
        garbage(1 * MiB, (uint64_t)(i + 100));
        GC_gcollect();
    }
    cr_assert_geq(GC_get_gc_no(), g0 + 20);
    bk_set(4);
    join_thread(t);
    assert_no_failures();
    heap_bounded("do_blocking", total0, 32 * MiB, 16 * MiB);
}

/* ================================================================== */
/* 10. Parallel marking: GC_MARKERS=1 and GC_MARKERS=2                  */

struct tnode {
    struct tnode *left, *right;
    uint64_t key;
    uint64_t depth;
};

static struct tnode *tree_build(uint64_t key, unsigned depth)
{
    struct tnode *t = GC_MALLOC(sizeof *t);
    if (!t)
        return NULL;
    t->key = tu_pat(key, 0);
    t->depth = depth;
    if (depth > 0) {
        t->left = tree_build(2 * key, depth - 1);
        t->right = tree_build(2 * key + 1, depth - 1);
    }
    return t;
}

/* Number of intact nodes; stops counting at a bad one. */
static size_t tree_check(const struct tnode *t, uint64_t key, unsigned depth)
{
    if (!t || t->key != tu_pat(key, 0) || t->depth != depth)
        return 0;
    if (depth == 0)
        return t->left || t->right ? 0 : 1;
    return 1 + tree_check(t->left, 2 * key, depth - 1) + tree_check(t->right, 2 * key + 1, depth - 1);
}

#define MK_TREE_DEPTH 16
#define MK_LISTS 4096
#define MK_LIST_LEN 24
#define MK_CHAIN 100000

static struct tnode *mk_tree;
static struct tu_node **mk_lists;         /* a 32 KiB array of lists */
static struct tu_node *mk_chain;          /* one long list */
static atomic_int mk_stop;

static void *mk_mutator(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t i = 0;
    while (!atomic_load(&mk_stop) && !failed()) {
        uint64_t seed = ((uint64_t)(id + 1) << 48) | i;
        struct tnode *volatile t = tree_build(seed, 8);
        garbage(32 * KiB, seed);
        size_t n = tree_check(t, seed, 8);
        CHECK(n == 511, "mutator %u: tree %llu has %zu intact nodes", id,
              (unsigned long long)i, n);
        i++;
    }
    return NULL;
}

static void mk_verify(const char *when)
{
    size_t n = tree_check(mk_tree, 1, MK_TREE_DEPTH);
    cr_assert_eq(n, ((size_t)2 << MK_TREE_DEPTH) - 1, "%s: tree has %zu intact nodes", when, n);
    for (size_t i = 0; i < MK_LISTS; i++) {
        size_t bad = tu_list_check(mk_lists[i], 0x1157 + i, MK_LIST_LEN);
        cr_assert_eq(bad, 0, "%s: list %zu node %zu corrupted", when, i, bad - 1);
    }
    size_t bad = tu_list_check(mk_chain, 0xc4a1, MK_CHAIN);
    cr_assert_eq(bad, 0, "%s: chain node %zu corrupted", when, bad - 1);
}

static void markers_run(const char *markers, const char *stack_max)
{
    reset_failures();
    /* The environment is read by GC_init: this process must not have
     * initialised the collector yet (Criterion runs each test in a new
     * process). */
    cr_assert(!GC_is_init_called(),
              "the collector is already initialised; run without --no-fork");
    setenv("GC_MARKERS", markers, 1);
    if (stack_max)
        setenv("LFGC_MARK_STACK_MAX", stack_max, 1);
    int tasks0 = tu_count_tasks();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();

    mk_tree = tree_build(1, MK_TREE_DEPTH);
    mk_lists = GC_MALLOC(MK_LISTS * sizeof *mk_lists);
    cr_assert_not_null(mk_lists);
    for (size_t i = 0; i < MK_LISTS; i++)
        mk_lists[i] = tu_list_build(0x1157 + i, MK_LIST_LEN);
    mk_chain = tu_list_build(0xc4a1, MK_CHAIN);
    mk_verify("built");
    GC_gcollect();
    int helpers = tu_count_tasks() - tasks0;
    int want = atoi(markers) - 1;
    cr_assert_eq(helpers, want, "GC_MARKERS=%s: %d marker threads started, expected %d",
                 markers, helpers, want);

    pthread_t t[2];
    for (unsigned i = 0; i < 2; i++)
        start_thread(&t[i], mk_mutator, (void *)(uintptr_t)i);
    for (int round = 0; round < 12 && !failed(); round++) {
        garbage(2 * MiB, (uint64_t)round);
        GC_gcollect();
        mk_verify("after a collection");
    }
    atomic_store(&mk_stop, 1);
    for (unsigned i = 0; i < 2; i++)
        join_thread(t[i]);
    assert_no_failures();
    clear_stack();
    GC_gcollect();
    mk_verify("at the end");
    heap_bounded("markers", total0, 48 * MiB, 64 * MiB);
    cr_assert_lt(live_bytes(), 32 * MiB, "%llu bytes live", (unsigned long long)live_bytes());
}

Test(threads, parallel_markers_1, .timeout = 60)
{
    markers_run("1", NULL);
}

Test(threads, parallel_markers_2, .timeout = 60)
{
    markers_run("2", NULL);
}

/* Two markers and a mark stack too small for the structure: work sharing
 * and overflow recovery together. */
Test(threads, parallel_markers_2_stack_overflow, .timeout = 90)
{
    markers_run("2", "256");
    struct lfgc_stats st;
    lfgc_get_stats(&st);
    cr_assert_gt(st.mark_stack_overflows, 0,
                 "LFGC_MARK_STACK_MAX=256 never overflowed the mark stack");
}

/* ================================================================== */
/* 11. An exiting thread's cached free slots                            */

#define CE_THREADS 16
#define CE_PER_THREAD 3
#define CE_SIZE 40               /* class 48, with the extra byte */
#define CE_MAIN 30000

struct ce_obj {
    uint64_t tag;
    uint64_t words[4];
};

#define CE_KEEP 20000

static void *ce_objs[CE_MAIN];             /* a root: keeps them all alive */
static void *ce_keep[CE_KEEP / 3 + 1];     /* survivors of a first generation */
static void *ce_thread_objs[CE_THREADS * 2][CE_PER_THREAD * 2];
static atomic_int ce_stop;

static uint64_t ce_tag(uint64_t owner, uint64_t i)
{
    return tu_pat(owner, i);
}

static void ce_fill(void *p, uint64_t tag)
{
    uint64_t *w = p;
    w[0] = tag;
    for (int j = 1; j < 5; j++)
        w[j] = tu_mix(tag + (uint64_t)j) | (1ull << 63);
}

static bool ce_ok(const void *p, uint64_t tag)
{
    const uint64_t *w = p;
    if (w[0] != tag)
        return false;
    for (int j = 1; j < 5; j++)
        if (w[j] != (tu_mix(tag + (uint64_t)j) | (1ull << 63)))
            return false;
    return true;
}

/* A few objects of each kind, then exit with the rest of the cached
 * batch unused. */
static void *ce_thread(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (unsigned k = 0; k < CE_PER_THREAD * 2; k++) {
        void *p = k & 1 ? GC_MALLOC_ATOMIC(CE_SIZE) : GC_MALLOC(CE_SIZE);
        if (!p) {
            FAIL("thread %u: allocation failed", id);
            return NULL;
        }
        ce_fill(p, ce_tag(1000 + id, k));
        ce_thread_objs[id][k] = p;
    }
    return NULL;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void *ce_collector(void *arg)
{
    (void)arg;
    while (!atomic_load(&ce_stop)) {
        GC_gcollect();
        tu_sleep_ms(1);
    }
    return NULL;
}

Test(threads, exiting_thread_returns_cached_slots, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    /* Spans of the class with a third of their slots live: the threads'
     * refills then sweep partly live spans, and exit in the middle of one. */
    for (size_t i = 0; i < CE_KEEP; i++) {
        void *p = i & 1 ? GC_MALLOC_ATOMIC(CE_SIZE) : GC_MALLOC(CE_SIZE);
        cr_assert_not_null(p);
        ce_fill(p, ce_tag(3, i));
        if (i % 3 == 0)
            ce_keep[i / 3] = p;
    }
    clear_stack();
    GC_gcollect();
    /* Phase 1: threads come and go one after another. */
    for (unsigned i = 0; i < CE_THREADS; i++) {
        pthread_t t;
        start_thread(&t, ce_thread, (void *)(uintptr_t)i);
        join_thread(t);
    }
    /* Phase 2: threads exit while main allocates the same class and
     * another thread collects. */
    pthread_t coll;
    start_thread(&coll, ce_collector, NULL);
    pthread_t t2[CE_THREADS];
    unsigned next = 0;
    for (size_t i = 0; i < CE_MAIN; i++) {
        if (i % (CE_MAIN / (CE_THREADS + 1)) == 100 && next < CE_THREADS) {
            start_thread(&t2[next], ce_thread, (void *)(uintptr_t)(CE_THREADS + next));
            next++;
        }
        void *p = i & 1 ? GC_MALLOC_ATOMIC(CE_SIZE) : GC_MALLOC(CE_SIZE);
        cr_assert_not_null(p);
        ce_fill(p, ce_tag(7, i));
        ce_objs[i] = p;
    }
    for (unsigned k = 0; k < next; k++)
        join_thread(t2[k]);
    atomic_store(&ce_stop, 1);
    join_thread(coll);
    assert_no_failures();
    cr_assert_eq(next, CE_THREADS);

    /* More of the same class after every thread is gone. */
    GC_gcollect();
    size_t nthr = (size_t)CE_THREADS * 2 * CE_PER_THREAD * 2;
    size_t total = CE_MAIN + nthr + CE_KEEP / 3 + 1;
    uintptr_t *addrs = malloc(total * sizeof *addrs);    /* not scanned: copies */
    cr_assert_not_null(addrs);
    size_t n = 0;
    for (size_t i = 0; i < CE_MAIN; i++) {
        cr_assert(ce_ok(ce_objs[i], ce_tag(7, i)), "main's object %zu overwritten", i);
        cr_assert(lfgc_is_live(ce_objs[i]), "main's object %zu not live", i);
        addrs[n++] = (uintptr_t)ce_objs[i];
    }
    for (unsigned id = 0; id < CE_THREADS * 2; id++)
        for (unsigned k = 0; k < CE_PER_THREAD * 2; k++) {
            void *p = ce_thread_objs[id][k];
            cr_assert_not_null(p);
            cr_assert(ce_ok(p, ce_tag(1000 + id, k)), "thread %u's object %u overwritten", id, k);
            addrs[n++] = (uintptr_t)p;
        }
    for (size_t i = 0; i < CE_KEEP; i += 3) {
        cr_assert(ce_ok(ce_keep[i / 3], ce_tag(3, i)), "first-generation object %zu overwritten", i);
        addrs[n++] = (uintptr_t)ce_keep[i / 3];
    }
    qsort(addrs, n, sizeof *addrs, cmp_ptr);
    for (size_t i = 1; i < n; i++)
        cr_assert_neq(addrs[i], addrs[i - 1], "address %#lx handed out twice",
                      (unsigned long)addrs[i]);
    /* Slots 48 bytes apart at least: no overlap either. */
    for (size_t i = 1; i < n; i++)
        cr_assert_geq(addrs[i] - addrs[i - 1], CE_SIZE, "objects %#lx and %#lx overlap",
                      (unsigned long)addrs[i - 1], (unsigned long)addrs[i]);
    free(addrs);

    /* A final round: allocate again, everything stays intact. */
    for (size_t i = 0; i < 16 * MiB / 48; i++) {
        void *p = i & 1 ? GC_MALLOC_ATOMIC(CE_SIZE) : GC_MALLOC(CE_SIZE);
        cr_assert_not_null(p);
        memset(p, 0xee, CE_SIZE);
    }
    GC_gcollect();
    for (size_t i = 0; i < CE_MAIN; i++)
        cr_assert(ce_ok(ce_objs[i], ce_tag(7, i)), "main's object %zu overwritten at the end", i);
    for (unsigned id = 0; id < CE_THREADS * 2; id++)
        for (unsigned k = 0; k < CE_PER_THREAD * 2; k++)
            cr_assert(ce_ok(ce_thread_objs[id][k], ce_tag(1000 + id, k)),
                      "thread %u's object %u overwritten at the end", id, k);
    for (size_t i = 0; i < CE_KEEP; i += 3)
        cr_assert(ce_ok(ce_keep[i / 3], ce_tag(3, i)),
                  "first-generation object %zu overwritten at the end", i);
    heap_bounded("exiting thread", total0, 16 * MiB, 8 * MiB);
}

/* ================================================================== */
/* 12. Signals used by the collector                                    */

Test(threads, default_signals)
{
    GC_INIT();
    cr_assert_eq(GC_get_suspend_signal(), SIGPWR);
    cr_assert_eq(GC_get_thr_restart_signal(), SIGXCPU);
    /* Settable only before GC_init: ignored now. */
    GC_set_suspend_signal(SIGUSR2);
    GC_set_thr_restart_signal(SIGUSR2);
    cr_assert_eq(GC_get_suspend_signal(), SIGPWR);
    cr_assert_eq(GC_get_thr_restart_signal(), SIGXCPU);
}

/* pthread_sigmask (GC_pthread_sigmask) never blocks the suspend signal:
 * a thread that blocks "everything" can still be stopped. */
static atomic_long sm_phase;
static atomic_long sm_allocated;

static void *sm_thread(void *arg)
{
    (void)arg;
    sigset_t all, cur;
    sigfillset(&all);
    CHECK(pthread_sigmask(SIG_BLOCK, &all, NULL) == 0, "pthread_sigmask failed");
    tu_real_pthread_sigmask(SIG_BLOCK, NULL, &cur);
    CHECK(!sigismember(&cur, GC_get_suspend_signal()), "the suspend signal got blocked");
    CHECK(sigismember(&cur, SIGUSR1), "SIGUSR1 was not blocked");
    struct tu_node *volatile list = tu_list_build(0x516a, 500);
    atomic_store(&sm_phase, 1);
    /* Busy, allocating, while the test collects. */
    uint64_t i = 0;
    while (atomic_load(&sm_phase) < 2 && !failed()) {
        garbage(4 * KiB, i++);
        atomic_fetch_add(&sm_allocated, 4 * KiB);
        size_t bad = tu_list_check(list, 0x516a, 500);
        if (bad) {
            FAIL("node %zu corrupted", bad - 1);
            break;
        }
    }
    return NULL;
}

Test(threads, pthread_sigmask_keeps_suspend_signal, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    pthread_t t;
    start_thread(&t, sm_thread, NULL);
    cr_assert(tu_wait_at_least(&sm_phase, 1, 10));
    GC_word g0 = GC_get_gc_no();
    for (int i = 0; i < 30; i++)
        GC_gcollect();
    cr_assert_geq(GC_get_gc_no(), g0 + 30);
    /* Let it allocate a while longer. */
    cr_assert(tu_wait_at_least(&sm_allocated, 24 * MiB, 30) || failed());
    atomic_store(&sm_phase, 2);
    join_thread(t);
    assert_no_failures();
    heap_bounded("sigmask", total0, 24 * MiB, 16 * MiB);
}

/* ================================================================== */
/* Detached and cancelled threads                                       */

#define DT_THREADS 400

static atomic_long dt_finished;

static void *dt_thread(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    struct tu_node *volatile l = tu_list_build(seed, 50);
    garbage(64 * KiB, seed);
    CHECK(!tu_list_check(l, seed, 50), "detached thread %llu: list corrupted",
          (unsigned long long)seed);
    atomic_fetch_add(&dt_finished, 1);
    return l;
}

static void *cn_thread(void *arg)
{
    int fd = (int)(intptr_t)arg;
    struct tu_node *volatile l = tu_list_build(0xca7, 100);
    (void)l;
    char c;
    for (;;)
        (void)!read(fd, &c, 1);        /* a cancellation point, never returns data */
    return NULL;
}

Test(threads, detached_and_cancelled_threads, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (unsigned i = 0; i < DT_THREADS; i++) {
        pthread_t t;
        cr_assert_eq(pthread_create(&t, i & 1 ? &attr : NULL, dt_thread,
                                    (void *)(uintptr_t)(i + 1)), 0);
        if (!(i & 1))
            cr_assert_eq(pthread_detach(t), 0);     /* GC_pthread_detach */
        if (i % 20 == 0)
            GC_gcollect();
    }
    pthread_attr_destroy(&attr);
    cr_assert(tu_wait_at_least(&dt_finished, DT_THREADS, 30), "only %ld detached threads finished",
              atomic_load(&dt_finished));

    /* Cancelled while blocked in read(). */
    int p[2];
    cr_assert_eq(pipe(p), 0);
    for (int round = 0; round < 20; round++) {
        pthread_t t;
        start_thread(&t, cn_thread, (void *)(intptr_t)p[0]);
        tu_sleep_ms(2);
        GC_gcollect();
        cr_assert_eq(pthread_cancel(t), 0);         /* GC_pthread_cancel */
        void *ret = join_thread(t);
        cr_assert_eq(ret, PTHREAD_CANCELED);
        GC_gcollect();
    }
    close(p[0]);
    close(p[1]);
    assert_no_failures();
    tu_sleep_ms(20);               /* let the last detached threads leave */
    for (int i = 0; i < 3; i++)
        GC_gcollect();
    heap_bounded("detached", total0, 24 * MiB, 16 * MiB);
}

/* A thread blocked in read() (asynchronous cancellation type there) and
 * stopped in the suspend handler, where cancellation is off, when it is
 * cancelled: the request takes effect once the handler turns cancellation
 * back on, and the join must still return PTHREAD_CANCELED.  The thread
 * before it returns a value of its own: glibc reuses its cached descriptor,
 * and a result that was never stored reads as that value.  A collection
 * stops the thread the same way, briefly; GC_suspend_thread holds it
 * there so that the cancellation surely comes inside the handler. */

#define CS_ROUNDS 10

static atomic_long cs_tid;

static void *cs_previous(void *arg)
{
    return arg;
}

static void *cs_reader(void *arg)
{
    int fd = (int)(intptr_t)arg;
    atomic_store(&cs_tid, (long)gettid());
    char c;
    for (;;)
        (void)!read(fd, &c, 1);
    return NULL;
}

Test(threads, cancelled_while_stopped_joins_canceled, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    int p[2];
    cr_assert_eq(pipe(p), 0);
    int in_read = 0;
    for (int round = 0; round < CS_ROUNDS; round++) {
        pthread_t prev;
        start_thread(&prev, cs_previous, (void *)(uintptr_t)0x5eed0);
        cr_assert_eq(join_thread(prev), (void *)(uintptr_t)0x5eed0);
        atomic_store(&cs_tid, 0);
        pthread_t t;
        start_thread(&t, cs_reader, (void *)(intptr_t)p[0]);
        double end = tu_now_s() + 10;
        while (!atomic_load(&cs_tid) && tu_now_s() < end)
            tu_sleep_ms(1);
        cr_assert(atomic_load(&cs_tid), "the reader did not start");
        long sc;
        while ((sc = task_syscall((pid_t)atomic_load(&cs_tid))) != 0 && sc != -2 &&
               tu_now_s() < end)
            tu_sleep_ms(1);
        if (sc == -2)
            tu_sleep_ms(20);       /* /proc/.../syscall unavailable: give it time */
        else
            in_read++;
        GC_suspend_thread((GC_SUSPEND_THREAD_ID)t);
        cr_assert_eq(pthread_cancel(t), 0);
        tu_sleep_ms(5);            /* the cancellation signal finds it stopped */
        GC_gcollect();          /* leaves it stopped */
        GC_resume_thread((GC_SUSPEND_THREAD_ID)t);
        void *ret = join_thread(t);
        cr_assert_eq(ret, PTHREAD_CANCELED, "round %d: the join returned %p, not PTHREAD_CANCELED",
                     round, ret);
    }
    close(p[0]);
    close(p[1]);
    assert_no_failures();
    cr_log_info("cancelled while stopped: %d of %d rounds seen inside read()", in_read,
                CS_ROUNDS);
}

/* ================================================================== */
/* GC_call_with_alloc_lock: mutual exclusion with allocation and collection */

#define AL_THREADS 4
#define AL_CALLS 2000

static unsigned long al_counter;       /* only touched under the lock */
static atomic_int al_stop;

static void *al_fn(void *arg)
{
    (void)arg;
    GC_word g = GC_get_gc_no();
    unsigned long c = al_counter;
    for (volatile int i = 0; i < 200; i++)
        ;
    al_counter = c + 1;
    CHECK(GC_get_gc_no() == g, "a collection ran inside GC_call_with_alloc_lock");
    return (void *)(uintptr_t)(c + 1);
}

static void *al_thread(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < AL_CALLS && !failed(); i++) {
        GC_call_with_alloc_lock(al_fn, NULL);
        if (i % 16 == 0)
            garbage(16 * KiB, ((uint64_t)id << 32) | i);
    }
    return NULL;
}

static void *al_collector(void *arg)
{
    (void)arg;
    while (!atomic_load(&al_stop))
        GC_gcollect();
    return NULL;
}

Test(threads, call_with_alloc_lock, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    size_t total0 = GC_get_total_bytes();
    pthread_t coll, t[AL_THREADS];
    start_thread(&coll, al_collector, NULL);
    for (unsigned i = 0; i < AL_THREADS; i++)
        start_thread(&t[i], al_thread, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < AL_THREADS; i++)
        join_thread(t[i]);
    atomic_store(&al_stop, 1);
    join_thread(coll);
    assert_no_failures();
    cr_assert_eq(al_counter, (unsigned long)AL_THREADS * AL_CALLS,
                 "counter %lu: calls were not mutually exclusive", al_counter);
    heap_bounded("alloc lock", total0, 8 * MiB, 16 * MiB);
}

/* ------------------------------------------------------------------ */
/* The rest of bdwgc's thread interface                                 */

/* gc.h under GC_THREADS names the thread model as bdwgc's does: programs
 * written for bdwgc select their pthread code with these. */
#if !defined(GC_PTHREADS) || !defined(GC_LINUX_THREADS)
# error "GC_THREADS must define GC_PTHREADS and GC_LINUX_THREADS"
#endif

static atomic_int warnings;
static char last_warning[256];

static void count_warning(char *msg, GC_word arg)
{
    atomic_fetch_add(&warnings, 1);
    snprintf(last_warning, sizeof last_warning, msg, (void *)arg);
}

static atomic_long fr_phase;

static void *fr_register(void *arg)
{
    (void)arg;
    int r = GC_register_my_thread(NULL);
    CHECK(r == GC_SUCCESS, "GC_register_my_thread: %d", r);
    struct tu_node *volatile list = tu_list_build(0xf00d, 1000);
    CHECK(!tu_list_check(list, 0xf00d, 1000), "list of a registered thread corrupted");
    CHECK(GC_unregister_my_thread() == GC_SUCCESS, "GC_unregister_my_thread failed");
    return NULL;
}

static void *fr_nothing(void *arg)
{
    atomic_store(&fr_phase, 1);
    return arg;
}

/* bdwgc lets threads register once the program created one with
 * GC_pthread_create (threadkey-style key destructors rely on it); without
 * that, or GC_allow_register_threads, lfgc warns, but only once. */
Test(threads, registering_without_allow_warns_once, .timeout = 60)
{
    reset_failures();
    GC_set_warn_proc(count_warning);
    GC_INIT();
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        cr_assert_eq(tu_real_pthread_create(&t, NULL, fr_register, NULL), 0);
        cr_assert_eq(tu_real_pthread_join(t, NULL), 0);
    }
    assert_no_failures();
    cr_assert_eq(atomic_load(&warnings), 1, "%d warnings (last: %s)",
                 atomic_load(&warnings), last_warning);
    cr_assert(strstr(last_warning, "GC_allow_register_threads"), "warning: %s", last_warning);
}

Test(threads, registering_after_gc_pthread_create_is_silent, .timeout = 60)
{
    reset_failures();
    GC_set_warn_proc(count_warning);
    GC_INIT();
    pthread_t t;
    start_thread(&t, fr_nothing, NULL);
    join_thread(t);
    cr_assert_eq(atomic_load(&fr_phase), 1);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tu_real_pthread_create(&t, NULL, fr_register, NULL), 0);
        cr_assert_eq(tu_real_pthread_join(t, NULL), 0);
    }
    assert_no_failures();
    cr_assert_eq(atomic_load(&warnings), 0, "warned: %s", last_warning);
}

Test(threads, find_leak_set_and_read_quietly)
{
    GC_set_warn_proc(count_warning);
    GC_INIT();
    cr_assert_eq(GC_get_find_leak(), 0);
    GC_set_find_leak(1);
    cr_assert_eq(GC_get_find_leak(), 1);
    cr_assert_eq(GC_find_leak, 1, "the data symbol does not follow the setter");
    GC_set_find_leak(0);
    cr_assert_eq(GC_get_find_leak(), 0);
    cr_assert_eq(atomic_load(&warnings), 0, "leak-finding mode warned: %s", last_warning);
}

/* GC_set_on_thread_event: each stopped thread reported as suspended, then
 * as unsuspended, by its pthread_t. */
static atomic_long te_suspended, te_unsuspended, te_wrong_id;
static pthread_t te_worker_id, te_main_id;
static atomic_long te_stop;

static void te_event(GC_EventType e, void *id)
{
    /* The main thread is stopped when the worker collects. */
    if (pthread_equal((pthread_t)id, te_main_id))
        return;
    if (!pthread_equal((pthread_t)id, te_worker_id)) {
        atomic_fetch_add(&te_wrong_id, 1);
        return;
    }
    if (e == GC_EVENT_THREAD_SUSPENDED)
        atomic_fetch_add(&te_suspended, 1);
    else if (e == GC_EVENT_THREAD_UNSUSPENDED)
        atomic_fetch_add(&te_unsuspended, 1);
}

/* Allocates garbage until te_stop (the fork tests). */
static void *te_worker(void *arg)
{
    (void)arg;
    while (!atomic_load(&te_stop))
        garbage(64 * KiB, 7);
    return NULL;
}

/* Runs without allocating until te_stop: a thread waiting for the
 * collector's lock is not signalled (it waits as in a blocking section), so
 * only one that runs is sure to be stopped, and reported, every time. */
static void *te_spinner(void *arg)
{
    volatile unsigned long spins = 0;
    (void)arg;
    while (!atomic_load(&te_stop))
        spins++;
    return NULL;
}

Test(threads, thread_events_report_suspension, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    te_main_id = pthread_self();
    GC_set_on_thread_event(te_event);
    cr_assert_eq(GC_get_on_thread_event(), te_event);
    start_thread(&te_worker_id, te_spinner, NULL);
    for (int i = 0; i < 10; i++)
        GC_gcollect();
    atomic_store(&te_stop, 1);
    join_thread(te_worker_id);
    GC_set_on_thread_event(NULL);
    assert_no_failures();
    /* Ids are checked only while the worker ran: a joined thread's id may
     * be reused. */
    cr_assert_geq(atomic_load(&te_suspended), 10, "suspended %ld times",
                  atomic_load(&te_suspended));
    cr_assert_eq(atomic_load(&te_suspended), atomic_load(&te_unsuspended));
    cr_assert_eq(atomic_load(&te_wrong_id), 0);
}

/* Threads that wait for the collector's lock while another collects are
 * not signalled: their stacks are scanned from where they began to wait,
 * with their registers saved there.  Their lists, held only by their own
 * frames, must come through many collections intact. */
#define LW_THREADS 3
#define LW_NODES 2000
static atomic_long lw_done;

static NOINLINE void *lw_thread(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    struct tu_node *list = tu_list_build(seed, LW_NODES);
    CHECK(list != NULL, "out of memory");
    for (int i = 0; i < 300 && list && !failed(); i++) {
        /* Large objects are allocated under the lock. */
        uint64_t *big = GC_MALLOC_ATOMIC(96 * KiB);
        CHECK(big != NULL, "out of memory");
        if (big)
            big[i] = seed;
        size_t bad = tu_list_check(list, seed, LW_NODES);
        CHECK(bad == 0, "thread %lu: list damaged at node %zu, round %d",
              (unsigned long)seed, bad, i);
    }
    atomic_fetch_add(&lw_done, 1);
    return NULL;
}

Test(threads, threads_waiting_for_the_lock_keep_their_data, .timeout = 120)
{
    reset_failures();
    GC_INIT();
    pthread_t t[LW_THREADS];
    for (uintptr_t k = 0; k < LW_THREADS; k++)
        start_thread(&t[k], lw_thread, (void *)(k + 1));
    unsigned collections = 0;
    while (atomic_load(&lw_done) < LW_THREADS) {
        GC_gcollect();
        collections++;
    }
    for (int k = 0; k < LW_THREADS; k++)
        join_thread(t[k]);
    assert_no_failures();
    cr_assert_geq(collections, 10, "only %u collections ran", collections);
}

/* GC_get_my_stackbottom / GC_set_stackbottom, as a coroutine library uses
 * them: read, move, restore; the stack is scanned from the restored base. */
static NOINLINE void *sb_with_moved_base(struct tu_node **out)
{
    struct GC_stack_base sb, moved, again;
    void *handle = GC_get_my_stackbottom(&sb);
    if (!handle)
        return NULL;
    moved.mem_base = (char *)sb.mem_base - 4096;
    GC_set_stackbottom(handle, &moved);
    GC_get_my_stackbottom(&again);
    void *seen = again.mem_base;
    GC_set_stackbottom(NULL, &sb);
    *out = tu_list_build(0x5eed, 20000);
    return seen;
}

Test(threads, stack_bottom_get_and_set, .timeout = 60)
{
    GC_INIT();
    struct GC_stack_base base, sb;
    cr_assert_eq(GC_get_stack_base(&base), GC_SUCCESS);
    cr_assert_not_null(GC_get_my_stackbottom(&sb), "no handle for a registered thread");
    cr_assert_eq(sb.mem_base, base.mem_base);
    struct tu_node *volatile list = NULL;
    void *seen = sb_with_moved_base((struct tu_node **)&list);
    cr_assert_eq(seen, (char *)base.mem_base - 4096, "GC_set_stackbottom did not take");
    GC_get_my_stackbottom(&sb);
    cr_assert_eq(sb.mem_base, base.mem_base, "the base was not restored");
    for (int i = 0; i < 5; i++) {
        garbage(2 * MiB, (uint64_t)i);
        GC_gcollect();
    }
    cr_assert_eq(tu_list_check(list, 0x5eed, 20000), 0, "a list held by the stack was corrupted");
}

/* GC_set_handle_fork(-1): the program brackets fork() with GC_atfork_*;
 * the child can allocate and collect while a thread ran in the parent. */

Test(threads, fork_handled_by_the_program, .timeout = 60)
{
    reset_failures();
    GC_set_handle_fork(-1);
    GC_INIT();
    pthread_t t;
    start_thread(&t, te_worker, NULL);
    struct tu_node *volatile list = tu_list_build(0xf0f0, 5000);
    GC_atfork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        GC_atfork_child();
        alarm(30);
        for (int i = 0; i < 5; i++) {
            garbage(1 * MiB, (uint64_t)i);
            GC_gcollect();
        }
        _exit(tu_list_check(list, 0xf0f0, 5000) ? 3 : 0);
    }
    GC_atfork_parent();
    cr_assert_gt(pid, 0);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    atomic_store(&te_stop, 1);
    join_thread(t);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "child status %#x (3: its list was corrupted)", status);
    GC_gcollect();                          /* the parent's lock was released */
    cr_assert_eq(tu_list_check(list, 0xf0f0, 5000), 0);
}

/* GC_alloc_lock excludes GC_call_with_alloc_lock in other threads.  (The
 * thread exists first: creating one needs the lock, as in bdwgc.) */
static atomic_long lk_entered, lk_go;

static void *lk_note(void *arg)
{
    (void)arg;
    atomic_store(&lk_entered, 1);
    return NULL;
}

static void *lk_thread(void *arg)
{
    (void)arg;
    if (!tu_wait_at_least(&lk_go, 1, 30))
        FAIL("never told to go");
    GC_call_with_alloc_lock(lk_note, NULL);
    return NULL;
}

Test(threads, alloc_lock_functions, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    pthread_t t;
    start_thread(&t, lk_thread, NULL);
    GC_alloc_lock();
    atomic_store(&lk_go, 1);
    tu_sleep_ms(100);
    long early = atomic_load(&lk_entered);
    GC_alloc_unlock();
    join_thread(t);
    assert_no_failures();
    cr_assert_eq(early, 0, "GC_call_with_alloc_lock ran while GC_alloc_lock was held");
    cr_assert_eq(atomic_load(&lk_entered), 1);
}

/* ================================================================== */
/* Threads stopped on another stack than their own                     */

/* Memory the collector does not scan as a root: where a test keeps a
 * signal stack or a coroutine's stack and contexts. */
static void *unscanned_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
    return p;
}

#define OS_NODES 5000
#define OS_STACK (256 * KiB)

static atomic_long os_phase;          /* 1: waiting on the other stack; 2: go on */
static size_t os_bad_own, os_bad_other;

/* On the other stack: a list only this frame holds, kept while the main
 * thread collects, then checked. */
static NOINLINE void os_hold_and_wait(uint64_t seed)
{
    struct tu_node *volatile mine = tu_list_build(seed, OS_NODES);
    atomic_store(&os_phase, 1);
    while (atomic_load(&os_phase) != 2)
        sched_yield();
    os_bad_other = tu_list_check(mine, seed, OS_NODES);
}

/* The main thread collects while the other thread waits on its other
 * stack; both of that thread's lists must come through intact, and the
 * garbage made meanwhile must go. */
static void os_collect_meanwhile(pthread_t t, const char *test)
{
    size_t total0 = GC_get_total_bytes();
    GC_word gc0 = GC_get_gc_no();
    if (!tu_wait_at_least(&os_phase, 1, 20))
        FAIL("the thread never reached its other stack");
    collect_rounds(10, 0);
    atomic_store(&os_phase, 2);
    join_thread(t);
    assert_no_failures();
    cr_assert_geq(GC_get_gc_no() - gc0, 10);
    cr_assert_eq(os_bad_own, 0, "%s: the list on the thread's own stack was lost (node %zu)",
                 test, os_bad_own);
    cr_assert_eq(os_bad_other, 0, "%s: the list on the other stack was lost (node %zu)",
                 test, os_bad_other);
    heap_bounded(test, total0, 16 * MiB, 48 * MiB);
}

static void *as_altstack;
static int as_register;

static void as_handler(int sig)
{
    (void)sig;
    os_hold_and_wait(0xa175);
}

static void *as_thread(void *arg)
{
    (void)arg;
    stack_t ss = {.ss_sp = as_altstack, .ss_size = OS_STACK, .ss_flags = 0};
    CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack: %s", strerror(errno));
    if (as_register) {
        pthread_attr_t attr;
        void *lo;
        size_t size;
        pthread_getattr_np(pthread_self(), &attr);
        pthread_attr_getstack(&attr, &lo, &size);
        pthread_attr_destroy(&attr);
        GC_register_altstack(lo, size, as_altstack, OS_STACK);
    }
    struct tu_node *volatile own = tu_list_build(0x0a5e, OS_NODES);
    pthread_kill(pthread_self(), SIGUSR1);   /* handled before this returns */
    os_bad_own = tu_list_check(own, 0x0a5e, OS_NODES);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    return NULL;
}

static void signal_stack_case(int registered, const char *test)
{
    reset_failures();
    GC_INIT();
    as_altstack = unscanned_map(OS_STACK);
    as_register = registered;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = as_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_ONSTACK;
    cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    pthread_t t;
    start_thread(&t, as_thread, NULL);
    os_collect_meanwhile(t, test);
}

/* A thread stopped in a signal handler on its signal stack: lfgc finds
 * both stacks from the memory map. */
Test(threads, stopped_on_a_signal_stack, .timeout = 60)
{
    signal_stack_case(0, "signal stack");
}

/* The same with the stacks given by GC_register_altstack. */
Test(threads, stopped_on_a_registered_signal_stack, .timeout = 60)
{
    signal_stack_case(1, "registered signal stack");
}

/* A coroutine (makecontext) on a stack of its own, with no
 * GC_set_stackbottom: it collects itself, then waits there while the main
 * thread collects.  The contexts are kept out of the roots, so that the
 * registers swapcontext saved do not keep the lists alive. */
struct co_area {
    ucontext_t back, coroutine;
};
static struct co_area *co;

static void co_body(void)
{
    struct tu_node *volatile early = tu_list_build(0xc0c0, OS_NODES);
    collect_rounds(4, 100);
    CHECK(tu_list_check(early, 0xc0c0, OS_NODES) == 0,
          "a list on the coroutine's stack was lost in its own collections");
    os_hold_and_wait(0xc1c1);
}

static void *co_thread(void *arg)
{
    (void)arg;
    struct tu_node *volatile own = tu_list_build(0x0c0e, OS_NODES);
    getcontext(&co->coroutine);
    co->coroutine.uc_stack.ss_sp = unscanned_map(OS_STACK);
    co->coroutine.uc_stack.ss_size = OS_STACK;
    co->coroutine.uc_link = &co->back;
    makecontext(&co->coroutine, co_body, 0);
    CHECK(swapcontext(&co->back, &co->coroutine) == 0, "swapcontext: %s", strerror(errno));
    os_bad_own = tu_list_check(own, 0x0c0e, OS_NODES);
    return NULL;
}

Test(threads, stopped_on_a_coroutine_stack, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    co = unscanned_map(sizeof *co);
    pthread_t t;
    start_thread(&t, co_thread, NULL);
    os_collect_meanwhile(t, "coroutine stack");
}

/* GC_stop_world_external holds every other registered thread (and the
 * lock) until GC_start_world_external. */
static atomic_long sw_count;
static atomic_int sw_stop;

static void *sw_spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&sw_stop))
        atomic_fetch_add(&sw_count, 1);
    return NULL;
}

Test(threads, stop_world_external, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    pthread_t t;
    start_thread(&t, sw_spinner, NULL);
    cr_assert(tu_wait_at_least(&sw_count, 1000, 10), "the spinner never ran");
    GC_stop_world_external();
    long before = atomic_load(&sw_count);
    tu_sleep_ms(50);
    long during = atomic_load(&sw_count);
    GC_start_world_external();
    bool resumed = tu_wait_at_least(&sw_count, during + 1000, 10);
    atomic_store(&sw_stop, 1);
    join_thread(t);
    cr_assert_eq(during, before, "a thread ran %ld steps while the world was stopped",
                 during - before);
    cr_assert(resumed, "the thread did not resume");
    /* The lock was given back: allocation and collection work. */
    struct tu_node *l = tu_list_build(0x5705, 100);
    GC_gcollect();
    cr_assert_eq(tu_list_check(l, 0x5705, 100), 0);
}

/* bdwgc's deprecated variables, still read by old programs. */
Test(threads, parallel_and_stackbottom_variables)
{
    GC_INIT();
    cr_assert_eq(GC_parallel, GC_get_parallel());
    struct GC_stack_base sb;
    cr_assert_eq(GC_get_stack_base(&sb), GC_SUCCESS);
    if (getpid() == gettid())
        cr_assert_eq((void *)GC_stackbottom, sb.mem_base,
                     "GC_stackbottom is not the main thread's stack base");
}

/* GC_stackbottom set before GC_init is the main thread's base. */
extern void *__libc_stack_end;

Test(threads, stackbottom_set_before_init)
{
    if (getpid() != gettid())
        cr_skip_test("the test does not run on the main thread");
    char *base = (char *)(((uintptr_t)__libc_stack_end - 64) & ~(uintptr_t)7);
    GC_stackbottom = base;
    GC_INIT();
    struct GC_stack_base sb;
    cr_assert_eq(GC_get_stack_base(&sb), GC_SUCCESS);
    cr_assert_eq(sb.mem_base, (void *)base, "GC_stackbottom set before GC_init was ignored");
    cr_assert_eq(GC_stackbottom, base);
}

/* GC_suspend_thread / GC_resume_thread (bdwgc's javaxfc.h): a suspended
 * thread does not run, collections meanwhile keep its data and leave it
 * stopped, and it runs again once resumed. */
static atomic_long xs_count;
static atomic_int xs_stop;
static size_t xs_bad;

static NOINLINE void xs_spin_holding_list(void)
{
    struct tu_node *volatile mine = tu_list_build(0x5005, 3000);
    while (!atomic_load(&xs_stop))
        atomic_fetch_add(&xs_count, 1);
    xs_bad = tu_list_check(mine, 0x5005, 3000);
}

static void *xs_spinner(void *arg)
{
    (void)arg;
    xs_spin_holding_list();
    return NULL;
}

Test(threads, suspend_and_resume_another_thread, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    pthread_t t;
    start_thread(&t, xs_spinner, NULL);
    cr_assert(tu_wait_at_least(&xs_count, 1000, 10), "the spinner never ran");
    pthread_t id = t;
    cr_assert_not(GC_is_thread_suspended(id));
    GC_suspend_thread(id);
    GC_suspend_thread(id);                 /* no count: still one resume */
    cr_assert(GC_is_thread_suspended(id));
    long before = atomic_load(&xs_count);
    GC_word gc0 = GC_get_gc_no();
    collect_rounds(6, 0);
    tu_sleep_ms(20);
    long during = atomic_load(&xs_count);
    cr_assert(GC_is_thread_suspended(id), "a collection resumed a suspended thread");
    GC_resume_thread(id);
    cr_assert_not(GC_is_thread_suspended(id));
    bool resumed = tu_wait_at_least(&xs_count, during + 1000, 10);
    /* Suspending again at once after a resume must not hang. */
    for (int i = 0; i < 300; i++) {
        GC_suspend_thread(id);
        GC_resume_thread(id);
    }
    long after_cycles = atomic_load(&xs_count);
    bool runs_after_cycles = tu_wait_at_least(&xs_count, after_cycles + 1000, 10);
    atomic_store(&xs_stop, 1);
    join_thread(t);
    cr_assert_eq(during, before, "the suspended thread ran %ld steps", during - before);
    cr_assert(resumed, "the thread did not run again after GC_resume_thread");
    cr_assert(runs_after_cycles, "the thread stayed stopped after suspend/resume cycles");
    cr_assert_geq(GC_get_gc_no() - gc0, 6);
    cr_assert_eq(xs_bad, 0, "the suspended thread's list was lost (node %zu)", xs_bad);
    /* Unknown threads are ignored. */
    GC_resume_thread(id);
    cr_assert_not(GC_is_thread_suspended(id));
}

/* A thread that suspends itself waits until another resumes it. */
static atomic_long xs_self_done;

static NOINLINE void xs_self_body(void)
{
    struct tu_node *volatile mine = tu_list_build(0x5e1f, 3000);
    GC_suspend_thread(pthread_self());
    xs_bad = tu_list_check(mine, 0x5e1f, 3000);
    atomic_store(&xs_self_done, 1);
}

static void *xs_self(void *arg)
{
    (void)arg;
    xs_self_body();
    return NULL;
}

Test(threads, thread_suspends_itself, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    pthread_t t;
    start_thread(&t, xs_self, NULL);
    pthread_t id = t;
    for (int i = 0; i < 10000 && !GC_is_thread_suspended(id); i++)
        tu_sleep_ms(1);
    cr_assert(GC_is_thread_suspended(id), "the thread never suspended itself");
    collect_rounds(6, 50);
    tu_sleep_ms(20);
    cr_assert_eq(atomic_load(&xs_self_done), 0, "a self-suspended thread went on by itself");
    GC_resume_thread(id);
    join_thread(t);
    cr_assert_eq(atomic_load(&xs_self_done), 1);
    cr_assert_eq(xs_bad, 0, "the self-suspended thread's list was lost (node %zu)", xs_bad);
}

/* A thread's __thread variables and pthread_setspecific values are roots:
 * glibc keeps both at the top of its stack mapping, which lfgc scans to
 * the end for threads made by GC_pthread_create and for those registered
 * with GC_get_stack_base's answer (bdwgc 8.2 loses the former's).  Each
 * list is reachable only from one of them while the main thread collects. */
static __thread struct tu_node *volatile tl_list;
static __thread uint64_t tl_seed;
static pthread_key_t tl_key;

static NOINLINE void tl_keep(uint64_t seed)
{
    tl_seed = seed;
    tl_list = tu_list_build(seed, RG_NODES);
    CHECK(tl_list != NULL, "out of memory");
    struct tu_node *keyed = tu_list_build(seed + 1, RG_NODES);
    CHECK(keyed != NULL && pthread_setspecific(tl_key, keyed) == 0, "pthread_setspecific");
}

static NOINLINE size_t tl_check(void)
{
    return tu_list_check(tl_list, tl_seed, RG_NODES);
}

static NOINLINE size_t tl_check_keyed(void)
{
    return tu_list_check(pthread_getspecific(tl_key), tl_seed + 1, RG_NODES);
}

static void *tl_body(uint64_t seed)
{
    tl_keep(seed);
    clear_stack();
    atomic_store(&rg_phase, 1);
    if (!tu_wait_at_least(&rg_collected, 1, 30))
        FAIL("the test did not collect");
    size_t bad = tl_check();
    CHECK(!bad, "list held by a __thread variable: node %zu corrupted", bad - 1);
    bad = tl_check_keyed();
    CHECK(!bad, "list held by pthread_setspecific: node %zu corrupted", bad - 1);
    return NULL;
}

static void *tl_gc_thread(void *arg)
{
    (void)arg;
    tl_body(0x7150);
    atomic_store(&rg_phase, 2);
    return NULL;
}

static void *tl_registered_thread(void *arg)
{
    (void)arg;
    struct GC_stack_base sb;
    CHECK(GC_get_stack_base(&sb) == GC_SUCCESS, "GC_get_stack_base failed");
    CHECK(GC_register_my_thread(&sb) == GC_SUCCESS, "registration failed");
    tl_body(0x7151);
    GC_unregister_my_thread();
    atomic_store(&rg_phase, 2);
    return NULL;
}

Test(threads, thread_local_variables_are_roots, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    cr_assert_eq(pthread_key_create(&tl_key, NULL), 0);
    GC_allow_register_threads();
    rg_run(tl_registered_thread);
    rg_run_with(pthread_create, pthread_join, tl_gc_thread);
}

/* The main thread's static TLS is in a block of the dynamic linker's, not
 * in its stack: lfgc finds it at registration and scans it (bdwgc 8.2
 * does not).  The list is reachable only from the __thread variable. */
Test(threads, main_thread_locals_are_roots, .timeout = 60)
{
    reset_failures();
    GC_INIT();
    cr_assert_eq(getpid(), gettid(), "the test does not run on the main thread");
    cr_assert_eq(pthread_key_create(&tl_key, NULL), 0);
    tl_keep(0x7152);
    assert_no_failures();
    clear_stack();
    for (int i = 0; i < 20; i++) {
        garbage(1 * MiB, (uint64_t)i);
        GC_gcollect();
    }
    size_t bad = tl_check();
    cr_assert_eq(bad, 0, "list held by the main thread's __thread variable: node %zu corrupted",
                 bad - 1);
}
