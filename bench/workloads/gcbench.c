/* gcbench.c: a GCBench-style workload, written for lfgc's benchmark suite.
 *
 *   gcbench [long_lived_depth]          (default 16; the stretch tree is two
 *                                        deeper, the array 500,000 doubles)
 *
 *   1. build and drop a "stretch" tree of depth L + 2;
 *   2. build a long-lived tree of depth L top-down and keep it, and a
 *      pointer-free array of 500,000 doubles;
 *   3. for d = 4, 6, ..., L: build 2 * nodes(L + 2) / nodes(d) temporary
 *      trees of depth d top-down (parent first, then its children), then as
 *      many bottom-up (children first); check each and drop it;
 *   4. check the long-lived tree and the array.
 * Each node carries two integers (its depth and a serial number modulo a
 * prime) so that the checks see damaged contents, not only damaged shape.
 */
#include "bench_util.h"

#define MIN_DEPTH 4
#define ARRAY_LEN 500000

struct node {
    struct node *left, *right;
    int depth;
    int tag;
};

static int serial;

static struct node *new_node(int depth)
{
    struct node *n = GC_NEW(struct node);
    if (n == NULL) {
        fprintf(stderr, "gcbench: out of memory\n");
        exit(3);
    }
    n->depth = depth;
    n->tag = serial = (serial + 1) % 65521;
    return n;
}

/* Top-down: the parent exists before its children are made. */
static void populate(int depth, struct node *n)
{
    if (depth <= 0)
        return;
    n->left = new_node(depth - 1);
    n->right = new_node(depth - 1);
    populate(depth - 1, n->left);
    populate(depth - 1, n->right);
}

/* Bottom-up: the children exist before their parent. */
static struct node *make(int depth)
{
    if (depth <= 0)
        return new_node(0);
    struct node *l = make(depth - 1);
    struct node *r = make(depth - 1);
    struct node *n = new_node(depth);
    n->left = l;
    n->right = r;
    return n;
}

/* Number of nodes, or -1 if the shape or the depths are wrong; *tags gets
 * the sum of the tags. */
static long check(const struct node *n, int depth, long *tags)
{
    if (n->depth != depth || n->tag < 0 || n->tag >= 65521)
        return -1;
    *tags += n->tag;
    if (depth == 0)
        return (n->left || n->right) ? -1 : 1;
    if (!n->left || !n->right)
        return -1;
    long a = check(n->left, depth - 1, tags);
    long b = check(n->right, depth - 1, tags);
    return (a < 0 || b < 0) ? -1 : a + b + 1;
}

static long tree_size(int depth)
{
    return (2L << depth) - 1;
}

int main(int argc, char **argv)
{
    int long_depth = argc > 1 ? atoi(argv[1]) : 16;
    if (long_depth < MIN_DEPTH + 2)
        long_depth = MIN_DEPTH + 2;
    int stretch_depth = long_depth + 2;

    bench_init();
    int ok = 1;
    long temp_trees = 0, tags;

    {
        struct node *s = make(stretch_depth);
        tags = 0;
        if (check(s, stretch_depth, &tags) != tree_size(stretch_depth))
            ok = 0;
    }

    struct node *long_lived = new_node(long_depth);
    populate(long_depth, long_lived);
    long long_tags = 0;
    if (check(long_lived, long_depth, &long_tags) != tree_size(long_depth))
        ok = 0;

    double *array = GC_MALLOC_ATOMIC(ARRAY_LEN * sizeof(double));
    if (array == NULL) {
        fprintf(stderr, "gcbench: out of memory (array)\n");
        return 3;
    }
    for (int i = 0; i < ARRAY_LEN; i++)
        array[i] = i == 0 ? 0.0 : 1.0 / i;

    for (int d = MIN_DEPTH; d <= long_depth; d += 2) {
        long iters = 2 * tree_size(stretch_depth) / tree_size(d);
        for (long i = 0; i < iters; i++) {
            struct node *t = new_node(d);
            populate(d, t);
            tags = 0;
            if (check(t, d, &tags) != tree_size(d))
                ok = 0;
        }
        for (long i = 0; i < iters; i++) {
            struct node *t = make(d);
            tags = 0;
            if (check(t, d, &tags) != tree_size(d))
                ok = 0;
        }
        temp_trees += 2 * iters;
    }
    if (!ok)
        fprintf(stderr, "gcbench: a temporary tree was damaged\n");

    tags = 0;
    if (check(long_lived, long_depth, &tags) != tree_size(long_depth) ||
        tags != long_tags) {
        fprintf(stderr, "gcbench: long-lived tree damaged\n");
        ok = 0;
    }
    for (int i = 1; i < ARRAY_LEN; i++) {
        if (array[i] != 1.0 / i) {
            fprintf(stderr, "gcbench: array damaged at %d\n", i);
            ok = 0;
            break;
        }
    }
    BENCH_KEEP(long_lived);
    BENCH_KEEP(array);

    return bench_report("gcbench", ok, "depth=%d temp_trees=%ld", long_depth,
                        temp_trees);
}
