/* test_reclaim.c: garbage is reclaimed, live data stay intact.
 *
 * A fixed live set survives allocation of a hundred times its size with
 * the heap bounded; a random graph of objects of many sizes and kinds is
 * mutated and checked (checksums, and the death of every unreachable
 * node) across many collections; memory handed out by GC_malloc is zero,
 * fresh or reused; large objects keep their contents and give their pages
 * back; freed and uncollectable objects do not leak.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <unistd.h>

TestSuite(reclaim, .init = tu_warm_up);

/* ------------------------------------------------------------------ */
/* A fixed live set, a hundred times as much garbage                    */

#define LIVE_OBJS 4096
static void *volatile live_set[LIVE_OBJS];
static size_t live_len[LIVE_OBJS];

static size_t live_size_of(size_t i)
{
    /* 16 bytes to 2 KiB, one object in 64 of 8 KiB. */
    return i % 64 == 63 ? 8192 : 16 + (i * 37) % 2000;
}

static TU_NOINLINE size_t build_live_set(void)
{
    size_t total = 0;
    for (size_t i = 0; i < LIVE_OBJS; i++) {
        size_t n = live_size_of(i);
        char *p = GC_malloc(n);
        cr_assert_not_null(p);
        tu_fill_bytes(p, n, i);
        live_set[i] = p;
        live_len[i] = n;
        total += lowfat_size(p);
    }
    return total;
}

static TU_NOINLINE size_t check_live_set(void)
{
    for (size_t i = 0; i < LIVE_OBJS; i++) {
        size_t bad = tu_check_bytes((void *)live_set[i], live_len[i], i);
        if (bad != live_len[i] || !lfgc_is_live((void *)live_set[i]))
            return i;
    }
    return LIVE_OBJS;
}

/* Allocate `bytes` of short-lived objects (linked in small lists, so that
 * garbage also points to garbage), recording the largest heap size seen;
 * the first `nsample` objects are recorded, hidden, in sample[]. */
static TU_NOINLINE size_t churn(size_t bytes, GC_hidden_pointer *sample, size_t nsample,
                                uint64_t seed)
{
    size_t done = 0, max_heap = 0, k = 0;
    uint64_t rng = seed;
    void **prev = NULL;
    while (done < bytes) {
        uint64_t r = tu_rand(&rng);
        size_t n = r % 16 == 0 ? 1 + r % 20000 : 16 + r % 300;
        void **p = (r & 1) ? GC_malloc(n) : GC_malloc_atomic(n);
        cr_assert_not_null(p, "GC_malloc(%zu) failed after %zu bytes", n, done);
        /* Lists of about eight: the list being built is reachable from
         * this frame, the others are garbage. */
        p[0] = (r & 1) && (r >> 5) % 8 ? (void *)prev : NULL;
        if (n >= 16)
            ((uint64_t *)p)[1] = r | 1ull << 63;
        prev = (r & 1) ? p : prev;
        if (k < nsample)
            sample[k++] = tu_hide(p);
        done += n;
        if ((done & 0xfff) < n) {
            size_t h = GC_get_heap_size();
            if (h > max_heap)
                max_heap = h;
        }
    }
    return max_heap;
}

Test(reclaim, garbage_reclaimed_heap_bounded)
{
    size_t live = build_live_set();
    tu_collect();
    cr_assert_eq(check_live_set(), LIVE_OBJS);
    GC_word gc0 = GC_get_gc_no();
    size_t heap0 = GC_get_heap_size();

    enum { NSAMPLE = 2000 };
    static GC_hidden_pointer sample[NSAMPLE];
    size_t max_heap = churn(100 * live, sample, NSAMPLE, 42);

    GC_word gcs = GC_get_gc_no() - gc0;
    cr_assert_gt(gcs, 5, "only %lu collections while allocating %zu MiB",
                 (unsigned long)gcs, 100 * live >> 20);
    /* Bound: four times the live data, plus the warm-up's pinned objects,
     * plus a few MiB of slack for size classes and expansion steps. */
    size_t bound = tu_base_stats.heap_bytes + 4 * live + 8 * MiB;
    cr_assert_leq(max_heap, bound, "heap grew to %zu KiB with %zu KiB live "
                  "(bound %zu KiB, %zu KiB before the churn)", max_heap >> 10,
                  live >> 10, bound >> 10, heap0 >> 10);
    cr_assert_eq(check_live_set(), LIVE_OBJS, "live object corrupted or reclaimed");

    tu_collect();
    cr_assert_eq(check_live_set(), LIVE_OBJS);
    size_t alive = 0;
    for (size_t i = 0; i < NSAMPLE; i++)
        alive += tu_live(sample[i]);
    /* The first objects of the churn were reclaimed long ago and their
     * slots reused by later garbage: after this collection none may
     * remain. */
    cr_assert_eq(alive, 0, "%zu of %d sampled garbage objects still live",
                 alive, NSAMPLE);

    struct lfgc_stats st;
    lfgc_get_stats(&st);
    cr_assert_lt(st.live_bytes, tu_base_stats.live_bytes + live + live / 2 + MiB,
                 "%llu bytes found live, %zu expected",
                 (unsigned long long)st.live_bytes, live);
    cr_assert_gt(st.reclaimed_bytes, 0);

    /* Drop the live set too: it goes. */
    GC_hidden_pointer h[LIVE_OBJS];
    for (size_t i = 0; i < LIVE_OBJS; i++) {
        h[i] = tu_hide((void *)live_set[i]);
        live_set[i] = NULL;
    }
    tu_collect();
    size_t still = 0;
    for (size_t i = 0; i < LIVE_OBJS; i++)
        still += tu_live(h[i]);
    cr_assert_eq(still, 0, "%zu of %d dropped objects not reclaimed", still, LIVE_OBJS);
}

/* Each collection reclaims what the previous round dropped. */
#define DROP_N 3000
static GC_hidden_pointer drop_h[DROP_N];
static void *volatile drop_roots[DROP_N];

static size_t drop_size(int i, int round)
{
    return 8 + (size_t)((i * 131 + round * 17) % 3000);
}

static size_t drop_checked(size_t n)
{
    return n < 64 ? n : 64;
}

static TU_NOINLINE void drop_alloc(int round)
{
    for (int i = 0; i < DROP_N; i++) {
        size_t n = drop_size(i, round);
        char *p = (i & 1) ? GC_malloc(n) : GC_malloc_atomic(n);
        cr_assert_not_null(p);
        tu_fill_bytes(p, drop_checked(n), (uint64_t)i + 1000u * (uint64_t)round);
        drop_roots[i] = p;
        drop_h[i] = tu_hide(p);
    }
}

Test(reclaim, dropped_objects_die_at_next_collection)
{
    for (int round = 0; round < 10; round++) {
        drop_alloc(round);
        /* Keep the even ones, drop the odd ones. */
        for (int i = 1; i < DROP_N; i += 2)
            drop_roots[i] = NULL;
        tu_collect();
        for (int i = 0; i < DROP_N; i++) {
            if (i % 2 == 0) {
                size_t n = drop_checked(drop_size(i, round));
                cr_assert(tu_live(drop_h[i]), "round %d: kept object %d reclaimed",
                          round, i);
                cr_assert_eq(tu_check_bytes((void *)drop_roots[i], n,
                                            (uint64_t)i + 1000u * (uint64_t)round),
                             n, "round %d: object %d corrupted", round, i);
            } else {
                cr_assert_not(tu_live(drop_h[i]), "round %d: dropped object %d "
                              "survived", round, i);
            }
        }
        for (int i = 0; i < DROP_N; i += 2)
            drop_roots[i] = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* A random graph, mutated and checked across many collections          */

/* A node: header, edges, then an inline payload; or the payload lives in
 * a separate atomic object.  Every byte of a payload follows
 * tu_byte(id, j), and `sum` is a checksum of the header. */
struct gnode {
    uint64_t id;
    uint64_t nedges;
    uint64_t payload_len;
    uint64_t sum;
    unsigned char *atomic_payload;   /* NULL: the payload is inline */
    struct gnode *edges[];
};

#define G_ROOTS 1500
#define G_MAX_NODES 200000
static struct gnode *volatile g_roots[G_ROOTS];

struct g_track {
    GC_hidden_pointer h;
    uint64_t id;
    int dead;                        /* known reclaimed: its slot may be reused */
};
static struct g_track *g_tracks;     /* malloc'ed: not a root */
static size_t g_ntracks;
static uint64_t g_rng = 0x243f6a8885a308d3ull;

static uint64_t g_header_sum(const struct gnode *n)
{
    return (n->id * 0x9e3779b97f4a7c15ull) ^ (n->nedges << 40) ^ n->payload_len ^
           (1ull << 63);
}

static unsigned char *g_payload(struct gnode *n)
{
    return n->atomic_payload ? n->atomic_payload
                             : (unsigned char *)&n->edges[n->nedges];
}

static TU_NOINLINE struct gnode *g_new(void)
{
    uint64_t r = tu_rand(&g_rng);
    size_t nedges = 1 + r % 8;
    size_t len;
    switch ((r >> 8) % 100) {
    case 0 ... 69:  len = (r >> 16) % 200; break;
    case 70 ... 89: len = 200 + (r >> 16) % 4000; break;
    case 90 ... 97: len = 4000 + (r >> 16) % 40000; break;
    default:        len = 40000 + (r >> 16) % 260000; break;
    }
    int atomic = (r >> 40) % 10 < 3;
    size_t bytes = sizeof(struct gnode) + nedges * sizeof(void *) + (atomic ? 0 : len);
    struct gnode *n = GC_malloc(bytes);
    cr_assert_not_null(n, "GC_malloc(%zu)", bytes);
    cr_assert_eq(tu_first_nonzero(n, bytes), bytes, "fresh node not zeroed");
    n->id = g_ntracks;
    n->nedges = nedges;
    n->payload_len = len;
    if (atomic && len) {
        n->atomic_payload = GC_malloc_atomic(len);
        cr_assert_not_null(n->atomic_payload);
    }
    tu_fill_bytes(g_payload(n), len, n->id);
    n->sum = g_header_sum(n);
    cr_assert_lt(g_ntracks, G_MAX_NODES);
    g_tracks[g_ntracks].h = tu_hide(n);
    g_tracks[g_ntracks].id = n->id;
    g_tracks[g_ntracks].dead = 0;
    g_ntracks++;
    return n;
}

/* A random node reachable in a few steps from a random root, or NULL. */
static struct gnode *g_random_reachable(void)
{
    struct gnode *n = g_roots[tu_rand(&g_rng) % G_ROOTS];
    for (int steps = tu_rand(&g_rng) % 4; n && steps > 0; steps--) {
        struct gnode *m = n->edges[tu_rand(&g_rng) % n->nedges];
        if (!m)
            break;
        n = m;
    }
    return n;
}

/* One round of mutation: new nodes replace some roots, edges are
 * rewired, and some nodes are made and dropped at once. */
static TU_NOINLINE void g_mutate(int round)
{
    for (int i = 0; i < 300; i++) {
        struct gnode *n = g_new();
        /* Link the new node to existing ones, then hang it somewhere. */
        for (size_t e = 0; e < n->nedges; e++)
            n->edges[e] = tu_rand(&g_rng) % 3 ? g_random_reachable() : NULL;
        if (i % 2 == 0) {
            g_roots[tu_rand(&g_rng) % G_ROOTS] = n;
        } else {
            struct gnode *m = g_random_reachable();
            if (m)
                m->edges[tu_rand(&g_rng) % m->nedges] = n;
            else
                g_roots[tu_rand(&g_rng) % G_ROOTS] = n;
        }
    }
    for (int i = 0; i < 1000; i++) {
        struct gnode *m = g_random_reachable();
        if (m)
            m->edges[tu_rand(&g_rng) % m->nedges] =
                tu_rand(&g_rng) % 4 ? g_random_reachable() : NULL;
    }
    for (int i = 0; i < 200; i++)
        g_roots[tu_rand(&g_rng) % G_ROOTS] = NULL;
    for (int i = 0; i < 500; i++)
        (void)g_new();                  /* garbage from birth */
    (void)round;
}

/* Walk the graph from the roots, checking every node reached; mark the
 * reached ids in `seen`.  Returns the number of nodes reached, or -1 -
 * (id) of a bad node. */
static TU_NOINLINE long g_verify(unsigned char *seen)
{
    size_t cap = g_ntracks + 16, top = 0;
    struct gnode **stack = malloc(cap * sizeof *stack);   /* not a root */
    cr_assert_not_null(stack);
    memset(seen, 0, g_ntracks);
    long count = 0;
    for (size_t r = 0; r < G_ROOTS; r++) {
        struct gnode *n = g_roots[r];
        if (!n || seen[n->id])
            continue;
        seen[n->id] = 1;
        stack[top++] = n;
        while (top) {
            n = stack[--top];
            count++;
            if (n->id >= g_ntracks || n->sum != g_header_sum(n) ||
                !lfgc_is_live(n) ||
                (n->atomic_payload && !lfgc_is_live(n->atomic_payload)) ||
                tu_check_bytes(g_payload(n), n->payload_len, n->id) != n->payload_len) {
                long bad = -1 - (long)(n->id < g_ntracks ? n->id : 0);
                free(stack);
                return bad;
            }
            for (size_t e = 0; e < n->nedges; e++) {
                struct gnode *m = n->edges[e];
                if (m && m->id < g_ntracks && !seen[m->id]) {
                    seen[m->id] = 1;
                    cr_assert_lt(top, cap);
                    stack[top++] = m;
                }
            }
        }
    }
    free(stack);
    return count;
}

/* Unreachable tracked nodes that are still allocated with their own id
 * (not reused by a newer node). */
static TU_NOINLINE size_t g_count_retained_garbage(const unsigned char *seen)
{
    size_t retained = 0;
    for (size_t i = 0; i < g_ntracks; i++) {
        struct g_track *t = &g_tracks[i];
        if (t->dead || seen[t->id])
            continue;
        struct gnode *n = GC_REVEAL_POINTER(t->h);
        if (lfgc_is_live(n) && n->id == t->id)
            retained++;
        else
            t->dead = 1;
    }
    return retained;
}

Test(reclaim, random_graph_checksums_across_collections)
{
    g_tracks = malloc(G_MAX_NODES * sizeof *g_tracks);
    unsigned char *seen = malloc(G_MAX_NODES);
    cr_assert(g_tracks && seen);
    g_ntracks = 0;
    for (size_t r = 0; r < G_ROOTS; r++) {
        struct gnode *n = g_new();
        g_roots[r] = n;
    }
    GC_word gc0 = GC_get_gc_no();
    size_t total_retained = 0;
    for (int round = 0; round < 25; round++) {
        g_mutate(round);
        tu_collect();
        long reached = g_verify(seen);
        cr_assert_gt(reached, 0, "round %d: node %ld corrupted or reclaimed "
                     "while reachable", round, -1 - reached);
        size_t retained = g_count_retained_garbage(seen);
        total_retained += retained;
        cr_assert_eq(retained, 0, "round %d: %zu unreachable nodes survived the "
                     "collection (%ld reachable, %zu made)", round, retained,
                     reached, g_ntracks);
    }
    cr_assert_geq(GC_get_gc_no() - gc0, 25);
    cr_assert_eq(total_retained, 0);
    free(seen);
    free(g_tracks);
}

/* ------------------------------------------------------------------ */
/* GC_malloc memory is zero, fresh or reused                            */

Test(reclaim, fresh_memory_is_zero_in_every_class)
{
    for (unsigned c = 0; c < TU_NUM_CLASSES && tu_class_sizes[c] <= 4 * MiB; c++) {
        size_t n = tu_class_sizes[c] - 1;
        for (int k = 0; k < 3; k++) {
            char *p = k == 2 ? GC_malloc_uncollectable(n) : GC_malloc(n);
            cr_assert_not_null(p);
            cr_assert_eq(tu_first_nonzero(p, n), n, "class %u: %zu-byte object not "
                         "zeroed", c, n);
            memset(p, 0xa5, n);
            if (k == 2)
                GC_free(p);
        }
    }
}

/* Explicitly freed slots come back zeroed. */
static TU_NOINLINE size_t free_reuse_loop(size_t n, int kind)
{
    enum { ITER = 20000 };
    size_t reused = 0;
    uintptr_t *seen_addr = malloc(ITER * sizeof *seen_addr);
    cr_assert_not_null(seen_addr);
    for (int i = 0; i < ITER; i++) {
        char *p = kind ? GC_malloc_uncollectable(n) : GC_malloc(n);
        cr_assert_not_null(p);
        cr_assert_eq(tu_first_nonzero(p, n), n, "iteration %d: %zu-byte object at %p "
                     "not zeroed", i, n, (void *)p);
        memset(p, 0xab, n);
        seen_addr[i] = (uintptr_t)p;
        GC_free(p);
    }
    /* How many allocations got an address handed out before? */
    for (int i = 1; i < ITER; i++)
        for (int j = i - 1; j >= 0 && j > i - 2000; j--)
            if (seen_addr[j] == seen_addr[i]) {
                reused++;
                break;
            }
    free(seen_addr);
    return reused;
}

Test(reclaim, freed_slots_reused_zeroed)
{
    size_t sizes[] = { 8, 40, 100, 1000, 5000, 12000, 20000, 100000 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t reused = free_reuse_loop(sizes[k], 0);
        cr_assert_gt(reused, 1000, "%zu-byte objects: freed slots were reused only "
                     "%zu times in 20000 allocations", sizes[k], reused);
    }
    size_t reused = free_reuse_loop(100, 1);
    cr_assert_gt(reused, 1000, "uncollectable: freed slots reused %zu times", reused);
}

/* Collected slots come back zeroed, also when the span changes kind. */
#define ZN 5000
static GC_hidden_pointer z_prev[ZN];

static TU_NOINLINE void z_fill(size_t n, int atomic)
{
    for (int i = 0; i < ZN; i++) {
        char *p = atomic ? GC_malloc_atomic(n) : GC_malloc(n);
        cr_assert_not_null(p);
        memset(p, 0xcd, n);
        z_prev[i] = tu_hide(p);
    }
}

static int cmp_word(const void *a, const void *b)
{
    GC_word x = *(const GC_word *)a, y = *(const GC_word *)b;
    return x < y ? -1 : x > y;
}

static TU_NOINLINE size_t z_realloc_check(size_t n)
{
    static GC_hidden_pointer now[ZN];
    for (int i = 0; i < ZN; i++) {
        char *p = GC_malloc(n);
        cr_assert_not_null(p);
        cr_assert_eq(tu_first_nonzero(p, n), n, "reused %zu-byte object %d not zeroed",
                     n, i);
        memset(p, 0x11, n);
        now[i] = tu_hide(p);
    }
    qsort(z_prev, ZN, sizeof z_prev[0], cmp_word);
    size_t common = 0;
    for (int i = 0; i < ZN; i++)
        if (bsearch(&now[i], z_prev, ZN, sizeof z_prev[0], cmp_word))
            common++;
    return common;
}

Test(reclaim, collected_slots_reused_zeroed)
{
    /* Each class is used by one kind first, then by GC_malloc: normal
     * objects filled with 0xcd die and their slots come back; atomic
     * objects' spans die and come back as normal spans, which must be
     * cleared. */
    struct { size_t n; int atomic; } cases[] = {
        { 16, 0 }, { 24, 0 }, { 120, 0 }, { 200, 0 }, { 3000, 0 }, { 9000, 0 },
        { 40, 1 }, { 300, 1 }, { 2000, 1 }, { 7000, 1 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        z_fill(cases[k].n, cases[k].atomic);
        tu_collect();
        size_t common = z_realloc_check(cases[k].n);
        /* Some of the spans may stay with their old kind (a warm-up slot
         * pinned by a false reference keeps its span); at least half a
         * chunk's worth of slots, or a quarter of them, must be reused. */
        size_t slots_per_chunk = TU_CHUNK / (size_t)lowfat_size(GC_REVEAL_POINTER(z_prev[0]));
        size_t want = slots_per_chunk / 2 < ZN / 4 ? slots_per_chunk / 2 : ZN / 4;
        cr_assert_geq(common, want, "%s %zu-byte objects: only %zu of %d slots "
                      "reused after a collection", cases[k].atomic ? "atomic" : "normal",
                      cases[k].n, common, ZN);
        tu_collect();
    }
}

static TU_NOINLINE GC_hidden_pointer large_dirty(size_t n, int atomic)
{
    char *p = atomic ? GC_malloc_atomic(n) : GC_malloc(n);
    cr_assert_not_null(p);
    memset(p, 0xef, n);
    return tu_hide(p);
}

static TU_NOINLINE void large_reuse_check(size_t n, int atomic, GC_hidden_pointer old)
{
    char *q = GC_malloc(n);
    cr_assert_not_null(q);
    cr_assert_eq(tu_hide(q), old, "the %zu-byte slot was not reused", n);
    cr_assert_eq(tu_first_nonzero(q, n), n, "reused %zu-byte object (was %s) "
                 "not zeroed", n, atomic ? "atomic" : "normal");
    memset(q, 0x22, n);
}

Test(reclaim, large_slots_reused_zeroed)
{
    size_t sizes[] = { 64 * KiB, 300 * KiB, 2 * MiB, 5 * MiB };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (int atomic = 0; atomic < 2; atomic++) {
            GC_hidden_pointer old = large_dirty(sizes[k], atomic);
            tu_collect();
            large_reuse_check(sizes[k], atomic, old);
            tu_collect();
        }
    }
}

/* Growing in place after a shrink exposes zeroes, not the old bytes. */
Test(reclaim, realloc_in_place_grow_is_zero)
{
    char *p = GC_malloc(100);          /* class 112 */
    cr_assert_not_null(p);
    memset(p, 0x77, 100);
    char *q = GC_realloc(p, 60);       /* 61 bytes: class 64, moves */
    cr_assert_not_null(q);
    char *r = GC_realloc(q, 50);       /* same class */
    cr_assert_eq(r, q, "a shrink within the class moved the object");
    char *s = GC_realloc(r, 62);       /* grow in place */
    cr_assert_eq(s, r);
    for (int i = 0; i < 50; i++)
        cr_assert_eq((unsigned char)s[i], 0x77);
    for (int i = 50; i < 62; i++)
        cr_assert_eq(s[i], 0, "byte %d after a shrink and a grow in place is %#x, "
                     "not 0", i, (unsigned char)s[i]);
}

/* The same for a large object: shrunk in place, then grown back. */
Test(reclaim, realloc_large_in_place_grow_is_zero)
{
    size_t full = MiB - 100, part = 600 * KiB;
    unsigned char *p = GC_malloc(full);
    cr_assert_not_null(p);
    memset(p, 0x77, full);
    unsigned char *q = GC_realloc(p, part);
    cr_assert_not_null(q);
    unsigned char *r = GC_realloc(q, full);
    cr_assert_not_null(r);
    for (size_t i = 0; i < part; i++)
        cr_assert_eq(r[i], 0x77, "byte %zu lost", i);
    size_t nz = tu_first_nonzero(r + part, full - part);
    cr_assert_eq(nz, full - part, "byte %zu of a large object shrunk to %zu and grown "
                 "back to %zu bytes is %#x, not 0", part + nz, part, full,
                 nz < full - part ? r[part + nz] : 0);
}

/* ------------------------------------------------------------------ */
/* Large objects                                                       */

static void *volatile large_roots[8];

static TU_NOINLINE void large_fill(int i, size_t n, int atomic)
{
    uint64_t *p = atomic ? GC_malloc_atomic(n) : GC_malloc(n);
    cr_assert_not_null(p, "GC_malloc of %zu MiB failed", n >> 20);
    cr_assert_geq(GC_size(p), n);
    cr_assert_eq(GC_base((char *)p + n / 2), p);
    for (size_t j = 0; j < n / 8; j++)
        p[j] = tu_pattern((uint64_t)i, j);
    large_roots[i] = p;
}

static TU_NOINLINE size_t large_check(int i, size_t n)
{
    const uint64_t *p = (const uint64_t *)large_roots[i];
    for (size_t j = 0; j < n / 8; j++)
        if (p[j] != tu_pattern((uint64_t)i, j))
            return j;
    return n / 8;
}

Test(reclaim, large_objects_intact_and_pages_given_back, .timeout = 60)
{
    const size_t sizes[] = { 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB };
    /* Those whose class (up to twice the size) fits in a region: all but
     * the last with 256 MiB regions (--with-region-shift=28). */
    int n = 0;
    while (n < (int)(sizeof sizes / sizeof sizes[0]) && 2 * sizes[n] <= LOWFAT_REGION_SIZE)
        n++;
    cr_assert_geq(n, 4);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        large_fill(i, sizes[i], i == n - 1);
        total += sizes[i];
    }
    for (int round = 0; round < 2; round++) {
        tu_collect();
        /* Garbage in between. */
        for (int k = 0; k < 20; k++)
            memset(GC_malloc(MiB), 0x33, MiB);
    }
    for (int i = 0; i < n; i++)
        cr_assert_eq(large_check(i, sizes[i]), sizes[i] / 8,
                     "%zu MiB object corrupted", sizes[i] >> 20);
    tu_collect();
    size_t heap0 = GC_get_heap_size(), unmapped0 = GC_get_unmapped_bytes();
    size_t rss0 = tu_rss_bytes();
    GC_hidden_pointer h[8];
    for (int i = 0; i < n; i++) {
        h[i] = tu_hide((void *)large_roots[i]);
        large_roots[i] = NULL;
    }
    tu_collect();
    /* An object that a false reference in some library's static data
     * points to is rightly kept (the warm-up covers classes up to 1 MiB
     * only): leave it out of the totals.  Any other survivor is an error. */
    for (int i = 0; i < n; i++) {
        if (!tu_live(h[i]))
            continue;
        uintptr_t lo = (uintptr_t)GC_REVEAL_POINTER(h[i]);
        cr_assert_gt(tu_foreign_refs(lo, lo + lowfat_size((void *)lo)), 0,
                     "dead %zu MiB object not reclaimed", sizes[i] >> 20);
        total -= sizes[i];
    }
    size_t heap1 = GC_get_heap_size(), unmapped1 = GC_get_unmapped_bytes();
    size_t rss1 = tu_rss_bytes();
    cr_assert_geq(unmapped1, unmapped0 + total, "GC_get_unmapped_bytes went from %zu "
                  "to %zu KiB after %zu KiB of large objects died", unmapped0 >> 10,
                  unmapped1 >> 10, total >> 10);
    cr_assert_leq(heap1 + total, heap0, "GC_get_heap_size went from %zu to %zu KiB "
                  "after %zu KiB of large objects died and were unmapped",
                  heap0 >> 10, heap1 >> 10, total >> 10);
    cr_assert_leq(rss1 + total - 16 * MiB, rss0, "RSS went from %zu to %zu MiB: the "
                  "pages of %zu MiB of dead large objects were not given back",
                  rss0 >> 20, rss1 >> 20, total >> 20);
}

/* ------------------------------------------------------------------ */
/* Uncollectable objects do not leak                                    */

/* Uncollectable objects allocated between collections. */
static void *volatile unc_keep[600];

Test(reclaim, uncollectable_allocation_does_not_leak_across_collections)
{
    size_t heap0 = GC_get_heap_size();
    for (int i = 0; i < 600; i++) {
        unc_keep[i] = GC_malloc_uncollectable(16);
        cr_assert_not_null(unc_keep[i]);
        GC_gcollect();
    }
    /* 600 objects of 32 bytes: the heap must not grow by more than a few
     * spans. */
    size_t heap1 = GC_get_heap_size();
    cr_assert_leq(heap1, heap0 + 2 * MiB, "600 uncollectable 16-byte objects, one "
                  "per collection, grew the heap from %zu to %zu KiB",
                  heap0 >> 10, heap1 >> 10);
    for (int i = 0; i < 600; i++)
        cr_assert(lfgc_is_live((void *)unc_keep[i]));
    for (int i = 0; i < 600; i++)
        GC_free((void *)unc_keep[i]);
}

Test(reclaim, freed_uncollectable_slots_are_reused_across_collections)
{
    size_t heap0 = GC_get_heap_size();
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 500; i++) {
            unc_keep[i] = GC_malloc_uncollectable(1000);
            cr_assert_not_null(unc_keep[i]);
        }
        for (int i = 0; i < 500; i++)
            GC_free((void *)unc_keep[i]);
        GC_gcollect();
    }
    /* 500 KiB live at most, at any time. */
    size_t heap1 = GC_get_heap_size();
    cr_assert_leq(heap1, heap0 + 4 * MiB, "allocating and freeing 500 uncollectable "
                  "objects per collection grew the heap from %zu to %zu KiB",
                  heap0 >> 10, heap1 >> 10);
}

/* GC_gcollect_and_unmap gives back the pages of every free span. */
static void *volatile z_roots[3][ZN];

static TU_NOINLINE void z_fill_rooted(int set, size_t n, int atomic)
{
    for (int i = 0; i < ZN; i++) {
        char *p = atomic ? GC_malloc_atomic(n) : GC_malloc(n);
        cr_assert_not_null(p);
        memset(p, 0xcd, n);
        z_roots[set][i] = p;
    }
}

Test(reclaim, gcollect_and_unmap_releases_small_spans)
{
    /* 1024 divides a 64 KiB chunk; 3072 and 4112 do not, so that some of
     * their slots straddle two spans (whose pages are given back only
     * where wholly inside the span's own slots). */
    z_fill_rooted(0, 1000, 0);
    z_fill_rooted(1, 3000, 1);
    z_fill_rooted(2, 4111, 0);
    tu_collect();
    size_t unmapped0 = GC_get_unmapped_bytes();
    memset((void *)z_roots, 0, sizeof z_roots);
    tu_clear_stack();
    GC_gcollect_and_unmap();
    size_t unmapped1 = GC_get_unmapped_bytes();
    /* 5000 objects each of 1024, 3072 and 4112 bytes died: 40 MiB. */
    cr_assert_geq(unmapped1, unmapped0 + 38 * MiB, "GC_gcollect_and_unmap: unmapped "
                  "bytes went from %zu to %zu KiB after 40 MiB of objects died",
                  unmapped0 >> 10, unmapped1 >> 10);
    /* And the memory is usable again, zeroed (also where the old contents
     * survived in pages shared with a neighbouring span). */
    z_realloc_check(1000);
    z_realloc_check(3000);
    z_realloc_check(4111);
}
