/* malloc_churn.c: single-thread small-object churn.
 *
 *   malloc_churn [millions]        (default 20 million allocations)
 *
 * Two phases sharing the allocations half and half:
 *  1. batches, in the manner of glibc's bench-malloc-simple: for each size
 *     16, 32, 64, 128 and each batch of 25, 100, 400 and 1600 objects,
 *     allocate the batch, then free it (first in first out on even rounds,
 *     last in first out on odd ones), again and again;
 *  2. a steady working set: 10,000 live objects of 16..256 bytes, where each
 *     step frees a random one and allocates a new one in its place.
 * Every object is tagged at both ends when allocated and checked before it
 * is freed.
 *
 * Extra RESULT fields: allocs, ns_per_op (one malloc plus one free).
 */
#include "malloc_util.h"

#define WORKING_SET 10000

int main(int argc, char **argv)
{
    double millions = argc > 1 ? atof(argv[1]) : 20;
    long total = (long)(millions * 1e6);
    if (total < 100000)
        total = 100000;
    mb_init();
    uint64_t bad = 0, allocs = 0;

    /* Phase 1: batches. */
    static const size_t sizes[] = {16, 32, 64, 128};
    static const size_t batches[] = {25, 100, 400, 1600};
    void **v = mb_xmalloc(1600 * sizeof *v);
    long per_combo = total / 2 / 16;
    for (size_t si = 0; si < 4; si++) {
        for (size_t bi = 0; bi < 4; bi++) {
            size_t n = batches[bi], sz = sizes[si];
            for (long done = 0, round = 0; done < per_combo; done += n, round++) {
                for (size_t i = 0; i < n; i++) {
                    v[i] = mb_xmalloc(sz);
                    mb_fill(v[i], sz, (uint64_t)(uintptr_t)&v[i] ^ (uint64_t)round);
                }
                for (size_t k = 0; k < n; k++) {
                    size_t i = (round & 1) ? n - 1 - k : k;
                    if (!mb_check(v[i], sz, (uint64_t)(uintptr_t)&v[i] ^ (uint64_t)round))
                        bad++;
                    free(v[i]);
                }
                allocs += n;
            }
        }
    }
    free(v);

    /* Phase 2: a steady working set, random replacement. */
    struct slot { void *p; uint32_t size; uint32_t gen; } *ws =
        mb_xmalloc(WORKING_SET * sizeof *ws);
    uint64_t st = 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < WORKING_SET; i++) {
        ws[i].size = (uint32_t)(16 + bench_rand(&st) % 241);
        ws[i].gen = 0;
        ws[i].p = mb_xmalloc(ws[i].size);
        mb_fill(ws[i].p, ws[i].size, i);
    }
    long steps = total - (long)allocs;
    for (long s = 0; s < steps; s++) {
        uint64_t r = bench_rand(&st);
        size_t i = (size_t)(r % WORKING_SET);
        struct slot *e = &ws[i];
        if (!mb_check(e->p, e->size, ((uint64_t)e->gen << 32) | i))
            bad++;
        free(e->p);
        e->size = (uint32_t)(16 + (r >> 40) % 241);
        e->gen++;
        e->p = mb_xmalloc(e->size);
        mb_fill(e->p, e->size, ((uint64_t)e->gen << 32) | i);
    }
    allocs += (uint64_t)steps;
    for (size_t i = 0; i < WORKING_SET; i++) {
        if (!mb_check(ws[i].p, ws[i].size, ((uint64_t)ws[i].gen << 32) | i))
            bad++;
        free(ws[i].p);
    }
    free(ws);

    if (bad)
        fprintf(stderr, "malloc_churn: %llu objects damaged\n",
                (unsigned long long)bad);
    double wall = (double)(bench_now_ns() - mb_t0_ns);
    return mb_report("malloc_churn", bad == 0, "allocs=%llu ns_per_op=%.2f",
                     (unsigned long long)allocs, wall / (double)allocs);
}
