/* test_mark_memory.c: the memory marking itself uses stays small.
 *
 *   shared_work_stays_small   parallel markers on one core, a rotating ring
 *                             list: the packets of work marker 0 hands to a
 *                             helper that cannot run yet do not pile up (each
 *                             is a page), live data intact, garbage freed
 *   classes_share_first_mark_bits
 *                             objects in 32 classes, a span each: their mark
 *                             bits take no page per class (one table holds
 *                             the first bits of every class)
 *   marks_survive_a_class_outgrowing_the_table
 *                             old objects' marks, carried by minor
 *                             collections, move with the bits of a class that
 *                             grows past that table: none is swept
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

/* One list through objects of 32 small classes (GC_MALLOC adds the extra
 * byte: a request of size - 1 lands in the class of that size). */
#define SPREAD_CLASSES 32
#define SPREAD_PER_CLASS 4
struct spread { struct spread *next; uint64_t value; };

static struct spread *volatile spread_root;

static TU_NOINLINE unsigned spread_build(void)
{
    unsigned classes = 0;
    uint64_t k = 0;
    for (unsigned c = 0; c < TU_NUM_SMALL_CLASSES && classes < SPREAD_CLASSES; c++) {
        if (!tu_class_exists(c) || tu_class_sizes[c] < 2 * sizeof(struct spread))
            continue;
        classes++;
        for (unsigned i = 0; i < SPREAD_PER_CLASS; i++) {
            struct spread *x = GC_MALLOC(tu_class_sizes[c] - 1);
            cr_assert(x);
            x->value = tu_mix(k++);
            x->next = spread_root;
            spread_root = x;
        }
    }
    return classes;
}

static TU_NOINLINE uint64_t spread_sum(size_t *n)
{
    uint64_t s = 0;
    *n = 0;
    for (struct spread *x = spread_root; x; x = x->next, ++*n)
        s += x->value;
    return s;
}

Test(mark_memory, classes_share_first_mark_bits)
{
    GC_INIT();
    tu_collect();
    size_t before = anon_rss_outside_heap();
    unsigned classes = spread_build();
    cr_assert_geq(classes, 24, "only %u small classes", classes);
    GC_hidden_pointer dead = garbage();
    tu_collect();
    tu_collect();
    size_t after = anon_rss_outside_heap();
    size_t n;
    uint64_t got = spread_sum(&n);
    cr_assert_eq(n, (size_t)classes * SPREAD_PER_CLASS, "list has %zu objects", n);
    uint64_t expect = 0;
    for (size_t i = 0; i < n; i++)
        expect += tu_mix(i);
    cr_assert_eq(got, expect, "live data changed");
    cr_assert(!tu_live(dead), "garbage kept");
    /* A page of the chunk map per class (its first chunks' entries), and
     * a few of the shared table; a bitmap of its own per class added
     * another page each (8 KiB a class). */
    size_t grew = after > before ? after - before : 0;
    cr_log_info("%u classes: anonymous memory outside the heap grew by %zu KiB",
                classes, grew >> 10);
    cr_assert_leq(grew, classes * 4 * KiB + 96 * KiB,
                  "%u classes with a span each: anonymous memory outside the heap grew by "
                  "%zu KiB", classes, grew >> 10);
}

/* Objects of 96 bytes (requests of 95): the shared table holds the marks
 * of their class's first 4096 slots, 12 chunks.  The old ones are held
 * only by an array of another class: old too, on pages nobody writes,
 * so that a minor collection does not trace it again and only the marks
 * it carries keep them. */
#define GROW_SIZE 95
#define OLD_NODES 2000
#define NEW_NODES 20000
struct grow { struct grow *next; uint64_t value; unsigned char fill[72]; };
_Static_assert(sizeof(struct grow) <= GROW_SIZE, "struct grow: within one request");

static struct grow **volatile old_holder;
static struct grow *volatile new_list;

static TU_NOINLINE struct grow *grow_one(uint64_t i, uint64_t seed)
{
    struct grow *x = GC_MALLOC(GROW_SIZE);
    cr_assert(x);
    x->value = tu_mix(seed + i);
    memset(x->fill, (int)(i & 0xff), sizeof x->fill);
    return x;
}

static TU_NOINLINE void grow_check_one(const struct grow *x, uint64_t i, uint64_t seed)
{
    cr_assert_eq(x->value, tu_mix(seed + i), "object %zu changed", (size_t)i);
    for (size_t k = 0; k < sizeof x->fill; k++)
        cr_assert_eq(x->fill[k], (unsigned char)(i & 0xff), "object %zu: byte %zu changed",
                     (size_t)i, k);
}

static TU_NOINLINE void old_build(void)
{
    struct grow **h = GC_MALLOC(OLD_NODES * sizeof *h);
    cr_assert(h);
    for (size_t i = 0; i < OLD_NODES; i++)
        h[i] = grow_one(i, 0);
    old_holder = h;
}

static TU_NOINLINE void old_check(void)
{
    for (size_t i = 0; i < OLD_NODES; i++)
        grow_check_one(old_holder[i], i, 0);
}

static TU_NOINLINE void new_build(void)
{
    for (size_t i = 0; i < NEW_NODES; i++) {
        struct grow *x = grow_one(i, OLD_NODES);
        x->next = new_list;
        new_list = x;
    }
}

static TU_NOINLINE void new_check(void)
{
    size_t i = NEW_NODES;
    for (const struct grow *x = new_list; x; x = x->next) {
        cr_assert(i > 0, "list longer than %d", NEW_NODES);
        grow_check_one(x, --i, OLD_NODES);
    }
    cr_assert_eq(i, 0, "list shorter than %d (%zu missing)", NEW_NODES, i);
}

static TU_NOINLINE GC_hidden_pointer grow_garbage(size_t n)
{
    void *first = NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char *g = GC_MALLOC(GROW_SIZE);
        cr_assert(g);
        memset(g, 0xa5, GROW_SIZE);
        if (!first)
            first = g;
    }
    return tu_hide(first);
}

Test(mark_memory, marks_survive_a_class_outgrowing_the_table)
{
    GC_INIT();
    TU_NEED_MINOR();
    old_build();
    /* Marked by a full collection, then old to the minor ones. */
    tu_collect();
    tu_collect_minor();
    tu_collect_minor();
    /* The class grows well past the table's 12 chunks; minor collections
     * carry the old objects' marks through the move. */
    new_build();
    cr_assert(tu_collect_minor(), "no minor collection");
    /* Slots wrongly found free would be handed out and overwritten. */
    GC_hidden_pointer dead = grow_garbage(50000);
    cr_assert(tu_collect_minor(), "no minor collection");
    (void)grow_garbage(50000);
    old_check();
    new_check();
    tu_collect();
    cr_assert(!tu_live(dead), "garbage kept");
    old_check();
}
