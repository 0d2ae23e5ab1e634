/* trees.c: the binary-trees garbage-collection workload.
 *
 * Written for lfgc's benchmark suite.  The same source builds against lfgc's
 * gc.h and against bdwgc's:
 *
 *   cc -O2 -Ibuild/include -Iinclude bench/trees.c gc/.libs/liblfgc.so
 *   cc -O2 bench/trees.c $(pkg-config --cflags --libs bdw-gc)
 *
 * Work, for max depth D (default 18, first argument) and min depth 4:
 *   1. build a long-lived tree of depth D and keep it;
 *   2. allocate a 4,000,000-byte pointer-free array, fill it with
 *      pseudo-random data and keep it;
 *   3. for d = 4, 6, ..., D: build 2^(D - d + 4) trees of depth d one after
 *      another, count each tree's nodes, drop it;
 *   4. count the long-lived tree's nodes and re-checksum the array.
 * Prints one RESULT line (see workloads/bench_util.h) and exits non-zero if
 * any count or the checksum is wrong.
 */
#include "workloads/bench_util.h"

#define MIN_DEPTH 4
#define ARRAY_BYTES 4000000u

static struct tree_node *new_node(void)
{
    struct tree_node *n = GC_NEW(struct tree_node);
    if (n == NULL) {
        fprintf(stderr, "trees: out of memory\n");
        exit(3);
    }
    return n;
}

/* Children first, then the parent that holds them. */
static struct tree_node *build(int depth)
{
    if (depth == 0)
        return new_node();
    struct tree_node *l = build(depth - 1);
    struct tree_node *r = build(depth - 1);
    struct tree_node *n = new_node();
    n->left = l;
    n->right = r;
    return n;
}

static long expected_nodes(int depth)
{
    return (2L << depth) - 1;
}

static void fill(uint32_t *a, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        a[i] = (uint32_t)(bench_rand(&seed) >> 32);
}

int main(int argc, char **argv)
{
    int max_depth = argc > 1 ? atoi(argv[1]) : 18;
    if (max_depth < MIN_DEPTH + 2)
        max_depth = MIN_DEPTH + 2;

    bench_init();
    int ok = 1;
    long trees = 0;

    struct tree_node *long_lived = build(max_depth);

    size_t words = ARRAY_BYTES / sizeof(uint32_t);
    uint32_t *array = GC_MALLOC_ATOMIC(ARRAY_BYTES);
    if (array == NULL) {
        fprintf(stderr, "trees: out of memory (array)\n");
        return 3;
    }
    fill(array, words, 0x9E3779B97F4A7C15ULL);
    uint64_t sum = bench_checksum32(array, words);

    for (int d = MIN_DEPTH; d <= max_depth; d += 2) {
        long iterations = 1L << (max_depth - d + MIN_DEPTH);
        long want = expected_nodes(d);
        for (long i = 0; i < iterations; i++) {
            struct tree_node *t = build(d);
            if (bench_tree_count(t) != want) {
                if (ok)
                    fprintf(stderr, "trees: depth %d tree %ld: wrong node "
                            "count %ld (want %ld)\n", d, i, bench_tree_count(t), want);
                ok = 0;
            }
            trees++;
        }
    }

    if (bench_tree_count(long_lived) != expected_nodes(max_depth)) {
        fprintf(stderr, "trees: long-lived tree damaged: %ld nodes (want "
                "%ld)\n", bench_tree_count(long_lived), expected_nodes(max_depth));
        ok = 0;
    }
    if (bench_checksum32(array, words) != sum) {
        fprintf(stderr, "trees: pointer-free array damaged\n");
        ok = 0;
    }
    BENCH_KEEP(long_lived);
    BENCH_KEEP(array);

    return bench_report("trees", ok, "depth=%d trees=%ld", max_depth, trees);
}
