// bdwgc_cpp_client.cc: a C++ program written for bdwgc, compiled against
// Debian's gc_cpp.h and gc_allocator.h and linked with -lgccpp -lgc
// (tests/dropin.sh).  Its stdout must be the same on bdwgc and on lfgc's
// libgccpp.so.1 and libgc.so.1.
#include <dlfcn.h>
#include <cstdio>
#include <cstring>
#include <map>
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
    wipe_stack();
    for (int i = 0; i < 3; i++) {
        GC_gcollect();
        GC_invoke_finalizers();
    }
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
