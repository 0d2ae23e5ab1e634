/* test_smoke.c: the quickest end-to-end check that the library links, allocates,
 * survives a collection with its live objects intact, and that the low-fat
 * queries agree with plain division. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "gc.h"
#include "lowfat.h"

#define NOBJ 1000

/* Global, so the objects are reachable through the data segment (a root the
 * collector always scans), whatever the compiler does with registers. */
uint64_t *smoke_obj[NOBJ];
size_t smoke_len[NOBJ];   /* words in smoke_obj[i] */

static uint64_t word_value(size_t i, size_t j)
{
    return (uint64_t)i * 0x9e3779b97f4a7c15u ^ ((uint64_t)j << 32 | j);
}

static uint64_t checksum(void)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < NOBJ; i++)
        for (size_t j = 0; j < smoke_len[i]; j++)
            sum = sum * 31 + smoke_obj[i][j];
    return sum;
}

Test(smoke, allocate_collect_checksum)
{
    GC_INIT();

    for (size_t i = 0; i < NOBJ; i++) {
        /* 1 to 300 words: spreads the objects over many size classes. */
        size_t words = 1 + (i * 7) % 300;
        uint64_t *p = GC_MALLOC(words * sizeof(uint64_t));
        cr_assert_not_null(p, "GC_MALLOC(%zu) failed", words * sizeof(uint64_t));
        for (size_t j = 0; j < words; j++)
            cr_assert_eq(p[j], 0, "GC_MALLOC memory is not zeroed");
        for (size_t j = 0; j < words; j++)
            p[j] = word_value(i, j);
        smoke_obj[i] = p;
        smoke_len[i] = words;
    }
    uint64_t before = checksum();

    GC_gcollect();
    cr_expect_eq(checksum(), before, "checksum changed across GC_gcollect()");

    /* Allocate garbage that would land in any slot wrongly freed above, then
     * collect again: the live objects must still hold their values. */
    for (size_t i = 0; i < NOBJ; i++) {
        uint64_t *q = GC_MALLOC(smoke_len[i] * sizeof(uint64_t));
        cr_assert_not_null(q);
        memset(q, 0xa5, smoke_len[i] * sizeof(uint64_t));
    }
    GC_gcollect();
    for (size_t i = 0; i < NOBJ; i++)
        for (size_t j = 0; j < smoke_len[i]; j++)
            cr_assert_eq(smoke_obj[i][j], word_value(i, j),
                         "object %zu word %zu corrupted", i, j);
    cr_expect_eq(checksum(), before);
}

Test(smoke, lowfat_queries_match_division)
{
    GC_INIT();

    for (size_t i = 0; i < NOBJ; i++) {
        size_t bytes = 8 + (i * 13) % 3000;
        char *p = GC_MALLOC(bytes);
        cr_assert_not_null(p);
        smoke_obj[i] = (uint64_t *)p;
        smoke_len[i] = 0;

        cr_assert(lowfat_is_ptr(p), "%p is outside the low-fat regions", (void *)p);
        size_t size = lowfat_size(p);
        cr_assert_neq(size, SIZE_MAX);
        cr_assert_geq(size, bytes, "slot of %zu bytes for a %zu-byte request",
                      size, bytes);
        cr_assert_eq((uintptr_t)p % size, 0,
                     "%p is not aligned to its slot size %zu", (void *)p, size);

        /* Every byte of the request, and the last byte of the slot, must map
         * back to the object's base, exactly as plain division says. */
        size_t probes[] = { 0, 1, bytes / 2, bytes - 1, size - 1 };
        for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
            char *q = p + probes[k];
            uintptr_t expect = (uintptr_t)q / size * size;
            cr_assert_eq(lowfat_size(q), size);
            cr_assert_eq((uintptr_t)lowfat_base(q), expect,
                         "lowfat_base(%p) = %p, division gives %p",
                         (void *)q, lowfat_base(q), (void *)expect);
            cr_assert_eq(lowfat_base(q), (void *)p);
            cr_assert_eq(lowfat_offset(q), probes[k]);
        }
    }

    /* Memory that is not a low-fat object. */
    int local = 0;
    cr_expect_eq(lowfat_size(&local), SIZE_MAX);
    cr_expect_null(lowfat_base(&local));
    cr_expect_eq(lowfat_size(smoke_len), SIZE_MAX);
    cr_expect_null(lowfat_base(smoke_len));
}
