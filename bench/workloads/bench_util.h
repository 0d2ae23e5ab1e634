/* bench_util.h: measurement helpers shared by lfgc's benchmark workloads.
 *
 * Every workload compiles unchanged against lfgc's gc.h and against the
 * system's bdwgc gc.h, and uses only calls both provide.  This header:
 *   - names the collector the program was built against (lfgc's gc.h defines
 *     LFGC_VERSION_STRING, bdwgc's does not);
 *   - records the length of every collection's world-stopped pause with the
 *     collection-event callback (GC_EVENT_PRE_STOP_WORLD ..
 *     GC_EVENT_POST_START_WORLD; when a collector never sends the stop-world
 *     events, GC_EVENT_START .. GC_EVENT_END; with lfgc, its own pause log as
 *     the last resort);
 *   - prints the single machine-readable RESULT line the bench scripts parse.
 *
 * A workload that uses threads defines GC_THREADS before including this
 * header.  Header-only: every function is static.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <gc.h>
#ifdef LFGC_VERSION_STRING
# include <lfgc.h>
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_clock.h"

#ifndef BENCH_COLLECTOR
# ifdef LFGC_VERSION_STRING
#  define BENCH_COLLECTOR "lfgc"
# else
#  define BENCH_COLLECTOR "bdwgc"
# endif
#endif

/* Exit status of a workload that cannot run on this collector (the bench
 * scripts record the row as "n/a"), as automake's SKIP. */
#define BENCH_EXIT_UNSUPPORTED 77

/* ------------------------------------------------------------------ */
/* Pause log.  The buffers come from mmap, not from the data segment: the
 * collectors scan the data segment as roots and should not pay for ours.
 * Untouched pages of the buffers cost no RSS. */

#define BENCH_MAX_PAUSES 65536

struct bench_pause_log {
    uint64_t *ns;      /* one entry per completed pause                 */
    size_t n;          /* entries used (at most BENCH_MAX_PAUSES)       */
    size_t dropped;    /* pauses past the capacity (only max is kept)   */
    uint64_t max;
    uint64_t t0;       /* start of the pause in progress, 0 if none     */
};

static struct bench_pause_log bench_stw;   /* world stopped..restarted   */
static struct bench_pause_log bench_gc;    /* collection start..end      */
static uint64_t bench_t0_ns;
static double bench_t0_cpu;

static inline void bench_log_add(struct bench_pause_log *log, uint64_t d)
{
    if (d > log->max)
        log->max = d;
    if (log->n < BENCH_MAX_PAUSES)
        log->ns[log->n++] = d;
    else
        log->dropped++;
}

/* Runs with the collector's lock held: only reads the clock and writes to
 * the preallocated logs. */
static void bench_on_event(GC_EventType ev)
{
    uint64_t t = bench_now_ns();
    switch (ev) {
    case GC_EVENT_PRE_STOP_WORLD:
        bench_stw.t0 = t;
        break;
    case GC_EVENT_POST_START_WORLD:
        if (bench_stw.t0) {
            bench_log_add(&bench_stw, t - bench_stw.t0);
            bench_stw.t0 = 0;
        }
        break;
    case GC_EVENT_START:
        bench_gc.t0 = t;
        break;
    case GC_EVENT_END:
        if (bench_gc.t0) {
            bench_log_add(&bench_gc, t - bench_gc.t0);
            bench_gc.t0 = 0;
        }
        break;
    default:
        break;
    }
}

static void *bench_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("bench: mmap");
        exit(2);
    }
    return p;
}

/* Call first thing in main(): starts the clocks, initialises the collector
 * and installs the event callback. */
static void bench_init(void)
{
    bench_t0_ns = bench_now_ns();
    bench_t0_cpu = bench_cpu_s();
    bench_stw.ns = bench_map(BENCH_MAX_PAUSES * sizeof(uint64_t));
    bench_gc.ns = bench_map(BENCH_MAX_PAUSES * sizeof(uint64_t));
    GC_INIT();
    GC_set_on_collection_event(bench_on_event);
}

/* Forget the pauses seen so far (for workloads whose set-up is not part of
 * what they measure). */
static inline void bench_reset_pauses(void)
{
    bench_stw.n = bench_stw.dropped = 0;
    bench_stw.max = 0;
    bench_gc.n = bench_gc.dropped = 0;
    bench_gc.max = 0;
}

static int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile q (0..100) of v[0..n), sorting v in place. */
static inline uint64_t bench_percentile(uint64_t *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, bench_cmp_u64);
    size_t rank = (size_t)(q / 100.0 * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

/* Summary of the pauses: which log was used, count, max, p99, median and
 * total, in nanoseconds. */
struct bench_pauses {
    const char *source;
    size_t count;
    uint64_t max, p99, p50, total;
};

static inline void bench_get_pauses(struct bench_pauses *out)
{
    struct bench_pause_log *log = NULL;
    memset(out, 0, sizeof *out);
    out->source = "none";
    if (bench_stw.n + bench_stw.dropped > 0) {
        log = &bench_stw;
        out->source = "stopworld";
    } else if (bench_gc.n + bench_gc.dropped > 0) {
        log = &bench_gc;
        out->source = "startend";
    }
    if (log) {
        for (size_t i = 0; i < log->n; i++)
            out->total += log->ns[i];
        out->count = log->n + log->dropped;
        out->max = log->max;
        out->p99 = bench_percentile(log->ns, log->n, 99.0);
        out->p50 = bench_percentile(log->ns, log->n, 50.0);
        return;
    }
#ifdef LFGC_VERSION_STRING
    /* lfgc sent no events: use its own log of world-stopped times. */
    {
        uint64_t *ns = bench_map(4096 * sizeof(uint64_t));
        size_t n = lfgc_get_pauses(ns, 4096);
        struct lfgc_stats st;
        lfgc_get_stats(&st);
        if (n > 0 || st.collections > 0) {
            out->source = "lfgc_stats";
            out->count = n;
            out->max = st.max_pause_ns;
            out->total = st.total_pause_ns;
            out->p99 = bench_percentile(ns, n, 99.0);
            out->p50 = bench_percentile(ns, n, 50.0);
        }
    }
#endif
}

/* Print the RESULT line and return the exit status for main():
 *   RESULT collector=.. workload=.. wall_s=.. cpu_s=.. gcs=.. max_pause_ms=..
 *          p99_pause_ms=.. p50_pause_ms=.. pause_total_ms=.. peak_rss_kb=..
 *          heap_kb=.. [extra fields] check=ok|FAIL pause_src=..
 * `extra` is a printf format for workload-specific "key=value" fields (may
 * be NULL).  Nothing after this line may be printed on stdout. */
static int bench_report(const char *workload, int ok, const char *extra, ...)
    __attribute__((format(printf, 3, 4)));

static int bench_report(const char *workload, int ok, const char *extra, ...)
{
    double wall = (double)(bench_now_ns() - bench_t0_ns) / 1e9;
    double cpu = bench_cpu_s() - bench_t0_cpu;
    struct bench_pauses p;
    bench_get_pauses(&p);
    unsigned long gcs = (unsigned long)GC_get_gc_no();
    size_t heap = GC_get_heap_size();

    printf("RESULT collector=%s workload=%s wall_s=%.3f cpu_s=%.3f gcs=%lu "
           "max_pause_ms=%.3f p99_pause_ms=%.3f p50_pause_ms=%.3f "
           "pause_total_ms=%.1f pauses=%zu peak_rss_kb=%ld heap_kb=%zu",
           BENCH_COLLECTOR, workload, wall, cpu, gcs,
           (double)p.max / 1e6, (double)p.p99 / 1e6, (double)p.p50 / 1e6,
           (double)p.total / 1e6, p.count, bench_peak_rss_kb(), heap / 1024);
    if (extra) {
        va_list ap;
        va_start(ap, extra);
        putchar(' ');
        vprintf(extra, ap);
        va_end(ap);
    }
    printf(" check=%s pause_src=%s\n", ok ? "ok" : "FAIL", p.source);
    fflush(stdout);
    return ok ? 0 : 1;
}

/* Report that this workload cannot run on this collector and exit. */
static inline void bench_unsupported(const char *workload, const char *why)
{
    printf("RESULT collector=%s workload=%s check=n/a note=%s\n",
           BENCH_COLLECTOR, workload, why);
    fflush(stdout);
    exit(BENCH_EXIT_UNSUPPORTED);
}

/* The binary trees of trees.c and mt_trees.c: a node has both children or
 * neither.  bench_tree_count() counts the nodes, or returns a large
 * negative number for a damaged tree, so that the total comes out wrong. */
struct tree_node {
    struct tree_node *left, *right;
};

static inline long bench_tree_count(const struct tree_node *n)
{
    long c = 1;
    while (n->left) {
        if (n->right == NULL)
            return -1000000000L;
        c += 1 + bench_tree_count(n->right);
        n = n->left;
    }
    return n->right ? -1000000000L : c;
}

/* FNV-1a over 32-bit words: the pointer-free arrays' checksum. */
static inline uint64_t bench_checksum32(const uint32_t *a, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= a[i];
        h *= 1099511628211ULL;
    }
    return h;
}

#endif /* BENCH_UTIL_H */
