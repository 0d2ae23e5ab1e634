/* test_loader.c: collections while other threads are inside the dynamic
 * linker.
 *
 * The collector finds the data segments with dl_iterate_phdr, which takes
 * the dynamic linker's lock.  A thread stopped while it holds that lock
 * (inside its own dl_iterate_phdr callback, or loading or unloading a
 * library) must not deadlock the collection, and a library unloaded
 * meanwhile must not have its unmapped data scanned.  A deadlock fails
 * through the tests' time limit instead of hanging `make check`.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>

TestSuite(loader, .init = tu_warm_up, .timeout = 30);

static volatile int loader_stop;
static volatile long loader_rounds;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A callback that takes its time, as an unwinder's or a profiler's may:
 * the thread spends nearly all its time inside dl_iterate_phdr. */
static int slow_callback(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    (void)data;
    uint64_t t0 = now_ns();
    while (now_ns() - t0 < 20000)
        __asm__ volatile("pause");
    return 0;
}

static void *iterate_loop(void *arg)
{
    (void)arg;
    (void)GC_malloc(16);                    /* registers the thread */
    while (!loader_stop) {
        dl_iterate_phdr(slow_callback, NULL);
        __atomic_add_fetch(&loader_rounds, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* The path of tests/.libs/libroot_helper.so, next to this program. */
static void helper_path(char *path, size_t size)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0, "readlink(/proc/self/exe)");
    exe[n] = 0;
    char *dir = dirname(exe);
    const char *candidates[] = { "/.libs/libroot_helper.so", "/libroot_helper.so" };
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, size, "%s%s", dir, candidates[i]);
        if (access(path, R_OK) == 0)
            return;
    }
    cr_assert_fail("tests/.libs/libroot_helper.so not found next to %s (make check builds it)",
                   dir);
}

static char loader_helper[PATH_MAX + 64];

static void *open_close_loop(void *arg)
{
    (void)arg;
    (void)GC_malloc(16);                    /* registers the thread */
    while (!loader_stop) {
        void *h = dlopen(loader_helper, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            break;
        dlclose(h);
        __atomic_add_fetch(&loader_rounds, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* A list rooted in this program's data, and its checksum. */
struct node {
    struct node *next;
    uint64_t value;
};
static struct node *loader_list;

static TU_NOINLINE void build_list(int n)
{
    for (int i = 0; i < n; i++) {
        struct node *p = GC_malloc(sizeof *p);
        cr_assert_not_null(p);
        p->value = tu_pattern((uint64_t)i, 7);
        p->next = loader_list;
        loader_list = p;
    }
}

static TU_NOINLINE uint64_t list_sum(void)
{
    uint64_t sum = 0;
    for (struct node *p = loader_list; p; p = p->next)
        sum = sum * 31 + p->value;
    return sum;
}

static TU_NOINLINE GC_hidden_pointer garbage(int n)
{
    void *last = NULL;
    for (int i = 0; i < n; i++)
        last = GC_malloc(48);
    return tu_hide(last);
}

/* Collections while a thread runs `loop`: every one completes, the list
 * rooted in the data segment survives intact, garbage is reclaimed. */
static void collect_beside(void *(*loop)(void *), int collections)
{
    loader_stop = 0;
    loader_rounds = 0;
    build_list(1000);
    uint64_t sum = list_sum();
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, loop, NULL), 0);
    while (__atomic_load_n(&loader_rounds, __ATOMIC_RELAXED) == 0)
        sched_yield();
    GC_hidden_pointer last = 0;
    for (int i = 0; i < collections; i++) {
        last = garbage(200);
        tu_collect();
    }
    loader_stop = 1;
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_gt(loader_rounds, 0);
    tu_collect();
    cr_assert_eq(list_sum(), sum, "the list rooted in static data changed");
    cr_assert_not(tu_live(last), "garbage was not reclaimed");
}

Test(loader, collect_while_a_thread_iterates_the_loaded_objects)
{
    collect_beside(iterate_loop, 200);
}

Test(loader, collect_while_a_thread_loads_and_unloads_a_library)
{
    helper_path(loader_helper, sizeof loader_helper);
    collect_beside(open_close_loop, 200);
}

/* A library unloaded after the data segments are listed and before they
 * are scanned: its data are unmapped by then.  The collection's
 * PRE_STOP_WORLD event comes between the two; there the test lets a
 * thread dlclose the library and waits (a bounded time) for it. */
static void *volatile unload_handle;
static volatile int unload_ready, unload_now, unloaded;

static void *unload_on_demand(void *arg)
{
    (void)arg;
    (void)GC_malloc(16);                    /* registers the thread */
    unload_ready = 1;
    while (!unload_now)
        sched_yield();
    dlclose(unload_handle);
    unloaded = 1;
    return NULL;
}

static void unload_during_collection(GC_EventType e)
{
    if (e != GC_EVENT_PRE_STOP_WORLD || unload_now)
        return;
    unload_now = 1;
    uint64_t t0 = now_ns();
    while (!unloaded && now_ns() - t0 < 100000000u)
        sched_yield();
}

Test(loader, library_unloaded_while_a_collection_starts)
{
    helper_path(loader_helper, sizeof loader_helper);
    unload_handle = dlopen(loader_helper, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(unload_handle, "dlopen: %s", dlerror());
    build_list(100);
    uint64_t sum = list_sum();
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, unload_on_demand, NULL), 0);
    while (!unload_ready)
        sched_yield();
    GC_hidden_pointer drop = garbage(10);
    GC_set_on_collection_event(unload_during_collection);
    tu_collect();
    GC_set_on_collection_event(NULL);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert(unloaded);
    cr_assert_eq(list_sum(), sum, "the list rooted in static data changed");
    tu_collect();
    cr_assert_not(tu_live(drop), "garbage was not reclaimed");
}
