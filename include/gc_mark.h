/* gc_mark.h: lfgc's interface for language runtimes that describe their
 * objects' layout to the collector: kinds, mark descriptors, mark
 * procedures, mark bits and the push API, as in bdwgc 8.2's gc_mark.h.
 *
 * Written from bdwgc's documented semantics; where lfgc differs, the
 * comment says so (docs/api.md, "Kinds and mark procedures", and
 * docs/compatibility.md).
 */
#ifndef LFGC_GC_MARK_H
#define LFGC_GC_MARK_H
/* bdwgc's guard, tested by programs that include its headers piecemeal. */
#ifndef GC_MARK_H
# define GC_MARK_H
#endif

#include "gc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Mark descriptors                                                    */

/* A descriptor is a word whose low two bits (the tag) say how the rest
 * describes an object's pointers:
 *   GC_DS_LENGTH      the whole word is a length in bytes (a multiple of
 *                     8): the object's first that many bytes may hold
 *                     pointers.  0: none (pointer-free).
 *   GC_DS_BITMAP      the other 62 bits are a bitmap of the object's
 *                     first 62 words, most significant bit for word 0: a 1
 *                     marks a word that may hold a pointer.
 *   GC_DS_PROC        a mark procedure (GC_new_proc's index) and its
 *                     argument, made with GC_MAKE_PROC.
 *   GC_DS_PER_OBJECT  the real descriptor is in the object: at byte offset
 *                     (descr & ~GC_DS_TAGS), or, when that offset is
 *                     negative, at (*(char **)object - offset -
 *                     GC_INDIR_PER_OBJ_BIAS), i.e. in a type record the
 *                     object's first word points to. */
#define GC_DS_TAG_BITS   2
#define GC_DS_TAGS       ((1 << GC_DS_TAG_BITS) - 1)
#define GC_DS_LENGTH     0
#define GC_DS_BITMAP     1
#define GC_DS_PROC       2
#define GC_DS_PER_OBJECT 3
#define GC_INDIR_PER_OBJ_BIAS 0x10

/* Mark procedures: up to GC_MAX_MARK_PROCS, the first
 * GC_RESERVED_MARK_PROCS of them set aside for clients that need a fixed
 * index (gcj-style allocation takes index 0). */
#define GC_LOG_MAX_MARK_PROCS 6
#define GC_MAX_MARK_PROCS (1 << GC_LOG_MAX_MARK_PROCS)
#define GC_RESERVED_MARK_PROCS 8
#define GC_GCJ_RESERVED_MARK_PROC_INDEX 0
/* A descriptor that calls mark procedure proc_index with env, an
 * unsigned value of at most 56 bits. */
#define GC_MAKE_PROC(proc_index, env) \
    (((((env) << GC_LOG_MAX_MARK_PROCS) | (proc_index)) << GC_DS_TAG_BITS) | GC_DS_PROC)

/* How much a mark procedure is expected to scan per call, as in bdwgc;
 * lfgc does not depend on it. */
#define GC_PROC_BYTES 100

/* A mark-stack entry, opaque to clients: a mark procedure passes the
 * pointer it got and returns what GC_mark_and_push returned, nothing
 * else.  lfgc's markers keep their own stacks; the pointers a procedure
 * receives name the marker that calls it. */
struct GC_ms_entry { void *opaque; };

/* A mark procedure, called for each marked object of a kind whose
 * descriptor is GC_MAKE_PROC(index, env): addr is the object's base,
 * env the descriptor's argument.  It marks what the object references
 * by calling GC_MARK_AND_PUSH (or GC_mark_and_push) on each reference,
 * threading mark_stack_ptr through the calls, and returns the last
 * value.  It runs with the world stopped, on any marker thread (several
 * at once when marking is parallel), during full and minor collections
 * alike: it must not allocate, take locks the program may hold, or
 * call lfgc other than the calls of this header that say they may be
 * called from a mark procedure.  It should look for references only in
 * the object (a minor collection calls it again only for objects on
 * pages written since the last collection) and be cheap, as bdwgc
 * requires.  lfgc never calls it on a free slot; a dead object not yet
 * swept still holds its old contents. */
typedef struct GC_ms_entry *(*GC_mark_proc)(GC_word *addr, struct GC_ms_entry *mark_stack_ptr,
                                            struct GC_ms_entry *mark_stack_limit, GC_word env);

/* From a mark procedure: if obj points into (the base or anywhere
 * inside) an object of lfgc's heap, mark that object and, if it was not
 * marked before, queue it to be scanned as its kind says.  Anything else
 * (NULL, an integer, memory lfgc did not allocate) is ignored.  Returns
 * the mark-stack pointer to continue with.  Stack overflow is handled:
 * an object that does not fit is marked and rescanned later.  src (where
 * obj was read) is not used.  Called outside a mark procedure, with a
 * pointer no marker gave, it reports the misuse and aborts. */
GC_API struct GC_ms_entry *GC_mark_and_push(void *obj, struct GC_ms_entry *mark_stack_ptr,
                                            struct GC_ms_entry *mark_stack_limit, void **src);
/* GC_mark_and_push for words that may point into the heap, without the
 * call for those that cannot (outside the plausible heap bounds). */
#define GC_MARK_AND_PUSH(obj, msp, lim, src) \
    ((GC_word)(obj) >= (GC_word)GC_least_plausible_heap_addr && \
     (GC_word)(obj) <= (GC_word)GC_greatest_plausible_heap_addr \
         ? GC_mark_and_push(obj, msp, lim, src) : (msp))

/* A new mark procedure's index for GC_MAKE_PROC (GC_RESERVED_MARK_PROCS
 * and up).  Past GC_MAX_MARK_PROCS procedures lfgc reports it and aborts,
 * as bdwgc does.  Thread-safe; GC_new_proc_inner is the same call (bdwgc
 * expects the lock held there; lfgc takes its own). */
GC_API unsigned GC_new_proc(GC_mark_proc proc);
GC_API unsigned GC_new_proc_inner(GC_mark_proc proc);

/* ------------------------------------------------------------------ */
/* Kinds                                                               */

/* The predefined kinds' numbers (bdwgc's gc_inline.h names the first
 * two). */
#ifndef GC_I_PTRFREE
# define GC_I_PTRFREE 0      /* GC_malloc_atomic's kind */
# define GC_I_NORMAL  1      /* GC_malloc's kind        */
#endif

/* A free-list array to pass to GC_new_kind.  lfgc keeps its free lists
 * per thread: the array (257 entries) stays NULL and is never collected.
 * The _inner form is the same call. */
GC_API void **GC_new_free_list(void);
GC_API void **GC_new_free_list_inner(void);

/* A new kind, whose objects are scanned as the descriptor says:
 *   GC_DS_LENGTH, n bytes (a multiple of 8): the first n bytes of each
 *     object (at most the object); 0: pointer-free.  With
 *     add_size_to_descriptor = 1 the object's size is added to n (0:
 *     whole objects, as GC_malloc's; -8: all but the last word).
 *   GC_DS_BITMAP: only the words the bitmap names (add_size must be 0).
 *   GC_DS_PER_OBJECT: the descriptor is read from each object, at the
 *     byte offset given (from the object's end with add_size = 1), or,
 *     for a negative offset without add_size, from the type record the
 *     object's first word points to (see GC_DS_PER_OBJECT above; a first
 *     word of 0 scans nothing).  That descriptor may be a length, a
 *     bitmap, a mark procedure or a per-object descriptor again (followed
 *     4 deep, then the object is scanned whole); one with its offset
 *     outside the object scans the object whole.
 *   GC_MAKE_PROC(index, env): the mark procedure (add_size must be 0).
 * Only the words a descriptor names are scanned, by full and minor
 * collections alike; free slots are never scanned.  clear_new_objects =
 * 1 zeroes objects when they are allocated.  A descriptor lfgc does not
 * accept yet, add_size with a bitmap, and a full table (255 kinds in
 * all) are reported on stderr and abort, as bdwgc aborts on a full table.
 * free_list is not used.  Thread-safe; GC_new_kind_inner is the same
 * call. */
GC_API unsigned GC_new_kind(void **free_list, GC_word mark_descriptor_template,
                            int add_size_to_descriptor, int clear_new_objects);
GC_API unsigned GC_new_kind_inner(void **free_list, GC_word mark_descriptor_template,
                                  int add_size_to_descriptor, int clear_new_objects);

/* An object of kind k (a predefined kind's number or GC_new_kind's
 * result; anything else is reported through the warn proc and gives
 * NULL).  Its contents are zero only if the kind clears new objects. */
GC_API void *GC_generic_malloc(size_t size, int k) __attribute__((malloc, alloc_size(1)));
/* The same: lfgc recognises interior pointers at no cost, so the hint
 * that only pointers to the first page matter changes nothing. */
GC_API void *GC_generic_malloc_ignore_off_page(size_t size, int k)
    __attribute__((malloc, alloc_size(1)));
/* An object of kind k that is never reclaimed (until GC_free) and whose
 * contents are scanned as roots, as k's descriptor says.  For kinds that
 * do not clear new objects the contents are zeroed anyway (bdwgc clears
 * uncollectable objects too). */
GC_API void *GC_generic_malloc_uncollectable(size_t size, int k)
    __attribute__((malloc, alloc_size(1)));
/* An object of the kind GC_get_kind_and_size reported, uncollectable ones
 * included: GC_malloc_uncollectable's kind gives an uncollectable object,
 * as in bdwgc. */
GC_API void *GC_generic_or_special_malloc(size_t size, int k) __attribute__((malloc, alloc_size(1)));
GC_API void *GC_debug_generic_or_special_malloc(size_t size, int k, GC_EXTRA_PARAMS)
    __attribute__((malloc, alloc_size(1)));
#ifdef GC_DEBUG
# define GC_GENERIC_OR_SPECIAL_MALLOC(sz, k) GC_debug_generic_or_special_malloc(sz, k, GC_EXTRAS)
#else
# define GC_GENERIC_OR_SPECIAL_MALLOC(sz, k) GC_generic_or_special_malloc(sz, k)
#endif

/* The kind of the heap object p points into (p may be interior), and its
 * size (GC_size) in *psize when psize is not NULL. */
GC_API int GC_get_kind_and_size(const void *p, size_t *psize);

/* A function that describes the type of an object of some kind in at
 * most GC_TYPE_DESCR_LEN bytes of out_buf (NUL-terminated), for debug
 * printing: GC_print_backtrace shows it for each object of the kind that
 * the last collection marked (others show their kind).  Called without
 * the lock; it must not allocate. */
typedef void (*GC_describe_type_fn)(void *p, char *out_buf);
#define GC_TYPE_DESCR_LEN 40
GC_API void GC_register_describe_type_fn(int kind, GC_describe_type_fn fn);

/* The size of the debugging header of GC_debug_malloc's objects (0 in
 * lfgc), and the user pointer of a debug object from its base. */
#define GC_USR_PTR_FROM_BASE(p) ((void *)((char *)(p) + GC_get_debug_header_size()))

/* Clears some of the stack below the caller; returns its argument. */
GC_API void *GC_clear_stack(void *arg);

/* ------------------------------------------------------------------ */
/* Mark bits                                                           */

/* The mark bit of the object p points into (p may be interior): whether
 * the last collection found it reachable, or whether it was marked since.
 * bdwgc requires the lock; lfgc's calls are safe without it, but a
 * collection may change the bit at any time unless the caller holds the
 * lock (GC_alloc_lock) or the world is stopped.  A pointer that is not
 * into lfgc's heap is reported through the warn proc (GC_is_marked
 * returns 0 for it). */
GC_API int GC_is_marked(const void *p);
GC_API void GC_clear_mark_bit(const void *p);
GC_API void GC_set_mark_bit(const void *p);

/* ------------------------------------------------------------------ */
/* The push API: more roots, from a callback                           */

/* Scan [bottom, top) for pointers now, as part of the collection in
 * progress: for use in a push-other-roots callback (below) or a mark
 * procedure.  Outside a collection they do nothing.  GC_push_all_eager
 * and GC_push_all are the same in lfgc, as are GC_push_conditional's
 * two forms (lfgc has no incremental marking, all = 0 means all). */
GC_API void GC_push_all(void *bottom, void *top);
GC_API void GC_push_all_eager(void *bottom, void *top);
GC_API void GC_push_conditional(void *bottom, void *top, int all);
/* bdwgc pushes its finalization tables; lfgc's are marked anyway: does
 * nothing. */
GC_API void GC_push_finalizer_structures(void);

/* A procedure called by every collection, with the world stopped, after
 * the other roots are marked, to push more roots (GC_push_all).  The
 * default does nothing (it is not NULL: one set should call the one it
 * replaces, GC_get_push_other_roots); NULL sets none. */
typedef void (*GC_push_other_roots_proc)(void);
GC_API void GC_set_push_other_roots(GC_push_other_roots_proc fn);
GC_API GC_push_other_roots_proc GC_get_push_other_roots(void);
/* The same procedure as a variable: not in bdwgc's headers, but exported
 * by its library, and written directly by some runtimes (ECL). */
GC_API GC_push_other_roots_proc GC_push_other_roots;

/* ------------------------------------------------------------------ */
/* Other calls of bdwgc's gc_mark.h                                    */

/* Call proc(base, bytes, client_data) for every object the last
 * collection found reachable (marked) and still in use, and every
 * uncollectable object; bytes is GC_size(base).  The caller holds the
 * lock (GC_call_with_alloc_lock); proc must not allocate or free. */
typedef void (*GC_reachable_object_proc)(void *obj, size_t bytes, void *client_data);
GC_API void GC_enumerate_reachable_objects_inner(GC_reachable_object_proc proc,
                                                 void *client_data);
/* Whether p lies in one of bdwgc's temporary roots: always 0 in lfgc. */
GC_API int GC_is_tmp_root(void *p);
/* bdwgc's trace of a collection (a debugging build's): does nothing. */
GC_API void GC_print_trace(GC_word gc_no);
GC_API void GC_print_trace_inner(GC_word gc_no);

#ifdef __cplusplus
}
#endif

#endif /* LFGC_GC_MARK_H */
