/* alloc_rate.c: raw allocation rate of small objects.
 *
 *   alloc_rate [millions]               (default 50 million allocations)
 *
 * A tight loop of GC_MALLOC calls of mixed sizes (16, 24, ..., 128 bytes,
 * picked by a cheap generator), each object written once and dropped at
 * once, so nearly everything is garbage and the allocator's fast path and
 * the sweep dominate.  A ring of the 256 most recent objects is kept alive
 * and checked as it turns over: an allocator that handed out memory still in
 * use would overwrite one of them.
 *
 * Extra RESULT fields: allocs (count), allocs_per_s, ns_per_alloc (loop time
 * only, start-up excluded), mb_allocated.
 */
#include "bench_util.h"

#define RING 256

struct obj {
    uint64_t tag;
    uint64_t size;
};

int main(int argc, char **argv)
{
    double millions = argc > 1 ? atof(argv[1]) : 50;
    long count = (long)(millions * 1e6);
    if (count < 1000)
        count = 1000;

    bench_init();
    int ok = 1;
    struct obj **ring = GC_MALLOC(RING * sizeof *ring);
    if (ring == NULL) {
        fprintf(stderr, "alloc_rate: out of memory\n");
        return 3;
    }
    uint32_t lcg = 12345;
    uint64_t bytes = 0, bad = 0;

    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < count; i++) {
        lcg = lcg * 1664525u + 1013904223u;
        size_t size = 16 + ((lcg >> 24) & 15) * 8;     /* 16..136 */
        if (size > 128)
            size = 128;
        struct obj *o = GC_MALLOC(size);
        if (o == NULL) {
            fprintf(stderr, "alloc_rate: out of memory\n");
            return 3;
        }
        o->tag = (uint64_t)i;
        o->size = size;
        bytes += size;
        if ((i & 31) == 0) {
            struct obj **slot = &ring[(i >> 5) % RING];
            struct obj *old = *slot;
            if (old && (old->tag != (uint64_t)(i - 32 * RING) ||
                        old->size < 16 || old->size > 128))
                bad++;
            *slot = o;
        }
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    if (bad) {
        fprintf(stderr, "alloc_rate: %llu live objects overwritten\n",
                (unsigned long long)bad);
        ok = 0;
    }
    BENCH_KEEP(ring);

    return bench_report("alloc_rate", ok,
                        "allocs=%ld allocs_per_s=%.0f ns_per_alloc=%.2f "
                        "mb_allocated=%.0f", count, (double)count / secs,
                        secs * 1e9 / (double)count, (double)bytes / 1048576.0);
}
