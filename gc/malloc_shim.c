/* malloc_shim.c: liblfgc-malloc, the C library's malloc family and C++'s
 * operator new and delete on lfgc's manual mode.
 *
 * A thin library: every function is a tail call of its lfgc_ namesake in
 * liblfgc.so.0, on which it depends, so that a process that also uses the
 * collector holds one copy of lfgc and one heap (docs/design.md, "One
 * instance per process").  Built with -fno-plt, the call is one indirect
 * jump through the GOT.
 *
 * operator new needs the C++ runtime only when it fails: std::get_new_handler
 * and std::__throw_bad_alloc are weak references, bound when libstdc++ is
 * in the process (it is, in any C++ program), so that C programs
 * preloading this library do not load libstdc++.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"
#include "lfgc_malloc.h"

#define EXPORT __attribute__((visibility("default")))

/* free's fast path runs here, not behind a jump to lfgc_free: it reads
 * nothing but liblfgc's thread cache, through its private alias (see
 * LF_PRIVATE_ABI in internal.h). */
extern __thread struct thread_cache *LF_PRIVATE_TLS_CACHE(LF_PRIVATE_ABI)
    __attribute__((tls_model("initial-exec")));

extern const uint64_t lfgc_private_layout;
extern bool lfgc_private_heap_usable(void);

static __attribute__((noreturn)) void stop(const char *msg, size_t len)
{
    ssize_t w = write(2, msg, len);
    (void)w;
    abort();
}

/* Before the program's constructors: a liblfgc.so.0 of another build
 * than this library's would have its thread cache laid out otherwise,
 * and free's fast path would write into the wrong fields.  And a heap
 * that could not be laid out (an address-space limit: liblfgc.so.0 said
 * why) leaves free's fast path no map to read: every malloc would fail,
 * and the first free of memory the loader allocated would fault. */
__attribute__((constructor(101))) static void layout_check(void)
{
    static const char other_build[] =
        "lfgc-malloc: liblfgc-malloc.so and liblfgc.so.0 come from different builds of "
        "lfgc (their thread caches are laid out differently); aborting\n";
    static const char no_heap[] =
        "lfgc-malloc: lfgc has no heap in this process (see above): the program cannot "
        "allocate through it; aborting\n";
    if (lfgc_private_layout != LF_PRIVATE_LAYOUT)
        stop(other_build, sizeof other_build - 1);
    if (!lfgc_private_heap_usable())
        stop(no_heap, sizeof no_heap - 1);
}

static inline __attribute__((always_inline)) void fast_free(void *p)
{
    if (likely(lf_free_fast(p, LF_PRIVATE_TLS_CACHE(LF_PRIVATE_ABI))))
        return;
    lfgc_private_free_slow(p);
}

EXPORT void *malloc(size_t n) { return lfgc_malloc(n); }
EXPORT void free(void *p) { fast_free(p); }
EXPORT void *calloc(size_t count, size_t size) { return lfgc_calloc(count, size); }
EXPORT void *realloc(void *p, size_t n) { return lfgc_realloc(p, n); }
EXPORT void *reallocarray(void *p, size_t count, size_t size)
{
    return lfgc_reallocarray(p, count, size);
}
EXPORT void *memalign(size_t align, size_t n) { return lfgc_memalign(align, n); }
EXPORT void *aligned_alloc(size_t align, size_t n) { return lfgc_aligned_alloc(align, n); }
EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    return lfgc_posix_memalign(out, align, n);
}
EXPORT void *valloc(size_t n) { return lfgc_valloc(n); }
EXPORT void *pvalloc(size_t n) { return lfgc_pvalloc(n); }
EXPORT size_t malloc_usable_size(void *p) { return lfgc_malloc_usable_size(p); }
EXPORT int malloc_trim(size_t pad) { return lfgc_malloc_trim(pad); }
EXPORT struct mallinfo2 mallinfo2(void) { return lfgc_mallinfo2(); }
EXPORT struct mallinfo mallinfo(void) { return lfgc_mallinfo(); }
EXPORT void malloc_stats(void) { lfgc_malloc_stats(); }
EXPORT int malloc_info(int options, FILE *fp) { return lfgc_malloc_info(options, fp); }
EXPORT int mallopt(int param, int value) { return lfgc_mallopt(param, value); }
/* An old name of free that some programs still call. */
EXPORT void cfree(void *p) { fast_free(p); }

/* ------------------------------------------------------------------ */
/* C++                                                                  */

typedef void (*lf_new_handler)(void);
extern lf_new_handler lf_get_new_handler(void) __asm__("_ZSt15get_new_handlerv")
    __attribute__((weak));
extern void lf_throw_bad_alloc(void) __asm__("_ZSt17__throw_bad_allocv")
    __attribute__((weak, noreturn));

static __attribute__((noreturn)) void no_runtime(void)
{
    static const char msg[] = "lfgc-malloc: operator new: out of memory, and no C++ runtime "
                              "to throw std::bad_alloc; aborting\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    abort();
}

/* As the standard says: call the new handler while there is one and the
 * allocation fails; without one, throw std::bad_alloc (or, nothrow,
 * return NULL).  A nothrow new whose handler throws returns NULL
 * ([new.delete.single]: it calls operator new(size) and returns NULL if
 * that does not return normally): C cannot catch, so that case is handed
 * to the C++ runtime's own nothrow operator (libstdc++: try { return
 * ::operator new(n); } catch (...) { return nullptr; }), whose call of
 * ::operator new comes back to ours. */
static __attribute__((noinline)) void *new_retry(size_t align, size_t n, int nothrow)
{
    for (;;) {
        void *p = align ? lfgc_aligned_alloc(align, n) : lfgc_malloc(n);
        if (p)
            return p;
        lf_new_handler h = lf_get_new_handler ? lf_get_new_handler() : NULL;
        if (h && nothrow) {
            void *next = dlsym(RTLD_NEXT, align ? "_ZnwmSt11align_val_tRKSt9nothrow_t"
                                                : "_ZnwmRKSt9nothrow_t");
            if (next) {
                static const char nt = 0;
                return align ? ((void *(*)(size_t, size_t, const void *))next)(n, align, &nt)
                             : ((void *(*)(size_t, const void *))next)(n, &nt);
            }
        }
        if (!h) {
            if (nothrow)
                return NULL;
            if (lf_throw_bad_alloc)
                lf_throw_bad_alloc();
            no_runtime();
        }
        h();
    }
}

static inline void *new_plain(size_t n)
{
    void *p = lfgc_malloc(n);
    return p ? p : new_retry(0, n, 0);
}

static inline void *new_aligned(size_t n, size_t align, int nothrow)
{
    if (!align || (align & (align - 1)))
        return nothrow ? NULL : new_retry(align ? align : 1, n, nothrow);
    void *p = lfgc_aligned_alloc(align, n);
    return p ? p : new_retry(align, n, nothrow);
}

#define NEW(name, ...) EXPORT void *name(__VA_ARGS__)
#define DEL(name, ...) EXPORT void name(__VA_ARGS__)
struct lf_nothrow;
NEW(_Znwm, size_t n) { return new_plain(n); }
NEW(_Znam, size_t n) { return new_plain(n); }
NEW(_ZnwmRKSt9nothrow_t, size_t n, const struct lf_nothrow *t)
{
    (void)t;
    void *p = lfgc_malloc(n);
    return p ? p : new_retry(0, n, 1);
}
NEW(_ZnamRKSt9nothrow_t, size_t n, const struct lf_nothrow *t)
{
    (void)t;
    void *p = lfgc_malloc(n);
    return p ? p : new_retry(0, n, 1);
}
NEW(_ZnwmSt11align_val_t, size_t n, size_t a) { return new_aligned(n, a, 0); }
NEW(_ZnamSt11align_val_t, size_t n, size_t a) { return new_aligned(n, a, 0); }
NEW(_ZnwmSt11align_val_tRKSt9nothrow_t, size_t n, size_t a, const struct lf_nothrow *t)
{
    (void)t;
    return new_aligned(n, a, 1);
}
NEW(_ZnamSt11align_val_tRKSt9nothrow_t, size_t n, size_t a, const struct lf_nothrow *t)
{
    (void)t;
    return new_aligned(n, a, 1);
}
DEL(_ZdlPv, void *p) { fast_free(p); }
DEL(_ZdaPv, void *p) { fast_free(p); }
DEL(_ZdlPvm, void *p, size_t n) { (void)n; fast_free(p); }
DEL(_ZdaPvm, void *p, size_t n) { (void)n; fast_free(p); }
DEL(_ZdlPvRKSt9nothrow_t, void *p, const struct lf_nothrow *t) { (void)t; fast_free(p); }
DEL(_ZdaPvRKSt9nothrow_t, void *p, const struct lf_nothrow *t) { (void)t; fast_free(p); }
DEL(_ZdlPvSt11align_val_t, void *p, size_t a) { (void)a; fast_free(p); }
DEL(_ZdaPvSt11align_val_t, void *p, size_t a) { (void)a; fast_free(p); }
DEL(_ZdlPvmSt11align_val_t, void *p, size_t n, size_t a) { (void)n; (void)a; fast_free(p); }
DEL(_ZdaPvmSt11align_val_t, void *p, size_t n, size_t a) { (void)n; (void)a; fast_free(p); }
DEL(_ZdlPvSt11align_val_tRKSt9nothrow_t, void *p, size_t a, const struct lf_nothrow *t)
{
    (void)a;
    (void)t;
    fast_free(p);
}
DEL(_ZdaPvSt11align_val_tRKSt9nothrow_t, void *p, size_t a, const struct lf_nothrow *t)
{
    (void)a;
    (void)t;
    fast_free(p);
}
