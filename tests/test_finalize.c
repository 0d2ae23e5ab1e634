/* test_finalize.c: finalizers, disappearing links and toggle references.
 *
 * Every test checks both sides: what must be finalized or cleared is,
 * exactly once, and what must stay alive is intact (its contents are a
 * pattern derived from an id, checked word by word).  Objects are made
 * and revealed only in noinline helpers; the test bodies hold hidden
 * pointers (see test_util.h).
 */
#define GC_THREADS 1
#include "test_util.h"
#include "gc_mark.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>

TestSuite(fin, .init = tu_warm_up);

/* A finalizable node: an id, a pointer, and a checked pattern. */
#define NODE_WORDS 8
struct node {
    uint64_t id;
    struct node *next;
    uint64_t pattern[NODE_WORDS - 2];
};

#define MAX_IDS 4096
static _Atomic int finalized[MAX_IDS];      /* times each id was finalized */
static _Atomic int order[MAX_IDS];          /* ids in the order finalized */
static _Atomic int order_len;
static _Atomic int intact_at_finalization = 1;

static void fill(struct node *n, uint64_t id)
{
    n->id = id;
    for (int j = 0; j < NODE_WORDS - 2; j++)
        n->pattern[j] = tu_pattern(id, (uint64_t)j);
}

static int node_intact(const struct node *n, uint64_t id)
{
    if (n->id != id)
        return 0;
    for (int j = 0; j < NODE_WORDS - 2; j++)
        if (n->pattern[j] != tu_pattern(id, (uint64_t)j))
            return 0;
    return 1;
}

/* Finalizer: counts, records the order, and checks the object and what
 * it points to (through next) are intact. */
static void count_fin(void *obj, void *cd)
{
    struct node *n = obj;
    if ((uint64_t)(uintptr_t)cd != n->id || !node_intact(n, n->id))
        intact_at_finalization = 0;
    for (struct node *m = n->next; m && m != n; m = m->next == n ? NULL : m->next)
        if (!node_intact(m, m->id))
            intact_at_finalization = 0;
    if (n->id < MAX_IDS) {
        finalized[n->id]++;
        order[order_len++] = (int)n->id;
    }
}

static void reset_counts(void)
{
    for (int i = 0; i < MAX_IDS; i++)
        finalized[i] = order[i] = 0;
    order_len = 0;
    intact_at_finalization = 1;
}

typedef void (*register_fn)(void *, GC_finalization_proc, void *, GC_finalization_proc *,
                            void **);

static TU_NOINLINE GC_hidden_pointer new_node(uint64_t id, register_fn reg)
{
    struct node *n = GC_MALLOC(sizeof *n);
    cr_assert(n);
    fill(n, id);
    if (reg)
        reg(n, count_fin, (void *)(uintptr_t)id, NULL, NULL);
    return tu_hide(n);
}

static TU_NOINLINE void link_nodes(GC_hidden_pointer from, GC_hidden_pointer to)
{
    struct node *a = GC_REVEAL_POINTER(from);
    a->next = to ? GC_REVEAL_POINTER(to) : NULL;
}

static TU_NOINLINE int intact(GC_hidden_pointer h, uint64_t id)
{
    return node_intact(GC_REVEAL_POINTER(h), id);
}

/* Roots the test controls: a static array, cleared to drop. */
static void *volatile roots[16];

/* ------------------------------------------------------------------ */
/* Registration                                                         */

static void other_fin(void *obj, void *cd) { (void)obj; (void)cd; }

static TU_NOINLINE void register_and_replace(GC_hidden_pointer h)
{
    void *obj = GC_REVEAL_POINTER(h);
    GC_finalization_proc ofn = other_fin;
    void *ocd = (void *)1;
    GC_register_finalizer(obj, count_fin, (void *)7, &ofn, &ocd);
    cr_assert(ofn == NULL && ocd == NULL, "a first registration reports no old finalizer");
    GC_register_finalizer(obj, other_fin, (void *)9, &ofn, &ocd);
    cr_assert(ofn == count_fin && ocd == (void *)7, "the old finalizer and data are returned");
    GC_register_finalizer(obj, NULL, NULL, &ofn, &ocd);
    cr_assert(ofn == other_fin && ocd == (void *)9, "unregistering returns the last one");
    ofn = other_fin;
    GC_register_finalizer(obj, NULL, NULL, &ofn, &ocd);
    cr_assert(ofn == NULL && ocd == NULL, "nothing left registered");
}

Test(fin, old_finalizer_returned_and_null_unregisters)
{
    reset_counts();
    GC_hidden_pointer h = new_node(1, NULL);
    register_and_replace(h);
    tu_collect();
    tu_collect();
    cr_assert_eq(finalized[1], 0, "an unregistered finalizer ran");
    cr_assert_not(tu_live(h), "the object was not reclaimed");
}

Test(fin, non_heap_object_ignored)
{
    static long not_heap;
    GC_finalization_proc ofn = other_fin;
    void *ocd = (void *)1;
    GC_register_finalizer(&not_heap, count_fin, NULL, &ofn, &ocd);
    cr_assert(ofn == NULL && ocd == NULL);
    ofn = other_fin;
    GC_register_finalizer(&not_heap, NULL, NULL, &ofn, &ocd);
    cr_assert(ofn == NULL, "a non-heap registration was kept");
    ofn = other_fin;
    GC_register_finalizer(NULL, count_fin, NULL, &ofn, &ocd);
    cr_assert(ofn == NULL && ocd == NULL);
}

Test(fin, unreachable_object_finalized_once_then_reclaimed)
{
    reset_counts();
    GC_hidden_pointer h = new_node(3, GC_register_finalizer);
    tu_collect();
    cr_assert_eq(finalized[3], 1, "finalized %d times", finalized[3]);
    cr_assert(intact_at_finalization, "the object was damaged before its finalizer ran");
    tu_collect();
    tu_collect();
    cr_assert_eq(finalized[3], 1, "finalized again");
    cr_assert_not(tu_live(h), "not reclaimed after its finalizer ran");
}

Test(fin, reachable_object_not_finalized)
{
    reset_counts();
    GC_hidden_pointer h = new_node(4, GC_register_finalizer);
    tu_store(&roots[0], h, 0);
    for (int i = 0; i < 3; i++)
        tu_collect();
    cr_assert_eq(finalized[4], 0);
    cr_assert(intact(h, 4));
    roots[0] = NULL;
    tu_collect();
    cr_assert_eq(finalized[4], 1);
}

Test(fin, free_unregisters)
{
    reset_counts();
    GC_hidden_pointer h = new_node(5, GC_register_finalizer);
    GC_free(GC_REVEAL_POINTER(h));
    tu_collect();
    tu_collect();
    cr_assert_eq(finalized[5], 0, "the finalizer of a freed object ran");
}

/* ------------------------------------------------------------------ */
/* Order                                                                */

/* A -> B -> C, all finalizable and unreachable: A, then B, then C, one
 * per collection, each intact when its turn comes. */
Test(fin, chain_finalized_in_order)
{
    reset_counts();
    GC_hidden_pointer a = new_node(10, GC_register_finalizer);
    GC_hidden_pointer b = new_node(11, GC_register_finalizer);
    GC_hidden_pointer c = new_node(12, GC_register_finalizer);
    link_nodes(a, b);
    link_nodes(b, c);
    tu_collect();
    cr_assert_eq(order_len, 1, "%d finalized by the first collection", order_len);
    cr_assert_eq(order[0], 10);
    cr_assert(tu_live(b) && tu_live(c) && intact(b, 11) && intact(c, 12));
    tu_collect();
    cr_assert_eq(order_len, 2);
    cr_assert_eq(order[1], 11);
    cr_assert(intact(c, 12));
    tu_collect();
    cr_assert_eq(order_len, 3);
    cr_assert_eq(order[2], 12);
    cr_assert(intact_at_finalization);
    tu_collect();
    cr_assert_not(tu_live(a) || tu_live(b) || tu_live(c), "the chain was not reclaimed");
}

/* A cycle of finalizable objects is never finalized, and reported. */
Test(fin, cycle_not_finalized_and_reported)
{
    reset_counts();
    tu_warn_reset();
    GC_set_warn_proc(tu_warn_proc);
    GC_hidden_pointer a = new_node(20, GC_register_finalizer);
    GC_hidden_pointer b = new_node(21, GC_register_finalizer);
    link_nodes(a, b);
    link_nodes(b, a);
    tu_collect();
    tu_collect();
    cr_assert_eq(finalized[20] + finalized[21], 0, "a finalizable cycle was finalized");
    cr_assert(tu_live(a) && tu_live(b) && intact(a, 20) && intact(b, 21));
    int reported = 0;
    for (int i = 0; i < tu_warn_count && i < TU_MAX_WARNINGS; i++)
        reported |= strstr(tu_warnings[i].msg, "cycle") != NULL;
    cr_assert(reported, "the cycle was not reported");
}

/* A pointer to itself: a cycle for GC_register_finalizer, nothing for
 * the _ignore_self variant. */
Test(fin, self_pointer_with_and_without_ignore_self)
{
    reset_counts();
    GC_set_warn_proc(tu_warn_proc);
    GC_hidden_pointer a = new_node(30, GC_register_finalizer);
    GC_hidden_pointer b = new_node(31, GC_register_finalizer_ignore_self);
    link_nodes(a, a);
    link_nodes(b, b);
    tu_collect();
    tu_collect();
    cr_assert_eq(finalized[30], 0, "a self-referencing object was finalized");
    cr_assert_eq(finalized[31], 1, "an _ignore_self object was not finalized");
    cr_assert(intact(a, 30));
}

/* No order: A -> B, both _no_order, are finalized by the same collection,
 * and what A reaches is intact when A's finalizer runs. */
Test(fin, no_order_finalizes_together)
{
    reset_counts();
    GC_hidden_pointer a = new_node(40, GC_register_finalizer_no_order);
    GC_hidden_pointer b = new_node(41, GC_register_finalizer_no_order);
    link_nodes(a, b);
    tu_collect();
    cr_assert_eq(finalized[40], 1);
    cr_assert_eq(finalized[41], 1);
    cr_assert(intact_at_finalization);
}

/* _unreachable: not finalized while a _no_order object reaches it. */
Test(fin, unreachable_waits_for_no_order_referrer)
{
    reset_counts();
    GC_hidden_pointer n = new_node(50, GC_register_finalizer_no_order);
    GC_hidden_pointer u = new_node(51, GC_register_finalizer_unreachable);
    link_nodes(n, u);
    tu_collect();
    cr_assert_eq(finalized[50], 1);
    cr_assert_eq(finalized[51], 0, "finalized while a no-order object reached it");
    cr_assert(intact(u, 51));
    tu_collect();
    cr_assert_eq(finalized[51], 1);
}

/* ------------------------------------------------------------------ */
/* Resurrection, allocation in finalizers                               */

static void *volatile resurrected;
static void resurrect_fin(void *obj, void *cd)
{
    count_fin(obj, cd);
    resurrected = obj;
}

static TU_NOINLINE GC_hidden_pointer new_resurrecting_pair(void)
{
    struct node *a = GC_MALLOC(sizeof *a), *b = GC_MALLOC(sizeof *b);
    fill(a, 60);
    fill(b, 61);
    a->next = b;
    GC_register_finalizer(a, resurrect_fin, (void *)60, NULL, NULL);
    return tu_hide(a);
}

static TU_NOINLINE int resurrected_intact(void)
{
    struct node *a = resurrected;
    return a && node_intact(a, 60) && a->next && node_intact(a->next, 61);
}

Test(fin, resurrected_object_and_what_it_reaches_survive)
{
    reset_counts();
    GC_hidden_pointer a = new_resurrecting_pair();
    tu_collect();
    cr_assert_eq(finalized[60], 1);
    for (int i = 0; i < 3; i++) {
        tu_collect();
        cr_assert(resurrected_intact(), "a resurrected object or its referent was freed");
    }
    cr_assert_eq(finalized[60], 1, "finalized twice");
    resurrected = NULL;
    tu_collect();
    tu_collect();
    cr_assert_not(tu_live(a), "the resurrected object was never reclaimed");
}

static _Atomic int allocating_runs;
static void allocating_fin(void *obj, void *cd)
{
    (void)obj;
    (void)cd;
    void *volatile keep = NULL;
    for (int i = 0; i < 20000; i++) {
        void **p = GC_MALLOC(64);
        p[0] = keep;
        keep = p;
    }
    GC_register_finalizer(GC_MALLOC(32), count_fin, NULL, NULL, NULL);
    GC_gcollect();
    allocating_runs++;
}

static TU_NOINLINE void make_allocating(int n)
{
    for (int i = 0; i < n; i++)
        GC_register_finalizer(GC_MALLOC(48), allocating_fin, NULL, NULL, NULL);
}

Test(fin, finalizers_may_allocate_collect_and_register)
{
    make_allocating(10);
    tu_collect();
    for (int i = 0; i < 5 && allocating_runs < 10; i++)
        tu_collect();
    cr_assert_eq(allocating_runs, 10);
}

/* ------------------------------------------------------------------ */
/* On demand, notifier, finalize_all, await                             */

static _Atomic int notified;
static void notifier(void) { notified++; }

Test(fin, on_demand_with_notifier)
{
    reset_counts();
    GC_set_finalize_on_demand(1);
    cr_assert_eq(GC_get_finalize_on_demand(), 1);
    GC_set_finalizer_notifier(notifier);
    cr_assert(GC_get_finalizer_notifier() == notifier);
    new_node(70, GC_register_finalizer);
    new_node(71, GC_register_finalizer);
    tu_collect();
    cr_assert_eq(finalized[70] + finalized[71], 0, "ran without being asked");
    cr_assert_eq(notified, 1, "notifier called %d times", notified);
    cr_assert(GC_should_invoke_finalizers());
    for (int i = 0; i < 100; i++)
        GC_MALLOC(16);
    cr_assert_eq(finalized[70] + finalized[71], 0, "allocation ran them");
    cr_assert_eq(GC_invoke_finalizers(), 2);
    cr_assert_eq(finalized[70], 1);
    cr_assert_eq(finalized[71], 1);
    cr_assert_not(GC_should_invoke_finalizers());
    cr_assert_eq(GC_invoke_finalizers(), 0);
}

Test(fin, finalize_all_runs_reachable_ones)
{
    reset_counts();
    GC_hidden_pointer h = new_node(80, GC_register_finalizer);
    tu_store(&roots[1], h, 0);
    GC_finalize_all();
    cr_assert_eq(finalized[80], 1);
    cr_assert(intact(h, 80));
    tu_collect();
    cr_assert_eq(finalized[80], 1);
}

static _Atomic int awaited;
static void await_proc(void *obj) { (void)obj; awaited++; }

Test(fin, await_proc_sees_each_queued_object)
{
    reset_counts();
    GC_set_await_finalize_proc(await_proc);
    cr_assert(GC_get_await_finalize_proc() == await_proc);
    for (int i = 0; i < 5; i++)
        new_node(90 + (uint64_t)i, GC_register_finalizer);
    tu_collect();
    cr_assert_eq(awaited, 5);
    cr_assert_eq(order_len, 5);
}

/* ------------------------------------------------------------------ */
/* Disappearing links                                                   */

static void *volatile short_link, *volatile long_link;

static TU_NOINLINE GC_hidden_pointer new_linked_finalizable(void)
{
    struct node *n = GC_MALLOC(sizeof *n);
    fill(n, 100);
    GC_register_finalizer(n, count_fin, (void *)100, NULL, NULL);
    short_link = (void *)GC_HIDE_POINTER(n);
    long_link = (void *)GC_HIDE_POINTER(n);
    cr_assert_eq(GC_general_register_disappearing_link((void **)&short_link, n), GC_SUCCESS);
    cr_assert_eq(GC_register_long_link((void **)&long_link, n), GC_SUCCESS);
    return tu_hide(n);
}

Test(fin, short_link_cleared_before_finalization_long_after)
{
    reset_counts();
    GC_hidden_pointer h = new_linked_finalizable();
    tu_collect();
    cr_assert_eq(finalized[100], 1);
    cr_assert_null(short_link, "a short link to a finalized object survived");
    cr_assert_not_null(long_link, "a long link was cleared while its object awaited finalization");
    tu_collect();
    cr_assert_null(long_link, "a long link outlived its object");
    cr_assert_not(tu_live(h));
}

static void *volatile link_a, *volatile link_b, *volatile link_c;

static TU_NOINLINE GC_hidden_pointer new_target(void)
{
    struct node *n = GC_MALLOC(sizeof *n);
    fill(n, 110);
    return tu_hide(n);
}

static TU_NOINLINE int reg_short(void *volatile *link, GC_hidden_pointer h)
{
    *link = (void *)GC_HIDE_POINTER(GC_REVEAL_POINTER(h));
    return GC_general_register_disappearing_link((void **)link, GC_REVEAL_POINTER(h));
}

Test(fin, link_return_codes_move_and_unregister)
{
    GC_hidden_pointer t = new_target();
    tu_store(&roots[2], t, 0);
    cr_assert_eq(reg_short(&link_a, t), GC_SUCCESS);
    cr_assert_eq(reg_short(&link_a, t), GC_DUPLICATE);
    cr_assert_eq(reg_short(&link_c, t), GC_SUCCESS);
    cr_assert_eq(GC_move_disappearing_link((void **)&link_a, (void **)&link_a), GC_SUCCESS,
                 "moving a link onto itself checks it is registered");
    cr_assert_eq(GC_move_disappearing_link((void **)&link_b, (void **)&link_b), GC_NOT_FOUND);
    cr_assert_eq(GC_move_disappearing_link((void **)&link_a, (void **)&link_c), GC_DUPLICATE);
    cr_assert_eq(GC_move_disappearing_link((void **)&link_a, (void **)&link_b), GC_SUCCESS);
    cr_assert_eq(GC_move_disappearing_link((void **)&link_a, (void **)&link_b), GC_NOT_FOUND);
    cr_assert_eq(GC_unregister_disappearing_link((void **)&link_c), 1);
    cr_assert_eq(GC_unregister_disappearing_link((void **)&link_c), 0);
    cr_assert_eq(GC_move_long_link((void **)&link_a, (void **)&link_b), GC_NOT_FOUND,
                 "short and long links are apart");
    /* The moved link (at link_b) clears when its target dies; link_a and
     * link_c, no longer registered, keep their values. */
    link_b = link_a;
    link_c = link_a;
    roots[2] = NULL;
    tu_collect();
    cr_assert_null(link_b, "the moved link was not cleared");
    cr_assert_not_null(link_a);
    cr_assert_not_null(link_c);
    cr_assert_not(tu_live(t));
}

Test(fin, link_to_live_object_kept)
{
    GC_hidden_pointer t = new_target();
    tu_store(&roots[3], t, 0);
    cr_assert_eq(reg_short(&link_a, t), GC_SUCCESS);
    tu_collect();
    tu_collect();
    cr_assert_not_null(link_a);
    cr_assert(intact(t, 110));
    cr_assert_eq(GC_unregister_disappearing_link((void **)&link_a), 1);
}

/* A link inside a heap object that dies goes with it: nothing is written
 * where the object was, and the registration is gone. */
struct holder {
    void *link;
    uint64_t pad[3];
};

static TU_NOINLINE GC_hidden_pointer new_holder(GC_hidden_pointer target)
{
    struct holder *h = GC_MALLOC(sizeof *h);
    h->link = (void *)GC_HIDE_POINTER(GC_REVEAL_POINTER(target));
    cr_assert_eq(GC_general_register_disappearing_link(&h->link, GC_REVEAL_POINTER(target)),
                 GC_SUCCESS);
    return tu_hide(h);
}

static TU_NOINLINE int unregister_at(GC_hidden_pointer h)
{
    struct holder *p = GC_REVEAL_POINTER(h);
    return GC_unregister_disappearing_link(&p->link);
}

Test(fin, link_in_dead_object_dropped)
{
    GC_hidden_pointer t = new_target();
    tu_store(&roots[4], t, 0);
    GC_hidden_pointer h = new_holder(t);
    tu_collect();
    cr_assert_not(tu_live(h));
    cr_assert_eq(unregister_at(h), 0, "the link of a dead object is still registered");
    cr_assert(intact(t, 110));
}

Test(fin, register_disappearing_link_uses_its_object)
{
    GC_hidden_pointer t = new_target();
    GC_hidden_pointer h = new_holder(t);   /* a general link in it: unregister */
    cr_assert_eq(unregister_at(h), 1);
    tu_store(&roots[5], h, 0);
    struct holder *hp = roots[5];
    hp->link = NULL;
    /* GC_register_disappearing_link: cleared when the holder itself dies. */
    cr_assert_eq(GC_register_disappearing_link(&hp->link), GC_SUCCESS);
    static void *not_heap;
    cr_assert_eq(GC_register_disappearing_link(&not_heap), GC_NOT_FOUND);
    hp = NULL;
    tu_collect();
    cr_assert(tu_live(h));
    cr_assert_eq(unregister_at(h), 1, "the link went while its object lived");
}

/* ------------------------------------------------------------------ */
/* Scale and threads                                                    */

#define MANY 1000000
static _Atomic long many_finalized;
static void many_fin(void *obj, void *cd)
{
    uint64_t *p = obj;
    if (p[0] != (uint64_t)(uintptr_t)cd || p[1]++ != 0)
        intact_at_finalization = 0;
    many_finalized++;
}

static TU_NOINLINE void register_many(void **keep, size_t nkeep)
{
    for (uint64_t i = 0; i < MANY; i++) {
        uint64_t *p = GC_MALLOC_ATOMIC(24);
        p[0] = i * 3 + 1;
        p[1] = 0;
        GC_register_finalizer_no_order(p, many_fin, (void *)(uintptr_t)(i * 3 + 1), NULL, NULL);
        if (i % (MANY / nkeep) == 0 && i / (MANY / nkeep) < nkeep)
            keep[i / (MANY / nkeep)] = p;
    }
}

Test(fin, a_million_registrations, .timeout = 120)
{
    static void *volatile kept[1000];
    intact_at_finalization = 1;
    register_many((void **)kept, 1000);
    tu_collect();
    /* Exactly the kept ones stay, give or take a few that stale words in
     * dead stack frames still reach. */
    cr_assert_leq(many_finalized, MANY - 1000, "%ld finalized", (long)many_finalized);
    cr_assert_geq(many_finalized, MANY - 1000 - 16, "%ld finalized", (long)many_finalized);
    cr_assert(intact_at_finalization, "finalized twice, or damaged");
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(*(uint64_t *)kept[i], (uint64_t)i * (MANY / 1000) * 3 + 1);
    memset((void *)kept, 0, sizeof kept);
    tu_collect();
    tu_collect();
    cr_assert_geq(many_finalized, MANY - 16, "%ld finalized", (long)many_finalized);
    cr_assert(intact_at_finalization, "finalized twice, or damaged");
}

/* Tidying the finalizer table after a collection deleted many entries
 * takes no second copy of it: a rebuild into a second table kept as a
 * spare once doubled the table's memory for good (on the finalization
 * workload, 2 of its 10 MiB peak RSS).  Every entry must still be found
 * after the tidy (the entries are packed and the index built anew). */
#define TIDY_N      70000           /* table of 2^18 slots of 32 bytes */
#define TIDY_KEPT   4000
static void *volatile tidy_objs[TIDY_N];
static _Atomic long tidy_finalized, tidy_bad;
static void tidy_fin(void *obj, void *cd)
{
    uint64_t *p = obj;
    if (p[0] != (uint64_t)(uintptr_t)cd || (uintptr_t)cd >= TIDY_KEPT || p[1]++ != 0)
        tidy_bad++;
    else
        tidy_finalized++;
}

static TU_NOINLINE void tidy_register(void)
{
    for (uint64_t i = 0; i < TIDY_N; i++) {
        uint64_t *p = GC_MALLOC_ATOMIC(16);
        cr_assert_not_null(p);
        p[0] = i;
        p[1] = 0;
        GC_register_finalizer_no_order(p, tidy_fin, (void *)(uintptr_t)i, NULL, NULL);
        tidy_objs[i] = p;
    }
}

static TU_NOINLINE void tidy_unregister(void)
{
    for (uint64_t i = TIDY_KEPT; i < TIDY_N; i++)
        GC_register_finalizer_no_order(tidy_objs[i], NULL, NULL, NULL, NULL);
}

/* Every entry found where it should be after the tidy: the kept ones
 * (re-registered, they return their old finalizer and data), not the
 * others.  Returns how many answered right. */
static TU_NOINLINE size_t tidy_lookups(void)
{
    size_t right = 0;
    for (uint64_t i = 0; i < TIDY_N; i++) {
        GC_finalization_proc ofn = NULL;
        void *ocd = NULL;
        GC_register_finalizer_no_order(tidy_objs[i], i < TIDY_KEPT ? tidy_fin : NULL,
                                       (void *)(uintptr_t)i, &ofn, &ocd);
        if (i < TIDY_KEPT ? ofn == tidy_fin && ocd == (void *)(uintptr_t)i : ofn == NULL)
            right++;
    }
    return right;
}

Test(fin, table_tidied_in_place, .timeout = 60)
{
    tidy_register();
    tu_collect();
    tidy_unregister();
    size_t rss = tu_rss_bytes();
    tu_collect();                   /* deletes outnumber a quarter: tidied */
    size_t grown = tu_rss_bytes() > rss ? tu_rss_bytes() - rss : 0;
    cr_assert_lt(grown, (size_t)2 << 20, "the tidy took %zu KiB more", grown >> 10);
    cr_assert_eq(tidy_lookups(), TIDY_N, "an entry was lost or kept by the tidy");
    memset((void *)tidy_objs, 0, sizeof tidy_objs);
    tu_collect();
    tu_collect();
    GC_invoke_finalizers();
    /* The kept finalizers all run (a few objects may stay reachable from
     * stale words), none of the unregistered ones. */
    cr_assert_eq(tidy_bad, 0, "a finalizer ran twice, on a damaged object or unregistered");
    cr_assert_leq(tidy_finalized, TIDY_KEPT);
    cr_assert_geq(tidy_finalized, TIDY_KEPT - 16, "%ld finalized", (long)tidy_finalized);
}

#define THREADS 4
#define PER_THREAD 20000
static _Atomic long thread_fin[THREADS];
static _Atomic long thread_fin_bad;

static void thread_fin_proc(void *obj, void *cd)
{
    uint64_t *p = obj;
    uint64_t t = (uint64_t)(uintptr_t)cd;
    if (p[1] != ~p[0] || t >= THREADS || p[2]++ != 0)
        thread_fin_bad++;
    else
        thread_fin[t]++;
}

static void *thread_body(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    void *volatile keep[64] = { 0 };
    for (uint64_t i = 0; i < PER_THREAD; i++) {
        uint64_t *p = GC_MALLOC(32);
        p[0] = i;
        p[1] = ~i;
        GC_register_finalizer(p, thread_fin_proc, (void *)(uintptr_t)t, NULL, NULL);
        keep[i % 64] = p;
        if (i % 5000 == 0)
            GC_gcollect();
    }
    memset((void *)keep, 0, sizeof keep);
    return NULL;
}

Test(fin, threads_register_and_collect)
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, thread_body, (void *)(uintptr_t)t), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int i = 0; i < 4; i++)
        tu_collect();
    GC_invoke_finalizers();
    cr_assert_eq(thread_fin_bad, 0, "a finalizer ran twice or on a damaged object");
    long total = 0;
    for (int t = 0; t < THREADS; t++)
        total += thread_fin[t];
    /* A few may be kept by stale words in dead stacks; nearly all go. */
    cr_assert_geq(total, (long)THREADS * PER_THREAD - 256, "only %ld of %d finalized", total,
                  THREADS * PER_THREAD);
}

/* ------------------------------------------------------------------ */
/* Minor collections                                                    */

Test(fin, minor_collection_finalizes_young_and_clears_links)
{
    reset_counts();
    tu_collect();
    if (!tu_collect_minor()) {
        /* Say it loudly: the assertions below need minor collections. */
        cr_log_warn("minor collections unavailable (kernel without userfaultfd WP-async)");
        TU_SKIP("minor collections unavailable");
    }
    /* An old target with a link, and a young finalizable object with one. */
    GC_hidden_pointer old_t = new_target();
    tu_store(&roots[6], old_t, 0);
    tu_collect();                               /* old_t is old now */
    cr_assert_eq(reg_short(&link_a, old_t), GC_SUCCESS);
    roots[6] = NULL;
    GC_hidden_pointer young = new_node(120, GC_register_finalizer);
    GC_hidden_pointer young_t = new_target();
    cr_assert_eq(reg_short(&link_b, young_t), GC_SUCCESS);
    struct lfgc_stats before, after;
    lfgc_get_stats(&before);
    cr_assert(tu_collect_minor(), "the collection was not minor");
    lfgc_get_stats(&after);
    cr_assert_gt(after.minor_collections, before.minor_collections);
    GC_invoke_finalizers();
    cr_assert_eq(finalized[120], 1, "a dead young object was not finalized by a minor collection");
    cr_assert_null(link_b, "a link to a dead young object survived a minor collection");
    tu_collect();
    cr_assert_null(link_a, "a link to a dead old object survived a full collection");
    cr_assert_not(tu_live(young));
}

/* ------------------------------------------------------------------ */
/* Toggle references                                                    */

static _Atomic int toggle_state = GC_TOGGLE_REF_STRONG;
static GC_ToggleRefStatus toggle_cb(void *obj)
{
    (void)obj;
    return (GC_ToggleRefStatus)toggle_state;
}

static TU_NOINLINE GC_hidden_pointer new_toggled(void)
{
    struct node *n = GC_MALLOC(sizeof *n);
    fill(n, 130);
    cr_assert_eq(GC_toggleref_add(n, 1), GC_SUCCESS);
    return tu_hide(n);
}

Test(fin, toggle_refs_strong_then_weak)
{
    GC_set_toggleref_func(toggle_cb);
    cr_assert(GC_get_toggleref_func() == toggle_cb);
    GC_hidden_pointer h = new_toggled();
    tu_collect();
    tu_collect();
    cr_assert(tu_live(h) && intact(h, 130), "a strong toggle reference did not keep its object");
    toggle_state = GC_TOGGLE_REF_WEAK;
    tu_collect();
    cr_assert_not(tu_live(h), "a weak toggle reference kept its object");
}

/* ------------------------------------------------------------------ */
/* What stays alive while finalizers wait                               */

/* Objects queued for finalization, and what they reach, survive any
 * number of collections until their finalizers run. */
Test(fin, queued_objects_survive_until_run)
{
    reset_counts();
    GC_set_finalize_on_demand(1);
    GC_hidden_pointer a = new_node(140, GC_register_finalizer);
    GC_hidden_pointer b = new_node(141, NULL);
    link_nodes(a, b);
    tu_collect();
    cr_assert(GC_should_invoke_finalizers());
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 10000; j++)
            (void)GC_MALLOC(48);
        tu_collect();
    }
    cr_assert(tu_live(a) && tu_live(b) && intact(a, 140) && intact(b, 141),
              "a queued object or what it reaches was freed before its finalizer ran");
    cr_assert_eq(GC_invoke_finalizers(), 1);
    cr_assert(intact_at_finalization);
    tu_collect();
    tu_collect();
    cr_assert_not(tu_live(a) || tu_live(b));
}

/* A collection while finalizers run (one collects), that queues more
 * than the queue holds: the queue grows with some of it already run.
 * Growing it used to move its pending part down while the collection
 * held positions in it, so one newly queued object stayed registered as
 * well, and was finalized again by a later collection. */
#define REQ_FIRST 3000
#define REQ_MORE 10000
struct req_obj {
    uint64_t id, check, finalized;
};
static _Atomic long req_runs, req_bad;
static _Atomic int req_collected;

static TU_NOINLINE void req_make(uint64_t from, uint64_t n);

static void req_fin(void *obj, void *cd)
{
    struct req_obj *o = obj;
    if (o->check != ~o->id || o->id != (uint64_t)(uintptr_t)cd || o->finalized++)
        req_bad++;
    req_runs++;
    if (!req_collected++) {
        /* The first one: more dead finalizable objects, then a collection
         * while the rest of the first batch still waits to run. */
        req_make(REQ_FIRST, REQ_MORE);
        tu_collect();
    }
}

static TU_NOINLINE void req_make(uint64_t from, uint64_t n)
{
    for (uint64_t i = from; i < from + n; i++) {
        struct req_obj *o = GC_MALLOC(sizeof *o);
        cr_assert_not_null(o);
        o->id = i;
        o->check = ~i;
        GC_register_finalizer(o, req_fin, (void *)(uintptr_t)i, NULL, NULL);
    }
}

Test(fin, collection_among_running_finalizers_queues_each_once)
{
    GC_set_finalize_on_demand(1);
    req_make(0, REQ_FIRST);
    tu_collect();
    for (int k = 0; k < 4; k++) {
        GC_invoke_finalizers();
        tu_collect();
    }
    GC_invoke_finalizers();
    cr_assert(req_collected, "no finalizer ran");
    cr_assert_eq(req_bad, 0, "%ld finalizers ran twice or on a damaged object", (long)req_bad);
    /* A few objects may stay reachable from stale words. */
    cr_assert_leq(req_runs, REQ_FIRST + REQ_MORE);
    cr_assert_geq(req_runs, REQ_FIRST + REQ_MORE - 16, "%ld finalized", (long)req_runs);
}

/* The queue of a burst of finalization is given back once it is empty
 * and collections queue little: it kept its pages for good (3 MiB here;
 * in bdwgc's disclaim_bench, 2 MiB from its first phase to its end).
 * The finalizers keep their objects (the heap does not shrink), so what
 * the next collection gives back is the queue's. */
#define BURST 100000
static void *burst_kept[BURST];
static _Atomic long burst_runs, burst_bad;

static void burst_fin(void *obj, void *cd)
{
    uint64_t *p = obj;
    if (p[0] != (uint64_t)(uintptr_t)cd || (uintptr_t)cd >= BURST)
        burst_bad++;
    else
        burst_kept[(uintptr_t)cd] = obj;        /* resurrected */
    burst_runs++;
}

static TU_NOINLINE void burst_make(uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t *p = GC_MALLOC_ATOMIC(16);
        cr_assert_not_null(p);
        p[0] = i;
        GC_register_finalizer_no_order(p, burst_fin, (void *)(uintptr_t)i, NULL, NULL);
    }
}

/* A burst of n finalizable objects, collected and finalized: the bytes
 * the collection after it (which queues nothing) gives back. */
static size_t burst_then_given_back(uint64_t n)
{
    burst_make(n);
    tu_collect();
    cr_assert_geq(GC_invoke_finalizers(), n - 16);
    cr_assert_eq(burst_bad, 0);
    size_t before = tu_rss_bytes();
    tu_collect();                       /* queues nothing */
    size_t after = tu_rss_bytes();
    size_t freed = before > after ? before - after : 0;
    cr_log_info("the collection after the burst gave back %zu KiB", freed >> 10);
    return freed;
}

Test(fin, queue_of_a_burst_is_given_back)
{
    GC_set_finalize_on_demand(1);
    size_t freed = burst_then_given_back(BURST);
    cr_assert_geq(freed, (size_t)2 << 20, "only %zu KiB given back", freed >> 10);
    for (uint64_t i = 0; i < BURST; i++)
        if (burst_kept[i])
            cr_assert_eq(*(uint64_t *)burst_kept[i], i, "a resurrected object was damaged");
}

/* A smaller burst, whose queue stays mapped for the next one, gives its
 * pages back too once it is empty: Guile's guardians kept 256 KiB of it
 * resident from their phase to the end of the run.  As many objects stay
 * registered, so that the finalizer table keeps its size: what the
 * collection after the finalizers ran gives back is the queue's. */
#define SMALL_BURST 8000           /* a queue of 8,192 entries, 256 KiB */
static void *small_burst_live[SMALL_BURST];
static void small_burst_live_fin(void *obj, void *cd)
{
    (void)obj;
    (void)cd;
    burst_bad++;                        /* they stay reachable */
}

static TU_NOINLINE void small_burst_register_live(void)
{
    for (uint64_t i = 0; i < SMALL_BURST; i++) {
        uint64_t *p = GC_MALLOC_ATOMIC(16);
        cr_assert_not_null(p);
        p[0] = ~i;
        GC_register_finalizer_no_order(p, small_burst_live_fin, NULL, NULL, NULL);
        small_burst_live[i] = p;
    }
}

Test(fin, queue_of_a_small_burst_gives_its_pages_back)
{
    GC_set_finalize_on_demand(1);
    small_burst_register_live();
    size_t freed = burst_then_given_back(SMALL_BURST);
    /* 188-252 KiB here (the collection may touch 64 KiB of its own),
     * none before */
    cr_assert_geq(freed, (size_t)128 << 10, "only %zu KiB given back", freed >> 10);
    size_t kept = 0;
    for (uint64_t i = 0; i < SMALL_BURST; i++)
        if (burst_kept[i]) {
            cr_assert_eq(*(uint64_t *)burst_kept[i], i, "a resurrected object was damaged");
            kept++;
        }
    cr_assert_geq(kept, SMALL_BURST - 16);
    for (uint64_t i = 0; i < SMALL_BURST; i++)
        cr_assert_eq(*(uint64_t *)small_burst_live[i], ~i, "a live registered object was damaged");
    cr_assert_eq(burst_bad, 0, "a live object was finalized");
}

/* A link table that held many more entries than it does now gives the
 * pages of its columns past the entries back (a weak table that lost
 * most of its keys kept them for good: 170 KiB of Guile's); the links
 * left still work. */
#define LINKS_MANY 16000
#define LINKS_LEFT 4000
static void **link_targets;             /* GC_MALLOC'ed: the targets' root */
static void **link_slots;               /* atomic: the links themselves */

static TU_NOINLINE void links_register(void)
{
    link_targets = GC_MALLOC(LINKS_MANY * sizeof *link_targets);
    link_slots = GC_MALLOC_ATOMIC(LINKS_MANY * sizeof *link_slots);
    cr_assert(link_targets && link_slots);
    for (size_t i = 0; i < LINKS_MANY; i++) {
        uint64_t *t = GC_MALLOC_ATOMIC(16);
        cr_assert_not_null(t);
        t[0] = i;
        link_targets[i] = t;
        link_slots[i] = t;
        cr_assert_eq(GC_general_register_disappearing_link(&link_slots[i], t), GC_SUCCESS);
    }
}

static TU_NOINLINE void links_drop_targets(void)
{
    for (size_t i = 0; i < LINKS_LEFT; i++)
        link_targets[i] = NULL;
}

Test(fin, link_table_gives_back_the_pages_past_its_entries)
{
    links_register();
    tu_collect();
    for (size_t i = LINKS_LEFT; i < LINKS_MANY; i++)
        cr_assert_eq(GC_unregister_disappearing_link(&link_slots[i]), 1);
    size_t before = tu_rss_bytes();
    tu_collect();
    size_t after = tu_rss_bytes();
    size_t freed = before > after ? before - after : 0;
    cr_log_info("%zu KiB given back", freed >> 10);
    cr_assert_geq(freed, (size_t)128 << 10, "only %zu KiB given back", freed >> 10);
    /* The links left clear when their targets go; the others stay. */
    links_drop_targets();
    tu_collect();
    tu_collect();
    size_t cleared = 0;
    for (size_t i = 0; i < LINKS_LEFT; i++)
        cleared += link_slots[i] == NULL;
    cr_assert_geq(cleared, LINKS_LEFT - 16, "only %zu of the links left were cleared", cleared);
    for (size_t i = LINKS_LEFT; i < LINKS_MANY; i++) {
        cr_assert_eq(link_slots[i], link_targets[i], "an unregistered link changed");
        cr_assert_eq(*(uint64_t *)link_targets[i], i, "a live target was damaged");
    }
}

/* Client data is a root until the finalizer has run. */
static _Atomic int cd_intact;
static void cd_fin(void *obj, void *cd)
{
    (void)obj;
    cd_intact = node_intact(cd, 151);
}

static TU_NOINLINE GC_hidden_pointer new_with_cd(void)
{
    struct node *n = GC_MALLOC(sizeof *n), *cd = GC_MALLOC(sizeof *cd);
    fill(n, 150);
    fill(cd, 151);
    GC_register_finalizer(n, cd_fin, cd, NULL, NULL);
    return tu_hide(cd);
}

Test(fin, client_data_is_a_root)
{
    GC_set_finalize_on_demand(1);
    GC_hidden_pointer cd = new_with_cd();
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 10000; j++)
            (void)GC_MALLOC(48);
        tu_collect();
        cr_assert(tu_live(cd) && intact(cd, 151), "client data freed before the finalizer ran");
    }
    cr_assert_eq(GC_invoke_finalizers(), 1);
    cr_assert(cd_intact);
    tu_collect();
    tu_collect();
    cr_assert_not(tu_live(cd), "client data kept after its finalizer ran");
}

/* GC_free of an object holding a link forgets the link: clearing it later
 * would write into whatever reuses the memory. */
static TU_NOINLINE GC_hidden_pointer free_holder_reuse(GC_hidden_pointer target)
{
    GC_hidden_pointer h = new_holder(target);
    GC_free(GC_REVEAL_POINTER(h));
    /* Allocate in that class until the freed slot comes back. */
    GC_disable();
    struct holder *n = NULL;
    for (int i = 0; i < 1000000 && tu_hide(n) != h; i++)
        n = GC_MALLOC(sizeof *n);
    GC_enable();
    cr_assert(tu_hide(n) == h, "the freed slot was not reused (test assumption)");
    n->link = (void *)0x1234;
    return tu_hide(n);
}

static TU_NOINLINE void *holder_link(GC_hidden_pointer h)
{
    return ((struct holder *)GC_REVEAL_POINTER(h))->link;
}

Test(fin, free_of_link_holder_forgets_link)
{
    GC_hidden_pointer t = new_target();
    GC_hidden_pointer n = free_holder_reuse(t);
    tu_store(&roots[7], n, 0);
    tu_collect();                               /* t dies */
    cr_assert_not(tu_live(t));
    cr_assert(holder_link(n) == (void *)0x1234, "a forgotten link was cleared in a reused slot");
}

/* Collections that allocation triggers run finalizers too, in the
 * allocating thread, outside the lock (they allocate here). */
static _Atomic long alloc_fin_runs;
static void alloc_fin(void *obj, void *cd)
{
    (void)obj;
    (void)cd;
    (void)GC_MALLOC(24);
    alloc_fin_runs++;
}

static TU_NOINLINE void churn_finalizable(long n)
{
    for (long i = 0; i < n; i++)
        GC_register_finalizer(GC_MALLOC(64), alloc_fin, NULL, NULL, NULL);
}

Test(fin, allocation_runs_finalizers)
{
    uint64_t gcs = GC_get_gc_no();
    churn_finalizable(200000);
    cr_assert_gt(GC_get_gc_no(), gcs, "no collection ran");
    cr_assert_gt(alloc_fin_runs, 100000, "only %ld finalizers ran during allocation",
                 (long)alloc_fin_runs);
}

/* A finalizer may leave by longjmp (a runtime's exception: neko's are).
 * The thread goes on, and its allocations run finalizers again: the
 * guard against a finalizer's allocations starting others must not stay
 * behind in the frame the longjmp left (it did: none ran on that thread
 * again). */
static jmp_buf escape_to;
static _Atomic int escape_armed;
static _Atomic long escape_runs;

static void escaping_fin(void *obj, void *cd)
{
    (void)cd;
    if (((uint64_t *)obj)[0] != 0xe5cafe)
        intact_at_finalization = 0;
    escape_runs++;
    if (escape_armed) {
        escape_armed = 0;
        longjmp(escape_to, 1);
    }
}

static TU_NOINLINE void churn_escaping(long n)
{
    for (long i = 0; i < n; i++) {
        uint64_t *p = GC_MALLOC(64);
        p[0] = 0xe5cafe;
        GC_register_finalizer(p, escaping_fin, NULL, NULL, NULL);
    }
}

Test(fin, finalizer_leaving_by_longjmp_does_not_stop_finalization)
{
    escape_armed = 1;
    if (setjmp(escape_to) == 0) {
        churn_escaping(200000);
        cr_assert_fail("no finalizer ran during 200000 allocations");
    }
    cr_assert_eq(escape_runs, 1);
    long before = escape_runs;
    churn_escaping(200000);
    cr_assert_gt(escape_runs - before, 100000,
                 "after the longjmp, only %ld finalizers ran during allocation",
                 (long)(escape_runs - before));
    /* Explicitly too, and the lock is free: a collection runs. */
    uint64_t gcs = GC_get_gc_no();
    GC_gcollect();
    cr_assert_gt(GC_get_gc_no(), gcs);
    GC_invoke_finalizers();
    cr_assert(intact_at_finalization);
}

/* A program that finalizes most of what it allocates keeps a small heap:
 * what a collection queues counts as allocated again, the heap does not
 * grow while finalizers are made faster than one per
 * GC_get_allocd_bytes_per_finalizer() bytes, and what a collection queued
 * is not counted as live data by the policy (else minor collections,
 * which cannot free those objects once finalized, as they were marked,
 * seem enough, and the heap grows instead).  Measured against the same
 * churn without finalizers first, which sizes the heap by the same rules
 * (the roots weigh in: 1.5 MB here, 4 MB in the UBSan build): the
 * finalizing churn then needs no more (without the third rule, 1.4 MB
 * more; without the first two, tens of MB). */
static _Atomic long churn_finalized;
static void churn_fin(void *obj, void *cd)
{
    (void)cd;
    if (((uint64_t *)obj)[0] != 0x5eed)
        intact_at_finalization = 0;
    churn_finalized++;
}

/* Each object is kept by a ring of the latest 4096, and a quarter point
 * to the one before: some survive a few collections, and order matters. */
static void *volatile churn_ring[4096];
static GC_word churn_weak[65536];          /* disappearing links, as a weak table */

static TU_NOINLINE void churn_all_finalizable(long n)
{
    uint64_t *prev = NULL;
    for (long i = 0; i < n; i++) {
        uint64_t *p = GC_MALLOC(64);
        p[0] = 0x5eed;
        p[1] = (uint64_t)(uintptr_t)((i & 3) == 0 ? prev : NULL);
        GC_register_finalizer(p, churn_fin, NULL, NULL, NULL);
        churn_ring[i % 4096] = p;
        if ((i & 3) == 1) {
            GC_word *slot = &churn_weak[(i >> 2) % 65536];
            if (*slot)
                GC_unregister_disappearing_link((void **)slot);
            *slot = GC_HIDE_POINTER(p);
            GC_general_register_disappearing_link((void **)slot, p);
        }
        prev = p;
    }
    memset((void *)churn_ring, 0, sizeof churn_ring);
}

static TU_NOINLINE void churn_plain(long n)
{
    uint64_t *prev = NULL;
    for (long i = 0; i < n; i++) {
        uint64_t *p = GC_MALLOC(64);
        p[0] = 0x5eed;
        p[1] = (uint64_t)(uintptr_t)((i & 3) == 0 ? prev : NULL);
        churn_ring[i % 4096] = p;
        prev = p;
    }
    memset((void *)churn_ring, 0, sizeof churn_ring);
}

Test(fin, finalizing_everything_keeps_the_heap_small, .timeout = 120)
{
    cr_assert_eq(GC_get_allocd_bytes_per_finalizer(), 10000);
    intact_at_finalization = 1;
    size_t plain0 = GC_get_heap_size();
    churn_plain(1000000);
    cr_log_info("the churn without finalizers: heap grew by %zu bytes",
                GC_get_heap_size() - plain0);
    size_t before = GC_get_heap_size();
    churn_all_finalizable(1000000);
    size_t grown = GC_get_heap_size() > before ? GC_get_heap_size() - before : 0;
    tu_collect();
    tu_collect();
    cr_assert(intact_at_finalization);
    cr_assert_geq(churn_finalized, 1000000 - 64, "%ld finalized", (long)churn_finalized);
    cr_log_info("heap grew by %zu bytes more", grown);
    cr_assert_leq(grown, MiB / 2, "the heap grew by %zu bytes more", grown);
}

/* An object whose finalizer registers it again, run on demand: Guile's
 * after-collection callbacks, queued by every collection and registered
 * again by the next finalizer run.  The rule that collects rather than
 * grow the heap while finalizable objects are made faster than one per
 * GC_get_allocd_bytes_per_finalizer bytes counts the table's net growth,
 * as bdwgc's does: counted as a registration each time, this one object
 * made a collection of every span the heap grew by.  A child builds a
 * list and counts its collections, with and without such an object. */
static volatile int rearm_due;
static void rearm_notifier(void) { rearm_due = 1; }
static void rearm(void *obj, void *cd)
{
    (void)cd;
    GC_REGISTER_FINALIZER_NO_ORDER(obj, rearm, NULL, NULL, NULL);
}

static TU_NOINLINE void rearmed_object(void)
{
    void **cb = GC_MALLOC_ATOMIC(sizeof(void *));
    cr_assert_not_null(cb);
    GC_REGISTER_FINALIZER_NO_ORDER(cb, rearm, NULL, NULL, NULL);
}

static long collections_building_a_list(bool rearmed)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        GC_set_finalize_on_demand(1);
        GC_set_finalizer_notifier(rearm_notifier);
        if (rearmed)
            rearmed_object();
        tu_collect();
        GC_word gc0 = GC_get_gc_no();
        void **list = NULL;
        for (long i = 0; i < 1000000; i++) {
            void **p = GC_MALLOC(2 * sizeof(void *));
            p[0] = list;
            list = p;
            if (rearm_due) {
                rearm_due = 0;
                GC_invoke_finalizers();
            }
        }
        long n = list ? (long)(GC_get_gc_no() - gc0) : -1;
        if (write(fd[1], &n, sizeof n) != sizeof n)
            _exit(2);
        _exit(0);
    }
    close(fd[1]);
    long n = -1;
    cr_assert_eq(read(fd[0], &n, sizeof n), (ssize_t)sizeof n);
    close(fd[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return n;
}

Test(fin, an_object_registered_again_by_its_finalizer_causes_no_collections)
{
    long plain = collections_building_a_list(false);
    long rearmed = collections_building_a_list(true);
    cr_log_info("collections: %ld without the object, %ld with it", plain, rearmed);
    cr_assert_geq(plain, 1);
    cr_assert_leq(rearmed, plain + 2, "%ld collections with an object its finalizer "
                  "registers again, %ld without", rearmed, plain);
}

/* ------------------------------------------------------------------ */
/* Disclaim procedures and finalized allocation (gc_disclaim.h)         */

#include "gc_disclaim.h"

static _Atomic int closure_runs, closure_bad;
static void closure_proc(void *obj, void *cd)
{
    struct node *n = obj;
    if (cd != (void *)0xc105 || !node_intact(n, n->id) || (n->next && !node_intact(n->next, n->next->id)))
        closure_bad++;
    closure_runs++;
}
static const struct GC_finalizer_closure closure = { closure_proc, (void *)0xc105 };

static TU_NOINLINE GC_hidden_pointer new_finalized(uint64_t id, GC_hidden_pointer next)
{
    struct node *n = GC_finalized_malloc(sizeof *n, &closure);
    cr_assert(n);
    cr_assert(GC_base(n) == (char *)n - sizeof(void *), "GC_base is not one word before");
    fill(n, id);
    n->next = next ? GC_REVEAL_POINTER(next) : NULL;
    return tu_hide(n);
}

static TU_NOINLINE int base_live(GC_hidden_pointer h)
{
    return lfgc_is_live((char *)GC_REVEAL_POINTER(h) - sizeof(void *));
}

Test(fin, finalized_malloc_runs_once_and_reclaims)
{
    GC_init_finalized_malloc();
    GC_hidden_pointer kept = new_finalized(160, 0);
    tu_store(&roots[8], kept, 0);
    GC_hidden_pointer referent = new_target();
    GC_hidden_pointer dead = new_finalized(161, referent);
    /* mark_from_all: what the dead object reaches counts as reachable in
     * that collection, so a short link to it is not cleared then. */
    cr_assert_eq(reg_short(&link_c, referent), GC_SUCCESS);
    tu_collect();
    cr_assert_not_null(link_c, "a link to what a finalized object reaches was cleared early");
    cr_assert_eq(closure_runs, 1, "%d closures ran", closure_runs);
    cr_assert_eq(closure_bad, 0, "the closure saw a damaged object or referent");
    cr_assert_not(base_live(dead), "a finalized object outlived its closure");
    cr_assert(base_live(kept) && intact(kept, 160), "a reachable finalized object was disclaimed");
    tu_collect();
    cr_assert_eq(closure_runs, 1, "a closure ran twice");
    cr_assert_not(tu_live(referent), "what a disclaimed object reached was never reclaimed");
    cr_assert_null(link_c, "the link outlived its object");
    roots[8] = NULL;
    tu_collect();
    cr_assert_eq(closure_runs, 2);
}

/* Garbage that only a disclaim procedure finalizes: a collection keeps
 * it marked until the procedures run after the restart, so the spans it
 * fills looked full, and after each collection the allocation that had
 * asked for it took new memory, although the procedures then freed them
 * all: the heap grew by a step at every collection (bdwgc's
 * disclaim_bench: 38 MiB for 2 MiB live).  Now the freed slots are taken
 * first. */
#define FG_OBJECTS 1000000
static _Atomic long fg_runs, fg_bad;
static void fg_proc(void *obj, void *cd)
{
    uint64_t *p = obj;
    if (cd != (void *)0xf9 || p[0] != ~p[1])
        fg_bad++;
    fg_runs++;
}
static const struct GC_finalizer_closure fg_closure = { fg_proc, (void *)0xf9 };

static TU_NOINLINE size_t fg_churn(void)
{
    size_t peak = 0;
    for (uint64_t i = 0; i < FG_OBJECTS; i++) {
        uint64_t *p = GC_finalized_malloc(48, &fg_closure);
        cr_assert_not_null(p);
        p[0] = i;
        p[1] = ~i;
        if (i % 4096 == 0 && GC_get_heap_size() > peak)
            peak = GC_get_heap_size();
    }
    return peak;
}

Test(fin, finalized_garbage_does_not_grow_the_heap, .timeout = 60)
{
    GC_init_finalized_malloc();
    size_t peak = fg_churn();
    tu_collect();
    cr_assert_eq(fg_bad, 0, "a procedure saw a damaged object");
    cr_assert_geq(fg_runs, FG_OBJECTS - 64, "%ld of %d finalized", (long)fg_runs, FG_OBJECTS);
    cr_assert_leq(fg_runs, FG_OBJECTS);
    cr_assert_lt(peak, (size_t)8 << 20, "the heap reached %zu KiB for no live data", peak >> 10);
}

static _Atomic int disclaim_calls;
static _Atomic int disclaim_keep = 1;
static int keep_disclaim(void *obj)
{
    if (!node_intact(obj, 170))
        closure_bad++;
    disclaim_calls++;
    return disclaim_keep;
}

static TU_NOINLINE GC_hidden_pointer new_of_kind(int kind, GC_hidden_pointer next)
{
    struct node *n = GC_generic_malloc(sizeof *n, kind);
    cr_assert(n);
    fill(n, 170);
    n->next = GC_REVEAL_POINTER(next);
    return tu_hide(n);
}

Test(fin, disclaim_proc_keeps_or_releases)
{
    int kind = (int)GC_new_kind(GC_new_free_list(), GC_DS_LENGTH, 1, 1);
    GC_register_disclaim_proc(kind, keep_disclaim, 0);
    GC_hidden_pointer t = new_target();
    GC_hidden_pointer h = new_of_kind(kind, t);
    tu_collect();
    cr_assert_eq(disclaim_calls, 1, "%d calls", disclaim_calls);
    cr_assert(tu_live(h) && intact(h, 170), "an object its procedure kept was reclaimed");
    cr_assert(tu_live(t) && intact(t, 110), "what a kept object points to was reclaimed");
    disclaim_keep = 0;
    tu_collect();
    cr_assert_eq(disclaim_calls, 2);
    cr_assert_not(tu_live(h), "an object its procedure let go was kept");
    cr_assert_eq(closure_bad, 0);
    tu_warn_reset();
    GC_set_warn_proc(tu_warn_proc);
    GC_register_disclaim_proc(200, keep_disclaim, 0);
    cr_assert_eq(tu_warn_count, 1, "a kind that does not exist was accepted silently");
}

/* bdwgc calls a disclaim procedure on an object its collection left
 * unmarked, before the sweep; a program may mark such an object again in
 * between (GC_set_mark_bit: a weak map's lookup finding its entry), and a
 * procedure tells the two apart with GC_is_marked (bdwgc's weak map
 * tests).  Here the first procedure to run marks the waiting object with
 * the highest address, whose procedure would run last: it must not run,
 * and the object must survive until the next collection. */
#define DM_N 64
static _Atomic int dm_calls, dm_marked_seen, dm_last_calls, dm_set_seen, dm_bad;
static GC_hidden_pointer dm_last;

static int dm_proc(void *obj)
{
    if (!node_intact(obj, 180))
        dm_bad++;
    if (GC_is_marked(obj))
        dm_marked_seen++;
    if (tu_hide(obj) == dm_last) {
        dm_last_calls++;
    } else if (++dm_calls == 1) {
        GC_set_mark_bit(GC_REVEAL_POINTER(dm_last));
        dm_set_seen = GC_is_marked(GC_REVEAL_POINTER(dm_last));
    }
    return 0;
}

static TU_NOINLINE void dm_make(int kind)
{
    uintptr_t last = 0;
    for (int i = 0; i < DM_N; i++) {
        struct node *n = GC_generic_malloc(sizeof *n, kind);
        cr_assert_not_null(n);
        fill(n, 180);
        if ((uintptr_t)n > last)
            last = (uintptr_t)n;
    }
    dm_last = tu_hide((void *)last);
}

Test(fin, disclaim_proc_sees_its_object_unmarked_unless_the_program_marked_it)
{
    int kind = (int)GC_new_kind(GC_new_free_list(), GC_DS_LENGTH, 1, 1);
    GC_register_disclaim_proc(kind, dm_proc, 1);
    dm_make(kind);
    tu_collect();
    cr_assert_eq(dm_calls, DM_N - 1, "%d procedures ran for %d dead objects", (int)dm_calls,
                 DM_N - 1);
    cr_assert_eq(dm_marked_seen, 0, "%d procedures saw their object marked", (int)dm_marked_seen);
    cr_assert_eq(dm_set_seen, 1, "GC_set_mark_bit on a waiting object did not show");
    cr_assert_eq(dm_last_calls, 0, "the procedure of an object marked again ran");
    cr_assert(tu_live(dm_last) && intact(dm_last, 180), "an object marked again was reclaimed");
    tu_collect();
    cr_assert_eq(dm_last_calls, 1, "unreachable at the next collection, its procedure ran %d "
                 "times", (int)dm_last_calls);
    cr_assert_eq(dm_marked_seen, 0);
    cr_assert_not(tu_live(dm_last), "released by its procedure, it was kept");
    cr_assert_eq(dm_bad, 0, "a procedure saw a damaged object");
}
