/* test_retention.c: what keeps an object alive, and what must not.
 *
 * Roots: the stack, callee-saved registers, static data of the program and
 * of shared libraries (one loaded with dlopen), ranges added with
 * GC_add_roots; heap references: long chains, interior pointers, pointers
 * one past the end.  Non-roots: atomic objects, free slots, excluded static
 * ranges, removed root ranges.  Every test checks both that the kept
 * objects survive with their contents and that the dropped ones are
 * reclaimed.
 *
 * References the test itself keeps are hidden (GC_HIDE_POINTER), the stack
 * is wiped before each collection, collections are off while hidden-only
 * objects are being set up, and the warm-up keeps test objects off the
 * slots that false references in the libraries' static data pin (see
 * test_util.h), so that every "reclaimed" assertion below is
 * deterministic.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <libgen.h>
#include <limits.h>
#include <unistd.h>

TestSuite(retention, .init = tu_warm_up);

/* ------------------------------------------------------------------ */
/* Helpers                                                             */

/* A pointerful object of n bytes filled with the byte pattern `seed`,
 * returned hidden. */
static TU_NOINLINE GC_hidden_pointer new_filled(size_t n, uint64_t seed)
{
    char *p = GC_malloc(n);
    cr_assert_not_null(p, "GC_malloc(%zu)", n);
    tu_fill_bytes(p, n, seed);
    return tu_hide(p);
}

/* Does the (hidden) object still hold its pattern? */
static TU_NOINLINE int intact(GC_hidden_pointer h, size_t n, uint64_t seed)
{
    return tu_check_bytes(GC_REVEAL_POINTER(h), n, seed) == n;
}

/* A pointerful object of n bytes whose every word points to `target`
 * (hidden), returned hidden. */
static TU_NOINLINE GC_hidden_pointer new_pointing_to(size_t n, GC_hidden_pointer target,
                                                  int atomic)
{
    void **p = atomic ? GC_malloc_atomic(n) : GC_malloc(n);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n / sizeof(void *); i++)
        p[i] = GC_REVEAL_POINTER(target);
    return tu_hide(p);
}

/* ------------------------------------------------------------------ */
/* Stack                                                               */

Test(retention, stack_slot_keeps_object)
{
    /* While the test allocates, an object it holds only in hidden form is
     * garbage: collections are kept off until the roots are set up. */
    GC_disable();
    GC_hidden_pointer keep = new_filled(200, 1);
    GC_hidden_pointer drop = new_filled(200, 2);
    /* The only reference to `keep`: a stack slot of this frame. */
    void *volatile slot;
    tu_store(&slot, keep, 0);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(keep), "object referenced from the stack was reclaimed");
    cr_assert(intact(keep, 200, 1), "object referenced from the stack corrupted");
    cr_assert_not(tu_live(drop), "unreferenced object was not reclaimed");
    /* Allocate over the reclaimed memory, collect again. */
    for (int i = 0; i < 1000; i++)
        (void)new_filled(200, 3);
    tu_collect();
    cr_assert(tu_live(keep));
    cr_assert(intact(keep, 200, 1));
    cr_assert(tu_slot_is(&slot, keep, 0));
    slot = NULL;
    tu_collect();
    cr_assert_not(tu_live(keep), "object no longer referenced was not reclaimed");
}

/* Stack references several frames up. */
static TU_NOINLINE int deep_frames(int depth, GC_hidden_pointer h)
{
    void *volatile local = depth == 10 ? GC_REVEAL_POINTER(h) : NULL;
    int r;
    if (depth == 0) {
        tu_collect();
        r = tu_live(h) && intact(h, 5000, 77);
    } else {
        r = deep_frames(depth - 1, h);
    }
    __asm__ volatile("" : : "r"(local) : "memory");
    return r;
}

Test(retention, stack_slot_in_outer_frame)
{
    GC_hidden_pointer h = new_filled(5000, 77);
    cr_assert(deep_frames(20, h), "object referenced ten frames up was reclaimed");
    tu_collect();
    cr_assert_not(tu_live(h));
}

/* ------------------------------------------------------------------ */
/* Registers                                                           */

/* Each object's only reference lives in a local variable that the
 * compiler keeps in a (callee-saved) register across the calls: the asm
 * statements force the value into a register and make the compiler assume
 * it changed, so it can neither rematerialise it nor drop it. */
static TU_NOINLINE int registers_keep(GC_hidden_pointer h0, GC_hidden_pointer h1,
                                      GC_hidden_pointer h2, GC_hidden_pointer h3,
                                      GC_hidden_pointer h4)
{
    register char *p0 = GC_REVEAL_POINTER(h0);
    register char *p1 = GC_REVEAL_POINTER(h1);
    register char *p2 = GC_REVEAL_POINTER(h2);
    register char *p3 = GC_REVEAL_POINTER(h3);
    register char *p4 = GC_REVEAL_POINTER(h4);
    h0 = h1 = h2 = h3 = h4 = 0;
    __asm__ volatile("" : "+r"(p0), "+r"(p1), "+r"(p2), "+r"(p3), "+r"(p4));
    tu_clear_stack();
    GC_gcollect();
    tu_clear_stack();
    /* Reuse whatever was reclaimed. */
    for (int i = 0; i < 2000; i++) {
        char *g = GC_malloc(96);
        memset(g, 0xee, 96);
    }
    GC_gcollect();
    __asm__ volatile("" : "+r"(p0), "+r"(p1), "+r"(p2), "+r"(p3), "+r"(p4));
    int ok = 1;
    char *ps[5] = { p0, p1, p2, p3, p4 };
    for (int i = 0; i < 5; i++)
        ok &= lfgc_is_live(ps[i]) && tu_check_bytes(ps[i], 96, 100 + i) == 96;
    return ok;
}

Test(retention, register_keeps_object)
{
    GC_hidden_pointer h[5];
    GC_disable();
    for (int i = 0; i < 5; i++)
        h[i] = new_filled(96, 100 + i);
    GC_hidden_pointer drop = new_filled(96, 9);
    GC_enable();
    cr_assert(registers_keep(h[0], h[1], h[2], h[3], h[4]),
              "an object referenced only from a register was reclaimed or corrupted");
    cr_assert_not(tu_live(drop));
    tu_collect();
    for (int i = 0; i < 5; i++)
        cr_assert_not(tu_live(h[i]), "object %d not reclaimed once its register "
                      "was dead", i);
}

/* ------------------------------------------------------------------ */
/* Static data of the program                                           */

static void *volatile bss_root;                  /* .bss  */
static int data_anchor;
static void *volatile data_root = &data_anchor;  /* .data */

Test(retention, static_pointers_keep_objects)
{
    GC_disable();
    GC_hidden_pointer a = new_filled(64, 11), b = new_filled(3000, 12);
    GC_hidden_pointer drop = new_filled(64, 13);
    tu_store(&bss_root, a, 0);
    tu_store(&data_root, b, 0);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(a) && intact(a, 64, 11), "object held by a .bss pointer lost");
    cr_assert(tu_live(b) && intact(b, 3000, 12), "object held by a .data pointer lost");
    cr_assert_not(tu_live(drop));
    bss_root = NULL;
    data_root = &data_anchor;
    tu_collect();
    cr_assert_not(tu_live(a));
    cr_assert_not(tu_live(b));
}

/* ------------------------------------------------------------------ */
/* Static data of a shared library loaded with dlopen                   */

struct helper {
    void *handle;
    void (*set)(int, void *);
    void *(*get)(int);
};

static void helper_open(struct helper *h)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0, "readlink(/proc/self/exe)");
    exe[n] = 0;
    char *dir = dirname(exe);
    const char *candidates[] = { "/.libs/libroot_helper.so", "/libroot_helper.so" };
    char path[PATH_MAX + 64];
    h->handle = NULL;
    for (size_t i = 0; i < 2 && !h->handle; i++) {
        snprintf(path, sizeof path, "%s%s", dir, candidates[i]);
        if (access(path, R_OK) == 0)
            h->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    cr_assert_not_null(h->handle, "cannot load the helper library "
                       "tests/.libs/libroot_helper.so next to %s: %s "
                       "(it is built by 'make check')", dir, dlerror());
    *(void **)&h->set = dlsym(h->handle, "root_helper_set");
    *(void **)&h->get = dlsym(h->handle, "root_helper_get");
    cr_assert_not_null(h->set);
    cr_assert_not_null(h->get);
}

static TU_NOINLINE void helper_store(struct helper *h, int which, GC_hidden_pointer p)
{
    h->set(which, p ? GC_REVEAL_POINTER(p) : NULL);
}

Test(retention, shared_library_data_keeps_objects)
{
    struct helper h;
    helper_open(&h);
    GC_disable();
    GC_hidden_pointer a = new_filled(128, 21), b = new_filled(20000, 22);
    GC_hidden_pointer drop = new_filled(128, 23);
    helper_store(&h, 0, a);
    helper_store(&h, 1, b);
    GC_enable();
    for (int i = 0; i < 3; i++) {
        tu_collect();
        cr_assert(tu_live(a) && intact(a, 128, 21),
                  "object held by a shared library's .bss lost (collection %d)", i);
        cr_assert(tu_live(b) && intact(b, 20000, 22),
                  "object held by a shared library's .data lost (collection %d)", i);
    }
    cr_assert_eq(tu_hide(h.get(0)), a);
    cr_assert_not(tu_live(drop));
    helper_store(&h, 0, 0);
    helper_store(&h, 1, 0);
    tu_collect();
    cr_assert_not(tu_live(a));
    cr_assert_not(tu_live(b));
}

/* GC_no_dls: shared libraries' data are not roots. */
Test(retention, no_dls_ignores_shared_library_data)
{
    struct helper h;
    helper_open(&h);
    GC_set_no_dls(1);
    cr_assert_eq(GC_get_no_dls(), 1);
    GC_disable();
    GC_hidden_pointer a = new_filled(128, 31);
    GC_hidden_pointer b = new_filled(128, 32);
    void *volatile keep;
    tu_store(&keep, b, 0);
    helper_store(&h, 0, a);
    GC_enable();
    tu_collect();
    cr_assert_not(tu_live(a), "with GC_no_dls set, a library's data still retained");
    cr_assert(tu_live(b), "the program's own stack is still a root");
    cr_assert(tu_slot_is(&keep, b, 0));
    GC_set_no_dls(0);
}

/* GC_register_has_static_roots_callback: the filter sees every writable
 * segment, the program's (named "") and each library's, and a segment it
 * refuses is not scanned. */
static int filter_program, filter_helper, filter_helper_covers;
static uintptr_t filter_slot_addr;

static int refuse_helper(const char *name, void *start, size_t size)
{
    if (!name[0])
        filter_program++;
    if (!strstr(name, "libroot_helper"))
        return 1;
    filter_helper++;
    if (filter_slot_addr - (uintptr_t)start < size)
        filter_helper_covers++;
    return 0;
}

static void *volatile filter_keep;

Test(retention, static_roots_filter_leaves_refused_segments_out)
{
    struct helper h;
    helper_open(&h);
    filter_slot_addr = (uintptr_t)dlsym(h.handle, "root_helper_bss_slot");
    cr_assert_neq(filter_slot_addr, 0);
    GC_register_has_static_roots_callback(refuse_helper);
    GC_disable();
    GC_hidden_pointer a = new_filled(128, 41);
    GC_hidden_pointer b = new_filled(128, 42);
    tu_store(&filter_keep, b, 0);
    helper_store(&h, 0, a);
    GC_enable();
    tu_collect();
    cr_assert_gt(filter_program, 0, "the filter never saw the program's data");
    cr_assert_gt(filter_helper_covers, 0, "no segment given to the filter holds the "
                 "library's .bss slot (%d of its segments seen)", filter_helper);
    cr_assert_not(tu_live(a), "a segment the filter refused still retained its object");
    cr_assert(tu_live(b) && intact(b, 128, 42), "the program's data (accepted) lost an object");

    /* Without the filter the library's data are roots again. */
    GC_register_has_static_roots_callback(NULL);
    GC_disable();
    GC_hidden_pointer c = new_filled(128, 43);
    helper_store(&h, 0, c);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(c) && intact(c, 128, 43), "the library's data not scanned without a filter");
    helper_store(&h, 0, 0);
}

/* GC_clear_exclusion_table: excluded static ranges are scanned again. */
static void *volatile excluded_slot;

Test(retention, clear_exclusion_table_scans_excluded_ranges_again)
{
    GC_exclude_static_roots((void *)&excluded_slot, (char *)&excluded_slot + sizeof excluded_slot);
    GC_disable();
    GC_hidden_pointer a = new_filled(128, 51);
    tu_store(&excluded_slot, a, 0);
    GC_enable();
    tu_collect();
    cr_assert_not(tu_live(a), "an excluded range retained its object");
    GC_clear_exclusion_table();
    GC_disable();
    GC_hidden_pointer b = new_filled(128, 52);
    tu_store(&excluded_slot, b, 0);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(b) && intact(b, 128, 52),
              "after GC_clear_exclusion_table the range is still not scanned");
    excluded_slot = NULL;
}

/* ------------------------------------------------------------------ */
/* Heap chains                                                         */

struct node {
    struct node *next;
    uint64_t value;
};

#define CHAIN_LEN 1000000
#define CHAIN_SAMPLE 1000           /* every 1000th node is watched */
static struct node *volatile chain_root;

static TU_NOINLINE void build_chain(GC_hidden_pointer *sample)
{
    struct node *head = NULL;
    for (long i = CHAIN_LEN - 1; i >= 0; i--) {
        struct node *n = GC_malloc(sizeof *n);
        cr_assert_not_null(n);
        n->next = head;
        n->value = tu_pattern((uint64_t)i, 0);
        head = n;
        if (i % CHAIN_SAMPLE == 0)
            sample[i / CHAIN_SAMPLE] = tu_hide(n);
    }
    chain_root = head;
}

static TU_NOINLINE long verify_chain(void)
{
    long i = 0;
    for (struct node *n = chain_root; n; n = n->next, i++)
        if (n->value != tu_pattern((uint64_t)i, 0))
            return -1 - i;
    return i;
}

Test(retention, long_chain_from_one_root)
{
    GC_hidden_pointer *sample = malloc(sizeof *sample * (CHAIN_LEN / CHAIN_SAMPLE));
    cr_assert_not_null(sample);
    build_chain(sample);
    for (int round = 0; round < 3; round++) {
        tu_collect();
        long n = verify_chain();
        cr_assert_eq(n, CHAIN_LEN, "chain broken after collection %d: %ld", round, n);
        /* Garbage between collections lands in any slot wrongly reclaimed. */
        for (int i = 0; i < 100000; i++) {
            struct node *g = GC_malloc(sizeof *g);
            g->value = ~0ull;
        }
    }
    for (int k = 0; k < CHAIN_LEN / CHAIN_SAMPLE; k++)
        cr_assert(tu_live(sample[k]), "chain node %d reported dead", k * CHAIN_SAMPLE);
    chain_root = NULL;
    tu_collect();
    int alive = 0;
    for (int k = 0; k < CHAIN_LEN / CHAIN_SAMPLE; k++)
        alive += tu_live(sample[k]);
    cr_assert_eq(alive, 0, "%d of %d sampled nodes of a dropped chain survived",
                 alive, CHAIN_LEN / CHAIN_SAMPLE);
    struct lfgc_stats st;
    lfgc_get_stats(&st);
    cr_assert_lt(st.live_bytes, tu_base_stats.live_bytes + 4 * MiB,
                 "live bytes after dropping the chain: %llu (%llu after warm-up)",
                 (unsigned long long)st.live_bytes,
                 (unsigned long long)tu_base_stats.live_bytes);
    free(sample);
}

/* A chain through objects of every class up to 1 MiB. */
#define CLASS_CHAIN 48

static TU_NOINLINE void build_class_chain(GC_hidden_pointer *hs, size_t *lens)
{
    void **head = NULL;
    for (unsigned c = 0; c < CLASS_CHAIN; c++) {
        size_t n = tu_class_sizes[c] - 1;
        void **p = GC_malloc(n);
        cr_assert_not_null(p);
        cr_assert_eq(lowfat_size(p), tu_class_sizes[c]);
        tu_fill_bytes(p + 1, n - sizeof(void *), c);
        p[0] = head;
        head = p;
        hs[c] = tu_hide(p);
        lens[c] = n;
    }
    /* The only root: the head, kept at an interior address of a global. */
    bss_root = (char *)head + 5;
}

static TU_NOINLINE void check_class_chain(const GC_hidden_pointer *hs, const size_t *lens)
{
    for (unsigned i = 0; i < CLASS_CHAIN; i++) {
        void **p = GC_REVEAL_POINTER(hs[i]);
        cr_assert(lfgc_is_live(p), "object %u of the chain reclaimed", i);
        cr_assert_eq(tu_check_bytes(p + 1, lens[i] - sizeof(void *), i),
                     lens[i] - sizeof(void *), "object %u corrupted", i);
        cr_assert(p[0] == (i ? GC_REVEAL_POINTER(hs[i - 1]) : NULL),
                  "link of object %u corrupted", i);
    }
}

Test(retention, chain_through_every_class)
{
    GC_hidden_pointer hs[CLASS_CHAIN];
    size_t lens[CLASS_CHAIN];
    build_class_chain(hs, lens);
    for (int round = 0; round < 3; round++) {
        tu_collect();
        check_class_chain(hs, lens);
    }
    bss_root = NULL;
    tu_collect();
    for (unsigned i = 0; i < CLASS_CHAIN; i++)
        cr_assert_not(tu_live(hs[i]), "object %u of a dropped chain survived", i);
}

/* ------------------------------------------------------------------ */
/* Interior pointers                                                   */

static TU_NOINLINE int interior_keeps(size_t n, size_t offset, uint64_t seed)
{
    GC_disable();
    GC_hidden_pointer h = new_filled(n, seed);
    GC_hidden_pointer drop = new_filled(n, seed + 1);
    /* The only reference: into the middle of the object. */
    void *volatile inner;
    tu_store(&inner, h, offset);
    GC_enable();
    tu_collect();
    int ok = tu_live(h) && intact(h, n, seed) && !tu_live(drop);
    cr_assert(tu_base_is(h, offset), "GC_base of an interior pointer");
    cr_assert(tu_slot_is(&inner, h, offset));
    inner = NULL;
    tu_collect();
    return ok && !tu_live(h);
}

Test(retention, interior_pointers_keep_objects)
{
    struct { size_t n, off; } cases[] = {
        { 16, 8 }, { 100, 50 }, { 100, 99 }, { 1000, 1 }, { 4000, 3999 },
        { 12000, 6000 }, { 30000, 29999 }, { 100000, 70000 },
        { 1 << 20, 700 * 1024 }, { (4 << 20) - 1, (4 << 20) - 2 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert(interior_keeps(cases[i].n, cases[i].off, 40 + i),
                  "interior pointer at offset %zu of a %zu-byte object: object not "
                  "kept intact, or garbage not reclaimed", cases[i].off, cases[i].n);
}

/* ------------------------------------------------------------------ */
/* One past the end                                                    */

/* Allocate objects of n bytes until two are adjacent; return the pair
 * (hidden), dropping the others. */
static TU_NOINLINE int adjacent_pair(size_t n, GC_hidden_pointer *a, GC_hidden_pointer *b)
{
    char *prev = NULL;
    for (int i = 0; i < 64; i++) {
        char *p = GC_malloc(n);
        cr_assert_not_null(p);
        tu_fill_bytes(p, n, n + (uint64_t)i);
        if (prev && p == prev + lowfat_size(prev)) {
            *a = tu_hide(prev);
            *b = tu_hide(p);
            return i;
        }
        prev = p;
    }
    return -1;
}

static TU_NOINLINE void one_past_end_case(size_t n)
{
    GC_hidden_pointer a, b;
    int i = adjacent_pair(n, &a, &b);
    cr_assert_geq(i, 1, "no two adjacent %zu-byte objects", n);
    /* Only a pointer just past the end of a (what a loop over the object
     * leaves behind) is kept. */
    void *volatile end;
    tu_store(&end, a, n);
    tu_collect();
    cr_assert(tu_live(a), "a pointer one past the end of a %zu-byte object did not "
              "keep it", n);
    cr_assert(intact(a, n, n + (uint64_t)i - 1), "%zu-byte object corrupted", n);
    cr_assert(tu_base_is(a, n), "GC_base(one past the end of a %zu-byte object)", n);
    cr_assert(tu_slot_is(&end, a, n));
    cr_assert_not(tu_live(b), "a pointer one past the end of a %zu-byte object "
                  "retained the next object", n);
    end = NULL;
    tu_collect();
    cr_assert_not(tu_live(a));
}

Test(retention, one_past_end_keeps_object_not_neighbour)
{
    /* n = slot size - 1: with the extra byte the object fills its slot, and
     * one past the end is its very last byte. */
    size_t sizes[] = { 15, 47, 111, 255, 527, 1039, 4095, 4111, 8207, 12287,
                       16383, 32767, 65535, 131071, 1048575 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        one_past_end_case(sizes[k]);
    /* Requests smaller than the slot. */
    one_past_end_case(8);
    one_past_end_case(100);
    one_past_end_case(5000);
}

/* One past the end of a large object whose size is a whole number of pages:
 * the extra byte must be part of the object for the large classes too. */
Test(retention, one_past_end_of_page_multiple_large_object)
{
    size_t sizes[] = { 64 * KiB, 256 * KiB, 1 * MiB };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        GC_hidden_pointer h = new_filled(n, 90 + k);
        void *volatile end;
        tu_store(&end, h, n);
        tu_collect();
        cr_assert(tu_live(h), "a %zu-byte object held one past its end was reclaimed", n);
        cr_assert(intact(h, n, 90 + k));
        cr_assert(tu_base_is(h, n), "GC_base(p + %zu) of a %zu-byte object is not p "
                  "(the extra byte is not part of the object)", n, n);
        cr_assert(lfgc_is_live((void *)end), "lfgc_is_live(p + %zu) of a live %zu-byte "
                  "object is 0", n, n);
        end = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* Atomic objects do not retain                                        */

/* Do the first words of the (hidden) holder still point to target? */
static TU_NOINLINE int all_words_point_to(GC_hidden_pointer holder, size_t n,
                                          GC_hidden_pointer target)
{
    void **p = GC_REVEAL_POINTER(holder);
    for (size_t i = 0; i < n / sizeof(void *); i++)
        if (p[i] != GC_REVEAL_POINTER(target))
            return 0;
    return 1;
}

static TU_NOINLINE void atomic_case(size_t holder_size)
{
    GC_disable();
    GC_hidden_pointer target = new_filled(256, 51);
    GC_hidden_pointer holder = new_pointing_to(holder_size, target, 1);
    void *volatile keep;
    tu_store(&keep, holder, 0);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(holder), "the atomic object itself was reclaimed");
    cr_assert_not(tu_live(target), "an atomic object (%zu bytes) retained what it "
                  "points to", holder_size);
    /* Its contents are left alone. */
    cr_assert(all_words_point_to(holder, holder_size, target),
              "the contents of an atomic object changed");
    cr_assert(tu_slot_is(&keep, holder, 0));
    keep = NULL;
}

Test(retention, atomic_objects_do_not_retain)
{
    atomic_case(16);
    atomic_case(1000);
    atomic_case(12288);
    atomic_case(100000);
    atomic_case(2 * MiB);
}

/* Control for the test above: the same holder, pointerful, retains. */
Test(retention, normal_objects_retain)
{
    GC_disable();
    GC_hidden_pointer target = new_filled(256, 52);
    GC_hidden_pointer holder = new_pointing_to(1000, target, 0);
    void *volatile keep;
    tu_store(&keep, holder, 0);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(target), "a normal object did not retain what it points to");
    cr_assert(intact(target, 256, 52));
    cr_assert(all_words_point_to(holder, 1000, target));
    cr_assert(tu_slot_is(&keep, holder, 0));
    keep = NULL;
    tu_collect();
    cr_assert_not(tu_live(holder));
    cr_assert_not(tu_live(target));
}

static TU_NOINLINE GC_hidden_pointer new_atomic_uncollectable_to(GC_hidden_pointer target)
{
    void **u = GC_malloc_atomic_uncollectable(64);
    cr_assert_not_null(u);
    for (int i = 0; i < 8; i++)
        u[i] = GC_REVEAL_POINTER(target);
    return tu_hide(u);
}

static TU_NOINLINE void free_hidden(GC_hidden_pointer h)
{
    GC_free(GC_REVEAL_POINTER(h));
}

Test(retention, atomic_uncollectable_is_kept_and_does_not_retain)
{
    GC_disable();
    GC_hidden_pointer target = new_filled(256, 53);
    GC_hidden_pointer hu = new_atomic_uncollectable_to(target);
    GC_enable();
    tu_collect();
    tu_collect();
    cr_assert(tu_live(hu), "an atomic uncollectable object was reclaimed");
    cr_assert_not(tu_live(target), "an atomic uncollectable object retained its target");
    cr_assert(all_words_point_to(hu, 64, target));
    free_hidden(hu);
    cr_assert_not(tu_live(hu));
}

/* ------------------------------------------------------------------ */
/* Uncollectable objects                                               */

static const size_t unc_sizes[5] = { 16, 500, 5000, 40000, 300000 };

static TU_NOINLINE GC_hidden_pointer new_uncollectable_to(size_t n, GC_hidden_pointer t)
{
    void **p = GC_malloc_uncollectable(n);
    cr_assert_not_null(p);
    cr_assert_eq(tu_first_nonzero(p, n), n, "GC_malloc_uncollectable memory not zeroed");
    p[n / sizeof(void *) - 1] = GC_REVEAL_POINTER(t);
    return tu_hide(p);
}

static TU_NOINLINE int last_word_points_to(GC_hidden_pointer h, size_t n,
                                           GC_hidden_pointer t)
{
    void **p = GC_REVEAL_POINTER(h);
    return p[n / sizeof(void *) - 1] == GC_REVEAL_POINTER(t);
}

Test(retention, uncollectable_never_freed_and_retains)
{
    GC_hidden_pointer u[5], t[5];
    GC_disable();
    for (int i = 0; i < 5; i++) {
        t[i] = new_filled(1000, 60 + i);
        u[i] = new_uncollectable_to(unc_sizes[i], t[i]);
    }
    GC_enable();
    for (int round = 0; round < 5; round++) {
        tu_collect();
        for (int i = 0; i < 200; i++)
            (void)new_filled(1000, 99);
        for (int i = 0; i < 5; i++) {
            cr_assert(tu_live(u[i]), "uncollectable object %d reclaimed", i);
            cr_assert(tu_live(t[i]), "object held by an uncollectable one reclaimed");
            cr_assert(intact(t[i], 1000, 60 + i));
            cr_assert(last_word_points_to(u[i], unc_sizes[i], t[i]));
        }
    }
    for (int i = 0; i < 5; i++)
        free_hidden(u[i]);
    tu_collect();
    for (int i = 0; i < 5; i++) {
        cr_assert_not(tu_live(u[i]), "freed uncollectable object %d still live", i);
        cr_assert_not(tu_live(t[i]), "target of a freed uncollectable object %d kept", i);
    }
}

/* ------------------------------------------------------------------ */
/* Free slots do not retain                                            */

static TU_NOINLINE void free_slot_case(size_t n)
{
    GC_disable();
    GC_hidden_pointer target = new_filled(200, 71);
    GC_hidden_pointer holder = new_pointing_to(n, target, 0);
    free_hidden(holder);
    /* A (revealed) pointer to the freed slot, visible to the collector in
     * a global and on the stack. */
    void *volatile stale;
    tu_store(&stale, holder, 0);
    tu_store(&bss_root, holder, 8);
    GC_enable();
    tu_collect();
    cr_assert_not(tu_live(target), "a freed %zu-byte slot retained what its object "
                  "pointed to", n);
    cr_assert_not(tu_live(holder), "a freed %zu-byte slot is reported live", n);
    cr_assert(tu_slot_is(&stale, holder, 0));
    stale = NULL;
    bss_root = NULL;
}

Test(retention, free_slots_do_not_retain)
{
    free_slot_case(16);
    free_slot_case(64);
    free_slot_case(1024);
    free_slot_case(12000);
    free_slot_case(20000);
    free_slot_case(500000);
}

/* A slot freed while its span awaits the lazy sweep. */
static void *volatile unswept_roots[16];

Test(retention, slot_freed_in_unswept_span_does_not_retain)
{
    /* The holder and its neighbours share a class (48 + 1 bytes: 64). */
    GC_disable();
    GC_hidden_pointer keep[16], target = new_filled(200, 72);
    GC_hidden_pointer holder = new_pointing_to(48, target, 0);
    for (int i = 0; i < 16; i++)
        keep[i] = new_filled(48, 200 + i);
    /* Keep the neighbours alive so that the span survives and is swept
     * lazily. */
    for (int i = 0; i < 16; i++)
        tu_store(&unswept_roots[i], keep[i], 0);
    void *volatile hold;
    tu_store(&hold, holder, 0);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(target));
    free_hidden(holder);
    tu_collect();
    cr_assert_not(tu_live(target), "a slot freed in an unswept span retained");
    cr_assert_not(tu_live(holder));
    for (int i = 0; i < 16; i++)
        cr_assert(tu_live(keep[i]) && intact(keep[i], 48, 200 + i));
    cr_assert(tu_slot_is(&hold, holder, 0));
    hold = NULL;
    for (int i = 0; i < 16; i++)
        unswept_roots[i] = NULL;
}

/* ------------------------------------------------------------------ */
/* GC_add_roots, GC_remove_roots, GC_clear_roots                        */

Test(retention, add_roots_remove_roots)
{
    /* malloc'ed memory is not scanned unless it is added as a root. */
    void **block = malloc(4096);
    cr_assert_not_null(block);
    memset(block, 0, 4096);
    GC_hidden_pointer a = new_filled(300, 81);
    tu_store((void *volatile *)&block[100], a, 0);
    tu_collect();
    cr_assert_not(tu_live(a), "malloc'ed memory acted as a root without GC_add_roots");

    GC_hidden_pointer b = new_filled(300, 82);
    tu_store((void *volatile *)&block[100], b, 0);
    GC_add_roots(block, block + 512);
    for (int i = 0; i < 3; i++) {
        tu_collect();
        cr_assert(tu_live(b), "object referenced from an added root range reclaimed");
        cr_assert(intact(b, 300, 82));
    }
    GC_remove_roots(block, block + 512);
    tu_collect();
    cr_assert_not(tu_live(b), "root range still scanned after GC_remove_roots");
    free(block);
}

Test(retention, clear_roots_forgets_every_range)
{
    void **b1 = malloc(1024), **b2 = malloc(1024);
    cr_assert(b1 && b2);
    memset(b1, 0, 1024);
    memset(b2, 0, 1024);
    GC_disable();
    GC_hidden_pointer x = new_filled(64, 83), y = new_filled(64, 84);
    tu_store((void *volatile *)&b1[3], x, 0);
    tu_store((void *volatile *)&b2[120], y, 0);
    GC_add_roots(b1, b1 + 128);
    GC_add_roots(b2, b2 + 128);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(x) && tu_live(y));
    cr_assert(intact(x, 64, 83) && intact(y, 64, 84));
    GC_clear_roots();
    tu_collect();
    cr_assert_not(tu_live(x), "range still scanned after GC_clear_roots");
    cr_assert_not(tu_live(y), "range still scanned after GC_clear_roots");
    free(b1);
    free(b2);
}

/* Removing one of the added ranges leaves the others. */
Test(retention, remove_roots_keeps_other_ranges)
{
    void **blk = malloc(8192);
    cr_assert_not_null(blk);
    memset(blk, 0, 8192);
    GC_disable();
    GC_hidden_pointer x = new_filled(64, 85), y = new_filled(64, 86);
    tu_store((void *volatile *)&blk[10], x, 0);
    tu_store((void *volatile *)&blk[900], y, 0);
    GC_add_roots(blk, blk + 16);
    GC_add_roots(blk + 896, blk + 1024);
    GC_enable();
    GC_remove_roots(blk, blk + 16);
    tu_collect();
    cr_assert_not(tu_live(x), "removed root range still scanned");
    cr_assert(tu_live(y), "GC_remove_roots removed a range outside its bounds");
    cr_assert(intact(y, 64, 86));
    GC_clear_roots();
    free(blk);
}

/* ------------------------------------------------------------------ */
/* GC_exclude_static_roots                                             */

void *retention_excluded_array[64];
void *retention_included_array[64];

Test(retention, exclude_static_roots)
{
    GC_disable();
    GC_hidden_pointer a = new_filled(500, 87), b = new_filled(500, 88);
    tu_store((void *volatile *)&retention_excluded_array[17], a, 0);
    tu_store((void *volatile *)&retention_included_array[17], b, 0);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(a), "static array not scanned before exclusion");
    cr_assert(intact(a, 500, 87));
    GC_exclude_static_roots(retention_excluded_array, retention_excluded_array + 64);
    tu_collect();
    cr_assert_not(tu_live(a), "object referenced only from an excluded static "
                  "range was not reclaimed");
    cr_assert(tu_live(b), "a static array next to the excluded one is no longer scanned");
    cr_assert(intact(b, 500, 88));
    retention_included_array[17] = NULL;
    tu_collect();
    cr_assert_not(tu_live(b));
}

/* Many separate root ranges (the table grows), each holding one object. */
#define MANY_ROOTS 700
static void **many_blocks[MANY_ROOTS];

Test(retention, many_root_ranges)
{
    static GC_hidden_pointer h[MANY_ROOTS];
    GC_disable();
    for (int i = 0; i < MANY_ROOTS; i++) {
        /* 64-byte blocks, never adjacent: malloc puts headers between. */
        many_blocks[i] = calloc(8, sizeof(void *));
        cr_assert_not_null(many_blocks[i]);
        h[i] = new_filled(40 + (size_t)i % 100, (uint64_t)i);
        tu_store((void *volatile *)&many_blocks[i][i % 8], h[i], 0);
        GC_add_roots(many_blocks[i], many_blocks[i] + 8);
    }
    GC_enable();
    tu_collect();
    for (int i = 0; i < MANY_ROOTS; i++) {
        cr_assert(tu_live(h[i]), "object held by root range %d of %d reclaimed", i,
                  MANY_ROOTS);
        cr_assert(intact(h[i], 40 + (size_t)i % 100, (uint64_t)i));
    }
    /* Remove every other range. */
    for (int i = 0; i < MANY_ROOTS; i += 2)
        GC_remove_roots(many_blocks[i], many_blocks[i] + 8);
    tu_collect();
    for (int i = 0; i < MANY_ROOTS; i++) {
        if (i % 2)
            cr_assert(tu_live(h[i]), "range %d removed with its neighbour", i);
        else
            cr_assert_not(tu_live(h[i]), "removed range %d still scanned", i);
    }
    GC_clear_roots();
    tu_collect();
    for (int i = 0; i < MANY_ROOTS; i++) {
        cr_assert_not(tu_live(h[i]), "range %d still scanned after GC_clear_roots", i);
        free(many_blocks[i]);
    }
}

/* Many excluded pieces of one static array, some overlapping or nested:
 * exactly the objects referenced from the parts not excluded survive. */
#define EXCL_WORDS 2048
void *retention_excl_big[EXCL_WORDS];

static int excluded_word(int w)
{
    if (w % 16 < 6)                       /* 128 pieces of 6 words */
        return 1;
    if (w >= 1000 && w < 1100)            /* overlaps several pieces */
        return 1;
    if (w >= 1500 && w < 1540)            /* nested with the next one */
        return 1;
    return 0;
}

Test(retention, exclude_many_static_ranges)
{
    static GC_hidden_pointer h[EXCL_WORDS / 4];
    GC_disable();
    for (int k = 0; k < EXCL_WORDS / 4; k++) {
        h[k] = new_filled(24, (uint64_t)k);
        tu_store((void *volatile *)&retention_excl_big[k * 4 + k % 4], h[k], 0);
    }
    GC_enable();
    for (int p = 0; p < EXCL_WORDS / 16; p++)
        GC_exclude_static_roots(&retention_excl_big[p * 16], &retention_excl_big[p * 16 + 6]);
    GC_exclude_static_roots(&retention_excl_big[1000], &retention_excl_big[1100]);
    GC_exclude_static_roots(&retention_excl_big[1510], &retention_excl_big[1520]);
    GC_exclude_static_roots(&retention_excl_big[1500], &retention_excl_big[1540]);
    tu_collect();
    int wrong = 0, first = -1;
    for (int k = 0; k < EXCL_WORDS / 4; k++) {
        int w = k * 4 + k % 4;
        int expect_live = !excluded_word(w);
        if (tu_live(h[k]) != expect_live) {
            wrong++;
            if (first < 0)
                first = w;
        }
    }
    cr_assert_eq(wrong, 0, "%d of %d objects wrongly kept or reclaimed; first: the "
                 "one referenced from word %d (%s)", wrong, EXCL_WORDS / 4, first,
                 first >= 0 && excluded_word(first) ? "excluded" : "scanned");
    memset(retention_excl_big, 0, sizeof retention_excl_big);
}

/* GC_dlopen (what dlopen becomes under GC_THREADS): the library loads,
 * collection is on again afterwards, and its data are roots. */
/* gc.h declares it under GC_THREADS only, as bdwgc's does. */
void *GC_dlopen(const char *path, int mode);
static int dlopen_collections;
static void count_starts(void) { dlopen_collections++; }

Test(retention, gc_dlopen_loads_with_collection_held_off)
{
    struct helper h;
    helper_open(&h);            /* loaded once: GC_dlopen below adds a reference */
    Dl_info di;
    cr_assert(dladdr((void *)h.set, &di) && di.dli_fname);
    GC_set_start_callback(count_starts);
    void *again = GC_dlopen(di.dli_fname, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(again, "GC_dlopen(%s): %s", di.dli_fname, dlerror());
    cr_assert(!GC_is_disabled(), "collection left disabled by GC_dlopen");
    cr_assert_eq(dlopen_collections, 0);
    GC_disable();
    GC_hidden_pointer a = new_filled(128, 61);
    helper_store(&h, 0, a);
    GC_enable();
    tu_collect();
    cr_assert_eq(dlopen_collections, 1);
    cr_assert(tu_live(a) && intact(a, 128, 61));
    helper_store(&h, 0, 0);
    GC_set_start_callback(NULL);
    dlclose(again);
}
