/* test_tree234.c: the size-typed 2-3-4 tree, against a plain reference
 * (a bitmap of the keys inserted) and against the same tree with the kind
 * stored in each node. */
#include <criterion/criterion.h>
#include "tree234.h"
#include "tree234_plain.h"

Test(tree234, node_kind_is_the_size_class)
{
    void *root = NULL;
    cr_assert_eq(t234_insert(&root, 5), 1);
    cr_assert(lowfat_is_heap_ptr(root), "malloc is not lfgc's");
    cr_assert_eq(lowfat_size(root), 32);
    cr_assert_eq(t234_nkeys(root), 1);
    cr_assert_eq(t234_insert(&root, 1), 1);
    cr_assert_eq(lowfat_size(root), 48);
    cr_assert_eq(t234_nkeys(root), 2);
    cr_assert_eq(t234_insert(&root, 9), 1);
    cr_assert_eq(lowfat_size(root), 64);
    cr_assert_eq(t234_insert(&root, 9), 0);     /* already there */
    /* A fourth key splits the root: a 2-node over two children. */
    cr_assert_eq(t234_insert(&root, 7), 1);
    cr_assert_eq(lowfat_size(root), 32);
    cr_assert_eq(t234_keys(root)[0], 5);
    size_t n;
    cr_assert_eq(t234_check(root, &n), 0);
    cr_assert_eq(n, 4);
    t234_free(root);
}

Test(tree234, random_keys_match_reference)
{
    enum { N = 20000, RANGE = 50000 };
    static unsigned char in[RANGE];
    void *root = NULL, *plain = NULL;
    uint64_t x = 0x2545F4914F6CDD1DULL;
    size_t added = 0;
    for (int i = 0; i < N; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        long k = (long)(x % RANGE) - RANGE / 2;
        int r = t234_insert(&root, k);
        cr_assert_eq(r, in[k + RANGE / 2] ? 0 : 1);
        cr_assert_eq(p234_insert(&plain, k), r);
        in[k + RANGE / 2] = 1;
        added += (size_t)r;
    }
    size_t n, pn;
    cr_assert_eq(t234_check(root, &n), 0, "size-typed tree malformed");
    cr_assert_eq(p234_check(plain, &pn), 0, "plain tree malformed");
    cr_assert_eq(n, added);
    cr_assert_eq(pn, added);
    for (long k = -RANGE / 2; k < RANGE / 2; k++) {
        cr_assert_eq(t234_find(root, k), in[k + RANGE / 2], "key %ld", k);
        cr_assert_eq(p234_find(plain, k), in[k + RANGE / 2]);
    }
    t234_free(root);
    p234_free(plain);
}

Test(tree234, check_catches_a_damaged_tree)
{
    void *root = NULL;
    for (long k = 0; k < 100; k++)
        t234_insert(&root, k);
    size_t n;
    cr_assert_eq(t234_check(root, &n), 0);
    /* Swap two keys of the root: the order check must see it. */
    long *ks = t234_keys(root);
    int k = t234_nkeys(root);
    cr_assert_geq(k, 1);
    ks[0] = 1000;
    cr_assert_eq(t234_check(root, &n), -1);
}
