/* test_bdwgc_api.c: the rest of bdwgc's interface (gc/compat.c): the
 * debugging allocator and the GC_DEBUG macros, settings, statistics,
 * callbacks, pointer checks, and data symbols set before GC_INIT.
 *
 * Built with GC_DEBUG, so that the upper-case macros name the GC_debug_*
 * calls as a program built with -DGC_DEBUG does.  Criterion runs every
 * test in a process of its own: the data-symbol tests each start with an
 * uninitialised collector. */
#define GC_DEBUG 1
#include "test_util.h"
#include "gc_mark.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

/* ------------------------------------------------------------------ */
/* Debugging allocator                                                  */

static int same_obj_failures, displacement_failures, visible_failures;
static void same_obj_fail(void *p, void *q) { (void)p; (void)q; same_obj_failures++; }
static void displacement_fail(void *p) { (void)p; displacement_failures++; }
static void visible_fail(void *p) { (void)p; visible_failures++; }

struct node {
    struct node *next;
    uint64_t value;
};

static TU_NOINLINE GC_hidden_pointer build_debug_list(int n)
{
    struct node *head = NULL;
    for (int i = 0; i < n; i++) {
        struct node *p = GC_NEW(struct node);       /* GC_debug_malloc */
        cr_assert_not_null(p);
        p->value = (uint64_t)i * 0x9E3779B97F4A7C15ull;
        p->next = head;
        head = p;
    }
    return tu_hide(head);
}

static TU_NOINLINE uint64_t list_sum(GC_hidden_pointer h)
{
    uint64_t sum = 0;
    for (struct node *p = GC_REVEAL_POINTER(h); p; p = p->next)
        sum = sum * 31 + p->value;
    return sum;
}

static TU_NOINLINE GC_hidden_pointer debug_garbage(void)
{
    return tu_hide(GC_MALLOC(4096));
}

Test(bdwgc_api, debug_malloc_keeps_live_data_and_reclaims_garbage)
{
    GC_INIT();
    static void *volatile root __attribute__((used)); /* a root the collector scans */
    GC_hidden_pointer list = build_debug_list(5000);
    root = GC_REVEAL_POINTER(list);
    uint64_t before = list_sum(list);
    GC_hidden_pointer dead = debug_garbage();
    tu_collect();
    cr_assert_eq(list_sum(list), before, "a list made with GC_debug_malloc was damaged");
    cr_assert(!tu_live(dead), "an unreachable GC_debug_malloc object was not reclaimed");
    root = NULL;
}

Test(bdwgc_api, debug_free_and_realloc_take_debug_objects)
{
    GC_INIT();
    char *p = GC_MALLOC(100);
    memset(p, 'a', 100);
    p = GC_REALLOC(p, 5000);                        /* GC_debug_realloc */
    cr_assert_not_null(p);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(p[i], 'a');
    cr_assert_geq(GC_size(p), 5000);
    GC_is_valid_displacement_print_proc = displacement_fail;
    GC_FREE(p);                                     /* GC_debug_free */
    GC_is_valid_displacement(p);
    cr_assert_eq(displacement_failures, 1, "GC_debug_free did not free");
    /* The plain and debug families mix. */
    char *q = GC_debug_malloc_atomic(64, GC_EXTRAS);
    GC_free(q);
    GC_is_valid_displacement(q);
    cr_assert_eq(displacement_failures, 2, "GC_free did not free a GC_debug_malloc object");
    char *s = GC_STRDUP("lfgc");
    cr_assert_str_eq(s, "lfgc");
    char *sn = GC_STRNDUP("lfgc-debug", 4);
    cr_assert_str_eq(sn, "lfgc");
    void *u = GC_MALLOC_UNCOLLECTABLE(32);
    void *au = GC_MALLOC_ATOMIC_UNCOLLECTABLE(32);
    void *io = GC_MALLOC_IGNORE_OFF_PAGE(100000);
    void *aio = GC_MALLOC_ATOMIC_IGNORE_OFF_PAGE(100000);
    void *st = GC_debug_malloc_stubborn(16, GC_EXTRAS);
    cr_assert(u && au && io && aio && st);
    GC_debug_change_stubborn(st);
    GC_END_STUBBORN_CHANGE(st);
    GC_PTR_STORE_AND_DIRTY(u, io);
    cr_assert_eq(*(void **)u, io);
    GC_FREE(u);
    GC_FREE(au);
    cr_assert_eq(GC_get_debug_header_size(), 0);
    cr_assert_eq(GC_debug_header_size, 0);
    void *r = GC_debug_malloc_replacement(24);
    r = GC_debug_realloc_replacement(r, 48);
    cr_assert_geq(GC_size(r), 48);
    GC_REGISTER_DISPLACEMENT(8);
}

static int finalized;

static void count_fin(void *obj, void *cd)
{
    (void)obj;
    (void)cd;
    finalized++;
}

static TU_NOINLINE void make_finalizable(int n)
{
    for (int i = 0; i < n; i++) {
        GC_REGISTER_FINALIZER(GC_MALLOC(48), count_fin, NULL, NULL, NULL);
        GC_REGISTER_FINALIZER_IGNORE_SELF(GC_MALLOC(48), count_fin, NULL, NULL, NULL);
        GC_REGISTER_FINALIZER_NO_ORDER(GC_MALLOC(48), count_fin, NULL, NULL, NULL);
        GC_REGISTER_FINALIZER_UNREACHABLE(GC_MALLOC(48), count_fin, NULL, NULL, NULL);
    }
}

Test(bdwgc_api, debug_finalizers_run)
{
    GC_INIT();
    make_finalizable(50);
    for (int i = 0; i < 4 && finalized < 200; i++) {
        tu_collect();
        GC_invoke_finalizers();
    }
    cr_assert_geq(finalized, 150, "only %d of 200 debug-registered finalizers ran", finalized);
}

static void **link_slot;

static TU_NOINLINE void make_link(void)
{
    char *obj = GC_MALLOC(64);
    link_slot = GC_MALLOC_UNCOLLECTABLE(sizeof(void *));
    *link_slot = GC_HIDE_POINTER(obj) == 0 ? NULL : (void *)GC_HIDE_POINTER(obj);
    /* Under GC_DEBUG the macro takes any pointer into the object. */
    cr_assert_eq(GC_GENERAL_REGISTER_DISAPPEARING_LINK(link_slot, obj + 10), GC_SUCCESS);
}

Test(bdwgc_api, debug_disappearing_link_takes_interior_pointer)
{
    GC_INIT();
    make_link();
    tu_collect();
    tu_collect();
    cr_assert_null(*link_slot, "the link to an unreachable object was not cleared");
}

/* ------------------------------------------------------------------ */
/* Pointer checks                                                       */

Test(bdwgc_api, pointer_checks)
{
    GC_INIT();
    GC_same_obj_print_proc = same_obj_fail;
    GC_is_valid_displacement_print_proc = displacement_fail;
    GC_is_visible_print_proc = visible_fail;

    int *a = GC_MALLOC(10 * sizeof(int));
    int *b = GC_MALLOC(10 * sizeof(int));
    int *p = a;
    cr_assert_eq(GC_PTR_ADD(p, 3), a + 3);
    cr_assert_eq(GC_PRE_INCR(p, 2), a + 2);
    cr_assert_eq(p, a + 2);
    cr_assert_eq(GC_POST_INCR(p), a + 2);
    cr_assert_eq(p, a + 3);
    cr_assert_eq(GC_POST_DECR(p), a + 3);
    cr_assert_eq(p, a + 2);
    cr_assert_eq(same_obj_failures, 0);
    cr_assert_eq(GC_same_obj(a + 10, a), a + 10, "one past the end of the request");
    cr_assert_eq(same_obj_failures, 0);
    GC_same_obj(b, a);
    cr_assert_eq(same_obj_failures, 1, "GC_same_obj(b, a) passed for two objects");
    static int outside;
    GC_same_obj(&outside, &outside);
    cr_assert_eq(same_obj_failures, 1);

    cr_assert_eq(GC_is_valid_displacement(a + 5), a + 5);
    cr_assert_eq(displacement_failures, 0);
    GC_hidden_pointer freed = tu_hide(GC_MALLOC(64));
    GC_free(GC_REVEAL_POINTER(freed));
    GC_is_valid_displacement(GC_REVEAL_POINTER(freed));
    cr_assert_eq(displacement_failures, 1, "a freed slot passed as a valid displacement");

    void **slot = GC_MALLOC(4 * sizeof(void *));
    GC_PTR_STORE(slot + 1, b);
    cr_assert_eq(slot[1], b);
    cr_assert_eq(visible_failures, 0);
    void **atomic = GC_MALLOC_ATOMIC(4 * sizeof(void *));
    GC_is_visible(atomic);
    cr_assert_eq(visible_failures, 1, "a pointer-free object passed as visible");
    cr_assert_eq(GC_is_tmp_root(&outside), 0);
    cr_assert_eq(GC_clear_stack(a), a);
}

Test(bdwgc_api, same_obj_default_proc_aborts, .signal = SIGABRT)
{
    GC_INIT();
    void *a = GC_MALLOC(16), *b = GC_MALLOC(16);
    GC_same_obj(a, b);
}

/* ------------------------------------------------------------------ */
/* Settings, statistics, callbacks                                      */

Test(bdwgc_api, stored_settings_round_trip)
{
    GC_set_full_freq(7);
    cr_assert_eq(GC_get_full_freq(), 7);
    cr_assert_eq(GC_full_freq, 7);
    GC_set_dont_precollect(1);
    cr_assert_eq(GC_get_dont_precollect(), 1);
    GC_set_non_gc_bytes(12345);
    cr_assert_eq(GC_get_non_gc_bytes(), 12345);
    cr_assert_eq(GC_get_allocd_bytes_per_finalizer(), 10000, "bdwgc's default");
    GC_set_allocd_bytes_per_finalizer(777);
    cr_assert_eq(GC_get_allocd_bytes_per_finalizer(), 777);
    GC_set_max_prior_attempts(3);
    cr_assert_eq(GC_get_max_prior_attempts(), 3);
    GC_set_min_bytes_allocd(4096);
    cr_assert_eq(GC_get_min_bytes_allocd(), 4096);
    GC_set_rate(20);
    cr_assert_eq(GC_get_rate(), 20);
    GC_set_disable_automatic_collection(1);
    cr_assert_eq(GC_get_disable_automatic_collection(), 1);
    struct GC_timeval_s tv = { 15, 5000 };
    GC_set_time_limit_tv(tv);
    struct GC_timeval_s got = GC_get_time_limit_tv();
    cr_assert(got.tv_ms == 15 && got.tv_nsec == 5000);
    cr_assert_eq(GC_get_time_limit(), 15);
    GC_set_warn_proc(GC_ignore_warn_proc);
    GC_set_pages_executable(1);
    cr_assert_eq(GC_get_pages_executable(), 0, "lfgc's heap is never executable");
    GC_INIT();
    cr_assert_eq(GC_incremental_protection_needs(), GC_PROTECTS_NONE);
    GC_start_incremental_collection();
    GC_start_performance_measurement();
    void *p = GC_MALLOC(32);
    cr_assert_not_null(p);
    GC_deinit();
}

Test(bdwgc_api, size_map_and_prof_stats)
{
    GC_INIT();
    for (int i = 0; i <= 2048; i += 7) {
        size_t s = GC_get_size_map_at(i);
        cr_assert_geq(s, (size_t)i + 1, "GC_get_size_map_at(%d) = %zu", i, s);
        cr_assert_eq(s, GC_size(GC_malloc_atomic((size_t)i)), "request of %d bytes", i);
    }
    cr_assert_eq(GC_get_size_map_at(-1), (size_t)-1);
    cr_assert_eq(GC_get_size_map_at(4096), (size_t)-1);

    for (int i = 0; i < 1000; i++)
        GC_MALLOC(1000);
    GC_gcollect();
    struct GC_prof_stats_s ps;
    cr_assert_eq(GC_get_prof_stats(&ps, sizeof ps), sizeof ps);
    cr_assert_eq(ps.gc_no, GC_get_gc_no());
    cr_assert_geq(ps.heapsize_full, GC_get_heap_size());
    cr_assert_gt(ps.heapsize_full, 0);
    cr_assert_geq(ps.allocd_bytes_before_gc, 1000 * 1000);
    cr_assert_eq((long)ps.markers_m1, GC_get_parallel());
    cr_assert_geq(GC_get_obtained_from_os_bytes(), GC_get_heap_size());
    /* A caller with a larger structure: the rest is -1. */
    GC_word big[sizeof ps / sizeof(GC_word) + 2];
    memset(big, 0, sizeof big);
    cr_assert_eq(GC_get_prof_stats_unsafe((struct GC_prof_stats_s *)big, sizeof big), sizeof ps);
    cr_assert_eq(big[sizeof ps / sizeof(GC_word)], (GC_word)-1);
    cr_assert_eq(big[sizeof ps / sizeof(GC_word) + 1], (GC_word)-1);
    /* A smaller one: only its part. */
    GC_word small[2] = { 0, 0 };
    cr_assert_eq(GC_get_prof_stats((struct GC_prof_stats_s *)small, sizeof small), sizeof small);
    cr_assert_eq(small[0], ps.heapsize_full);
}

static GC_word last_resize;
static int resizes;
static void on_resize(GC_word size)
{
    last_resize = size;
    resizes++;
}

Test(bdwgc_api, heap_resize_callback)
{
    GC_INIT();
    GC_set_on_heap_resize(on_resize);
    cr_assert_eq(GC_get_on_heap_resize(), on_resize);
    static void *volatile keep[64] __attribute__((used));
    for (int i = 0; i < 64; i++)
        keep[i] = GC_MALLOC_ATOMIC(1 << 20);
    cr_assert_gt(resizes, 0, "the heap grew by 64 MiB without a resize call");
    cr_assert_gt(last_resize, 32u << 20);
    cr_assert_leq(last_resize, GC_get_heap_size());
}

static void my_abort(const char *msg)
{
    /* The child's last words, checked by the parent. */
    dprintf(3, "abort func: %s\n", msg ? msg : "(null)");
}

Test(bdwgc_api, abort_func_and_abort_on_oom)
{
    GC_abort_func dflt = GC_get_abort_func();
    cr_assert_not_null(dflt);
    GC_set_warn_proc(GC_ignore_warn_proc);
    GC_set_abort_func(NULL);
    cr_assert_eq(GC_get_abort_func(), dflt, "a NULL abort func was taken");
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 3);
        GC_set_abort_func(my_abort);
        GC_abort_on_oom();
    }
    close(fds[1]);
    char buf[256] = "";
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "GC_abort_on_oom did not abort");
    cr_assert_gt(n, 0);
    cr_assert(strstr(buf, "abort func: Insufficient memory"), "got: %s", buf);
}

Test(bdwgc_api, log_fd_and_dumps)
{
    GC_INIT();
    GC_MALLOC(100);
    char path[] = "/tmp/lfgc-log-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    GC_set_log_fd(fd);
    GC_dump_named("checkpoint");
    GC_dump_regions();
    GC_dump_finalization();
    GC_set_log_fd(2);
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    cr_assert_gt(n, 0, "nothing written to the log fd");
    buf[n] = 0;
    cr_assert(strstr(buf, "***GC Dump checkpoint"), "%s", buf);
    cr_assert(strstr(buf, "lfgc heap:"), "%s", buf);
    cr_assert(strstr(buf, "GC_dump_finalization"), "%s", buf);
    close(fd);
}

/* ------------------------------------------------------------------ */
/* Data symbols written before GC_INIT, as bdwgc's programs do.  Each
 * test runs in a fresh process (Criterion's), with lfgc not yet
 * initialised.                                                         */

Test(bdwgc_api, data_all_interior_pointers_before_init)
{
    cr_assert(!GC_is_init_called());
    GC_all_interior_pointers = 0;
    GC_INIT();
    cr_assert_eq(GC_get_all_interior_pointers(), 0);
    cr_assert_eq(GC_size(GC_malloc(16)), 16, "the extra byte was still added");
}

static TU_NOINLINE void garbage_mb(int mb)
{
    for (int i = 0; i < mb * 16; i++)
        GC_MALLOC_ATOMIC(65536);
}

Test(bdwgc_api, data_dont_gc_before_init)
{
    cr_assert(!GC_is_init_called());
    GC_dont_gc = 1;
    GC_INIT();
    garbage_mb(64);
    cr_assert_eq(GC_get_gc_no(), 0, "collected with GC_dont_gc set before GC_INIT");
    cr_assert(GC_is_disabled());
}

Test(bdwgc_api, data_finalize_on_demand_before_init)
{
    cr_assert(!GC_is_init_called());
    GC_finalize_on_demand = 1;
    GC_INIT();
    cr_assert_eq(GC_get_finalize_on_demand(), 1);
    make_finalizable(25);
    tu_collect();
    tu_collect();
    GC_MALLOC(16);
    cr_assert_eq(finalized, 0, "finalizers ran without GC_invoke_finalizers");
    GC_invoke_finalizers();
    cr_assert_gt(finalized, 0);
}

Test(bdwgc_api, data_java_finalization_before_init)
{
    cr_assert(!GC_is_init_called());
    GC_java_finalization = 0;
    GC_INIT();
    cr_assert_eq(GC_get_java_finalization(), 0);
}

Test(bdwgc_api, data_settings_before_init)
{
    cr_assert(!GC_is_init_called());
    GC_no_dls = 1;
    GC_dont_expand = 1;
    GC_full_freq = 5;
    GC_free_space_divisor = 7;
    GC_max_retries = 4;
    GC_use_entire_heap = 1;
    GC_quiet = 1;
    GC_dont_precollect = 1;
    GC_non_gc_bytes = 99;
    GC_time_limit = 12;
    GC_INIT();
    cr_assert_eq(GC_get_no_dls(), 1);
    cr_assert_eq(GC_get_dont_expand(), 1);
    cr_assert_eq(GC_get_full_freq(), 5);
    cr_assert_eq(GC_get_free_space_divisor(), 7);
    cr_assert_eq(GC_get_max_retries(), 4);
    cr_assert_eq(GC_get_dont_precollect(), 1);
    cr_assert_eq(GC_get_non_gc_bytes(), 99);
    cr_assert_eq(GC_get_time_limit(), 12);
    cr_assert_eq(GC_use_entire_heap, 1);
    cr_assert_eq(GC_quiet, 1);
    cr_assert_not_null(GC_MALLOC(64));
}

static void *my_oom(size_t n)
{
    (void)n;
    static char spare[16];
    return spare;
}

Test(bdwgc_api, data_oom_fn_before_init)
{
    cr_assert(!GC_is_init_called());
    GC_oom_fn = my_oom;
    GC_INIT();
    cr_assert_eq(GC_get_oom_fn(), my_oom);
    GC_set_warn_proc(GC_ignore_warn_proc);
    void *p = GC_malloc((size_t)1 << 46);
    cr_assert_not_null(p, "the OOM function set before GC_INIT was not called");
    cr_assert(!lowfat_is_heap_ptr(p));
}

static void notifier(void) {}

Test(bdwgc_api, data_finalizer_notifier_before_init)
{
    cr_assert(!GC_is_init_called());
    GC_finalizer_notifier = notifier;
    GC_INIT();
    cr_assert_eq(GC_get_finalizer_notifier(), notifier);
}

static GC_ToggleRefStatus toggleref_none(void *obj) { (void)obj; return GC_TOGGLE_REF_DROP; }
static void await_none(void *obj) { (void)obj; }

/* Whippet's bdw backend sets its procedures, then GC_MARKERS, then calls
 * GC_init: the setters must leave the environment to GC_init. */
Test(bdwgc_api, procedure_setters_before_init_leave_the_environment)
{
    cr_assert(!GC_is_init_called());
    GC_set_finalizer_notifier(notifier);
    GC_set_await_finalize_proc(await_none);
    GC_set_toggleref_func(toggleref_none);
    cr_assert(!GC_is_init_called(), "a procedure setter initialised the collector");
    /* Three markers: no machine's default here, so the setting shows. */
    setenv("GC_MARKERS", "3", 1);
    GC_INIT();
    cr_assert_eq(GC_get_parallel(), 2, "GC_MARKERS set before GC_init was ignored");
    cr_assert_eq(GC_get_finalizer_notifier(), notifier);
    cr_assert_eq(GC_get_await_finalize_proc(), await_none);
    cr_assert_eq(GC_get_toggleref_func(), toggleref_none);
    /* The collector works with what was set: live data kept, garbage gone. */
    struct node *keep = GC_MALLOC(sizeof *keep);
    cr_assert_not_null(keep);
    keep->value = 0x5e77e45;
    GC_hidden_pointer dead = tu_hide(GC_MALLOC(64));
    tu_collect();
    cr_assert_eq(keep->value, 0x5e77e45);
    cr_assert(!tu_live(dead), "garbage survived");
}

Test(bdwgc_api, data_stackbottom_before_init)
{
    cr_assert(!GC_is_init_called());
    /* Below the true base, above this frame. */
    char *mine = (char *)__builtin_frame_address(0) + 4096;
    GC_stackbottom = mine;
    GC_INIT();
    struct GC_stack_base sb;
    cr_assert_not_null(GC_get_my_stackbottom(&sb));
    cr_assert_eq(sb.mem_base, mine, "GC_stackbottom set before GC_INIT was not used");
    cr_assert_eq(GC_stackbottom, mine);
}

/* ------------------------------------------------------------------ */
/* Dumps, the log, reachable objects, automatic collection             */

static int temp_log(void)
{
    char path[] = "/tmp/lfgc-log-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    return fd;
}

static void read_log(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = 0;
}

static void *dump_locked(void *name)
{
    GC_dump_named(name);
    return NULL;
}

/* bdwgc's GC_dump_named takes no lock: a program holding it may dump
 * (lfgc's took it again, and waited for ever). */
Test(bdwgc_api, dump_named_with_the_lock_held, .timeout = 30)
{
    GC_INIT();
    GC_MALLOC(100);
    int fd = temp_log();
    GC_set_log_fd(fd);
    GC_call_with_alloc_lock(dump_locked, "under the lock");
    GC_dump_named(NULL);
    GC_set_log_fd(2);
    char buf[16384];
    read_log(fd, buf, sizeof buf);
    cr_assert(strstr(buf, "***GC Dump under the lock"), "%s", buf);
    char expect[64];
    snprintf(expect, sizeof expect, "***GC Dump collection #%lu", (unsigned long)GC_get_gc_no());
    cr_assert(strstr(buf, expect), "GC_dump_named(NULL) does not name the collection: %s", buf);
    close(fd);
}

/* GC_dump_regions lists the region of an object in use, and its span. */
Test(bdwgc_api, dump_regions_lists_spans)
{
    GC_INIT();
    char *p = GC_malloc_atomic(3000);     /* plain: its kind is 0 */
    cr_assert_not_null(p);
    int fd = temp_log();
    GC_set_log_fd(fd);
    GC_dump_regions();
    GC_set_log_fd(2);
    char buf[65536];
    read_log(fd, buf, sizeof buf);
    char expect[128];
    snprintf(expect, sizeof expect, "(%zu-byte objects) [", GC_size(p));
    cr_assert(strstr(buf, expect), "no line for the region of %zu-byte objects: %s",
              GC_size(p), buf);
    cr_assert(strstr(buf, "in use, kind 0") || strstr(buf, "in use, unswept, kind 0"),
              "no span of pointer-free objects listed: %s", buf);
    close(fd);
}

/* GC_PRINT_STATS lines go to the log descriptor, as in bdwgc. */
Test(bdwgc_api, print_stats_go_to_the_log_fd)
{
    cr_assert(!GC_is_init_called());
    setenv("GC_PRINT_STATS", "1", 1);
    GC_INIT();
    int fd = temp_log();
    GC_set_log_fd(fd);
    GC_gcollect();
    GC_set_log_fd(2);
    char buf[4096];
    read_log(fd, buf, sizeof buf);
    cr_assert(strstr(buf, "lfgc: collection"), "the statistics line is not in the log: '%s'", buf);
    close(fd);
}

#define ENUM_LIST 200
#define ENUM_MAX 100000
static struct node *volatile enum_root;
static GC_hidden_pointer enum_seen[ENUM_MAX];
static size_t enum_bytes[ENUM_MAX];
static size_t enum_count;

static void enum_note(void *obj, size_t bytes, void *cd)
{
    cr_assert_eq(cd, (void *)&enum_count);
    if (enum_count < ENUM_MAX) {
        enum_seen[enum_count] = GC_HIDE_POINTER(obj);
        enum_bytes[enum_count] = bytes;
    }
    enum_count++;
}

static void *enum_locked(void *unused)
{
    (void)unused;
    GC_enumerate_reachable_objects_inner(enum_note, &enum_count);
    return NULL;
}

/* Index in enum_seen of hidden h, or -1. */
static long enum_find(GC_hidden_pointer h)
{
    for (size_t i = 0; i < enum_count && i < ENUM_MAX; i++)
        if (enum_seen[i] == h)
            return (long)i;
    return -1;
}

static TU_NOINLINE void enum_build(GC_hidden_pointer *nodes, GC_hidden_pointer *garbage)
{
    struct node *head = NULL;
    for (int i = 0; i < ENUM_LIST; i++) {
        struct node *n = GC_NEW(struct node);
        cr_assert_not_null(n);
        n->next = head;
        n->value = (uint64_t)i;
        head = n;
        nodes[i] = tu_hide(n);
        garbage[i] = tu_hide(GC_MALLOC(48));
    }
    enum_root = head;
}

Test(bdwgc_api, enumerate_reachable_objects)
{
    tu_warm_up();
    static GC_hidden_pointer nodes[ENUM_LIST], garbage[ENUM_LIST];
    GC_disable();
    enum_build(nodes, garbage);
    GC_enable();
    tu_collect();
    GC_call_with_alloc_lock(enum_locked, NULL);
    cr_assert_lt(enum_count, (size_t)ENUM_MAX);
    for (int i = 0; i < ENUM_LIST; i++) {
        long at = enum_find(nodes[i]);
        cr_assert_geq(at, 0, "reachable node %d not enumerated", i);
        cr_assert_eq(enum_bytes[at], GC_size(GC_REVEAL_POINTER(nodes[i])));
        cr_assert_lt(enum_find(garbage[i]), 0, "garbage object %d enumerated", i);
    }
    cr_assert_eq(list_sum(tu_hide(enum_root)), list_sum(nodes[ENUM_LIST - 1]));
    enum_root = NULL;
}

static TU_NOINLINE void garbage_fill(size_t bytes)
{
    for (size_t done = 0; done < bytes; done += 4096)
        GC_MALLOC_ATOMIC(4096);
}

/* Automatic collection off: allocation grows the heap, GC_gcollect
 * still collects; back on, allocation collects again. */
Test(bdwgc_api, disable_automatic_collection_leaves_explicit_ones)
{
    GC_INIT();
    GC_set_disable_automatic_collection(1);
    GC_word before = GC_get_gc_no();
    garbage_fill(64u << 20);
    cr_assert_eq(GC_get_gc_no(), before, "allocation collected with automatic collection off");
    cr_assert_geq(GC_get_heap_size(), (size_t)60 << 20);
    GC_gcollect();
    cr_assert_eq(GC_get_gc_no(), before + 1, "GC_gcollect did not collect");
    cr_assert_eq(GC_collect_a_little(), 0);
    cr_assert_eq(GC_get_gc_no(), before + 1);
    GC_set_disable_automatic_collection(0);
    garbage_fill(256u << 20);
    cr_assert_gt(GC_get_gc_no(), before + 1, "automatic collection did not come back");
}

/* ------------------------------------------------------------------ */
/* More data symbols, as bdwgc's programs write and read them          */

/* GC_quiet: bdwgc's dumps print nothing. */
Test(bdwgc_api, data_quiet_silences_dumps)
{
    cr_assert(!GC_is_init_called());
    GC_quiet = 1;
    GC_INIT();
    GC_MALLOC(100);
    int fd = temp_log();
    GC_set_log_fd(fd);
    GC_dump();
    GC_dump_named("quiet");
    GC_dump_regions();
    GC_dump_finalization();
    GC_quiet = 0;
    GC_dump_named("loud");
    GC_set_log_fd(2);
    char buf[16384];
    read_log(fd, buf, sizeof buf);
    cr_assert(!strstr(buf, "***GC Dump quiet"), "dumped with GC_quiet set: %s", buf);
    cr_assert(strncmp(buf, "***GC Dump loud", 15) == 0, "printed with GC_quiet set: %s", buf);
    close(fd);
}

/* GC_non_gc_bytes counts uncollectable bytes, as bdwgc's allocator and
 * GC_free keep it. */
Test(bdwgc_api, data_non_gc_bytes_counts_uncollectable_objects)
{
    GC_INIT();
    GC_word before = GC_non_gc_bytes;
    void *a = GC_malloc_uncollectable(100);
    void *b = GC_malloc_atomic_uncollectable(200000);
    cr_assert(a && b);
    cr_assert_eq(GC_non_gc_bytes, before + GC_size(a) + GC_size(b));
    cr_assert_eq(GC_get_non_gc_bytes(), GC_non_gc_bytes);
    GC_MALLOC(100);
    cr_assert_eq(GC_non_gc_bytes, before + GC_size(a) + GC_size(b), "a collectable object counted");
    GC_free(a);
    cr_assert_eq(GC_non_gc_bytes, before + GC_size(b));
    GC_free(b);
    cr_assert_eq(GC_non_gc_bytes, before);
}

static struct node *volatile ff_root;

static TU_NOINLINE void ff_live(void)
{
    struct node *head = NULL;
    for (int i = 0; i < 20000; i++) {
        struct node *n = GC_NEW(struct node);
        cr_assert_not_null(n);
        n->next = head;
        head = n;
    }
    ff_root = head;
}

static TU_NOINLINE void ff_churn(size_t bytes)
{
    for (size_t done = 0; done < bytes; done += 64) {
        void **p = GC_MALLOC(64);
        p[0] = p;
    }
}

/* Minor and full collections while a program allocates garbage next to
 * old live data. */
static void full_freq_run(unsigned long *minors, unsigned long *fulls)
{
    ff_live();
    tu_collect();
    if (!lfgc_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    struct lfgc_stats a, b;
    lfgc_get_stats(&a);
    ff_churn(64u << 20);
    lfgc_get_stats(&b);
    *minors = (unsigned long)(b.minor_collections - a.minor_collections);
    *fulls = (unsigned long)(b.collections - a.collections) - *minors;
}

Test(bdwgc_api, data_full_freq_before_init)
{
    cr_assert(!GC_is_init_called());
    GC_full_freq = 1;
    GC_INIT();
    unsigned long minors, fulls;
    full_freq_run(&minors, &fulls);
    cr_assert_gt(minors + fulls, 10, "too few collections to tell");
    cr_assert_leq(minors, fulls + 1, "GC_full_freq = 1 set before GC_INIT: %lu minor "
                  "collections for %lu full ones", minors, fulls);
    cr_assert_gt(minors, 0);
}

/* The default lets many minor collections run between full ones: what
 * the test above tells apart. */
Test(bdwgc_api, full_freq_default)
{
    GC_INIT();
    cr_assert_eq(GC_get_full_freq(), 64);
    unsigned long minors, fulls;
    full_freq_run(&minors, &fulls);
    cr_assert_gt(minors, 4 * (fulls + 1), "%lu minor collections for %lu full ones",
                 minors, fulls);
}

Test(bdwgc_api, full_freq_from_the_environment)
{
    cr_assert(!GC_is_init_called());
    setenv("GC_FULL_FREQUENCY", "3", 1);
    GC_INIT();
    cr_assert_eq(GC_full_freq, 3);
}

/* ------------------------------------------------------------------ */
/* GC_is_visible outside the heap                                       */

static void *visible_static[2];
static void *excluded_static;
static atomic_int vis_state;
static void *volatile vis_local_addr;

static void *vis_thread(void *arg)
{
    (void)arg;
    struct GC_stack_base sb;
    GC_get_stack_base(&sb);
    GC_register_my_thread(&sb);
    void *volatile local = NULL;
    vis_local_addr = (void *)&local;
    atomic_store(&vis_state, 1);
    while (atomic_load(&vis_state) != 2)
        usleep(1000);
    GC_unregister_my_thread();
    return local;
}

static void *visible_locked(void *p)
{
    return GC_is_visible(p);
}

Test(bdwgc_api, is_visible_outside_the_heap)
{
    GC_INIT();
    GC_is_visible_print_proc = visible_fail;
    void *volatile local = NULL;
    GC_is_visible((void *)&visible_static[1]);
    GC_is_visible((void *)&local);
    cr_assert_eq(visible_failures, 0, "static data or this stack not visible");

    void **m = malloc(64);
    cr_assert_not_null(m);
    GC_is_visible(m);
    cr_assert_eq(visible_failures, 1, "memory from the system's malloc passed as visible");
    GC_add_roots(m, m + 8);
    GC_is_visible(m + 2);
    cr_assert_eq(visible_failures, 1, "an added root range not visible");
    GC_remove_roots(m, m + 8);

    GC_is_visible((char *)&visible_static[0] + 1);
    cr_assert_eq(visible_failures, 2, "a misaligned address passed");
    GC_exclude_static_roots(&excluded_static, &excluded_static + 1);
    GC_is_visible(&excluded_static);
    cr_assert_eq(visible_failures, 3, "an excluded static range passed");

    /* Another registered thread's stack. */
    pthread_t t;
    GC_allow_register_threads();
    cr_assert_eq(pthread_create(&t, NULL, vis_thread, NULL), 0);
    while (atomic_load(&vis_state) != 1)
        usleep(1000);
    GC_is_visible(vis_local_addr);
    cr_assert_eq(visible_failures, 3, "another thread's stack not visible");
    atomic_store(&vis_state, 2);
    pthread_join(t, NULL);

    /* With the lock held by the caller: no wait, and no verdict. */
    GC_call_with_alloc_lock(visible_locked, m);
    cr_assert_eq(visible_failures, 3);
    free(m);
}

/* GC_start_incremental_collection collects in incremental (here:
 * generational) mode, and does nothing outside it, as in bdwgc. */
Test(bdwgc_api, start_incremental_collection_collects_in_incremental_mode)
{
    GC_INIT();
    if (!GC_is_incremental_mode())
        TU_SKIP("generational mode unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    GC_word before = GC_get_gc_no();
    GC_start_incremental_collection();
    cr_assert_eq(GC_get_gc_no(), before + 1, "no collection started");
}

Test(bdwgc_api, start_incremental_collection_outside_incremental_mode)
{
    cr_assert(!GC_is_init_called());
    setenv("GC_DISABLE_INCREMENTAL", "1", 1);
    GC_INIT();
    cr_assert(!GC_is_incremental_mode());
    GC_word before = GC_get_gc_no();
    GC_start_incremental_collection();
    cr_assert_eq(GC_get_gc_no(), before);
}

/* lfgc's aborts on bad input go through the program's abort function, as
 * bdwgc's ABORT does. */
Test(bdwgc_api, bad_kind_aborts_through_the_abort_func)
{
    GC_INIT();
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 3);
        GC_set_abort_func(my_abort);
        GC_new_kind(GC_new_free_list(), ((GC_word)1 << 63) | GC_DS_BITMAP, 1, 1);
        _exit(0);
    }
    close(fds[1]);
    char buf[512] = "";
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "a refused kind did not abort");
    cr_assert_gt(n, 0, "the abort function was not called");
    cr_assert(strstr(buf, "abort func: lfgc: GC_new_kind"), "got: %s", buf);
}

/* GC_deinit gives the memory of idle spans back; the collector then says
 * it is not initialised until GC_init, and the heap stays intact and
 * usable meanwhile and after. */
static struct tu_node *volatile deinit_list;

static TU_NOINLINE void deinit_garbage(size_t bytes)
{
    for (size_t done = 0; done < bytes; done += 4096)
        cr_assert_not_null(GC_malloc(4000));
}

static TU_NOINLINE GC_hidden_pointer deinit_dropped(void)
{
    void *p = GC_malloc(100);
    cr_assert_not_null(p);
    return tu_hide(p);
}

Test(bdwgc_api, deinit_gives_back_idle_memory_and_init_restarts)
{
    GC_INIT();
    cr_assert(GC_is_init_called());
    deinit_list = tu_list_build(31, 10000);
    cr_assert_not_null(deinit_list);
    GC_disable();
    deinit_garbage(32 << 20);
    GC_enable();
    tu_collect();                   /* the garbage's spans: idle, still mapped */
    size_t unmapped = GC_get_unmapped_bytes();
    GC_deinit();
    cr_assert_not(GC_is_init_called(), "GC_is_init_called() after GC_deinit");
    cr_assert_geq(GC_get_unmapped_bytes(), unmapped + (16 << 20),
                  "GC_deinit gave back %zu bytes", GC_get_unmapped_bytes() - unmapped);
    GC_deinit();                    /* again: nothing */
    cr_assert_eq(tu_list_check(deinit_list, 31, 10000), 0, "the heap was damaged");
    GC_init();
    cr_assert(GC_is_init_called(), "GC_init after GC_deinit");
    GC_hidden_pointer dropped = deinit_dropped();
    deinit_garbage(8 << 20);        /* in the memory given back: zeroed again */
    tu_collect();
    cr_assert_eq(tu_list_check(deinit_list, 31, 10000), 0, "the list was damaged");
    cr_assert_not(tu_live(dropped), "garbage kept after GC_init");
    deinit_list = NULL;
}
