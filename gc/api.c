/* api.c: the rest of the bdwgc-compatible surface: settings, the
 * allocation variants, out-of-memory and warning hooks. */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static void *default_oom_fn(size_t bytes)
{
    (void)bytes;
    return NULL;
}

LFGC_EXPORT LF_UNSCANNED GC_word GC_gc_no;
LFGC_EXPORT LF_UNSCANNED_DATA int GC_all_interior_pointers = 1;
LFGC_EXPORT LF_UNSCANNED int GC_no_dls;
LFGC_EXPORT LF_UNSCANNED int GC_dont_gc;
LFGC_EXPORT LF_UNSCANNED_DATA GC_word GC_free_space_divisor = 3;
LFGC_EXPORT LF_UNSCANNED GC_word GC_max_retries;
LFGC_EXPORT LF_UNSCANNED int GC_dont_expand;
LFGC_EXPORT LF_UNSCANNED int GC_dont_precollect;
LFGC_EXPORT LF_UNSCANNED_DATA int GC_java_finalization = 1;
LFGC_EXPORT LF_UNSCANNED int GC_finalize_on_demand;
/* Minor collections between full ones, at most (policy.c); bdwgc's 19 is
 * its own policy's. */
LFGC_EXPORT LF_UNSCANNED_DATA int GC_full_freq = 64;
LFGC_EXPORT LF_UNSCANNED int GC_use_entire_heap;
LFGC_EXPORT LF_UNSCANNED int GC_quiet;
LFGC_EXPORT LF_UNSCANNED unsigned long GC_time_limit;
LFGC_EXPORT LF_UNSCANNED GC_word GC_non_gc_bytes;
/* Bounds that are no heap address themselves, as bdwgc's are not (a word
 * below the heap, one past its end): a program scans its copy of them. */
LFGC_EXPORT LF_UNSCANNED_DATA void *GC_least_plausible_heap_addr = (void *)(LOWFAT_HEAP_START - sizeof(void *));
LFGC_EXPORT LF_UNSCANNED_DATA void *GC_greatest_plausible_heap_addr = (void *)LOWFAT_HEAP_END;
LFGC_EXPORT LF_UNSCANNED_DATA GC_oom_func GC_oom_fn = default_oom_fn;

static LF_UNSCANNED_DATA GC_warn_proc warn_proc = GC_default_warn_proc;

LFGC_EXPORT void GC_init(void)
{
    lf_ensure_init();
    __atomic_store_n(&lf_deinit_called, false, __ATOMIC_RELAXED);
}

LFGC_EXPORT int GC_is_init_called(void)
{
    return lf_gc_initialized && !__atomic_load_n(&lf_deinit_called, __ATOMIC_RELAXED);
}

LFGC_EXPORT unsigned GC_get_version(void)
{
    return (GC_VERSION_MAJOR << 16) | (GC_VERSION_MINOR << 8) | GC_VERSION_MICRO;
}

/* ------------------------------------------------------------------ */
/* Allocation variants                                                  */

LFGC_EXPORT void *GC_malloc_uncollectable(size_t bytes)
{
    return lf_alloc_kind(bytes, KIND_UNCOLLECTABLE);
}

LFGC_EXPORT void *GC_malloc_atomic_uncollectable(size_t bytes)
{
    return lf_alloc_kind(bytes, KIND_AUNCOLLECTABLE);
}

LFGC_EXPORT void *GC_malloc_ignore_off_page(size_t bytes)
{
    return GC_malloc(bytes);
}

LFGC_EXPORT void *GC_malloc_atomic_ignore_off_page(size_t bytes)
{
    return GC_malloc_atomic(bytes);
}

LFGC_EXPORT void *GC_memalign(size_t align, size_t bytes)
{
    if (align == 0 || (align & (align - 1)))
        return NULL;
    return lf_alloc_aligned(align, bytes, KIND_NORMAL);
}

LFGC_EXPORT int GC_posix_memalign(void **result, size_t align, size_t bytes)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = lf_alloc_aligned(align, bytes, KIND_NORMAL);
    if (!p)
        return ENOMEM;
    *result = p;
    return 0;
}

/* A copy of at most n bytes of s, NUL-terminated, in memory from alloc
 * (the plain and debugging strdup calls differ only there). */
char *lf_strndup_with(const char *s, size_t n, void *(*alloc)(size_t))
{
    if (!s)
        return NULL;
    size_t len = strnlen(s, n);
    if (len == SIZE_MAX)
        return lf_oom(len);
    char *p = alloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = 0;
    }
    return p;
}

LFGC_EXPORT char *GC_strdup(const char *s)
{
    return lf_strndup_with(s, SIZE_MAX, GC_malloc_atomic);
}

LFGC_EXPORT char *GC_strndup(const char *s, size_t n)
{
    return lf_strndup_with(s, n, GC_malloc_atomic);
}

/* ------------------------------------------------------------------ */
/* Collection control                                                   */

LFGC_EXPORT void GC_disable(void)
{
    lock();
    GC_dont_gc++;
    unlock();
}

LFGC_EXPORT void GC_enable(void)
{
    lock();
    if (GC_dont_gc > 0)
        GC_dont_gc--;
    else
        lf_warn("GC Warning: GC_enable called without GC_disable (count %ld)\n",
             (uintptr_t)GC_dont_gc);
    unlock();
}

LFGC_EXPORT int GC_is_disabled(void)
{
    return GC_dont_gc != 0;
}

static LF_UNSCANNED GC_stop_func default_stop_func;
static LF_UNSCANNED int force_unmap;

LFGC_EXPORT void GC_set_stop_func(GC_stop_func fn) { default_stop_func = fn; }
LFGC_EXPORT GC_stop_func GC_get_stop_func(void) { return default_stop_func; }

LFGC_EXPORT int GC_try_to_collect(GC_stop_func stop_func)
{
    GC_stop_func fn = stop_func ? stop_func : default_stop_func;
    if (GC_dont_gc || (fn && fn()))
        return 0;
    uint64_t before = GC_gc_no;
    GC_gcollect();
    return GC_gc_no != before;
}

LFGC_EXPORT void GC_set_force_unmap_on_gcollect(int v) { force_unmap = v; }
LFGC_EXPORT int GC_get_force_unmap_on_gcollect(void) { return force_unmap; }
bool lf_gcollect_unmaps(void) { return force_unmap != 0; }

LFGC_EXPORT void GC_noop1(GC_word v)
{
    __asm__ volatile("" : : "r"(v) : "memory");
}

LFGC_EXPORT void *GC_malloc_stubborn(size_t bytes) { return GC_malloc(bytes); }
LFGC_EXPORT void GC_change_stubborn(const void *p) { (void)p; }


LFGC_EXPORT void GC_set_time_limit(unsigned long ms) { GC_time_limit = ms; }
LFGC_EXPORT unsigned long GC_get_time_limit(void) { return GC_time_limit; }

LFGC_EXPORT void GC_set_free_space_divisor(GC_word divisor)
{
    if (divisor > 0)
        GC_free_space_divisor = divisor;
}

LFGC_EXPORT GC_word GC_get_free_space_divisor(void)
{
    return GC_free_space_divisor;
}

LFGC_EXPORT void GC_set_max_heap_size(GC_word bytes)
{
    lock();
    lf_hs.max_heap = bytes;
    unlock();
}

LFGC_EXPORT int GC_expand_hp(size_t bytes)
{
    lf_ensure_init();
    lock();
    bool ok = lf_heap_expand(bytes);
    unlock();
    return ok;
}

LFGC_EXPORT void GC_set_dont_expand(int v) { GC_dont_expand = v; }
LFGC_EXPORT int GC_get_dont_expand(void) { return GC_dont_expand; }
LFGC_EXPORT void GC_set_max_retries(GC_word v) { GC_max_retries = v; }
LFGC_EXPORT GC_word GC_get_max_retries(void) { return GC_max_retries; }
LFGC_EXPORT void GC_set_no_dls(int v) { GC_no_dls = v; }
LFGC_EXPORT int GC_get_no_dls(void) { return GC_no_dls; }

LFGC_EXPORT void GC_set_all_interior_pointers(int v)
{
    /* The collector's objects are sized with it: fixed by GC_init or by an
     * uncollectable allocation before it.  Malloc's objects do not depend
     * on it (a runtime under liblfgc-malloc.so has malloc'ed before it
     * sets this, as Guile does, and before its GC_init). */
    if (lf_gc_initialized || lf_gc_objects_sized) {
        if ((v != 0) != (lf_extra_bytes != 0))
            lf_warn("GC Warning: GC_set_all_interior_pointers(%p) after GC_init or "
                 "the first allocation: ignored\n", (uintptr_t)v);
        return;
    }
    GC_all_interior_pointers = v;
    if (lf_heap_initialized)
        lf_interior_setup();
}

LFGC_EXPORT int GC_get_all_interior_pointers(void)
{
    return GC_all_interior_pointers;
}

LF_UNSCANNED bool lf_base_only;
LF_UNSCANNED_BSS uint8_t lf_valid_displacements[LF_MAX_DISPLACEMENT];

/* bdwgc keeps a table of valid offsets as large as its block and aborts
 * past it; so does lfgc, whose table the marker reads only while interior
 * pointers are off.  Recorded in either mode. */
LFGC_EXPORT void GC_register_displacement(size_t offset)
{
    if (offset >= LF_MAX_DISPLACEMENT) {
        char msg[128];
        snprintf(msg, sizeof msg, "GC_register_displacement(%zu): displacements must be "
                 "below %u", offset, LF_MAX_DISPLACEMENT);
        lf_abort(msg);
    }
    lock();
    lf_valid_displacements[offset] = 1;
    unlock();
}

LFGC_EXPORT void *GC_call_with_alloc_lock(GC_fn_type fn, void *client_data)
{
    lf_ensure_init();
    lock();
    void *r = fn(client_data);
    lf_unlock_to_caller();
    return r;
}

/* ------------------------------------------------------------------ */
/* Out of memory and warnings                                           */

LFGC_EXPORT void GC_set_oom_fn(GC_oom_func fn)
{
    GC_oom_fn = fn ? fn : default_oom_fn;
}

LFGC_EXPORT GC_oom_func GC_get_oom_fn(void)
{
    return GC_oom_fn;
}

LFGC_EXPORT void GC_default_warn_proc(char *msg, GC_word arg)
{
    fprintf(stderr, msg, (void *)arg);
}

LFGC_EXPORT void GC_ignore_warn_proc(char *msg, GC_word arg)
{
    (void)msg;
    (void)arg;
}

LFGC_EXPORT void GC_set_warn_proc(GC_warn_proc proc)
{
    warn_proc = proc ? proc : GC_default_warn_proc;
}

LFGC_EXPORT GC_warn_proc GC_get_warn_proc(void)
{
    return warn_proc;
}

/* Messages produced while the world is stopped.  A stopped thread may
 * hold stdio's lock or malloc's, which fprintf (and a program's warn
 * proc) may take: the collector would wait for it for ever.  What goes
 * to stderr is formatted here into a fixed buffer and written with
 * write(2) at once (a warning that a thread does not answer is wanted
 * while it does not); calls of a program's warn proc are queued and made
 * after the world restarts, by the thread that stopped it.  The queue is
 * touched only by that thread, with the lock held. */
#define DEFERRED_MAX 16
static LF_UNSCANNED_BSS struct { const char *fmt; uintptr_t arg; } deferred[DEFERRED_MAX];
static LF_UNSCANNED unsigned deferred_count;
static LF_UNSCANNED uint64_t deferred_dropped;

static size_t put_str(char *buf, size_t at, size_t size, const char *s)
{
    while (*s && at + 1 < size)
        buf[at++] = *s++;
    return at;
}

size_t lf_put_num(char *buf, size_t at, size_t size, uint64_t v, unsigned base, bool neg)
{
    char digits[24];
    int n = 0;
    do {
        digits[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    if (neg && at + 1 < size)
        buf[at++] = '-';
    while (n && at + 1 < size)
        buf[at++] = digits[--n];
    return at;
}

/* fmt with its conversion of arg, into buf (NUL-terminated), without
 * stdio or malloc: %p, %s and %d, %u, %x with an optional l or z. */
static void format_message(char *buf, size_t size, const char *fmt, uintptr_t arg)
{
    size_t at = 0;
    for (const char *f = fmt; *f && at + 1 < size; f++) {
        if (*f != '%') {
            buf[at++] = *f;
            continue;
        }
        const char *c = f + 1;
        while (*c == 'l' || *c == 'z')
            c++;
        bool is_long = c > f + 1;
        uint64_t v = is_long ? (uint64_t)arg : (uint32_t)arg;
        switch (*c) {
        case 'p':
            at = arg ? lf_put_num(buf, put_str(buf, at, size, "0x"), size, arg, 16, false)
                     : put_str(buf, at, size, "(nil)");
            break;
        case 'd':
        case 'i': {
            int64_t s = is_long ? (int64_t)arg : (int32_t)arg;
            at = lf_put_num(buf, at, size, s < 0 ? -(uint64_t)s : (uint64_t)s, 10, s < 0);
            break;
        }
        case 'u': at = lf_put_num(buf, at, size, v, 10, false); break;
        case 'x': at = lf_put_num(buf, at, size, v, 16, false); break;
        case 's': at = put_str(buf, at, size, arg ? (const char *)arg : "(null)"); break;
        case '%': buf[at++] = '%'; break;
        default:                        /* not ours: copied as it is */
            buf[at++] = '%';
            continue;
        }
        f = c;
    }
    buf[at] = 0;
}

void lf_write_all(int fd, const char *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n <= 0 && errno != EINTR)
            return;
        if (n > 0)
            done += (size_t)n;
    }
}

static void write_now(int fd, const char *fmt, uintptr_t arg)
{
    char buf[512];
    format_message(buf, sizeof buf, fmt, arg);
    lf_write_all(fd, buf, strlen(buf));
}

static void message(bool to_proc, const char *fmt, uintptr_t arg)
{
    GC_warn_proc proc = warn_proc;
    if (to_proc && proc == GC_ignore_warn_proc)
        return;
    if (lf_world_stopped_by_self()) {
        if (!to_proc || proc == GC_default_warn_proc) {
            write_now(to_proc ? STDERR_FILENO : lf_log_fd, fmt, arg);
        } else if (deferred_count < DEFERRED_MAX) {
            deferred[deferred_count].fmt = fmt;
            deferred[deferred_count].arg = arg;
            deferred_count++;
        } else {
            deferred_dropped++;
        }
        return;
    }
    int cancel = nocancel_begin();      /* the lock may be held */
    if (to_proc) {
        proc((char *)fmt, (GC_word)arg);
    } else {
        char buf[512];
        format_message(buf, sizeof buf, fmt, arg);
        if (lf_log_fd == 2)
            fputs(buf, stderr);
        else
            (void)!write(lf_log_fd, buf, strlen(buf));
    }
    nocancel_end(cancel);
}

void lf_warn(const char *fmt, uintptr_t arg)
{
    message(true, fmt, arg);
}

void lf_log(const char *fmt, uintptr_t arg)
{
    message(false, fmt, arg);
}

void lf_messages_flush(void)
{
    unsigned n = deferred_count;
    uint64_t dropped = deferred_dropped;
    deferred_count = 0;
    deferred_dropped = 0;
    for (unsigned i = 0; i < n; i++)
        lf_warn(deferred[i].fmt, deferred[i].arg);
    if (dropped)
        lf_warn("GC Warning: %lu more warnings while the world was stopped were dropped\n",
                (uintptr_t)dropped);
}
