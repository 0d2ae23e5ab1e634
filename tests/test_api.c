/* test_api.c: the bdwgc-compatible calls, one by one.
 *
 * GC_base/GC_size in every size class, GC_realloc across every class
 * boundary (contents and kind kept), GC_memalign and GC_posix_memalign,
 * GC_strdup/GC_strndup, GC_enable/GC_disable, GC_get_gc_no, collection
 * events, statistics, and the out-of-memory path.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <errno.h>
#include <unistd.h>

TestSuite(api, .init = tu_warm_up);

/* ------------------------------------------------------------------ */
/* GC_base and GC_size in every class                                  */

/* The smallest and the largest request that land in class c (one extra
 * byte per object: all interior pointers are on by default). */
static size_t min_request(unsigned c)
{
    return c == 0 ? 1 : tu_class_sizes[c - 1];
}

static size_t max_request(unsigned c)
{
    return tu_class_sizes[c] - 1;
}

/* Large objects are allocated atomic, so that neither the test nor a
 * collection touches their memory: an 8 GiB object costs address space
 * only. */
static void *alloc_in(unsigned c, size_t n)
{
    return tu_class_sizes[c] > MiB ? GC_malloc_atomic(n) : GC_malloc(n);
}

/* Call check(c, n, p) on a fresh object p of the smallest and of the
 * largest request n of every class, collection held off; p is freed after. */
static void each_class_extreme(void (*check)(unsigned c, size_t n, char *p))
{
    GC_disable();                /* no collection needs to scan 8 GiB objects */
    for (unsigned c = 0; c < TU_NUM_CLASSES; c++) {
        if (!tu_class_exists(c))
            continue;
        size_t reqs[2] = { min_request(c), max_request(c) };
        for (int k = 0; k < 2; k++) {
            size_t n = reqs[k];
            char *p = alloc_in(c, n);
            cr_assert_not_null(p, "class %u: allocation of %zu bytes failed", c, n);
            check(c, n, p);
            GC_free(p);
        }
    }
    GC_enable();
}

static void check_base_and_size(unsigned c, size_t n, char *p)
{
    cr_assert_eq(lowfat_size(p), tu_class_sizes[c], "%zu-byte request in class "
                 "of %llu bytes, expected %llu", n,
                 (unsigned long long)lowfat_size(p),
                 (unsigned long long)tu_class_sizes[c]);
    size_t offs[] = { 0, 1, n / 2, n - 1 };
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        cr_assert_eq(GC_base(p + offs[i]), p, "class %u, %zu-byte object: "
                     "GC_base(p + %zu) = %p, p = %p", c, n, offs[i],
                     GC_base(p + offs[i]), (void *)p);
        cr_assert(GC_is_heap_ptr(p + offs[i]));
    }
    size_t sz = GC_size(p);
    cr_assert_geq(sz, n, "class %u: GC_size = %zu for a %zu-byte request", c, sz, n);
    cr_assert_leq(sz, tu_class_sizes[c], "class %u: GC_size = %zu exceeds the slot", c, sz);
    if (tu_class_sizes[c] <= 16 * MiB) {
        p[0] = 1;
        p[n - 1] = 2;
    }
}

Test(api, base_and_size_in_every_class)
{
    each_class_extreme(check_base_and_size);
}

/* With all interior pointers on, each object has one extra byte: a
 * pointer just past the requested size is inside the object, in every
 * class.  cr_expect: list every class where this fails. */
static void check_one_past_end(unsigned c, size_t n, char *p)
{
    cr_expect_eq(GC_base(p + n), p, "class %u (%llu bytes), %zu-byte object: "
                 "GC_base(p + %zu) = %p, not p = %p", c,
                 (unsigned long long)tu_class_sizes[c], n, n, GC_base(p + n), (void *)p);
    cr_expect_gt(GC_size(p), n, "class %u: GC_size = %zu leaves no room for "
                 "the extra byte of a %zu-byte object", c, GC_size(p), n);
}

Test(api, base_of_one_past_end_in_every_class)
{
    each_class_extreme(check_one_past_end);
}

int api_global;

Test(api, base_of_non_heap_pointers_is_null)
{
    int local;
    char *m = malloc(64);
    cr_assert_not_null(m);
    void *probes[] = {
        NULL, &local, &api_global, m, m + 10, (void *)(uintptr_t)&GC_malloc,
        /* Regions this test does not use. */
        (void *)(LOWFAT_HEAP_END - 1),
        (void *)(LOWFAT_HEAP_START + 40 * LOWFAT_REGION_SIZE + 4096),
        (void *)(LOWFAT_HEAP_START + 45 * LOWFAT_REGION_SIZE),
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        cr_assert_null(GC_base(probes[i]), "GC_base(%p) of a non-heap address", probes[i]);
        cr_assert_eq(GC_size(probes[i]), 0, "GC_size(%p)", probes[i]);
        cr_assert_not(GC_is_heap_ptr(probes[i]), "GC_is_heap_ptr(%p)", probes[i]);
        cr_assert_not(lfgc_is_live(probes[i]), "lfgc_is_live(%p)", probes[i]);
    }
    /* Past the used part of a region in use. */
    char *p = GC_malloc(5000);
    cr_assert_not_null(p);
    void *beyond = (void *)lowfat_heap_top[lowfat_index(p)];
    cr_assert_null(GC_base(beyond), "GC_base(%p), past the used part of a region",
                   beyond);
    /* A large object's slot past its pages. */
    char *big = GC_malloc_atomic(3 * MiB);       /* 4 MiB class, 3 MiB used */
    cr_assert_not_null(big);
    cr_assert_eq(GC_base(big + 3 * MiB - 1), big);
    free(m);
}

/* ------------------------------------------------------------------ */
/* GC_realloc                                                          */

static size_t check_prefix(const unsigned char *p, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (p[j] != tu_byte(7, j))
            return j;
    return n;
}

/* Resize p (holding `have` valid pattern bytes) to n bytes, check the
 * contents, fill the rest. */
static unsigned char *resize(unsigned char *p, size_t *have, size_t n, int zero_tail)
{
    unsigned char *q = GC_realloc(p, n);
    cr_assert_not_null(q, "GC_realloc(%p, %zu) failed", (void *)p, n);
    cr_assert_geq(GC_size(q), n, "GC_size %zu after GC_realloc to %zu", GC_size(q), n);
    size_t keep = *have < n ? *have : n;
    size_t bad = check_prefix(q, keep);
    /* cr_expect: report every boundary that loses data, then repair the
     * contents so that the next steps are checked independently. */
    cr_expect_eq(bad, keep, "GC_realloc from %zu to %zu bytes lost byte %zu "
                 "(%#x, expected %#x)", *have, n, bad, bad < keep ? q[bad] : 0,
                 tu_byte(7, bad));
    if (zero_tail && n > keep)
        cr_expect_eq(tu_first_nonzero(q + keep, n - keep), n - keep,
                     "GC_realloc from %zu to %zu: new bytes not zeroed", *have, n);
    for (size_t j = bad; j < n; j++)
        q[j] = tu_byte(7, j);
    *have = n;
    return q;
}

Test(api, realloc_through_every_class_boundary, .timeout = 60)
{
    size_t have = 1;
    unsigned char *p = GC_malloc(1);
    cr_assert_not_null(p);
    p[0] = tu_byte(7, 0);
    /* Up through every boundary to 16 MiB... */
    unsigned top = 0;
    for (unsigned c = 0; c < TU_NUM_CLASSES && tu_class_sizes[c] <= 16 * MiB; c++) {
        p = resize(p, &have, max_request(c), 1);
        cr_assert_eq(lowfat_size(p), tu_class_sizes[c]);
        p = resize(p, &have, max_request(c) + 1, 1);
        cr_assert_eq(lowfat_size(p), tu_class_sizes[c + 1]);
        top = c + 1;
    }
    /* ...a collection in the middle (the object is live: on the stack)... */
    GC_gcollect();
    cr_assert(lfgc_is_live(p));
    cr_assert_eq(check_prefix(p, have), have);
    /* ...and down again. */
    for (unsigned c = top; c-- > 0;) {
        p = resize(p, &have, max_request(c) + 1, 0);
        cr_assert_eq(lowfat_size(p), tu_class_sizes[c + 1]);
        p = resize(p, &have, max_request(c), 0);
        cr_assert_eq(lowfat_size(p), tu_class_sizes[c]);
    }
    p = resize(p, &have, 1, 0);
    cr_assert_eq(lowfat_size(p), 16);
}

/* Large objects whose size is a whole number of pages. */
Test(api, realloc_large_page_multiple_keeps_every_byte)
{
    size_t sizes[] = { 64 * KiB, 1 * MiB, 4 * MiB };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t have = sizes[k];
        unsigned char *p = GC_malloc(have);
        cr_assert_not_null(p);
        for (size_t j = 0; j < have; j++)
            p[j] = tu_byte(7, j);
        p = resize(p, &have, 2 * sizes[k] + 100, 1);
        p = resize(p, &have, sizes[k] / 2, 0);
    }
}

static TU_NOINLINE GC_hidden_pointer new_target(void)
{
    char *t = GC_malloc(500);
    cr_assert_not_null(t);
    tu_fill_bytes(t, 500, 3);
    return tu_hide(t);
}

static TU_NOINLINE void point_all_words_to(void *volatile *holder, size_t n,
                                           GC_hidden_pointer t)
{
    void **p = (void **)*holder;
    for (size_t i = 0; i < n / sizeof(void *); i++)
        p[i] = GC_REVEAL_POINTER(t);
}

static TU_NOINLINE void realloc_slot(void *volatile *slot, size_t n)
{
    void *q = GC_realloc((void *)*slot, n);
    cr_assert_not_null(q, "GC_realloc to %zu failed", n);
    *slot = q;
}

static void *volatile realloc_holder;

/* An atomic object stays atomic through GC_realloc (it never retains what
 * it points to); a normal one stays normal; an uncollectable one stays
 * uncollectable. */
Test(api, realloc_keeps_the_kind)
{
    size_t steps[] = { 10, 100, 1000, 12000, 20000, 200000, 50, 8 };
    for (int kind = 0; kind < 3; kind++) {
        GC_disable();
        realloc_holder = kind == 0 ? GC_malloc_atomic(8)
                       : kind == 1 ? GC_malloc(8) : GC_malloc_uncollectable(8);
        GC_enable();
        cr_assert_not_null(realloc_holder);
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            realloc_slot(&realloc_holder, steps[s]);
            GC_disable();
            GC_hidden_pointer t = new_target();
            point_all_words_to(&realloc_holder, steps[s], t);
            GC_enable();
            if (kind == 2) {
                /* The only reference to the uncollectable object: hidden. */
                GC_hidden_pointer h = tu_hide((void *)realloc_holder);
                realloc_holder = NULL;
                tu_collect();
                cr_assert(tu_live(h), "an uncollectable object was reclaimed after "
                          "GC_realloc to %zu bytes", steps[s]);
                cr_assert(tu_live(t), "an uncollectable object does not retain after "
                          "GC_realloc to %zu bytes", steps[s]);
                realloc_holder = GC_REVEAL_POINTER(h);
            } else {
                tu_collect();
                cr_assert(lfgc_is_live((void *)realloc_holder));
                if (kind == 0)
                    cr_assert_not(tu_live(t), "an atomic object retained what it "
                                  "points to after GC_realloc to %zu bytes: it is no "
                                  "longer atomic", steps[s]);
                else
                    cr_assert(tu_live(t), "a normal object stopped retaining after "
                              "GC_realloc to %zu bytes", steps[s]);
            }
        }
        if (kind == 2)
            GC_free((void *)realloc_holder);
        realloc_holder = NULL;
    }
}

Test(api, realloc_null_and_zero)
{
    char *p = GC_realloc(NULL, 100);
    cr_assert_not_null(p, "GC_realloc(NULL, 100)");
    cr_assert_eq(tu_first_nonzero(p, 100), 100);
    cr_assert_geq(GC_size(p), 100);
    cr_assert(lfgc_is_live(p));
    char *q = GC_realloc(p, 0);
    cr_assert_null(q, "GC_realloc(p, 0) returned %p", (void *)q);
    cr_assert_not(lfgc_is_live(p), "GC_realloc(p, 0) did not free p");
    /* Freed: the slot comes back. */
    int found = 0;
    for (int i = 0; i < 10000 && !found; i++)
        found = GC_malloc(100) == p;
    cr_assert(found, "the slot freed by GC_realloc(p, 0) was never reused");
}

/* ------------------------------------------------------------------ */
/* GC_memalign, GC_posix_memalign                                      */

Test(api, memalign_alignments)
{
    for (size_t align = 16; align <= MiB; align <<= 1) {
        size_t sizes[] = { 1, 100, align - 1, align, align + 1, 3 * align };
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            size_t n = sizes[k];
            char *p = GC_memalign(align, n);
            cr_assert_not_null(p, "GC_memalign(%zu, %zu)", align, n);
            cr_assert_eq((uintptr_t)p % align, 0, "GC_memalign(%zu, %zu) = %p", align,
                         n, (void *)p);
            cr_assert_geq(GC_size(p), n);
            cr_assert_eq(GC_base(p), p);
            cr_assert_eq(tu_first_nonzero(p, n), n, "GC_memalign memory not zeroed");
            memset(p, 0x5c, n);
            void *q = NULL;
            int rc = GC_posix_memalign(&q, align, n);
            cr_assert_eq(rc, 0, "GC_posix_memalign(%zu, %zu) = %d", align, n, rc);
            cr_assert_not_null(q);
            cr_assert_eq((uintptr_t)q % align, 0, "GC_posix_memalign(%zu, %zu) = %p",
                         align, n, q);
            cr_assert_geq(GC_size(q), n);
            memset(q, 0x5d, n);
            cr_assert_eq((unsigned char)p[n - 1], 0x5c);
        }
    }
    /* Small alignments are plain allocations. */
    for (size_t align = 1; align < 16; align <<= 1) {
        char *p = GC_memalign(align, 24);
        cr_assert_not_null(p);
        cr_assert_eq((uintptr_t)p % align, 0);
    }
}

Test(api, posix_memalign_einval)
{
    size_t bad[] = { 0, 1, 2, 4, 3, 12, 24, 48, 100, 4097, (1u << 20) + 8 };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        void *q = (void *)0x1234;
        int rc = GC_posix_memalign(&q, bad[k], 64);
        cr_assert_eq(rc, EINVAL, "GC_posix_memalign(alignment %zu) = %d, not EINVAL",
                     bad[k], rc);
    }
    void *q = NULL;
    cr_assert_eq(GC_posix_memalign(&q, sizeof(void *), 10), 0);
    cr_assert_not_null(q);
}

/* Make n objects with make(i), collection held off meanwhile, drop them
 * all, collect: none may survive. */
#define MAX_DROPPED 100
static void assert_dropped_objects_collected(GC_hidden_pointer (*make)(int), int n,
                                             const char *what)
{
    GC_hidden_pointer h[MAX_DROPPED];
    cr_assert_leq(n, MAX_DROPPED);
    GC_disable();
    for (int i = 0; i < n; i++)
        h[i] = make(i);
    GC_enable();
    tu_collect();
    for (int i = 0; i < n; i++)
        cr_assert_not(tu_live(h[i]), "%s %d not reclaimed", what, i);
}

/* Aligned objects are collectable like any other. */
static TU_NOINLINE GC_hidden_pointer new_aligned(int i)
{
    char *p = GC_memalign((size_t)64 << (2 * i), 100);
    cr_assert_not_null(p);
    return tu_hide(p);
}

Test(api, memalign_objects_are_collected)
{
    assert_dropped_objects_collected(new_aligned, 6, "aligned object");
}

/* ------------------------------------------------------------------ */
/* GC_strdup, GC_strndup                                               */

Test(api, strdup_strndup)
{
    const char *s = "lfgc: a conservative collector on low-fat pointers";
    size_t len = strlen(s);
    char *d = GC_strdup(s);
    cr_assert_not_null(d);
    cr_assert_str_eq(d, s);
    cr_assert_neq(d, s);
    cr_assert_geq(GC_size(d), len + 1);
    cr_assert_eq(GC_base(d), d);

    char *e = GC_strdup("");
    cr_assert_not_null(e);
    cr_assert_str_eq(e, "");

    char *n3 = GC_strndup(s, 4);
    cr_assert_not_null(n3);
    cr_assert_str_eq(n3, "lfgc");
    cr_assert_geq(GC_size(n3), 5);

    char *nall = GC_strndup(s, 1000);
    cr_assert_not_null(nall);
    cr_assert_str_eq(nall, s);

    char *n0 = GC_strndup(s, 0);
    cr_assert_not_null(n0);
    cr_assert_str_eq(n0, "");

    /* A source that is not NUL-terminated within n. */
    char buf[8] = { 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h' };
    char *nb = GC_strndup(buf, 8);
    cr_assert_not_null(nb);
    cr_assert_str_eq(nb, "abcdefgh");

    /* Long strings cross into the large classes. */
    size_t big = 300 * KiB;
    char *src = malloc(big + 1);
    cr_assert_not_null(src);
    for (size_t i = 0; i < big; i++)
        src[i] = (char)('a' + i % 26);
    src[big] = 0;
    char *bd = GC_strdup(src);
    cr_assert_not_null(bd);
    cr_assert_eq(strcmp(bd, src), 0);
    char *bn = GC_strndup(src, big - 5);
    cr_assert_not_null(bn);
    cr_assert_eq(strlen(bn), big - 5);
    cr_assert_eq(strncmp(bn, src, big - 5), 0);
    free(src);
}

/* The copies are collectable. */
static TU_NOINLINE GC_hidden_pointer dup_hidden(int n)
{
    char buf[64];
    snprintf(buf, sizeof buf, "string number %d", n);
    char *d = n % 2 ? GC_strdup(buf) : GC_strndup(buf, 10);
    cr_assert_not_null(d);
    return tu_hide(d);
}

Test(api, strdup_copies_are_collected)
{
    assert_dropped_objects_collected(dup_hidden, 100, "string copy");
}

/* ------------------------------------------------------------------ */
/* GC_enable, GC_disable, GC_get_gc_no                                 */

static TU_NOINLINE void allocate_garbage(size_t bytes)
{
    for (size_t done = 0; done < bytes; done += 1000) {
        char *p = GC_malloc(1000);
        cr_assert_not_null(p);
        p[0] = 1;
    }
}

Test(api, gc_no_counts_collections)
{
    GC_word n0 = GC_get_gc_no();
    cr_assert_eq(n0, GC_gc_no);
    for (int i = 1; i <= 5; i++) {
        GC_gcollect();
        cr_assert_eq(GC_get_gc_no(), n0 + (GC_word)i, "GC_get_gc_no after %d "
                     "collections: %lu (from %lu)", i, (unsigned long)GC_get_gc_no(),
                     (unsigned long)n0);
    }
    struct lfgc_stats st;
    lfgc_get_stats(&st);
    cr_assert_eq(st.collections, GC_get_gc_no());
    /* Allocation collects on its own. */
    allocate_garbage(64 * MiB);
    cr_assert_gt(GC_get_gc_no(), n0 + 5, "64 MiB of garbage caused no collection");
    uint64_t pauses[16];
    cr_assert_gt(lfgc_get_pauses(pauses, 16), 0);
}

Test(api, disable_prevents_collection)
{
    cr_assert_not(GC_is_disabled());
    GC_gcollect();
    GC_word n0 = GC_get_gc_no();
    GC_disable();
    cr_assert(GC_is_disabled());
    allocate_garbage(64 * MiB);
    GC_gcollect();
    cr_assert_eq(GC_get_gc_no(), n0, "%lu collections while disabled",
                 (unsigned long)(GC_get_gc_no() - n0));
    cr_assert_geq(GC_get_heap_size(), 64 * MiB, "the heap did not grow while "
                  "collection was disabled");
    /* Nesting: two disables need two enables. */
    GC_disable();
    GC_enable();
    cr_assert(GC_is_disabled());
    allocate_garbage(8 * MiB);
    GC_gcollect();
    cr_assert_eq(GC_get_gc_no(), n0);
    GC_enable();
    cr_assert_not(GC_is_disabled());
    GC_gcollect();
    cr_assert_eq(GC_get_gc_no(), n0 + 1, "no collection after GC_enable");
    /* The heap grew to some 80 MiB while collection was off: allocation
     * collects again once it has used that up. */
    allocate_garbage(256 * MiB);
    cr_assert_gt(GC_get_gc_no(), n0 + 1, "no automatic collection after GC_enable");
}

/* ------------------------------------------------------------------ */
/* Collection events                                                   */

#define MAX_EVENTS 256
static GC_EventType events[MAX_EVENTS];
static int nevents;
static int nstarts;

static void on_event(GC_EventType e)
{
    if (nevents < MAX_EVENTS)
        events[nevents] = e;
    nevents++;
}

static void on_start(void)
{
    nstarts++;
}

static int index_of(const GC_EventType *ev, int n, GC_EventType e)
{
    int at = -1;
    for (int i = 0; i < n; i++)
        if (ev[i] == e) {
            cr_assert_eq(at, -1, "event %d reported twice in one collection", (int)e);
            at = i;
        }
    return at;
}

static void check_one_collection(const GC_EventType *ev, int n)
{
    cr_assert_geq(n, 6, "only %d events in a collection", n);
    cr_assert_eq(ev[0], GC_EVENT_START, "first event is %d, not GC_EVENT_START", ev[0]);
    cr_assert_eq(ev[n - 1], GC_EVENT_END, "last event is %d, not GC_EVENT_END", ev[n - 1]);
    int ms = index_of(ev, n, GC_EVENT_MARK_START), me = index_of(ev, n, GC_EVENT_MARK_END);
    int rs = index_of(ev, n, GC_EVENT_RECLAIM_START);
    int re = index_of(ev, n, GC_EVENT_RECLAIM_END);
    cr_assert(ms > 0 && me > ms, "MARK_START at %d, MARK_END at %d", ms, me);
    cr_assert(rs > me && re > rs, "RECLAIM_START at %d, RECLAIM_END at %d (mark end "
              "at %d)", rs, re, me);
    int pre_stop = index_of(ev, n, GC_EVENT_PRE_STOP_WORLD);
    int post_stop = index_of(ev, n, GC_EVENT_POST_STOP_WORLD);
    int pre_start = index_of(ev, n, GC_EVENT_PRE_START_WORLD);
    int post_start = index_of(ev, n, GC_EVENT_POST_START_WORLD);
    if (pre_stop >= 0 || post_stop >= 0) {
        cr_assert(pre_stop > 0 && post_stop > pre_stop && ms > post_stop,
                  "world stop events out of order: %d %d (mark start %d)",
                  pre_stop, post_stop, ms);
        cr_assert(pre_start > me && post_start > pre_start && post_start < n - 1,
                  "world start events out of order: %d %d (mark end %d)",
                  pre_start, post_start, me);
    }
    cr_assert_eq(index_of(ev, n, GC_EVENT_START), 0);
    cr_assert_eq(index_of(ev, n, GC_EVENT_END), n - 1);
}

Test(api, collection_events_in_order)
{
    GC_set_on_collection_event(on_event);
    GC_set_start_callback(on_start);
    cr_assert_eq(GC_get_on_collection_event(), on_event);
    cr_assert_eq(GC_get_start_callback(), on_start);
    for (int round = 0; round < 3; round++) {
        nevents = 0;
        nstarts = 0;
        GC_word n0 = GC_get_gc_no();
        GC_gcollect();
        cr_assert_eq(GC_get_gc_no(), n0 + 1);
        cr_assert_leq(nevents, MAX_EVENTS);
        check_one_collection(events, nevents);
        cr_assert_eq(nstarts, 1, "start callback called %d times", nstarts);
    }
    /* Automatic collections report events too: split them at START. */
    nevents = 0;
    GC_word n0 = GC_get_gc_no();
    allocate_garbage(32 * MiB);
    GC_word collections = GC_get_gc_no() - n0;
    cr_assert_gt(collections, 0);
    int starts = 0, from = 0;
    for (int i = 0; i < nevents && i < MAX_EVENTS; i++) {
        if (events[i] == GC_EVENT_END) {
            check_one_collection(events + from, i + 1 - from);
            from = i + 1;
            starts++;
        }
    }
    if (nevents <= MAX_EVENTS)
        cr_assert_eq((GC_word)starts, collections, "%d event sequences for %lu "
                     "collections", starts, (unsigned long)collections);
    GC_set_on_collection_event(NULL);
    GC_set_start_callback(NULL);
    nevents = 0;
    GC_gcollect();
    cr_assert_eq(nevents, 0, "events reported after the callback was removed");
}

/* ------------------------------------------------------------------ */
/* Statistics                                                          */

/* In a fresh process (no warm-up): the bytes of the thread's last
 * refills, which it adds to the shared count a few refills at a time,
 * are counted as well. */
Test(api_fresh, bytes_since_gc_counts_every_allocation)
{
    GC_INIT();
    GC_gcollect();
    size_t before = GC_get_bytes_since_gc();
    GC_disable();
    for (int i = 0; i < 1000; i++)
        cr_assert_not_null(GC_malloc(1000));
    GC_enable();
    size_t since = GC_get_bytes_since_gc();
    cr_assert_geq(since - before, 1000 * 1000, "%zu bytes since the collection after "
                  "1000 allocations of 1000 bytes", since - before);
    cr_assert_lt(since - before, 1100 * 1024, "%zu bytes since the collection", since - before);
}

/* Slots freed with GC_free wait on the thread's list, where a collection
 * marks them so that its sweep leaves them alone: they are free, not
 * live, and the live bytes it reports (which the heap's growth follows)
 * must leave them out. */
static void *live_objs[400];

Test(api, live_bytes_leave_out_the_thread_lists_free_slots)
{
    GC_INIT();
    enum { N = 400, FREED = 100, SIZE = 64 };
    for (int i = 0; i < N; i++) {
        live_objs[i] = GC_malloc(SIZE - 1);     /* the extra byte: class 64 */
        cr_assert_not_null(live_objs[i]);
        memset(live_objs[i], i & 0xff, SIZE - 1);
    }
    GC_gcollect();
    struct lfgc_stats a, b;
    lfgc_get_stats(&a);
    /* Fewer than the list takes before its first trim. */
    for (int i = 0; i < FREED; i++) {
        GC_free(live_objs[i]);
        live_objs[i] = NULL;
    }
    GC_gcollect();
    lfgc_get_stats(&b);
    for (int i = FREED; i < N; i++)
        for (int k = 0; k < SIZE - 1; k++)
            cr_assert_eq(((unsigned char *)live_objs[i])[k], i & 0xff, "object %d damaged", i);
    uint64_t drop = a.live_bytes > b.live_bytes ? a.live_bytes - b.live_bytes : 0;
    cr_assert_geq(drop, (uint64_t)FREED * SIZE * 9 / 10, "live bytes %llu -> %llu after %d "
                  "objects of %d bytes were freed", (unsigned long long)a.live_bytes,
                  (unsigned long long)b.live_bytes, FREED, SIZE);
    cr_assert_leq(drop, (uint64_t)FREED * SIZE * 11 / 10 + 4096, "live bytes %llu -> %llu",
                  (unsigned long long)a.live_bytes, (unsigned long long)b.live_bytes);
}

Test(api, statistics_are_consistent)
{
    GC_gcollect();
    cr_assert_lt(GC_get_bytes_since_gc(), 64 * KiB, "%zu bytes since a collection "
                 "that just happened", GC_get_bytes_since_gc());
    size_t total0 = GC_get_total_bytes();
    GC_disable();
    for (int i = 0; i < 1000; i++)
        cr_assert_not_null(GC_malloc(1000));
    GC_enable();
    size_t total1 = GC_get_total_bytes();
    cr_assert_geq(total1 - total0, 1000 * 1000, "GC_get_total_bytes grew by %zu after "
                  "1000 allocations of 1000 bytes", total1 - total0);
    cr_assert_geq(GC_get_bytes_since_gc(), 1000 * 1000);
    GC_word heap, fr, unm, since, total;
    GC_get_heap_usage_safe(&heap, &fr, &unm, &since, &total);
    cr_assert_eq(heap, GC_get_heap_size());
    cr_assert_eq(fr, GC_get_free_bytes());
    cr_assert_eq(unm, GC_get_unmapped_bytes());
    cr_assert_eq(since, GC_get_bytes_since_gc());
    cr_assert_eq(total, GC_get_total_bytes());
    cr_assert_leq(fr, heap);
    GC_get_heap_usage_safe(NULL, NULL, NULL, NULL, NULL);
    struct lfgc_stats st;
    lfgc_get_stats(&st);
    cr_assert_eq(st.heap_bytes, GC_get_heap_size());
    cr_assert_eq(st.total_allocated, GC_get_total_bytes());
    cr_assert_geq(st.max_pause_ns, st.last_pause_ns);
    cr_assert_geq(st.total_pause_ns, st.max_pause_ns);
}

Test(api, expand_hp_grows_the_heap)
{
    size_t h0 = GC_get_heap_size();
    cr_assert(GC_expand_hp(64 * MiB));
    cr_assert_geq(GC_get_heap_size(), h0 + 64 * MiB, "GC_expand_hp(64 MiB): heap "
                  "from %zu to %zu KiB", h0 >> 10, GC_get_heap_size() >> 10);
    /* Within the expanded heap, allocation does not collect. */
    GC_word n0 = GC_get_gc_no();
    allocate_garbage(32 * MiB);
    cr_assert_eq(GC_get_gc_no(), n0, "collections within an expanded heap");
}

/* GC_expand_hp(n) grows the heap by n also when some of it has been
 * given back to the OS. */
static void *volatile expand_keep[20000];

static TU_NOINLINE void big_garbage(void)
{
    char *p = GC_malloc(16 * MiB);
    cr_assert_not_null(p);
    memset(p, 1, 16 * MiB);
}

Test(api, expand_hp_after_unmapping)
{
    big_garbage();
    tu_collect();
    cr_assert_geq(GC_get_unmapped_bytes(), 16 * MiB, "a dead 16 MiB object was not "
                  "given back");
    for (int i = 0; i < 20000; i++)
        expand_keep[i] = GC_malloc(1000);
    size_t h0 = GC_get_heap_size(), u0 = GC_get_unmapped_bytes();
    cr_assert(GC_expand_hp(64 * MiB));
    size_t h1 = GC_get_heap_size();
    cr_assert_geq(h1, h0 + 64 * MiB, "GC_expand_hp(64 MiB) grew GC_get_heap_size from "
                  "%zu to %zu KiB (by %zu KiB) with %zu KiB unmapped", h0 >> 10, h1 >> 10,
                  (h1 - h0) >> 10, u0 >> 10);
    memset((void *)expand_keep, 0, sizeof expand_keep);
}

static void *call_me(void *data)
{
    return (char *)data + 1;
}

Test(api, misc_settings)
{
    cr_assert(GC_is_init_called());
    cr_assert_eq(GC_get_version(), (8u << 16) | (2u << 8) | 2u);
    cr_assert_eq(GC_get_all_interior_pointers(), 1);
    char x[2];
    cr_assert_eq(GC_call_with_alloc_lock(call_me, x), x + 1);
    GC_set_free_space_divisor(7);
    cr_assert_eq(GC_get_free_space_divisor(), 7);
    GC_set_max_retries(3);
    cr_assert_eq(GC_get_max_retries(), 3);
    GC_set_time_limit(50);
    cr_assert_eq(GC_get_time_limit(), 50);
    cr_assert_eq(GC_collect_a_little(), 0);
    /* Generational collection is on by default where the kernel can
     * track writes, and stays on when asked for. */
    int gen = GC_is_incremental_mode();
    GC_enable_incremental();
    cr_assert_eq(GC_is_incremental_mode(), gen);
    GC_register_displacement(8);
    /* Changing the interior-pointer setting after GC_init is refused,
     * with a warning. */
    tu_warn_reset();
    GC_set_warn_proc(tu_warn_proc);
    cr_assert_eq(GC_get_warn_proc(), tu_warn_proc);
    GC_set_all_interior_pointers(0);
    cr_assert_eq(tu_warn_count, 1, "no warning for GC_set_all_interior_pointers(0) "
                 "after GC_init");
    GC_set_all_interior_pointers(1);
    char *p = GC_malloc(16);
    cr_assert_eq(lowfat_size(p), 32, "a 16-byte object is in the %zu-byte class: "
                 "the extra byte is gone", lowfat_size(p));
    /* GC_malloc_ignore_off_page objects are ordinary. */
    char *big = GC_malloc_ignore_off_page(MiB);
    cr_assert_not_null(big);
    cr_assert_eq(tu_first_nonzero(big, MiB), MiB);
    cr_assert_not_null(GC_malloc_atomic_ignore_off_page(MiB));
    GC_set_warn_proc(GC_default_warn_proc);
}

/* ------------------------------------------------------------------ */
/* Out of memory                                                       */

static int oom_calls;
static size_t oom_last;
static char oom_sentinel[16];
static int oom_return_sentinel;

static void *count_oom(size_t bytes)
{
    oom_calls++;
    oom_last = bytes;
    return oom_return_sentinel ? oom_sentinel : NULL;
}

static const size_t huge_sizes[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX / 2, (size_t)1 << 40, (size_t)16 << 30,
    ((size_t)8 << 30) + 1, (size_t)8 << 30,
};
#define N_HUGE (sizeof huge_sizes / sizeof huge_sizes[0])

static void expect_oom(void *got, size_t bytes, const char *call, int calls_before)
{
    cr_assert_eq(oom_calls, calls_before + 1, "%s(%zu): the OOM function was called "
                 "%d times", call, bytes, oom_calls - calls_before);
    cr_assert_eq(oom_last, bytes, "%s(%zu): the OOM function was given %zu", call,
                 bytes, oom_last);
    if (oom_return_sentinel)
        cr_assert_eq(got, oom_sentinel, "%s(%zu) = %p, not the OOM function's result",
                     call, bytes, got);
    else
        cr_assert_null(got, "%s(%zu) = %p", call, bytes, got);
}

static void oom_all_calls(void)
{
    for (size_t k = 0; k < N_HUGE; k++) {
        size_t n = huge_sizes[k];
        int c;
        c = oom_calls; expect_oom(GC_malloc(n), n, "GC_malloc", c);
        c = oom_calls; expect_oom(GC_malloc_atomic(n), n, "GC_malloc_atomic", c);
        c = oom_calls; expect_oom(GC_malloc_uncollectable(n), n,
                                  "GC_malloc_uncollectable", c);
        c = oom_calls; expect_oom(GC_malloc_atomic_uncollectable(n), n,
                                  "GC_malloc_atomic_uncollectable", c);
        c = oom_calls; expect_oom(GC_malloc_ignore_off_page(n), n,
                                  "GC_malloc_ignore_off_page", c);
        c = oom_calls; expect_oom(GC_memalign(64, n), n, "GC_memalign", c);
    }
}

Test(api, oom_function_called_for_impossible_sizes)
{
    GC_set_oom_fn(count_oom);
    cr_assert_eq(GC_get_oom_fn(), count_oom);
    oom_return_sentinel = 0;
    oom_calls = 0;
    oom_all_calls();
    cr_assert_eq(oom_calls, 6 * (int)N_HUGE);
    /* The heap is still fine. */
    char *p = GC_malloc(100);
    cr_assert_not_null(p);
    cr_assert_eq(oom_calls, 6 * (int)N_HUGE);
}

Test(api, oom_function_result_is_returned)
{
    GC_set_oom_fn(count_oom);
    oom_return_sentinel = 1;
    oom_calls = 0;
    oom_all_calls();
    cr_assert_eq(oom_calls, 6 * (int)N_HUGE);
    oom_return_sentinel = 0;
}

Test(api, oom_realloc_and_posix_memalign)
{
    GC_set_oom_fn(count_oom);
    oom_return_sentinel = 0;
    char *p = GC_malloc(1000);
    cr_assert_not_null(p);
    tu_fill_bytes(p, 1000, 9);
    for (size_t k = 0; k < N_HUGE; k++) {
        int c = oom_calls;
        void *q = GC_realloc(p, huge_sizes[k]);
        cr_assert_null(q, "GC_realloc(p, %zu) = %p", huge_sizes[k], q);
        cr_assert_eq(oom_calls, c + 1, "GC_realloc(p, %zu): OOM function called %d "
                     "times", huge_sizes[k], oom_calls - c);
        cr_assert(lfgc_is_live(p), "a failed GC_realloc freed the object");
        cr_assert_eq(tu_check_bytes(p, 1000, 9), 1000, "a failed GC_realloc changed "
                     "the object");
        void *r = (void *)0x99;
        c = oom_calls;
        int rc = GC_posix_memalign(&r, 64, huge_sizes[k]);
        cr_assert_eq(rc, ENOMEM, "GC_posix_memalign(64, %zu) = %d, not ENOMEM",
                     huge_sizes[k], rc);
    }
    /* No class is aligned to 16 GiB. */
    int c = oom_calls;
    cr_assert_null(GC_memalign((size_t)1 << 34, 10));
    cr_assert_eq(oom_calls, c + 1, "GC_memalign(16 GiB alignment) did not call the "
                 "OOM function");
    void *r = NULL;
    cr_assert_eq(GC_posix_memalign(&r, (size_t)1 << 34, 10), ENOMEM);
    GC_set_oom_fn(NULL);                /* back to the default */
    volatile size_t huge = SIZE_MAX;    /* not a constant: no compiler warning */
    cr_assert_null(GC_malloc(huge));
}

/* Past GC_set_max_heap_size, allocation collects, then fails through the
 * OOM function. */
#define MAXH_OBJS 4096
static void *volatile maxh_roots[MAXH_OBJS];
static void *volatile maxh_small;

Test(api, max_heap_size_enforced)
{
    GC_set_oom_fn(count_oom);
    oom_return_sentinel = 0;
    oom_calls = 0;
    GC_gcollect();
    size_t limit = GC_get_heap_size() + 24 * MiB;
    GC_set_max_heap_size(limit);
    int n = 0;
    void *p = NULL;
    for (n = 0; n < MAXH_OBJS; n++) {
        p = GC_malloc(100 * KiB);
        if (!p)
            break;
        tu_fill_bytes(p, 64, (uint64_t)n);
        maxh_roots[n] = p;
        cr_assert_leq(GC_get_heap_size(), limit, "heap %zu KiB past the limit %zu KiB "
                      "after %d objects", GC_get_heap_size() >> 10, limit >> 10, n);
    }
    cr_assert_null(p, "%d objects of 100 KiB allocated under a 24 MiB limit", n);
    cr_assert_eq(oom_calls, 1, "the OOM function was called %d times", oom_calls);
    cr_assert_eq(oom_last, 100 * KiB);
    cr_assert_geq(n, 60, "only %d objects of 100 KiB (128 KiB slots) fit in 24 MiB", n);
    /* Small objects fail too, once their class needs a span. */
    int small_fail = 0;
    for (int i = 0; i < 1000000 && !small_fail; i++) {
        void **q = GC_malloc(2000);
        small_fail = q == NULL;
        if (q) {
            q[0] = (void *)maxh_small;
            maxh_small = q;
        }
    }
    cr_assert(small_fail, "small allocation never failed at the heap limit");
    /* Everything kept is intact. */
    for (int i = 0; i < n; i++)
        cr_assert_eq(tu_check_bytes((void *)maxh_roots[i], 64, (uint64_t)i), 64);
    /* Without the limit, allocation works again. */
    GC_set_max_heap_size(0);
    cr_assert_not_null(GC_malloc(100 * KiB));
    cr_assert_not_null(GC_malloc(2000));
}

/* Garbage is collected before the limit fails an allocation. */
Test(api, max_heap_size_collects_before_failing)
{
    GC_set_oom_fn(count_oom);
    oom_calls = 0;
    GC_gcollect();
    GC_set_max_heap_size(GC_get_heap_size() + 16 * MiB);
    /* 256 MiB of garbage through a 16 MiB window. */
    allocate_garbage(256 * MiB);
    cr_assert_eq(oom_calls, 0, "the OOM function was called %d times for garbage",
                 oom_calls);
}

static void call_dump(void *unused)
{
    (void)unused;
    GC_dump();
}

/* GC_dump describes the heap on stderr. */
Test(api, dump_prints_the_heap)
{
    static void *volatile keep;
    keep = GC_malloc(3000);
    GC_gcollect();
    char out[8192];
    ssize_t n = tu_capture_stderr(call_dump, NULL, out, sizeof out);
    cr_assert_gt(n, 0, "GC_dump printed nothing");
    cr_assert_not_null(strstr(out, "3072"), "GC_dump does not mention the 3072-byte "
                       "class in use: %s", out);
    cr_assert(lfgc_is_live((void *)keep));
    keep = NULL;
}

/* Objects from GC_memalign, GC_strdup and GC_realloc are ordinary
 * objects: GC_free and GC_realloc accept them silently. */
Test(api, aligned_and_copied_objects_can_be_freed)
{
    tu_warn_reset();
    GC_set_warn_proc(tu_warn_proc);
    for (size_t align = 32; align <= 256 * KiB; align <<= 1) {
        char *p = GC_memalign(align, 100);
        cr_assert_not_null(p);
        memset(p, 0x3c, 100);
        char *q = GC_realloc(p, 5000);
        cr_assert_not_null(q);
        for (int i = 0; i < 100; i++)
            cr_assert_eq((unsigned char)q[i], 0x3c);
        GC_free(q);
        void *r = NULL;
        cr_assert_eq(GC_posix_memalign(&r, align, 3 * align), 0);
        GC_free(r);
    }
    char *s = GC_strdup("free me");
    GC_free(s);
    char *t = GC_strndup("free me too", 4);
    GC_free(GC_realloc(t, 100));
    cr_assert_eq(tu_warn_count, 0, "%d warnings, first: %s", tu_warn_count,
                 tu_warnings[0].msg);
    GC_set_warn_proc(GC_default_warn_proc);
}

/* ------------------------------------------------------------------ */
/* GC_malloc_many                                                      */

/* A list of distinct, zeroed objects of at least the size asked for,
 * ended by NULL; batches of more than one come from the thread's list. */
Test(api, malloc_many_gives_a_list_of_zeroed_objects)
{
    size_t most = 0;
    for (int round = 0; round < 50; round++) {
        void **list = GC_malloc_many(40);
        cr_assert_not_null(list);
        size_t n = 0;
        for (void **p = list; p; p = GC_NEXT(p)) {
            n++;
            cr_assert_leq(n, 4096 / 16, "the list does not end");
            cr_assert_eq(GC_base(p), (void *)p, "element %zu is not an object's base", n);
            cr_assert_geq(GC_size(p), 40);
            for (size_t w = 1; w < 40 / sizeof(void *); w++)
                cr_assert_null(p[w], "element %zu: word %zu not cleared", n, w);
            for (void **q = list; q != p; q = GC_NEXT(q))
                cr_assert_neq(q, p, "element %zu appears twice", n);
        }
        if (n > most)
            most = n;
    }
    cr_assert_gt(most, 1, "GC_malloc_many never gave more than one object");
    void **big = GC_malloc_many(100000);
    cr_assert_not_null(big);
    cr_assert_null(GC_NEXT(big), "a large object comes alone");
}

/* The objects are ordinary ones: kept while reachable, collected after. */
static TU_NOINLINE GC_hidden_pointer many_hidden(int i)
{
    void **list = GC_malloc_many(48);
    cr_assert_not_null(list);
    (void)i;
    return tu_hide(list);
}

Test(api, malloc_many_objects_are_kept_then_collected)
{
    static void **kept[20];
    for (int k = 0; k < 20; k++) {
        kept[k] = GC_malloc_many(48);
        cr_assert_not_null(kept[k]);
        size_t i = 0;
        for (void **p = kept[k]; p; p = GC_NEXT(p), i++)
            p[1] = (void *)(uintptr_t)(k * 1000 + i + 1);
    }
    for (int r = 0; r < 5; r++) {
        for (int j = 0; j < 20000; j++)
            memset(GC_malloc(48), 0xee, 48);
        tu_collect();
    }
    for (int k = 0; k < 20; k++) {
        size_t i = 0;
        for (void **p = kept[k]; p; p = GC_NEXT(p), i++)
            cr_assert_eq(p[1], (void *)(uintptr_t)(k * 1000 + i + 1),
                         "list %d, element %zu overwritten", k, i);
    }
    assert_dropped_objects_collected(many_hidden, 20, "GC_malloc_many list");
}
