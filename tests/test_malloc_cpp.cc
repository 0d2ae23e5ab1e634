// test_malloc_cpp.cc: C++ on liblfgc-malloc: the standard containers and
// every form of operator new and delete, all on the low-fat heap.
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <cstring>

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "lowfat.h"

static bool ours(const void *p)
{
    return p && lowfat_is_heap_ptr(p) && lowfat_base(p) == p;
}

// The operators are liblfgc-malloc's, not libstdc++'s (whose would call
// malloc, which is lfgc's too: the addresses alone would not tell).
Test(malloc_cpp, operators_are_lfgcs)
{
    void *(*plain)(size_t) = &::operator new;
    void *(*nothrow)(size_t, const std::nothrow_t &) noexcept = &::operator new[];
    void (*del)(void *, std::size_t, std::align_val_t) noexcept = &::operator delete;
    void *fns[] = { (void *)plain, (void *)nothrow, (void *)del };
    for (void *f : fns) {
        Dl_info info;
        cr_assert(dladdr(f, &info) && info.dli_fname, "no object for %p", f);
        cr_assert(strstr(info.dli_fname, "liblfgc-malloc"), "operator from %s", info.dli_fname);
    }
}

Test(malloc_cpp, containers)
{
    std::vector<std::string> v;
    std::map<int, std::string> m;
    std::unordered_map<std::string, int> u;
    std::list<std::vector<int>> l;
    std::deque<long> d;
    for (int i = 0; i < 20000; i++) {
        std::string s = "string number " + std::to_string(i) + std::string(i % 50, 'x');
        v.push_back(s);
        m[i] = s;
        u[s] = i;
        l.push_back(std::vector<int>(i % 100, i));
        d.push_front(i);
    }
    cr_assert(ours(v.data()), "vector storage %p not from lfgc", (void *)v.data());
    cr_assert(ours(v[19999].data()), "string storage not from lfgc");
    for (int i = 0; i < 20000; i++) {
        std::string s = "string number " + std::to_string(i) + std::string(i % 50, 'x');
        cr_assert(v[i] == s && m[i] == s && u[s] == i && d[19999 - i] == i);
    }
    long sum = 0;
    for (auto &x : l)
        for (int y : x)
            sum += y;
    long want = 0;
    for (int i = 0; i < 20000; i++)
        want += (long)(i % 100) * i;
    cr_assert_eq(sum, want);
    auto sp = std::make_shared<std::vector<double>>(1000, 2.5);
    cr_assert_eq((*sp)[999], 2.5);
    v.clear();
    v.shrink_to_fit();
    m.clear();
    u.clear();
    l.clear();
}

struct alignas(64) line {
    char c[64];
};
struct alignas(4096) page {
    char c[100];
};
struct sized {
    long a[7];
};

Test(malloc_cpp, every_new_and_delete)
{
    int *a = new int(5);
    cr_assert(ours(a) && *a == 5);
    delete a;
    int *b = new int[1000]();
    cr_assert(ours(b) && b[999] == 0);
    delete[] b;
    sized *s = new sized();                 // sized delete (-fsized-deallocation)
    cr_assert(ours(s));
    delete s;
    sized *sa = new sized[10];
    delete[] sa;
    int *c = new (std::nothrow) int(7);
    cr_assert(ours(c) && *c == 7);
    ::operator delete(c, std::nothrow);
    int *d = new (std::nothrow) int[10];
    cr_assert(ours(d));
    ::operator delete[](d, std::nothrow);
    line *l = new line;
    cr_assert(ours(l) && (uintptr_t)l % 64 == 0, "aligned new: %p", (void *)l);
    delete l;
    line *la = new line[7];
    cr_assert((uintptr_t)la % 64 == 0);
    delete[] la;
    page *p = new page;
    cr_assert(ours(p) && (uintptr_t)p % 4096 == 0, "aligned new: %p", (void *)p);
    delete p;
    page *pa = new (std::nothrow) page[3];
    cr_assert((uintptr_t)pa % 4096 == 0);
    delete[] pa;
    void *e = ::operator new(100, std::align_val_t(256));
    cr_assert(ours(e) && (uintptr_t)e % 256 == 0);
    ::operator delete(e, std::align_val_t(256));
    e = ::operator new[](100, std::align_val_t(512));
    cr_assert((uintptr_t)e % 512 == 0);
    ::operator delete[](e, std::align_val_t(512));
    e = ::operator new(100, std::align_val_t(128), std::nothrow);
    cr_assert((uintptr_t)e % 128 == 0);
    ::operator delete(e, std::align_val_t(128), std::nothrow);
    e = ::operator new[](100, std::align_val_t(128), std::nothrow);
    ::operator delete[](e, std::align_val_t(128), std::nothrow);
    e = ::operator new(100, std::align_val_t(64));
    ::operator delete(e, 100, std::align_val_t(64));
    e = ::operator new[](100, std::align_val_t(64));
    ::operator delete[](e, 100, std::align_val_t(64));
    e = ::operator new(100);
    ::operator delete(e, 100);
    e = ::operator new[](100);
    ::operator delete[](e, 100);
}

static int handler_calls;
static void handler(void)
{
    handler_calls++;
    std::set_new_handler(nullptr);   // next failure throws
}

static volatile size_t huge_size = (size_t)1 << 50;

// Whether operator new of huge_size bytes (aligned to align, if not 0)
// throws std::bad_alloc.
static bool new_of_huge_throws(size_t align = 0)
{
    try {
        if (align) {
            void *p = ::operator new(huge_size, std::align_val_t(align));
            ::operator delete(p, std::align_val_t(align));
        } else {
            void *p = ::operator new(huge_size);
            ::operator delete(p);
        }
    } catch (const std::bad_alloc &) {
        return true;
    }
    return false;
}

Test(malloc_cpp, failure_throws_and_calls_the_handler)
{
    cr_assert(new_of_huge_throws(), "operator new of 2^50 bytes did not throw std::bad_alloc");
    handler_calls = 0;
    std::set_new_handler(handler);
    bool thrown = false;
    try {
        void *p = ::operator new[](huge_size);
        ::operator delete[](p);
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    cr_assert(thrown && handler_calls == 1, "thrown %d, handler called %d times", thrown,
              handler_calls);
    cr_assert_null(::operator new(huge_size, std::nothrow));
    cr_assert_null(::operator new[](huge_size, std::align_val_t(64), std::nothrow));
    handler_calls = 0;
    std::set_new_handler(handler);
    cr_assert_null(::operator new(huge_size, std::nothrow));
    cr_assert_eq(handler_calls, 1, "nothrow new: handler called %d times", handler_calls);
    cr_assert(new_of_huge_throws(32), "aligned operator new did not throw");
}

// A new handler may throw std::bad_alloc; a nothrow new then returns
// NULL ([new.delete.single]: it calls operator new(size) and returns NULL
// if that does not return normally).  The exception must not escape a
// nothrow (noexcept) operator, where it would end in std::terminate.
static int throwing_calls;
static void throwing_handler(void)
{
    throwing_calls++;
    throw std::bad_alloc();
}

Test(malloc_cpp, nothrow_new_returns_null_when_the_handler_throws)
{
    std::set_new_handler(throwing_handler);
    throwing_calls = 0;
    cr_assert_null(::operator new(huge_size, std::nothrow));
    cr_assert_null(::operator new[](huge_size, std::nothrow));
    cr_assert_null(::operator new(huge_size, std::align_val_t(64), std::nothrow));
    cr_assert_null(::operator new[](huge_size, std::align_val_t(64), std::nothrow));
    cr_assert_eq(throwing_calls, 4, "the handler ran %d times for 4 failures", throwing_calls);
    bool thrown = new_of_huge_throws();
    cr_assert(thrown && throwing_calls == 5, "plain new: thrown %d, handler calls %d", thrown,
              throwing_calls);
    std::set_new_handler(nullptr);
    int *ok = new (std::nothrow) int(3);
    cr_assert(ours(ok) && *ok == 3, "nothrow new of an int after the failures");
    delete ok;
}
