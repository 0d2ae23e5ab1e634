/* test_malloc_info.c: malloc_stats, malloc_info and mallopt under
 * liblfgc-malloc describe lfgc's heap, not the C library's.
 *
 * Linked with liblfgc-malloc, as test_malloc: the calls resolve to lfgc's.
 * Each figure printed must follow what the test allocates: glibc's own
 * functions, reached by mistake, report an arena lfgc never used.
 */
#include "test_util.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>

#include "lfgc_malloc.h"

#define SMALL 48
#define NSMALL 20000
#define LARGE (256 * KiB)
#define NLARGE 8

static void *small[NSMALL], *large[NLARGE];

static void allocate(void)
{
    for (int i = 0; i < NSMALL; i++) {
        small[i] = malloc(SMALL);
        cr_assert_not_null(small[i]);
        memset(small[i], i, SMALL);
    }
    for (int i = 0; i < NLARGE; i++) {
        large[i] = malloc(LARGE);
        cr_assert_not_null(large[i]);
        memset(large[i], i, LARGE);
    }
}

static void release(void)
{
    for (int i = 0; i < NSMALL; i++) {
        cr_assert_eq(((unsigned char *)small[i])[SMALL - 1], (unsigned char)i);
        free(small[i]);
    }
    for (int i = 0; i < NLARGE; i++) {
        cr_assert_eq(((unsigned char *)large[i])[LARGE - 1], (unsigned char)i);
        free(large[i]);
    }
}

/* The text a call writes on a FILE, in a buffer the caller frees. */
static char *capture_file(int (*fn)(FILE *))
{
    static char *buf;
    static size_t len;
    buf = NULL;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(fn(f), 0);
    fclose(f);
    return buf;
}

static int info_to(FILE *f) { return malloc_info(0, f); }

/* The text malloc_stats writes on stderr; *mi (unless NULL): mallinfo2
 * just before, with the same objects live (tmpfile's FILE is one). */
static char *capture_stderr(struct mallinfo2 *mi)
{
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    cr_assert_geq(saved, 0);
    cr_assert_eq(dup2(fileno(tmp), 2), 2);
    if (mi)
        *mi = mallinfo2();
    malloc_stats();
    fflush(stderr);
    cr_assert_eq(dup2(saved, 2), 2);
    close(saved);
    long n = ftell(tmp) > 0 ? ftell(tmp) : lseek(fileno(tmp), 0, SEEK_END);
    char *buf = calloc(1, (size_t)n + 1);
    cr_assert_eq(pread(fileno(tmp), buf, (size_t)n, 0), n);
    fclose(tmp);
    return buf;
}

/* The number after `key` in text, the nth time key appears (from 0). */
static size_t number_after(const char *text, const char *key, int nth)
{
    const char *p = text;
    for (int i = 0; i <= nth; i++) {
        p = strstr(p, key);
        cr_assert_not_null(p, "no %s (occurrence %d) in:\n%s", key, nth, text);
        p += strlen(key);
    }
    while (*p == ' ' || *p == '=' || *p == '"')
        p++;
    cr_assert(*p >= '0' && *p <= '9', "no number after %s in:\n%s", key, text);
    return strtoull(p, NULL, 10);
}

Test(malloc_info, stats_follow_the_heap)
{
    struct mallinfo2 before;
    char *s0 = capture_stderr(&before);
    size_t in_use0 = number_after(s0, "in use bytes", 1);
    size_t mmap0 = number_after(s0, "max mmap bytes", 0);
    cr_assert_eq(in_use0, before.uordblks, "malloc_stats says %zu in use, "
                 "mallinfo2 %zu:\n%s", in_use0, before.uordblks, s0);

    allocate();
    struct mallinfo2 during;
    char *s1 = capture_stderr(&during);
    size_t in_use1 = number_after(s1, "in use bytes", 1);
    size_t mmap1 = number_after(s1, "max mmap bytes", 0);
    /* Small slots cached by the thread before may count as in use
     * already: the small objects are checked alone, the large ones as an
     * increase. */
    cr_assert_geq(in_use1, (size_t)NSMALL * SMALL + NLARGE * LARGE,
                  "%zu in use after allocating %zu bytes:\n%s", in_use1,
                  (size_t)NSMALL * SMALL + NLARGE * LARGE, s1);
    cr_assert_geq(in_use1, in_use0 + NLARGE * LARGE, "in use went from %zu to %zu "
                  "after allocating %d large objects:\n%s", in_use0, in_use1, NLARGE, s1);
    cr_assert_geq(mmap1, mmap0 + NLARGE * LARGE, "large objects not counted:\n%s", s1);
    cr_assert_eq(in_use1, during.uordblks);

    release();
    char *s2 = capture_stderr(NULL);
    size_t in_use2 = number_after(s2, "in use bytes", 1);
    cr_assert_leq(in_use2, in_use1 - NLARGE * LARGE, "in use after free: %zu, "
                  "during: %zu:\n%s", in_use2, in_use1, s2);
    free(s0);
    free(s1);
    free(s2);
}

/* A thread with a cancellation request pending writes the whole report:
 * fprintf is a cancellation point, and glibc's malloc_stats is immune
 * (since 2.28); lfgc's wrote nothing. */
static pthread_barrier_t stats_gate;

static void *stats_thread(void *arg)
{
    pthread_barrier_wait(&stats_gate);      /* not a cancellation point */
    malloc_stats();
    return arg;
}

static void *stats_with_cancel_pending(void *unused)
{
    (void)unused;
    pthread_barrier_init(&stats_gate, NULL, 2);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stats_thread, NULL), 0);
    cr_assert_eq(pthread_cancel(th), 0);
    pthread_barrier_wait(&stats_gate);
    cr_assert_eq(pthread_join(th, NULL), 0);
    pthread_barrier_destroy(&stats_gate);
    return NULL;
}

Test(malloc_info, stats_are_whole_when_a_cancel_is_pending)
{
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    cr_assert_eq(dup2(fileno(tmp), 2), 2);
    stats_with_cancel_pending(NULL);
    fflush(stderr);
    cr_assert_eq(dup2(saved, 2), 2);
    close(saved);
    char buf[4096] = "";
    ssize_t n = pread(fileno(tmp), buf, sizeof buf - 1, 0);
    fclose(tmp);
    cr_assert_gt(n, 0, "malloc_stats wrote nothing: the thread was cancelled inside it");
    cr_assert_not_null(strstr(buf, "max mmap bytes   ="),
                       "malloc_stats stopped before its last line:\n%s", buf);
}

Test(malloc_info, info_is_glibc_xml_with_lfgcs_figures)
{
    allocate();
    struct mallinfo2 mi = mallinfo2();
    char *x = capture_file(info_to);
    cr_assert(strncmp(x, "<malloc version=\"1\">\n", 21) == 0, "%s", x);
    cr_assert_not_null(strstr(x, "</malloc>\n"), "%s", x);
    cr_assert_eq(number_after(x, "<total type=\"mmap\" count=", 0), mi.hblks, "%s", x);
    cr_assert_geq(mi.hblks, NLARGE);
    cr_assert_eq(number_after(strstr(x, "<total type=\"mmap\""), "size=", 0), mi.hblkhd,
                 "%s", x);
    cr_assert_eq(number_after(strstr(x, "</heap>"), "<system type=\"current\" size=", 0),
                 mi.arena + mi.hblkhd, "%s", x);
    release();
    free(x);
    errno = 0;
    cr_assert_eq(malloc_info(1, stdout), -1);
    cr_assert_eq(errno, EINVAL);
}

Test(malloc_info, mallopt_accepts_glibcs_parameters)
{
    cr_assert_eq(mallopt(M_ARENA_MAX, 1), 1);
    cr_assert_eq(mallopt(M_MMAP_THRESHOLD, 1 << 20), 1);
    cr_assert_eq(mallopt(M_TRIM_THRESHOLD, 0), 1);
    cr_assert_eq(mallopt(M_MXFAST, 64), 1);
    cr_assert_eq(mallopt(M_MXFAST, 1 << 20), 0, "an M_MXFAST glibc refuses was accepted");
    /* And the heap still works as before. */
    allocate();
    release();
}
