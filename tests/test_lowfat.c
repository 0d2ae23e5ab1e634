/* test_lowfat.c: the low-fat pointer arithmetic of lowfat.h.
 *
 * lowfat_base() uses a fixed-point reciprocal instead of a division; these
 * tests compare it (and lowfat_size, lowfat_offset, lowfat_usable_size,
 * lowfat_is_ptr) with plain division at the edges of every region, where a
 * reciprocal that is slightly off shows first, and check the queries on
 * heap, stack, global and malloc pointers.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <stdlib.h>

/* ------------------------------------------------------------------ */
/* Tables                                                              */

Test(lowfat, size_table_matches_configuration)
{
    GC_INIT();
    for (size_t i = 0; i < LOWFAT_TABLE_SIZE; i++) {
        uint64_t want = 0;
        if (i >= LOWFAT_FIRST_REGION && i < LOWFAT_FIRST_REGION + TU_NUM_CLASSES &&
            tu_class_exists((unsigned)(i - LOWFAT_FIRST_REGION)))
            want = tu_class_sizes[i - LOWFAT_FIRST_REGION];
        cr_assert_eq(lowfat_sizes[i], want, "lowfat_sizes[%zu] = %llu, expected %llu",
                     i, (unsigned long long)lowfat_sizes[i], (unsigned long long)want);
        cr_assert_eq(lowfat_size((void *)((uint64_t)i << LOWFAT_REGION_SHIFT)),
                     want ? want : SIZE_MAX, "lowfat_size in region %zu", i);
        if (want == 0) {
            cr_assert_eq(lowfat_magics[i], 0, "lowfat_magics[%zu] of a non-fat region "
                         "is %llu, not 0", i, (unsigned long long)lowfat_magics[i]);
        } else {
            cr_assert_neq(lowfat_magics[i], 0, "lowfat_magics[%zu] is 0", i);
        }
    }
    cr_assert_eq(LOWFAT_HEAP_START, (uint64_t)LOWFAT_FIRST_REGION << LOWFAT_REGION_SHIFT);
    cr_assert_eq(LOWFAT_HEAP_END,
                 (uint64_t)(LOWFAT_FIRST_REGION + TU_NUM_CLASSES) << LOWFAT_REGION_SHIFT);
    cr_assert_eq(LOWFAT_NUM_CLASSES, TU_NUM_CLASSES);
}

/* ------------------------------------------------------------------ */
/* Every region against plain division, at its first and last safe slot */

struct mismatch {
    uint64_t count;
    uint64_t addr;          /* first mismatching address */
    uint64_t size;
    const char *what;
};

/* Compare every query at address a (in a region of slot size `size`) with
 * plain division. */
static inline void check_addr(uint64_t a, uint64_t size, struct mismatch *m)
{
    const void *p = (const void *)a;
    uint64_t base = a / size * size;
    const char *bad = NULL;
    if (lowfat_size(p) != size)
        bad = "lowfat_size";
    else if ((uint64_t)(uintptr_t)lowfat_base(p) != base)
        bad = "lowfat_base";
    else if (lowfat_slot_number(p) != a / size)
        bad = "lowfat_slot_number";
    else if (lowfat_offset(p) != a - base)
        bad = "lowfat_offset";
    else if (lowfat_usable_size(p) != size - (a - base))
        bad = "lowfat_usable_size";
    else if (!lowfat_is_ptr(p))
        bad = "lowfat_is_ptr";
    if (bad) {
        if (m->count == 0) {
            m->addr = a;
            m->size = size;
            m->what = bad;
        }
        m->count++;
    }
}

static void check_range(uint64_t lo, uint64_t hi, uint64_t size, struct mismatch *m)
{
    for (uint64_t a = lo; a < hi; a++)
        check_addr(a, size, m);
}

/* Byte-by-byte checking of whole slots is done for every class up to
 * FULL_SLOT_MAX bytes.  The larger (power-of-two) classes go up to 8 GiB,
 * far too many bytes to visit: for them, every byte of the first and last
 * 64 KiB of the slot is checked, plus RANDOM_PROBES random offsets inside
 * it. */
#define FULL_SLOT_MAX ((uint64_t)1 << 20)
#define EDGE_BYTES    ((uint64_t)64 << 10)
#define RANDOM_PROBES 4096

static void check_slot(uint64_t base, uint64_t size, uint64_t *rng, struct mismatch *m)
{
    if (size <= FULL_SLOT_MAX) {
        check_range(base, base + size, size, m);
        return;
    }
    check_range(base, base + EDGE_BYTES, size, m);
    check_range(base + size - EDGE_BYTES, base + size, size, m);
    for (int k = 0; k < RANDOM_PROBES; k++)
        check_addr(base + tu_rand(rng) % size, size, m);
}

/* Slot size and address range of class c's region. */
static void class_region(unsigned c, uint64_t *size, uint64_t *start, uint64_t *end)
{
    *size = tu_class_sizes[c];
    *start = (uint64_t)(LOWFAT_FIRST_REGION + c) << LOWFAT_REGION_SHIFT;
    *end = *start + LOWFAT_REGION_SIZE;
}

Test(lowfat, every_region_first_and_last_safe_slot_match_division)
{
    uint64_t rng = 0x1234567887654321ull;
    for (unsigned c = 0; c < TU_NUM_CLASSES; c++) {
        if (!tu_class_exists(c))
            continue;
        uint64_t size, start, end;
        class_region(c, &size, &start, &end);
        /* First safe slot: the first multiple of size at or above start. */
        uint64_t first = (start + size - 1) / size * size;
        /* Last safe slot: the last whole slot below the region's end. */
        uint64_t last = end / size * size - size;
        cr_assert_geq(last, first, "class %u (size %llu): no whole slot in region",
                      c, (unsigned long long)size);

        struct mismatch m = { 0 };
        check_slot(first, size, &rng, &m);
        check_slot(last, size, &rng, &m);
        /* The first and the last byte of the region also belong to it. */
        cr_assert_eq(lowfat_size((void *)start), size);
        cr_assert_eq(lowfat_size((void *)(end - 1)), size);
        cr_assert_eq(m.count, 0,
                     "class %u (size %llu): %llu mismatches; first: %s(%#llx) "
                     "disagrees with division", c, (unsigned long long)size,
                     (unsigned long long)m.count, m.what,
                     (unsigned long long)m.addr);
    }
}

/* Random slots in the middle of every region, and their edges. */
Test(lowfat, random_slots_in_every_region_match_division)
{
    uint64_t rng = 0xfeedfacecafebeefull;
    for (unsigned c = 0; c < TU_NUM_CLASSES; c++) {
        if (!tu_class_exists(c))
            continue;
        uint64_t size, start, end;
        class_region(c, &size, &start, &end);
        uint64_t q0 = (start + size - 1) / size, q1 = end / size;   /* [q0, q1) */
        struct mismatch m = { 0 };
        for (int k = 0; k < 2000; k++) {
            uint64_t q = q0 + tu_rand(&rng) % (q1 - q0);
            uint64_t base = q * size;
            check_addr(base, size, &m);
            check_addr(base + size - 1, size, &m);
            check_addr(base + tu_rand(&rng) % size, size, &m);
        }
        cr_assert_eq(m.count, 0, "class %u (size %llu): %s(%#llx) disagrees with "
                     "division (%llu mismatches)", c, (unsigned long long)size,
                     m.what, (unsigned long long)m.addr, (unsigned long long)m.count);
    }
}

/* Addresses outside the regions: below the first, past the last, and the
 * words around each boundary. */
Test(lowfat, non_fat_addresses)
{
    uint64_t probes[] = {
        0, 1, 4096, LOWFAT_HEAP_START - 1, LOWFAT_HEAP_END,
        LOWFAT_HEAP_END + 12345, ((uint64_t)1 << 47) - 1,
    };
    for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
        const void *p = (const void *)probes[k];
        cr_assert_not(lowfat_is_ptr(p), "lowfat_is_ptr(%p)", p);
        cr_assert_not(lowfat_is_heap_ptr(p), "lowfat_is_heap_ptr(%p)", p);
        cr_assert_eq(lowfat_size(p), SIZE_MAX, "lowfat_size(%p)", p);
        cr_assert_null(lowfat_base(p), "lowfat_base(%p)", p);
        cr_assert_eq(lowfat_offset(p), (size_t)probes[k]);
    }
    /* lowfat_is_ptr accepts any 64-bit word. */
    uint64_t words[] = { UINT64_MAX, (uint64_t)1 << 63,
                         ((uint64_t)1 << 63) + LOWFAT_HEAP_START,
                         LOWFAT_HEAP_START - LOWFAT_HEAP_END };
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        cr_assert_not(lowfat_is_ptr((const void *)words[k]), "word %#llx",
                      (unsigned long long)words[k]);
    cr_assert(lowfat_is_ptr((void *)LOWFAT_HEAP_START));
    cr_assert(lowfat_is_ptr((void *)(LOWFAT_HEAP_END - 1)));
    cr_assert_eq(lowfat_size((void *)LOWFAT_HEAP_START), 16);
}

/* ------------------------------------------------------------------ */
/* Queries on real pointers                                            */

int lowfat_global_int = 42;
static char lowfat_static_buf[100];

static void expect_not_lowfat(const void *p, const char *what)
{
    cr_assert_not(lowfat_is_ptr(p), "lowfat_is_ptr(%s %p)", what, p);
    cr_assert_not(lowfat_is_heap_ptr(p), "lowfat_is_heap_ptr(%s %p)", what, p);
    cr_assert_eq(lowfat_size(p), SIZE_MAX, "lowfat_size(%s)", what);
    cr_assert_null(lowfat_base(p), "lowfat_base(%s)", what);
    cr_assert_eq(lowfat_offset(p), (size_t)(uintptr_t)p, "lowfat_offset(%s)", what);
    cr_assert_eq(lowfat_usable_size(p), SIZE_MAX - (size_t)(uintptr_t)p,
                 "lowfat_usable_size(%s)", what);
    cr_assert_null(GC_base((void *)p), "GC_base(%s)", what);
    cr_assert_not(GC_is_heap_ptr(p), "GC_is_heap_ptr(%s)", what);
}

Test(lowfat, stack_global_malloc_pointers_are_not_lowfat)
{
    GC_INIT();
    int local = 1;
    expect_not_lowfat(&local, "stack");
    expect_not_lowfat(&lowfat_global_int, "global");
    expect_not_lowfat(lowfat_static_buf + 50, "static");
    expect_not_lowfat((const void *)(uintptr_t)&expect_not_lowfat, "function");
    char *small = malloc(100);
    char *big = malloc(8 << 20);       /* glibc maps this one */
    cr_assert_not_null(small);
    cr_assert_not_null(big);
    expect_not_lowfat(small, "malloc");
    expect_not_lowfat(small + 99, "malloc interior");
    expect_not_lowfat(big, "big malloc");
    expect_not_lowfat(big + (4 << 20), "big malloc interior");
    free(small);
    free(big);
}

/* Heap pointers of every kind and many sizes: size, base, offset and
 * usable size of every byte of the request (and of the slot). */
Test(lowfat, heap_pointers_queries)
{
    GC_INIT();
    size_t sizes[] = { 1, 7, 8, 15, 16, 17, 100, 127, 128, 500, 1000, 1039, 1040,
                       2047, 4095, 4096, 8000, 12287, 12288, 16383, 20000, 65535,
                       65536, 200000, 1 << 20 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (int kind = 0; kind < 3; kind++) {
            size_t n = sizes[k];
            char *p = kind == 0 ? GC_malloc(n)
                    : kind == 1 ? GC_malloc_atomic(n) : GC_malloc_uncollectable(n);
            cr_assert_not_null(p, "allocation of %zu bytes (kind %d)", n, kind);
            size_t size = lowfat_size(p);
            cr_assert(lowfat_is_ptr(p));
            cr_assert(lowfat_is_heap_ptr(p), "lowfat_is_heap_ptr(%p)", (void *)p);
            cr_assert_neq(size, SIZE_MAX);
            /* All interior pointers are on by default: one extra byte. */
            cr_assert_geq(size, n + 1, "%zu-byte request in a %zu-byte slot", n, size);
            cr_assert_eq((uintptr_t)p % size, 0, "%p not aligned to its size %zu",
                         (void *)p, size);
            cr_assert_eq(lowfat_base(p), p);
            for (size_t off = 0; off < size; off += (size > 4096 ? 97 : 1)) {
                cr_assert_eq(lowfat_base(p + off), p, "lowfat_base(p + %zu)", off);
                cr_assert_eq(lowfat_offset(p + off), off);
                cr_assert_eq(lowfat_usable_size(p + off), size - off);
                cr_assert_eq(lowfat_size(p + off), size);
                cr_assert(lowfat_is_heap_ptr(p + off));
            }
            cr_assert_eq(lowfat_offset(p + size - 1), size - 1);
            cr_assert_eq(lowfat_usable_size(p + size - 1), 1);
            cr_assert(lowfat_is_heap_ptr(p + size - 1));
            if (kind == 2)
                GC_free(p);
        }
    }
}

/* lowfat_is_heap_ptr: true up to the part of a region the heap has used. */
Test(lowfat, is_heap_ptr_follows_heap_top)
{
    GC_INIT();
    /* The 4 KiB class: request 4000 bytes. */
    char *p = GC_malloc(4000);
    cr_assert_not_null(p);
    cr_assert_eq(lowfat_size(p), 4096);
    size_t idx = lowfat_index(p);
    uint64_t top = lowfat_heap_top[idx];
    cr_assert_gt(top, (uint64_t)(uintptr_t)p);
    cr_assert(lowfat_is_heap_ptr((void *)(top - 1)));
    cr_assert_not(lowfat_is_heap_ptr((void *)top));
    cr_assert(lowfat_is_ptr((void *)top));
    /* The last byte of the region: a low-fat address, never used. */
    uint64_t region_last = ((uint64_t)(idx + 1) << LOWFAT_REGION_SHIFT) - 1;
    cr_assert(lowfat_is_ptr((void *)region_last));
    cr_assert_not(lowfat_is_heap_ptr((void *)region_last));
    /* Outside the heap the table holds 0. */
    cr_assert_eq(lowfat_heap_top[0], 0);
    cr_assert_eq(lowfat_heap_top[LOWFAT_FIRST_REGION + TU_NUM_CLASSES], 0);
}
