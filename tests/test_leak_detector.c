/* test_leak_detector.c: a program built with bdwgc's leak_detector.h,
 * which turns its malloc family into the collector's debugging calls.
 * lfgc has no leak-finding mode: the memory is collected instead, and
 * GC_find_leak warns.  The calls through the macros are in functions
 * defined after the header, at the end of this file, so that Criterion's
 * own macros keep the system's malloc. */
#include "test_util.h"

static void *lk_malloc(size_t n);
static void *lk_calloc(size_t m, size_t n);
static void *lk_realloc(void *p, size_t n);
static void lk_free(void *p);
static char *lk_strdup(const char *s);
static char *lk_strndup(const char *s, size_t n);
static void *lk_memalign(size_t a, size_t n);
static int lk_posix_memalign(void **p, size_t a, size_t n);
static void lk_check_leaks(void);

Test(leak_detector, malloc_family_goes_to_the_collector)
{
    GC_INIT();
    char *p = lk_malloc(100);
    cr_assert(lowfat_is_heap_ptr(p), "malloc did not come from lfgc");
    memset(p, 7, 100);
    int *z = lk_calloc(10, sizeof(int));
    cr_assert(lowfat_is_heap_ptr(z));
    for (int i = 0; i < 10; i++)
        cr_assert_eq(z[i], 0);
    p = lk_realloc(p, 5000);
    cr_assert(lowfat_is_heap_ptr(p));
    cr_assert_eq(p[99], 7, "realloc lost the contents");
    lk_free(p);
    cr_assert(!lfgc_is_live(p), "free did not free");
    char *s = lk_strdup("leak");
    cr_assert_str_eq(s, "leak");
    cr_assert(lowfat_is_heap_ptr(s));
    char *t = lk_strndup("detector", 3);
    cr_assert_str_eq(t, "det");
    void *m = lk_memalign(256, 40);
    cr_assert(lowfat_is_heap_ptr(m) && (uintptr_t)m % 256 == 0);
    void *q = NULL;
    cr_assert_eq(lk_posix_memalign(&q, 64, 40), 0);
    cr_assert(lowfat_is_heap_ptr(q) && (uintptr_t)q % 64 == 0);
    GC_word before = GC_get_gc_no();
    lk_check_leaks();
    cr_assert_eq(GC_get_gc_no(), before + 1, "CHECK_LEAKS() did not collect");
}

/* lfgc has no leak mode: the data symbol set before GC_INIT (as bdwgc's
 * programs and FIND_LEAK builds do) is reported, and allocation goes on
 * being collected. */
Test(leak_detector, find_leak_before_init_warns)
{
    cr_assert(!GC_is_init_called());
    GC_set_warn_proc(tu_warn_proc);
    GC_find_leak = 1;
    GC_INIT();
    cr_assert_eq(tu_warn_count, 1, "GC_find_leak set before GC_INIT was not reported");
    cr_assert(strstr(tu_warnings[0].msg, "leak"), "%s", tu_warnings[0].msg);
    cr_assert_eq(GC_get_find_leak(), 1);
    GC_word before = GC_get_gc_no();
    for (int i = 0; i < 4096; i++)
        lk_malloc(65536);
    cr_assert_gt(GC_get_gc_no(), before, "allocation did not collect");
}

#include <leak_detector.h>

static void *lk_malloc(size_t n) { return malloc(n); }
static void *lk_calloc(size_t m, size_t n) { return calloc(m, n); }
static void *lk_realloc(void *p, size_t n) { return realloc(p, n); }
static void lk_free(void *p) { free(p); }
static char *lk_strdup(const char *s) { return strdup(s); }
static char *lk_strndup(const char *s, size_t n) { return strndup(s, n); }
static void *lk_memalign(size_t a, size_t n) { return memalign(a, n); }
static int lk_posix_memalign(void **p, size_t a, size_t n) { return posix_memalign(p, a, n); }
static void lk_check_leaks(void) { CHECK_LEAKS(); }
