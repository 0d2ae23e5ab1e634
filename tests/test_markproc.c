/* test_markproc.c: mark procedures (GC_new_proc, GC_DS_PROC kinds,
 * GC_mark_and_push), on every marker thread, under minor collections and
 * mark-stack overflow; the push API; mark-bit calls; the generic
 * allocation calls and GC_generic_malloc_many's lists with gc_inline.h.
 *
 * The kinds under test keep their references encoded (XORed with a mask
 * that sets bit 63, so that no word is a heap address): only the mark
 * procedure can find them, and a plain field it ignores keeps nothing.
 */
#include "test_util.h"
#include "gc_mark.h"
#include "gc_inline.h"

#define NUM_KINDS_AT_LEAST 4u

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define ENC_MASK ((uintptr_t)0xa5a5a5a5a5a5a5a5)
#define ENC(p) ((uintptr_t)(p) ^ ENC_MASK)
#define DEC(w) ((void *)((uintptr_t)(w) ^ ENC_MASK))
#define NODE_MAGIC 0x6e6f6465c0ffee01ull
#define PROC_ENV 0x1234u

/* An object of the procedure's kind.  `plain` is a pointer the procedure
 * ignores on purpose. */
struct pnode {
    uint64_t magic;             /* set last: 0 while being built      */
    uintptr_t next;             /* encoded                            */
    void *plain;                /* not a reference for the procedure  */
    uintptr_t other;            /* encoded                            */
    uint64_t key;
    uint64_t side;              /* index into side_table, +1; 0: none */
    uintptr_t extra;            /* encoded                            */
};

/* References kept outside the heap, in memory lfgc neither scans nor
 * write-protects: only the procedure reads them. */
#define SIDE_ENTRIES 64
static uintptr_t *side_table;

static atomic_ulong proc_calls;
static atomic_int bad_env;
static pthread_t proc_threads[4];
static atomic_int proc_thread_count;

static void note_thread(void)
{
    pthread_t self = pthread_self();
    int n = atomic_load(&proc_thread_count);
    for (int i = 0; i < n && i < 4; i++)
        if (pthread_equal(proc_threads[i], self))
            return;
    if (n < 4) {
        int slot = atomic_fetch_add(&proc_thread_count, 1);
        if (slot < 4)
            proc_threads[slot] = self;
    }
}

static struct GC_ms_entry *pnode_mark(GC_word *addr, struct GC_ms_entry *msp,
                                      struct GC_ms_entry *lim, GC_word env)
{
    struct pnode *n = (struct pnode *)addr;
    atomic_fetch_add_explicit(&proc_calls, 1, memory_order_relaxed);
    if (env != PROC_ENV)
        atomic_store(&bad_env, 1);
    note_thread();
    if (n->magic != NODE_MAGIC)
        return msp;
    if (n->next)
        msp = GC_MARK_AND_PUSH(DEC(n->next), msp, lim, NULL);
    if (n->other)
        msp = GC_MARK_AND_PUSH(DEC(n->other), msp, lim, NULL);
    if (n->side)
        msp = GC_MARK_AND_PUSH(DEC(side_table[n->side - 1]), msp, lim, NULL);
    if (n->extra)
        msp = GC_MARK_AND_PUSH(DEC(n->extra), msp, lim, NULL);
    return msp;
}

static int pkind = -1;

static void make_kind(void)
{
    if (pkind >= 0)
        return;
    unsigned proc = GC_new_proc(pnode_mark);
    cr_assert_geq(proc, GC_RESERVED_MARK_PROCS);
    cr_assert_lt(proc, GC_MAX_MARK_PROCS);
    pkind = (int)GC_new_kind(GC_new_free_list(), GC_MAKE_PROC(proc, PROC_ENV), 0, 1);
    side_table = calloc(SIDE_ENTRIES, sizeof *side_table);
    cr_assert_not_null(side_table);
}

static void suite_init(void)
{
    tu_warm_up();
    make_kind();
}

TestSuite(markproc, .init = suite_init);

static TU_NOINLINE struct pnode *pnode_new(uint64_t key)
{
    struct pnode *n = GC_generic_malloc(sizeof *n, pkind);
    cr_assert_not_null(n);
    n->key = key;
    n->magic = NODE_MAGIC;
    return n;
}

static TU_NOINLINE void *target_new(size_t bytes, uint64_t seed)
{
    void *p = GC_malloc(bytes);
    cr_assert_not_null(p);
    tu_fill_bytes(p, bytes, seed);
    return p;
}

/* Bytes of the target that differ from their pattern: 0 when intact. */
static TU_NOINLINE size_t target_damage(GC_hidden_pointer h, size_t bytes, uint64_t seed)
{
    return bytes - tu_check_bytes(GC_REVEAL_POINTER(h), bytes, seed);
}

/* ------------------------------------------------------------------ */
/* What the procedure marks, and only that                             */

static void *volatile holder;

static TU_NOINLINE void make_holder(GC_hidden_pointer *hn, GC_hidden_pointer *ho,
                                    GC_hidden_pointer *hp)
{
    struct pnode *h = pnode_new(1);
    void *a = target_new(64, 11), *b = target_new(64, 12), *c = target_new(64, 13);
    h->next = ENC(a);
    h->other = ENC(b);
    h->plain = c;
    *hn = tu_hide(a);
    *ho = tu_hide(b);
    *hp = tu_hide(c);
    holder = h;
}

Test(markproc, procedure_marks_encoded_fields_only)
{
    GC_hidden_pointer hn, ho, hp;
    unsigned long calls0 = atomic_load(&proc_calls);
    make_holder(&hn, &ho, &hp);
    tu_collect();
    tu_collect();
    cr_assert_gt(atomic_load(&proc_calls), calls0, "the mark procedure was never called");
    cr_assert_eq(atomic_load(&bad_env), 0, "the procedure got the wrong env");
    cr_assert(tu_live(hn), "the object behind the encoded `next` was reclaimed");
    cr_assert(tu_live(ho), "the object behind the encoded `other` was reclaimed");
    cr_assert_eq(target_damage(hn, 64, 11), 0);
    cr_assert_eq(target_damage(ho, 64, 12), 0);
    /* A conservative scan would keep it: the kind's procedure does not. */
    cr_assert(!tu_live(hp), "the plain field the procedure ignores kept its target");
    holder = NULL;
    tu_collect();
    cr_assert(!tu_live(hn) && !tu_live(ho), "garbage behind a dead holder survived");
}

/* A long list linked only through encoded words: all of it lives while
 * its head is rooted, all of it is reclaimed after. */
#define CHAIN 20000

static TU_NOINLINE GC_hidden_pointer chain_build(uint64_t seed, size_t n, GC_hidden_pointer *last)
{
    struct pnode *head = NULL;
    for (size_t i = 0; i < n; i++) {
        struct pnode *p = pnode_new(seed + i);
        p->next = head ? ENC(head) : 0;
        p->other = ENC(target_new(32, seed + i));
        if (!head)
            *last = tu_hide(p);
        head = p;
    }
    return tu_hide(head);
}

/* Number of intact nodes from the head (n - 1 down to 0). */
static TU_NOINLINE size_t chain_check(GC_hidden_pointer h, uint64_t seed, size_t n)
{
    size_t ok = 0;
    for (struct pnode *p = GC_REVEAL_POINTER(h); p; p = p->next ? DEC(p->next) : NULL) {
        size_t i = n - 1 - ok;
        if (p->magic != NODE_MAGIC || p->key != seed + i || !p->other ||
            tu_check_bytes(DEC(p->other), 32, seed + i) != 32)
            break;
        ok++;
    }
    return ok;
}

static TU_NOINLINE void root_set(void *volatile *root, GC_hidden_pointer h)
{
    *root = GC_REVEAL_POINTER(h);
}

Test(markproc, encoded_chain_lives_then_is_reclaimed)
{
    GC_hidden_pointer last;
    GC_hidden_pointer h = chain_build(0x5000, CHAIN, &last);
    root_set(&holder, h);
    for (int i = 0; i < 3; i++) {
        tu_collect();
        cr_assert_eq(chain_check(h, 0x5000, CHAIN), CHAIN, "collection %d: chain broken", i);
    }
    holder = NULL;
    tu_collect();
    cr_assert(!tu_live(h) && !tu_live(last), "an unreachable chain survived");
}

/* ------------------------------------------------------------------ */
/* Minor collections                                                    */

/* A size class of its own per round: a thread's cached free slots are
 * marked by a collection, so an object allocated from a list cached before
 * the last one would not be young. */
#define YOUNG_SIZE(i) (200 + 48 * (size_t)(i))

static TU_NOINLINE void store_next(GC_hidden_pointer holder_h, GC_hidden_pointer target)
{
    struct pnode *n = GC_REVEAL_POINTER(holder_h);
    n->extra = ENC(GC_REVEAL_POINTER(target));
}

static TU_NOINLINE GC_hidden_pointer new_target(size_t bytes, uint64_t seed)
{
    return tu_hide(target_new(bytes, seed));
}

/* An old object of the procedure's kind gets a young referent through an
 * encoded field: the minor collection scans it with its procedure. */
Test(markproc, old_proc_object_written_keeps_young_in_minor)
{
    TU_NEED_MINOR();
    GC_hidden_pointer last;
    GC_hidden_pointer h = chain_build(0x7000, 256, &last);
    root_set(&holder, h);
    tu_collect();
    cr_assert(tu_collect_minor());     /* the nodes are old, their pages protected */
    GC_hidden_pointer young[8];
    for (int i = 0; i < 8; i++) {
        young[i] = new_target(YOUNG_SIZE(i), 0x7100 + (uint64_t)i);
        store_next(last, young[i]);
        cr_assert(tu_collect_minor(), "round %d: expected a minor collection", i);
        cr_assert(tu_live(young[i]), "round %d: young object held by an old one reclaimed", i);
        cr_assert_eq(target_damage(young[i], YOUNG_SIZE(i), 0x7100 + (uint64_t)i), 0);
    }
    /* The ones replaced are garbage, reclaimed by a full collection. */
    tu_collect();
    for (int i = 0; i < 7; i++)
        cr_assert(!tu_live(young[i]), "replaced object %d survived", i);
    cr_assert(tu_live(young[7]));
    cr_assert_eq(chain_check(h, 0x7000, 256), 256);
    holder = NULL;
}

static TU_NOINLINE void side_store(unsigned i, GC_hidden_pointer target)
{
    side_table[i] = ENC(GC_REVEAL_POINTER(target));
}

static TU_NOINLINE GC_hidden_pointer side_node(unsigned i)
{
    struct pnode *n = pnode_new(0x7200 + i);
    n->side = i + 1;
    return tu_hide(n);
}

/* The procedure reads a reference outside its object, in memory whose
 * writes no page protection sees: every minor collection must still run
 * it on the old objects of its kind. */
Test(markproc, reference_outside_the_object_survives_minor)
{
    TU_NEED_MINOR();
    GC_hidden_pointer first = new_target(80, 0x7300);
    side_store(5, first);
    GC_hidden_pointer n = side_node(5);
    root_set(&holder, n);
    tu_collect();
    cr_assert(tu_collect_minor());
    cr_assert(tu_collect_minor());     /* n is old, its page protected */
    cr_assert(tu_live(first));
    GC_hidden_pointer young[6];
    for (int i = 0; i < 6; i++) {
        young[i] = new_target(YOUNG_SIZE(i), 0x7310 + (uint64_t)i);
        side_store(5, young[i]);
        cr_assert(tu_collect_minor(), "round %d: expected a minor collection", i);
        cr_assert(tu_collect_minor(), "round %d: expected a minor collection", i);
        cr_assert(tu_live(young[i]), "round %d: object held through the side table reclaimed",
                  i);
        cr_assert_eq(target_damage(young[i], YOUNG_SIZE(i), 0x7310 + (uint64_t)i), 0);
    }
    tu_collect();
    cr_assert(!tu_live(first), "the replaced object survived a full collection");
    cr_assert(tu_live(young[5]));
    side_table[5] = 0;
    holder = NULL;
}

/* ------------------------------------------------------------------ */
/* Generic allocation calls                                             */

Test(markproc, kind_and_size_and_generic_variants)
{
    size_t sz = 0;
    struct pnode *n = pnode_new(3);
    cr_assert_eq(GC_get_kind_and_size(n, &sz), pkind);
    cr_assert_geq(sz, sizeof *n);
    cr_assert_eq(GC_get_kind_and_size((char *)n + 8, NULL), pkind);
    void *a = GC_malloc_atomic(100);
    cr_assert_eq(GC_get_kind_and_size(a, &sz), GC_I_PTRFREE);
    cr_assert_geq(sz, 100);
    void *u = GC_malloc_uncollectable(40);
    cr_assert_eq(GC_get_kind_and_size(u, NULL), 2);
    void *u2 = GC_generic_or_special_malloc(40, GC_get_kind_and_size(u, NULL));
    cr_assert_eq(GC_get_kind_and_size(u2, NULL), 2);
    GC_free(u);
    GC_free(u2);
    void *k = GC_malloc_kind(48, GC_I_NORMAL);
    cr_assert_eq(GC_get_kind_and_size(k, NULL), GC_I_NORMAL);
    k = GC_malloc_kind_global(48, pkind);
    cr_assert_eq(GC_get_kind_and_size(k, NULL), pkind);
    k = GC_generic_malloc_ignore_off_page(100000, pkind);
    cr_assert_eq(GC_get_kind_and_size(k, &sz), pkind);
    cr_assert_geq(sz, 100000);
    tu_warn_reset();
    GC_set_warn_proc(tu_warn_proc);
    int stack_word;
    cr_assert_eq(GC_get_kind_and_size(&stack_word, &sz), -1);
    cr_assert_eq(sz, 0);
    cr_assert_null(GC_generic_malloc(16, 200));
    cr_assert_eq(tu_warn_count, 2, "%d warnings", tu_warn_count);
}

static TU_NOINLINE GC_hidden_pointer uncollectable_holder(GC_hidden_pointer target)
{
    struct pnode *u = GC_generic_malloc_uncollectable(sizeof *u, pkind);
    cr_assert_not_null(u);
    cr_assert_eq(u->next, 0);
    u->next = ENC(GC_REVEAL_POINTER(target));
    u->magic = NODE_MAGIC;
    return tu_hide(u);
}

/* An uncollectable object of a procedure's kind: a root, scanned by the
 * procedure. */
Test(markproc, uncollectable_object_of_proc_kind)
{
    GC_hidden_pointer t = new_target(72, 0x8100);
    GC_hidden_pointer u = uncollectable_holder(t);
    int k = GC_get_kind_and_size(GC_REVEAL_POINTER(u), NULL);
    cr_assert_neq(k, pkind, "an uncollectable object in a collectable kind");
    tu_collect();
    tu_collect();
    cr_assert(tu_live(u), "an uncollectable object was reclaimed");
    cr_assert(tu_live(t), "what an uncollectable procedure-kind object references was reclaimed");
    cr_assert_eq(target_damage(t, 72, 0x8100), 0);
    GC_free(GC_REVEAL_POINTER(u));
    tu_collect();
    cr_assert(!tu_live(t), "target of a freed uncollectable object survived");
}

/* ------------------------------------------------------------------ */
/* GC_generic_malloc_many and gc_inline.h                               */

Test(markproc, generic_malloc_many_plain_links)
{
    int kinds[3] = { GC_I_NORMAL, GC_I_PTRFREE, pkind };
    for (int ki = 0; ki < 3; ki++) {
        void *list = NULL;
        GC_generic_malloc_many(48, kinds[ki], &list);
        cr_assert_not_null(list, "kind %d: empty list", kinds[ki]);
        size_t n = 0;
        for (void *p = list; p; p = GC_NEXT(p)) {
            cr_assert_eq(GC_base(p), p, "kind %d: entry %zu is no object", kinds[ki], n);
            cr_assert_geq(GC_size(p), 48);
            cr_assert_eq(GC_get_kind_and_size(p, NULL), kinds[ki]);
            if (kinds[ki] != GC_I_PTRFREE)
                cr_assert_eq(((void **)p)[1], NULL, "kind %d: word 1 not cleared", kinds[ki]);
            n++;
            cr_assert_lt(n, 100000);
        }
        cr_assert_gt(n, 1, "kind %d: one object only", kinds[ki]);
    }
}

/* The longest of `lists` lists of 48-byte objects GC_generic_malloc_many
 * hands out, in bytes; every entry an object of the kind. */
static TU_NOINLINE size_t many_longest(int kind, int lists)
{
    size_t longest = 0;
    for (int l = 0; l < lists; l++) {
        void *list = NULL;
        GC_generic_malloc_many(48, kind, &list);
        cr_assert_not_null(list);
        size_t bytes = 0;
        for (void *p = list; p; p = GC_NEXT(p)) {
            cr_assert_eq(GC_base(p), p);
            bytes += GC_size(p);
        }
        if (bytes > longest)
            longest = bytes;
    }
    return longest;
}

#define BIG_PARTS 40
static unsigned char *volatile big[BIG_PARTS];

/* The lists are the caller's, held whole by each of its threads and kept
 * by collections: in a small heap about a page of objects, as bdwgc's (a
 * block's worth); longer once the heap is large against them, where they
 * make the sweep faster. */
Test(markproc, generic_malloc_many_lists_scale_with_the_heap)
{
    GC_INIT();
    size_t small = many_longest(GC_I_NORMAL, 16);
    cr_log_info("small heap (%zu KiB): lists of up to %zu bytes", GC_get_heap_size() >> 10, small);
    cr_assert_leq(small, 8 * KiB, "small heap: a list of %zu bytes", small);
    for (int i = 0; i < BIG_PARTS; i++) {
        big[i] = GC_MALLOC_ATOMIC(MiB);
        cr_assert_not_null(big[i]);
        tu_fill_bytes(big[i], MiB, (uint64_t)i);
    }
    tu_collect();
    size_t large = many_longest(GC_I_NORMAL, 16);
    cr_log_info("heap of %zu MiB: lists of up to %zu bytes", GC_get_heap_size() >> 20, large);
    cr_assert_geq(large, 12 * KiB, "heap of %zu MiB: lists of %zu bytes at most",
                  GC_get_heap_size() >> 20, large);
    for (int i = 0; i < BIG_PARTS; i++)
        cr_assert_eq(tu_check_bytes(big[i], MiB, (uint64_t)i), MiB, "part %d changed", i);
    GC_hidden_pointer one = tu_hide(big[0]);
    for (int i = 0; i < BIG_PARTS; i++)
        big[i] = NULL;
    tu_collect();
    cr_assert(!tu_live(one), "a dropped part survived");
}

/* Lists GC_generic_malloc_many hands out go up in address: a program
 * that builds a structure from them lays it out in the order it will walk
 * it (Whippet's quads walks its tree 4.7 times faster than in the reverse
 * order: docs/performance.md).  Slots of dead objects come zeroed but for
 * the link, and the live objects between them are left alone. */
#define MANY_KEEP 1024
#define MANY_DEAD 8
static void **many_kept;

static TU_NOINLINE void many_fill(int kind, GC_hidden_pointer *dead)
{
    many_kept = GC_MALLOC(MANY_KEEP * sizeof *many_kept);
    cr_assert_not_null(many_kept);
    size_t k = 0;
    for (uint64_t i = 0; k < MANY_KEEP || i < 500 * MANY_DEAD; ) {
        void *list = NULL;
        GC_generic_malloc_many(48, kind, &list);
        cr_assert_not_null(list);
        for (void *p = list, *next; p; p = next, i++) {
            next = GC_NEXT(p);
            if (i % 5 == 0 && k < MANY_KEEP) {
                tu_fill_bytes(p, 48, 1000 + k);
                many_kept[k++] = p;
            } else {
                tu_fill_bytes(p, 48, i);
                if (i % 500 == 3 && i / 500 < MANY_DEAD)
                    dead[i / 500] = tu_hide(p);
            }
        }
    }
}

static TU_NOINLINE size_t many_kept_damaged(void)
{
    size_t bad = 0;
    for (size_t k = 0; k < MANY_KEEP; k++)
        bad += tu_check_bytes(many_kept[k], 48, 1000 + k) != 48;
    return bad;
}

/* Take `lists` lists; count those out of address order, and slots with a
 * word not zero but the link. */
static TU_NOINLINE void many_take(int kind, size_t lists, size_t *out_of_order,
                                  size_t *not_zero, size_t *objects)
{
    for (size_t l = 0; l < lists; l++) {
        void *list = NULL;
        GC_generic_malloc_many(48, kind, &list);
        cr_assert_not_null(list);
        for (void *p = list; p; p = GC_NEXT(p)) {
            void *next = GC_NEXT(p);
            *out_of_order += next && (uintptr_t)next <= (uintptr_t)p;
            *not_zero += tu_first_nonzero((char *)p + sizeof(void *), 48 - sizeof(void *)) !=
                         48 - sizeof(void *);
            ++*objects;
        }
    }
}

Test(markproc, generic_malloc_many_lists_in_address_order)
{
    int kinds[2] = { GC_I_NORMAL, pkind };
    for (int ki = 0; ki < 2; ki++) {
        GC_hidden_pointer dead[MANY_DEAD] = { 0 };
        many_fill(kinds[ki], dead);
        tu_collect();
        /* One may be held by a stray integer in the program's data. */
        int survivors = 0;
        for (int d = 0; d < MANY_DEAD; d++)
            survivors += dead[d] == 0 || tu_live(dead[d]);
        cr_assert_leq(survivors, 1, "kind %d: %d of %d dropped objects survived", kinds[ki],
                      survivors, MANY_DEAD);
        cr_assert_eq(many_kept_damaged(), 0, "kind %d: kept objects damaged", kinds[ki]);
        size_t out_of_order = 0, not_zero = 0, objects = 0;
        many_take(kinds[ki], 64, &out_of_order, &not_zero, &objects);
        cr_assert_gt(objects, 64 * 2, "kind %d: lists of one object", kinds[ki]);
        cr_assert_eq(out_of_order, 0, "kind %d: %zu of %zu objects out of address order",
                     kinds[ki], out_of_order, objects);
        cr_assert_eq(not_zero, 0, "kind %d: %zu reused slots not cleared", kinds[ki],
                     not_zero);
        cr_assert_eq(many_kept_damaged(), 0, "kind %d: a live object was handed out",
                     kinds[ki]);
        many_kept = NULL;
    }
}

/* Objects popped with gc_inline.h's macros from lists GC_generic_malloc_many
 * fills: usable, retained while reachable, reclaimed after. */
static void *tiny_fl[GC_TINY_FREELISTS];
static void *tiny_fl_atomic[GC_TINY_FREELISTS];
#define INLINE_N 4096
static void **kept;

static TU_NOINLINE void inline_alloc(void)
{
    kept = GC_MALLOC(INLINE_N * sizeof *kept);
    cr_assert_not_null(kept);
    for (size_t i = 0; i < INLINE_N; i++) {
        uint64_t *p;
        if (i % 3 == 0) {
            GC_MALLOC_WORDS(p, 5, tiny_fl);
        } else if (i % 3 == 1) {
            GC_MALLOC_ATOMIC_WORDS(p, 3, tiny_fl_atomic);
        } else {
            void *c;
            GC_CONS(c, (void *)0, kept[i - 1], tiny_fl);
            p = c;
        }
        cr_assert_not_null(p);
        if (i % 3 != 2) {
            cr_assert_geq(GC_size(p), i % 3 == 0 ? 40 : 24);
            tu_fill_bytes(p, i % 3 == 0 ? 40 : 24, i);
        }
        kept[i] = p;
    }
}

static TU_NOINLINE size_t inline_check(void)
{
    size_t bad = 0;
    for (size_t i = 0; i < INLINE_N; i++) {
        if (i % 3 == 2)
            bad += ((void **)kept[i])[1] != kept[i - 1];
        else
            bad += tu_check_bytes(kept[i], i % 3 == 0 ? 40 : 24, i) != (i % 3 == 0 ? 40u : 24u);
    }
    return bad;
}

static TU_NOINLINE GC_hidden_pointer inline_drop(size_t i)
{
    GC_hidden_pointer h = tu_hide(kept[i]);
    kept[i] = NULL;
    return h;
}

Test(markproc, gc_inline_macros)
{
    inline_alloc();
    tu_collect();
    cr_assert_eq(inline_check(), 0, "objects from the inline macros damaged");
    /* kept[5] is a pair holding kept[4]: drop the three. */
    GC_hidden_pointer d0 = inline_drop(3), d1 = inline_drop(4), d2 = inline_drop(5);
    /* The lists still held in tiny_fl keep their objects; drop them too. */
    memset(tiny_fl, 0, sizeof tiny_fl);
    memset(tiny_fl_atomic, 0, sizeof tiny_fl_atomic);
    tu_collect();
    cr_assert(!tu_live(d0) && !tu_live(d1) && !tu_live(d2),
              "dropped inline-allocated objects survived");
}

/* ------------------------------------------------------------------ */
/* The push API                                                         */

#define PUSHED 16
static void **hidden_roots;     /* malloc'd: not scanned by lfgc */
static GC_push_other_roots_proc previous_push;
static atomic_int push_calls;

static void push_hidden(void)
{
    atomic_fetch_add(&push_calls, 1);
    GC_push_all(hidden_roots, hidden_roots + PUSHED / 2);
    GC_push_all_eager(hidden_roots + PUSHED / 2, hidden_roots + PUSHED);
    if (previous_push)
        previous_push();
}

static TU_NOINLINE void fill_hidden(GC_hidden_pointer *h)
{
    for (int i = 0; i < PUSHED; i++) {
        hidden_roots[i] = target_new(128, 0x9000 + (uint64_t)i);
        h[i] = tu_hide(hidden_roots[i]);
    }
}

Test(markproc, push_other_roots_keeps_objects_alive)
{
    hidden_roots = calloc(PUSHED, sizeof *hidden_roots);
    cr_assert_not_null(hidden_roots);
    GC_hidden_pointer h[PUSHED];
    fill_hidden(h);
    previous_push = GC_get_push_other_roots();
    GC_set_push_other_roots(push_hidden);
    cr_assert_eq(GC_get_push_other_roots(), push_hidden);
    /* Outside a collection the calls do nothing. */
    GC_push_all(hidden_roots, hidden_roots + PUSHED);
    tu_collect();
    tu_collect();
    cr_assert_geq(atomic_load(&push_calls), 2);
    for (int i = 0; i < PUSHED; i++) {
        cr_assert(tu_live(h[i]), "object %d pushed by the callback was reclaimed", i);
        cr_assert_eq(target_damage(h[i], 128, 0x9000 + (uint64_t)i), 0);
    }
    GC_set_push_other_roots(previous_push);
    tu_collect();
    for (int i = 0; i < PUSHED; i++)
        cr_assert(!tu_live(h[i]), "object %d survived once no longer pushed", i);
    GC_push_finalizer_structures();
    free(hidden_roots);
}

/* ECL writes bdwgc's variable itself, keeping the old value to chain to. */
Test(markproc, push_other_roots_variable_written_directly)
{
    hidden_roots = calloc(PUSHED, sizeof *hidden_roots);
    cr_assert_not_null(hidden_roots);
    GC_hidden_pointer h[PUSHED];
    fill_hidden(h);
    cr_assert_not_null(GC_push_other_roots, "no default procedure to chain to");
    previous_push = GC_push_other_roots;
    GC_push_other_roots = push_hidden;
    cr_assert_eq(GC_get_push_other_roots(), push_hidden);
    tu_collect();
    for (int i = 0; i < PUSHED; i++) {
        cr_assert(tu_live(h[i]), "object %d pushed by the callback was reclaimed", i);
        cr_assert_eq(target_damage(h[i], 128, 0x9000 + (uint64_t)i), 0);
    }
    GC_push_other_roots = previous_push;
    tu_collect();
    for (int i = 0; i < PUSHED; i++)
        cr_assert(!tu_live(h[i]), "object %d survived once no longer pushed", i);
    free(hidden_roots);
}

/* GC_push_conditional alone, as bdwgc's incremental-aware code pushes a
 * range: lfgc has no incremental marking, so every word is pushed
 * whether `all` is set or not. */
static void push_conditionally(void)
{
    atomic_fetch_add(&push_calls, 1);
    GC_push_conditional(hidden_roots, hidden_roots + PUSHED / 2, 0);
    GC_push_conditional(hidden_roots + PUSHED / 2, hidden_roots + PUSHED, 1);
}

Test(markproc, push_conditional_alone_keeps_objects_alive)
{
    hidden_roots = calloc(PUSHED, sizeof *hidden_roots);
    cr_assert_not_null(hidden_roots);
    GC_hidden_pointer h[PUSHED];
    fill_hidden(h);
    previous_push = GC_get_push_other_roots();
    GC_set_push_other_roots(push_conditionally);
    int calls = atomic_load(&push_calls);
    tu_collect();
    tu_collect();
    cr_assert_geq(atomic_load(&push_calls), calls + 2);
    for (int i = 0; i < PUSHED; i++) {
        cr_assert(tu_live(h[i]), "object %d pushed by GC_push_conditional was reclaimed", i);
        cr_assert_eq(target_damage(h[i], 128, 0x9000 + (uint64_t)i), 0);
    }
    GC_set_push_other_roots(previous_push);
    tu_collect();
    for (int i = 0; i < PUSHED; i++)
        cr_assert(!tu_live(h[i]), "object %d survived once no longer pushed", i);
    free(hidden_roots);
}

/* GC_push_all from inside a mark procedure: a procedure that pushes two
 * words of its object and a range outside the heap (as a runtime's
 * procedure pushes a frame or a side buffer), for the marker to scan. */
struct rnode {
    uint64_t magic;
    uint64_t pad;
    void *a, *b;                /* pushed with GC_push_all                */
    void *c;                    /* not pushed: retains nothing            */
};
static void **range_side;       /* calloc'd: only the procedure pushes it */
static atomic_ulong range_calls;

static struct GC_ms_entry *range_mark(GC_word *addr, struct GC_ms_entry *msp,
                                      struct GC_ms_entry *lim, GC_word env)
{
    (void)lim;
    (void)env;
    atomic_fetch_add_explicit(&range_calls, 1, memory_order_relaxed);
    if (addr[0] != NODE_MAGIC)
        return msp;
    GC_push_all(addr + 2, addr + 4);
    GC_push_all(range_side, range_side + 2);
    return msp;
}

static int rkind = -1;
static void *volatile rholder;

static TU_NOINLINE void make_rholder(GC_hidden_pointer *h)
{
    GC_disable();
    struct rnode *n = GC_generic_malloc(sizeof *n, rkind);
    cr_assert_not_null(n);
    n->a = target_new(64, 0xb001);
    n->b = target_new(64, 0xb002);
    n->c = target_new(64, 0xb003);
    range_side[1] = target_new(64, 0xb004);
    h[0] = tu_hide(n->a);
    h[1] = tu_hide(n->b);
    h[2] = tu_hide(n->c);
    h[3] = tu_hide(range_side[1]);
    n->magic = NODE_MAGIC;
    rholder = n;
    GC_enable();
}

Test(markproc, push_all_from_a_mark_procedure)
{
    range_side = calloc(2, sizeof *range_side);
    cr_assert_not_null(range_side);
    unsigned proc = GC_new_proc(range_mark);
    rkind = (int)GC_new_kind(GC_new_free_list(), GC_MAKE_PROC(proc, 0), 0, 1);
    GC_hidden_pointer h[4];
    make_rholder(h);
    unsigned long calls = atomic_load(&range_calls);
    tu_collect();
    tu_collect();
    cr_assert_gt(atomic_load(&range_calls), calls, "the procedure was never called");
    static const bool kept[4] = {true, true, false, true};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(tu_live(h[i]), kept[i], "target %d: live %d, expected %d", i,
                     tu_live(h[i]), kept[i]);
        if (kept[i])
            cr_assert_eq(target_damage(h[i], 64, 0xb001 + (uint64_t)i), 0, "target %d", i);
    }
    rholder = NULL;
    tu_collect();
    for (int i = 0; i < 4; i++)
        cr_assert(!tu_live(h[i]), "target %d survived its holder", i);
    free(range_side);
}

/* bdwgc's _inner calls with the allocation lock held (inside
 * GC_call_with_alloc_lock, as bdwgc's own typed and gcj set-ups call
 * them): none may take the lock again, and what they make works. */
struct inner_made {
    void **free_list;
    unsigned proc;
    unsigned kind;
    bool list_zeroed;
};

static void *make_inner(void *arg)
{
    struct inner_made *m = arg;
    m->free_list = GC_new_free_list_inner();
    m->list_zeroed = m->free_list != NULL;
    for (int i = 0; m->free_list && i < 257; i++)
        m->list_zeroed &= m->free_list[i] == NULL;
    m->proc = GC_new_proc_inner(pnode_mark);
    m->kind = GC_new_kind_inner(m->free_list, GC_MAKE_PROC(m->proc, PROC_ENV), 0, 1);
    return m;
}

Test(markproc, inner_calls_with_the_lock_held, .timeout = 20)
{
    struct inner_made m = {0};
    cr_assert_eq(GC_call_with_alloc_lock(make_inner, &m), &m);
    cr_assert(m.list_zeroed, "GC_new_free_list_inner: no zeroed array");
    cr_assert_geq(m.proc, GC_RESERVED_MARK_PROCS);
    cr_assert_geq(m.kind, NUM_KINDS_AT_LEAST, "kind %u", m.kind);
    cr_assert_neq((int)m.kind, pkind);
    /* The kind scans through the procedure: the encoded field keeps its
     * target, the plain one does not. */
    int saved = pkind;
    pkind = (int)m.kind;
    GC_hidden_pointer hn, ho, hp;
    make_holder(&hn, &ho, &hp);
    pkind = saved;
    tu_collect();
    cr_assert(tu_live(hn) && tu_live(ho), "the _inner kind's procedure did not mark");
    cr_assert_eq(target_damage(hn, 64, 11), 0);
    cr_assert_eq(target_damage(ho, 64, 12), 0);
    cr_assert(!tu_live(hp), "the plain field kept its target");
    holder = NULL;
}

/* GC_print_free_list: the calling thread's list of a kind and size, one
 * slot a line, each free; then the count. */
static TU_NOINLINE size_t alloc_one(size_t bytes)
{
    void *p = GC_malloc(bytes);
    cr_assert_not_null(p);
    return GC_size(p);
}

Test(markproc, print_free_list_lists_free_slots)
{
    GC_disable();
    size_t size = alloc_one(7 * 16);         /* 7 granules: a list of the class now */
    char path[] = "/tmp/lfgc-fl-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    GC_set_log_fd(fd);
    GC_print_free_list(1, 7);
    GC_print_free_list(1234, 7);
    GC_set_log_fd(2);
    GC_enable();
    static char buf[1 << 20];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    cr_assert_gt(n, 0, "GC_print_free_list printed nothing");
    buf[n] = 0;
    char head[64];
    snprintf(head, sizeof head, "Free list of kind 1, %zu-byte objects", size);
    cr_assert(strstr(buf, head), "no \"%s\" in: %s", head, buf);
    size_t slots = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        void *p;
        size_t count;
        if (line[0] == '\t' && sscanf(line + 1, "%p", &p) == 1) {
            cr_assert_eq(lfgc_slot_state(p), LFGC_SLOT_FREE, "%p listed is not free", p);
            cr_assert_eq(GC_size(p), size);
            slots++;
        } else if (sscanf(line, "%zu objects;", &count) == 1) {
            cr_assert_eq(count, slots, "count %zu, %zu slots listed", count, slots);
        } else {
            cr_assert(strstr(line, "Free list of kind 1") || strstr(line, "no list for kind 1234"),
                      "unexpected line: %s", line);
        }
    }
    cr_assert_gt(slots, 0, "no free slot listed after an allocation");
}

/* ------------------------------------------------------------------ */
/* Mark bits                                                            */

static TU_NOINLINE GC_hidden_pointer garbage_object(void)
{
    return tu_hide(target_new(64, 0xa000));
}

static TU_NOINLINE int is_marked(GC_hidden_pointer h, size_t off)
{
    return GC_is_marked((char *)GC_REVEAL_POINTER(h) + off);
}

static TU_NOINLINE void set_mark(GC_hidden_pointer h, int on)
{
    GC_alloc_lock();
    if (on)
        GC_set_mark_bit(GC_REVEAL_POINTER(h));
    else
        GC_clear_mark_bit(GC_REVEAL_POINTER(h));
    GC_alloc_unlock();
}

Test(markproc, mark_bit_calls)
{
    GC_hidden_pointer live = tu_hide(target_new(64, 0xa001));
    root_set(&holder, live);
    GC_hidden_pointer dead = garbage_object(), dead2 = garbage_object();
    GC_disable();   /* no collection, and no sweep passes until asked */
    GC_enable();
    tu_collect();
    cr_assert(is_marked(live, 0));
    cr_assert(is_marked(live, 17), "an interior pointer reads its object's bit");
    cr_assert(!is_marked(dead, 0));
    cr_assert(!is_marked(dead2, 0));
    /* A dead object whose bit is set before the sweep reaches it stays. */
    set_mark(dead, 1);
    cr_assert(is_marked(dead, 0));
    cr_assert(tu_live(dead), "an object marked by GC_set_mark_bit is not live");
    cr_assert(!tu_live(dead2));
    /* A live object whose bit is cleared is dead to the sweep. */
    set_mark(live, 0);
    cr_assert(!is_marked(live, 0));
    cr_assert(!tu_live(live), "an object unmarked by GC_clear_mark_bit is still live");
    holder = NULL;
    tu_warn_reset();
    GC_set_warn_proc(tu_warn_proc);
    int local;
    cr_assert_eq(GC_is_marked(&local), 0);
    GC_set_mark_bit(&local);
    GC_clear_mark_bit(&local);
    cr_assert_eq(tu_warn_count, 3, "%d warnings for a pointer outside the heap", tu_warn_count);
}

/* ------------------------------------------------------------------ */
/* Misuse                                                               */

Test(markproc, mark_and_push_outside_a_procedure_aborts, .signal = SIGABRT)
{
    struct GC_ms_entry e;
    GC_mark_and_push(GC_malloc(16), &e, &e + 1, NULL);
}

Test(markproc, kind_with_unknown_procedure_aborts, .signal = SIGABRT)
{
    GC_new_kind(GC_new_free_list(), GC_MAKE_PROC(GC_MAX_MARK_PROCS - 1, 0), 0, 1);
}

/* A full procedure table: every index left is handed out once, then the
 * next call reports it and aborts, as bdwgc's does. */
static unsigned procs_left;

static void full_table_abort(const char *msg)
{
    cr_assert_eq(procs_left, 0, "aborted with %u indices left: %s", procs_left, msg);
    cr_assert(strstr(msg, "too many mark procedures"), "message: %s", msg);
}

Test(markproc, procedure_table_full_aborts, .signal = SIGABRT)
{
    bool seen[GC_MAX_MARK_PROCS] = {false};
    unsigned first = GC_new_proc(pnode_mark);
    cr_assert(first >= GC_RESERVED_MARK_PROCS && first < GC_MAX_MARK_PROCS);
    seen[first] = true;
    procs_left = GC_MAX_MARK_PROCS - 1 - first;
    GC_set_abort_func(full_table_abort);
    for (unsigned n = procs_left; n > 0; n--) {
        unsigned p = n % 2 ? GC_new_proc(pnode_mark) : GC_new_proc_inner(pnode_mark);
        cr_assert(p >= GC_RESERVED_MARK_PROCS && p < GC_MAX_MARK_PROCS && !seen[p],
                  "index %u handed out", p);
        seen[p] = true;
        procs_left--;
    }
    GC_new_proc(pnode_mark);
}

Test(markproc, kind_with_procedure_and_add_size_aborts, .signal = SIGABRT)
{
    unsigned p = GC_new_proc(pnode_mark);
    GC_new_kind(GC_new_free_list(), GC_MAKE_PROC(p, 0), 1, 1);
}

/* ------------------------------------------------------------------ */
/* Parallel markers, mutator threads, mark-stack overflow              */

static void markers2_init(void)
{
    setenv("GC_MARKERS", "2", 1);
    suite_init();
}

static void overflow_init(void)
{
    setenv("GC_MARKERS", "2", 1);
    setenv("LFGC_MARK_STACK_MAX", "16", 1);
    suite_init();
}

/* A binary tree of procedure-kind nodes linked only through encoded
 * words: deep and wide enough that marking goes parallel. */
static TU_NOINLINE struct pnode *ptree(uint64_t key, unsigned depth)
{
    struct pnode *n = GC_generic_malloc(sizeof *n, pkind);
    if (!n)
        return NULL;
    /* Valid at once (the kind clears its objects): the procedure must
     * see the first child while the second is being built. */
    n->magic = NODE_MAGIC;
    n->key = key;
    if (depth) {
        n->next = ENC(ptree(2 * key, depth - 1));
        n->other = ENC(ptree(2 * key + 1, depth - 1));
    }
    return n;
}

static size_t ptree_check(const struct pnode *n, uint64_t key, unsigned depth)
{
    if (!n || n->magic != NODE_MAGIC || n->key != key)
        return 0;
    if (!depth)
        return n->next || n->other ? 0 : 1;
    return 1 + ptree_check(DEC(n->next), 2 * key, depth - 1) +
           ptree_check(DEC(n->other), 2 * key + 1, depth - 1);
}

static atomic_int stop_mutators;
static atomic_int mutator_failures;

static void *mutator(void *arg)
{
    uint64_t id = (uintptr_t)arg;
    for (uint64_t i = 0; !atomic_load(&stop_mutators); i++) {
        uint64_t key = (id << 40) | (i << 10);
        struct pnode *volatile t = ptree(key | 1, 7);
        if (ptree_check(t, key | 1, 7) != 255)
            atomic_fetch_add(&mutator_failures, 1);
    }
    return NULL;
}

#define TREE_DEPTH 16

static void run_trees(int want_threads)
{
    struct pnode *volatile tree = ptree(1, TREE_DEPTH);
    cr_assert_not_null(tree);
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, mutator, (void *)(i + 1)), 0);
    /* Whether the helper marker takes work depends on the machine's load:
     * collect until it has run a procedure (or 40 times). */
    for (int round = 0; round < 6 || (atomic_load(&proc_thread_count) < want_threads &&
                                      round < 40); round++) {
        tu_collect();
        size_t n = ptree_check(tree, 1, TREE_DEPTH);
        cr_assert_eq(n, ((size_t)2 << TREE_DEPTH) - 1, "round %d: %zu intact nodes", round, n);
    }
    atomic_store(&stop_mutators, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(atomic_load(&mutator_failures), 0, "a mutator's tree was damaged");
    cr_assert_geq(atomic_load(&proc_thread_count), want_threads,
                  "mark procedures ran on %d thread(s)", atomic_load(&proc_thread_count));
    struct lfgc_stats st0, st1;
    lfgc_get_stats(&st0);
    tree = NULL;
    tu_collect();
    lfgc_get_stats(&st1);
    cr_assert_lt(st1.live_bytes, 4 * MiB, "%llu bytes live after the tree was dropped",
                 (unsigned long long)st1.live_bytes);
}

Test(markproc_markers, procedures_on_parallel_markers, .init = markers2_init, .timeout = 60)
{
    /* The collecting thread and the helper marker both run procedures. */
    run_trees(2);
}

Test(markproc_markers, procedure_overflowing_the_mark_stack, .init = overflow_init,
     .timeout = 60)
{
    struct lfgc_stats st;
    run_trees(1);
    lfgc_get_stats(&st);
    cr_assert_gt(st.mark_stack_overflows, 0, "the mark stack never overflowed");
}

/* Ranges a full mark stack drops are not all part of a marked object,
 * which the recovery's rescan of marked objects would find again: those
 * GC_push_all pushes from a push-other-roots procedure (and what
 * finalization and disclaim procedures push) must be kept and scanned
 * later.  bdwgc's disclaim_test lost live objects so with a small stack. */
#define DROPPED_RANGES 256
static void **dropped_roots;    /* malloc'd: not scanned by lfgc */

static void push_many_ranges(void)
{
    for (int i = 0; i < DROPPED_RANGES; i++)
        GC_push_all(&dropped_roots[i], &dropped_roots[i + 1]);
}

static void stack16_init(void)
{
    setenv("GC_MARKERS", "1", 1);
    setenv("LFGC_MARK_STACK_MAX", "16", 1);
    suite_init();
}

Test(markproc_markers, ranges_dropped_by_a_full_mark_stack_are_scanned_later,
     .init = stack16_init, .timeout = 60)
{
    dropped_roots = calloc(DROPPED_RANGES, sizeof *dropped_roots);
    cr_assert_not_null(dropped_roots);
    GC_hidden_pointer h[DROPPED_RANGES];
    for (int i = 0; i < DROPPED_RANGES; i++) {
        dropped_roots[i] = target_new(64, 0xd000 + (uint64_t)i);
        h[i] = tu_hide(dropped_roots[i]);
    }
    GC_push_other_roots_proc previous = GC_get_push_other_roots();
    GC_set_push_other_roots(push_many_ranges);
    struct lfgc_stats st0, st1;
    lfgc_get_stats(&st0);
    tu_collect();
    tu_collect();
    lfgc_get_stats(&st1);
    cr_assert_gt(st1.mark_stack_overflows, st0.mark_stack_overflows,
                 "the mark stack never overflowed: this test needs it to");
    int lost = 0;
    for (int i = 0; i < DROPPED_RANGES; i++)
        lost += !tu_live(h[i]) || target_damage(h[i], 64, 0xd000 + (uint64_t)i) != 0;
    cr_assert_eq(lost, 0, "%d of %d objects held by pushed ranges were lost", lost,
                 DROPPED_RANGES);
    GC_set_push_other_roots(previous);
    tu_collect();
    int kept = 0;
    for (int i = 0; i < DROPPED_RANGES; i++)
        kept += tu_live(h[i]);
    cr_assert_eq(kept, 0, "%d objects survived once no longer pushed", kept);
    free(dropped_roots);
}
