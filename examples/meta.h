/* meta.h: hidden metadata at the base of an object, found from any
 * pointer into it.
 *
 * The low-fat paper's "hidden meta-data" (4.3): meta_malloc() allocates
 * the object with room for a header in front, fills the header and returns
 * the address just past it; meta_of(p) finds the header again from any
 * pointer into the object, interior ones included, because lowfat_base(p)
 * is the object's start.  An ordinary malloc header can only be found from
 * the pointer malloc returned.  What the header holds is the program's
 * choice: here a type tag, the size asked for (so the exact bounds of the
 * object are known, not just its size class) and the allocation site.
 *
 * Works on every pointer lfgc's malloc (liblfgc-malloc) returned.
 * Header-only.
 */
#ifndef EXAMPLES_META_H
#define EXAMPLES_META_H

#include <lowfat.h>
#include <stdint.h>
#include <stdlib.h>

struct meta {
    uint32_t magic;            /* META_MAGIC: the header is ours */
    uint32_t type;             /* the program's type tag */
    uint64_t size;             /* bytes asked for */
    const char *site;          /* where it was allocated */
    uint64_t pad;              /* keeps the object 16-aligned */
};
_Static_assert(sizeof(struct meta) % 16 == 0,
               "the object after the header must keep malloc's alignment");

#define META_MAGIC 0x6d657461u     /* "meta" */

/* size bytes for the program, with a header saying type and site; NULL
 * when out of memory. */
static inline void *meta_malloc(size_t size, uint32_t type, const char *site)
{
    if (size > SIZE_MAX - sizeof(struct meta))
        return NULL;
    struct meta *m = malloc(sizeof *m + size);
    if (m == NULL)
        return NULL;
    m->magic = META_MAGIC;
    m->type = type;
    m->size = size;
    m->site = site;
    m->pad = 0;
    return m + 1;
}

/* The header of the object p points into (p may be interior), or NULL
 * when p is not a low-fat pointer or its object has no header.  A few
 * inlined instructions: no search, no table of objects. */
static inline struct meta *meta_of(const void *p)
{
    struct meta *m = lowfat_base(p);
    if (m == NULL || m->magic != META_MAGIC)
        return NULL;
    return m;
}

/* Exact bounds: do the n bytes at p lie inside what was asked for? */
static inline int meta_in_bounds(const void *p, size_t n)
{
    const struct meta *m = meta_of(p);
    if (m == NULL)
        return 0;
    uintptr_t lo = (uintptr_t)(m + 1), q = (uintptr_t)p;
    return q >= lo && n <= m->size && q - lo <= m->size - n;
}

/* Free the object p points into, from any pointer into it. */
static inline void meta_free(void *p)
{
    struct meta *m = meta_of(p);
    if (m) {
        m->magic = 0;
        free(m);
    }
}

#endif /* EXAMPLES_META_H */
