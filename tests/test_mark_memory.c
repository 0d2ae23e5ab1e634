/* test_mark_memory.c: the memory marking itself uses stays small.
 *
 *   shared_work_stays_small   parallel markers on one core, a rotating ring
 *                             list: the packets of work marker 0 hands to a
 *                             helper that cannot run yet do not pile up (each
 *                             is a page), live data intact, garbage freed
 */
#include "test_util.h"

#include <sched.h>

/* Anonymous resident memory outside lfgc's heap: marking's stacks and
 * packets, the library's tables, the program's stacks.  In bytes. */
static size_t anon_rss_outside_heap(void)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert(f, "cannot read /proc/self/smaps");
    char line[512];
    size_t total = 0;
    bool counted = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        int name_at = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &name_at) == 3) {
            const char *name = line + name_at;
            counted = (*name == '\n' || *name == 0) && !lowfat_is_ptr((void *)lo);
            continue;
        }
        unsigned long kb;
        if (counted && sscanf(line, "Rss: %lu kB", &kb) == 1)
            total += kb << 10;
    }
    fclose(f);
    return total;
}

/* A ring of doubly linked nodes: marking it goes round both ways, and
 * marker 0's stack (shared from) grows with the ring. */
#define NODES 100000
struct node { struct node *next, *prev; uint64_t value, pad[3]; };

static struct node *volatile ring;

static TU_NOINLINE void build(void)
{
    struct node *h = GC_MALLOC(sizeof *h);
    cr_assert(h);
    h->next = h->prev = h;
    for (size_t i = 0; i < NODES; i++) {
        struct node *x = GC_MALLOC(sizeof *x);
        cr_assert(x);
        x->value = tu_mix(i);
        x->next = h;
        x->prev = h->prev;
        h->prev->next = x;
        h->prev = x;
    }
    ring = h;
}

/* Unlink the first node and append a new one with the same value, `steps`
 * times: the collections come from allocation, and unlinked nodes chain to
 * each other (garbage that minor collections may keep). */
static TU_NOINLINE void rotate(size_t steps)
{
    struct node *h = ring;
    for (size_t i = 0; i < steps; i++) {
        struct node *old = h->next;
        h->next = old->next;
        old->next->prev = h;
        struct node *x = GC_MALLOC(sizeof *x);
        cr_assert(x);
        x->value = old->value;
        x->next = h;
        x->prev = h->prev;
        h->prev->next = x;
        h->prev = x;
    }
}

static TU_NOINLINE uint64_t sum(void)
{
    uint64_t s = 0;
    size_t n = 0;
    for (struct node *x = ring->next; x != ring; x = x->next, n++)
        s += x->value;
    cr_assert_eq(n, NODES, "ring has %zu nodes", n);
    return s;
}

static TU_NOINLINE GC_hidden_pointer garbage(void)
{
    void *g = GC_MALLOC(64);
    for (int i = 0; i < 1000; i++)
        (void)GC_MALLOC(64);
    return tu_hide(g);
}

static void one_core_two_markers(void)
{
    /* The helper and marker 0 share a core: while marker 0 runs, the
     * helper waits, idle, and takes nothing. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
    setenv("GC_MARKERS", "2", 1);
    GC_INIT();
}

Test(mark_memory, shared_work_stays_small, .init = one_core_two_markers)
{
    build();
    uint64_t expect = 0;
    for (size_t i = 0; i < NODES; i++)
        expect += tu_mix(i);
    GC_hidden_pointer dead = garbage();
    tu_collect();
    tu_collect();
    size_t before = anon_rss_outside_heap();
    rotate(3 * NODES * 10 + 1);
    size_t after = anon_rss_outside_heap();
    cr_assert_eq(sum(), expect, "live data changed");
    cr_assert(!tu_live(dead), "garbage kept");
    /* A few packets per collection at most; shared again and again while
     * the helper could not run, they took 3.7 MB here. */
    cr_assert(after <= before + 512 * KiB,
              "anonymous memory outside the heap grew by %zu KiB while rotating",
              (after - before) >> 10);
}
