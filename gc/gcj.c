/* gcj.c: gcj-style allocation (bdwgc's gc_gcj.h).
 *
 * One kind whose descriptor is per object and indirect: the object's
 * first word points to a type record whose word at MARK_DESCR_OFFSET is
 * the descriptor (GC_DS_PER_OBJECT with a negative offset, decoded by the
 * marker's scan_descr like any other).  The marker never reads the first
 * word of a free slot (it holds the free-list link), and a first word of
 * 0 (an object whose type is not set yet) scans nothing.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#include "gc_gcj.h"

/* Where gcj keeps the descriptor in a type record: its second word. */
#define MARK_DESCR_OFFSET sizeof(GC_word)

LFGC_EXPORT LF_UNSCANNED int GC_gcj_kind = 0;
LFGC_EXPORT LF_UNSCANNED int GC_gcj_debug_kind = 0;
static LF_UNSCANNED pthread_mutex_t gcj_lock = PTHREAD_MUTEX_INITIALIZER;
static LF_UNSCANNED bool gcj_ready;      /* written once, under gcj_lock */

LFGC_EXPORT void GC_init_gcj_malloc(int mp_index, void *mp)
{
    if (mp_index < 0 || mp_index >= GC_MAX_MARK_PROCS || (unsigned)mp_index == LF_TYPED_PROC_INDEX)
        lf_abort("lfgc: GC_init_gcj_malloc: bad mark procedure index (0 to 63, not 7)");
    lf_ensure_init();
    pthread_mutex_lock(&gcj_lock);
    if (__atomic_load_n(&gcj_ready, __ATOMIC_ACQUIRE)) {
        pthread_mutex_unlock(&gcj_lock);
        return;
    }
    /* Type records whose descriptor is GC_MAKE_PROC(mp_index, env) call mp. */
    if (!lf_mark_proc_set((unsigned)mp_index, (GC_mark_proc)mp)) {
        pthread_mutex_unlock(&gcj_lock);
        char msg[200];
        snprintf(msg, sizeof msg, "lfgc: GC_init_gcj_malloc: mark procedure index %d is "
                 "neither reserved (0 to 6) nor one that GC_new_proc returned", mp_index);
        lf_abort(msg);
    }
    int k;
    if (getenv("GC_IGNORE_GCJ_INFO"))
        k = lf_kind_new_sized(SCAN_CONSERVATIVE, 0, true, NULL, 0, true, false);
    else
        k = lf_kind_new_sized(SCAN_PER_OBJECT,
                              (GC_word)(-(GC_signed_word)MARK_DESCR_OFFSET -
                                        GC_INDIR_PER_OBJ_BIAS) | GC_DS_PER_OBJECT,
                              false, NULL, 0, true, false);
    if (k < 0)
        lf_abort("lfgc: GC_init_gcj_malloc: no room for its kind (255 kinds in all)");
    GC_gcj_kind = GC_gcj_debug_kind = k;
    __atomic_store_n(&gcj_ready, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&gcj_lock);
}

LFGC_EXPORT void *GC_gcj_malloc(size_t bytes, void *ptr_to_struct_containing_descr)
{
    if (unlikely(!__atomic_load_n(&gcj_ready, __ATOMIC_ACQUIRE)))
        GC_init_gcj_malloc(GC_GCJ_RESERVED_MARK_PROC_INDEX, NULL);
    void **p = lf_alloc_kind(bytes < sizeof(void *) ? sizeof(void *) : bytes,
                             (unsigned)GC_gcj_kind);
    if (p)
        *p = ptr_to_struct_containing_descr;
    return p;
}

LFGC_EXPORT void *GC_gcj_malloc_ignore_off_page(size_t bytes, void *ptr_to_struct_containing_descr)
{
    return GC_gcj_malloc(bytes, ptr_to_struct_containing_descr);
}

LFGC_EXPORT void *GC_debug_gcj_malloc(size_t bytes, void *ptr_to_struct_containing_descr,
                                      GC_EXTRA_PARAMS)
{
    (void)s;
    (void)i;
    return GC_gcj_malloc(bytes, ptr_to_struct_containing_descr);
}
