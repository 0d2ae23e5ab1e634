/* mark.c: mark-heavy workload: a large live heap, collected again and again.
 *
 *   mark [live_mb [collections]]        (defaults: 128 MB, 10 collections)
 *
 * Builds live_mb MiB of 64-byte graph nodes (56 bytes asked for; both
 * collectors round that plus their one extra byte up to 64), threaded on 64
 * linked lists, each node with 4 edges to nodes picked at random from the
 * whole heap: marking chases pointers all over memory, as a real heap's
 * would.  Then, `collections` times: rewire 1% of the edges, drop 1 MB of
 * short-lived nodes, and time an explicit GC_gcollect().  At the end every
 * node is checked: its edges must lead to the nodes it was given (each node
 * keeps a hash of its targets' serial numbers).
 *
 * Extra RESULT fields (over the timed collections only):
 *   live_mb       the nominal live heap
 *   gc_ms         median wall time of one GC_gcollect() call
 *   mark_ms       median world-stopped pause of those collections
 *   ms_per_mb     mark_ms / live_mb: the marking cost per MiB of live data
 *   build_s       time to build the heap (allocation with a growing heap)
 * The common pause fields (max_pause_ms, p99_pause_ms) also cover only the
 * timed collections.
 */
#include "bench_util.h"

#define EDGES 4
#define LISTS 64
#define NODE_SLOT 64      /* what a node costs in either collector */

struct gnode {
    struct gnode *next;
    struct gnode *edge[EDGES];
    uint64_t id;
    uint64_t check;       /* hash of the edges' ids */
};

static uint64_t edge_hash(const struct gnode *n)
{
    uint64_t h = n->id * 0x9E3779B97F4A7C15ULL;
    for (int k = 0; k < EDGES; k++) {
        uint64_t t = n->edge[k] ? n->edge[k]->id : ~0ULL;
        h = (h ^ t) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
    }
    return h;
}

static struct gnode *new_gnode(void)
{
    struct gnode *n = GC_NEW(struct gnode);
    if (n == NULL) {
        fprintf(stderr, "mark: out of memory\n");
        exit(3);
    }
    return n;
}

int main(int argc, char **argv)
{
    double live_mb = argc > 1 ? atof(argv[1]) : 128;
    int rounds = argc > 2 ? atoi(argv[2]) : 10;
    if (live_mb < 1)
        live_mb = 1;
    if (rounds < 1)
        rounds = 1;
    size_t n = (size_t)(live_mb * 1048576.0 / NODE_SLOT);

    bench_init();
    int ok = 1;
    uint64_t seed = 0x853c49e6748fea9bULL;

    /* The list heads are a collected object reached from this frame; the
     * index of all nodes is malloc'd, which neither collector scans, so only
     * the lists keep nodes alive. */
    struct gnode **heads = GC_MALLOC(LISTS * sizeof *heads);
    struct gnode **all = malloc(n * sizeof *all);
    if (heads == NULL || all == NULL) {
        fprintf(stderr, "mark: out of memory (index)\n");
        return 3;
    }

    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        struct gnode *g = new_gnode();
        g->id = i;
        g->next = heads[i % LISTS];
        heads[i % LISTS] = g;
        all[i] = g;
    }
    for (size_t i = 0; i < n; i++) {
        struct gnode *g = all[i];
        for (int k = 0; k < EDGES; k++)
            g->edge[k] = all[bench_rand(&seed) % n];
        g->check = edge_hash(g);
    }
    double build_s = (double)(bench_now_ns() - t0) / 1e9;

    GC_gcollect();             /* settle: start from a collected heap */
    bench_reset_pauses();

    uint64_t *gc_ns = bench_map((size_t)rounds * sizeof *gc_ns);
    size_t rewire = n / 100 + 1;
    size_t garbage = (1u << 20) / NODE_SLOT;
    for (int r = 0; r < rounds; r++) {
        for (size_t j = 0; j < rewire; j++) {
            struct gnode *g = all[bench_rand(&seed) % n];
            g->edge[bench_rand(&seed) % EDGES] = all[bench_rand(&seed) % n];
            g->check = edge_hash(g);
        }
        struct gnode *junk = NULL;
        for (size_t j = 0; j < garbage; j++) {
            struct gnode *g = new_gnode();
            g->next = junk;
            junk = g;
        }
        BENCH_KEEP(junk);
        junk = NULL;
        uint64_t c0 = bench_now_ns();
        GC_gcollect();
        gc_ns[r] = bench_now_ns() - c0;
    }

    /* Check: every node on the lists, with the right edges, exactly once. */
    size_t seen = 0;
    for (int l = 0; l < LISTS; l++) {
        for (struct gnode *g = heads[l]; g; g = g->next) {
            if (g->id >= n || g->id % LISTS != (uint64_t)l ||
                all[g->id] != g || g->check != edge_hash(g)) {
                if (ok)
                    fprintf(stderr, "mark: node %zu of list %d damaged\n",
                            seen, l);
                ok = 0;
                break;
            }
            seen++;
        }
    }
    if (seen != n) {
        fprintf(stderr, "mark: %zu nodes reached, want %zu\n", seen, n);
        ok = 0;
    }

    struct bench_pauses p;
    bench_get_pauses(&p);
    double gc_ms = (double)bench_percentile(gc_ns, (size_t)rounds, 50) / 1e6;
    double mark_ms = p.count ? (double)p.p50 / 1e6 : gc_ms;
    BENCH_KEEP(heads);
    free(all);

    return bench_report("mark", ok,
                        "live_mb=%g nodes=%zu collections=%d gc_ms=%.3f "
                        "mark_ms=%.3f ms_per_mb=%.4f build_s=%.3f",
                        live_mb, n, rounds, gc_ms, mark_ms, mark_ms / live_mb,
                        build_s);
}
