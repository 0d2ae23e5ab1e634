/* gc_disclaim.h: disclaim procedures and finalized allocation, as in
 * bdwgc (docs/api.md, "Finalization").  A disclaim procedure is asked,
 * after a collection, about each object of its kind found unreachable;
 * finalized allocation builds on it and costs no table entry. */
#ifndef LFGC_GC_DISCLAIM_H
#define LFGC_GC_DISCLAIM_H

#include "gc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Make GC_finalized_malloc's kind (it is also made by the first call). */
GC_API void GC_init_finalized_malloc(void);

/* Called with lfgc's lock held and the world running: it must not
 * allocate nor call lfgc.  Nonzero keeps the object until the next
 * collection; zero lets it be reclaimed now. */
typedef int (*GC_disclaim_proc)(void *obj);

/* Ask proc about every object of `kind` a collection finds unreachable.
 * With mark_from_all, what any object of the kind points to (reachable
 * or not) is kept, so that proc may use it; chains of such objects then
 * take one collection per link to go.  GC_free does not ask proc. */
GC_API void GC_register_disclaim_proc(int kind, GC_disclaim_proc proc, int mark_from_all);

struct GC_finalizer_closure {
    GC_finalization_proc proc;
    void *cd;
};

/* An object of `bytes` whose fc->proc(obj, fc->cd) runs once it is
 * unreachable, with no ordering, as a disclaim procedure (lock held: the
 * procedure must not allocate).  What it points to, and *fc if in the
 * heap, are kept until then.  GC_base(obj) is one word before obj. */
GC_API void *GC_finalized_malloc(size_t bytes, const struct GC_finalizer_closure *fc);

#ifdef __cplusplus
}
#endif

#endif /* LFGC_GC_DISCLAIM_H */
