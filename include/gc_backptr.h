/* gc_backptr.h: bdwgc's back-pointer interface, for finding out why an
 * object is retained (a debugging aid).
 *
 * bdwgc answers from back pointers that its debugging allocator records
 * in object headers (in builds with KEEP_BACK_PTRS).  lfgc keeps no
 * headers: it answers by searching the data segments, the added roots and
 * the scanned heap objects for a word that points into the object, which
 * is slower (proportional to the heap) but works for objects from any
 * allocator.  Call GC_gcollect() first: the answers read the marks of the
 * last collection.  docs/api.md has the details.
 */
#ifndef LFGC_GC_BACKPTR_H
#define LFGC_GC_BACKPTR_H

#include "gc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What refers to an object, as GC_get_back_ptr_info reports it. */
typedef enum {
    GC_UNREFERENCED,    /* garbage: the last collection found it dead, or
                           did not mark it and nothing points into it     */
    GC_NO_SPACE,        /* dest is not in an object in use                */
    GC_REFD_FROM_ROOT,  /* a word of static data or of an added root range
                           at *base_p points into it                      */
    GC_REFD_FROM_REG,   /* marked, but no static or heap word points into
                           it: a thread's stack or registers hold it (a
                           root without an address lfgc reports)          */
    GC_REFD_FROM_HEAP,  /* the word at offset *offset_p of the heap object
                           *base_p points into it                          */
    GC_FINALIZER_REFD   /* not reported by lfgc (finalizable objects are
                           found like the others)                         */
} GC_ref_kind;

/* Why is the object dest points into (any address in it) reachable?  The
 * lowest such word is reported: for GC_REFD_FROM_ROOT its address in
 * *base_p and 0 in *offset_p, for GC_REFD_FROM_HEAP the referring object's
 * base in *base_p and the word's offset in it in *offset_p; otherwise
 * both are set to 0.  Pointers from dest's own object do not count.
 * Takes the lock; cost proportional to the heap and the static data. */
GC_API GC_ref_kind GC_get_back_ptr_info(void *dest, void **base_p, size_t *offset_p);

/* A random address in the used part of the heap, not necessarily inside
 * an object in use; NULL before anything was allocated. */
GC_API void *GC_generate_random_heap_address(void);

/* A random address inside an object the last collection marked (and
 * still in use); NULL when none is found (bdwgc would search for ever). */
GC_API void *GC_generate_random_valid_address(void);

/* Collect, pick a random valid address and print its backtrace. */
GC_API void GC_generate_random_backtrace(void);

/* Print, on the log descriptor (GC_set_log_fd), the chain of referrers of
 * the object p points into, as GC_get_back_ptr_info finds them, up to a
 * root (at most 20 steps), each object with its type (the function
 * GC_register_describe_type_fn gave its kind, else the kind).  Call
 * GC_gcollect() just before. */
GC_API void GC_print_backtrace(void *p);

#ifdef __cplusplus
}
#endif

#endif /* LFGC_GC_BACKPTR_H */
