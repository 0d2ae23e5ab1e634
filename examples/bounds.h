/* bounds.h: bounds-checked memcpy and strcpy with the low-fat API.
 *
 * The low-fat paper's "optimally instrumented" memcpy (Duck and Yap, "An
 * Extended Low Fat Allocator API and Applications", 4.1): instead of a
 * check per byte, one check per call, because lowfat_usable_size(p) tells
 * how many bytes are left from p to the end of p's object, whatever p is
 * (a base or an interior pointer).  A copy that would run past the end of
 * its destination's slot, into the next object, is refused.
 *
 * The bound is the object's slot (the size class, padding included), not
 * the size asked of malloc: a write into the padding is not caught, a
 * write into the next object always is.  Pointers that are not low-fat
 * (stack, globals, another allocator's memory) have no known bound and are
 * not checked (lowfat_usable_size is then at least 2^63).
 *
 * Works on every pointer lfgc's malloc (liblfgc-malloc) returned.
 * Header-only.
 */
#ifndef EXAMPLES_BOUNDS_H
#define EXAMPLES_BOUNDS_H

#include <lowfat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Called on an out-of-bounds copy with the function's name, the pointer
 * whose object is too small, the bytes asked for and the bytes there are.
 * The default prints one line and aborts; a handler that returns makes the
 * function return without copying anything. */
typedef void (*bounds_handler)(const char *fn, const void *p, size_t want,
                               size_t room);

static void bounds_abort(const char *fn, const void *p, size_t want,
                         size_t room)
{
    fprintf(stderr, "bounds: %s of %zu bytes at %p overflows its object "
            "(%zu bytes left)\n", fn, want, p, room);
    abort();
}

static bounds_handler bounds_on_error = bounds_abort;

/* memcpy, checked once: n must fit in both dst's and src's objects. */
static inline void *checked_memcpy(void *dst, const void *src, size_t n)
{
    size_t d = lowfat_usable_size(dst), s = lowfat_usable_size(src);
    if (__builtin_expect(n > d, 0)) {
        bounds_on_error("memcpy (destination)", dst, n, d);
        return dst;
    }
    if (__builtin_expect(n > s, 0)) {
        bounds_on_error("memcpy (source)", src, n, s);
        return dst;
    }
    return memcpy(dst, src, n);
}

/* strcpy, checked once: the source must end (a NUL) inside its object,
 * and the string with its NUL must fit in dst's object. */
static inline char *checked_strcpy(char *dst, const char *src)
{
    size_t s = lowfat_usable_size(src);
    size_t len = strnlen(src, s);
    if (__builtin_expect(len == s, 0)) {
        bounds_on_error("strcpy (unterminated source)", src, len + 1, s);
        return dst;
    }
    size_t d = lowfat_usable_size(dst);
    if (__builtin_expect(len + 1 > d, 0)) {
        bounds_on_error("strcpy (destination)", dst, len + 1, d);
        return dst;
    }
    return memcpy(dst, src, len + 1);
}

#endif /* EXAMPLES_BOUNDS_H */
