/* test_kinds.c: kinds made at run time (GC_new_kind), how their objects
 * are scanned, and GC_generic_malloc. */
#include "test_util.h"
#include "gc_mark.h"
#include "gc_typed.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>

TestSuite(kinds, .init = tu_warm_up);

/* The holder under test, rooted here. */
static void *volatile root;

#define TARGET 64

/* A holder of `size` bytes of kind k, rooted, with a fresh object at word
 * 0 and another at byte offset `second`; both returned hidden. */
static TU_NOINLINE void make_holder(int k, size_t size, size_t second, GC_hidden_pointer *ha,
                                    GC_hidden_pointer *hb)
{
    GC_disable();
    void **h = GC_generic_malloc(size, k);
    cr_assert_not_null(h);
    void *a = GC_malloc(TARGET), *b = GC_malloc(TARGET);
    cr_assert(a && b);
    tu_fill_bytes(a, TARGET, 1);
    tu_fill_bytes(b, TARGET, 2);
    h[0] = a;
    h[second / sizeof(void *)] = b;
    *ha = tu_hide(a);
    *hb = tu_hide(b);
    root = h;
    GC_enable();
}

static TU_NOINLINE size_t target_damage(GC_hidden_pointer h, uint64_t seed)
{
    return tu_check_bytes(GC_REVEAL_POINTER(h), TARGET, seed);
}

/* Which of the two targets the holder kept. */
static void holder_keeps(int k, size_t size, size_t second, bool first, bool other)
{
    GC_hidden_pointer ha, hb;
    make_holder(k, size, second, &ha, &hb);
    tu_collect();
    tu_collect();
    cr_assert_eq(tu_live(ha), first, "word 0's object: live %d, expected %d", tu_live(ha), first);
    if (first)
        cr_assert_eq(target_damage(ha, 1), TARGET, "word 0's object damaged");
    cr_assert_eq(tu_live(hb), other, "object at %zu: live %d, expected %d", second,
                 tu_live(hb), other);
    if (other)
        cr_assert_eq(target_damage(hb, 2), TARGET, "second object damaged");
    root = NULL;
}

Test(kinds, length_descriptor_scans_only_its_prefix)
{
    int k = (int)GC_new_kind(GC_new_free_list(), 8 | GC_DS_LENGTH, 0, 1);
    cr_assert_geq(k, 4, "kind %d: the first four are predefined", k);
    holder_keeps(k, 32, 8, true, false);
    /* The same holder of GC_malloc's kind keeps both: the test can fail. */
    holder_keeps(GC_I_NORMAL, 32, 8, true, true);
}

Test(kinds, length_descriptor_on_a_large_object)
{
    int k = (int)GC_new_kind(GC_new_free_list(), (64 * KiB) | GC_DS_LENGTH, 0, 1);
    holder_keeps(k, 256 * KiB, 128 * KiB, true, false);
    holder_keeps(k, 256 * KiB, 64 * KiB - 8, true, true);
}

Test(kinds, length_longer_than_the_object_scans_the_object)
{
    int k = (int)GC_new_kind(GC_new_free_list(), MiB | GC_DS_LENGTH, 0, 1);
    holder_keeps(k, 32, 24, true, true);
}

Test(kinds, pointer_free_and_conservative_kinds)
{
    int none = (int)GC_new_kind(GC_new_free_list(), 0 | GC_DS_LENGTH, 0, 1);
    int all = (int)GC_new_kind(GC_new_free_list(), 0 | GC_DS_LENGTH, 1, 1);
    cr_assert_neq(none, all);
    holder_keeps(none, 48, 40, false, false);
    holder_keeps(all, 48, 40, true, true);
    holder_keeps(GC_I_PTRFREE, 48, 40, false, false);
}

Test(kinds, cleared_kind_gives_zeroed_objects)
{
    int k = (int)GC_new_kind(GC_new_free_list(), 16 | GC_DS_LENGTH, 0, 1);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2000; i++) {
            char *p = GC_generic_malloc(200, k);
            cr_assert_not_null(p);
            cr_assert_eq(tu_first_nonzero(p, 200), 200, "object not zeroed");
            memset(p, 0xab, 200);
            if (i & 1)
                GC_free(p);
        }
        tu_collect();
    }
}

/* A free slot of a kind that is not cleared still holds what the object
 * held; a stale pointer that reaches it must not make the collector scan
 * it.  The slot is freed by a thread that then leaves, so that it lies on
 * a global free list (unmarked at the collection) rather than in a cache
 * (whose slots are marked and so never scanned). */
struct freer {
    int kind;
    GC_hidden_pointer slot, target;
};

static void *alloc_store_free(void *arg)
{
    struct freer *f = arg;
    GC_disable();
    void **h = GC_generic_malloc(32, f->kind);
    void *t = GC_malloc(TARGET);
    tu_fill_bytes(t, TARGET, 3);
    h[2] = t;
    f->slot = tu_hide(h);
    f->target = tu_hide(t);
    root = h;                       /* the stale pointer */
    GC_free(h);
    GC_enable();
    return NULL;
}

Test(kinds, free_slot_of_uncleared_kind_retains_nothing)
{
    struct freer f = {(int)GC_new_kind(GC_new_free_list(), 0, 1, 0), 0, 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, alloc_store_free, &f), 0);
    pthread_join(t, NULL);
    cr_assert(tu_slot_is(&root, f.slot, 0));
    tu_collect();
    tu_collect();
    cr_assert_not(tu_live(f.target), "a free slot's old contents were scanned");
    root = NULL;
}

/* Kinds are made from several threads at once: each gets its own. */
#define MAKERS 4
#define PER_MAKER 12
static unsigned made[MAKERS][PER_MAKER];

static void *make_kinds(void *arg)
{
    unsigned *out = arg;
    for (int i = 0; i < PER_MAKER; i++) {
        out[i] = GC_new_kind(GC_new_free_list(), (8u * (i + 1)) | GC_DS_LENGTH, 0, 1);
        /* Allocate of it at once: a thread-local list per kind. */
        for (int j = 0; j < 100; j++) {
            uint64_t *p = GC_generic_malloc(64, (int)out[i]);
            cr_assert_not_null(p);
            cr_assert_eq(p[7], 0);
            p[7] = out[i];
        }
    }
    return NULL;
}

Test(kinds, made_concurrently_all_distinct)
{
    pthread_t t[MAKERS];
    for (int i = 0; i < MAKERS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, make_kinds, made[i]), 0);
    for (int i = 0; i < MAKERS; i++)
        pthread_join(t[i], NULL);
    bool seen[256] = {false};
    for (int i = 0; i < MAKERS; i++)
        for (int j = 0; j < PER_MAKER; j++) {
            unsigned k = made[i][j];
            cr_assert(k >= 4 && k < 4 + MAKERS * PER_MAKER, "kind %u out of range", k);
            cr_assert_not(seen[k], "kind %u handed out twice", k);
            seen[k] = true;
        }
}

/* A kind's objects come from a thread-local list: a freed object is the
 * next one handed out. */
Test(kinds, new_kinds_have_thread_local_lists)
{
    int k = (int)GC_new_kind(GC_new_free_list(), 0, 1, 1);
    void *p = GC_generic_malloc(100, k);
    cr_assert_not_null(p);
    GC_hidden_pointer hp = tu_hide(p);
    memset(p, 0x5a, 100);
    GC_free(p);
    p = GC_generic_malloc(100, k);
    cr_assert(tu_slot_is((void *volatile *)&p, hp, 0), "freed slot not reused first");
    cr_assert_eq(tu_first_nonzero(p, 100), 100, "reused slot not zeroed");
}

Test(kinds, generic_malloc_of_predefined_kinds)
{
    for (int k = 0; k < 4; k++) {
        char *p = GC_generic_malloc(1000, k);
        cr_assert_not_null(p, "kind %d", k);
        cr_assert_geq(GC_size(p), 1000);
        GC_free(p);
    }
}

Test(kinds, generic_malloc_of_unknown_kind_warns)
{
    GC_set_warn_proc(tu_warn_proc);
    tu_warn_reset();
    cr_assert_null(GC_generic_malloc(16, 200));
    cr_assert_null(GC_generic_malloc(16, -1));
    cr_assert_null(GC_generic_malloc(16, 255));
    cr_assert_eq(tu_warn_count, 3);
    cr_assert(strstr(tu_warnings[0].msg, "no kind"), "%s", tu_warnings[0].msg);
}

/* The table holds 255 kinds (a chunk-map byte): 251 after the four
 * predefined ones, then GC_new_kind aborts, as bdwgc's does. */
Test(kinds, table_full_aborts, .signal = SIGABRT)
{
    for (unsigned i = 0; i < 251; i++)
        cr_assert_eq(GC_new_kind(GC_new_free_list(), 0, 1, 1), 4 + i);
    GC_new_kind(GC_new_free_list(), 0, 1, 1);
}

/* ------------------------------------------------------------------ */
/* Precise kinds: bitmaps and per-object descriptors                   */

/* A rooted holder of `size` bytes of kind k whose word wd (unless
 * NO_WORD) holds `word`, with a fresh target at byte offset oa and another
 * at ob; the targets returned hidden.  The word is stored last, as a
 * runtime sets an object's type once it is allocated. */
#define NO_WORD ((size_t)-1)
static size_t extra_wd = NO_WORD;           /* and this word holds extra_word */
static GC_word extra_word;
static TU_NOINLINE void make_typed_holder(int k, size_t size, size_t wd, GC_word word, size_t oa,
                                          size_t ob, GC_hidden_pointer *ha, GC_hidden_pointer *hb)
{
    GC_disable();
    void **h = GC_generic_malloc(size, k);
    cr_assert_not_null(h);
    void *a = GC_malloc(TARGET), *b = GC_malloc(TARGET);
    cr_assert(a && b);
    tu_fill_bytes(a, TARGET, 1);
    tu_fill_bytes(b, TARGET, 2);
    h[oa / sizeof(void *)] = a;
    h[ob / sizeof(void *)] = b;
    if (wd != NO_WORD)
        h[wd] = (void *)word;
    if (extra_wd != NO_WORD)
        h[extra_wd] = (void *)extra_word;
    *ha = tu_hide(a);
    *hb = tu_hide(b);
    root = h;
    GC_enable();
}

static void targets_kept(GC_hidden_pointer ha, GC_hidden_pointer hb, bool first, bool other,
                         const char *what)
{
    cr_assert_eq(tu_live(ha), first, "%s: first target live %d, expected %d", what,
                 tu_live(ha), first);
    if (first)
        cr_assert_eq(target_damage(ha, 1), TARGET, "%s: first target damaged", what);
    cr_assert_eq(tu_live(hb), other, "%s: second target live %d, expected %d", what,
                 tu_live(hb), other);
    if (other)
        cr_assert_eq(target_damage(hb, 2), TARGET, "%s: second target damaged", what);
}

static void typed_holder_keeps(int k, size_t size, size_t wd, GC_word word, size_t oa,
                               size_t ob, bool first, bool other, const char *what)
{
    GC_hidden_pointer ha, hb;
    make_typed_holder(k, size, wd, word, oa, ob, &ha, &hb);
    tu_collect();
    tu_collect();
    targets_kept(ha, hb, first, other, what);
    root = NULL;
}

/* Bitmap descriptors: the most significant bit is word 0. */
#define BM_WORD(i) ((GC_word)1 << (63 - (i)))

Test(kinds, bitmap_descriptor_scans_only_the_words_it_names)
{
    int k = (int)GC_new_kind(GC_new_free_list(), BM_WORD(0) | BM_WORD(3) | GC_DS_BITMAP, 0, 1);
    typed_holder_keeps(k, 64, NO_WORD, 0, 0, 8, true, false, "words 0 and 1");
    typed_holder_keeps(k, 64, NO_WORD, 0, 24, 16, true, false, "words 3 and 2");
    typed_holder_keeps(k, 64, NO_WORD, 0, 0, 24, true, true, "words 0 and 3");
    /* The last word a bitmap names: 61. */
    int last = (int)GC_new_kind(GC_new_free_list(), BM_WORD(61) | GC_DS_BITMAP, 0, 1);
    typed_holder_keeps(last, 62 * 8, NO_WORD, 0, 61 * 8, 60 * 8, true, false, "word 61");
}

Test(kinds, bitmap_longer_than_the_object_stops_at_its_end)
{
    /* Words 0..61 named, objects of 4 words: nothing past the object. */
    int k = (int)GC_new_kind(GC_new_free_list(), ~(GC_word)GC_DS_TAGS | GC_DS_BITMAP, 0, 1);
    typed_holder_keeps(k, 24, NO_WORD, 0, 0, 16, true, true, "words 0 and 2");
}

Test(kinds, bitmap_cannot_have_size_added, .signal = SIGABRT)
{
    GC_new_kind(GC_new_free_list(), BM_WORD(0) | GC_DS_BITMAP, 1, 1);
}

Test(kinds, per_object_descriptor_in_the_object)
{
    /* The descriptor is word 1 of each object. */
    int k = (int)GC_new_kind(GC_new_free_list(), 8 | GC_DS_PER_OBJECT, 0, 1);
    GC_word d = BM_WORD(0) | BM_WORD(3) | GC_DS_BITMAP;
    typed_holder_keeps(k, 64, 1, d, 0, 16, true, false, "bitmap in word 1");
    typed_holder_keeps(k, 64, 1, d, 24, 32, true, false, "bitmap in word 1, words 3 and 4");
    typed_holder_keeps(k, 64, 1, 40 | GC_DS_LENGTH, 0, 32, true, true, "length 40");
    typed_holder_keeps(k, 64, 1, 24 | GC_DS_LENGTH, 16, 32, true, false, "length 24");
    typed_holder_keeps(k, 64, 1, 0, 0, 16, false, false, "descriptor 0");
}

Test(kinds, per_object_descriptor_at_the_end_with_size_added)
{
    /* bdwgc's typed objects: the descriptor in the last word. */
    int k = (int)GC_new_kind(GC_new_free_list(), (GC_word)-8 | GC_DS_PER_OBJECT, 1, 1);
    size_t last = GC_size(GC_generic_malloc(100, k)) / 8 - 1;
    GC_word d = BM_WORD(2) | GC_DS_BITMAP;
    typed_holder_keeps(k, 100, last, d, 16, 24, true, false, "small");
    last = GC_size(GC_generic_malloc(200 * KiB, k)) / 8 - 1;
    typed_holder_keeps(k, 200 * KiB, last, d, 16, 8, true, false, "large");
    typed_holder_keeps(k, 200 * KiB, last, 150 * KiB | GC_DS_LENGTH, 140 * KiB, 160 * KiB,
                       true, false, "large, length");
}

Test(kinds, length_with_size_added)
{
    /* All but the last word. */
    int k = (int)GC_new_kind(GC_new_free_list(), (GC_word)-8 | GC_DS_LENGTH, 1, 1);
    size_t size = GC_size(GC_generic_malloc(48, k));
    typed_holder_keeps(k, 48, NO_WORD, 0, size - 16, size - 8, true, false, "last two words");
}

/* A type record as a runtime keeps one: the descriptor at byte 8. */
static GC_word type_record[4];

Test(kinds, per_object_descriptor_through_the_first_word)
{
    GC_word descr = (GC_word)(-(GC_signed_word)8 - GC_INDIR_PER_OBJ_BIAS) | GC_DS_PER_OBJECT;
    int k = (int)GC_new_kind(GC_new_free_list(), descr, 0, 1);
    type_record[1] = BM_WORD(2) | GC_DS_BITMAP;
    typed_holder_keeps(k, 64, 0, (GC_word)type_record, 16, 24, true, false, "bitmap");
    type_record[1] = 32 | GC_DS_LENGTH;
    typed_holder_keeps(k, 64, 0, (GC_word)type_record, 16, 32, true, false, "length");
    /* No type yet: nothing scanned. */
    typed_holder_keeps(k, 64, NO_WORD, 0, 16, 24, false, false, "no record");
    /* A per-object descriptor in the record that says where the real one
     * is: in word 3 of the object. */
    type_record[1] = 24 | GC_DS_PER_OBJECT;
    extra_wd = 3;
    extra_word = BM_WORD(1) | GC_DS_BITMAP;
    typed_holder_keeps(k, 64, 0, (GC_word)type_record, 8, 16, true, false, "nested");
    extra_wd = NO_WORD;
}

/* A free slot of a kind whose descriptor is reached through word 0: word 0
 * holds the free-list link, which must not be followed. */
Test(kinds, free_slot_of_per_object_kind_is_not_read)
{
    GC_word descr = (GC_word)(-(GC_signed_word)8 - GC_INDIR_PER_OBJ_BIAS) | GC_DS_PER_OBJECT;
    struct freer f = {(int)GC_new_kind(GC_new_free_list(), descr, 0, 0), 0, 0};
    type_record[1] = ~(GC_word)GC_DS_TAGS | GC_DS_BITMAP;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, alloc_store_free, &f), 0);
    pthread_join(t, NULL);
    cr_assert(tu_slot_is(&root, f.slot, 0));
    tu_collect();
    tu_collect();
    cr_assert_not(tu_live(f.target), "a free slot's old contents were scanned");
    root = NULL;
}

/* A span that held pointer-free objects goes back to the pool and is
 * taken by a kind whose objects the marker reads (a mark procedure here;
 * gcj's vtable pointer, a per-object descriptor): a slot the new kind has
 * not handed out yet, which a stale word points at, must not reach the
 * procedure with the old object's data.  bdwgc's gctest died so: a gcj
 * slot whose first word was a leaf's integer. */
#define STALE_WORD ((GC_word)0x392)
#define STALE_LEAVES (16 * 1024)
static GC_hidden_pointer stale_leaf[STALE_LEAVES];
static void *volatile stale_root;
static volatile int stale_seen;

static struct GC_ms_entry *stale_check_proc(GC_word *addr, struct GC_ms_entry *msp,
                                            struct GC_ms_entry *lim, GC_word env)
{
    (void)lim;
    (void)env;
    if (addr[0] == STALE_WORD)
        stale_seen++;
    return msp;
}

static TU_NOINLINE void stale_leaves_make(void)
{
    for (size_t i = 0; i < STALE_LEAVES; i++) {
        GC_word *w = GC_malloc_atomic(3 * sizeof(GC_word));
        cr_assert_not_null(w);
        w[0] = STALE_WORD;
        w[1] = w[2] = 0;
        stale_leaf[i] = tu_hide(w);
    }
}

/* Allocate objects of kind k until one lands in a chunk that held leaves
 * well past it; point stale_root at such a leaf's slot.  False if none
 * did. */
static TU_NOINLINE bool stale_root_set(int k)
{
    const uintptr_t chunk = 32 * KiB;
    for (size_t n = 0; n < STALE_LEAVES; n++) {
        uintptr_t p = (uintptr_t)GC_generic_malloc(3 * sizeof(GC_word), k);
        cr_assert(p);
        for (size_t i = 0; i < STALE_LEAVES; i++) {
            uintptr_t q = (uintptr_t)GC_REVEAL_POINTER(stale_leaf[i]);
            if (q / chunk == p / chunk && q > p + 8 * KiB) {
                stale_root = (void *)q;
                return true;
            }
        }
    }
    return false;
}

Test(kinds, slot_not_handed_out_of_a_reused_span_is_not_read_as_its_new_kind)
{
    int k = (int)GC_new_kind(GC_new_free_list(), GC_MAKE_PROC(GC_new_proc(stale_check_proc), 0),
                             0, 1);
    stale_leaves_make();
    tu_collect();
    GC_disable();
    bool set = stale_root_set(k);
    GC_enable();
    cr_assert(set, "setup: no span of the leaves was taken by the new kind");
    stale_seen = 0;
    tu_collect();
    cr_assert_eq(stale_seen, 0, "a mark procedure was called on a slot never allocated, "
                 "holding the data of the span's previous kind");
    stale_root = NULL;
}

/* Into old holder h, fresh targets at byte offsets oa and ob. */
static TU_NOINLINE void store_targets(size_t oa, size_t ob, GC_hidden_pointer *ha,
                                      GC_hidden_pointer *hb)
{
    GC_disable();
    void **h = root;
    /* Past the slots the thread's cache held at the last collection,
     * which that collection marked (they count as allocated). */
    for (int i = 0; i < 2000; i++)
        cr_assert_not_null(GC_malloc(TARGET));
    void *a = GC_malloc(TARGET), *b = GC_malloc(TARGET);
    cr_assert(a && b);
    tu_fill_bytes(a, TARGET, 1);
    tu_fill_bytes(b, TARGET, 2);
    h[oa / 8] = a;
    h[ob / 8] = b;
    *ha = tu_hide(a);
    *hb = tu_hide(b);
    GC_enable();
}

/* A minor collection rescans the old objects on written pages: of a
 * precise kind's, only the words its descriptor names. */
static void minor_rescan_is_precise(int k, size_t size, size_t wd, GC_word word, size_t oa,
                                    size_t ob)
{
    GC_hidden_pointer ha, hb;
    make_typed_holder(k, size, wd, word, 0, 0, &ha, &hb);
    tu_collect();
    if (!tu_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    /* The holder is old; the targets stored now are young. */
    store_targets(oa, ob, &ha, &hb);
    cr_assert(tu_collect_minor(), "expected a minor collection");
    targets_kept(ha, hb, true, false, "after a minor collection");
    root = NULL;
}

Test(kinds, minor_collection_rescans_bitmap_kind_precisely)
{
    int k = (int)GC_new_kind(GC_new_free_list(), BM_WORD(0) | BM_WORD(5) | GC_DS_BITMAP, 0, 1);
    minor_rescan_is_precise(k, 64, NO_WORD, 0, 40, 48);
}

Test(kinds, minor_collection_rescans_per_object_kind_precisely)
{
    int k = (int)GC_new_kind(GC_new_free_list(), (GC_word)-8 | GC_DS_PER_OBJECT, 1, 1);
    size_t last = GC_size(GC_generic_malloc(300 * KiB, k)) / 8 - 1;
    /* A large object: the written page is the one of the targets only. */
    minor_rescan_is_precise(k, 300 * KiB, last, BM_WORD(0) | BM_WORD(1) | GC_DS_BITMAP, 8, 16);
    minor_rescan_is_precise(k, 300 * KiB, last, (200 * KiB) | GC_DS_LENGTH, 100 * KiB,
                            250 * KiB);
}

/* A per-object descriptor that names a mark procedure reading outside the
 * object (a side table no page protection covers): every minor
 * collection must call it on the old object, written or not. */
static GC_word *side_words;

static struct GC_ms_entry *side_word_proc(GC_word *addr, struct GC_ms_entry *msp,
                                          struct GC_ms_entry *lim, GC_word env)
{
    (void)addr;
    if (side_words[env])
        msp = GC_MARK_AND_PUSH((void *)(side_words[env] ^ ((GC_word)1 << 63)), msp, lim, NULL);
    return msp;
}

static TU_NOINLINE GC_hidden_pointer side_word_target(uint64_t seed)
{
    void *t = GC_malloc(TARGET);
    cr_assert_not_null(t);
    tu_fill_bytes(t, TARGET, seed);
    side_words[3] = (GC_word)t ^ ((GC_word)1 << 63);    /* no heap address */
    return tu_hide(t);
}

Test(kinds, minor_collection_calls_a_per_object_procedure)
{
    side_words = calloc(8, sizeof *side_words);
    cr_assert_not_null(side_words);
    unsigned proc = GC_new_proc(side_word_proc);
    /* The descriptor is word 1 of each object; a large object: a span of
     * its own, whose pages nothing else writes. */
    int k = (int)GC_new_kind(GC_new_free_list(), 8 | GC_DS_PER_OBJECT, 0, 1);
    GC_word *h = GC_generic_malloc(100 * KiB, k);
    cr_assert_not_null(h);
    h[1] = GC_MAKE_PROC(proc, 3);
    root = h;
    h = NULL;
    tu_collect();
    if (!tu_collect_minor())
        TU_SKIP("minor collections unavailable: the kernel lacks userfaultfd "
                "asynchronous write protection");
    cr_assert(tu_collect_minor());          /* the holder is old, its pages protected */
    GC_hidden_pointer t[3];
    for (int round = 0; round < 3; round++) {
        GC_disable();
        t[round] = side_word_target(50 + (uint64_t)round);
        GC_enable();
        cr_assert(tu_collect_minor(), "round %d: expected a minor collection", round);
        cr_assert(tu_collect_minor(), "round %d: expected a minor collection", round);
        cr_assert(tu_live(t[round]), "round %d: the object the procedure reaches was freed",
                  round);
        cr_assert_eq(target_damage(t[round], 50 + (uint64_t)round), TARGET,
                     "round %d: damaged", round);
    }
    side_words[3] = 0;
    tu_collect();
    for (int round = 0; round < 3; round++)
        cr_assert_not(tu_live(t[round]), "object %d survived once dropped", round);
    root = NULL;
    free(side_words);
}

/* GC_make_descriptor's descriptor of a layout longer than a bitmap
 * descriptor holds may be a kind's own, as in bdwgc: only the words it
 * names are scanned, by full and minor collections. */
Test(kinds, long_bitmap_descriptor_as_the_kinds_own)
{
    GC_word bm[3] = {0};
    GC_set_bit(bm, 1);
    GC_set_bit(bm, 100);
    GC_set_bit(bm, 150);
    GC_descr d = GC_make_descriptor(bm, 160);
    cr_assert_eq(d & GC_DS_TAGS, GC_DS_PROC, "160 words: a long bitmap");
    int k = (int)GC_new_kind(GC_new_free_list(), d, 0, 1);
    typed_holder_keeps(k, 160 * 8, NO_WORD, 0, 8, 16, true, false, "words 1 and 2");
    typed_holder_keeps(k, 160 * 8, NO_WORD, 0, 100 * 8, 150 * 8, true, true,
                       "words 100 and 150");
    typed_holder_keeps(k, 160 * 8, NO_WORD, 0, 99 * 8, 151 * 8, false, false,
                       "words 99 and 151");
    /* A large object: words past the layout's end are not scanned. */
    typed_holder_keeps(k, 100 * KiB, NO_WORD, 0, 150 * 8, 5000 * 8, true, false,
                       "large, words 150 and 5000");
    minor_rescan_is_precise(k, 160 * 8, NO_WORD, 0, 100 * 8, 101 * 8);
}

/* Index 7 names no procedure: only a GC_make_descriptor result may use it. */
Test(kinds, reserved_index_without_a_layout_aborts, .signal = SIGABRT)
{
    GC_word bm[2] = {0};
    GC_set_bit(bm, 100);
    cr_assert_eq(GC_make_descriptor(bm, 101) & GC_DS_TAGS, GC_DS_PROC);
    GC_new_kind(GC_new_free_list(), GC_MAKE_PROC(7, 12345), 0, 1);
}

Test(kinds, mark_procedures_not_supported_yet, .signal = SIGABRT)
{
    GC_new_kind(GC_new_free_list(), ((GC_word)9 << GC_DS_TAG_BITS) | GC_DS_PROC, 0, 1);
}

/* Allocation and freeing of a kind's small objects take no lock: they go
 * on while another thread holds the allocation lock. */
struct lock_probe {
    int kind;
    sem_t ready, go, done;
};

static void *alloc_under_held_lock(void *arg)
{
    struct lock_probe *lp = arg;
    void *keep[8];
    GC_free(GC_generic_malloc(64, lp->kind));      /* the thread's list exists */
    sem_post(&lp->ready);
    sem_wait(&lp->go);
    for (int i = 0; i < 8; i++)
        keep[i] = GC_generic_malloc(64, lp->kind);
    for (int i = 0; i < 8; i++)
        GC_free(keep[i]);
    sem_post(&lp->done);
    return NULL;
}

static void *while_locked(void *arg)
{
    struct lock_probe *lp = arg;
    sem_post(&lp->go);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 3;
    return (void *)(uintptr_t)(sem_timedwait(&lp->done, &deadline) == 0);
}

static void no_lock_per_object(int kind)
{
    struct lock_probe lp = {.kind = kind};
    sem_init(&lp.ready, 0, 0);
    sem_init(&lp.go, 0, 0);
    sem_init(&lp.done, 0, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, alloc_under_held_lock, &lp), 0);
    sem_wait(&lp.ready);
    bool ok = GC_call_with_alloc_lock(while_locked, &lp) != NULL;
    pthread_join(t, NULL);
    cr_assert(ok, "kind %d: allocation or free waited for the lock", kind);
}

Test(kinds, no_lock_per_object_of_new_kind)
{
    no_lock_per_object((int)GC_new_kind(GC_new_free_list(), 16 | GC_DS_LENGTH, 0, 1));
}

Test(kinds, no_lock_per_object_of_predefined_kinds)
{
    no_lock_per_object(GC_I_NORMAL);
    no_lock_per_object(GC_I_PTRFREE);
}
