/* test_debug_alloc.c: the debugging allocator (GC_debug_malloc and the
 * GC_DEBUG macros) finds writes past an object's end.
 *
 * A collection reports each damaged live debugging object once, on
 * stderr ("smashed"); GC_debug_free and GC_debug_realloc check the object
 * they get.  Objects written only within their size are never reported,
 * whatever their size and kind, and their contents stay intact.
 */
#define GC_DEBUG 1
#include "test_util.h"

#define NOBJ 200

/* stderr into a file of its own while fn runs; the text written. */
static char *stderr_of(void (*fn)(void))
{
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    fflush(stderr);
    int saved = dup(2);
    cr_assert_eq(dup2(fileno(f), 2), 2);
    fn();
    fflush(stderr);
    cr_assert_eq(dup2(saved, 2), 2);
    close(saved);
    off_t n = lseek(fileno(f), 0, SEEK_END);
    char *t = calloc(1, (size_t)n + 1);
    cr_assert_eq(pread(fileno(f), t, (size_t)n, 0), n);
    fclose(f);
    return t;
}

static int count_of(const char *text, const char *key)
{
    int n = 0;
    for (const char *q = text; (q = strstr(q, key)); q += strlen(key))
        n++;
    return n;
}

static char *objs[NOBJ];
static size_t sizes[NOBJ];

/* Debugging objects of every kind and of sizes from 1 byte to large,
 * each filled to its end and no further. */
static void make_objects(void)
{
    for (int i = 0; i < NOBJ; i++) {
        size_t n = i % 50 == 49 ? 100000 + (size_t)i : 1 + (size_t)i * 37 % 3000;
        switch (i % 4) {
        case 0: objs[i] = GC_MALLOC(n); break;
        case 1: objs[i] = GC_MALLOC_ATOMIC(n); break;
        case 2: objs[i] = GC_MALLOC_UNCOLLECTABLE(n); break;
        default: objs[i] = GC_debug_malloc_atomic_uncollectable(n, GC_EXTRAS); break;
        }
        cr_assert_not_null(objs[i]);
        sizes[i] = n;
        tu_fill_bytes(objs[i], n, (uint64_t)i);
    }
}

static void check_objects(void)
{
    for (int i = 0; i < NOBJ; i++)
        cr_assert_eq(tu_check_bytes(objs[i], sizes[i], (uint64_t)i), sizes[i],
                     "object %d (%zu bytes) damaged", i, sizes[i]);
}

static void collect_twice(void)
{
    GC_gcollect();
    GC_gcollect();
}

Test(debug_alloc, objects_written_within_their_size_are_not_reported)
{
    GC_INIT();
    make_objects();
    char *s = GC_STRDUP("a string of the debugging allocator");
    char *t = GC_STRNDUP("truncated here", 9);
    char *text = stderr_of(collect_twice);
    cr_assert_eq(count_of(text, "smashed"), 0, "false reports:\n%s", text);
    free(text);
    check_objects();
    cr_assert_str_eq(s, "a string of the debugging allocator");
    cr_assert_str_eq(t, "truncated");
    /* Grown and shrunk by GC_REALLOC: contents kept, the new end guarded. */
    for (int i = 0; i < NOBJ; i += 4) {
        size_t keep = sizes[i] / 2 + 1;
        objs[i] = GC_REALLOC(objs[i], keep);
        cr_assert_eq(tu_check_bytes(objs[i], keep, (uint64_t)i), keep);
        objs[i] = GC_REALLOC(objs[i], keep + 5000);
        cr_assert_eq(tu_check_bytes(objs[i], keep, (uint64_t)i), keep);
        tu_fill_bytes(objs[i], keep + 5000, (uint64_t)i);
        sizes[i] = keep + 5000;
    }
    text = stderr_of(collect_twice);
    cr_assert_eq(count_of(text, "smashed"), 0, "false reports after realloc:\n%s", text);
    free(text);
    check_objects();
    /* The plain calls take debugging objects. */
    for (int i = 0; i < NOBJ; i += 8)
        GC_free(objs[i]);
}

static char *victim;

/* A store the compiler does not see past the object's end. */
static void poke(char *p, size_t at, char v)
{
    char *volatile q = p + at;
    *q = v;
}

static void smash_and_collect(void)
{
    GC_gcollect();
}

Test(debug_alloc, a_write_past_the_end_is_reported_once)
{
    GC_INIT();
    make_objects();
    victim = GC_MALLOC(40);
    memset(victim, 1, 40);
    poke(victim, 42, 42);       /* as bdwgc's smash test does */
    char *text = stderr_of(smash_and_collect);
    char where[64];
    snprintf(where, sizeof where, "%p in or near object at %p", (void *)(victim + 42),
             (void *)victim);
    cr_assert_eq(count_of(text, "smashed"), 1, "expected one report:\n%s", text);
    cr_assert_eq(count_of(text, where), 1, "the report does not name %s:\n%s", where, text);
    free(text);
    text = stderr_of(smash_and_collect);
    cr_assert_eq(count_of(text, "smashed"), 0, "the same damage reported again:\n%s", text);
    free(text);
    check_objects();
    for (int i = 0; i < 40; i++)
        cr_assert_eq(victim[i], 1);
}

/* As in bdwgc, the bytes up to the next word past the requested size are
 * the program's (bdwgc's gctest fills objects in 4-byte ints up to 3
 * bytes past it): no report at a collection, a free or a realloc. */
static void write_the_slack(void)
{
    for (size_t n = 1; n <= 40; n++) {
        char *p = GC_MALLOC(n);
        cr_assert_not_null(p);
        for (size_t i = n; i < ((n + 7) & ~(size_t)7); i++)
            poke(p, i, 'z');
        GC_gcollect();
        if (n % 2)
            GC_FREE(p);
        else
            cr_assert_not_null(GC_REALLOC(p, 2 * n));
    }
}

Test(debug_alloc, bytes_up_to_the_next_word_are_the_programs)
{
    GC_INIT();
    char *text = stderr_of(write_the_slack);
    cr_assert_eq(count_of(text, "smashed"), 0, "%s", text);
    free(text);
}

static void free_smashed(void)
{
    char *p = GC_MALLOC_ATOMIC(100);
    poke(p, 104, 'x');          /* the guard starts at the next word */
    GC_FREE(p);
    char *q = GC_MALLOC(24);
    poke(q, 30, 'y');
    q = GC_REALLOC(q, 1000);
    cr_assert_not_null(q);
}

Test(debug_alloc, free_and_realloc_check_the_object)
{
    GC_INIT();
    char *text = stderr_of(free_smashed);
    cr_assert_eq(count_of(text, "GC_debug_free: found smashed location"), 1, "%s", text);
    cr_assert_eq(count_of(text, "GC_debug_realloc: found smashed location"), 1, "%s", text);
    free(text);
}

/* Garbage goes as usual: debugging objects are collected. */
Test(debug_alloc, dropped_debugging_objects_are_reclaimed)
{
    GC_INIT();
    make_objects();
    for (int round = 0; round < 200; round++)
        for (int i = 0; i < 1000; i++)
            tu_fill_bytes(GC_MALLOC(64), 64, (uint64_t)i);
    size_t heap = GC_get_heap_size();
    for (int round = 0; round < 200; round++)
        for (int i = 0; i < 1000; i++)
            tu_fill_bytes(GC_MALLOC(64), 64, (uint64_t)i);
    cr_assert_leq(GC_get_heap_size(), heap + 4 * MiB, "heap grew from %zu to %zu",
                  heap, GC_get_heap_size());
    check_objects();
}
