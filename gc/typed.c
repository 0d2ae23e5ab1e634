/* typed.c: explicitly typed allocation (bdwgc's gc_typed.h).
 *
 * A layout is a bitmap of the words that may hold pointers.
 * GC_make_descriptor turns it into one descriptor word: a length when the
 * pointers are a prefix, a bitmap descriptor when it fits in one (62
 * words), else a "long bitmap": GC_MAKE_PROC(lf_typed_proc, record) with
 * the bits in a record kept here, in memory of its own that is never
 * scanned nor freed (a descriptor is made once per type).  The marker
 * recognises that procedure and reads the record directly.
 *
 * Typed objects are of a kind whose descriptor is per object, in the
 * object's last word (bdwgc's layout: GC_DS_PER_OBJECT at -8 with the size
 * added), so one kind serves every type.  Arrays of typed elements are of
 * a kind of their own, SCAN_TYPED_ARRAY, whose objects end with the count,
 * the element size and the element descriptor.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#include "gc_typed.h"

LF_UNSCANNED_DATA unsigned lf_typed_proc = LF_NO_PROC;
static LF_UNSCANNED_DATA int typed_kind = -1, array_kind = -1;

/* Long-bitmap records: bump-allocated in one reservation, so that the
 * marker can tell a record from any other value a descriptor's argument
 * may hold. */
#define RECORDS_MAX ((size_t)64 << 20)
static LF_UNSCANNED char *records;                  /* the reservation            */
static LF_UNSCANNED size_t records_used;            /* bytes handed out, lock held */

const struct lf_long_bitmap *lf_long_bitmap_of(uintptr_t env)
{
    uintptr_t off = env - (uintptr_t)records;
    if (!records || off >= __atomic_load_n(&records_used, __ATOMIC_ACQUIRE) || off % 8)
        return NULL;
    return (const struct lf_long_bitmap *)env;
}


static LF_UNSCANNED pthread_once_t typed_once = PTHREAD_ONCE_INIT;

static void typed_init(void)
{
    lf_ensure_init();
    typed_kind = lf_kind_new_sized(SCAN_PER_OBJECT, (GC_word)-8 | GC_DS_PER_OBJECT, true, NULL,
                                   0, true, false);
    array_kind = lf_kind_new_sized(SCAN_TYPED_ARRAY, 0, false, NULL, 0, true, false);
    if (typed_kind < 0 || array_kind < 0)
        lf_abort("lfgc: typed allocation: no room for its kinds (255 kinds in all)");
    lf_kinds[typed_kind].fixed_layout = 1;
    lf_kinds[array_kind].fixed_layout = 1;
    lf_typed_proc = LF_TYPED_PROC_INDEX;
}

static inline void typed_ensure(void)
{
    pthread_once(&typed_once, typed_init);
}

/* A record for the bitmap bm of nbits bits; NULL when out of room. */
static struct lf_long_bitmap *long_bitmap_new(const GC_word *bm, size_t nbits)
{
    size_t words = (nbits + 63) / 64;
    size_t bytes = sizeof(struct lf_long_bitmap) + words * sizeof(uint64_t);
    struct lf_long_bitmap *lb = NULL;
    lock();
    if (!records) {
        void *p = mmap(NULL, RECORDS_MAX, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        records = p == MAP_FAILED ? NULL : p;
    }
    if (records && bytes <= RECORDS_MAX - records_used) {
        lb = (struct lf_long_bitmap *)(records + records_used);
        lb->nbits = nbits;
        memcpy(lb->bits, bm, words * sizeof(uint64_t));
        if (nbits % 64)
            lb->bits[words - 1] &= ((uint64_t)1 << (nbits % 64)) - 1;
        /* Published after its contents: a marker that sees it in use
         * reads it whole. */
        __atomic_store_n(&records_used, records_used + bytes, __ATOMIC_RELEASE);
    }
    unlock();
    return lb;
}

LFGC_EXPORT GC_descr GC_make_descriptor(const GC_word *bm, size_t len)
{
    typed_ensure();
    size_t n = len;
    while (n > 0 && !GC_get_bit(bm, n - 1))
        n--;
    if (n == 0)
        return 0;                           /* no pointers */
    size_t i = 0;
    while (i < n && GC_get_bit(bm, i))
        i++;
    if (i == n)
        return (GC_descr)(n * sizeof(GC_word)) | GC_DS_LENGTH;    /* a prefix */
    if (n <= 62) {
        GC_descr d = GC_DS_BITMAP;
        for (i = 0; i < n; i++)
            if (GC_get_bit(bm, i))
                d |= (GC_descr)1 << (63 - i);
        return d;
    }
    struct lf_long_bitmap *lb = long_bitmap_new(bm, n);
    if (!lb)
        return (GC_descr)(n * sizeof(GC_word)) | GC_DS_LENGTH;
    return ((((GC_descr)lb << GC_LOG_MAX_MARK_PROCS) | lf_typed_proc) << GC_DS_TAG_BITS) |
           GC_DS_PROC;
}

static void *typed_alloc(size_t bytes, GC_descr d)
{
    typed_ensure();
    if (bytes > SIZE_MAX - 2 * sizeof(GC_word))
        return lf_oom(bytes);
    GC_word *p = lf_alloc_kind(bytes + sizeof(GC_word), (unsigned)typed_kind);
    if (!p)
        return NULL;
    /* Until this store the descriptor is 0: nothing scanned, and nothing
     * to scan in a cleared object. */
    __atomic_store_n(&p[GC_size(p) / sizeof(GC_word) - 1], d, __ATOMIC_RELEASE);
    return p;
}

LFGC_EXPORT void *GC_malloc_explicitly_typed(size_t bytes, GC_descr d)
{
    return typed_alloc(bytes, d);
}

LFGC_EXPORT void *GC_malloc_explicitly_typed_ignore_off_page(size_t bytes, GC_descr d)
{
    return typed_alloc(bytes, d);
}

LFGC_EXPORT void *GC_calloc_explicitly_typed(size_t n, size_t elem_bytes, GC_descr d)
{
    typed_ensure();
    if (elem_bytes && n > (SIZE_MAX - 4 * sizeof(GC_word)) / elem_bytes)
        return lf_oom(SIZE_MAX);
    size_t bytes = n * elem_bytes;
    if (n <= 1 || d == 0)
        return typed_alloc(bytes, n ? d : 0);
    if (elem_bytes % sizeof(GC_word) ||
        ((d & GC_DS_TAGS) == GC_DS_LENGTH && d >= elem_bytes))
        /* Misaligned elements, or elements of pointers only: the whole
         * array as a prefix. */
        return typed_alloc(bytes, ((bytes + 7) & ~(size_t)7) | GC_DS_LENGTH);
    size_t ew = elem_bytes / sizeof(GC_word);
    if ((d & GC_DS_TAGS) == GC_DS_BITMAP && bytes / sizeof(GC_word) <= 62) {
        /* The elements' bitmaps side by side fit one descriptor. */
        GC_descr all = 0;
        for (size_t e = 0; e < n; e++)
            all |= (d & ~(GC_descr)GC_DS_TAGS) >> (e * ew);
        return typed_alloc(bytes, (all & ~(GC_descr)GC_DS_TAGS) | GC_DS_BITMAP);
    }
    GC_word *p = lf_alloc_kind(bytes + 3 * sizeof(GC_word), (unsigned)array_kind);
    if (!p)
        return NULL;
    GC_word *t = p + GC_size(p) / sizeof(GC_word) - 3;
    t[1] = elem_bytes;
    t[2] = d;
    /* The count last: while it is 0 the marker scans nothing (the array
     * is still zero). */
    __atomic_store_n(&t[0], n, __ATOMIC_RELEASE);
    return p;
}
