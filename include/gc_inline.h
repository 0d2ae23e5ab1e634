/* gc_inline.h: inline allocation from free lists the program keeps, as in
 * bdwgc 8.2's gc_inline.h (written from its documented semantics).
 *
 * The program keeps an array of GC_TINY_FREELISTS list heads per kind
 * ("tiny_fl"), indexed by size in granules of GC_GRANULE_BYTES; the
 * macros pop an object from the right list, and refill an empty list
 * with GC_generic_malloc_many, whose lists are linked through the
 * objects' first words with plain pointers.  The objects of such a list
 * are allocated objects: the program must keep the array reachable (a
 * global, or a field of a scanned object), and, for pointer-free kinds,
 * whose links are not scanned, expect objects beyond the first to be
 * reclaimed if a collection happens while they wait in the list (as in
 * bdwgc).  lfgc's own allocation is as fast; these macros are for
 * programs written for them.
 */
#ifndef LFGC_GC_INLINE_H
#define LFGC_GC_INLINE_H
#ifndef GC_INLINE_H
# define GC_INLINE_H
#endif

#include "gc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Granules: bdwgc's allocation unit on 64-bit targets (gc_tiny_fl.h). */
#ifndef GC_GRANULE_BYTES
# define GC_GRANULE_BYTES 16
# define GC_GRANULE_WORDS 2
#endif
#define GC_WORDS_TO_GRANULES(n) ((n) * sizeof(void *) / GC_GRANULE_BYTES)
#define GC_WORDS_TO_WHOLE_GRANULES(n) GC_WORDS_TO_GRANULES((n) + GC_GRANULE_WORDS - 1)
#ifndef GC_TINY_FREELISTS
# define GC_TINY_FREELISTS 25      /* lists for 0 .. 24 granules */
#endif
#define GC_RAW_BYTES_FROM_INDEX(i) ((i) * GC_GRANULE_BYTES)

#ifndef GC_I_PTRFREE
# define GC_I_PTRFREE 0      /* GC_malloc_atomic's kind */
# define GC_I_NORMAL  1      /* GC_malloc's kind        */
#endif

#define GC_EXPECT(expr, outcome) __builtin_expect(expr, outcome)
#ifndef GC_PREFETCH_FOR_WRITE
# define GC_PREFETCH_FOR_WRITE(x) __builtin_prefetch((x), 1)
#endif

/* Store in *result a list of new objects of kind k, each of at least
 * `size` bytes, linked through their first words (GC_NEXT); NULL when out
 * of memory, or k is no kind (reported through the warn proc).  Objects
 * of kinds that clear them are zero but for the link.  Up to a page's
 * worth, from the calling thread's own free list, at least one. */
GC_API void GC_generic_malloc_many(size_t size, int k, void **result);

/* An object of kind k, as GC_generic_malloc (gc_mark.h).  The _global
 * form is bdwgc's that bypasses its thread-local lists; in lfgc both use
 * the calling thread's lists. */
GC_API void *GC_malloc_kind(size_t size, int k) __attribute__((malloc, alloc_size(1)));
GC_API void *GC_malloc_kind_global(size_t size, int k) __attribute__((malloc, alloc_size(1)));

/* Print, to lfgc's log (stderr by default, GC_set_log_fd), the calling
 * thread's free list of kind k for objects of that many granules, and the
 * number of objects on the shared list. */
GC_API void GC_print_free_list(int k, size_t sz_in_granules);

/* Kept for bdwgc's programs: store the new head of a list. */
#define GC_FAST_M_AO_STORE(my_fl, next) (void)(*(my_fl) = (next))

/* Pop an object of `granules` granules of kind `kind` from
 * tiny_fl[granules] into result, then evaluate `init` (result set).  A
 * head at most num_direct (and not NULL) counts objects allocated with
 * default_expr before the list is used: the first num_direct allocations
 * of that size take that path.  A NULL (or other small value) head is
 * refilled with GC_generic_malloc_many; granules >= GC_TINY_FREELISTS
 * always use default_expr.  Out of memory gives the OOM function's
 * result. */
#define GC_FAST_MALLOC_GRANS(result, granules, tiny_fl, num_direct, kind, default_expr, init) \
    do {                                                                      \
        if (GC_EXPECT((granules) >= GC_TINY_FREELISTS, 0)) {                  \
            result = (default_expr);                                          \
            break;                                                            \
        }                                                                     \
        void **lfgc_fl_ = (void **)(tiny_fl) + (granules);                    \
        void *lfgc_head_ = *lfgc_fl_;                                         \
        for (;;) {                                                            \
            if (GC_EXPECT((GC_word)lfgc_head_ >                               \
                          (GC_word)(num_direct) + GC_TINY_FREELISTS + 1, 1)) { \
                void *lfgc_next_ = *(void **)lfgc_head_;                      \
                *lfgc_fl_ = lfgc_next_;                                       \
                result = lfgc_head_;                                          \
                init;                                                         \
                GC_PREFETCH_FOR_WRITE(lfgc_next_);                            \
                break;                                                        \
            }                                                                 \
            if (lfgc_head_ != 0 && (GC_word)lfgc_head_ <= (GC_word)(num_direct)) { \
                *lfgc_fl_ = (char *)lfgc_head_ + (granules) + 1;              \
                result = (default_expr);                                      \
                break;                                                        \
            }                                                                 \
            GC_generic_malloc_many((granules) == 0 ? GC_GRANULE_BYTES         \
                                                   : GC_RAW_BYTES_FROM_INDEX(granules), \
                                   kind, lfgc_fl_);                           \
            lfgc_head_ = *lfgc_fl_;                                           \
            if (lfgc_head_ == 0) {                                            \
                result = (*GC_get_oom_fn())((granules) * GC_GRANULE_BYTES);   \
                break;                                                        \
            }                                                                 \
        }                                                                     \
    } while (0)

/* n words (not bytes) of kind `kind` into result, from tiny_fl. */
#define GC_MALLOC_WORDS_KIND(result, n, tiny_fl, kind, init)                  \
    do {                                                                      \
        size_t lfgc_grans_ = GC_WORDS_TO_WHOLE_GRANULES(n);                   \
        GC_FAST_MALLOC_GRANS(result, lfgc_grans_, tiny_fl, 0, kind,           \
                             GC_malloc_kind(lfgc_grans_ * GC_GRANULE_BYTES, kind), init); \
    } while (0)

/* n words of GC_malloc's kind (zeroed, the link word too) or of
 * GC_malloc_atomic's (the link word left as it is). */
#define GC_MALLOC_WORDS(result, n, tiny_fl)                                   \
    GC_MALLOC_WORDS_KIND(result, n, tiny_fl, GC_I_NORMAL, *(void **)(result) = 0)
#define GC_MALLOC_ATOMIC_WORDS(result, n, tiny_fl)                            \
    GC_MALLOC_WORDS_KIND(result, n, tiny_fl, GC_I_PTRFREE, (void)0)

/* A two-word object of GC_malloc's kind holding first and second. */
#define GC_CONS(result, first, second, tiny_fl)                               \
    do {                                                                      \
        void *lfgc_l_ = (void *)(first);                                      \
        void *lfgc_r_ = (void *)(second);                                     \
        GC_MALLOC_WORDS_KIND(result, 2, tiny_fl, GC_I_NORMAL, (void)0);       \
        if ((result) != 0) {                                                  \
            *(void **)(result) = lfgc_l_;                                     \
            GC_PTR_STORE_AND_DIRTY((void **)(result) + 1, lfgc_r_);           \
            GC_reachable_here(lfgc_l_);                                       \
        }                                                                     \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* LFGC_GC_INLINE_H */
