/* malloc_util.h: helpers shared by the malloc-mode workloads
 * (bench/workloads/malloc_*.c, run by bench/modes/malloc.sh).
 *
 * These programs call only the C library's malloc family: each is built
 * once and run under every allocator by preloading it (LD_PRELOAD), glibc's
 * own malloc being the run with nothing preloaded.  This header times them,
 * fills and checks object contents (so that an allocator handing out memory
 * still in use is caught), and prints the RESULT line the bench scripts
 * parse:
 *   RESULT workload=.. wall_s=.. cpu_s=.. peak_rss_kb=.. [extra] check=ok|FAIL
 * Header-only: every function is static.
 */
#ifndef MALLOC_UTIL_H
#define MALLOC_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"

static uint64_t mb_t0_ns;
static double mb_t0_cpu;

static inline void mb_init(void)
{
    mb_t0_ns = bench_now_ns();
    mb_t0_cpu = bench_cpu_s();
}

/* A size between lo and hi (inclusive), logarithmically distributed as in
 * mimalloc-bench's and glibc's benchmarks: small sizes are the most common,
 * yet every power of two between lo and hi is visited. */
static inline size_t mb_log_size(uint64_t *st, size_t lo, size_t hi)
{
    uint64_t r = bench_rand(st);
    unsigned lo_bits = 63 - (unsigned)__builtin_clzll(lo | 1);
    unsigned hi_bits = 63 - (unsigned)__builtin_clzll(hi | 1);
    unsigned b = lo_bits + (unsigned)(r % (hi_bits - lo_bits + 1));
    size_t s = ((size_t)1 << b) + (size_t)((r >> 32) & (((size_t)1 << b) - 1));
    return s < lo ? lo : s > hi ? hi : s;
}

/* Objects carry their own check: the first word is a tag, the last a tag
 * too (when there is room), so that touching an object costs two stores and
 * an overlap with another live object shows on either end. */
static inline void mb_fill(void *p, size_t n, uint64_t tag)
{
    if (n >= 8)
        memcpy(p, &tag, 8);
    else
        memset(p, (int)(tag & 0xff), n);
    if (n >= 16) {
        uint64_t t = ~tag;
        memcpy((char *)p + n - 8, &t, 8);
    }
}

static inline int mb_check(const void *p, size_t n, uint64_t tag)
{
    if (n >= 8) {
        uint64_t a;
        memcpy(&a, p, 8);
        if (a != tag)
            return 0;
    } else {
        for (size_t i = 0; i < n; i++)
            if (((const unsigned char *)p)[i] != (unsigned char)(tag & 0xff))
                return 0;
    }
    if (n >= 16) {
        uint64_t b;
        memcpy(&b, (const char *)p + n - 8, 8);
        if (b != ~tag)
            return 0;
    }
    return 1;
}

static inline void *mb_xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "bench: out of memory (malloc %zu)\n", n);
        exit(3);
    }
    return p;
}

/* Print the RESULT line (last on stdout) and return main's exit status. */
static inline int mb_report(const char *workload, int ok, const char *extra, ...)
    __attribute__((format(printf, 3, 4)));

static inline int mb_report(const char *workload, int ok, const char *extra, ...)
{
    double wall = (double)(bench_now_ns() - mb_t0_ns) / 1e9;
    double cpu = bench_cpu_s() - mb_t0_cpu;
    printf("RESULT workload=%s wall_s=%.3f cpu_s=%.3f peak_rss_kb=%ld",
           workload, wall, cpu, bench_peak_rss_kb());
    if (extra) {
        va_list ap;
        va_start(ap, extra);
        putchar(' ');
        vprintf(extra, ap);
        va_end(ap);
    }
    printf(" check=%s\n", ok ? "ok" : "FAIL");
    fflush(stdout);
    return ok ? 0 : 1;
}

#endif /* MALLOC_UTIL_H */
