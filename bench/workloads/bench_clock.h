/* bench_clock.h: what every workload measures with, collector or not.
 *
 * Clocks, peak RSS, a repeatable random stream and an optimisation barrier.
 * Shared by bench_util.h (the collector workloads) and malloc_util.h (the
 * malloc-mode workloads), which add their own RESULT lines.  Header-only:
 * every function is static.
 */
#ifndef BENCH_CLOCK_H
#define BENCH_CLOCK_H

#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* User plus system CPU seconds of the whole process (all threads). */
static inline double bench_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static inline long bench_peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* xorshift64*: small, fast and deterministic, so that runs are repeatable
 * and every collector or allocator sees exactly the same work. */
static inline uint64_t bench_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Keep a value alive and opaque to the optimiser. */
#define BENCH_KEEP(x) __asm__ volatile("" : : "r"(x) : "memory")

#endif /* BENCH_CLOCK_H */
