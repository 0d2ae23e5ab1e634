/* test_leak_detector.c: a program built with bdwgc's leak_detector.h,
 * which turns its malloc family into the collector's debugging calls,
 * and lfgc's leak-finding mode (GC_find_leak): collections report every
 * unreachable object once, on stderr, then reclaim it.  The calls through
 * the macros are in functions defined after the header, at the end of
 * this file, so that Criterion's own macros keep the system's malloc. */
#include "test_util.h"
#include "gc_mark.h"

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

/* ------------------------------------------------------------------ */
/* Leak-finding mode                                                    */

#define NKEPT 64
#define NDROP 64
#define OBJ 48

static char *kept[NKEPT];
static GC_hidden_pointer dropped[NDROP];

/* stderr, where the reports go, into a file of its own; returns the
 * saved descriptor. */
static int stderr_to(FILE *f)
{
    fflush(stderr);
    int saved = dup(2);
    cr_assert_geq(saved, 0);
    cr_assert_eq(dup2(fileno(f), 2), 2);
    return saved;
}

static void stderr_back(int saved)
{
    fflush(stderr);
    cr_assert_eq(dup2(saved, 2), 2);
    close(saved);
}

/* All the text written to f so far. */
static char *text_of(FILE *f)
{
    off_t n = lseek(fileno(f), 0, SEEK_END);
    cr_assert_geq(n, 0);
    char *t = calloc(1, (size_t)n + 1);
    cr_assert_eq(pread(fileno(f), t, (size_t)n, 0), n);
    return t;
}

/* How many report lines name p. */
static int times_reported(const char *text, const void *p)
{
    char key[64];
    snprintf(key, sizeof key, " at %p,", p);
    int n = 0;
    for (const char *q = text; (q = strstr(q, key)); q += strlen(key))
        n++;
    return n;
}

static TU_NOINLINE void make_objects(void)
{
    for (int i = 0; i < NKEPT; i++) {
        kept[i] = lk_malloc(OBJ);
        tu_fill_bytes(kept[i], OBJ, (uint64_t)i);
    }
    for (int i = 0; i < NDROP; i++) {
        char *d = lk_malloc(OBJ);
        tu_fill_bytes(d, OBJ, 1000 + (uint64_t)i);
        dropped[i] = tu_hide(d);
    }
}

Test(leak_detector, find_leak_reports_each_dropped_object_once)
{
    GC_find_leak = 1;           /* before GC_INIT, as bdwgc's programs do */
    GC_INIT();
    cr_assert_eq(GC_get_find_leak(), 1);
    FILE *log = tmpfile();
    cr_assert_not_null(log);
    int saved = stderr_to(log);
    make_objects();
    tu_clear_stack();
    lk_check_leaks();
    lk_check_leaks();
    stderr_back(saved);
    char *text = text_of(log);
    cr_assert_not_null(strstr(text, "leaked objects"), "no leak report:\n%s", text);
    int found = 0;
    for (int i = 0; i < NDROP; i++) {
        int n = times_reported(text, GC_REVEAL_POINTER(dropped[i]));
        cr_assert_leq(n, 1, "%p was reported %d times:\n%s",
                      GC_REVEAL_POINTER(dropped[i]), n, text);
        found += n;
    }
    int lines = 0;
    for (const char *q = text; (q = strstr(q, "Leaked ")); q++)
        lines++;
    cr_assert_leq(lines, NDROP, "%d objects reported, only %d were dropped (free "
                  "slots taken for leaks?):\n%s", lines, NDROP, text);
    /* Conservative: a stale word may still hold one or two. */
    cr_assert_geq(found, NDROP - 4, "only %d of %d dropped objects were reported:\n%s",
                  found, NDROP, text);
    for (int i = 0; i < NKEPT; i++) {
        cr_assert_eq(times_reported(text, kept[i]), 0, "the reachable %p was reported "
                     "as a leak", (void *)kept[i]);
        cr_assert_eq(tu_check_bytes(kept[i], OBJ, (uint64_t)i), OBJ,
                     "reachable object %d damaged", i);
    }
    free(text);
    fclose(log);
}

/* NKEPT objects in kept[], of a kind made here, so that its spans are
 * fresh in the test's process. */
static void keep_objects_of_a_new_kind(void)
{
    int kind = (int)GC_new_kind(GC_new_free_list(), GC_DS_LENGTH, 1, 1);
    for (int i = 0; i < NKEPT; i++) {
        kept[i] = GC_generic_malloc(OBJ, kind);
        cr_assert_not_null(kept[i]);
        tu_fill_bytes(kept[i], OBJ, (uint64_t)i);
    }
}

/* Two leak checks, stderr to a file: nothing may be reported, and kept[]
 * must be intact. */
static void two_checks_report_nothing(void)
{
    FILE *log = tmpfile();
    cr_assert_not_null(log);
    int saved = stderr_to(log);
    lk_check_leaks();
    lk_check_leaks();
    stderr_back(saved);
    char *text = text_of(log);
    cr_assert_null(strstr(text, "Leaked "), "objects reported while all were reachable:\n%.600s",
                   text);
    for (int i = 0; i < NKEPT; i++)
        cr_assert_eq(tu_check_bytes(kept[i], OBJ, (uint64_t)i), OBJ,
                     "reachable object %d damaged", i);
    free(text);
    fclose(log);
}

/* A span taken empty by this mode is linked whole: its slots past the
 * first piece were never allocated and are no leak.  (The first piece of
 * a fresh span of a small class ends with its first page; in this mode
 * the rest of the span was left unlinked, and every collection reported
 * its slots.) */
Test(leak_detector, slots_never_allocated_are_not_reported)
{
    GC_set_find_leak(1);
    GC_INIT();
    keep_objects_of_a_new_kind();
    char *small = GC_MALLOC(16);        /* a class the others do not use */
    tu_fill_bytes(small, 16, 99);
    two_checks_report_nothing();
    cr_assert_eq(tu_check_bytes(small, 16, 99), 16);
}

/* Leak mode set after start-up (bdwgc's programs set it before, but may
 * not): a span taken empty before was being linked piece by piece, and
 * the slots its cursor had not reached were never allocated. */
Test(leak_detector, leak_mode_set_late_reports_no_slot_never_allocated)
{
    GC_INIT();
    keep_objects_of_a_new_kind();
    GC_set_find_leak(1);
    two_checks_report_nothing();
}

/* bdwgc frees what it reported: a program that leaks on and on, in this
 * mode, does not grow the heap without bound. */
static TU_NOINLINE void leak_some(int round)
{
    for (int i = 0; i < 2000; i++)
        tu_fill_bytes(lk_malloc(OBJ), OBJ, (uint64_t)(round * 2000 + i));
}

Test(leak_detector, reported_leaks_are_reclaimed)
{
    GC_set_find_leak(1);
    GC_INIT();
    FILE *null = fopen("/dev/null", "w");
    cr_assert_not_null(null);
    int saved = stderr_to(null);
    make_objects();
    size_t heap_after_first = 0;
    for (int round = 0; round < 300; round++) {
        leak_some(round);
        tu_clear_stack();
        lk_check_leaks();
        if (round == 10)
            heap_after_first = GC_get_heap_size();
    }
    stderr_back(saved);
    fclose(null);
    cr_assert_leq(GC_get_heap_size(), heap_after_first + 2 * MiB,
                  "the heap grew from %zu to %zu bytes while every round's objects "
                  "were reported as leaks", heap_after_first, GC_get_heap_size());
    for (int i = 0; i < NKEPT; i++)
        cr_assert_eq(tu_check_bytes(kept[i], OBJ, (uint64_t)i), OBJ,
                     "reachable object %d damaged", i);
}

/* A minor collection keeps the marks of old objects: one that died since
 * would go unreported. */
Test(leak_detector, collections_are_full_in_leak_mode)
{
    GC_INIT();
    TU_NEED_MINOR();
    GC_set_find_leak(1);
    FILE *null = fopen("/dev/null", "w");
    int saved = stderr_to(null);
    tu_collect();
    int minor = tu_collect_minor();
    stderr_back(saved);
    fclose(null);
    cr_assert_not(minor, "a minor collection ran in leak-finding mode");
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
