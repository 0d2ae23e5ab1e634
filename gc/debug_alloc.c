/* debug_alloc.c: bdwgc's debugging allocator (GC_debug_malloc and the
 * calls the GC_DEBUG macros become): overwrites past an object's end are
 * found and reported.
 *
 * A debugging object is allocated 9 bytes longer than asked for, rounded
 * up to a word, in a debugging twin of its kind (the same scanning,
 * objects always cleared).  The slot's last word holds the requested
 * size, tagged (high bits no address has, so it retains nothing), and the
 * bytes between the object's end, rounded up to a word, and that word a
 * fixed pattern:
 *
 *     [0, n) the object | [n, g) zero | [g, size - 8) 0xa5 ... | size ^ tag
 *
 * with g = n rounded up to 8.  As in bdwgc, whose guard starts at the next
 * word too, the bytes up to g are the program's: bdwgc's gctest fills
 * its objects in 4-byte ints up to 3 bytes past the size it asked for.
 *
 * A write past the end changes the pattern or the size word.  Each
 * collection checks the live objects of the twin kinds once marking is
 * done, and reports the damaged ones on stderr after the world restarts
 * (then repairs their guard, so that each damage is reported once);
 * GC_debug_free and GC_debug_realloc check the object they are given.
 * An object of a twin kind whose last word has no tag (the plain
 * GC_realloc of a debugging object makes one) is not checked: so neither
 * is one whose overwrite reached the size word, past all the guard
 * bytes.
 *
 * No header: GC_base and the low-fat calls answer as for any object, and
 * the plain calls accept debugging objects (and the debugging calls plain
 * ones).  No allocation site is kept.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define GUARD_BYTE   0xa5
#define SIZE_TAG     0xdeb9000000000000ull
#define SIZE_TAG_MASK 0xffff000000000000ull
#define GUARD_EXTRA  9          /* the size word and at least one guard byte */

/* kind + 1 of the debugging twin of each predefined kind, 0 until made;
 * is_twin[k]: k is one. */
static LF_UNSCANNED uint8_t twin[NUM_PREDEFINED_KINDS];
static LF_UNSCANNED uint8_t is_twin[MAX_KINDS];
static LF_UNSCANNED bool any_twin;

static void twin_made(unsigned k)
{
    is_twin[k] = 1;
    __atomic_store_n(&any_twin, true, __ATOMIC_RELEASE);
}

static int twin_kind(unsigned base)
{
    return lf_kind_twin(base, &twin[base], lf_kinds[base].uncollectable, twin_made);
}

/* Where the guard of an object of n requested bytes starts. */
static size_t guard_start(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static void guard_write(char *p, size_t n, size_t size)
{
    memset(p + guard_start(n), GUARD_BYTE, size - 8 - guard_start(n));
    uint64_t w = SIZE_TAG | n;
    memcpy(p + size - 8, &w, 8);
}

/* The first damaged byte's offset in the object at p of `size` bytes, or
 * -1 if the guard is whole (or the object has none). */
static ptrdiff_t guard_damage(const char *p, size_t size, size_t *requested)
{
    uint64_t w;
    memcpy(&w, p + size - 8, 8);
    if ((w & SIZE_TAG_MASK) != SIZE_TAG) {
        /* No guard (made by the plain calls), or an overwrite that
         * reached the size word: the two cannot be told apart, and the
         * first must not be reported. */
        *requested = size;
        return -1;
    }
    size_t n = (size_t)(w & ~SIZE_TAG_MASK);
    *requested = n;
    if (guard_start(n) + GUARD_EXTRA > size)
        return (ptrdiff_t)(size - 8);
    for (size_t i = guard_start(n); i < size - 8; i++)
        if ((unsigned char)p[i] != GUARD_BYTE)
            return (ptrdiff_t)i;
    return -1;
}

static void *debug_alloc(size_t n, unsigned base)
{
    if (n > SIZE_MAX - GUARD_EXTRA - 7 || n >= ~SIZE_TAG_MASK)
        return lf_oom(n);
    lf_ensure_init();
    int k = twin_kind(base);
    if (k < 0)
        return lf_alloc_kind(n, base);      /* no room for more kinds */
    char *p = lf_alloc_kind(guard_start(n) + GUARD_EXTRA, (unsigned)k);
    if (p)
        guard_write(p, n, GC_size(p));
    return p;
}

/* The object's debugging kind, or -1 if it has none (NULL, not an
 * object's base, or a plain object). */
static int twin_of_object(const void *p)
{
    if (!p || GC_base((void *)p) != p)
        return -1;
    size_t sz;
    int k = GC_get_kind_and_size(p, &sz);
    return k >= 0 && is_twin[k] ? k : -1;
}

static void report(const char *what, const void *base, ptrdiff_t at, size_t requested)
{
    char line[200];
    int len = snprintf(line, sizeof line, "%s: found smashed location at %p in or near "
                       "object at %p (%zu bytes requested)\n", what,
                       (const void *)((const char *)base + at), base, requested);
    ssize_t w = write(2, line, (size_t)len);
    (void)w;
}

/* Checked before it goes; bdwgc says so the same way. */
static void check_before_release(const char *what, void *p)
{
    if (twin_of_object(p) < 0)
        return;
    size_t requested;
    ptrdiff_t at = guard_damage(p, GC_size(p), &requested);
    if (at >= 0)
        report(what, p, at, requested);
}

/* ------------------------------------------------------------------ */
/* The check at each collection                                         */

struct smashed {
    void *base;
    uint64_t at, requested, size;
};

static LF_UNSCANNED struct smashed *found;
static LF_UNSCANNED size_t found_cap, found_n, found_lost;

static void found_add(void *base, uint64_t at, uint64_t requested, uint64_t size)
{
    if (!lf_array_reserve((void **)&found, &found_cap, found_n, sizeof *found, 256)) {
        found_lost++;
        return;
    }
    found[found_n++] = (struct smashed){ base, at, requested, size };
}

/* World stopped, marks final: the live objects of the twin kinds. */
static void debug_after_mark(void)
{
    if (!__atomic_load_n(&any_twin, __ATOMIC_ACQUIRE))
        return;
    found_n = found_lost = 0;
    for_each_span_in_use(it) {
        if (!is_twin[it.s->kind])
            continue;
        struct region *r = it.r;
        const struct kind *kd = &lf_kinds[it.s->kind];
        uint64_t qa, qb;
        lf_span_slots(r, it.j, &qa, &qb);
        size_t size = r->large ? it.s->obj_bytes : r->size;
        for (uint64_t q = qa; q < qb; q++) {
            const uint64_t *bits = kd->uncollectable ? r->alloc_bits : r->mark_bits;
            if (!bit_get(bits, q - r->q0))
                continue;
            char *p = (char *)(q * r->size);
            if (slot_is_free(p))
                continue;
            size_t requested;
            ptrdiff_t at = guard_damage(p, size, &requested);
            if (at >= 0)
                found_add(p, (uint64_t)at, requested, size);
        }
    }
}

/* World restarted, lock held. */
static void debug_after_restart(void)
{
    if (!found_n && !found_lost)
        return;
    char line[200];
    int n = snprintf(line, sizeof line, "GC_check_heap: found %zu smashed heap objects:\n",
                     found_n + found_lost);
    ssize_t w = write(2, line, (size_t)n);
    for (size_t i = 0; i < found_n; i++) {
        const struct smashed *s = &found[i];
        n = snprintf(line, sizeof line, "%p in or near object at %p (%llu bytes requested)\n",
                     (void *)((char *)s->base + s->at), s->base,
                     (unsigned long long)s->requested);
        w = write(2, line, (size_t)n);
        /* Reported once: the guard is made whole again. */
        if (guard_start(s->requested) + GUARD_EXTRA <= s->size)
            guard_write(s->base, s->requested, s->size);
    }
    (void)w;
    found_n = found_lost = 0;
}

LF_MALLOC_TEXT void lf_debug_alloc_init(void)
{
    lf_hook_add(LF_HOOK_AFTER_MARK, debug_after_mark);
    lf_hook_add(LF_HOOK_AFTER_RESTART, debug_after_restart);
}

/* ------------------------------------------------------------------ */
/* The calls (GC_EXTRAS is __FILE__, __LINE__ on x86_64 Linux, as in
 * bdwgc there; no site is kept).                                       */

#define LF_DEBUG_PARAMS const char *file, int line
#define LF_UNUSED_EXTRAS() ((void)file, (void)line)

LFGC_EXPORT void *GC_debug_malloc(size_t n, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return debug_alloc(n, KIND_NORMAL);
}

LFGC_EXPORT void *GC_debug_malloc_atomic(size_t n, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return debug_alloc(n, KIND_PTRFREE);
}

LFGC_EXPORT void *GC_debug_malloc_uncollectable(size_t n, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return debug_alloc(n, KIND_UNCOLLECTABLE);
}

LFGC_EXPORT void *GC_debug_malloc_atomic_uncollectable(size_t n, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return debug_alloc(n, KIND_AUNCOLLECTABLE);
}

LFGC_EXPORT void *GC_debug_malloc_ignore_off_page(size_t n, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return debug_alloc(n, KIND_NORMAL);
}

LFGC_EXPORT void *GC_debug_malloc_atomic_ignore_off_page(size_t n, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return debug_alloc(n, KIND_PTRFREE);
}

LFGC_EXPORT void *GC_debug_malloc_stubborn(size_t n, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return debug_alloc(n, KIND_NORMAL);
}

LFGC_EXPORT void *GC_debug_malloc_replacement(size_t n)
{
    return debug_alloc(n, KIND_NORMAL);
}

static void *debug_atomic(size_t n)
{
    return debug_alloc(n, KIND_PTRFREE);
}

LFGC_EXPORT char *GC_debug_strdup(const char *s, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return lf_strndup_with(s, SIZE_MAX, debug_atomic);
}

LFGC_EXPORT char *GC_debug_strndup(const char *s, size_t n, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return lf_strndup_with(s, n, debug_atomic);
}

LFGC_EXPORT void GC_debug_free(void *p)
{
    check_before_release("GC_debug_free", p);
    GC_free(p);
}

/* A debugging object moves to a new debugging object of the same kind
 * (its guard follows the new size); anything else is GC_realloc's. */
static void *debug_realloc(void *p, size_t n)
{
    if (!p)
        return debug_alloc(n, KIND_NORMAL);
    if (n == 0) {
        GC_debug_free(p);
        return NULL;
    }
    int k = twin_of_object(p);
    if (k < 0)
        return GC_realloc(p, n);
    check_before_release("GC_debug_realloc", p);
    unsigned base = KIND_NORMAL;
    for (unsigned b = 0; b < NUM_PREDEFINED_KINDS; b++)
        if (twin[b] == (unsigned)k + 1)
            base = b;
    size_t old;
    guard_damage(p, GC_size(p), &old);
    char *q = debug_alloc(n, base);
    if (!q)
        return NULL;
    memcpy(q, p, old < n ? old : n);
    GC_free(p);
    return q;
}

LFGC_EXPORT void *GC_debug_realloc(void *p, size_t n, LF_DEBUG_PARAMS)
{
    LF_UNUSED_EXTRAS();
    return debug_realloc(p, n);
}

LFGC_EXPORT void *GC_debug_realloc_replacement(void *p, size_t n)
{
    return debug_realloc(p, n);
}
