/* tree234.c: the size-typed 2-3-4 tree (tree234.h) at work.
 *
 * Inserts 100,000 pseudo-random keys, checks the tree's shape (every leaf
 * at one depth, keys in order, each node's kind read from its size class),
 * looks every key up and a few absent ones, and prints how many nodes of
 * each kind there are.  Exits 0 when all is right.
 */
#include "tree234.h"
#include <stdio.h>

static void census(void *n, size_t count[5])
{
    if (!n)
        return;
    int k = t234_nkeys(n);
    count[k + 1]++;
    for (int i = 0; i <= k; i++)
        census(t234_kids(n, k)[i], count);
}

int main(void)
{
    enum { N = 100000 };
    void *root = NULL;
    uint64_t x = 88172645463325252ULL;
    size_t added = 0;
    for (int i = 0; i < N; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int r = t234_insert(&root, (long)(x % (4 * N)));
        if (r < 0) {
            fprintf(stderr, "tree234: out of memory\n");
            return 1;
        }
        added += (size_t)r;
    }
    if (!lowfat_is_heap_ptr(root)) {
        fprintf(stderr, "tree234: malloc did not return a low-fat pointer: "
                "link lfgc's malloc\n");
        return 1;
    }
    size_t count;
    int ok = t234_check(root, &count) == 0 && count == added;
    x = 88172645463325252ULL;
    for (int i = 0; i < N; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ok &= t234_find(root, (long)(x % (4 * N)));
    }
    ok &= !t234_find(root, -1) && !t234_find(root, 4 * N);
    size_t kinds[5] = {0};
    census(root, kinds);
    printf("%zu keys: %zu 2-nodes (%zu-byte slots), %zu 3-nodes, %zu "
           "4-nodes; %s\n", count, kinds[2], (size_t)32, kinds[3], kinds[4],
           ok ? "tree well formed, every key found" : "FAILED");
    t234_free(root);
    return ok ? 0 : 1;
}
