/* gc_typed.h: allocation with an explicit layout, as in bdwgc 8.2's
 * gc_typed.h.
 *
 * A program describes which words of its objects may hold pointers, as a
 * bitmap, and gets a descriptor for it once per type; objects allocated
 * with that descriptor have only those words scanned.  Any other word may
 * hold anything (an integer that looks like an address retains nothing).
 *
 * Written from bdwgc's documented semantics; where lfgc differs, the
 * comment says so (docs/api.md, "Typed allocation").
 */
#ifndef LFGC_GC_TYPED_H
#define LFGC_GC_TYPED_H
/* bdwgc's guard, tested by programs that include its headers piecemeal. */
#ifndef GC_TYPED_H
# define GC_TYPED_H
#endif

#include <stddef.h>
#include "gc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A layout: bit i (bit i % GC_WORDSZ of word i / GC_WORDSZ) is 1 when
 * word i of the object may hold a pointer. */
typedef GC_word *GC_bitmap;
#define GC_WORDSZ (8 * sizeof(GC_word))
#define GC_get_bit(bm, index) (((bm)[(index) / GC_WORDSZ] >> ((index) % GC_WORDSZ)) & 1)
#define GC_set_bit(bm, index) ((bm)[(index) / GC_WORDSZ] |= (GC_word)1 << ((index) % GC_WORDSZ))
/* The word of type t that field f starts in; the words of t; the words of
 * a bitmap for t. */
#define GC_WORD_OFFSET(t, f) (offsetof(t, f) / sizeof(GC_word))
#define GC_WORD_LEN(t) (sizeof(t) / sizeof(GC_word))
#define GC_BITMAP_SIZE(t) ((GC_WORD_LEN(t) + GC_WORDSZ - 1) / GC_WORDSZ)

typedef GC_word GC_descr;

/* The descriptor of the layout bm, of len bits (words); words past len
 * hold no pointers.  Call it once per type, not per object: a layout
 * longer than 62 words keeps a copy of the bitmap for the life of the
 * process.  The result is a mark descriptor (gc_mark.h): a length when the
 * pointers are the first words, a bitmap descriptor up to 62 words, else
 * a mark-procedure descriptor the marker recognises.  0: no pointers.  If
 * the copy cannot be made (out of memory), the result scans the first len
 * words conservatively.  Thread-safe. */
GC_API GC_descr GC_make_descriptor(const GC_word *bm, size_t len);

/* A cleared object of `bytes` bytes whose words are scanned as d says.  It
 * is 8 bytes larger inside (the descriptor is kept in its last word) and
 * may not be resized: GC_realloc reports it and returns NULL.  GC_free,
 * GC_base, GC_size and finalization work as for any object.  bytes should
 * cover the words d names; names past the object are ignored. */
GC_API void *GC_malloc_explicitly_typed(size_t bytes, GC_descr d)
    __attribute__((malloc, alloc_size(1)));
/* The same (lfgc recognises interior pointers at no cost, so the hint
 * that only pointers to the first page matter changes nothing). */
GC_API void *GC_malloc_explicitly_typed_ignore_off_page(size_t bytes, GC_descr d)
    __attribute__((malloc, alloc_size(1)));
/* A cleared array of n elements of elem_bytes bytes each (a multiple of
 * 8), each element's words scanned as d says.  An array whose elements
 * fit one bitmap descriptor together gets that; a larger one keeps its
 * count, element size and d in its last three words.  An element size
 * that is not a multiple of 8 gets the whole array scanned
 * conservatively.  n * elem_bytes overflowing gives the OOM function's
 * result.  Not resizable either. */
GC_API void *GC_calloc_explicitly_typed(size_t n, size_t elem_bytes, GC_descr d)
    __attribute__((malloc, alloc_size(1, 2)));

#ifdef GC_DEBUG
/* As bdwgc: debugging allocation does not know layouts, and scans the
 * whole object. */
# define GC_MALLOC_EXPLICITLY_TYPED(bytes, d) ((void)(d), GC_MALLOC(bytes))
# define GC_CALLOC_EXPLICITLY_TYPED(n, bytes, d) ((void)(d), GC_MALLOC((n) * (bytes)))
#else
# define GC_MALLOC_EXPLICITLY_TYPED(bytes, d) GC_malloc_explicitly_typed(bytes, d)
# define GC_CALLOC_EXPLICITLY_TYPED(n, bytes, d) GC_calloc_explicitly_typed(n, bytes, d)
#endif

#ifdef __cplusplus
}
#endif

#endif /* LFGC_GC_TYPED_H */
