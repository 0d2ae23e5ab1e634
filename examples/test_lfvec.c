/* test_lfvec.c: low-fat vectors: length, capacity and items from the
 * pointer alone, across the growth of the array. */
#include <criterion/criterion.h>
#include <signal.h>
#include "lfvec.h"

Test(lfvec, empty)
{
    lfvec v = lfvec_new(0);
    cr_assert_not_null(v);
    cr_assert(lowfat_is_heap_ptr(v), "malloc is not lfgc's");
    cr_assert_eq(lfvec_len(v), 0);
    cr_assert_geq(lfvec_capacity(v), 1);
    cr_assert_eq(lfvec_data(v), v);
    lfvec_free(v);
}

Test(lfvec, push_grow_and_read_back)
{
    lfvec v = lfvec_new(2);
    size_t moves = 0;
    for (long i = 0; i < 50000; i++) {
        lfvec_item *before = lfvec_data(v);
        cr_assert_eq(lfvec_push(&v, 3 * i + 1), 0);
        if (lfvec_data(v) != before)
            moves++;
        cr_assert_eq(lfvec_len(v), (size_t)i + 1);
        /* The pointer never leaves its object. */
        cr_assert_eq(lowfat_base(v), lfvec_data(v));
        cr_assert_lt(lfvec_len(v), lowfat_size(v) / sizeof(lfvec_item));
    }
    /* Doubling: a few dozen moves, not one per push. */
    cr_assert_lt(moves, 40);
    for (size_t i = 0; i < 50000; i++)
        cr_assert_eq(lfvec_at(v, i), 3 * (long)i + 1);
    for (long i = 49999; i >= 0; i--)
        cr_assert_eq(lfvec_pop(&v), 3 * i + 1);
    cr_assert_eq(lfvec_len(v), 0);
    lfvec_free(v);
}

Test(lfvec, capacity_is_the_slot)
{
    lfvec v = lfvec_new(5);           /* 48 bytes: room for 5 */
    cr_assert_eq(lfvec_capacity(v), lowfat_size(v) / sizeof(lfvec_item) - 1);
    size_t cap = lfvec_capacity(v);
    lfvec_item *first = lfvec_data(v);
    for (size_t i = 0; i < cap - 1; i++)
        lfvec_push(&v, (long)i);
    cr_assert_eq(lfvec_data(v), first, "moved before it was full");
    lfvec_push(&v, 99);
    cr_assert_eq(lfvec_len(v), cap);
    cr_assert_eq(lfvec_at(v, cap - 1), 99);
    lfvec_free(v);
}

Test(lfvec, index_out_of_range_aborts, .signal = SIGABRT)
{
    lfvec v = lfvec_new(4);
    lfvec_push(&v, 1);
    lfvec_at(v, 1);
}
