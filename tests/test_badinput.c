/* test_badinput.c: GC_free and GC_realloc of pointers they must refuse.
 *
 * A stack pointer, a malloc pointer, a static pointer, an address in a
 * region the heap never used, an interior pointer, an object freed twice:
 * each must be reported through the warn proc (with the pointer as the
 * argument and a message that is a printf format with one conversion),
 * must not crash, and must leave the heap intact: the object still usable
 * with its contents, the free lists not corrupted (no address handed out
 * twice afterwards).
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

static void setup(void)
{
    tu_warm_up();
    tu_warn_reset();
    GC_set_warn_proc(tu_warn_proc);
}

TestSuite(badinput, .init = setup);

/* Exactly one warning since the last reset, about `p`, whose message is a
 * format with one conversion that prints p. */
static void expect_one_warning(const void *p, const char *what)
{
    cr_assert_eq(tu_warn_count, 1, "%s: %d warnings, expected 1", what, tu_warn_count);
    const char *msg = tu_warnings[0].msg;
    cr_assert_eq(tu_warn_arg(0), (GC_word)(uintptr_t)p, "%s: warning argument %#lx, "
                 "expected the pointer %p (message: %s)", what,
                 (unsigned long)tu_warn_arg(0), p, msg);
    int conv = tu_count_conversions(msg);
    cr_assert_eq(conv, 1, "%s: the warning message has %d printf conversions, not "
                 "one (the warn proc gets one argument): \"%s\"", what, conv, msg);
    /* Formatted as the default warn proc does, it names the pointer. */
    char out[600], hex[32];
    snprintf(out, sizeof out, msg, (void *)(uintptr_t)tu_warn_arg(0));
    snprintf(hex, sizeof hex, "%p", p);
    cr_assert_not_null(strstr(out, hex), "%s: the formatted warning \"%s\" does not "
                       "show %s", what, out, hex);
    tu_warn_reset();
}

/* Allocate many objects of several sizes: no address may come out twice,
 * and every object must be zeroed. */
#define CHECK_N 4000
static GC_hidden_pointer check_addrs[CHECK_N];

static int cmp_word(const void *a, const void *b)
{
    GC_word x = *(const GC_word *)a, y = *(const GC_word *)b;
    return x < y ? -1 : x > y;
}

static void *volatile check_roots[CHECK_N];

static TU_NOINLINE void expect_heap_intact(size_t n)
{
    /* Thousands of small objects; 32 MiB worth of large ones. */
    int count = n <= 16 * KiB ? CHECK_N : (int)(32 * MiB / n) + 4;
    for (int i = 0; i < count; i++) {
        char *p = GC_malloc(n);
        cr_assert_not_null(p);
        cr_assert_eq(tu_first_nonzero(p, n), n, "object %d of %zu bytes not zeroed",
                     i, n);
        memset(p, 0x44, n);
        check_roots[i] = p;             /* all live at once */
        check_addrs[i] = tu_hide(p);
    }
    qsort(check_addrs, (size_t)count, sizeof check_addrs[0], cmp_word);
    for (int i = 1; i < count; i++)
        cr_assert_neq(check_addrs[i], check_addrs[i - 1], "address %p handed out twice "
                      "(%zu-byte objects)", GC_REVEAL_POINTER(check_addrs[i]), n);
    memset((void *)check_roots, 0, sizeof check_roots);
    cr_assert_eq(tu_warn_count, 0, "warnings during normal allocation");
}

/* ------------------------------------------------------------------ */
/* Pointers lfgc did not allocate                                      */

int badinput_global[16];

Test(badinput, free_stack_pointer)
{
    char local[64];
    memset(local, 0x12, sizeof local);
    GC_free(local);
    expect_one_warning(local, "GC_free(stack pointer)");
    for (size_t i = 0; i < sizeof local; i++)
        cr_assert_eq(local[i], 0x12, "GC_free of a stack pointer wrote to it");
    expect_heap_intact(100);
}

Test(badinput, free_malloc_pointer)
{
    char *m = malloc(100);
    cr_assert_not_null(m);
    memset(m, 0x34, 100);
    GC_free(m);
    expect_one_warning(m, "GC_free(malloc pointer)");
    for (int i = 0; i < 100; i++)
        cr_assert_eq(m[i], 0x34);
    free(m);
    char *big = malloc(4 * MiB);     /* mmap'ed by glibc */
    cr_assert_not_null(big);
    GC_free(big + 4096);
    expect_one_warning(big + 4096, "GC_free(big malloc pointer)");
    free(big);
    expect_heap_intact(48);
}

Test(badinput, free_static_pointer)
{
    GC_free(&badinput_global[3]);
    expect_one_warning(&badinput_global[3], "GC_free(static pointer)");
    expect_heap_intact(2000);
}

Test(badinput, free_address_in_unused_region)
{
    /* Low-fat addresses the heap never handed out: in a region this test
     * never uses, and past the used part of one it uses. */
    void *a = (void *)(LOWFAT_HEAP_START + 39 * LOWFAT_REGION_SIZE + 10240 * 7);
    GC_free(a);
    expect_one_warning(a, "GC_free(unused region)");
    char *p = GC_malloc(3000);
    cr_assert_not_null(p);
    void *beyond = (void *)(uintptr_t)lowfat_heap_top[lowfat_index(p)];
    GC_free(beyond);
    expect_one_warning(beyond, "GC_free(past the heap top)");
    /* Below where the region's chunks start (a small class's start some
     * MiB past its base): never handed out, not freed either. */
    void *below = (void *)(((uintptr_t)p & ~(LOWFAT_REGION_SIZE - 1)) + 64);
    cr_assert_lt((uintptr_t)below, (uintptr_t)p);
    GC_free(below);
    cr_assert(tu_warn_count == 1 && !strstr(tu_warnings[0].msg, "already freed"),
              "GC_free(below the region's chunks) warned \"%s\"",
              tu_warn_count ? tu_warnings[0].msg : "nothing");
    expect_one_warning(below, "GC_free(below the region's chunks)");
    cr_assert(lfgc_is_live(p));
    expect_heap_intact(3000);
}

Test(badinput, realloc_of_foreign_pointers)
{
    char local[32];
    memset(local, 0x56, sizeof local);
    void *r = GC_realloc(local, 64);
    cr_assert_null(r, "GC_realloc(stack pointer) = %p", r);
    expect_one_warning(local, "GC_realloc(stack pointer)");
    for (size_t i = 0; i < sizeof local; i++)
        cr_assert_eq(local[i], 0x56);

    char *m = malloc(50);
    cr_assert_not_null(m);
    r = GC_realloc(m, 5000);
    cr_assert_null(r);
    expect_one_warning(m, "GC_realloc(malloc pointer)");
    free(m);

    r = GC_realloc(&badinput_global[1], 10);
    cr_assert_null(r);
    expect_one_warning(&badinput_global[1], "GC_realloc(static pointer)");
    expect_heap_intact(64);
}

static void call_free(void *p)
{
    GC_free(p);
}

/* The default warn proc prints the message with the argument; given a
 * pointer to memory that is not a string, it must still print just the
 * pointer.  The buffer here ends at an inaccessible page, so that reading
 * it as a string runs off its end. */
Test(badinput, default_warn_proc_with_foreign_pointer)
{
    GC_set_warn_proc(GC_default_warn_proc);
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(mprotect(m + page, (size_t)page, PROT_NONE), 0);
    memset(m, 'A', (size_t)page);
    char *p = m + page - 16;
    char out[1024];
    ssize_t n = tu_capture_stderr(call_free, p, out, sizeof out);
    cr_assert_gt(n, 0, "GC_free(foreign pointer) printed nothing with the default "
                 "warn proc");
    char hex[32];
    snprintf(hex, sizeof hex, "%p", (void *)p);
    cr_assert_not_null(strstr(out, hex), "the default warning \"%s\" does not show %s",
                       out, hex);
    cr_assert_null(strstr(out, "AAAA"), "the default warning printed the pointed-to "
                   "memory as a string: \"%s\"", out);
    munmap(m, (size_t)page * 2);
}

/* ------------------------------------------------------------------ */
/* Interior pointers                                                   */

static void *volatile interior_obj;

static void interior_case(size_t n, size_t off, int realloc_it)
{
    char *p = GC_malloc(n);
    cr_assert_not_null(p);
    tu_fill_bytes(p, n, n + off);
    interior_obj = p;
    if (realloc_it) {
        void *r = GC_realloc(p + off, n * 2);
        cr_assert_null(r, "GC_realloc(p + %zu) of a %zu-byte object = %p", off, n, r);
        expect_one_warning(p + off, "GC_realloc(interior pointer)");
    } else {
        GC_free(p + off);
        expect_one_warning(p + off, "GC_free(interior pointer)");
    }
    /* The object is untouched, usable, and still collected normally. */
    cr_assert(lfgc_is_live(p), "object freed through an interior pointer (+%zu of %zu)",
              off, n);
    cr_assert_eq(tu_check_bytes(p, n, n + off), n, "object changed by a refused free "
                 "(+%zu of %zu)", off, n);
    p[n - 1] ^= 1;
    p[n - 1] ^= 1;
    tu_collect();
    cr_assert(lfgc_is_live(p));
    cr_assert_eq(tu_check_bytes(p, n, n + off), n);
    /* Allocation does not hand the object's slot out. */
    for (int i = 0; i < (n > 64 * KiB ? 20 : 200); i++) {
        char *q = GC_malloc(n);
        cr_assert_not_null(q);
        cr_assert_neq(q, p, "the slot of a live object was handed out after a refused "
                      "free of an interior pointer");
        memset(q, 0x99, n);
    }
    cr_assert_eq(tu_check_bytes(p, n, n + off), n, "object overwritten after a refused "
                 "free (+%zu of %zu)", off, n);
    /* Freeing it properly works, silently. */
    GC_free(p);
    cr_assert_eq(tu_warn_count, 0);
    cr_assert_not(lfgc_is_live(p));
    interior_obj = NULL;
}

Test(badinput, free_interior_pointer)
{
    struct { size_t n, off; } cases[] = {
        { 16, 8 }, { 100, 1 }, { 100, 50 }, { 100, 99 }, { 4000, 2048 },
        { 12000, 11999 }, { 30000, 16 }, { 200000, 4096 }, { MiB, MiB / 2 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        interior_case(cases[k].n, cases[k].off, 0);
    expect_heap_intact(100);
}

Test(badinput, realloc_interior_pointer)
{
    interior_case(100, 40, 1);
    interior_case(20000, 100, 1);
    interior_case(MiB, 8, 1);
    expect_heap_intact(100);
}

/* ------------------------------------------------------------------ */
/* Double free                                                         */

static void double_free_case(size_t n, int kind)
{
    char *p = kind == 0 ? GC_malloc(n) : kind == 1 ? GC_malloc_atomic(n)
                                                  : GC_malloc_uncollectable(n);
    cr_assert_not_null(p);
    memset(p, 0x66, n);
    GC_free(p);
    cr_assert_eq(tu_warn_count, 0, "warning on the first free");
    GC_free(p);
    expect_one_warning(p, "GC_free twice");
    GC_free(p);
    expect_one_warning(p, "GC_free three times");
    void *r = GC_realloc(p, n + 10);
    cr_assert_null(r, "GC_realloc of a freed object = %p", r);
    expect_one_warning(p, "GC_realloc of a freed object");
    /* The free lists are intact: thousands of objects, all distinct. */
    expect_heap_intact(n);
    if (kind == 2)
        for (int i = 0; i < 100; i++)
            GC_free(GC_malloc_uncollectable(n));
    cr_assert_eq(tu_warn_count, 0);
}

Test(badinput, double_free_small)
{
    size_t sizes[] = { 1, 16, 100, 1000, 5000, 12287, 20000 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        double_free_case(sizes[k], 0);
        double_free_case(sizes[k], 1);
        double_free_case(sizes[k], 2);
    }
}

Test(badinput, double_free_large)
{
    size_t sizes[] = { 65536, 300000, 2 * MiB };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        double_free_case(sizes[k], 0);
        double_free_case(sizes[k], 1);
    }
}

/* A double free after a collection (the slot was on a free list that the
 * collection dropped, or in a span that went back to the pool). */
static TU_NOINLINE GC_hidden_pointer alloc_and_free(size_t n)
{
    char *p = GC_malloc(n);
    cr_assert_not_null(p);
    GC_free(p);
    return tu_hide(p);
}

static TU_NOINLINE void free_hidden(GC_hidden_pointer h)
{
    GC_free(GC_REVEAL_POINTER(h));
}

Test(badinput, double_free_after_collection)
{
    size_t sizes[] = { 32, 700, 9000, 100000 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        /* Some live neighbours, so that the span is swept lazily. */
        static void *volatile neighbours[8];
        for (int i = 0; i < 8; i++)
            neighbours[i] = GC_malloc(sizes[k]);
        GC_hidden_pointer h = alloc_and_free(sizes[k]);
        tu_collect();
        free_hidden(h);
        expect_one_warning(GC_REVEAL_POINTER(h), "GC_free after a collection");
        expect_heap_intact(sizes[k]);
        memset((void *)neighbours, 0, sizeof neighbours);
    }
}

Test(badinput, free_null_is_silent)
{
    GC_free(NULL);
    cr_assert_eq(tu_warn_count, 0, "GC_free(NULL) warned");
    char *p = GC_realloc(NULL, 10);
    cr_assert_not_null(p);
    cr_assert_eq(tu_warn_count, 0);
}

/* GC_free of a live object whose span awaits the lazy sweep: the slot is
 * handed out once, and only once, afterwards. */
static void *volatile unswept_objs[64];

Test(badinput, free_in_unswept_span_hands_slot_out_once)
{
    size_t n = 200;
    for (int i = 0; i < 64; i++)
        unswept_objs[i] = GC_malloc(n);
    /* Garbage in the same span, so that it is swept lazily. */
    for (int i = 0; i < 64; i++)
        cr_assert_not_null(GC_malloc(n));
    tu_collect();
    GC_hidden_pointer freed[8];
    for (int i = 0; i < 8; i++) {
        freed[i] = tu_hide((void *)unswept_objs[i * 8]);
        GC_free((void *)unswept_objs[i * 8]);
        unswept_objs[i * 8] = NULL;
    }
    cr_assert_eq(tu_warn_count, 0);
    expect_heap_intact(n);
    /* Every freed slot came back (exactly once: the addresses are
     * distinct). */
    for (int i = 0; i < 8; i++)
        cr_assert_not_null(bsearch(&freed[i], check_addrs, CHECK_N, sizeof check_addrs[0],
                                   cmp_word), "freed slot %d was never handed out again",
                           i);
    for (int i = 0; i < 64; i++)
        if (unswept_objs[i])
            cr_assert(lfgc_is_live((void *)unswept_objs[i]));
}

/* Zero-byte requests return distinct, usable objects. */
Test(badinput, zero_byte_requests)
{
    void *a = GC_malloc(0), *b = GC_malloc(0);
    void *c = GC_malloc_atomic(0), *d = GC_malloc_uncollectable(0);
    cr_assert(a && b && c && d, "a zero-byte request returned NULL");
    cr_assert_neq(a, b);
    cr_assert(lfgc_is_live(a) && lfgc_is_live(c) && lfgc_is_live(d));
    cr_assert_eq(GC_base(a), a);
    GC_free(d);
    GC_free(a);
    cr_assert_eq(tu_warn_count, 0);
}

/* GC_free of a slot that was never handed out (it sits on a free list,
 * here the allocating thread's own): refused, and the slot is still
 * handed out only once. */
Test(badinput, free_never_allocated_slot)
{
    size_t sizes[] = { 24, 100, 1000, 10000 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char *p = GC_malloc(sizes[k]);
        cr_assert_not_null(p);
        char *q = p + lowfat_size(p);
        cr_assert_not(lfgc_is_live(q), "the slot after a fresh %zu-byte object is "
                      "in use", sizes[k]);
        GC_free(q);
        expect_one_warning(q, "GC_free(never allocated slot)");
        expect_heap_intact(sizes[k]);
        cr_assert(lfgc_is_live(p));
    }
}
