/* base.c: cost of finding an object's start from an interior pointer.
 *
 *   base [millions_of_queries [objects]]   (defaults: 10 million, 200,000)
 *
 * Allocates `objects` live objects of mixed sizes (16 bytes to 4 KiB) and
 * draws random interior pointers into them.  Then times the base lookup for
 * each pointer:
 *   lfgc   lowfat_base() (inline, from lowfat.h), and GC_base() as well;
 *   bdwgc  GC_base().
 * Before timing, every answer is checked against the pointer the allocator
 * returned, so both collectors must compute the same bases.  The timed loop
 * runs 3 times; the fastest counts.
 *
 * Extra RESULT fields: queries, ns_per_call (lowfat_base for lfgc, GC_base
 * for bdwgc), gcbase_ns (GC_base, both).
 */
#include "bench_util.h"

#define REPEAT 3

/* Time GC_base over q[0..n) REPEAT times; return the best ns per call and
 * the sum of the answers in *sum. */
static double time_gc_base(void **q, size_t n, uintptr_t *sum)
{
    double best = 1e30;
    for (int r = 0; r < REPEAT; r++) {
        uintptr_t s = 0;
        uint64_t t0 = bench_now_ns();
        for (size_t i = 0; i < n; i++)
            s += (uintptr_t)GC_base(q[i]);
        double ns = (double)(bench_now_ns() - t0) / (double)n;
        if (ns < best)
            best = ns;
        *sum = s;
    }
    return best;
}

/* The same loop with lfgc's inline lowfat_base(). */
#ifdef LFGC_VERSION_STRING
static double time_lowfat_base(void **q, size_t n, uintptr_t *sum)
{
    double best = 1e30;
    for (int r = 0; r < REPEAT; r++) {
        uintptr_t s = 0;
        uint64_t t0 = bench_now_ns();
        for (size_t i = 0; i < n; i++)
            s += (uintptr_t)lowfat_base(q[i]);
        double ns = (double)(bench_now_ns() - t0) / (double)n;
        if (ns < best)
            best = ns;
        *sum = s;
    }
    return best;
}
#endif

int main(int argc, char **argv)
{
    double millions = argc > 1 ? atof(argv[1]) : 10;
    long nobj = argc > 2 ? atol(argv[2]) : 200000;
    size_t nq = (size_t)(millions * 1e6);
    if (nq < 1000)
        nq = 1000;
    if (nobj < 16)
        nobj = 16;

    bench_init();
    int ok = 1;
    uint64_t seed = 0xda3e39cb94b95bdbULL;

    /* Objects: reachable from `objs`, a collected pointer array. */
    void **objs = GC_MALLOC((size_t)nobj * sizeof *objs);
    uint32_t *sizes = GC_MALLOC_ATOMIC((size_t)nobj * sizeof *sizes);
    if (objs == NULL || sizes == NULL) {
        fprintf(stderr, "base: out of memory\n");
        return 3;
    }
    for (long k = 0; k < nobj; k++) {
        /* Mostly small, some up to 4 KiB. */
        uint64_t r = bench_rand(&seed);
        size_t sz = (r & 3) ? 16 + (r >> 8) % 241 : 16 + (r >> 8) % 4081;
        objs[k] = GC_MALLOC(sz);
        if (objs[k] == NULL) {
            fprintf(stderr, "base: out of memory\n");
            return 3;
        }
        sizes[k] = (uint32_t)sz;
    }

    /* Queries: malloc'd (not scanned), so they keep nothing alive. */
    void **q = malloc(nq * sizeof *q);
    uint32_t *owner = malloc(nq * sizeof *owner);
    if (q == NULL || owner == NULL) {
        fprintf(stderr, "base: out of memory (queries)\n");
        return 3;
    }
    uintptr_t want_sum = 0;
    for (size_t i = 0; i < nq; i++) {
        uint64_t r = bench_rand(&seed);
        uint32_t k = (uint32_t)(r % (uint64_t)nobj);
        owner[i] = k;
        q[i] = (char *)objs[k] + (r >> 32) % sizes[k];
        want_sum += (uintptr_t)objs[k];
    }

    /* Check every answer first (untimed). */
    size_t wrong = 0, wrong_gc = 0;
    for (size_t i = 0; i < nq; i++) {
        void *want = objs[owner[i]];
        if (GC_base(q[i]) != want)
            wrong_gc++;
#ifdef LFGC_VERSION_STRING
        if (lowfat_base(q[i]) != want)
            wrong++;
#endif
    }
    if (wrong || wrong_gc) {
        fprintf(stderr, "base: wrong bases: lowfat_base %zu, GC_base %zu of "
                "%zu queries\n", wrong, wrong_gc, nq);
        ok = 0;
    }

    uintptr_t sum = 0;
    double gcbase_ns = time_gc_base(q, nq, &sum);
    if (sum != want_sum)
        ok = 0;
    double ns = gcbase_ns;
#ifdef LFGC_VERSION_STRING
    ns = time_lowfat_base(q, nq, &sum);
    if (sum != want_sum)
        ok = 0;
#endif
    BENCH_KEEP(objs);
    free(q);
    free(owner);

    return bench_report("base", ok, "queries=%zu objects=%ld ns_per_call=%.3f "
                        "gcbase_ns=%.3f fn=%s", nq, nobj, ns, gcbase_ns,
#ifdef LFGC_VERSION_STRING
                        "lowfat_base"
#else
                        "GC_base"
#endif
                        );
}
