/* compat.c: the rest of bdwgc 8.2's public interface, for programs built
 * against it (docs/compatibility.md lists every call and its status).
 *
 * - The debugging calls that do what the plain ones do (the allocating
 *   ones, which guard object ends, are in debug_alloc.c).
 * - Settings bdwgc keeps for its own policy (full-collection frequency,
 *   incremental rate, ...): stored and returned; lfgc's policy does not
 *   read them (docs/compatibility.md says what it does instead).
 * - Pointer checks (GC_same_obj, GC_is_visible, ...), statistics,
 *   callbacks, logging. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "gc_mark.h"

/* ------------------------------------------------------------------ */
/* Debugging calls with nothing to check: they forward.               */

#define LF_DEBUG_PARAMS const char *file, int line
#define LF_UNUSED_EXTRAS() ((void)file, (void)line)

LFGC_EXPORT const size_t GC_debug_header_size = 0;

LFGC_EXPORT size_t GC_get_debug_header_size(void)
{
    return 0;
}

LFGC_EXPORT void GC_debug_change_stubborn(const void *p)
{
    GC_change_stubborn(p);
}

LFGC_EXPORT void GC_debug_end_stubborn_change(const void *p)
{
    GC_end_stubborn_change(p);
}

LFGC_EXPORT void GC_debug_ptr_store_and_dirty(void *p, const void *q)
{
    GC_ptr_store_and_dirty(p, q);
}

LFGC_EXPORT void GC_debug_register_displacement(size_t offset)
{
    GC_register_displacement(offset);
}

LFGC_EXPORT void GC_debug_register_finalizer(void *obj, GC_finalization_proc fn, void *cd,
                                             GC_finalization_proc *ofn, void **ocd)
{
    GC_register_finalizer(obj, fn, cd, ofn, ocd);
}

LFGC_EXPORT void GC_debug_register_finalizer_ignore_self(void *obj, GC_finalization_proc fn,
                                                         void *cd, GC_finalization_proc *ofn,
                                                         void **ocd)
{
    GC_register_finalizer_ignore_self(obj, fn, cd, ofn, ocd);
}

LFGC_EXPORT void GC_debug_register_finalizer_no_order(void *obj, GC_finalization_proc fn,
                                                      void *cd, GC_finalization_proc *ofn,
                                                      void **ocd)
{
    GC_register_finalizer_no_order(obj, fn, cd, ofn, ocd);
}

LFGC_EXPORT void GC_debug_register_finalizer_unreachable(void *obj, GC_finalization_proc fn,
                                                         void *cd, GC_finalization_proc *ofn,
                                                         void **ocd)
{
    GC_register_finalizer_unreachable(obj, fn, cd, ofn, ocd);
}

/* ------------------------------------------------------------------ */
/* Settings stored for bdwgc's policy.  Plain loads and stores: bdwgc
 * does not synchronise them either.                                    */

static LF_UNSCANNED_DATA int max_prior_attempts = 1;
static LF_UNSCANNED_DATA size_t min_bytes_allocd = 1;
static LF_UNSCANNED_DATA int rate = 10;
static LF_UNSCANNED unsigned long time_limit_nsec;

LFGC_EXPORT void GC_set_max_prior_attempts(int v) { max_prior_attempts = v; }
LFGC_EXPORT int GC_get_max_prior_attempts(void) { return max_prior_attempts; }
LFGC_EXPORT void GC_set_min_bytes_allocd(size_t v) { min_bytes_allocd = v; }
LFGC_EXPORT size_t GC_get_min_bytes_allocd(void) { return min_bytes_allocd; }
LFGC_EXPORT void GC_set_rate(int v) { rate = v; }
LFGC_EXPORT int GC_get_rate(void) { return rate; }
LFGC_EXPORT void GC_set_full_freq(int v) { GC_full_freq = v; }
LFGC_EXPORT int GC_get_full_freq(void) { return GC_full_freq; }
LFGC_EXPORT void GC_set_dont_precollect(int v) { GC_dont_precollect = v; }
LFGC_EXPORT int GC_get_dont_precollect(void) { return GC_dont_precollect; }
LFGC_EXPORT void GC_set_non_gc_bytes(GC_word v) { GC_non_gc_bytes = v; }
LFGC_EXPORT GC_word GC_get_non_gc_bytes(void) { return GC_non_gc_bytes; }

/* Only explicit collections (GC_gcollect, GC_try_to_collect, ...) and
 * those of a heap that cannot grow (its limit reached) run; the policy
 * (policy.c) grows the heap instead of collecting. */
LF_UNSCANNED bool lf_auto_collect_off;

LFGC_EXPORT void GC_set_disable_automatic_collection(int v)
{
    lock();
    lf_auto_collect_off = v != 0;
    unlock();
}

LFGC_EXPORT int GC_get_disable_automatic_collection(void)
{
    lock();
    int v = lf_auto_collect_off;
    unlock();
    return v;
}

LFGC_EXPORT void GC_set_time_limit_tv(struct GC_timeval_s tv)
{
    GC_time_limit = tv.tv_ms;
    time_limit_nsec = tv.tv_nsec;
}

LFGC_EXPORT struct GC_timeval_s GC_get_time_limit_tv(void)
{
    struct GC_timeval_s tv = { GC_time_limit, time_limit_nsec };
    return tv;
}

/* lfgc never maps its heap executable: a program that needs executable
 * heap objects is told so rather than given a heap that faults. */
LFGC_EXPORT void GC_set_pages_executable(int v)
{
    if (v)
        lf_warn("GC Warning: GC_set_pages_executable(%p): lfgc's heap is never "
                "executable\n", (uintptr_t)v);
}

LFGC_EXPORT int GC_get_pages_executable(void)
{
    return 0;
}

/* lfgc's write tracking (the kernel's soft-dirty bits) protects no page. */
LFGC_EXPORT int GC_incremental_protection_needs(void)
{
    return 0;   /* GC_PROTECTS_NONE */
}

/* lfgc always measures collection time (GC_get_full_gc_total_time). */
LFGC_EXPORT void GC_start_performance_measurement(void)
{
}

/* bdwgc frees what GC_init acquired on some targets (Windows critical
 * sections) and from then on reports itself not initialised.  lfgc gives
 * back the memory of its idle spans: the heap and the objects in it stay
 * valid, and a later GC_init reports the collector initialised again. */
LF_UNSCANNED bool lf_deinit_called;

LFGC_EXPORT void GC_deinit(void)
{
    if (!lf_gc_initialized || __atomic_load_n(&lf_deinit_called, __ATOMIC_RELAXED))
        return;
    lock();
    lf_release_idle_spans(true);
    __atomic_store_n(&lf_deinit_called, true, __ATOMIC_RELAXED);
    unlock();
}

/* ------------------------------------------------------------------ */
/* Sizes and statistics                                                 */

LFGC_EXPORT size_t GC_get_size_map_at(int i)
{
    /* bdwgc's table covers its small objects, up to 2048 bytes. */
    if (i < 0 || i > 2048)
        return (size_t)-1;
    uint64_t c = lf_class_of_size((size_t)i + lf_extra_bytes);
    return c < NUM_CLASSES ? (size_t)lf_regions[c].size : (size_t)-1;
}

LFGC_EXPORT size_t GC_get_obtained_from_os_bytes(void)
{
    return GC_get_heap_size() + GC_get_unmapped_bytes();
}

static size_t fill_prof_stats(struct GC_prof_stats_s *out, size_t size)
{
    struct GC_prof_stats_s s;
    GC_word heap, free_b, unmapped, since, total;
    GC_get_heap_usage_safe(&heap, &free_b, &unmapped, &since, &total);
    s.heapsize_full = heap + unmapped;
    s.free_bytes_full = free_b + unmapped;
    s.unmapped_bytes = unmapped;
    s.bytes_allocd_since_gc = since;
    s.allocd_bytes_before_gc = total - since;
    s.non_gc_bytes = GC_non_gc_bytes;
    s.gc_no = GC_get_gc_no();
    s.markers_m1 = (GC_word)GC_get_parallel();
    /* lfgc counts what the last collection found dead, not what the
     * lazy sweep has reclaimed so far, nor a total before it. */
    struct lfgc_stats st;
    lfgc_get_stats(&st);
    s.bytes_reclaimed_since_gc = st.reclaimed_bytes;
    s.reclaimed_bytes_before_gc = 0;
    s.expl_freed_bytes_since_gc = GC_get_expl_freed_bytes_since_gc();
    s.obtained_from_os_bytes = heap + unmapped;
    /* As bdwgc: fill what the caller's structure has room for, -1 past
     * ours, and say how much is ours. */
    if (size <= sizeof s) {
        memcpy(out, &s, size);
        return size;
    }
    memcpy(out, &s, sizeof s);
    memset((char *)out + sizeof s, 0xff, size - sizeof s);
    return sizeof s;
}

LFGC_EXPORT size_t GC_get_prof_stats(struct GC_prof_stats_s *out, size_t size)
{
    return fill_prof_stats(out, size);
}

LFGC_EXPORT size_t GC_get_prof_stats_unsafe(struct GC_prof_stats_s *out, size_t size)
{
    return fill_prof_stats(out, size);
}

/* ------------------------------------------------------------------ */
/* Heap growth callback                                                 */

LFGC_EXPORT LF_UNSCANNED GC_on_heap_resize_proc GC_on_heap_resize;

LFGC_EXPORT void GC_set_on_heap_resize(GC_on_heap_resize_proc fn)
{
    lock();
    GC_on_heap_resize = fn;
    unlock();
}

LFGC_EXPORT GC_on_heap_resize_proc GC_get_on_heap_resize(void)
{
    lock();
    GC_on_heap_resize_proc fn = GC_on_heap_resize;
    unlock();
    return fn;
}

LF_MALLOC_TEXT void lf_heap_resized(uint64_t heap_bytes)
{
    GC_on_heap_resize_proc fn = GC_on_heap_resize;
    if (fn)
        fn((GC_word)heap_bytes);
}

/* ------------------------------------------------------------------ */
/* Aborts and the log                                                    */

static void default_abort_func(const char *msg)
{
    if (msg) {
        (void)!write(2, msg, strlen(msg));
        (void)!write(2, "\n", 1);
    }
}

/* bdwgc keeps the abort function in GC_on_abort, a variable its private
 * gc_priv.h names (its ABORT calls through it), so programs built with
 * that header (bdwgc's own gctest and disclaim_bench) hold a copy of it
 * and need it exported.  The library reads it through the GOT, so that a
 * program's copy is the one used. */
LFGC_EXPORT LF_UNSCANNED_DATA GC_abort_func GC_on_abort = default_abort_func;

LFGC_EXPORT void GC_set_abort_func(GC_abort_func fn)
{
    if (!fn) {
        lf_warn("GC Warning: GC_set_abort_func(NULL) ignored%s\n", (uintptr_t)"");
        return;
    }
    lock();
    GC_on_abort = fn;
    unlock();
}

LFGC_EXPORT GC_abort_func GC_get_abort_func(void)
{
    lock();
    GC_abort_func fn = GC_on_abort;
    unlock();
    return fn;
}

void lf_abort(const char *msg)
{
    GC_abort_func fn = GC_on_abort;
    if (fn)
        fn(msg);
    abort();
}

LFGC_EXPORT void GC_abort_on_oom(void)
{
    lf_abort("Insufficient memory for the allocation");
}

LF_UNSCANNED_DATA int lf_log_fd = 2;

LFGC_EXPORT void GC_set_log_fd(int fd)
{
    lf_log_fd = fd;
}

/* bdwgc's printf-like output calls, declared only in its private
 * gc_priv.h but exported by its libgc.so.1 and called by programs built
 * with that header (bdwgc's gctest and test_cpp).  As there, each message
 * is formatted into a buffer of its own and written whole, without stdio:
 * GC_printf to standard output unless GC_quiet is set, GC_err_printf to
 * standard error, GC_log_printf to the log (GC_set_log_fd). */
static void vprint_to(int fd, const char *fmt, va_list ap)
{
    char buf[1024];
    int len = vsnprintf(buf, sizeof buf, fmt, ap);
    if (len < 0)
        return;
    lf_write_all(fd, buf, (size_t)len < sizeof buf ? (size_t)len : sizeof buf - 1);
}

LFGC_EXPORT void GC_printf(const char *fmt, ...)
{
    if (GC_quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprint_to(STDOUT_FILENO, fmt, ap);
    va_end(ap);
}

LFGC_EXPORT void GC_err_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint_to(STDERR_FILENO, fmt, ap);
    va_end(ap);
}

LFGC_EXPORT void GC_log_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint_to(lf_log_fd, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Dumps                                                                 */

/* As bdwgc: no lock, so that a program holding it (GC_call_with_alloc_lock)
 * may dump. */
LFGC_EXPORT void GC_dump_named(const char *name)
{
    lf_ensure_init();
    lf_dump(name);
}

LFGC_EXPORT void GC_dump_finalization(void)
{
    if (GC_quiet)
        return;
    /* The tables' sizes are what GC_PRINT_STATS reports after each
     * collection; their entries are not listed. */
    dprintf(lf_log_fd, "lfgc: GC_dump_finalization lists no entries (set GC_PRINT_STATS "
            "for the tables' sizes)\n");
}

/* ------------------------------------------------------------------ */
/* Pointer checks (bdwgc's GC_DEBUG forms of GC_PTR_ADD, GC_PTR_STORE). */

static void default_same_obj_print_proc(void *p, void *q)
{
    dprintf(2, "lfgc: GC_same_obj(%p, %p): not pointers into the same object\n", p, q);
    lf_abort("GC_same_obj test failed");
}

static void default_is_valid_displacement_print_proc(void *p)
{
    dprintf(2, "lfgc: GC_is_valid_displacement(%p): not a valid pointer into a heap object\n",
            p);
    lf_abort("GC_is_valid_displacement test failed");
}

static void default_is_visible_print_proc(void *p)
{
    dprintf(2, "lfgc: GC_is_visible(%p): the collector does not scan this location\n", p);
    lf_abort("GC_is_visible test failed");
}

LFGC_EXPORT LF_UNSCANNED_DATA void (*GC_same_obj_print_proc)(void *, void *) = default_same_obj_print_proc;
LFGC_EXPORT LF_UNSCANNED_DATA void (*GC_is_valid_displacement_print_proc)(void *) =
    default_is_valid_displacement_print_proc;
LFGC_EXPORT LF_UNSCANNED_DATA void (*GC_is_visible_print_proc)(void *) = default_is_visible_print_proc;

/* The object holding p in use: its base, or NULL (outside the heap, or a
 * free slot). */
static void *live_base(const void *p)
{
    void *base = lf_base(p);
    return base && slot_is_free(base) ? NULL : base;
}

LFGC_EXPORT void *GC_same_obj(void *p, void *q)
{
    void *bq = live_base(q);
    if (!bq) {
        /* q outside the heap: p must be too. */
        if (live_base(p))
            GC_same_obj_print_proc(p, q);
        return p;
    }
    if ((char *)p < (char *)bq || (char *)p >= (char *)bq + GC_size(bq))
        GC_same_obj_print_proc(p, q);
    return p;
}

LFGC_EXPORT void *GC_pre_incr(void **p, ptrdiff_t how_much)
{
    void *initial = *p;
    void *result = GC_same_obj((char *)initial + how_much, initial);
    *p = result;
    return result;
}

LFGC_EXPORT void *GC_post_incr(void **p, ptrdiff_t how_much)
{
    void *initial = *p;
    *p = GC_same_obj((char *)initial + how_much, initial);
    return initial;
}

/* A pointer is valid when it is outside the heap or points into an
 * object in use: anywhere in it (lfgc finds the base of any interior
 * pointer), or, with interior pointers off, at its base or a registered
 * displacement. */
LFGC_EXPORT void *GC_is_valid_displacement(void *p)
{
    if (!lowfat_is_heap_ptr(p))
        return p;
    char *base = live_base(p);
    if (!base || (lf_base_only && !displacement_valid((uint64_t)((char *)p - base))))
        GC_is_valid_displacement_print_proc(p);
    return p;
}

/* A location the collector scans: an aligned word of a heap object it
 * scans (not of a pointer-free one, not past a length descriptor), of the
 * static data or added roots (exclusions left out), or of a registered
 * thread's stack.  Outside the heap the answer needs the lock: a caller
 * that may hold it (GC_PTR_STORE inside GC_call_with_alloc_lock) is not
 * made to wait, and such an address passes unchecked while another
 * thread holds it (bdwgc: "may erroneously succeed in hard cases"). */
LFGC_EXPORT void *GC_is_visible(void *p)
{
    if ((uintptr_t)p & (sizeof(void *) - 1)) {
        GC_is_visible_print_proc(p);
        return p;
    }
    if (!lowfat_is_heap_ptr(p)) {
        lf_ensure_init();
        if (pthread_mutex_trylock(&lf_gc_lock) != 0)
            return p;
        bool seen = lf_stacks_contain((uintptr_t)p) || lf_roots_contain((uintptr_t)p);
        unlock();
        if (!seen)
            GC_is_visible_print_proc(p);
        return p;
    }
    void *base = live_base(p);
    if (!base) {
        GC_is_visible_print_proc(p);
        return p;
    }
    unsigned k = lf_chunk_map[chunk_entry((uintptr_t)base)];
    if (k == 0) {
        GC_is_visible_print_proc(p);
        return p;
    }
    const struct kind *kd = &lf_kinds[k - 1];
    uint64_t len = kind_scan_len(kd, base, GC_size(base));
    if ((char *)p + sizeof(void *) > (char *)base + len)
        GC_is_visible_print_proc(p);
    return p;
}

/* ------------------------------------------------------------------ */
/* Reachable objects                                                    */

struct enumerate {
    GC_reachable_object_proc proc;
    void *client_data;
};

static int enumerate_one(void *base, size_t bytes, unsigned kind, void *arg)
{
    struct enumerate *e = arg;
    /* Marked by the last collection (or since); uncollectable objects
     * are reachable by definition. */
    if (lf_kinds[kind].uncollectable || lf_mark_is_set(base))
        e->proc(base, bytes, e->client_data);
    return 0;
}

/* As bdwgc: the objects the last collection marked, in use now, with
 * their sizes; the caller holds the lock.  Threads sweeping without it
 * are held meanwhile, so that no span changes under the walk. */
LFGC_EXPORT void GC_enumerate_reachable_objects_inner(GC_reachable_object_proc proc,
                                                      void *client_data)
{
    refused_check();
    if (!proc || !lf_heap_initialized)
        return;
    struct enumerate e = { proc, client_data };
    bool held = AO_load(&lf_gc_pending);    /* by a collection in progress */
    if (!held)
        lf_sweepers_hold();
    lf_heap_walk(enumerate_one, &e);
    if (!held)
        lf_sweepers_release();
}

/* bdwgc's temporary roots are the data of dynamic libraries, re-listed
 * at each collection; lfgc lists them afresh every time, and keeps none. */
LFGC_EXPORT int GC_is_tmp_root(void *p)
{
    (void)p;
    return 0;
}

/* Clears the stack below the caller's frame, as bdwgc does before
 * returning from allocation; returns arg. */
LFGC_EXPORT void *GC_clear_stack(void *arg)
{
    volatile char buf[2048];
    memset((char *)buf, 0, sizeof buf);
    __asm__ __volatile__("" : : "r"(buf) : "memory");
    return arg;
}
