/* lfvec.h: low-fat vectors, whose length and capacity come from the
 * pointer alone.
 *
 * The low-fat paper's "low-fat vectors" (4.5): a C++-style vector is
 * usually three words (data, length, capacity) plus its array.  Here it is
 * a single pointer into its array, pointing just past the last item: the
 * array's start is lowfat_base(v), the length is lowfat_offset(v) / sizeof
 * item and the capacity follows from lowfat_size(v).  Nothing but the items
 * is stored.  The pointer must stay inside its object, so the array always
 * keeps one free slot: it grows (doubles, by realloc) as soon as a push
 * fills it.
 *
 *   lfvec v = lfvec_new(n);          room for n items, length 0
 *   lfvec_push(&v, x);               may move the array (v changes)
 *   lfvec_len(v), lfvec_capacity(v), lfvec_data(v), lfvec_at(v, i)
 *   lfvec_pop(&v), lfvec_free(v)
 *
 * Works with lfgc's malloc (liblfgc-malloc).  Header-only.
 */
#ifndef EXAMPLES_LFVEC_H
#define EXAMPLES_LFVEC_H

#include <lowfat.h>
#include <stdio.h>
#include <stdlib.h>

typedef long lfvec_item;
typedef lfvec_item *lfvec;

static inline lfvec_item *lfvec_data(lfvec v)
{
    return lowfat_base(v);
}

static inline size_t lfvec_len(lfvec v)
{
    return lowfat_offset(v) / sizeof(lfvec_item);
}

/* Items the array can hold before it must move (one slot stays free). */
static inline size_t lfvec_capacity(lfvec v)
{
    return lowfat_size(v) / sizeof(lfvec_item) - 1;
}

/* An empty vector with room for n items; NULL when out of memory. */
static inline lfvec lfvec_new(size_t n)
{
    if (n > SIZE_MAX / sizeof(lfvec_item) - 1)
        return NULL;
    return malloc((n + 1) * sizeof(lfvec_item));
}

/* Append x; 0, or -1 when out of memory (v unchanged then). */
static inline int lfvec_push(lfvec *vp, lfvec_item x)
{
    lfvec v = *vp;
    if (__builtin_expect(lowfat_usable_size(v) >= 2 * sizeof(lfvec_item), 1)) {
        *v = x;
        *vp = v + 1;
        return 0;
    }
    /* x takes the last slot: move to an array twice the size first (v + 1
     * would be the next object's address). */
    lfvec_item *base = lowfat_base(v);
    size_t len = (size_t)(v - base), size = lowfat_size(base);
    lfvec_item *nb = realloc(base, 2 * size);
    if (nb == NULL)
        return -1;
    nb[len] = x;
    *vp = nb + len + 1;
    return 0;
}

/* Remove and return the last item (the vector must not be empty). */
static inline lfvec_item lfvec_pop(lfvec *vp)
{
    return *--*vp;
}

/* Item i, bounds-checked against the length: aborts when i is out of
 * range. */
static inline lfvec_item lfvec_at(lfvec v, size_t i)
{
    lfvec_item *base = lowfat_base(v);
    if (__builtin_expect(i >= (size_t)(v - base), 0)) {
        fprintf(stderr, "lfvec: index %zu out of range (length %zu)\n", i,
                (size_t)(v - base));
        abort();
    }
    return base[i];
}

static inline void lfvec_free(lfvec v)
{
    if (v)
        free(lowfat_base(v));
}

#endif /* EXAMPLES_LFVEC_H */
