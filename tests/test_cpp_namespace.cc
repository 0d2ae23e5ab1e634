// test_cpp_namespace.cc: gc_cpp.h with GC_NAMESPACE, which bdwgc's header
// documents: gc, gc_cleanup, GCPlacement and its values live in namespace
// boehmgc, named through GC_NS_QUALIFY, while the placement operators
// stay global.  Every path of the header must link against liblfgccpp,
// running out of memory (GC_throw_bad_alloc) included.
#define GC_NAMESPACE
#include <criterion/criterion.h>

#include <cstdint>
#include <cstring>
#include <new>

#include "gc_cpp.h"
#include "gc_mark.h"

#define NOINLINE __attribute__((noinline))

static NOINLINE void collect()
{
    volatile char buf[65536];
    std::memset((char *)buf, 0, sizeof buf);
    GC_gcollect();
    GC_gcollect();
    GC_invoke_finalizers();
}

class Node : public GC_NS_QUALIFY(gc) {
public:
    uint64_t value;
    Node *next;
};

static uint64_t mix(uint64_t i) { return i * 0x9E3779B97F4A7C15ull ^ (i >> 7); }

static Node *volatile list_root;

static NOINLINE void build(int n)
{
    Node *head = 0;
    for (int i = 0; i < n; i++) {
        Node *x = new Node;
        x->value = mix((uint64_t)i);
        x->next = head;
        head = x;
    }
    list_root = head;
}

static NOINLINE uint64_t checksum(const Node *x)
{
    uint64_t s = 0;
    for (; x; x = x->next)
        s = s * 31 + x->value;
    return s;
}

static NOINLINE void garbage(int n)
{
    for (int i = 0; i < n; i++) {
        Node *x = new Node;
        x->value = (uint64_t)i;
        x->next = 0;
    }
}

Test(cpp_namespace, gc_objects_live_and_die)
{
    GC_INIT();
    build(5000);
    uint64_t want = checksum(list_root);
    size_t heap0 = 0;
    for (int round = 0; round < 20; round++) {
        garbage(20000);
        collect();
        if (round == 4)
            heap0 = GC_get_heap_size();
        cr_assert_eq(checksum(list_root), want, "a live list changed at round %d", round);
    }
    // 20 rounds of 20,000 dead nodes: reclaimed, the heap does not grow with them.
    cr_assert_leq(GC_get_heap_size(), heap0 * 2, "heap grew from %zu to %zu", heap0,
                  GC_get_heap_size());
}

static int destroyed;

class Counted : public GC_NS_QUALIFY(gc_cleanup) {
public:
    ~Counted() { destroyed++; }
};

static NOINLINE void make_counted(int n)
{
    for (int i = 0; i < n; i++)
        new Counted;
}

Test(cpp_namespace, gc_cleanup_destructors_run)
{
    GC_INIT();
    destroyed = 0;
    make_counted(500);
    for (int i = 0; i < 4 && destroyed < 500; i++)
        collect();
    cr_assert_geq(destroyed, 450, "only %d of 500 gc_cleanup destructors ran", destroyed);
}

Test(cpp_namespace, placement_values_pick_the_kind)
{
    GC_INIT();
    char *atomic = new (GC_NS_QUALIFY(PointerFreeGC)) char[100];
    cr_assert_eq(GC_get_kind_and_size(atomic, (size_t *)0), GC_I_PTRFREE);
    char *scanned = new (GC_NS_QUALIFY(UseGC)) char[100];
    cr_assert_eq(GC_get_kind_and_size(scanned, (size_t *)0), GC_I_NORMAL);
    void *reference = GC_MALLOC_UNCOLLECTABLE(32);
    void **uncollectable = new (GC_NS_QUALIFY(NoGC)) void *[4];
    cr_assert_eq(GC_get_kind_and_size(uncollectable, (size_t *)0),
                 GC_get_kind_and_size(reference, (size_t *)0),
                 "new (NoGC) is not of GC_malloc_uncollectable's kind");
    GC_FREE(uncollectable);
    GC_FREE(reference);
}

Test(cpp_namespace, out_of_memory_throws_bad_alloc)
{
    GC_INIT();
    bool thrown = false;
    try {
        char *p = new (GC_NS_QUALIFY(UseGC)) char[(size_t)1 << 50];
        p[0] = 1;
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    cr_assert(thrown, "new (UseGC) of 2^50 bytes did not throw std::bad_alloc");
}

// bdwgc's macro, which programs use in their own operator new.
struct Pool {
    static void *operator new(std::size_t size)
    {
        void *obj = GC_MALLOC(size);
        GC_OP_NEW_OOM_CHECK(obj);
        return obj;
    }
    char bytes[(size_t)1 << 50];
};

Test(cpp_namespace, op_new_oom_check_throws_bad_alloc)
{
    GC_INIT();
    bool thrown = false;
    try {
        Pool *p = new Pool;
        p->bytes[0] = 1;
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    cr_assert(thrown, "GC_OP_NEW_OOM_CHECK did not throw std::bad_alloc");
}
