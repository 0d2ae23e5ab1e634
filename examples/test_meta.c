/* test_meta.c: meta.h's hidden metadata, found from interior pointers. */
#include <criterion/criterion.h>
#include "meta.h"

Test(meta, found_from_every_interior_pointer)
{
    static const size_t sizes[] = {1, 8, 16, 24, 100, 1000, 5000, 70000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        unsigned char *p = meta_malloc(n, (uint32_t)(s + 7), "here");
        cr_assert_not_null(p);
        cr_assert(lowfat_is_heap_ptr(p), "malloc is not lfgc's");
        cr_assert_eq((uintptr_t)p % 16, 0, "object not 16-aligned");
        memset(p, 0xAB, n);           /* the program's data, all of it */
        for (size_t off = 0; off < n; off += 1 + off / 3) {
            struct meta *m = meta_of(p + off);
            cr_assert_not_null(m, "no header for %zu + %zu", n, off);
            cr_assert_eq(m->type, s + 7);
            cr_assert_eq(m->size, n);
            cr_assert_str_eq(m->site, "here");
        }
        cr_assert_not_null(meta_of(p + n - 1));
        meta_free(p + n / 2);
    }
}

Test(meta, exact_bounds)
{
    char *p = meta_malloc(20, 1, "b");
    cr_assert(meta_in_bounds(p, 20));
    cr_assert(meta_in_bounds(p + 19, 1));
    cr_assert(!meta_in_bounds(p + 19, 2));
    cr_assert(!meta_in_bounds(p, 21));
    cr_assert(!meta_in_bounds(p - 1, 1));   /* the header is not data */
    /* The slot is larger than asked: bounds are the request's. */
    cr_assert_gt(lowfat_usable_size(p), 20);
    meta_free(p);
}

Test(meta, no_header_no_metadata)
{
    int local = 0;
    cr_assert_null(meta_of(&local));
    char *plain = malloc(64);               /* no header written */
    memset(plain, 0, 64);
    cr_assert_null(meta_of(plain + 10));
    free(plain);
    cr_assert_null(meta_malloc(SIZE_MAX - 8, 1, "x"));
}
