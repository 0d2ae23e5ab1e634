// test_cpp.cc: gc_cpp.h, gc_allocator.h and liblfgccpp.
//
// Containers with gc_allocator keep their elements' targets alive and
// their checksums intact across collections; gc_cleanup destructors run
// when their objects are reclaimed; placement new picks the kind; the
// global operator new of liblfgccpp gives scanned, uncollectable memory;
// garbage is reclaimed (disappearing links tell).
#include <criterion/criterion.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <type_traits>
#include <vector>

#include "gc_allocator.h"
#include "gc_cpp.h"

#define NOINLINE __attribute__((noinline))

static NOINLINE void clear_stack()
{
    volatile char buf[65536];
    std::memset((char *)buf, 0, sizeof buf);
}

static NOINLINE void collect()
{
    clear_stack();
    GC_gcollect();
    GC_gcollect();
    GC_invoke_finalizers();
}

struct Cell {
    uint64_t value;
    Cell *next;
};

static uint64_t mix(uint64_t i) { return i * 0x9E3779B97F4A7C15ull ^ (i >> 7); }

// Cells reachable only from the vector's gc_allocator buffer.
typedef std::vector<Cell *, gc_allocator<Cell *>> CellVec;

static NOINLINE void fill(CellVec &v, int n)
{
    for (int i = 0; i < n; i++) {
        Cell *c = (Cell *)GC_MALLOC(sizeof(Cell));
        c->value = mix((uint64_t)i);
        v.push_back(c);
    }
}

static NOINLINE uint64_t sum(const CellVec &v)
{
    uint64_t s = 0;
    for (Cell *c : v)
        s = s * 31 + c->value;
    return s;
}

static NOINLINE void churn(int n)
{
    for (int i = 0; i < n; i++) {
        CellVec garbage;
        fill(garbage, 100);
    }
}

Test(cpp, vector_with_gc_allocator_keeps_its_cells)
{
    GC_INIT();
    CellVec v;
    fill(v, 20000);
    uint64_t before = sum(v);
    churn(200);
    collect();
    cr_assert_eq(sum(v), before, "cells held by a gc_allocator vector were damaged");
    cr_assert_not_null(GC_base(v.data()), "the vector's buffer is not lfgc memory");
}

typedef std::map<int, Cell *, std::less<int>, gc_allocator<std::pair<const int, Cell *>>> CellMap;

static NOINLINE void fill_map(CellMap &m, int n)
{
    for (int i = 0; i < n; i++) {
        Cell *c = (Cell *)GC_MALLOC(sizeof(Cell));
        c->value = mix((uint64_t)i + 1000);
        m[i] = c;
    }
}

static NOINLINE uint64_t sum_map(const CellMap &m)
{
    uint64_t s = 0;
    for (auto &kv : m)
        s = s * 31 + (uint64_t)kv.first + kv.second->value;
    return s;
}

Test(cpp, map_with_gc_allocator_keeps_its_cells)
{
    GC_INIT();
    CellMap m;
    fill_map(m, 5000);
    uint64_t before = sum_map(m);
    churn(200);
    collect();
    cr_assert_eq(sum_map(m), before, "a gc_allocator map was damaged");
    cr_assert_eq(m.size(), 5000u);
}

// A vector living in malloc memory (not scanned): traceable_allocator's
// buffer is uncollectable and scanned, so it alone keeps the cells.
typedef std::vector<Cell *, traceable_allocator<Cell *>> TraceVec;

static NOINLINE TraceVec *make_traced(int n)
{
    void *mem = std::malloc(sizeof(TraceVec));
    TraceVec *v = new (mem) TraceVec();
    for (int i = 0; i < n; i++) {
        Cell *c = (Cell *)GC_MALLOC(sizeof(Cell));
        c->value = mix((uint64_t)i + 77);
        v->push_back(c);
    }
    return v;
}

static NOINLINE uint64_t sum_traced(const TraceVec *v)
{
    uint64_t s = 0;
    for (Cell *c : *v)
        s = s * 31 + c->value;
    return s;
}

Test(cpp, traceable_allocator_is_a_root)
{
    GC_INIT();
    TraceVec *v = make_traced(10000);
    uint64_t before = sum_traced(v);
    // Hide the vector's address from the stack.
    uintptr_t hidden = ~(uintptr_t)v;
    v = nullptr;
    churn(200);
    collect();
    v = (TraceVec *)~hidden;
    cr_assert_eq(sum_traced(v), before, "cells held only by a traceable_allocator buffer died");
    v->~TraceVec();
    std::free(v);
}

static int destroyed;

class Counted : public gc_cleanup {
public:
    explicit Counted(uint64_t v) : value(v) {}
    ~Counted() override { destroyed++; }
    uint64_t value;
};

// A gc_cleanup base at a non-zero offset in its object.
struct Payload {
    uint64_t words[3];
};
class Derived : public Payload, public Counted {
public:
    Derived() : Counted(5) {}
};

static NOINLINE void make_counted(int n)
{
    for (int i = 0; i < n; i++) {
        new Counted((uint64_t)i);
        new Derived();
    }
}

Test(cpp, gc_cleanup_destructors_run_when_reclaimed)
{
    GC_INIT();
    destroyed = 0;
    make_counted(500);
    for (int i = 0; i < 4 && destroyed < 1000; i++)
        collect();
    cr_assert_geq(destroyed, 900, "only %d of 1000 gc_cleanup destructors ran", destroyed);
}

Test(cpp, delete_runs_the_destructor_once)
{
    GC_INIT();
    destroyed = 0;
    Counted *c = new Counted(1);
    delete c;
    cr_assert_eq(destroyed, 1);
    collect();
    cr_assert_eq(destroyed, 1, "a deleted gc_cleanup object was destroyed again");
    Counted local(2);   // not in the heap: no finalizer
    (void)local;
}

static GC_hidden_pointer hidden_obj;
static void *link_slot;

static NOINLINE void make_watched(GCPlacement gcp)
{
    void *obj = ::operator new(64, gcp);
    hidden_obj = GC_HIDE_POINTER(obj);
    link_slot = (void *)hidden_obj;
    cr_assert_eq(GC_general_register_disappearing_link(&link_slot, obj), GC_SUCCESS);
}

Test(cpp, placement_new_kinds)
{
    GC_INIT();
    make_watched(UseGC);
    collect();
    cr_assert_null(link_slot, "an unreachable new (UseGC) object was not reclaimed");

    make_watched(NoGC);
    collect();
    cr_assert_not_null(link_slot, "a new (NoGC) object was reclaimed");
    GC_unregister_disappearing_link(&link_slot);
    GC_FREE(GC_REVEAL_POINTER(hidden_obj));

    make_watched(PointerFreeGC);
    collect();
    cr_assert_null(link_slot, "an unreachable new (PointerFreeGC) object was not reclaimed");
}

static int cleaned;
static void on_cleanup(void *obj, void *data)
{
    (void)obj;
    cleaned += (int)(uintptr_t)data;
}

struct Plain {
    uint64_t a, b;
};

static NOINLINE void make_plain_with_cleanup(int n)
{
    for (int i = 0; i < n; i++)
        new (UseGC, on_cleanup, (void *)1) Plain();
    Plain *arr = new (UseGC) Plain[10];
    (void)arr;
}

Test(cpp, placement_new_with_cleanup_function)
{
    GC_INIT();
    make_plain_with_cleanup(200);
    for (int i = 0; i < 4 && cleaned < 200; i++)
        collect();
    cr_assert_geq(cleaned, 180, "only %d of 200 cleanup functions ran", cleaned);
}

// liblfgccpp's global operator new: uncollectable, scanned memory.
struct Holder {
    Cell *cells[64];
};

static NOINLINE Holder *make_holder()
{
    Holder *h = new Holder;        // global operator new
    for (int i = 0; i < 64; i++) {
        h->cells[i] = (Cell *)GC_MALLOC(sizeof(Cell));
        h->cells[i]->value = mix((uint64_t)i + 5);
    }
    return h;
}

Test(cpp, global_new_is_uncollectable_and_scanned)
{
    GC_INIT();
    Holder *h = make_holder();
    cr_assert_not_null(GC_base(h), "plain new does not come from lfgc (liblfgccpp not linked?)");
    uintptr_t hidden = ~(uintptr_t)h;
    h = nullptr;
    churn(100);
    collect();
    h = (Holder *)~hidden;
    for (int i = 0; i < 64; i++)
        cr_assert_eq(h->cells[i]->value, mix((uint64_t)i + 5), "cell %d damaged", i);
    delete h;
    int *arr = new int[1000];
    cr_assert_not_null(GC_base(arr));
    delete[] arr;
}

Test(cpp, pointer_free_traits)
{
    GC_INIT();
    std::vector<uint64_t, gc_allocator<uint64_t>> nums(1000, 7);
    std::vector<Cell *, gc_allocator<Cell *>> ptrs(10);
    int fails = 0;
    static int *failsp;
    failsp = &fails;
    GC_is_visible_print_proc = [](void *) { (*failsp)++; };
    GC_is_visible(nums.data());
    cr_assert_eq(fails, 1, "a vector of integers is scanned (not pointer-free)");
    GC_is_visible(ptrs.data());
    cr_assert_eq(fails, 1, "a vector of pointers is not scanned");
}

// bdwgc's declaration macros, as client code (bdwgc's own test_cpp among
// it) uses them in its own classes: an explicit constructor, a noexcept
// function, a compiler-version test.
struct Boxed : public gc {
    GC_ATTR_EXPLICIT Boxed(int v) : value(v) {}
    int value;
};
static int twice(int x) GC_NOEXCEPT { return 2 * x; }
#if !GC_GNUC_PREREQ(4, 0) || GC_GNUC_PREREQ(99, 0)
# error "GC_GNUC_PREREQ gives the wrong answer"
#endif
static_assert(!std::is_convertible<int, Boxed>::value, "GC_ATTR_EXPLICIT is not explicit");
static_assert(noexcept(twice(1)), "GC_NOEXCEPT is not noexcept");

Test(cpp, bdwgc_declaration_macros)
{
    GC_INIT();
    Boxed *b = new Boxed(21);
    cr_assert_not_null(GC_base(b), "gc's operator new did not allocate from the heap");
    cr_assert_eq(twice(b->value), 42);
    cr_assert_eq(GC_TIME_UNLIMITED, 999999);
}
