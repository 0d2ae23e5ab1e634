// bdwgc_cpp_client.cc: a C++ program written for bdwgc, compiled against
// Debian's gc_cpp.h and gc_allocator.h and linked with -lgccpp -lgc
// (tests/dropin.sh).  Its stdout must be the same on bdwgc and on lfgc's
// libgccpp.so.1 and libgc.so.1.
#include <dlfcn.h>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gc/gc_allocator.h>
#include <gc/gc_cpp.h>

static int destroyed;

class Node : public gc_cleanup {
public:
    explicit Node(unsigned long v) : value(v) {}
    ~Node() { destroyed++; }
    unsigned long value;
};

struct Plain {
    unsigned long words[4];
};

// An object of plain new holding the only reference to collectable memory:
// libgccpp's operator new gives uncollectable memory, which is scanned.
struct Holder {
    char *text;
};

static Holder **__attribute__((noinline)) make_holders(int n)
{
    Holder **hs = new Holder *[n];
    for (int i = 0; i < n; i++) {
        hs[i] = new Holder;
        hs[i]->text = static_cast<char *>(GC_MALLOC_ATOMIC(32));
        std::snprintf(hs[i]->text, 32, "holder %d", i);
    }
    return hs;
}

static void __attribute__((noinline)) churn(int n)
{
    for (int i = 0; i < n; i++)
        std::memset(GC_MALLOC_ATOMIC(32), 'x', 31);
}

static void __attribute__((noinline)) make_garbage(int n)
{
    for (int i = 0; i < n; i++)
        new Node((unsigned long)i);
}

static void __attribute__((noinline)) wipe_stack()
{
    volatile char buf[16384];
    std::memset((char *)buf, 0, sizeof buf);
}

int main()
{
    GC_INIT();
    std::vector<Plain *, gc_allocator<Plain *>> v;
    std::map<int, unsigned long, std::less<int>,
             gc_allocator<std::pair<const int, unsigned long>>> m;
    for (int i = 0; i < 5000; i++) {
        Plain *p = new (UseGC) Plain;
        p->words[0] = (unsigned long)i * 2654435761u;
        v.push_back(p);
        m[i] = p->words[0] ^ 0x5555;
    }
    Plain **rooted = new Plain *[4];     // libgccpp's operator new[]
    rooted[0] = new (UseGC) Plain;
    rooted[0]->words[1] = 42;
    make_garbage(2000);
    Holder **holders = make_holders(1000);
    wipe_stack();
    for (int i = 0; i < 3; i++) {
        GC_gcollect();
        GC_invoke_finalizers();
    }
    churn(200000);
    GC_gcollect();
    churn(200000);
    int lost = 0;
    char want[32];
    for (int i = 0; i < 1000; i++) {
        std::snprintf(want, sizeof want, "holder %d", i);
        lost += std::strcmp(holders[i]->text, want) != 0;
    }
    std::printf("objects held from plain new intact: %s\n", lost ? "no" : "yes");
    int *probe = new int(1);
    std::printf("plain new gives the collector's memory: %s\n", GC_is_heap_ptr(probe) ? "yes" : "no");
    delete probe;
    // A std::string: libstdc++ is a library this program needs, as any C++
    // program does, and it defines operator new too.
    std::string label("done");
    std::printf("%s\n", label.c_str());
    unsigned long sum = 0;
    for (int i = 0; i < 5000; i++)
        sum += v[i]->words[0] ^ m[i];
    std::printf("vector and map intact: %s\n", sum == 5000ul * 0x5555 ? "yes" : "no");
    std::printf("array from operator new[] keeps its target: %s\n",
                rooted[0]->words[1] == 42 ? "yes" : "no");
    std::printf("most gc_cleanup destructors ran: %s\n", destroyed >= 1000 ? "yes" : "no");
    delete[] rooted;
    std::fprintf(stderr, "collector: %s\n",
                 dlsym(RTLD_DEFAULT, "lfgc_get_stats") ? "lfgc" : "bdwgc");
    return 0;
}
