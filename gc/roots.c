/* roots.c: where marking starts.
 *
 * The writable segments of the executable and of every loaded shared
 * object (listed afresh at each collection with dl_iterate_phdr, before
 * the world is stopped, so that dlopen'ed libraries are covered) but for
 * their RELRO parts, the ranges
 * added with GC_add_roots,
 * minus the ranges excluded with GC_exclude_static_roots and the
 * segments a GC_register_has_static_roots_callback filter refuses.  lfgc's own
 * state is never a root: its globals that may look like heap addresses
 * are in the lf_unscanned and lf_unscanned_bss sections, left out in any
 * link, and its shared object, when it is one, is skipped whole (nothing
 * else in it retains).
 * Stacks and registers are in threads.c.
 */
#define _GNU_SOURCE
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "internal.h"

struct range {
    uintptr_t lo, hi;
};

/* A growable array of ranges, in memory the collector does not scan. */
struct range_set {
    struct range *r;
    size_t n, cap;
};

static LF_UNSCANNED struct range_set user_roots;
static LF_UNSCANNED struct range_set excluded;       /* kept sorted by lo */
/* The first entries of `excluded` at start-up are lfgc's own, which
 * GC_clear_exclusion_table keeps. */
enum { OWN_EXCLUDED = 4 };
static LF_UNSCANNED struct range own_excluded[OWN_EXCLUDED];
/* GC_register_has_static_roots_callback's filter, or NULL. */
static LF_UNSCANNED GC_has_static_roots_func static_roots_filter;
static LF_UNSCANNED size_t last_roots_bytes;

LF_MALLOC_TEXT static bool range_set_reserve(struct range_set *s)
{
    return lf_array_reserve((void **)&s->r, &s->cap, s->n, sizeof *s->r, 256);
}

LF_MALLOC_TEXT static void exclude(uintptr_t lo, uintptr_t hi)
{
    if (lo >= hi || !range_set_reserve(&excluded))
        return;
    size_t i = excluded.n;
    while (i > 0 && excluded.r[i - 1].lo > lo) {
        excluded.r[i] = excluded.r[i - 1];
        i--;
    }
    excluded.r[i].lo = lo;
    excluded.r[i].hi = hi;
    excluded.n++;
}

/* Bounds of the sections of LF_UNSCANNED_DATA, LF_UNSCANNED_BSS and
 * LF_UNSCANNED globals, from the linker. */
extern char __start_lf_unscanned[], __stop_lf_unscanned[];
extern char __start_lf_unscanned_bss[], __stop_lf_unscanned_bss[];
extern char __start_lf_unscanned_zero[], __stop_lf_unscanned_zero[];

LF_MALLOC_TEXT void lf_roots_init(void)
{
    /* lfgc's own state (free-list heads, region bounds, sizes) is no
     * root, in whatever object it was linked. */
    own_excluded[0] = (struct range){ (uintptr_t)__start_lf_unscanned,
                                      (uintptr_t)__stop_lf_unscanned };
    own_excluded[1] = (struct range){ (uintptr_t)__start_lf_unscanned_bss,
                                      (uintptr_t)__stop_lf_unscanned_bss };
    own_excluded[3] = (struct range){ (uintptr_t)__start_lf_unscanned_zero,
                                      (uintptr_t)__stop_lf_unscanned_zero };
    /* A program that reads lowfat_heap_top directly may have it copied
     * into its own data (a copy relocation): leave that copy out too. */
    own_excluded[2] = (struct range){ (uintptr_t)&lowfat_heap_top,
                                      (uintptr_t)(&lowfat_heap_top + 1) };
    for (unsigned i = 0; i < OWN_EXCLUDED; i++)
        exclude(own_excluded[i].lo, own_excluded[i].hi);
}

/* visit(piece, arg) on each piece of [lo, hi) that no excluded range
 * covers, in order, until one returns nonzero; that value, or 0.  Marking
 * and lf_roots_find walk the same pieces, so a root found is one scanned. */
static uintptr_t each_piece(uintptr_t lo, uintptr_t hi,
                            uintptr_t (*visit)(uintptr_t lo, uintptr_t hi, const void *arg),
                            const void *arg)
{
    uintptr_t found;
    for (size_t i = 0; i < excluded.n && lo < hi; i++) {
        struct range e = excluded.r[i];
        if (e.hi <= lo)
            continue;
        if (e.lo >= hi)
            break;
        if (e.lo > lo && (found = visit(lo, e.lo, arg)))
            return found;
        lo = e.hi;
    }
    return lo < hi ? visit(lo, hi, arg) : 0;
}

static uintptr_t mark_piece(uintptr_t lo, uintptr_t hi, const void *arg)
{
    (void)arg;
    lf_mark_range((void *)lo, (void *)hi);
    last_roots_bytes += hi - lo;
    return 0;
}

/* Scan [lo, hi) minus the excluded ranges. */
static void mark_root_range(uintptr_t lo, uintptr_t hi)
{
    each_piece(lo, hi, mark_piece, NULL);
}

/* The writable segments of the loaded objects, gathered with
 * dl_iterate_phdr before the world is stopped (lf_roots_prepare). */
static LF_UNSCANNED struct range_set segments;
static LF_UNSCANNED bool segments_ready;

static void segment_add(uintptr_t lo, uintptr_t hi)
{
    if (lo >= hi)
        return;
    if (!range_set_reserve(&segments)) {
        lf_warn("GC Warning: no memory to list data segments; one is not scanned (%p)\n", lo);
        return;
    }
    segments.r[segments.n].lo = lo;
    segments.r[segments.n].hi = hi;
    segments.n++;
}

static int gather_object_segments(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    int *index = data;
    bool main_program = (*index)++ == 0;
    if (GC_no_dls && !main_program)
        return 0;
    uintptr_t self = (uintptr_t)&user_roots;
    /* The part made read-only after relocation (RELRO) was written only by
     * the dynamic linker, before the heap had anything to point to. */
    uintptr_t relro_lo = 0, relro_hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_RELRO) {
            relro_lo = info->dlpi_addr + ph->p_vaddr;
            relro_hi = relro_lo + ph->p_memsz;
        }
        if (!main_program && ph->p_type == PT_LOAD && (ph->p_flags & PF_W) &&
            self - (info->dlpi_addr + ph->p_vaddr) < ph->p_memsz)
            return 0;                /* lfgc's own shared object */
    }
    GC_has_static_roots_func filter = static_roots_filter;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        /* As bdwgc: the program's filter sees the whole segment, RELRO
         * part included, and may refuse it. */
        if (filter && !filter(info->dlpi_name ? info->dlpi_name : "", (void *)lo,
                              (size_t)ph->p_memsz))
            continue;
        if (relro_lo < relro_hi && relro_lo < hi && relro_hi > lo) {
            if (lo < relro_lo)
                segment_add(lo, relro_lo);
            lo = relro_hi > lo ? relro_hi : lo;
        }
        segment_add(lo, hi);
    }
    return 0;
}

static void gather_segments(void)
{
    segments.n = 0;
    int index = 0;
    dl_iterate_phdr(gather_object_segments, &index);
    segments_ready = true;
}

/* dl_iterate_phdr takes the dynamic linker's lock.  Taken with the world
 * stopped, it deadlocks the collection when a stopped thread holds it
 * (inside its own dl_iterate_phdr callback, loading or unloading a
 * library).  And the segments must not be gathered before the world is
 * stopped and scanned after with the lock released either: a library
 * unloaded in between would have its unmapped data scanned.  So the
 * collecting thread takes the lock before it stops the world and keeps
 * it until the world runs again: lf_roots_prepare enters dl_iterate_phdr
 * on a stack of its own and, from the first callback, gathers the list
 * (the lock is recursive) and switches back to the collection, leaving
 * dl_iterate_phdr suspended with the lock held; lf_roots_release resumes
 * it so that it returns.  Other threads' dlopen, dlclose and
 * dl_iterate_phdr wait meanwhile (a stopped one, waiting, holds
 * nothing); the collecting thread itself may still use them. */
#define HOLD_STACK_SIZE ((size_t)64 << 10)
static LF_UNSCANNED void *hold_stack;
static LF_UNSCANNED_BSS ucontext_t hold_ctx, collector_ctx;
static LF_UNSCANNED bool holding;

static int hold_callback(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    (void)data;
    gather_segments();
    holding = true;
    swapcontext(&hold_ctx, &collector_ctx);
    holding = false;
    return 1;                        /* released: return, unlocking */
}

static void hold_entry(void)
{
    dl_iterate_phdr(hold_callback, NULL);
}   /* then back to lf_roots_release, through uc_link */

void lf_roots_prepare(void)
{
    segments_ready = false;
    if (!hold_stack) {
        void *p = mmap(NULL, HOLD_STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        hold_stack = p == MAP_FAILED ? NULL : p;
    }
    if (hold_stack && getcontext(&hold_ctx) == 0) {
        hold_ctx.uc_stack.ss_sp = hold_stack;
        hold_ctx.uc_stack.ss_size = HOLD_STACK_SIZE;
        hold_ctx.uc_link = &collector_ctx;
        makecontext(&hold_ctx, hold_entry, 0);
        swapcontext(&collector_ctx, &hold_ctx);
    }
    if (!holding)                    /* no stack of its own: unheld list */
        gather_segments();
}

void lf_roots_release(void)
{
    if (holding)
        swapcontext(&collector_ctx, &hold_ctx);
    segments_ready = false;
}

void lf_roots_mark(void)
{
    last_roots_bytes = 0;
    if (!segments_ready)             /* outside a collection: nothing stopped */
        gather_segments();
    for (size_t i = 0; i < segments.n; i++)
        mark_root_range(segments.r[i].lo, segments.r[i].hi);
    for (size_t i = 0; i < user_roots.n; i++)
        mark_root_range(user_roots.r[i].lo, user_roots.r[i].hi);
}

uintptr_t lf_word_find(uintptr_t lo, uintptr_t hi, uintptr_t vlo, uintptr_t vhi)
{
    for (uintptr_t a = (lo + 7) & ~(uintptr_t)7; a + 8 <= hi; a += 8)
        if (*(const uintptr_t *)a - vlo < vhi - vlo)
            return a;
    return 0;
}

struct value_range {
    uintptr_t lo, hi;
};

static uintptr_t find_piece(uintptr_t lo, uintptr_t hi, const void *arg)
{
    const struct value_range *v = arg;
    return lf_word_find(lo, hi, v->lo, v->hi);
}

uintptr_t lf_roots_find(uintptr_t vlo, uintptr_t vhi)
{
    bool ready = segments_ready;
    if (!ready)
        gather_segments();
    const struct value_range v = { vlo, vhi };
    uintptr_t at = 0;
    for (size_t i = 0; i < segments.n && !at; i++)
        at = each_piece(segments.r[i].lo, segments.r[i].hi, find_piece, &v);
    for (size_t i = 0; i < user_roots.n && !at; i++)
        at = each_piece(user_roots.r[i].lo, user_roots.r[i].hi, find_piece, &v);
    segments_ready = ready;
    return at;
}

bool lf_roots_contain(uintptr_t p)
{
    for (size_t i = 0; i < excluded.n; i++)
        if (p >= excluded.r[i].lo && p < excluded.r[i].hi)
            return false;
    bool ready = segments_ready, in = false;
    if (!ready)
        gather_segments();
    for (size_t i = 0; i < segments.n && !in; i++)
        in = p >= segments.r[i].lo && p < segments.r[i].hi;
    for (size_t i = 0; i < user_roots.n && !in; i++)
        in = p >= user_roots.r[i].lo && p < user_roots.r[i].hi;
    segments_ready = ready;
    return in;
}

size_t lf_roots_size(void)
{
    return last_roots_bytes;
}

LFGC_EXPORT void GC_add_roots(void *low, void *high)
{
    lf_ensure_init();
    if ((uintptr_t)low >= (uintptr_t)high)
        return;
    lock();
    /* Merge with an existing range that it touches. */
    for (size_t i = 0; i < user_roots.n; i++) {
        struct range *r = &user_roots.r[i];
        if ((uintptr_t)low <= r->hi && (uintptr_t)high >= r->lo) {
            if ((uintptr_t)low < r->lo)
                r->lo = (uintptr_t)low;
            if ((uintptr_t)high > r->hi)
                r->hi = (uintptr_t)high;
            unlock();
            return;
        }
    }
    if (range_set_reserve(&user_roots)) {
        user_roots.r[user_roots.n].lo = (uintptr_t)low;
        user_roots.r[user_roots.n].hi = (uintptr_t)high;
        user_roots.n++;
    } else {
        lf_warn("GC Warning: GC_add_roots: out of memory for the root table (%p)\n",
             (uintptr_t)low);
    }
    unlock();
}

LFGC_EXPORT void GC_remove_roots(void *low, void *high)
{
    lf_ensure_init();
    uintptr_t lo = (uintptr_t)low, hi = (uintptr_t)high;
    lock();
    /* As bdwgc: remove the ranges that lie wholly inside [low, high). */
    size_t out = 0;
    for (size_t i = 0; i < user_roots.n; i++) {
        struct range r = user_roots.r[i];
        if (r.lo >= lo && r.hi <= hi)
            continue;
        user_roots.r[out++] = r;
    }
    user_roots.n = out;
    unlock();
}

LFGC_EXPORT void GC_clear_roots(void)
{
    lf_ensure_init();
    lock();
    user_roots.n = 0;
    unlock();
}

LFGC_EXPORT void GC_exclude_static_roots(void *low, void *high)
{
    lf_ensure_init();
    lock();
    exclude((uintptr_t)low, (uintptr_t)high);
    unlock();
}

/* Forget the program's exclusions; lfgc's own data stay out of the scan
 * (they are no roots in any link: see lf_roots_init). */
LFGC_EXPORT void GC_clear_exclusion_table(void)
{
    lf_ensure_init();
    lock();
    excluded.n = 0;
    for (unsigned i = 0; i < OWN_EXCLUDED; i++)
        exclude(own_excluded[i].lo, own_excluded[i].hi);
    unlock();
}

/* Read at each listing of the data segments (before every collection,
 * lock held, world running, the loader's lock held). */
LFGC_EXPORT void GC_register_has_static_roots_callback(GC_has_static_roots_func fn)
{
    lock();
    static_roots_filter = fn;
    unlock();
}
