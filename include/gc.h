/* gc.h: lfgc's interface, compatible with the Boehm-Demers-Weiser collector.
 *
 * A program written for bdwgc's gc.h compiles against this header and links
 * with -llfgc.  Semantics follow bdwgc's documentation; where lfgc differs it
 * says so here and in docs/api.md.
 */
#ifndef LFGC_GC_H
#define LFGC_GC_H

#include <stddef.h>

/* As in bdwgc: on Linux, GC_THREADS means POSIX threads, and code written
 * for bdwgc tests these names. */
#if defined(GC_THREADS) && !defined(GC_PTHREADS)
# define GC_PTHREADS 1
#endif
#if defined(GC_PTHREADS) && !defined(GC_LINUX_THREADS)
# define GC_LINUX_THREADS 1
#endif

#if defined(GC_THREADS) || defined(GC_PTHREADS)
# include <dlfcn.h>
# include <pthread.h>
# include <signal.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* bdwgc's decoration macros, empty here, kept because client code uses them
 * in its own declarations of callbacks. */
#ifndef GC_API
# define GC_API extern __attribute__((visibility("default")))
#endif
#define GC_CALL
#define GC_CALLBACK
#define GC_ATTR_MALLOC __attribute__((malloc))
#define GC_ATTR_ALLOC_SIZE(n) __attribute__((alloc_size(n)))
#define GC_ATTR_DEPRECATED
#define GC_ATTR_CONST __attribute__((const))
#define GC_ATTR_NONNULL(n) __attribute__((nonnull(n)))
#define GC_ATTR_CALLOC_SIZE(n, s) __attribute__((alloc_size(n, s)))
/* Also bdwgc's, used by its client code (and its test_cpp) in their own
 * declarations: a compiler-version test, `explicit` and `noexcept` for C++
 * code that must build as C++98 too. */
#define GC_GNUC_PREREQ(major, minor) \
    ((__GNUC__ << 8) + __GNUC_MINOR__ >= ((major) << 8) + (minor))
#ifdef __cplusplus
# define GC_ATTR_EXPLICIT explicit
# if __cplusplus >= 201103L
#  define GC_NOEXCEPT noexcept
# else
#  define GC_NOEXCEPT throw()
# endif
#else
# define GC_ATTR_EXPLICIT
#endif

/* lfgc implements the interface of bdwgc 8.2; the macros below let clients
 * test for it the way they test bdwgc. */
#define GC_VERSION_MAJOR 8
#define GC_VERSION_MINOR 2
#define GC_VERSION_MICRO 2
#define LFGC_VERSION_STRING "0.1.0"

typedef unsigned long GC_word;
typedef long GC_signed_word;
typedef void *GC_PTR;

/* ------------------------------------------------------------------ */
/* Settings kept as data, as in bdwgc (prefer the GC_set_* calls).     */

GC_API GC_word GC_gc_no;            /* number of collections so far          */
GC_API int GC_all_interior_pointers;/* 1 (default): interior pointers retain;
                                       read by GC_init, set it before        */
GC_API int GC_no_dls;               /* 1: do not scan shared objects' data   */
GC_API int GC_dont_gc;              /* >0: collection disabled (GC_disable)  */
GC_API GC_word GC_free_space_divisor;  /* heap growth policy, default 3     */
GC_API GC_word GC_max_retries;      /* collections tried before OOM          */
GC_API int GC_dont_expand;          /* 1: collect before every heap growth    */
GC_API int GC_dont_precollect;      /* 1 before GC_init: no start-up scan of
                                       the roots for blacklisting (bdwgc's
                                       first collection)                     */
GC_API int GC_java_finalization;    /* 1 (default): see GC_register_finalizer_unreachable */
GC_API int GC_finalize_on_demand;   /* 1: finalizers run only in GC_invoke_finalizers */
GC_API int GC_find_leak;            /* leak-finding mode: collections report */
                                    /* unreachable objects (docs/api.md)     */
GC_API int GC_get_find_leak(void);
/* Leak-finding mode on (1) or off: each collection reports on stderr the
 * objects it found unreachable, once, then reclaims them; a last
 * collection at exit reports what is left.  All collections are full. */
GC_API void GC_set_find_leak(int);
GC_API int GC_full_freq;            /* minor collections between full ones,
                                       at most (64; GC_FULL_FREQUENCY)       */
GC_API int GC_use_entire_heap;      /* 0 (default): a collection well overdue
                                       comes before new memory, even within
                                       the expanded heap; 1: that room is
                                       used first (GC_USE_ENTIRE_HEAP)       */
GC_API int GC_quiet;                /* 1: the dumps and backtraces print
                                       nothing (warnings still go out)       */
GC_API unsigned long GC_time_limit; /* accepted, no effect: lfgc has no
                                       collection in steps to bound          */
#define GC_TIME_UNLIMITED 999999 /* bdwgc's value for "no time limit" */
GC_API GC_word GC_non_gc_bytes;     /* bytes of uncollectable objects, kept
                                       by their allocation and GC_free      */
/* Bounds of every address the collector may treat as a heap pointer. */
GC_API void *GC_least_plausible_heap_addr;
GC_API void *GC_greatest_plausible_heap_addr;

typedef void *(*GC_oom_func)(size_t bytes_requested);
GC_API GC_oom_func GC_oom_fn;

/* ------------------------------------------------------------------ */
/* Initialisation                                                      */

/* Initialise the collector.  Loading the library reserves the heap's
 * address space; the rest happens here or at the first allocation, so
 * calling this is optional (settings such as GC_all_interior_pointers must
 * be made before it).  Idempotent. */
GC_API void GC_init(void);
#define GC_INIT() GC_init()
/* Nonzero once GC_init (or the first allocation) has initialised lfgc. */
GC_API int GC_is_init_called(void);
/* The version as (major << 16) | (minor << 8) | micro. */
GC_API unsigned GC_get_version(void);

/* ------------------------------------------------------------------ */
/* Allocation.  Every call returns NULL after calling the OOM function
 * (whose result it returns) when the request cannot be met, including
 * sizes no size class can hold.                                        */

/* Zeroed, collectable object that may hold pointers. */
GC_API void *GC_malloc(size_t size) __attribute__((malloc, alloc_size(1)));
/* Collectable object that never holds pointers: it is never scanned and
 * its contents are not cleared. */
GC_API void *GC_malloc_atomic(size_t size) __attribute__((malloc, alloc_size(1)));
/* Several zeroed, collectable objects of `size` bytes at once (at least
 * one, up to a page's worth), linked through their first words: GC_NEXT(p)
 * is the one after p, NULL after the last.  NULL when out of memory. */
GC_API void *GC_malloc_many(size_t size);
#define GC_NEXT(p) (*(void **)(p))
/* Zeroed object that is scanned but never collected; GC_free releases it. */
GC_API void *GC_malloc_uncollectable(size_t size) __attribute__((malloc, alloc_size(1)));
/* Uncollectable and never scanned. */
GC_API void *GC_malloc_atomic_uncollectable(size_t size) __attribute__((malloc, alloc_size(1)));
/* As GC_malloc / GC_malloc_atomic: lfgc recognises every interior pointer,
 * so the caller's promise to keep a pointer near the start is not needed. */
GC_API void *GC_malloc_ignore_off_page(size_t size) __attribute__((malloc, alloc_size(1)));
GC_API void *GC_malloc_atomic_ignore_off_page(size_t size) __attribute__((malloc, alloc_size(1)));
/* Object aligned to `align` (a power of two); any size class whose size is
 * a multiple of `align` gives that alignment for free. */
GC_API void *GC_memalign(size_t align, size_t size) __attribute__((malloc));
/* POSIX form: EINVAL for a bad alignment, ENOMEM when out of memory. */
GC_API int GC_posix_memalign(void **result, size_t align, size_t size);
/* Collectable pointer-free copies of a string. */
GC_API char *GC_strdup(const char *s) __attribute__((malloc));
GC_API char *GC_strndup(const char *s, size_t n) __attribute__((malloc));
/* Resize: same kind as the old object; realloc(NULL, n) allocates,
 * realloc(p, 0) frees and returns NULL. */
GC_API void *GC_realloc(void *p, size_t size) __attribute__((alloc_size(2)));
/* Kinds (GC_new_kind, GC_generic_malloc, descriptors, mark procedures)
 * are declared in gc_mark.h, as in bdwgc. */
/* Explicitly free an object.  NULL is ignored.  A pointer lfgc did not
 * allocate, an interior pointer or an object already freed is reported
 * through the warn proc and otherwise ignored. */
GC_API void GC_free(void *p);

/* ------------------------------------------------------------------ */
/* Object queries                                                      */

/* Start of the heap object p points into, or NULL if p is not inside one. */
GC_API void *GC_base(void *p);
/* Usable size in bytes of the heap object p points into (p may be
 * interior); 0 if p is not in the heap. */
GC_API size_t GC_size(const void *p);
/* Nonzero when p points into the collector's heap. */
GC_API int GC_is_heap_ptr(const void *p);

/* ------------------------------------------------------------------ */
/* Collection control                                                  */

/* Full collection now (unless collection is disabled). */
GC_API void GC_gcollect(void);
/* Full collection, then return every wholly free page to the OS. */
GC_API void GC_gcollect_and_unmap(void);
/* Collect (minor if possible) if the growth policy says it is time, as
 * allocation would; returns 0: lfgc leaves no collection in progress. */
GC_API int GC_collect_a_little(void);
/* Nesting counter: GC_disable() increments, GC_enable() decrements;
 * collections happen only at zero. */
GC_API void GC_disable(void);
GC_API void GC_enable(void);
GC_API int GC_is_disabled(void);
/* Collect unless stop_func() (called before the collection starts)
 * returns nonzero; returns 1 if a collection ran, 0 if it did not
 * (stopped, or collection disabled).  lfgc's collections cannot be
 * interrupted once started.  GC_set_stop_func sets the function used
 * when none is given. */
typedef int (*GC_stop_func)(void);
GC_API int GC_try_to_collect(GC_stop_func stop_func);
GC_API void GC_set_stop_func(GC_stop_func stop_func);
GC_API GC_stop_func GC_get_stop_func(void);
/* 1: every GC_gcollect also returns wholly free pages to the OS, as
 * GC_gcollect_and_unmap does. */
GC_API void GC_set_force_unmap_on_gcollect(int);
GC_API int GC_get_force_unmap_on_gcollect(void);
/* Generational collection (minor collections that trace young objects
 * and old ones on pages written since the last collection) is on by
 * default where the kernel tracks writes (Linux 6.7+).  The first turns
 * it on unless the environment forbids it (GC_DISABLE_INCREMENTAL,
 * LFGC_GENERATIONAL=0); the second tells whether it is on (1) or not. */
GC_API void GC_enable_incremental(void);
GC_API int GC_is_incremental_mode(void);
/* Stored and returned, no effect: every collection, minor or full, is
 * one stop-the-world pass, with no step whose length could be bounded. */
GC_API void GC_set_time_limit(unsigned long ms);
GC_API unsigned long GC_get_time_limit(void);

/* Heap growth: when the heap must grow past its expanded size, a
 * collection happens if the bytes allocated since the last one exceed
 * (live pointerful bytes * 2 + live atomic bytes / 4 + roots + stacks * 2)
 * / divisor; otherwise the heap expands by heap / divisor.  A larger
 * divisor collects more often, with less heap. */
GC_API void GC_set_free_space_divisor(GC_word divisor);
GC_API GC_word GC_get_free_space_divisor(void);
/* Upper bound on the heap size (0: none).  Past it allocation collects,
 * then fails through the OOM function. */
GC_API void GC_set_max_heap_size(GC_word bytes);
/* Grow the heap by at least `bytes` now.  Returns nonzero on success. */
GC_API int GC_expand_hp(size_t bytes);
GC_API void GC_set_dont_expand(int);
GC_API int GC_get_dont_expand(void);
GC_API void GC_set_max_retries(GC_word);
GC_API GC_word GC_get_max_retries(void);

/* ------------------------------------------------------------------ */
/* Statistics.  The single-figure getters take no lock (as in bdwgc):
 * they may be called from the collection-event callbacks.  From
 * GC_EVENT_RECLAIM_END on, they describe the heap after the collection. */

/* Bytes of heap mapped for objects (free and in use). */
GC_API size_t GC_get_heap_size(void);
/* Heap bytes not in use by live or newly allocated objects. */
GC_API size_t GC_get_free_bytes(void);
/* Heap bytes returned to the OS and not yet reused. */
GC_API size_t GC_get_unmapped_bytes(void);
/* Bytes allocated since the last collection. */
GC_API size_t GC_get_bytes_since_gc(void);
/* Bytes allocated since start-up. */
GC_API size_t GC_get_total_bytes(void);
/* Number of collections so far. */
GC_API GC_word GC_get_gc_no(void);
/* Heap bytes in use: live after the last collection plus allocated since
 * (less explicitly freed). */
GC_API size_t GC_get_memory_use(void);
/* Bytes freed with GC_free since the last collection. */
GC_API size_t GC_get_expl_freed_bytes_since_gc(void);
/* Sum of all collections' world-stopped time, in milliseconds. */
GC_API unsigned long GC_get_full_gc_total_time(void);
/* All five figures at once, consistently. */
GC_API void GC_get_heap_usage_safe(GC_word *heap_size, GC_word *free_bytes,
                                   GC_word *unmapped_bytes,
                                   GC_word *bytes_since_gc,
                                   GC_word *total_bytes);
/* Print the heap's state (regions, spans, live bytes) on the log
 * descriptor (GC_set_log_fd, stderr by default), under the lock. */
GC_API void GC_dump(void);

/* Collection events, as in bdwgc: the callback runs with the allocation
 * lock held and must not allocate.  It may read the statistics, including
 * GC_get_heap_usage_safe, lfgc_get_stats and lfgc_get_pauses. */
typedef enum {
    GC_EVENT_START,
    GC_EVENT_MARK_START,
    GC_EVENT_MARK_END,
    GC_EVENT_RECLAIM_START,
    GC_EVENT_RECLAIM_END,
    GC_EVENT_END,
    GC_EVENT_PRE_STOP_WORLD,
    GC_EVENT_POST_STOP_WORLD,
    GC_EVENT_PRE_START_WORLD,
    GC_EVENT_POST_START_WORLD,
    GC_EVENT_THREAD_SUSPENDED,
    GC_EVENT_THREAD_UNSUSPENDED
} GC_EventType;
typedef void (*GC_on_collection_event_proc)(GC_EventType);
GC_API void GC_set_on_collection_event(GC_on_collection_event_proc);
GC_API GC_on_collection_event_proc GC_get_on_collection_event(void);
/* Called at the start of every collection, lock held, must not allocate. */
typedef void (*GC_start_callback_proc)(void);
GC_API void GC_set_start_callback(GC_start_callback_proc);
GC_API GC_start_callback_proc GC_get_start_callback(void);

/* ------------------------------------------------------------------ */
/* Out of memory and warnings                                          */

/* Called, without the lock, when a request cannot be met; its result is
 * returned to the caller of the allocation (the default returns NULL). */
GC_API void GC_set_oom_fn(GC_oom_func);
GC_API GC_oom_func GC_get_oom_fn(void);
/* msg is a printf format with one conversion, for arg. */
typedef void (*GC_warn_proc)(char *msg, GC_word arg);
GC_API void GC_set_warn_proc(GC_warn_proc);
GC_API GC_warn_proc GC_get_warn_proc(void);
/* Warn procs that print (the default) or drop messages. */
GC_API void GC_default_warn_proc(char *msg, GC_word arg);
GC_API void GC_ignore_warn_proc(char *msg, GC_word arg);

/* ------------------------------------------------------------------ */
/* Roots                                                               */

/* Scan [low, high) as a root at every collection. */
GC_API void GC_add_roots(void *low, void *high);
/* Stop scanning the roots added with GC_add_roots that lie in [low, high). */
GC_API void GC_remove_roots(void *low, void *high);
/* Forget every root added with GC_add_roots. */
GC_API void GC_clear_roots(void);
/* Never scan [low, high) even where it lies in a data segment. */
GC_API void GC_exclude_static_roots(void *low, void *high);
/* Forget every range GC_exclude_static_roots excluded (lfgc's own data
 * stay unscanned). */
GC_API void GC_clear_exclusion_table(void);
/* A filter of the data segments scanned as roots: before each collection
 * lfgc lists the writable segments of the program and of every loaded
 * shared object, and calls fn(name, start, size) for each (name is the
 * object's path, "" for the program; start and size the whole segment);
 * a segment for which fn returns 0 is not scanned.  fn runs with the
 * allocation lock and the dynamic loader's lock held (the world is not
 * stopped): it must not allocate, collect, dlopen or dlclose.  NULL (the
 * default) scans every segment.  Replaces any earlier filter. */
typedef int (*GC_has_static_roots_func)(const char *dlpi_name, void *section_start,
                                        size_t section_size);
GC_API void GC_register_has_static_roots_callback(GC_has_static_roots_func fn);
GC_API void GC_set_no_dls(int);
GC_API int GC_get_no_dls(void);

/* Interior pointers.  On (1, the default): a pointer anywhere into an
 * object keeps it (low-fat bases cost nothing), and each object gets one
 * extra byte so that a pointer just past its end keeps it, not its
 * neighbour.  Off (0): a word in static data, a root range or a heap
 * object keeps an object only at its start or at a displacement
 * registered with GC_register_displacement; a word of a stack or of
 * saved registers still keeps the object it points anywhere into (as in
 * bdwgc); no extra byte.  Set before GC_init (or the first allocation). */
GC_API void GC_set_all_interior_pointers(int);
GC_API int GC_get_all_interior_pointers(void);
/* With interior pointers off, a pointer `offset` bytes into any object
 * keeps it from now on.  offset < 4096, or lfgc aborts (as bdwgc does).
 * With interior pointers on it is recorded and changes nothing. */
GC_API void GC_register_displacement(size_t offset);

/* Keep ptr (and what it points to) visibly reachable up to this point:
 * the compiler may not drop the last use of ptr before it. */
#define GC_reachable_here(ptr) __asm__ __volatile__(" " : : "X"(ptr) : "memory")
/* Does nothing with its argument, out of line: another way to keep a
 * value alive up to a point. */
GC_API void GC_noop1(GC_word);

/* Run fn(client_data) with the allocation lock held. */
typedef void *(*GC_fn_type)(void *client_data);
GC_API void *GC_call_with_alloc_lock(GC_fn_type fn, void *client_data);

/* Hidden pointers: stored so that the collector does not see them. */
typedef GC_word GC_hidden_pointer;
#define GC_HIDE_POINTER(p)   (~(GC_hidden_pointer)(p))
#define GC_REVEAL_POINTER(p) ((void *)GC_HIDE_POINTER(p))
#define HIDE_POINTER(p)   GC_HIDE_POINTER(p)
#define REVEAL_POINTER(p) GC_REVEAL_POINTER(p)

/* ------------------------------------------------------------------ */
/* Finalization and disappearing links (bdwgc's semantics; docs/api.md).
 *
 * GC_register_finalizer(obj, fn, cd, ofn, ocd): once the object obj
 * points into is unreachable, fn(obj, cd) runs, once, outside the
 * collection: in the next thread to allocate or collect, or in
 * GC_invoke_finalizers when GC_finalize_on_demand is set.  If A reaches B
 * and both become unreachable, A's finalizer runs first and B (with all
 * it reaches) stays until a later collection finds it unreachable.
 * Finalizable objects on a cycle are never finalized (the warn proc says
 * so).  A finalizer may store its object somewhere reachable: nothing it
 * reaches has been freed.  cd is a root until the finalizer has run.  The
 * previous registration's fn and cd go to *ofn and *ocd (either may be
 * NULL); fn NULL unregisters.  obj outside the heap, or NULL: ignored
 * (*ofn and *ocd set to NULL).  GC_free(obj) unregisters.
 *   _ignore_self:  pointers from the object into itself do not count;
 *   _no_order:     finalized regardless of what reaches it;
 *   _unreachable:  as the plain call, and not while reachable from an
 *                  object registered _no_order (GC_java_finalization on). */
typedef void (*GC_finalization_proc)(void *obj, void *client_data);
GC_API void GC_register_finalizer(void *obj, GC_finalization_proc fn, void *cd,
                                  GC_finalization_proc *ofn, void **ocd);
GC_API void GC_register_finalizer_ignore_self(void *obj, GC_finalization_proc fn, void *cd,
                                              GC_finalization_proc *ofn, void **ocd);
GC_API void GC_register_finalizer_no_order(void *obj, GC_finalization_proc fn, void *cd,
                                           GC_finalization_proc *ofn, void **ocd);
GC_API void GC_register_finalizer_unreachable(void *obj, GC_finalization_proc fn, void *cd,
                                              GC_finalization_proc *ofn, void **ocd);
/* Run the finalizers that are due; returns how many ran. */
GC_API int GC_invoke_finalizers(void);
/* Nonzero when GC_invoke_finalizers has something to do (no lock). */
GC_API int GC_should_invoke_finalizers(void);
/* Finalize every registered object, reachable or not (at exit). */
GC_API void GC_finalize_all(void);
GC_API void GC_set_finalize_on_demand(int);
GC_API int GC_get_finalize_on_demand(void);
GC_API void GC_set_java_finalization(int);
GC_API int GC_get_java_finalization(void);
/* With GC_finalize_on_demand set, called (outside the lock) once after
 * each collection that made finalizers due. */
typedef void (*GC_finalizer_notifier_proc)(void);
GC_API GC_finalizer_notifier_proc GC_finalizer_notifier;
GC_API void GC_set_finalizer_notifier(GC_finalizer_notifier_proc);
GC_API GC_finalizer_notifier_proc GC_get_finalizer_notifier(void);
/* While more finalizable objects are registered than one per this many
 * bytes allocated since the last collection (and the last one finalized
 * some), the heap does not grow before a collection (default 10000; 0:
 * finalizers do not count). */
GC_API void GC_set_allocd_bytes_per_finalizer(GC_word);
GC_API GC_word GC_get_allocd_bytes_per_finalizer(void);
/* Called, lock held, for each object a collection queued for finalization. */
typedef void (*GC_await_finalize_proc)(void *obj);
GC_API void GC_set_await_finalize_proc(GC_await_finalize_proc);
GC_API GC_await_finalize_proc GC_get_await_finalize_proc(void);

/* Disappearing links: *link (an aligned word anywhere) is set to NULL
 * when obj becomes unreachable: short links before finalizers are
 * decided, long links only once obj cannot come back (after them).  A
 * link that lies in a heap object goes when that object dies.  Return
 * GC_SUCCESS, GC_DUPLICATE (the link is registered already) or
 * GC_NO_MEMORY.  GC_register_disappearing_link(link) uses the object
 * holding link as obj.  Read a hidden link's target under
 * GC_call_with_alloc_lock, or a collection may clear it in between. */
GC_API int GC_general_register_disappearing_link(void **link, const void *obj);
GC_API int GC_register_disappearing_link(void **link);
GC_API int GC_unregister_disappearing_link(void **link);     /* 1 if it was */
/* GC_SUCCESS, GC_DUPLICATE (new_link taken), GC_NOT_FOUND (link unknown). */
GC_API int GC_move_disappearing_link(void **link, void **new_link);
GC_API int GC_register_long_link(void **link, const void *obj);
GC_API int GC_unregister_long_link(void **link);
GC_API int GC_move_long_link(void **link, void **new_link);

/* Toggle references: obj is held strongly or weakly, as the callback
 * (run by each collection, lock held, world running; it must not
 * allocate) decides, until it says DROP or obj dies. */
typedef enum { GC_TOGGLE_REF_DROP, GC_TOGGLE_REF_STRONG, GC_TOGGLE_REF_WEAK } GC_ToggleRefStatus;
typedef GC_ToggleRefStatus (*GC_toggleref_func)(void *obj);
GC_API void GC_set_toggleref_func(GC_toggleref_func);
GC_API GC_toggleref_func GC_get_toggleref_func(void);
GC_API int GC_toggleref_add(void *obj, int is_strong);

/* ------------------------------------------------------------------ */
/* Threads.  Every thread that allocates or holds heap pointers must be
 * known to the collector: threads created by GC_pthread_create (what
 * pthread_create becomes under GC_THREADS) are; others register with
 * GC_register_my_thread, or are registered by their first allocation
 * (of any size or kind), GC_realloc or GC_free.                          */

#define GC_SUCCESS       0
#define GC_DUPLICATE     1   /* already registered                       */
#define GC_NO_THREADS    2
#define GC_UNIMPLEMENTED 3
#define GC_NOT_FOUND     4   /* not registered                           */
#define GC_NO_MEMORY     2   /* out of memory (bdwgc's value, shared with
                                GC_NO_THREADS, which lfgc never returns) */

struct GC_stack_base {
    void *mem_base;          /* highest address of the stack (x86_64)    */
};
typedef void *(*GC_stack_base_func)(struct GC_stack_base *sb, void *arg);

/* Allow threads not created through GC_pthread_create to register. */
GC_API void GC_allow_register_threads(void);
/* Register the calling thread; sb gives its stack base (GC_get_stack_base
 * fills one in).  Returns GC_SUCCESS, GC_DUPLICATE (already registered) or
 * GC_NO_MEMORY.  GC_unregister_my_thread returns GC_SUCCESS, or
 * GC_NOT_FOUND for a thread that was not registered. */
GC_API int GC_register_my_thread(const struct GC_stack_base *sb);
GC_API int GC_unregister_my_thread(void);
GC_API int GC_thread_is_registered(void);
/* Base of the calling thread's stack. */
GC_API int GC_get_stack_base(struct GC_stack_base *sb);
/* Call fn with an approximation of the stack base: the caller's frame. */
GC_API void *GC_call_with_stack_base(GC_stack_base_func fn, void *arg);
/* Run fn(client_data) as a blocking section: collections proceed without
 * stopping this thread, and fn must not touch the heap (its frames are not
 * scanned).  GC_call_with_gc_active re-enters normal mode inside it. */
GC_API void *GC_do_blocking(GC_fn_type fn, void *client_data);
GC_API void *GC_call_with_gc_active(GC_fn_type fn, void *client_data);
/* Parallel marking: GC_set_markers_count(n) before GC_init sets the
 * number of marker threads (as GC_MARKERS=n does; the environment wins
 * as in bdwgc only when this was not called).  GC_get_parallel returns the
 * number of helper markers (markers - 1).  GC_start_mark_threads starts
 * them now instead of at the first collection that needs them. */
GC_API void GC_set_markers_count(unsigned n);
GC_API int GC_get_parallel(void);
GC_API void GC_start_mark_threads(void);
/* Deprecated in bdwgc, kept for its programs: GC_parallel is what
 * GC_get_parallel returns, set by GC_init. */
GC_API int GC_parallel;
/* fork(): by default lfgc's pthread_atfork handlers make the child able
 * to allocate and collect.  GC_set_handle_fork(-1) before GC_init leaves
 * that to the program, which then calls GC_atfork_prepare before fork()
 * and GC_atfork_parent or GC_atfork_child after it; otherwise those three
 * do nothing.  Other values are accepted and change nothing. */
GC_API void GC_set_handle_fork(int);
GC_API void GC_atfork_prepare(void);
GC_API void GC_atfork_parent(void);
GC_API void GC_atfork_child(void);
/* The allocation lock itself (GC_call_with_alloc_lock is the safer way). */
GC_API void GC_alloc_lock(void);
GC_API void GC_alloc_unlock(void);
/* The bottom (highest address) of the stack scanned for the calling
 * thread goes into *sb; returns a handle for GC_set_stackbottom (NULL if
 * the thread is not registered).  GC_set_stackbottom sets the bottom for
 * the thread of that handle (NULL: the calling thread), for coroutine
 * libraries that switch stacks; for another thread, call it with the
 * allocation lock held and that thread stopped or blocked. */
GC_API void *GC_get_my_stackbottom(struct GC_stack_base *sb);
GC_API void GC_set_stackbottom(void *gc_thread, const struct GC_stack_base *sb);
/* The main thread's stack base: set before GC_init, it replaces the one
 * lfgc finds; GC_init stores the one in use (deprecated in bdwgc). */
GC_API char *GC_stackbottom;
/* A thread that may be stopped while running on a signal stack says
 * where that stack is and where its normal stack is (lowest address and
 * size of each); stopped there, both are scanned.  Without it, lfgc
 * finds both from the system's memory map, scanning more. */
GC_API void GC_register_altstack(void *stack_start, GC_word stack_size,
                                 void *altstack_base, GC_word altstack_size);
/* Stop every other registered thread, and hold the allocation lock,
 * until GC_start_world_external; the caller must not allocate or call
 * lfgc in between. */
GC_API void GC_stop_world_external(void);
GC_API void GC_start_world_external(void);
/* Suspend one registered thread (bdwgc's javaxfc.h), as a collection
 * stops it, until GC_resume_thread; there is no count.  A thread may
 * suspend itself: it then waits, as in a blocking section, for another to
 * resume it.  A thread ended but not yet joined reads as suspended until
 * resumed, as in bdwgc.  Unregistered, joined or detached threads are
 * ignored, and GC_is_thread_suspended says 0 for them.  The id is the
 * pthread_t (its type under GC_THREADS, as in bdwgc; void * otherwise). */
#ifndef GC_SUSPEND_THREAD_ID
# if defined(GC_THREADS) || defined(GC_PTHREADS) || defined(LFGC_BUILDING)
#  define GC_SUSPEND_THREAD_ID pthread_t  /* bdwgc's, under GC_THREADS */
# else
#  define GC_SUSPEND_THREAD_ID void *
# endif
#endif
GC_API void GC_suspend_thread(GC_SUSPEND_THREAD_ID thread);
GC_API void GC_resume_thread(GC_SUSPEND_THREAD_ID thread);
GC_API int GC_is_thread_suspended(GC_SUSPEND_THREAD_ID thread);
/* Called, lock held and world stopping or restarting, with
 * GC_EVENT_THREAD_SUSPENDED or GC_EVENT_THREAD_UNSUSPENDED and the
 * pthread_t of each thread signalled; it must not allocate. */
typedef void (*GC_on_thread_event_proc)(GC_EventType event, void *thread_id);
GC_API void GC_set_on_thread_event(GC_on_thread_event_proc);
GC_API GC_on_thread_event_proc GC_get_on_thread_event(void);

/* Signals used to stop and restart threads (SIGPWR and SIGXCPU by default);
 * the setters work only before GC_init. */
GC_API void GC_set_suspend_signal(int sig);
GC_API void GC_set_thr_restart_signal(int sig);
GC_API int GC_get_suspend_signal(void);
GC_API int GC_get_thr_restart_signal(void);

#if defined(GC_THREADS) || defined(GC_PTHREADS) || defined(LFGC_BUILDING)
/* pthread functions that keep the collector informed. */
GC_API int GC_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                             void *(*start)(void *), void *arg);
GC_API int GC_pthread_join(pthread_t thread, void **retval);
GC_API int GC_pthread_detach(pthread_t thread);
GC_API void GC_pthread_exit(void *retval) __attribute__((noreturn));
GC_API int GC_pthread_cancel(pthread_t thread);
/* As pthread_sigmask, but the suspend signal is never blocked. */
GC_API int GC_pthread_sigmask(int how, const sigset_t *set, sigset_t *old);
/* As dlopen, with collection held off while the library loads. */
GC_API void *GC_dlopen(const char *path, int mode);
#endif

#if (defined(GC_THREADS) || defined(GC_PTHREADS)) && !defined(GC_NO_THREAD_REDIRECTS) \
    && !defined(LFGC_BUILDING)
# undef pthread_create
# undef pthread_join
# undef pthread_detach
# undef pthread_exit
# undef pthread_cancel
# undef pthread_sigmask
# undef dlopen
# define pthread_create  GC_pthread_create
# define pthread_join    GC_pthread_join
# define pthread_detach  GC_pthread_detach
# define pthread_exit    GC_pthread_exit
# define pthread_cancel  GC_pthread_cancel
# define pthread_sigmask GC_pthread_sigmask
# define dlopen          GC_dlopen
#endif

/* ------------------------------------------------------------------ */
/* The rest of bdwgc 8.2's gc.h (docs/compatibility.md gives each
 * call's status in lfgc).                                              */

/* GC_full_freq and GC_non_gc_bytes (above). */
GC_API void GC_set_full_freq(int);
GC_API int GC_get_full_freq(void);
GC_API void GC_set_non_gc_bytes(GC_word);
GC_API GC_word GC_get_non_gc_bytes(void);
/* Before GC_init: no start-up scan of the roots for blacklisting (as
 * bdwgc's first collection), for a program that arranges its roots
 * first; the first collection then blacklists. */
GC_API void GC_set_dont_precollect(int);
GC_API int GC_get_dont_precollect(void);
/* Settings bdwgc's own policy reads: stored and returned, not used by
 * lfgc's (incremental rate, ...). */
GC_API void GC_set_max_prior_attempts(int);
GC_API int GC_get_max_prior_attempts(void);
GC_API void GC_set_min_bytes_allocd(size_t);
GC_API size_t GC_get_min_bytes_allocd(void);
GC_API void GC_set_rate(int);
GC_API int GC_get_rate(void);
/* 1: allocation never collects (the heap grows instead); GC_gcollect and
 * the other explicit calls still do, and so does an allocation that
 * finds the heap at its limit (GC_set_max_heap_size), as in bdwgc. */
GC_API void GC_set_disable_automatic_collection(int);
GC_API int GC_get_disable_automatic_collection(void);
struct GC_timeval_s {
    unsigned long tv_ms;     /* milliseconds                             */
    unsigned long tv_nsec;   /* and nanoseconds (< 1000000)              */
};
GC_API void GC_set_time_limit_tv(struct GC_timeval_s);
GC_API struct GC_timeval_s GC_get_time_limit_tv(void);
/* The heap is never executable: GC_set_pages_executable(1) warns, and
 * the getter returns 0. */
GC_API void GC_set_pages_executable(int);
GC_API int GC_get_pages_executable(void);
/* lfgc's write tracking protects no page: returns GC_PROTECTS_NONE. */
#define GC_PROTECTS_NONE 0
#define GC_PROTECTS_POINTER_HEAP 1
#define GC_PROTECTS_PTRFREE_HEAP 2
#define GC_PROTECTS_STATIC_DATA 4
#define GC_PROTECTS_STACK 8
GC_API int GC_incremental_protection_needs(void);
/* In incremental (for lfgc: generational) mode, a collection now, minor
 * if it can be (lfgc has no collection in steps to start); nothing
 * outside it, as in bdwgc. */
GC_API void GC_start_incremental_collection(void);
/* No-op: lfgc always measures collection time. */
GC_API void GC_start_performance_measurement(void);
/* Gives the memory of idle spans back to the OS; GC_is_init_called then
 * returns 0 until the next GC_init.  The heap and its objects stay valid,
 * and the collector usable.  Calls after the first do nothing. */
GC_API void GC_deinit(void);

/* The size lfgc gives a request of i bytes (0 <= i <= 2048), -1 past. */
GC_API size_t GC_get_size_map_at(int i);
/* Address space mapped for the heap, in bytes. */
GC_API size_t GC_get_obtained_from_os_bytes(void);
/* bdwgc's statistics structure; GC_get_prof_stats fills the first size
 * bytes of *out (fields it lacks with -1) and returns how many it filled.
 * bytes_reclaimed_since_gc is what the last collection found dead;
 * reclaimed_bytes_before_gc is 0. */
struct GC_prof_stats_s {
    GC_word heapsize_full;
    GC_word free_bytes_full;
    GC_word unmapped_bytes;
    GC_word bytes_allocd_since_gc;
    GC_word allocd_bytes_before_gc;
    GC_word non_gc_bytes;
    GC_word gc_no;
    GC_word markers_m1;
    GC_word bytes_reclaimed_since_gc;
    GC_word reclaimed_bytes_before_gc;
    GC_word expl_freed_bytes_since_gc;
    GC_word obtained_from_os_bytes;
};
GC_API size_t GC_get_prof_stats(struct GC_prof_stats_s *out, size_t size);
GC_API size_t GC_get_prof_stats_unsafe(struct GC_prof_stats_s *out, size_t size);

/* Called with the lock held, with the new heap size, whenever the heap
 * grows (lfgc does not call it when it returns memory).  Must not
 * allocate. */
typedef void (*GC_on_heap_resize_proc)(GC_word new_size);
GC_API GC_on_heap_resize_proc GC_on_heap_resize;
GC_API void GC_set_on_heap_resize(GC_on_heap_resize_proc);
GC_API GC_on_heap_resize_proc GC_get_on_heap_resize(void);

/* Called with a message before lfgc aborts (msg NULL before exit(1));
 * the default prints it on stderr.  NULL is refused. */
typedef void (*GC_abort_func)(const char *msg);
GC_API void GC_set_abort_func(GC_abort_func);
GC_API GC_abort_func GC_get_abort_func(void);
/* Print "Insufficient memory for the allocation" through the abort
 * function, and abort: an out-of-memory handler for GC_set_oom_fn's
 * callers that want to stop. */
GC_API void GC_abort_on_oom(void) __attribute__((noreturn));
/* File descriptor of lfgc's log (GC_PRINT_STATS, GC_dump); 2 by
 * default.  Warnings still go to the warn proc. */
GC_API void GC_set_log_fd(int fd);
/* GC_dump with "***GC Dump name" first ("collection #N" for NULL), without
 * taking the lock (as in bdwgc: hold it, GC_call_with_alloc_lock, or
 * accept a racy picture); GC_dump_regions lists each region used (lfgc's
 * heap sections) with its runs of spans, lock not taken; GC_dump_finalization
 * prints one line (the tables' sizes come with GC_PRINT_STATS). */
GC_API void GC_dump_named(const char *name);
GC_API void GC_dump_regions(void);
GC_API void GC_dump_finalization(void);

/* Pointer checks, bdwgc's GC_DEBUG forms of GC_PTR_ADD, GC_PRE_INCR,
 * GC_POST_INCR and GC_PTR_STORE.  Each returns its argument; on failure
 * it first calls the print proc, whose default prints and aborts.
 *   GC_same_obj(p, q): p lies in the object q points into (one past the
 *     end included), or both are outside the heap;
 *   GC_is_valid_displacement(p): p is outside the heap or points into an
 *     object in use (with interior pointers off: at its start or at a
 *     registered displacement);
 *   GC_is_visible(p): the collector scans the aligned word at p: a word
 *     of a scanned heap object (not pointer-free, not past a length
 *     descriptor), of the static data or added roots (exclusions left
 *     out), or of a registered thread's stack.  Outside the heap it needs
 *     the lock: while another thread (or the caller) holds it, such an
 *     address passes unchecked.
 * GC_pre_incr/GC_post_incr add how_much to *p after GC_same_obj's check
 * and return the new or the old value. */
GC_API void *GC_same_obj(void *p, void *q);
GC_API void *GC_pre_incr(void **p, ptrdiff_t how_much);
GC_API void *GC_post_incr(void **p, ptrdiff_t how_much);
GC_API void *GC_is_valid_displacement(void *p);
GC_API void *GC_is_visible(void *p);
GC_API void (*GC_same_obj_print_proc)(void *p, void *q);
GC_API void (*GC_is_valid_displacement_print_proc)(void *p);
GC_API void (*GC_is_visible_print_proc)(void *p);

/* ------------------------------------------------------------------ */
/* The debugging allocator.  lfgc keeps no debugging header: each call
 * does what the plain call does (file and line are accepted and not
 * kept), so objects from either family may be freed, reallocated or
 * registered with the other.  GC_debug_header_size is 0.               */

#define GC_EXTRAS                       __FILE__, __LINE__
#define GC_EXTRA_PARAMS                 const char *s, int i
GC_API void *GC_debug_malloc(size_t, GC_EXTRA_PARAMS) __attribute__((malloc, alloc_size(1)));
GC_API void *GC_debug_malloc_atomic(size_t, GC_EXTRA_PARAMS) __attribute__((malloc, alloc_size(1)));
GC_API void *GC_debug_malloc_uncollectable(size_t, GC_EXTRA_PARAMS)
    __attribute__((malloc, alloc_size(1)));
GC_API void *GC_debug_malloc_atomic_uncollectable(size_t, GC_EXTRA_PARAMS)
    __attribute__((malloc, alloc_size(1)));
GC_API void *GC_debug_malloc_ignore_off_page(size_t, GC_EXTRA_PARAMS)
    __attribute__((malloc, alloc_size(1)));
GC_API void *GC_debug_malloc_atomic_ignore_off_page(size_t, GC_EXTRA_PARAMS)
    __attribute__((malloc, alloc_size(1)));
GC_API void *GC_debug_malloc_stubborn(size_t, GC_EXTRA_PARAMS) __attribute__((malloc, alloc_size(1)));
GC_API char *GC_debug_strdup(const char *, GC_EXTRA_PARAMS) __attribute__((malloc));
GC_API char *GC_debug_strndup(const char *, size_t, GC_EXTRA_PARAMS) __attribute__((malloc));
GC_API void GC_debug_free(void *);
GC_API void *GC_debug_realloc(void *, size_t, GC_EXTRA_PARAMS) __attribute__((alloc_size(2)));
GC_API void GC_debug_change_stubborn(const void *);
GC_API void GC_debug_end_stubborn_change(const void *);
GC_API void GC_debug_ptr_store_and_dirty(void *p, const void *q);
GC_API void *GC_debug_malloc_replacement(size_t) __attribute__((malloc, alloc_size(1)));
GC_API void *GC_debug_realloc_replacement(void *, size_t) __attribute__((alloc_size(2)));
GC_API void GC_debug_register_displacement(size_t);
GC_API void GC_debug_register_finalizer(void *obj, GC_finalization_proc fn, void *cd,
                                        GC_finalization_proc *ofn, void **ocd);
GC_API void GC_debug_register_finalizer_ignore_self(void *obj, GC_finalization_proc fn,
                                                    void *cd, GC_finalization_proc *ofn,
                                                    void **ocd);
GC_API void GC_debug_register_finalizer_no_order(void *obj, GC_finalization_proc fn, void *cd,
                                                 GC_finalization_proc *ofn, void **ocd);
GC_API void GC_debug_register_finalizer_unreachable(void *obj, GC_finalization_proc fn,
                                                    void *cd, GC_finalization_proc *ofn,
                                                    void **ocd);
GC_API const size_t GC_debug_header_size;
GC_API size_t GC_get_debug_header_size(void);

/* ------------------------------------------------------------------ */
/* bdwgc's upper-case macros: under GC_DEBUG (GC_DEBUG_REPLACEMENT for
 * GC_MALLOC and GC_REALLOC) they name the debugging calls, as in bdwgc. */

#if defined(GC_DEBUG_REPLACEMENT)
# define GC_MALLOC(sz)                  GC_debug_malloc_replacement(sz)
# define GC_REALLOC(p, sz)              GC_debug_realloc_replacement(p, sz)
#elif defined(GC_DEBUG)
# define GC_MALLOC(sz)                  GC_debug_malloc(sz, GC_EXTRAS)
# define GC_REALLOC(p, sz)              GC_debug_realloc(p, sz, GC_EXTRAS)
#else
# define GC_MALLOC(sz)                  GC_malloc(sz)
# define GC_REALLOC(p, sz)              GC_realloc(p, sz)
#endif
#ifdef GC_DEBUG
# define GC_MALLOC_ATOMIC(sz)           GC_debug_malloc_atomic(sz, GC_EXTRAS)
# define GC_MALLOC_UNCOLLECTABLE(sz)    GC_debug_malloc_uncollectable(sz, GC_EXTRAS)
# define GC_MALLOC_ATOMIC_UNCOLLECTABLE(sz) GC_debug_malloc_atomic_uncollectable(sz, GC_EXTRAS)
# define GC_MALLOC_IGNORE_OFF_PAGE(sz)  GC_debug_malloc_ignore_off_page(sz, GC_EXTRAS)
# define GC_MALLOC_ATOMIC_IGNORE_OFF_PAGE(sz) \
    GC_debug_malloc_atomic_ignore_off_page(sz, GC_EXTRAS)
# define GC_FREE(p)                     GC_debug_free(p)
# define GC_STRDUP(s)                   GC_debug_strdup(s, GC_EXTRAS)
# define GC_STRNDUP(s, n)               GC_debug_strndup(s, n, GC_EXTRAS)
# define GC_REGISTER_FINALIZER(p, f, d, of, od) \
    GC_debug_register_finalizer(p, f, d, of, od)
# define GC_REGISTER_FINALIZER_IGNORE_SELF(p, f, d, of, od) \
    GC_debug_register_finalizer_ignore_self(p, f, d, of, od)
# define GC_REGISTER_FINALIZER_NO_ORDER(p, f, d, of, od) \
    GC_debug_register_finalizer_no_order(p, f, d, of, od)
# define GC_REGISTER_FINALIZER_UNREACHABLE(p, f, d, of, od) \
    GC_debug_register_finalizer_unreachable(p, f, d, of, od)
# define GC_END_STUBBORN_CHANGE(p)      GC_debug_end_stubborn_change(p)
# define GC_PTR_STORE_AND_DIRTY(p, q)   GC_debug_ptr_store_and_dirty(p, q)
# define GC_GENERAL_REGISTER_DISAPPEARING_LINK(link, obj) \
    GC_general_register_disappearing_link(link, GC_base((void *)(obj)))
# define GC_REGISTER_LONG_LINK(link, obj) \
    GC_register_long_link(link, GC_base((void *)(obj)))
# define GC_REGISTER_DISPLACEMENT(n)    GC_debug_register_displacement(n)
# define GC_PTR_ADD3(x, n, type_of_result) \
    ((type_of_result)GC_same_obj((x) + (n), (x)))
# define GC_PRE_INCR3(x, n, type_of_result) \
    ((type_of_result)GC_pre_incr((void **)(&(x)), (n) * sizeof(*(x))))
# define GC_POST_INCR3(x, n, type_of_result) \
    ((type_of_result)GC_post_incr((void **)(&(x)), (n) * sizeof(*(x))))
# define GC_PTR_ADD(x, n)               GC_PTR_ADD3(x, n, __typeof__(x))
# define GC_PRE_INCR(x, n)              GC_PRE_INCR3(x, n, __typeof__(x))
# define GC_POST_INCR(x)                GC_POST_INCR3(x, 1, __typeof__(x))
# define GC_POST_DECR(x)                GC_POST_INCR3(x, -1, __typeof__(x))
# define GC_PTR_STORE(p, q) \
    (*(void **)GC_is_visible((void *)(p)) = GC_is_valid_displacement((void *)(q)))
#else
# define GC_MALLOC_ATOMIC(sz)           GC_malloc_atomic(sz)
# define GC_MALLOC_UNCOLLECTABLE(sz)    GC_malloc_uncollectable(sz)
# define GC_MALLOC_ATOMIC_UNCOLLECTABLE(sz) GC_malloc_atomic_uncollectable(sz)
# define GC_MALLOC_IGNORE_OFF_PAGE(sz)  GC_malloc_ignore_off_page(sz)
# define GC_MALLOC_ATOMIC_IGNORE_OFF_PAGE(sz) GC_malloc_atomic_ignore_off_page(sz)
# define GC_FREE(p)                     GC_free(p)
# define GC_STRDUP(s)                   GC_strdup(s)
# define GC_STRNDUP(s, n)               GC_strndup(s, n)
# define GC_REGISTER_FINALIZER(p, f, d, of, od) GC_register_finalizer(p, f, d, of, od)
# define GC_REGISTER_FINALIZER_IGNORE_SELF(p, f, d, of, od) \
    GC_register_finalizer_ignore_self(p, f, d, of, od)
# define GC_REGISTER_FINALIZER_NO_ORDER(p, f, d, of, od) \
    GC_register_finalizer_no_order(p, f, d, of, od)
# define GC_REGISTER_FINALIZER_UNREACHABLE(p, f, d, of, od) \
    GC_register_finalizer_unreachable(p, f, d, of, od)
# define GC_END_STUBBORN_CHANGE(p)      GC_end_stubborn_change(p)
# define GC_PTR_STORE_AND_DIRTY(p, q)   GC_ptr_store_and_dirty(p, q)
# define GC_GENERAL_REGISTER_DISAPPEARING_LINK(link, obj) \
    GC_general_register_disappearing_link(link, obj)
# define GC_REGISTER_LONG_LINK(link, obj) GC_register_long_link(link, obj)
# define GC_REGISTER_DISPLACEMENT(n)    GC_register_displacement(n)
# define GC_PTR_ADD(x, n)               ((x) + (n))
# define GC_PRE_INCR(x, n)              ((x) += (n))
# define GC_POST_INCR(x)                ((x)++)
# define GC_POST_DECR(x)                ((x)--)
# define GC_PTR_STORE(p, q)             (*(void **)(p) = (void *)(q))
#endif
#define GC_MEMALIGN(a, sz)              GC_memalign(a, sz)
#define GC_POSIX_MEMALIGN(p, a, sz)     GC_posix_memalign(p, a, sz)
#define GC_NEW(t)                       ((t *)GC_MALLOC(sizeof(t)))
#define GC_NEW_ATOMIC(t)                ((t *)GC_MALLOC_ATOMIC(sizeof(t)))
#define GC_NEW_UNCOLLECTABLE(t)         ((t *)GC_MALLOC_UNCOLLECTABLE(sizeof(t)))
/* Stubborn objects are gone from bdwgc 8; these remain as there (no
 * effect). */
#define GC_MALLOC_STUBBORN(sz)          GC_MALLOC(sz)
#define GC_NEW_STUBBORN(t)              GC_NEW(t)
#define GC_CHANGE_STUBBORN(p)           GC_change_stubborn(p)
GC_API void *GC_malloc_stubborn(size_t size) __attribute__((malloc, alloc_size(1)));
GC_API void GC_change_stubborn(const void *p);
/* Writes lfgc cannot see.  The kernel reports the program's writes to the
 * heap (generational mode), including those of system calls such as
 * read(), but not writes into pages it pinned earlier: io_uring registered
 * buffers, RDMA memory regions, device DMA (see docs/api.md).  After such
 * a write, and before the pointers written can become unreachable by
 * other means, call GC_end_stubborn_change on the object written: the
 * next collection rescans all of it.  Pointers outside the heap are
 * ignored.  GC_ptr_store_and_dirty(p, q) stores q at p, then counts the
 * page of p as written and keeps q reachable up to there.  Both are
 * lock-free, for registered threads. */
GC_API void GC_end_stubborn_change(const void *p);
GC_API void GC_ptr_store_and_dirty(void *p, const void *q);
/* bdwgc's switch to its manual dirty bits: stored and returned.  lfgc
 * always takes both the kernel's reports and the program's, so the value
 * changes nothing. */
GC_API void GC_set_manual_vdb_allowed(int);
GC_API int GC_get_manual_vdb_allowed(void);

#ifdef __cplusplus
}
#endif
#endif /* LFGC_GC_H */
