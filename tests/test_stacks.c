/* test_stacks.c: what the collector scans of the collecting thread's
 * stack, and of a stack that is not a thread's own.
 *
 * The collector's own frames (between the program's frame and the
 * collection, and the dead ones below the program's stack pointer) hold
 * stale words: padding slots it never wrote, span and object addresses.
 * None of them may retain anything: a list rotated for ever (constant
 * live size) keeps its heap bounded, and a program frame pushed over the
 * collector's dead frames finds nothing there.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <time.h>
#include <ucontext.h>

TestSuite(stacks, .init = tu_warm_up);

/* ------------------------------------------------------------------ */
/* A rotated list: constant live size, no growth                        */

/* A circular doubly linked list rotated step by step: unlink the first
 * node, append a new one.  Every unlinked node still points to the node
 * unlinked after it: one stale word pointing to an early one retains all
 * the unlinked nodes since, a chain that grows with every step. */
struct rnode {
    struct rnode *next, *prev;
    uint64_t id, check;
};

static struct rnode *volatile rot_head;

static uint64_t rot_check(uint64_t id)
{
    return tu_pattern(id, 1);
}

static TU_NOINLINE struct rnode *rot_new(uint64_t id)
{
    struct rnode *x = GC_malloc(sizeof *x);
    cr_assert_not_null(x);
    x->id = id;
    x->check = rot_check(id);
    return x;
}

static TU_NOINLINE void rot_append(struct rnode *h, struct rnode *x)
{
    x->next = h;
    x->prev = h->prev;
    h->prev->next = x;
    h->prev = x;
}

static TU_NOINLINE void rot_build(size_t n)
{
    struct rnode *h = rot_new(0);
    h->next = h->prev = h;
    rot_head = h;
    for (size_t i = 1; i <= n; i++)
        rot_append(h, rot_new(i));
}

/* Rotate `steps` times; returns the largest live size that a full
 * collection triggered by this allocation found (minor ones count the
 * garbage they promoted as live). */
static TU_NOINLINE uint64_t rot_run(size_t n, size_t steps)
{
    struct rnode *h = rot_head;
    struct lfgc_stats st;
    lfgc_get_stats(&st);
    uint64_t seen = st.collections, minors = st.minor_collections, max_live = 0;
    for (size_t i = 0; i < steps; i++) {
        struct rnode *old = h->next;
        h->next = old->next;
        old->next->prev = h;
        rot_append(h, rot_new(n + 1 + i));
        if (GC_get_gc_no() != seen) {
            lfgc_get_stats(&st);
            if (st.minor_collections == minors && st.live_bytes > max_live)
                max_live = st.live_bytes;
            seen = st.collections;
            minors = st.minor_collections;
        }
    }
    return max_live;
}

/* Ids n+1+steps-n .. n+steps in order after the head, checks intact. */
static TU_NOINLINE size_t rot_verify(size_t n, size_t steps)
{
    struct rnode *h = rot_head;
    size_t k = 0;
    for (struct rnode *x = h->next; x != h; x = x->next, k++) {
        uint64_t id = steps + 1 + k;
        if (k >= n || x->id != id || x->check != rot_check(id) || x->next->prev != x ||
            !lfgc_is_live(x))
            return k;
    }
    return k;
}

Test(stacks, rotated_list_keeps_a_bounded_heap)
{
    const size_t n = 20000, steps = 1500000;
    rot_build(n);
    uint64_t collections = GC_get_gc_no();
    uint64_t max_live = rot_run(n, steps);
    cr_assert_gt(GC_get_gc_no() - collections, 3, "the rotation must trigger collections");
    cr_assert_eq(rot_verify(n, steps), n, "the list lost or garbled a node");
    /* The list: n + 1 nodes of the 48-byte class.  Any stale word into
     * the chain of unlinked nodes makes this grow with the steps (about
     * 90 MiB of 100 MiB allocated, before the fix). */
    uint64_t list = (n + 1) * lowfat_size((void *)rot_head);
    uint64_t bound = tu_base_stats.live_bytes + 2 * list + (1 << 20);
    cr_assert_gt(max_live, 0, "no full collection was triggered by allocation");
    cr_assert_leq(max_live, bound,
                  "a full collection found %llu bytes live, list %llu: stale stack words "
                  "retain the unlinked nodes", (unsigned long long)max_live,
                  (unsigned long long)list);
    rot_head = NULL;
}

/* ------------------------------------------------------------------ */
/* The collector's dead frames retain nothing                           */

/* A chain of objects, rooted here while the collector traces it; its
 * nodes' addresses then lie in the collector's dead frames below. */
#define CHAIN_LEN 64
static void *volatile chain_root;
static GC_hidden_pointer chain_nodes[CHAIN_LEN];

static TU_NOINLINE void chain_build(void)
{
    void **prev = NULL;
    for (int i = CHAIN_LEN - 1; i >= 0; i--) {
        void **p = GC_malloc(64);
        cr_assert_not_null(p);
        p[0] = prev;
        chain_nodes[i] = tu_hide(p);
        prev = p;
    }
    chain_root = prev;
}

static TU_NOINLINE int chain_live_count(void)
{
    int n = 0;
    for (int i = 0; i < CHAIN_LEN; i++)
        n += tu_live(chain_nodes[i]);
    return n;
}

/* A frame as programs have them: an array of which only a part is
 * written, pushed where the collector's frames were. */
static TU_NOINLINE void collect_under_unwritten_frame(void)
{
    volatile uintptr_t pad[2048];
    pad[0] = 0;
    __asm__ volatile("" : : "r"(pad) : "memory");
    GC_gcollect();
    __asm__ volatile("" : : "r"(pad) : "memory");
}

Test(stacks, dead_collector_frames_retain_nothing)
{
    GC_disable();
    chain_build();
    GC_enable();
    cr_assert_eq(chain_live_count(), CHAIN_LEN);
    /* What checking left on the stack goes; then nothing but the
     * collector's frames touches the chain's addresses. */
    tu_clear_stack();
    for (int i = 0; i < 4; i++)
        GC_gcollect();              /* the marker's frames hold chain nodes */
    chain_root = NULL;
    collect_under_unwritten_frame();
    cr_assert_eq(chain_live_count(), 0,
                 "%d chain nodes retained by words the collector left on the stack",
                 chain_live_count());
}

/* ------------------------------------------------------------------ */
/* A coroutine whose stack is a heap object                             */

/* A collection while a thread runs on a stack the collector allocated:
 * the stack is scanned to the end of that object, not of its region's
 * mapping (32 GiB, minutes to read). */

#define CO_NODES 2000
static ucontext_t co_main_ctx, co_ctx;
static char *co_stack_top;
static int co_set_bottom;                   /* the bdwgc way: GC_set_stackbottom */
static size_t co_bad;
static double co_seconds;
static GC_hidden_pointer co_garbage, co_garbage_target;

struct co_node {
    struct co_node *next;
    uint64_t id, check;
};

static TU_NOINLINE struct co_node *co_build(void)
{
    struct co_node *l = NULL;
    for (uint64_t i = 0; i < CO_NODES; i++) {
        struct co_node *p = GC_malloc(sizeof *p);
        cr_assert_not_null(p);
        p->next = l;
        p->id = i;
        p->check = tu_pattern(i, 7);
        l = p;
    }
    return l;
}

static TU_NOINLINE size_t co_verify(const struct co_node *l)
{
    size_t bad = 0;
    uint64_t i = CO_NODES;
    for (; l; l = l->next) {
        i--;
        if (l->id != i || l->check != tu_pattern(i, 7) || !lfgc_is_live(l))
            bad++;
    }
    return bad + (i != 0);
}

static void co_body(void)
{
    struct GC_stack_base saved, sb = { co_stack_top };
    void *me = NULL;
    if (co_set_bottom) {
        me = GC_get_my_stackbottom(&saved);
        GC_set_stackbottom(me, &sb);
    }
    /* Held only by this stack (and its registers). */
    struct co_node *l = co_build();
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    GC_gcollect();
    clock_gettime(CLOCK_MONOTONIC, &b);
    co_seconds = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    co_bad = co_verify(l);
    __asm__ volatile("" : : "r"(l) : "memory");
    if (co_set_bottom)
        GC_set_stackbottom(me, &saved);
    swapcontext(&co_ctx, &co_main_ctx);
}

/* Garbage that only memory past the end of the stack object points to:
 * a heap object of the stack's class (likely its neighbour) holding the
 * address of another. */
static TU_NOINLINE void co_make_garbage(size_t size)
{
    void **g = GC_malloc(size);
    cr_assert_not_null(g);
    void *t = GC_malloc(64);
    cr_assert_not_null(t);
    g[0] = t;
    g[size / 8 - 1] = t;
    co_garbage = tu_hide(g);
    co_garbage_target = tu_hide(t);
}

static TU_NOINLINE void co_run_on(char *stk, size_t size, int set_bottom)
{
    GC_disable();
    co_make_garbage(size);
    GC_enable();
    co_stack_top = stk + size;
    co_set_bottom = set_bottom;
    getcontext(&co_ctx);
    co_ctx.uc_stack.ss_sp = stk;
    co_ctx.uc_stack.ss_size = size;
    co_ctx.uc_link = &co_main_ctx;
    makecontext(&co_ctx, co_body, 0);
    swapcontext(&co_main_ctx, &co_ctx);
    /* The contexts are globals, so roots, and getcontext saves the
     * caller-saved registers too: whatever the last call left in r8 (say,
     * the garbage's target, from the allocator) would be retained. */
    memset(&co_main_ctx, 0, sizeof co_main_ctx);
    memset(&co_ctx, 0, sizeof co_ctx);
}

static TU_NOINLINE void co_run(size_t size, int set_bottom)
{
    char *stk = GC_malloc_uncollectable(size);
    cr_assert_not_null(stk);
    co_run_on(stk, size, set_bottom);
    GC_free(stk);
}

/* Before: the first collection read the 32 GiB region (the timeout). */
Test(stacks, coroutine_on_heap_stack_scans_that_object, .timeout = 15)
{
    co_run(256 * KiB, 0);
    cr_assert_eq(co_bad, 0, "%zu nodes held by the coroutine's stack lost or garbled", co_bad);
    cr_assert_lt(co_seconds, 2.0, "the collection took %.3f s", co_seconds);
    tu_collect();
    cr_assert(!tu_live(co_garbage), "garbage past the stack object retained");
    cr_assert(!tu_live(co_garbage_target), "garbage past the stack object retained");
}

Test(stacks, coroutine_with_stack_bottom_set, .timeout = 15)
{
    co_run(256 * KiB, 1);
    cr_assert_eq(co_bad, 0, "%zu nodes held by the coroutine's stack lost or garbled", co_bad);
    cr_assert_lt(co_seconds, 2.0, "the collection took %.3f s", co_seconds);
    tu_collect();
    cr_assert(!tu_live(co_garbage), "garbage past the stack object retained");
    cr_assert(!tu_live(co_garbage_target), "garbage past the stack object retained");
}

/* A small heap stack with its bottom set: the collector knows the stack
 * from the object's base up, and what it clears of the stack after a
 * collection stays inside it.  (Taking the region's start for the stack's
 * low end, it cleared the end of the object below.) */
Test(stacks, small_heap_stack_neighbours_intact, .timeout = 15)
{
    enum { N = 6 };
    const size_t size = 16 * KiB - 1;       /* one 16 KiB slot each */
    char *o[N];
    for (int i = 0; i < N; i++) {
        o[i] = GC_malloc_uncollectable(size);
        cr_assert_not_null(o[i]);
    }
    /* A stack with a neighbour just below it. */
    int s = -1;
    for (int i = 0; i < N && s < 0; i++)
        for (int j = 0; j < N; j++)
            if (o[j] + lowfat_size(o[i]) == o[i])
                s = i;
    cr_assert_geq(s, 0, "no two adjacent 16 KiB objects");
    for (int i = 0; i < N; i++)
        if (i != s)
            tu_fill_bytes(o[i], size, (uint64_t)i);
    co_run_on(o[s], size, 1);
    cr_assert_eq(co_bad, 0, "%zu nodes held by the coroutine's stack lost or garbled", co_bad);
    for (int i = 0; i < N; i++)
        if (i != s)
            cr_assert_eq(tu_check_bytes(o[i], size, (uint64_t)i), size,
                         "object %d, next to the stack, was overwritten at byte %zu", i,
                         tu_check_bytes(o[i], size, (uint64_t)i));
    for (int i = 0; i < N; i++)
        GC_free(o[i]);
}
