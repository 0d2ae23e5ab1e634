/* gc_gcj.h: gcj-style allocation, as in bdwgc 8.2's gc_gcj.h.
 *
 * Objects whose first word points to a type record (a vtable), which
 * holds, at byte 8 (MARK_DESCR_OFFSET), a mark descriptor (gc_mark.h) for
 * objects of that type: a length, a bitmap, a GC_make_descriptor result or
 * a mark procedure (GC_MAKE_PROC).  Only the words the descriptor names
 * are scanned; the type record itself is not part of the object.
 *
 * Written from bdwgc's documented semantics; where lfgc differs, the
 * comment says so (docs/api.md, "gcj-style allocation").
 */
#ifndef LFGC_GC_GCJ_H
#define LFGC_GC_GCJ_H
/* bdwgc's guard, tested by programs that include its headers piecemeal. */
#ifndef GC_GCJ_H
# define GC_GCJ_H
#endif

#include "gc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Set up gcj-style allocation; calls after the first do nothing.
 * mp_index is the mark-procedure index that mp, a GC_mark_proc, gets, so
 * that type records may hold GC_MAKE_PROC(mp_index, env) descriptors: a
 * reserved one (0 to 6, 7 being kept by lfgc for GC_make_descriptor's
 * long layouts; gcj uses GC_GCJ_RESERVED_MARK_PROC_INDEX, 0) or one that
 * GC_new_proc returned; mp may be NULL.  With the environment variable GC_IGNORE_GCJ_INFO set,
 * gcj objects are scanned whole, conservatively.  A bad index is reported
 * on stderr and aborts, as in bdwgc. */
GC_API void GC_init_gcj_malloc(int mp_index, void *mp);

/* A cleared object of `bytes` bytes (at least 8) whose first word is set
 * to ptr_to_struct_containing_descr, the type record.  The object is
 * scanned as the descriptor at byte 8 of the record says, at every
 * collection (the record may change, its descriptor should not while
 * objects of the type exist).  A first word of 0 scans nothing.  Calls
 * GC_init_gcj_malloc(0, NULL) if nobody did. */
GC_API void *GC_gcj_malloc(size_t bytes, void *ptr_to_struct_containing_descr)
    __attribute__((malloc, alloc_size(1)));
/* The same (interior pointers cost lfgc nothing: the hint changes
 * nothing). */
GC_API void *GC_gcj_malloc_ignore_off_page(size_t bytes, void *ptr_to_struct_containing_descr)
    __attribute__((malloc, alloc_size(1)));
/* GC_gcj_malloc: lfgc's debugging calls forward to the plain ones (file
 * and line are not kept). */
GC_API void *GC_debug_gcj_malloc(size_t bytes, void *ptr_to_struct_containing_descr,
                                 GC_EXTRA_PARAMS) __attribute__((malloc, alloc_size(1)));

/* The kinds of gcj objects (GC_generic_malloc may allocate of them), set
 * by GC_init_gcj_malloc.  lfgc's debugging allocation adds no header, so
 * GC_gcj_debug_kind is GC_gcj_kind. */
GC_API int GC_gcj_kind;
GC_API int GC_gcj_debug_kind;

#ifdef GC_DEBUG
# define GC_GCJ_MALLOC(s, d) GC_debug_gcj_malloc(s, d, GC_EXTRAS)
# define GC_GCJ_MALLOC_IGNORE_OFF_PAGE(s, d) GC_debug_gcj_malloc(s, d, GC_EXTRAS)
#else
# define GC_GCJ_MALLOC(s, d) GC_gcj_malloc(s, d)
# define GC_GCJ_MALLOC_IGNORE_OFF_PAGE(s, d) GC_gcj_malloc_ignore_off_page(s, d)
#endif

#ifdef __cplusplus
}
#endif

#endif /* LFGC_GC_GCJ_H */
