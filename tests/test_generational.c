/* test_generational.c: minor collections keep what is live and reclaim
 * young garbage.
 *
 * A minor collection traces only from the roots, the young objects and the
 * old objects on pages written since the last collection.  The cases here
 * are the ways an old object comes to hold the only reference to a young
 * one: a store by the program, a store by the kernel (read() into an old
 * buffer), a store into an old object that shares its page with nothing
 * young; and a random graph mutated across many minor and full
 * collections, on one thread and on two.  Garbage must go: young garbage
 * at the next minor collection, objects that survived one collection
 * (aging) at the next minor one, promoted garbage at the next full one.
 *
 * Minor collections need the kernel's asynchronous write protection
 * (userfaultfd WP_ASYNC and PAGEMAP_SCAN, Linux 6.7).  Where it is missing
 * lfgc_collect_minor() runs full collections and returns 0: the checks of
 * what stays live still run, and the cases that need a minor collection
 * say so and are skipped.
 */
#define GC_THREADS
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(gen, .init = tu_warm_up);

/* ------------------------------------------------------------------ */
/* Old objects pointing to young ones                                   */

#define OLD_N 2000
#define YOUNG_BYTES 48

struct old_node {
    void *young;
    uint64_t pad[5];
};

static struct old_node *volatile *old_nodes;   /* a GC_malloc'ed root array */

static TU_NOINLINE void make_old_nodes(void)
{
    old_nodes = GC_malloc(OLD_N * sizeof(void *));
    cr_assert_not_null(old_nodes);
    for (size_t i = 0; i < OLD_N; i++) {
        old_nodes[i] = GC_malloc(sizeof(struct old_node));
        cr_assert_not_null(old_nodes[i]);
    }
}

/* Give every old node a fresh young object, referenced only from it. */
static TU_NOINLINE void attach_young(uint64_t round)
{
    for (size_t i = 0; i < OLD_N; i++) {
        char *y = GC_malloc(YOUNG_BYTES);
        cr_assert_not_null(y);
        tu_fill_bytes(y, YOUNG_BYTES, round * OLD_N + i);
        old_nodes[i]->young = y;
    }
}

static TU_NOINLINE size_t count_intact(uint64_t round)
{
    size_t ok = 0;
    for (size_t i = 0; i < OLD_N; i++) {
        void *y = old_nodes[i]->young;
        if (tu_check_bytes(y, YOUNG_BYTES, round * OLD_N + i) == YOUNG_BYTES &&
            lfgc_is_live(y))
            ok++;
    }
    return ok;
}

/* Garbage between the stores and the collection, so that freed slots get
 * reused for young objects that must not be confused with old ones. */
static TU_NOINLINE void churn(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *p = GC_malloc(YOUNG_BYTES);
        cr_assert_not_null(p);
        p[0] = 1;
    }
}

Test(gen, old_to_young_stores_survive_minor_collections)
{
    TU_NEED_MINOR();
    make_old_nodes();
    tu_collect();                           /* the nodes are old now */
    for (uint64_t round = 1; round <= 20; round++) {
        attach_young(round);
        churn(20000);
        int minor = tu_collect_minor();
        cr_assert(minor, "round %lu: expected a minor collection", (unsigned long)round);
        cr_assert_eq(count_intact(round), OLD_N,
                     "round %lu: young objects held only by old ones were lost",
                     (unsigned long)round);
    }
    struct lfgc_stats st;
    lfgc_get_stats(&st);
    cr_assert_geq(st.minor_collections, 20);
    old_nodes = NULL;
}

/* ------------------------------------------------------------------ */
/* The kernel writes a pointer into an old buffer                       */

static void *volatile *old_buffer;

static TU_NOINLINE GC_hidden_pointer young_through_pipe(int fd_write)
{
    char *y = GC_malloc(YOUNG_BYTES);
    cr_assert_not_null(y);
    tu_fill_bytes(y, YOUNG_BYTES, 4242);
    cr_assert_eq(write(fd_write, &y, sizeof y), (ssize_t)sizeof y);
    return tu_hide(y);
}

static TU_NOINLINE void read_pointer_into_old(int fd_read)
{
    cr_assert_eq(read(fd_read, (void *)&old_buffer[17], sizeof(void *)),
                 (ssize_t)sizeof(void *));
}

Test(gen, pointer_stored_by_read_survives)
{
    TU_NEED_MINOR();
    /* Pointer-free neighbours would not do: the buffer is scanned. */
    old_buffer = GC_malloc(4096);
    cr_assert_not_null(old_buffer);
    tu_collect();                           /* old and write-protected */
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    GC_hidden_pointer h = young_through_pipe(fds[1]);
    read_pointer_into_old(fds[0]);
    close(fds[0]);
    close(fds[1]);
    churn(20000);
    cr_assert(tu_collect_minor());
    cr_assert(tu_live(h), "an object referenced only by read() data was freed");
    cr_assert(tu_slot_is(&old_buffer[17], h, 0));
    cr_assert_eq(tu_check_bytes(old_buffer[17], YOUNG_BYTES, 4242), YOUNG_BYTES);
    old_buffer = NULL;
}

/* ------------------------------------------------------------------ */
/* A page of old objects only, written once                             */

static TU_NOINLINE GC_hidden_pointer store_young_in(void **obj, uint64_t seed)
{
    char *y = GC_malloc(YOUNG_BYTES);
    cr_assert_not_null(y);
    tu_fill_bytes(y, YOUNG_BYTES, seed);
    *obj = y;
    return tu_hide(y);
}

Test(gen, store_into_page_of_old_objects_is_seen)
{
    TU_NEED_MINOR();
    /* Pages full of old 16-byte-class objects: they are write-protected,
     * so only the write fault tells the collector about the store. */
    enum { N = 4096 };
    void **volatile *objs = GC_malloc(N * sizeof(void *));
    cr_assert_not_null(objs);
    for (size_t i = 0; i < N; i++) {
        objs[i] = GC_malloc(8);
        cr_assert_not_null(objs[i]);
    }
    tu_collect();
    cr_assert(tu_collect_minor());
    GC_hidden_pointer h[8];
    for (unsigned k = 0; k < 8; k++)
        h[k] = store_young_in(objs[k * 500 + 7], 900 + k);
    churn(20000);
    cr_assert(tu_collect_minor());
    churn(20000);
    cr_assert(tu_collect_minor());
    for (unsigned k = 0; k < 8; k++) {
        cr_assert(tu_live(h[k]), "young object %u, stored in an old one, was freed", k);
        cr_assert(tu_slot_is((void *volatile *)objs[k * 500 + 7], h[k], 0));
        cr_assert_eq(tu_check_bytes(*objs[k * 500 + 7], YOUNG_BYTES, 900 + k), YOUNG_BYTES);
    }
}

/* ------------------------------------------------------------------ */
/* Garbage goes                                                          */

static TU_NOINLINE GC_hidden_pointer young_garbage(void)
{
    char *p = GC_malloc(YOUNG_BYTES);
    cr_assert_not_null(p);
    p[0] = 1;
    return tu_hide(p);
}

Test(gen, young_garbage_is_reclaimed_by_minor_collection)
{
    TU_NEED_MINOR();
    GC_hidden_pointer h[64];
    for (unsigned i = 0; i < 64; i++)
        h[i] = young_garbage();
    cr_assert(tu_collect_minor());
    unsigned alive = 0;
    for (unsigned i = 0; i < 64; i++)
        alive += (unsigned)tu_live(h[i]);
    /* A stray word may pin one; not many. */
    cr_assert_leq(alive, 2, "%u of 64 young garbage objects survived a minor collection", alive);
}

static void *volatile promoted_root;

static TU_NOINLINE void make_promoted(GC_hidden_pointer *h)
{
    char *p = GC_malloc(YOUNG_BYTES);
    cr_assert_not_null(p);
    promoted_root = p;
    *h = tu_hide(p);
}

Test(gen, promoted_garbage_is_reclaimed_by_full_collection)
{
    TU_NEED_MINOR();
    GC_hidden_pointer h;
    make_promoted(&h);
    cr_assert(tu_collect_minor());             /* survives: promoted */
    cr_assert(tu_live(h));
    promoted_root = NULL;
    tu_collect();
    cr_assert(!tu_live(h), "promoted garbage survived a full collection");
}

/* Objects allocated in spans taken empty since the last collection do not
 * become old at their first minor collection: they age, and the next minor
 * collection traces them again.  An aging object held only by an old one,
 * which nobody writes any more, must still be found then. */
Test(gen, aging_objects_held_by_old_ones_survive_later_minors)
{
    TU_NEED_MINOR();
    make_old_nodes();
    tu_collect();
    cr_assert(tu_collect_minor());             /* the nodes' pages are protected */
    attach_young(7);
    cr_assert(tu_collect_minor());             /* the young ones age */
    for (unsigned round = 0; round < 4; round++) {
        churn(20000);                       /* reuses whatever was freed */
        cr_assert(tu_collect_minor(), "round %u: expected a minor collection", round);
        cr_assert_eq(count_intact(7), OLD_N,
                     "round %u: objects held only by old ones were lost", round);
    }
    old_nodes = NULL;
}

/* Objects that survive one minor collection and then die go at the next
 * minor collection, without waiting for a full one. */
#define AGING_N 4096
static void *volatile aging_root;

/* A list, so that every object of it (the head's holder included) is
 * young: an old array holding them would keep them alive. */
static TU_NOINLINE void make_aging(GC_hidden_pointer *h)
{
    void **head = NULL;
    for (size_t i = 0; i < AGING_N; i++) {
        void **p = GC_malloc(YOUNG_BYTES);
        cr_assert_not_null(p);
        p[0] = head;
        head = p;
        h[i] = tu_hide(p);
    }
    aging_root = head;
}

static size_t count_live(const GC_hidden_pointer *h)
{
    size_t alive = 0;
    for (size_t i = 0; i < AGING_N; i++)
        alive += (size_t)tu_live(h[i]);
    return alive;
}

/* Young objects that a first collection (minor or full) finds live, and
 * that die right after, go at the next minor collection.  Those that
 * shared a span with older objects were promoted at once; the rest (most:
 * 256 KiB of them) must be gone. */
static void aging_garbage_goes_at_next_minor(bool full_first, const char *first)
{
    TU_NEED_MINOR();
    static GC_hidden_pointer h[AGING_N];
    GC_expand_hp(16 << 20);                 /* no collection while building */
    GC_word gc_no = GC_get_gc_no();
    make_aging(h);
    cr_assert_eq(GC_get_gc_no(), gc_no);
    if (full_first)
        tu_collect();                       /* full: all survive */
    else
        cr_assert(tu_collect_minor());         /* all survive: held by the root */
    cr_assert_eq(count_live(h), AGING_N);
    aging_root = NULL;
    cr_assert(tu_collect_minor());
    size_t alive = count_live(h);
    cr_assert_leq(alive, AGING_N / 4,
                  "%zu of %d objects dead since %s survived the next minor one",
                  alive, AGING_N, first);
}

Test(gen, garbage_that_survived_one_minor_goes_at_the_next)
{
    aging_garbage_goes_at_next_minor(false, "the last minor collection");
}

/* A full collection that finds young objects live (a structure under
 * construction) leaves them aging too: dropped soon after, they go at the
 * next minor collection. */
Test(gen, garbage_live_at_a_full_collection_goes_at_the_next_minor)
{
    aging_garbage_goes_at_next_minor(true, "a full collection");
}

/* Objects left aging by a full collection and held only by old ones,
 * which nobody writes any more, are found again by the minor ones after. */
Test(gen, aging_objects_after_a_full_collection_survive_later_minors)
{
    TU_NEED_MINOR();
    make_old_nodes();
    tu_collect();
    cr_assert(tu_collect_minor());             /* the nodes' pages are protected */
    attach_young(11);
    tu_collect();                           /* the young ones age */
    for (unsigned round = 0; round < 4; round++) {
        churn(20000);
        cr_assert(tu_collect_minor(), "round %u: expected a minor collection", round);
        cr_assert_eq(count_intact(11), OLD_N,
                     "round %u: objects held only by old ones were lost", round);
    }
    old_nodes = NULL;
}

/* Free slots on a thread's list are marked through a collection, so that
 * the sweep leaves them alone; what the thread allocates there afterwards
 * is marked until the next minor collection clears its span (aging) or
 * scans it (old).  A span taken since the last collection whose only
 * marked slots at a full one are such free slots ages with no live bytes
 * at all; its objects must still be traced by the next minor collection,
 * or what only they hold is freed (the crystal compiler lost its data
 * this way). */
#define LISTED_N 16
#define LISTED_BYTES 368                    /* a class nothing else here uses */

static void **volatile listed_root;

/* One allocation: the thread's list for the class is filled from a fresh
 * span, and the object dies at once. */
static TU_NOINLINE void take_a_list(void)
{
    char *p = GC_malloc(LISTED_BYTES);
    cr_assert_not_null(p);
    p[0] = 1;
}

static TU_NOINLINE void fill_from_the_list(uint64_t seed)
{
    void **root = GC_malloc(LISTED_N * sizeof(void *));
    cr_assert_not_null(root);
    for (size_t i = 0; i < LISTED_N; i++) {
        void **x = GC_malloc(LISTED_BYTES);
        char *y = GC_malloc(YOUNG_BYTES);
        cr_assert(x && y);
        tu_fill_bytes(y, YOUNG_BYTES, seed + i);
        x[0] = y;                           /* y is held by x alone */
        root[i] = x;
    }
    listed_root = root;
}

static TU_NOINLINE size_t count_listed_intact(uint64_t seed)
{
    size_t intact = 0;
    for (size_t i = 0; i < LISTED_N; i++) {
        void **x = listed_root[i];
        intact += tu_check_bytes(x[0], YOUNG_BYTES, seed + i) == YOUNG_BYTES;
    }
    return intact;
}

Test(gen, objects_allocated_from_a_list_kept_through_a_collection_are_traced)
{
    TU_NEED_MINOR();
    tu_collect();
    take_a_list();
    tu_collect();                           /* the fresh span ages: free slots only */
    fill_from_the_list(23);
    for (unsigned round = 0; round < 3; round++) {
        cr_assert(tu_collect_minor(), "round %u: expected a minor collection", round);
        churn(20000);                       /* reuses whatever was freed */
        cr_assert_eq(count_listed_intact(23), LISTED_N,
                     "round %u: objects held only by objects allocated from a "
                     "thread's list were lost", round);
    }
    listed_root = NULL;
}

/* The same, in a span that is old by then: a full collection marks the
 * slots on the thread's list (so that the sweep leaves them alone), and
 * objects allocated from them afterwards are young all the same.  Those
 * that die before the next minor collection must go with it, not wait for
 * a full one as if they were old. */
#define KEPT_BYTES 48
#define KEPT_N 1000                         /* not a multiple of a batch */
#define LIST_GARBAGE 8

static void *volatile *kept_root;
static GC_hidden_pointer list_garbage[LIST_GARBAGE];

static TU_NOINLINE void keep_objects(void)
{
    void *volatile *root = GC_malloc(KEPT_N * sizeof(void *));
    cr_assert_not_null(root);
    for (size_t i = 0; i < KEPT_N; i++) {
        root[i] = GC_malloc(KEPT_BYTES);
        cr_assert_not_null(root[i]);
    }
    kept_root = root;
}

static TU_NOINLINE void garbage_from_the_list(void)
{
    for (size_t i = 0; i < LIST_GARBAGE; i++) {
        char *g = GC_malloc(KEPT_BYTES);
        cr_assert_not_null(g);
        g[0] = 1;
        list_garbage[i] = tu_hide(g);
    }
}

Test(gen, dead_objects_from_a_list_kept_through_a_full_collection_go_at_a_minor_one)
{
    TU_NEED_MINOR();
    keep_objects();                         /* the list keeps the batch's rest */
    tu_collect();
    tu_collect();                           /* the span is old */
    garbage_from_the_list();
    cr_assert(tu_collect_minor(), "expected a minor collection");
    size_t live = 0;
    for (size_t i = 0; i < LIST_GARBAGE; i++)
        live += (size_t)tu_live(list_garbage[i]);
    cr_assert_eq(live, 0, "%zu of %d dead young objects survived a minor collection",
                 live, LIST_GARBAGE);
    size_t intact = 0;
    for (size_t i = 0; i < KEPT_N; i++)
        intact += kept_root[i] != NULL && lfgc_is_live((void *)kept_root[i]);
    cr_assert_eq(intact, KEPT_N, "kept objects lost");
    kept_root = NULL;
}

/* Objects that survive a minor collection young are mostly a structure
 * the program is still building, and it writes them again at once.  A
 * minor collection leaves their pages unprotected, so those writes cost no
 * fault (a full collection protects them: see dirty.c); the next minor
 * collection still finds what was stored in them. */
#define BUILT_N 16384                       /* 64-byte nodes: 256 pages */

struct built_node {
    void *young;
    uint64_t pad[7];
};

static struct built_node *volatile *built;

static TU_NOINLINE void make_built(void)
{
    built = GC_malloc_uncollectable(BUILT_N * sizeof(void *));
    cr_assert_not_null(built);
    for (size_t i = 0; i < BUILT_N; i++) {
        built[i] = GC_malloc(sizeof(struct built_node));
        cr_assert_not_null(built[i]);
        built[i]->pad[0] = 1;               /* first touch: a fault anyway */
    }
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

Test(gen, writes_after_a_minor_collection_cost_no_fault)
{
    TU_NEED_MINOR();
    /* Room enough that no collection comes while the nodes are made: one
     * would leave them aging, and the minor below would make them old. */
    GC_expand_hp(32 << 20);
    make_built();
    cr_assert(tu_collect_minor());             /* the nodes survive young */
    long before = minor_faults();
    for (size_t i = 0; i < BUILT_N; i++)
        built[i]->pad[0] = i;
    long faults = minor_faults() - before;
    cr_assert_lt(faults, BUILT_N / 64 / 4,
                 "%ld page faults writing %d nodes that a minor collection "
                 "left aging: their pages were write-protected", faults, BUILT_N);
    /* What is stored in them now is still found by minor collections. */
    for (size_t i = 0; i < BUILT_N; i++) {
        char *y = GC_malloc(YOUNG_BYTES);
        cr_assert_not_null(y);
        tu_fill_bytes(y, YOUNG_BYTES, 7000000 + i);
        built[i]->young = y;
    }
    for (unsigned round = 0; round < 3; round++) {
        churn(20000);
        cr_assert(tu_collect_minor());
        size_t ok = 0;
        for (size_t i = 0; i < BUILT_N; i++)
            ok += tu_check_bytes(built[i]->young, YOUNG_BYTES, 7000000 + i) == YOUNG_BYTES &&
                  lfgc_is_live(built[i]->young) && built[i]->pad[0] == i;
        cr_assert_eq(ok, BUILT_N, "round %u: %zu of %d intact", round, ok, BUILT_N);
    }
    GC_free((void *)built);
    built = NULL;
}

/* A structure found live by a collection and dropped soon after does not
 * make the heap grow: before growing for new objects, a minor collection
 * finds it dead (or a full one would).  Growing instead, as bdwgc's rule
 * alone says while little was allocated since the collection, would add
 * about two thirds of it to the heap.  The heap may still use the room
 * of its last expansion (at most 8 MiB) without asking. */
#define TRANSIENT_NODES (512 * 1024)        /* 24 MiB of 48-byte slots */
static void *volatile transient_root;

static TU_NOINLINE void make_transient(void)
{
    void **head = NULL;
    for (size_t i = 0; i < TRANSIENT_NODES; i++) {
        void **p = GC_malloc(YOUNG_BYTES);
        cr_assert_not_null(p);
        p[0] = head;
        head = p;
    }
    transient_root = head;
}

Test(gen, dead_young_structure_does_not_make_the_heap_grow)
{
    TU_NEED_MINOR();
    GC_disable();                           /* built whole, then collected */
    make_transient();
    GC_enable();
    cr_assert(tu_collect_minor());             /* live: it ages */
    transient_root = NULL;
    size_t before = GC_get_heap_size();
    churn(3 * TRANSIENT_NODES);             /* three times its size */
    size_t after = GC_get_heap_size();
    cr_assert_leq(after, before + (9 << 20),
                  "heap grew from %zu to %zu bytes for objects that fit in "
                  "a dead structure's space", before, after);
}

/* Allocation-triggered collections are minor most of the time and the
 * heap stays bounded while a live set is kept intact. */
#define KEEP 512
static void *volatile keep[KEEP];
static size_t keep_seed[KEEP];              /* round each was stored in */

static TU_NOINLINE void churn_and_keep(size_t rounds)
{
    for (size_t r = 0; r < rounds; r++) {
        size_t i = r % KEEP;
        size_t n = 16 + (r * 7) % 200;
        char *p = GC_malloc(n);
        cr_assert_not_null(p);
        tu_fill_bytes(p, n, r);
        if (r % 97 == 0) {
            keep[i] = p;                    /* some survive, most die young */
            keep_seed[i] = r;
        }
    }
}

/* Old data that allocation does not touch: what minor collections save
 * tracing. */
#define OLD_LIST_NODES 65536
struct list_node {
    struct list_node *next;
    uint64_t value[7];
};
static struct list_node *volatile old_list;

static TU_NOINLINE void make_old_list(void)
{
    struct list_node *head = NULL;
    for (uint64_t i = 0; i < OLD_LIST_NODES; i++) {
        struct list_node *n = GC_malloc(sizeof *n);
        cr_assert_not_null(n);
        n->next = head;
        for (int k = 0; k < 7; k++)
            n->value[k] = i * 7 + (uint64_t)k;
        head = n;
    }
    old_list = head;
}

static TU_NOINLINE uint64_t old_list_damage(void)
{
    uint64_t bad = 0, i = OLD_LIST_NODES;
    for (struct list_node *n = old_list; n; n = n->next) {
        i--;
        for (int k = 0; k < 7; k++)
            bad += n->value[k] != i * 7 + (uint64_t)k;
    }
    return bad + i;
}

/* Churn with a constant live set: the heap stays bounded, and the kept
 * objects (the last ones stored in each slot) are intact.  Sets how many
 * collections ran and how many of them were minor. */
static void churn_with_constant_live_set(uint64_t *gcs, uint64_t *minors)
{
    struct lfgc_stats before, after;
    lfgc_get_stats(&before);
    churn_and_keep(2000000);
    size_t heap1 = GC_get_heap_size();
    churn_and_keep(4000000);
    size_t heap2 = GC_get_heap_size();
    lfgc_get_stats(&after);
    *gcs = after.collections - before.collections;
    *minors = after.minor_collections - before.minor_collections;
    cr_assert_leq(heap2, heap1 + heap1 / 2 + (4u << 20),
                  "heap grew from %zu to %zu with a constant live set", heap1, heap2);
    for (size_t i = 0; i < KEEP; i++) {
        size_t r = keep_seed[i];
        size_t n = 16 + (r * 7) % 200;
        if (keep[i] && r)
            cr_assert_eq(tu_check_bytes((void *)keep[i], n, r), n, "kept object %zu damaged", i);
    }
}

Test(gen, allocation_runs_minor_collections_with_bounded_heap)
{
    TU_NEED_MINOR();
    make_old_list();
    uint64_t gcs, minors;
    churn_with_constant_live_set(&gcs, &minors);
    cr_assert_gt(gcs, 10);
    cr_assert_gt(minors, gcs / 2, "only %lu of %lu collections were minor",
                 (unsigned long)minors, (unsigned long)gcs);
    cr_assert_eq(old_list_damage(), 0, "the old list was damaged");
    old_list = NULL;
}

/* With no old data worth sparing (a small live set that allocation
 * lands all around), a minor collection would trace as much as a full one
 * and pay for write tracking too: collections are then mostly full, minor
 * ones are still tried now and then, and the live set stays intact. */
Test(gen, minor_collections_that_save_nothing_give_way_to_full_ones)
{
    TU_NEED_MINOR();
    uint64_t gcs, minors;
    churn_with_constant_live_set(&gcs, &minors);
    cr_assert_gt(gcs, 20);
    cr_assert_lt(minors, gcs / 4, "%lu of %lu collections were minor",
                 (unsigned long)minors, (unsigned long)gcs);
    cr_assert_gt(minors, 1, "minor collections were never tried again");
}

/* ------------------------------------------------------------------ */
/* A random graph, mutated across minor and full collections            */

#define GRAPH_ROOTS 256
#define EDGES 4

struct gnode {
    struct gnode *edge[EDGES];
    uint64_t id;
    uint64_t check;                 /* a function of id */
    char payload[24];
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

struct graph {
    struct gnode *roots[GRAPH_ROOTS];
    uint64_t rng, next_id;
};

static uint64_t rnd(struct graph *g)
{
    g->rng = g->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return g->rng >> 17;
}

static struct gnode *new_node(struct graph *g)
{
    struct gnode *n = GC_malloc(sizeof *n);
    cr_assert_not_null(n);
    n->id = ++g->next_id;
    n->check = mix(n->id);
    memset(n->payload, (int)(n->id & 0x7f), sizeof n->payload);
    return n;
}

/* Some random node reachable from a random root, or NULL. */
static struct gnode *random_node(struct graph *g)
{
    struct gnode *n = g->roots[rnd(g) % GRAPH_ROOTS];
    for (unsigned hops = (unsigned)(rnd(g) % 6); n && hops; hops--) {
        struct gnode *m = n->edge[rnd(g) % EDGES];
        if (!m)
            break;
        n = m;
    }
    return n;
}

static void mutate(struct graph *g, size_t steps)
{
    for (size_t s = 0; s < steps; s++) {
        uint64_t op = rnd(g) % 10;
        if (op < 5) {
            /* New node stored into an (often old) reachable one. */
            struct gnode *n = random_node(g);
            struct gnode *y = new_node(g);
            y->edge[0] = random_node(g);
            if (n)
                n->edge[rnd(g) % EDGES] = y;
            else
                g->roots[rnd(g) % GRAPH_ROOTS] = y;
        } else if (op < 8) {
            /* Rewire old to old. */
            struct gnode *a = random_node(g), *b = random_node(g);
            if (a)
                a->edge[rnd(g) % EDGES] = b;
        } else if (op < 9) {
            g->roots[rnd(g) % GRAPH_ROOTS] = new_node(g);
        } else {
            g->roots[rnd(g) % GRAPH_ROOTS] = NULL;   /* drop a subgraph */
        }
    }
}

/* Visit every reachable node (marking by id parity flips would need a
 * side table; a bounded depth-first walk with a visited hash does). */
static size_t verify(struct graph *g)
{
    size_t cap = 1u << 20, seen_n = 0, bad = 0;
    uint64_t *seen = calloc(cap, sizeof *seen);
    struct gnode **stack = malloc(cap * sizeof *stack);
    cr_assert(seen && stack);
    size_t top = 0;
    for (size_t r = 0; r < GRAPH_ROOTS; r++)
        if (g->roots[r])
            stack[top++] = g->roots[r];
    while (top) {
        struct gnode *n = stack[--top];
        if (n->check != mix(n->id) || n->id == 0 || n->id > g->next_id) {
            bad++;
            continue;
        }
        for (size_t k = 0; k < sizeof n->payload; k++)
            if (n->payload[k] != (char)(n->id & 0x7f)) {
                bad++;
                break;
            }
        size_t h = (size_t)mix(n->id) & (cap - 1);
        while (seen[h] && seen[h] != n->id)
            h = (h + 1) & (cap - 1);
        if (seen[h])
            continue;
        seen[h] = n->id;
        if (++seen_n > cap / 2)
            break;
        for (unsigned e = 0; e < EDGES; e++)
            if (n->edge[e] && top < cap)
                stack[top++] = n->edge[e];
    }
    free(seen);
    free(stack);
    return bad;
}

static struct graph *graph_new(uint64_t seed)
{
    struct graph *g = GC_malloc_uncollectable(sizeof *g);
    cr_assert_not_null(g);
    g->rng = seed;
    return g;
}

static void run_graph(struct graph *g, int rounds)
{
    for (int round = 0; round < rounds; round++) {
        mutate(g, 20000);
        if (round % 7 == 6)
            GC_gcollect();
        else
            lfgc_collect_minor();
        cr_assert_eq(verify(g), 0, "round %d: reachable nodes damaged", round);
    }
}

Test(gen, random_graph_survives_minor_and_full_collections)
{
    struct graph *g = graph_new(12345);
    run_graph(g, 40);
    GC_free(g);
}

static void *graph_thread(void *arg)
{
    struct graph *g = graph_new((uint64_t)(uintptr_t)arg);
    for (int round = 0; round < 30; round++) {
        mutate(g, 20000);           /* allocation triggers the collections */
        if (verify(g) != 0) {
            GC_free(g);
            return (void *)1;
        }
    }
    GC_free(g);
    return NULL;
}

Test(gen, random_graphs_on_two_threads)
{
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        cr_assert_eq(GC_pthread_create(&t[i], NULL, graph_thread, (void *)(i + 77)), 0);
    for (int i = 0; i < 2; i++) {
        void *ret = (void *)2;
        cr_assert_eq(GC_pthread_join(t[i], &ret), 0);
        cr_assert_null(ret, "thread %d found damaged nodes", i);
    }
}

/* Old nodes whose pages the program writes before every collection: a
 * page written after it was protected is left unprotected for a while
 * (dirty.c, hot pages), instead of being protected again at each
 * collection and faulting again at the next write.  What is stored there
 * is still found by minor collections, which rescan those pages. */
#define HOT_ROUNDS 7
#define HOT_STRIDE 85               /* 48-byte nodes: one node a page */

static TU_NOINLINE void attach_young_every(uint64_t round, size_t stride, char **ys)
{
    for (size_t i = 0; i < OLD_N; i += stride) {
        ys[i / stride] = GC_malloc(YOUNG_BYTES);
        cr_assert_not_null(ys[i / stride]);
        tu_fill_bytes(ys[i / stride], YOUNG_BYTES, round * OLD_N + i);
    }
}

static TU_NOINLINE size_t count_intact_every(uint64_t round, size_t stride)
{
    size_t ok = 0;
    for (size_t i = 0; i < OLD_N; i += stride) {
        void *y = old_nodes[i]->young;
        ok += tu_check_bytes(y, YOUNG_BYTES, round * OLD_N + i) == YOUNG_BYTES && lfgc_is_live(y);
    }
    return ok;
}

Test(gen, pages_written_after_every_collection_are_not_protected_each_time)
{
    TU_NEED_MINOR();
    make_old_nodes();
    attach_young(0);
    tu_collect();
    cr_assert(tu_collect_minor());
    enum { N = (OLD_N + HOT_STRIDE - 1) / HOT_STRIDE };
    static char *ys[N];
    long faults[HOT_ROUNDS];
    for (int round = 0; round < HOT_ROUNDS; round++) {
        attach_young_every((uint64_t)round + 1, HOT_STRIDE, ys);
        long before = minor_faults();
        for (size_t i = 0; i < OLD_N; i += HOT_STRIDE)
            old_nodes[i]->young = ys[i / HOT_STRIDE];
        faults[round] = minor_faults() - before;
        memset(ys, 0, sizeof ys);
        churn(1000);                /* too little for a collection of its own */
        GC_word gc_before = GC_get_gc_no();
        cr_assert(tu_collect_minor(), "round %d: the collection was full", round);
        cr_assert_eq(GC_get_gc_no(), gc_before + 1, "round %d: more than one collection",
                     round);
        cr_assert_eq(count_intact_every((uint64_t)round + 1, HOT_STRIDE), (size_t)N,
                     "round %d: young objects stored in old nodes were lost", round);
    }
    /* The first round's writes fault on protected pages; after it, at most
     * one round (a pass that forgets hot pages) faults again. */
    long first = faults[0], later = 0, rounds_faulting = 0;
    for (int round = 1; round < HOT_ROUNDS; round++) {
        later += faults[round];
        rounds_faulting += faults[round] > N / 4;
    }
    cr_log_info("write faults: %ld in the first round, %ld in the %d after", first, later,
                HOT_ROUNDS - 1);
    cr_assert_geq(first, N / 2, "setup: the first writes made %ld faults for %d pages", first, N);
    cr_assert_leq(rounds_faulting, 1, "%ld of %d rounds faulted again (%ld faults): the "
                  "written pages were protected again after each collection",
                  rounds_faulting, HOT_ROUNDS - 1, later);
    old_nodes = NULL;
}

/* ------------------------------------------------------------------ */
/* fork, and the switches                                                */

Test(gen, child_after_fork_collects_minor_again)
{
    TU_NEED_MINOR();
    make_old_nodes();
    tu_collect();
    attach_young(7);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* The child's first collection is full (tracking is set up
         * anew), later ones minor; the data survive both. */
        int first = tu_collect_minor();
        attach_young(8);
        int second = tu_collect_minor();
        _exit(first == 0 && second == 1 && count_intact(8) == OLD_N ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status %d)", status);
    cr_assert(tu_collect_minor());
    cr_assert_eq(count_intact(7), OLD_N);
    old_nodes = NULL;
}

/* Re-run this program with the environment under test; the child reports
 * from a constructor, before Criterion starts. */
__attribute__((constructor)) static void child_report(void)
{
    if (!getenv("LFGC_GEN_CHILD") || getenv("LFGC_GEN_DESCRIPTORS"))
        return;
    GC_INIT();
    GC_gcollect();
    int minor = lfgc_collect_minor();
    printf("incremental=%d minor=%d\n", GC_is_incremental_mode(), minor);
    fflush(stdout);
    _exit(0);
}

/* A program that closes every descriptor but stdio (as daemons do), then
 * opens files that get the numbers lfgc's descriptors had: write tracking
 * is set up again, and the program's files are left alone. */
/* Old nodes holding young objects (round 1), then a minor collection:
 * whether it was minor. */
static int old_nodes_then_minor(void)
{
    make_old_nodes();
    tu_collect();
    attach_young(1);
    int minor = tu_collect_minor();
    fflush(stdout);
    return minor;
}

static void descriptors_closed_child(void)
{
    int before = old_nodes_then_minor();
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    int files[4], kept = 0;
    for (int i = 0; i < 4; i++)
        files[i] = open("/dev/null", O_RDONLY);
    int after = 0;
    for (uint64_t round = 2; round < 6; round++) {
        attach_young(round);
        after = tu_collect_minor();
    }
    for (int i = 0; i < 4; i++)
        kept += files[i] >= 0 && fcntl(files[i], F_GETFD) != -1;
    printf("minor_before=%d minor_after=%d files_kept=%d intact=%d\n", before, after,
           kept, count_intact(5) == OLD_N);
}

/* The same in a child of fork(), which inherits lfgc's descriptors: the
 * child's files that took their numbers are left alone too (lfgc closed
 * the one that had been /proc/self/status, taking it for its own). */
static void descriptors_closed_in_child(void)
{
    int before = old_nodes_then_minor();
    pid_t pid = fork();
    if (pid == 0) {
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        int files[4], kept = 0, minor = 0;
        for (int i = 0; i < 4; i++)
            files[i] = open("/dev/null", O_RDONLY);
        for (uint64_t round = 2; round < 6; round++) {
            attach_young(round);
            minor = tu_collect_minor();
        }
        /* Still /dev/null: a number lfgc closed may be lfgc's again. */
        struct stat null, st;
        if (stat("/dev/null", &null) != 0)
            _exit(100);
        for (int i = 0; i < 4; i++)
            kept += files[i] >= 0 && fstat(files[i], &st) == 0 && S_ISCHR(st.st_mode) &&
                    st.st_rdev == null.st_rdev;
        _exit(kept == 4 && minor == 1 && count_intact(5) == OLD_N ? 0 : 1 + kept);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    printf("minor_before=%d child_status=%d\n", before,
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* fork() with lfgc's fork handlers turned off (GC_set_handle_fork(-1))
 * and not called by the program either: the child must not work on its
 * parent's write tracking through the descriptors it inherits. */
static void fork_without_handlers_child(void)
{
    int before = old_nodes_then_minor();
    pid_t pid = fork();
    if (pid == 0) {
        int minor = 0;
        for (uint64_t round = 2; round < 5; round++) {
            attach_young(round);
            minor = tu_collect_minor();
        }
        _exit(minor == 1 && count_intact(4) == OLD_N ? 0 : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    attach_young(9);
    int after = tu_collect_minor();
    printf("minor_before=%d child_ok=%d parent_minor=%d intact=%d\n", before,
           WIFEXITED(status) && WEXITSTATUS(status) == 0, after, count_intact(9) == OLD_N);
}

__attribute__((constructor)) static void descriptor_child_report(void)
{
    const char *which = getenv("LFGC_GEN_DESCRIPTORS");
    if (!which)
        return;
    if (strcmp(which, "nohandlers") == 0)
        GC_set_handle_fork(-1);
    GC_INIT();
    if (strcmp(which, "nohandlers") == 0)
        fork_without_handlers_child();
    else if (strcmp(which, "forkclose") == 0)
        descriptors_closed_in_child();
    else
        descriptors_closed_child();
    fflush(stdout);
    _exit(0);
}

static void run_child(const char *env, char *out, size_t len)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = 0;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "env LFGC_GEN_CHILD=1 %s '%s'", env, exe);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    out[0] = 0;
    if (!fgets(out, (int)len, f))
        out[0] = 0;
    cr_assert_eq(pclose(f), 0);
}

Test(gen, environment_turns_generational_collection_off)
{
    TU_NEED_MINOR();
    char out[256];
    run_child("", out, sizeof out);
    cr_assert_str_eq(out, "incremental=1 minor=1\n");
    run_child("LFGC_GENERATIONAL=0", out, sizeof out);
    cr_assert_str_eq(out, "incremental=0 minor=0\n");
    run_child("GC_DISABLE_INCREMENTAL=1", out, sizeof out);
    cr_assert_str_eq(out, "incremental=0 minor=0\n");
}

Test(gen, tracking_comes_back_after_the_program_closes_descriptors)
{
    TU_NEED_MINOR();
    char out[256];
    run_child("LFGC_GEN_DESCRIPTORS=close", out, sizeof out);
    cr_assert_str_eq(out, "minor_before=1 minor_after=1 files_kept=4 intact=1\n");
}

Test(gen, a_forked_child_that_closes_descriptors_keeps_its_files)
{
    TU_NEED_MINOR();
    char out[256];
    run_child("LFGC_GEN_DESCRIPTORS=forkclose", out, sizeof out);
    /* child_status: 0, or 1 + the child's files still open. */
    cr_assert_str_eq(out, "minor_before=1 child_status=0\n");
}

Test(gen, child_forked_without_handlers_tracks_its_own_writes)
{
    TU_NEED_MINOR();
    char out[256];
    run_child("LFGC_GEN_DESCRIPTORS=nohandlers GC_MARKERS=1", out, sizeof out);
    cr_assert_str_eq(out, "minor_before=1 child_ok=1 parent_minor=1 intact=1\n");
}

/* Write tracking registers the heap with the kernel: registered end to
 * end, the regions stay one mapping, so that readers of /proc/self/maps
 * (glibc's fortified printf with %n reads it at every call) do not pay
 * two lines per size class. */
static size_t heap_lines_of_proc_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[512];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo = strtoul(line, NULL, 16);
        if (lo >= LOWFAT_HEAP_START && lo < LOWFAT_HEAP_END)
            n++;
    }
    fclose(f);
    return n;
}

Test(gen, write_tracking_keeps_the_heap_one_mapping)
{
    TU_NEED_MINOR();
    void *keep[64];
    for (size_t i = 0; i < 64; i++) {
        keep[i] = GC_malloc((size_t)16 << (i % 14));
        cr_assert_not_null(keep[i]);
        tu_fill_bytes(keep[i], 16, i);
    }
    GC_gcollect();
    lfgc_collect_minor();
    cr_assert_eq(heap_lines_of_proc_maps(), 1);
    for (size_t i = 0; i < 64; i++)
        cr_assert_eq(tu_check_bytes(keep[i], 16, i), 16, "object %zu changed", i);
}
