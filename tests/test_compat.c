/* test_compat.c: smaller bdwgc entry points that programs written for
 * bdwgc call: GC_try_to_collect and stop functions, forced unmapping,
 * usage counters, GC_reachable_here / GC_noop1, stubborn-object no-ops,
 * marker count settings. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

/* Programs written for bdwgc often include <gc/gc.h>: it must be lfgc's
 * (the build fails otherwise), not one of bdwgc installed elsewhere. */
#include <gc/gc.h>
#include <gc/gc_version.h>
#include <gc/gc_pthread_redirects.h>
#include <gc/javaxfc.h>
#ifndef LFGC_VERSION_STRING
#error "<gc/gc.h> is not lfgc's header"
#endif

#include "gc.h"
#include "lfgc.h"

static int stop_always(void) { return 1; }
static int stop_never(void) { return 0; }

static __attribute__((noinline)) void wipe_stack(void)
{
    char buf[64 * 1024];
    memset(buf, 0, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
}

Test(compat, try_to_collect_honours_the_stop_function)
{
    GC_INIT();
    GC_word before = GC_get_gc_no();
    cr_assert_eq(GC_try_to_collect(stop_always), 0);
    cr_assert_eq(GC_get_gc_no(), before, "a stopped collection ran");
    cr_assert_eq(GC_try_to_collect(stop_never), 1);
    cr_assert_eq(GC_get_gc_no(), before + 1);

    GC_set_stop_func(stop_always);
    cr_assert_eq(GC_get_stop_func(), stop_always);
    cr_assert_eq(GC_try_to_collect(NULL), 0, "the default stop function was ignored");
    GC_set_stop_func(NULL);
    cr_assert_eq(GC_try_to_collect(NULL), 1);

    GC_disable();
    cr_assert_eq(GC_try_to_collect(stop_never), 0, "collected while disabled");
    GC_enable();
}

/* Fill the heap with small garbage: whole spans become free at the next
 * collection. */
static __attribute__((noinline)) void make_garbage(size_t bytes)
{
    for (size_t done = 0; done < bytes; done += 64) {
        void **p = GC_MALLOC(64);
        cr_assert_not_null(p);
        p[0] = p;
    }
}

/* A list of `bytes` of 64-byte nodes, live while `root` holds it. */
static __attribute__((noinline)) void build_list(void **root, size_t bytes)
{
    *root = NULL;
    for (size_t done = 0; done < bytes; done += 64) {
        void **p = GC_MALLOC(64);
        cr_assert_not_null(p);
        p[0] = *root;
        *root = p;
    }
}

static void *list_root;

Test(compat, force_unmap_on_gcollect_returns_free_pages)
{
    GC_INIT();
    /* Without the setting, spans freed by a collection stay mapped. */
    build_list(&list_root, 16 << 20);
    list_root = NULL;
    wipe_stack();
    size_t before = GC_get_unmapped_bytes();
    GC_gcollect();
    size_t plain = GC_get_unmapped_bytes() - before;

    build_list(&list_root, 16 << 20);
    list_root = NULL;
    wipe_stack();
    GC_set_force_unmap_on_gcollect(1);
    cr_assert_eq(GC_get_force_unmap_on_gcollect(), 1);
    before = GC_get_unmapped_bytes();
    GC_gcollect();
    size_t forced = GC_get_unmapped_bytes() - before;
    cr_assert_gt(forced, plain + (8u << 20),
                 "forced unmapping gave back %zu bytes, plain %zu", forced, plain);
    /* The heap still works after its pages were given back: zeroed memory. */
    for (int i = 0; i < 100000; i++) {
        uint64_t *p = GC_MALLOC(64);
        for (int w = 0; w < 8; w++)
            cr_assert_eq(p[w], 0);
        p[0] = (uint64_t)i;
    }
}

Test(compat, usage_counters)
{
    GC_INIT();
    enum { N = 2000, SIZE = 1000 };
    static void *keep[N];
    for (int i = 0; i < N; i++) {
        keep[i] = GC_MALLOC(SIZE);
        memset(keep[i], i & 0xff, SIZE);
    }
    GC_gcollect();
    cr_assert_geq(GC_get_memory_use(), (size_t)N * SIZE,
                  "memory use %zu below the live data", GC_get_memory_use());
    cr_assert_leq(GC_get_memory_use(), GC_get_heap_size());

    cr_assert_eq(GC_get_expl_freed_bytes_since_gc(), 0);
    GC_free(keep[0]);
    keep[0] = NULL;
    cr_assert_geq(GC_get_expl_freed_bytes_since_gc(), (size_t)SIZE);
    GC_gcollect();
    cr_assert_eq(GC_get_expl_freed_bytes_since_gc(), 0, "not reset by a collection");

    struct lfgc_stats st;
    lfgc_get_stats(&st);
    cr_assert_eq(GC_get_full_gc_total_time(), st.total_pause_ns / 1000000u);
    for (int i = 1; i < N; i++)
        for (int b = 0; b < SIZE; b++)
            cr_assert_eq(((unsigned char *)keep[i])[b], i & 0xff);
}

Test(compat, reachable_here_and_noop1_keep_objects)
{
    GC_INIT();
    uint64_t *p = GC_MALLOC(256);
    for (int i = 0; i < 32; i++)
        p[i] = 0x1234567800000000ull + (uint64_t)i;
    for (int round = 0; round < 5; round++) {
        make_garbage(1 << 20);
        GC_gcollect();
    }
    cr_assert(lfgc_is_live(p));
    for (int i = 0; i < 32; i++)
        cr_assert_eq(p[i], 0x1234567800000000ull + (uint64_t)i);
    GC_noop1((GC_word)p);
    GC_reachable_here(p);
}

Test(compat, stubborn_objects_are_ordinary)
{
    GC_INIT();
    uint64_t *p = GC_MALLOC_STUBBORN(128);
    cr_assert_not_null(p);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(p[i], 0);
    GC_CHANGE_STUBBORN(p);
    p[3] = 42;
    GC_END_STUBBORN_CHANGE(p);
    void *q = GC_malloc_stubborn(100);
    cr_assert_eq(GC_base(q), q);
    cr_assert_eq(p[3], 42);
}

Test(compat, markers_count_before_init)
{
    GC_set_markers_count(1);
    GC_INIT();
    cr_assert_eq(GC_get_parallel(), 0, "one marker means no helper");
    GC_set_markers_count(4);                /* after init: ignored */
    cr_assert_eq(GC_get_parallel(), 0);
    GC_start_mark_threads();
    GC_set_handle_fork(1);
    GC_gcollect();
}

Test(compat, markers_count_two)
{
    GC_set_markers_count(2);
    GC_INIT();
    cr_assert_eq(GC_get_parallel(), 1);
    GC_start_mark_threads();
    static void *keep[1000];
    for (int i = 0; i < 1000; i++) {
        keep[i] = GC_MALLOC(48);
        ((int *)keep[i])[0] = i;
    }
    GC_gcollect();
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(((int *)keep[i])[0], i);
}

/* The version <gc/gc_version.h> gives is the one the library reports. */
Test(compat, gc_subdirectory_headers_are_lfgcs)
{
    cr_assert_eq(GC_get_version(),
                 (unsigned)(GC_VERSION_MAJOR << 16 | GC_VERSION_MINOR << 8 | GC_VERSION_MICRO));
}
