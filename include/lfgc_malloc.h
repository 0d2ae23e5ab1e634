/* lfgc_malloc.h: manual mode, lfgc as a malloc.
 *
 * liblfgc-malloc (LD_PRELOAD=liblfgc-malloc.so, or linked with
 * `pkg-config --libs lfgc-malloc`) replaces the C library's malloc family
 * and C++'s operator new and delete with these functions, which live in
 * liblfgc itself and may also be called by these names without replacing
 * anything.  Their objects are never collected and never scanned: free
 * them explicitly.  Every pointer they return is a low-fat pointer, so
 * lowfat.h's functions (lowfat_base, lowfat_size, lowfat_offset,
 * lowfat_usable_size, lowfat_is_heap_ptr) work on it and on any pointer
 * into its object.
 *
 * Bad pointers given to free, realloc or malloc_usable_size (an interior
 * pointer, a stack or global address, another allocator's pointer, one
 * already freed) print one line on stderr naming the pointer and what it
 * is, then abort(); LFGC_MALLOC_ERRORS=warn prints and goes on,
 * LFGC_MALLOC_ERRORS=ignore goes on silently; nothing changes in the heap
 * either way.  LFGC_MALLOC_WIPE=1 zeroes objects when they are freed;
 * LFGC_MALLOC_RANDOM=1 hands out free slots in a random order.  See
 * docs/api.md ("Manual mode").
 */
#ifndef LFGC_MALLOC_H
#define LFGC_MALLOC_H

#include <stddef.h>
#include <malloc.h>
#include <stdio.h>
#include "lowfat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* As malloc: n bytes, aligned to 16; NULL and errno ENOMEM when out of
 * memory or n is too large (more than 8 GiB). */
extern void *lfgc_malloc(size_t n);
/* As free: p from any of these functions, or NULL. */
extern void lfgc_free(void *p);
/* As calloc: zeroed; NULL and ENOMEM when count * size overflows. */
extern void *lfgc_calloc(size_t count, size_t size);
/* As realloc: in place while n fits the object's slot and uses at least
 * half of it; realloc(p, 0) frees p and returns NULL. */
extern void *lfgc_realloc(void *p, size_t n);
/* As reallocarray: NULL and ENOMEM when count * size overflows. */
extern void *lfgc_reallocarray(void *p, size_t count, size_t size);
/* As memalign (glibc's: an alignment that is not a power of two is
 * rounded up to one). */
extern void *lfgc_memalign(size_t align, size_t n);
/* As aligned_alloc: NULL and EINVAL unless align is a power of two. */
extern void *lfgc_aligned_alloc(size_t align, size_t n);
/* As posix_memalign: EINVAL unless align is a power of two multiple of
 * sizeof(void *), ENOMEM when out of memory; *out unchanged on failure. */
extern int lfgc_posix_memalign(void **out, size_t align, size_t n);
/* As valloc and pvalloc: page-aligned (pvalloc: size rounded up to a
 * page). */
extern void *lfgc_valloc(size_t n);
extern void *lfgc_pvalloc(size_t n);
/* Bytes usable at p, a pointer these functions returned: the size of its
 * low-fat slot, lowfat_usable_size(p).  0 for NULL. */
extern size_t lfgc_malloc_usable_size(void *p);
/* Give free memory back to the OS now: every span of small objects that
 * is wholly free.  (Large objects go back when freed; small spans when a
 * good part of the heap has been freed.)  Returns 1 if some memory was
 * given back.  pad is ignored. */
extern int lfgc_malloc_trim(size_t pad);
/* Figures of malloc's heap: arena (bytes of small-object spans), ordblks
 * and fordblks (free small slots, and their bytes, outside the threads'
 * caches), hblks and hblkhd (large objects, one span each, and their
 * bytes), uordblks (bytes in use, thread caches included). */
extern struct mallinfo2 lfgc_mallinfo2(void);
extern struct mallinfo lfgc_mallinfo(void);
/* As glibc's malloc_stats: those figures on stderr, in glibc's layout
 * (arena 0 is the small-object spans; "mmap" lines are large objects). */
extern void lfgc_malloc_stats(void);
/* As glibc's malloc_info: the same figures as XML in glibc's format on fp;
 * options must be 0 (else -1 and EINVAL).  No per-size lines. */
extern int lfgc_malloc_info(int options, FILE *fp);
/* As glibc's mallopt: its parameters tune glibc's arenas and thresholds,
 * which lfgc does not have; each is accepted (1) and ignored, except an
 * M_MXFAST glibc refuses (0). */
extern int lfgc_mallopt(int param, int value);

#ifdef __cplusplus
}
#endif
#endif /* LFGC_MALLOC_H */
