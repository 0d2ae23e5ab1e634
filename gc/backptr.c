/* backptr.c: gc_backptr.h, why an object is reachable.
 *
 * bdwgc reads back pointers its debugging allocator keeps in object
 * headers.  lfgc keeps no headers, so it searches: the data segments and
 * added roots first, then the threads' stacks and static TLS, then the
 * objects of scanned kinds that the last collection marked, for a word
 * pointing into the object.  A debugging
 * aid: the cost is a pass over the static data and the heap per answer.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "gc_backptr.h"

struct search {
    uintptr_t lo, hi;           /* the object searched for              */
    void *base;                 /* the referring object found           */
    size_t offset;
};

static int search_object(void *base, size_t bytes, unsigned kind, void *arg)
{
    struct search *s = arg;
    if ((uintptr_t)base == s->lo)
        return 0;               /* pointers into itself do not count */
    const struct kind *k = &lf_kinds[kind];
    /* Only a reachable object is a reason to be reachable. */
    if (k->ptrfree || !(k->uncollectable || lf_mark_is_set(base)))
        return 0;
    uint64_t len = kind_scan_len(k, base, bytes);
    const uintptr_t *w = base;
    for (uint64_t i = 0; i < len / sizeof *w; i++)
        if (w[i] - s->lo < s->hi - s->lo) {
            s->base = base;
            s->offset = i * sizeof *w;
            return 1;
        }
    return 0;
}

/* Where the calling thread's stack is searched from: the frame of the
 * caller of the public call (the library's frames hold the address
 * asked about; the registers that call saved are no addresses). */
static __thread uintptr_t search_from;

/* The caller's frame: the public call's own frame, where the compiler
 * keeps a frame pointer because of the builtin, holds the caller's frame
 * pointer and the return address just below it. */
#define CALLER_FRAME() ((uintptr_t)__builtin_frame_address(0) + 16)

/* With the lock held and no thread sweeping: the heap walk needs both. */
static GC_ref_kind back_ptr_held(void *dest, void **base_p, size_t *offset_p)
{
    enum lfgc_slot_state st = lf_slot_state(dest);
    if (st == LFGC_SLOT_DEAD)
        return GC_UNREFERENCED;         /* found dead, awaiting the sweep */
    if (st != LFGC_SLOT_ALLOCATED)
        return GC_NO_SPACE;
    uintptr_t base = (uintptr_t)GC_base(dest);
    struct search s = { base, base + GC_size((void *)base), NULL, 0 };
    uintptr_t root = lf_roots_find(s.lo, s.hi);
    if (!root)
        root = lf_stacks_find(s.lo, s.hi, search_from);
    if (root) {
        *base_p = (void *)root;
        return GC_REFD_FROM_ROOT;
    }
    if (lf_heap_walk(search_object, &s)) {
        *base_p = s.base;
        *offset_p = s.offset;
        return GC_REFD_FROM_HEAP;
    }
    return lf_mark_is_set((void *)base) ? GC_REFD_FROM_REG : GC_UNREFERENCED;
}

/* Lock and sweepers held around fn (a collection in progress holds the
 * sweepers already). */
static GC_ref_kind with_heap_still(GC_ref_kind (*fn)(void *, void **, size_t *), void *p,
                                   void **base_p, size_t *offset_p)
{
    lf_ensure_init();
    lock();
    bool held = AO_load(&lf_gc_pending);
    if (!held)
        lf_sweepers_hold();
    GC_ref_kind k = fn(p, base_p, offset_p);
    if (!held)
        lf_sweepers_release();
    unlock();
    return k;
}

static GC_ref_kind back_ptr_info(void *dest, void **base_p, size_t *offset_p)
{
    void *base = NULL;
    size_t offset = 0;
    GC_ref_kind k = with_heap_still(back_ptr_held, dest, &base, &offset);
    if (base_p)
        *base_p = base;
    if (offset_p)
        *offset_p = offset;
    return k;
}

LFGC_EXPORT GC_ref_kind GC_get_back_ptr_info(void *dest, void **base_p, size_t *offset_p)
{
    search_from = CALLER_FRAME();
    return back_ptr_info(dest, base_p, offset_p);
}

/* xorshift64*, seeded from the clock: addresses for a debugging aid. */
static LF_UNSCANNED uint64_t random_state;

static uint64_t random_next(void)
{
    uint64_t x = random_state;
    if (!x)
        x = lf_now_ns() | 1;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    random_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* A random address below some region's frontier, each used byte alike. */
static void *random_heap_address(void)
{
    uint64_t total = 0;
    for (unsigned c = 0; c < NUM_CLASSES; c++)
        total += lf_regions[c].next_chunk << CHUNK_SHIFT;
    if (!total)
        return NULL;
    uint64_t at = random_next() % total;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        uint64_t used = lf_regions[c].next_chunk << CHUNK_SHIFT;
        if (at < used)
            return (void *)(lf_regions[c].start + at);
        at -= used;
    }
    return NULL;
}

LFGC_EXPORT void *GC_generate_random_heap_address(void)
{
    lf_ensure_init();
    lock();
    void *p = random_heap_address();
    unlock();
    return p;
}

#define VALID_TRIES 100000

static GC_ref_kind random_valid_held(void *unused, void **out, size_t *unused2)
{
    (void)unused;
    (void)unused2;
    for (unsigned i = 0; i < VALID_TRIES; i++) {
        void *p = random_heap_address();
        if (!p)
            break;
        if (lf_slot_state(p) == LFGC_SLOT_ALLOCATED && lf_mark_is_set(p)) {
            *out = p;
            break;
        }
    }
    return GC_UNREFERENCED;
}

LFGC_EXPORT void *GC_generate_random_valid_address(void)
{
    void *p = NULL;
    size_t unused;
    with_heap_still(random_valid_held, NULL, &p, &unused);
    return p;
}

#define BACKTRACE_DEPTH 20

static void print_backtrace(void *p)
{
    int fd = lf_log_fd;
    if (GC_quiet)               /* as bdwgc's GC_printf */
        return;
    for (int depth = 0; depth < BACKTRACE_DEPTH; depth++) {
        void *base = NULL;
        size_t offset = 0;
        GC_ref_kind k = back_ptr_info(p, &base, &offset);
        void *obj = GC_base(p);
        char type[GC_TYPE_DESCR_LEN + 1] = "";
        if (obj)
            lf_describe_type(obj, type);
        dprintf(fd, "%*s%p (object %p, %zu bytes%s%s)", 2 * depth, "", p, obj,
                obj ? GC_size(obj) : (size_t)0, obj ? ", " : "", type);
        switch (k) {
        case GC_REFD_FROM_HEAP:
            dprintf(fd, " referenced from offset %zu of %p\n", offset, base);
            p = base;
            continue;
        case GC_REFD_FROM_ROOT:
            dprintf(fd, " referenced from the root at %p\n", base);
            return;
        case GC_REFD_FROM_REG:
            dprintf(fd, " reachable from a stack or registers\n");
            return;
        case GC_UNREFERENCED:
            dprintf(fd, " not referenced: garbage\n");
            return;
        default:
            dprintf(fd, " not in an object in use\n");
            return;
        }
    }
    dprintf(fd, "%*s(more than %d steps)\n", 2 * BACKTRACE_DEPTH, "", BACKTRACE_DEPTH);
}

LFGC_EXPORT void GC_print_backtrace(void *p)
{
    search_from = CALLER_FRAME();
    print_backtrace(p);
}

LFGC_EXPORT void GC_generate_random_backtrace(void)
{
    GC_gcollect();
    void *p = GC_generate_random_valid_address();
    if (GC_quiet)
        return;
    if (!p) {
        dprintf(lf_log_fd, "GC_generate_random_backtrace: no reachable object found\n");
        return;
    }
    dprintf(lf_log_fd, "GC_generate_random_backtrace: backtrace of %p\n", p);
    search_from = CALLER_FRAME();
    print_backtrace(p);
}
