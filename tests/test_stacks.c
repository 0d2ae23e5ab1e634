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
