/* test_precise.h: helpers shared by the tests of precise kinds (typed and
 * gcj-style objects, whose descriptors name the words that hold pointers).
 *
 *   - A holder object, rooted in tu_holder, gets fresh targets at chosen
 *     words (tu_store_targets); after collections each target must be
 *     live exactly when a word the descriptor names holds it, and intact
 *     (tu_check_targets).  tu_minor_targets does the same across a minor
 *     collection, the holder being old.
 *   - Checksummed lists of nodes that also hold the address of a decoy in
 *     a word the descriptor does not name (struct tu_pnode): the lists
 *     must survive intact, on several threads, and the decoys must go.
 *
 * Include after test_util.h.
 */
#ifndef LFGC_TEST_PRECISE_H
#define LFGC_TEST_PRECISE_H

#include "test_util.h"

/* Bytes of a target object. */
#define TU_TARGET 48

/* The holder under test. */
static void *volatile tu_holder;

/* Store fresh targets (seeds 1000 + word index) at the given words of
 * tu_holder; their hidden addresses go to h[]. */
static TU_NOINLINE void tu_store_targets(size_t n, const size_t *words, GC_hidden_pointer *h)
{
    GC_disable();
    void **o = tu_holder;
    for (size_t i = 0; i < n; i++) {
        void *t = GC_malloc(TU_TARGET);
        cr_assert_not_null(t);
        tu_fill_bytes(t, TU_TARGET, 1000 + words[i]);
        o[words[i]] = t;
        h[i] = tu_hide(t);
    }
    GC_enable();
}

/* Each target's liveness is as expected (kept[i]); the live ones are
 * intact. */
static TU_UNUSED void tu_check_targets(size_t n, const size_t *words, const GC_hidden_pointer *h,
                                       const bool *kept, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(tu_live(h[i]), kept[i], "%s: target at word %zu live %d, expected %d",
                     what, words[i], tu_live(h[i]), kept[i]);
        if (kept[i])
            cr_assert_eq(tu_check_bytes(GC_REVEAL_POINTER(h[i]), TU_TARGET, 1000 + words[i]),
                         TU_TARGET, "%s: target at word %zu damaged", what, words[i]);
    }
}

/* tu_holder (just made) becomes old; then targets are stored in it and a
 * minor collection must keep exactly the expected ones.  Skips, loudly,
 * where minor collections cannot run. */
static TU_UNUSED void tu_minor_targets(size_t n, const size_t *words, const bool *kept)
{
    GC_hidden_pointer h[16];
    cr_assert_leq(n, 16);
    tu_collect();
    if (!tu_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    /* Past the slots the thread's cache held at the last collection,
     * which that collection marked (they count as allocated). */
    for (int i = 0; i < 2000; i++)
        cr_assert_not_null(GC_malloc(TU_TARGET));
    tu_store_targets(n, words, h);
    cr_assert(tu_collect_minor(), "expected a minor collection");
    tu_check_targets(n, words, h, kept, "after a minor collection");
    tu_holder = NULL;
}

/* ------------------------------------------------------------------ */
/* Lists with decoys                                                   */

/* A node: a header word (a gcj vtable, or nothing), next, the address of
 * a decoy (which must not retain it), data and its checksum.  The
 * descriptors name `next` and `data` only. */
struct tu_pnode {
    void *hdr;
    struct tu_pnode *next;
    uintptr_t decoy;
    char *data;
    uint64_t sum;
};
#define TU_PNODE_DATA 40
#define TU_PNODE_BITS ((GC_word)1 << 1 | (GC_word)1 << 3)   /* GC_make_descriptor's */

/* How the test under way allocates a node: alloc(arg) returns one with
 * its header set to hdr. */
struct tu_plist {
    void *(*alloc)(void *arg);
    void *arg;
    void *hdr;
};

static uint64_t tu_data_sum(const char *d)
{
    uint64_t s = 0;
    for (int i = 0; i < TU_PNODE_DATA; i++)
        s = s * 31 + (unsigned char)d[i];
    return s;
}

/* Decoys of a size class of their own (per thread, and apart from the
 * nodes' and the data's classes): a decoy reclaimed by a collection while
 * the list grows leaves a slot that another thread's decoy, or a span
 * that a node of another kind, would take; its hidden address would then
 * look live. */
static __thread size_t tu_decoy_bytes = 150;

/* A list of n nodes; the first 64 decoys' addresses go to decoys[]
 * (hidden). */
static TU_NOINLINE struct tu_pnode *tu_plist_make(const struct tu_plist *pl, size_t n,
                                                  uint64_t seed, GC_hidden_pointer *decoys)
{
    struct tu_pnode *head = NULL;
    for (size_t i = 0; i < n; i++) {
        struct tu_pnode *x = pl->alloc(pl->arg);
        cr_assert_not_null(x);
        cr_assert_eq(x->hdr, pl->hdr);
        x->data = GC_malloc_atomic(TU_PNODE_DATA);
        cr_assert_not_null(x->data);
        tu_fill_bytes(x->data, TU_PNODE_DATA, seed + i);
        x->sum = tu_data_sum(x->data);
        char *decoy = GC_malloc(tu_decoy_bytes);
        cr_assert_not_null(decoy);
        x->decoy = (uintptr_t)decoy;
        if (i < 64)
            decoys[i] = tu_hide(decoy);
        x->next = head;
        head = x;
    }
    return head;
}

/* The list's length, or (size_t)-1 if a node is damaged or its data was
 * reclaimed. */
static TU_NOINLINE size_t tu_plist_intact(const struct tu_plist *pl, const struct tu_pnode *x)
{
    size_t n = 0;
    for (; x; x = x->next, n++)
        if (x->hdr != pl->hdr || tu_data_sum(x->data) != x->sum || !lfgc_is_live(x->data))
            return (size_t)-1;
    return n;
}

static TU_NOINLINE unsigned tu_decoys_live(const GC_hidden_pointer *d, unsigned n)
{
    unsigned live = 0;
    for (unsigned i = 0; i < n; i++)
        live += (unsigned)tu_live(d[i]);
    return live;
}

#define TU_PLIST_THREADS 4
struct tu_plist_worker {
    const struct tu_plist *pl;
    unsigned id;
    size_t nodes;
    size_t bad;
    unsigned decoys;
};

static TU_UNUSED void *tu_plist_worker_main(void *arg)
{
    struct tu_plist_worker *w = arg;
    GC_hidden_pointer decoys[64];
    tu_decoy_bytes = 100 + 200 * w->id;
    for (int round = 0; round < 5; round++) {
        struct tu_pnode *volatile head =
            tu_plist_make(w->pl, w->nodes, w->id * 100000 + round, decoys);
        tu_clear_stack();
        GC_gcollect();
        /* The list is live: its decoys are not. */
        if (tu_plist_intact(w->pl, head) != w->nodes)
            w->bad++;
        w->decoys += tu_decoys_live(decoys, 64);
        head = NULL;
    }
    return NULL;
}

/* TU_PLIST_THREADS threads each build five lists of `nodes` nodes in
 * turn, collecting with each live: every list must be intact, and the
 * decoys of live lists must go. */
static TU_UNUSED void tu_plist_threads(const struct tu_plist *pl, size_t nodes)
{
    struct tu_plist_worker w[TU_PLIST_THREADS];
    pthread_t t[TU_PLIST_THREADS];
    for (unsigned i = 0; i < TU_PLIST_THREADS; i++) {
        w[i] = (struct tu_plist_worker){pl, i, nodes, 0, 0};
        cr_assert_eq(pthread_create(&t[i], NULL, tu_plist_worker_main, &w[i]), 0);
    }
    unsigned decoys = 0;
    for (unsigned i = 0; i < TU_PLIST_THREADS; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(w[i].bad, 0, "thread %u: a list was damaged", i);
        decoys += w[i].decoys;
    }
    /* A collection may run while a thread is half-way through a node
     * (the decoy's address still in a register): a few, of 1280. */
    cr_assert_leq(decoys, 16, "%u decoys of live lists retained", decoys);
}

/* Side tables: references a mark procedure follows from outside the heap,
 * encoded so that no word of the table is a heap address. */
#define TU_SIDE_MASK ((uintptr_t)0xa5a5a5a5a5a5a5a5)

/* A fresh target (seed), entered encoded in table[i]; its hidden address. */
static TU_NOINLINE TU_UNUSED GC_hidden_pointer tu_side_target(uintptr_t *table, size_t i,
                                                              uint64_t seed)
{
    void *t = GC_malloc(TU_TARGET);
    cr_assert_not_null(t);
    tu_fill_bytes(t, TU_TARGET, seed);
    table[i] = (uintptr_t)t ^ TU_SIDE_MASK;
    return tu_hide(t);
}

#endif /* LFGC_TEST_PRECISE_H */
