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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static uint64_t mb_t0_ns;
static double mb_t0_cpu;

static inline uint64_t mb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline double mb_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static inline void mb_init(void)
{
    mb_t0_ns = mb_now_ns();
    mb_t0_cpu = mb_cpu_s();
}

/* xorshift64*: cheap, repeatable, the same stream under every allocator. */
static inline uint64_t mb_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A size between lo and hi (inclusive), logarithmically distributed as in
 * mimalloc-bench's and glibc's benchmarks: small sizes are the most common,
 * yet every power of two between lo and hi is visited. */
static inline size_t mb_log_size(uint64_t *st, size_t lo, size_t hi)
{
    uint64_t r = mb_rand(st);
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

/* Keep a value alive and opaque to the optimiser. */
#define MB_SINK(x) __asm__ volatile("" : : "r"(x) : "memory")

static inline long mb_peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Print the RESULT line (last on stdout) and return main's exit status. */
static inline int mb_report(const char *workload, int ok, const char *extra, ...)
    __attribute__((format(printf, 3, 4)));

static inline int mb_report(const char *workload, int ok, const char *extra, ...)
{
    double wall = (double)(mb_now_ns() - mb_t0_ns) / 1e9;
    double cpu = mb_cpu_s() - mb_t0_cpu;
    printf("RESULT workload=%s wall_s=%.3f cpu_s=%.3f peak_rss_kb=%ld",
           workload, wall, cpu, mb_peak_rss_kb());
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
