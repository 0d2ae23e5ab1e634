/* dirty.c: which heap pages were written since the last collection.
 *
 * A minor (generational) collection keeps the mark bits of the previous
 * one: objects found live before are old and are not traced again unless
 * they may have changed, that is unless they lie on a page written since
 * the last collection.  The kernel records the writes.  The regions are
 * registered with a userfaultfd in asynchronous write-protect mode (Linux
 * 6.7 and later): the first write to a protected page only clears its
 * protection, with no signal and no handler thread, and the PAGEMAP_SCAN
 * ioctl lists the pages whose protection is gone.  After each collection
 * only the written pages that now hold old pointerful objects are
 * protected again, so that writes to pages of young objects (most writes)
 * cost no fault at all.
 *
 * Kernel writes (read() into a heap buffer) clear the protection like any
 * other write.  Writes through pages the kernel pinned earlier (io_uring
 * registered buffers, RDMA, device DMA) do not: pins.c finds io_uring's
 * buffers and excludes them from tracking (end of this file), and makes
 * collections full while other pins last; the program may also report
 * such writes itself (GC_end_stubborn_change).  Without this kernel support, in a child after
 * fork(), or after the program closed the descriptor, every collection is
 * full until tracking can be set up again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Kernel interface newer than the headers of some distributions (uapi
 * linux/fs.h and linux/userfaultfd.h of Linux 6.7); our own names so as
 * not to clash with newer headers. */
#define UFFD_FLAG_USER_MODE_ONLY 1
#define UFFD_FEAT_WP_ASYNC       (1ull << 15)
#define SCAN_PAGE_IS_WRITTEN     (1ull << 1)
#define SCAN_CHECK_WPASYNC       (1ull << 1)

struct scan_region {                /* struct page_region */
    uint64_t start, end, categories;
};

struct scan_arg {                   /* struct pm_scan_arg */
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define PAGEMAP_SCAN_IOCTL _IOWR('f', 16, struct scan_arg)

static LF_UNSCANNED bool wanted;                 /* generational collections allowed   */
static LF_UNSCANNED_DATA int uffd = -1;
static LF_UNSCANNED bool tracking;               /* regions registered, protections valid */
static LF_UNSCANNED bool scanned_once;           /* a collection has set protections     */
static LF_UNSCANNED pid_t owner_pid;             /* the process the descriptors are for  */

/* Forget the userfaultfd, closing it only if the number still names one
 * (the program may have closed ours, and the number may be reused):
 * closing it unregisters the regions. */
LF_MALLOC_TEXT static void uffd_drop(void)
{
    char path[32], link[64];
    snprintf(path, sizeof path, LF_STR("/proc/self/fd/%d"), uffd);
    ssize_t n = uffd >= 0 ? readlink(path, link, sizeof link - 1) : -1;
    if (n > 0) {
        link[n] = 0;
        if (strcmp(link, LF_STR("anon_inode:[userfaultfd]")) == 0)
            close(uffd);
    }
    uffd = -1;
}

LF_MALLOC_TEXT static bool register_with_uffd(void)
{
    if (uffd < 0) {
        int fd = (int)syscall(SYS_userfaultfd,
                              O_CLOEXEC | O_NONBLOCK | UFFD_FLAG_USER_MODE_ONLY);
        if (fd < 0)
            return false;
        /* Field by field, the barrier keeping the compiler from making
         * the two stores one of a vector constant in .rodata
         * (LF_MALLOC_RODATA says why that matters). */
        struct uffdio_api api;
        memset(&api, 0, sizeof api);
        api.api = UFFD_API;
        __asm__ volatile("" ::: "memory");
        api.features = UFFD_FEAT_WP_ASYNC;
        if (ioctl(fd, UFFDIO_API, &api) != 0 || !(api.features & UFFD_FEAT_WP_ASYNC)) {
            close(fd);
            return false;
        }
        uffd = fd;
        owner_pid = getpid();
    }
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->reserved)
            continue;
        /* Field by field, as api above. */
        struct uffdio_register reg;
        memset(&reg, 0, sizeof reg);
        /* From the region's base, not its start: the regions are then
         * registered end to end and the kernel keeps them as one mapping
         * (one line of /proc/self/maps, not two per class, which glibc's
         * fortify checks and other readers of that file pay for). */
        reg.range.start = region_base(r);
        reg.range.len = LOWFAT_REGION_SIZE;
        reg.mode = UFFDIO_REGISTER_MODE_WP;
        if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0)
            return false;
    }
    return true;
}

/* Register the regions for write tracking; when the descriptor we had no
 * longer works (closed by the program, say), with a new one. */
LF_MALLOC_TEXT static bool register_regions(void)
{
    if (register_with_uffd())
        return true;
    if (uffd < 0)
        return false;
    uffd_drop();
    return register_with_uffd();
}

/* Turn generational collection on or off.  On only if the kernel can
 * track writes: the regions are registered at once (the first collection
 * then finds every page written, and is full). */
LF_MALLOC_TEXT void lf_dirty_init(bool enable)
{
    wanted = enable && lf_layout_ok && (tracking || register_regions());
    if (!wanted) {
        uffd_drop();
        tracking = false;
    } else {
        tracking = true;
    }
}

bool lf_dirty_enabled(void)
{
    return wanted;
}

static inline uint16_t *wp_bits(struct region *r, uint64_t addr)
{
    return &span_at(r, (addr - r->start) >> CHUNK_SHIFT)->wp_pages;
}

static inline uint16_t page_bit(uint64_t addr)
{
    return (uint16_t)(1u << ((addr >> 12) & (CHUNK_SIZE / PAGE_SIZE - 1)));
}

_Static_assert(CHUNK_SIZE / PAGE_SIZE <= 8, "a chunk's untracked and hot pages fit a byte each");

static inline uint16_t untracked_bits(struct region *r, uint64_t addr)
{
    return span_at(r, (addr - r->start) >> CHUNK_SHIFT)->untracked_pages;
}

static inline uint8_t *hot_bits(struct region *r, uint64_t addr)
{
    return &span_at(r, (addr - r->start) >> CHUNK_SHIFT)->hot_pages;
}

bool lf_dirty_page_unwritten(struct region *r, uint64_t addr)
{
    return (*wp_bits(r, addr) & page_bit(addr)) != 0;
}

/* Chunks that may carry protection bits: those handed out, and the one
 * after them, into which the last span's slots may reach. */
static uint64_t chunks_to_check(const struct region *r)
{
    return r->next_chunk < r->max_chunks ? r->next_chunk + 1 : r->max_chunks;
}

/* Forget every protection: tracking starts afresh. */
static void forget_protections(void)
{
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped)
            continue;
        for (uint64_t j = 0, n = chunks_to_check(r); j < n; j++)
            span_at(r, j)->wp_pages = 0;
    }
}

/* The pages of the span at chunk j that its slots touch (a large span:
 * its object). */
static void span_pages(const struct region *r, uint64_t j, uint64_t *lo, uint64_t *hi)
{
    uint64_t qa, qb;
    lf_span_slots(r, j, &qa, &qb);
    uint64_t end = r->large ? qa * r->size + span_at(r, j)->obj_bytes : qb * r->size;
    *lo = (qa * r->size) & ~(uint64_t)(PAGE_SIZE - 1);
    *hi = (end + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
}

/* /proc/self/pagemap, opened once: opening it costs more than the scan
 * of a small heap.  Its identity is kept, so that a descriptor the program
 * closed (and whose number may now be another file's) is never used or
 * closed as ours. */
static LF_UNSCANNED_DATA int pagemap = -1;
static LF_UNSCANNED dev_t pagemap_dev;
static LF_UNSCANNED ino_t pagemap_ino;

LF_MALLOC_TEXT static bool pagemap_is_ours(void)
{
    struct stat st;
    return pagemap >= 0 && fstat(pagemap, &st) == 0 && st.st_dev == pagemap_dev &&
           st.st_ino == pagemap_ino;
}

/* Forget the descriptor, closing it only if it is still ours.  Run in a
 * forked child (lf_dirty_after_fork), so with the malloc-mode code. */
LF_MALLOC_TEXT static void pagemap_drop(void)
{
    if (pagemap_is_ours())
        close(pagemap);
    pagemap = -1;
}

static int pagemap_fd(void)
{
    if (pagemap >= 0)
        return pagemap;
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return -1;
    }
    pagemap = fd;
    pagemap_dev = st.st_dev;
    pagemap_ino = st.st_ino;
    return fd;
}

/* Ask the kernel which pages of [lo, hi) were written and clear their
 * protection bits. */
static bool clear_written(int pm, struct region *r, uint64_t lo, uint64_t hi)
{
    struct scan_region out[64];
    while (lo < hi) {
        struct scan_arg a = {
            .size = sizeof a,
            .flags = SCAN_CHECK_WPASYNC,
            .start = lo,
            .end = hi,
            .vec = (uintptr_t)out,
            .vec_len = sizeof out / sizeof out[0],
            .category_mask = SCAN_PAGE_IS_WRITTEN,
            .return_mask = SCAN_PAGE_IS_WRITTEN,
        };
        long n = ioctl(pm, PAGEMAP_SCAN_IOCTL, &a);
        if (n < 0 || a.walk_end <= lo)
            return false;
        for (long i = 0; i < n; i++)
            for (uint64_t p = out[i].start; p < out[i].end; p += PAGE_SIZE) {
                uint16_t bit = page_bit(p);
                if (*wp_bits(r, p) & bit)
                    *hot_bits(r, p) |= (uint8_t)bit;    /* protected, written */
                *wp_bits(r, p) &= (uint16_t)~bit;
            }
        lo = a.walk_end;
    }
    return true;
}

/* Bring the protection bits up to date: pages written since the last
 * collection lose theirs.  Only chunks whose span holds old or aging
 * objects are asked about; elsewhere the bits are dropped, so that a page
 * counts as written unless the kernel said otherwise. */
static bool check_protections(void)
{
    int pm = pagemap_fd();
    if (pm < 0)
        return false;
    bool ok = true;
    for (unsigned c = 0; c < NUM_CLASSES && ok; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped || !r->next_chunk)
            continue;
        uint64_t run = 0, run_end = 0;      /* chunks [run, run_end) to ask about */
        for (uint64_t j = 0, n = chunks_to_check(r); j < n && ok; j++) {
            struct span *ch = span_at(r, j);
            if (!ch->wp_pages)
                continue;
            const struct span *s = span_at(r, span_index_of(r, r->start + (j << CHUNK_SHIFT)));
            if (!s->old && !s->aging) {
                ch->wp_pages = 0;
                continue;
            }
            if (run_end != j) {
                if (run_end > run)
                    ok = clear_written(pm, r, r->start + (run << CHUNK_SHIFT),
                                       r->start + (run_end << CHUNK_SHIFT));
                run = j;
            }
            run_end = j + 1;
        }
        if (ok && run_end > run)
            ok = clear_written(pm, r, r->start + (run << CHUNK_SHIFT),
                               r->start + (run_end << CHUNK_SHIFT));
    }
    if (!ok)
        pagemap_drop();
    return ok;
}

/* World stopped, before marking: learn which pages were written since the
 * last collection.  True when a minor collection is possible; false means
 * this one must be full (tracking is being set up, or broke). */
bool lf_dirty_begin(void)
{
    /* Leak-finding mode must see every dead object (leak.c). */
    if (!wanted || GC_find_leak)
        return false;
    /* A child forked without the fork handlers would otherwise read and
     * protect its parent's pages through the inherited descriptors. */
    if (unlikely(uffd >= 0 && getpid() != owner_pid))
        lf_dirty_after_fork();
    bool was_tracking = tracking && scanned_once;
    if (!tracking) {
        tracking = register_regions();
        forget_protections();
    }
    scanned_once = true;
    if (tracking && !check_protections()) {
        if (lf_print_stats)
            lf_log("lfgc: write tracking lost (errno %d); collections are "
                   "full until it is set up again\n", (uintptr_t)errno);
        tracking = false;
    }
    return was_tracking && tracking;
}

static inline uint64_t slot_of(const struct region *r, uint64_t addr)
{
    return (uint64_t)(((unsigned __int128)addr * r->magic) >> 64);
}

/* Call fn(base, len, lo, hi) for every marked object of a scanned kind
 * that overlaps [lo, hi), a range inside region r. */
static void each_old_object(struct region *r, uint64_t lo, uint64_t hi,
                            void (*fn)(uint64_t, uint64_t, uint64_t, uint64_t))
{
    uint64_t qa = slot_of(r, lo), qb = slot_of(r, hi - 1) + 1;
    if (qa < r->q0)
        qa = r->q0;
    uint64_t i = qa - r->q0, end = qb - r->q0;
    while (i < end) {
        uint64_t w = r->mark_bits[i >> 6] >> (i & 63);
        if (!w) {
            i = (i | 63) + 1;
            continue;
        }
        i += (uint64_t)__builtin_ctzll(w);
        if (i >= end)
            break;
        uint64_t base = (i + r->q0) * r->size;
        unsigned k = lf_chunk_map[chunk_entry(base)];
        i++;
        /* Kinds rescanned whole by every minor collection are queued by
         * lf_mark_rescan_kinds. */
        if (!k || lf_kinds[k - 1].ptrfree || lf_kinds[k - 1].rescan_minor)
            continue;
        uint64_t len = r->large ? span_at(r, (base - r->start) >> CHUNK_SHIFT)->obj_bytes
                                : r->size;
        len = kind_scan_len(&lf_kinds[k - 1], (const void *)base, len);
        if (!len || base + len <= lo)
            continue;
        fn(base, len, lo, hi);
    }
}

static LF_UNSCANNED uint64_t old_bytes_queued;       /* by this dirty_mark_old */

static void scan_part(uint64_t base, uint64_t len, uint64_t lo, uint64_t hi)
{
    uint64_t a = base > lo ? base : lo;
    uint64_t b = base + len < hi ? base + len : hi;
    old_bytes_queued += b - a;
    lf_mark_push_part((void *)base, (void *)a, (void *)b);
}

/* Call fn(r, lo, hi) for every maximal run [lo, hi) of pages of spans
 * holding old objects (and aging ones if aging_too) whose protection bit
 * is clear (pages written, or never protected).  Runs continue across
 * neighbouring spans, so that a large old structure costs one call. */
static bool each_unprotected_run(bool (*fn)(struct region *, uint64_t, uint64_t),
                                 bool aging_too)
{
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped || !r->next_chunk)
            continue;
        uint64_t run = 0, run_end = 0;  /* the open run               */
        uint64_t seen = 0;              /* pages below were looked at */
        for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
            if (!span_at(r, j)->old && !(aging_too && span_at(r, j)->aging))
                continue;
            uint64_t lo, hi;
            span_pages(r, j, &lo, &hi);
            if (lo < seen)
                lo = seen;          /* a page shared with the last span */
            for (uint64_t p = lo; p < hi; p += PAGE_SIZE) {
                if (*wp_bits(r, p) & page_bit(p))
                    continue;
                if (run && p == run_end) {
                    run_end = p + PAGE_SIZE;
                    continue;
                }
                if (run && !fn(r, run, run_end))
                    return false;
                run = p;
                run_end = p + PAGE_SIZE;
            }
            if (hi > seen)
                seen = hi;
        }
        if (run && !fn(r, run, run_end))
            return false;
    }
    return true;
}

static bool scan_old_objects(struct region *r, uint64_t lo, uint64_t hi)
{
    each_old_object(r, lo, hi, scan_part);
    return true;
}

/* Minor collection, after mark_begin: old objects on pages that may have
 * been written may now point to young ones; scan their parts there.
 * Returns how many bytes of them are to be scanned. */
uint64_t lf_dirty_mark_old(void)
{
    old_bytes_queued = 0;
    each_unprotected_run(scan_old_objects, false);
    return old_bytes_queued + lf_mark_rescan_kinds();
}

/* Whether some word of the page at p points into an aging span.  The next
 * minor collection unmarks the objects of those spans and finds them again
 * by tracing, which does not look at protected pages. */
static bool page_points_to_aging(uint64_t p)
{
    const uintptr_t *w = (const uintptr_t *)p;
    for (unsigned i = 0; i < PAGE_SIZE / sizeof *w; i++) {
        uint64_t c = (w[i] >> LOWFAT_REGION_SHIFT) - LOWFAT_FIRST_REGION;
        if (c >= NUM_CLASSES)
            continue;
        struct region *r = &lf_regions[c];
        if (!r->mapped || r->large)
            continue;
        uint64_t base = slot_of(r, w[i]) * r->size;
        if (base < r->start)
            continue;
        uint64_t j = (base - r->start) >> CHUNK_SHIFT;
        if (j < r->next_chunk && span_at(r, j)->aging)
            return true;
    }
    return false;
}

/* Whether to protect the page at p: only when every slot on it is marked
 * and of a scanned kind, and, unless the page lies wholly in aging spans,
 * nothing on it points into an aging span.  A page with dead or free
 * slots will be written by the sweep or by allocation anyway, and a write
 * fault costs more than scanning its old objects at the next collection,
 * which is what happens to an unprotected page.
 *
 * Pages of aging spans are protected too, although their objects are
 * traced again by the next minor collection and so may point anywhere:
 * protected from now on, a page that no one writes until the next
 * collection cannot point into the spans taken in between, which are the
 * ones aging after it.  Its objects, old by then, need neither the check
 * below (which reads the whole page) nor a new protection.  Without this,
 * a structure that survives a full collection cost the minor one after it
 * a second read of all its pages. */
static bool page_all_old(struct region *r, uint64_t p)
{
    uint64_t qa = slot_of(r, p), qb = slot_of(r, p + PAGE_SIZE - 1) + 1;
    if (qa < r->q0)
        return false;
    /* A page lies in at most two spans: check both ends. */
    uint64_t a = qa * r->size, b = (qb - 1) * r->size;
    unsigned ka = lf_chunk_map[chunk_entry(a)];
    unsigned kb = lf_chunk_map[chunk_entry(b)];
    if (!ka || !kb || lf_kinds[ka - 1].ptrfree || lf_kinds[kb - 1].ptrfree)
        return false;
    if (!lf_bits_all(r->mark_bits, qa - r->q0, qb - r->q0))
        return false;
    if (span_at(r, span_index_of(r, a))->aging && span_at(r, span_index_of(r, b))->aging)
        return true;
    return !lf_hs.aging_spans || !page_points_to_aging(p);
}

static bool protect(uint64_t lo, uint64_t hi)
{
    struct uffdio_writeprotect wp = {
        .range = {.start = lo, .len = hi - lo},
        .mode = UFFDIO_WRITEPROTECT_MODE_WP,
    };
    return ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) == 0;
}

/* A page written after it was protected is likely written again before
 * the next collection: protecting it once more would cost a system call
 * and a write fault, where a minor collection rescans it for a few
 * microseconds (two thirds of the pages Guile's workload protected were
 * such pages, each call 16-500 us on a paravirtual machine:
 * docs/performance.md).  Such "hot" pages stay unprotected until the next
 * full collection, or for HOT_PASSES protection passes of minor ones:
 * those passes forget which pages were hot, and protect them again if
 * they hold old objects only.  Leaving a page unprotected is always
 * safe: it counts as written. */
#define HOT_PASSES 8
static LF_UNSCANNED bool hot_forget;        /* this pass forgets hot pages */

/* Protect the pages of [lo, hi) that hold only old objects and are not
 * hot. */
static bool protect_old_pages(struct region *r, uint64_t lo, uint64_t hi)
{
    uint64_t run = 0;               /* start of the run of pages to protect */
    for (uint64_t p = lo; p <= hi; p += PAGE_SIZE) {
        bool hot = false;
        if (p < hi && *hot_bits(r, p) & page_bit(p)) {
            if (hot_forget)
                *hot_bits(r, p) &= (uint8_t)~page_bit(p);
            else
                hot = true;
        }
        bool old = p < hi && !hot && !(untracked_bits(r, p) & page_bit(p)) &&
                   page_all_old(r, p);
        if (old && !run)
            run = p;
        if (!old && run) {
            if (!protect(run, p))
                return false;
            for (uint64_t q = run; q < p; q += PAGE_SIZE)
                *wp_bits(r, q) |= page_bit(q);
            run = 0;
        }
    }
    return true;
}

/* World stopped, after marking: protect the unprotected pages that now
 * hold only old objects, so that the next collection learns of writes to
 * them.  Other pages of spans with old objects stay unprotected and are
 * scanned as written next time; pages still protected stay so.
 *
 * A full collection also protects the pages of aging spans (see
 * page_all_old).  A minor one does not: its aging survivors are mostly
 * structures under construction, which the program writes again at once,
 * and each such write would cost a fault. */
void lf_dirty_protect(bool full)
{
    if (!tracking)
        return;
    static LF_UNSCANNED unsigned passes;
    hot_forget = ++passes % HOT_PASSES == 0 || full;
    if (!each_unprotected_run(protect_old_pages, full))
        tracking = false;   /* old objects left unprotected: next one full */
}

/* In a child after fork() the regions are no longer registered (the
 * descriptor belongs to the parent's registration). */
LF_MALLOC_TEXT void lf_dirty_after_fork(void)
{
    uffd_drop();
    pagemap_drop();
    tracking = false;
    scanned_once = false;
}

/* ------------------------------------------------------------------ */
/* Writes the kernel does not see                                      */

/* The kernel writes some pages through its own mapping of them, pinned
 * earlier, and not through the process's page tables: io_uring registered
 * buffers, RDMA memory regions, device DMA (VFIO), O_DIRECT I/O still in
 * flight across a collection.  The protection of such a page stays, and
 * PAGEMAP_SCAN says it was not written.  Only the program knows: it tells
 * lfgc as it would tell bdwgc's manual dirty bits.  A page reported
 * written loses its protection bit, as one the kernel reported does in
 * check_protections: the next minor collection scans the old objects on
 * it, and lf_dirty_protect protects it again (the kernel's protection,
 * which the pinned write left in place, is simply set once more). */

static LF_UNSCANNED int manual_vdb_allowed;

/* The chunk record that holds the page bits of addr, or NULL when addr is
 * not in a region whose metadata exists.  Read without the lock: the
 * fields used are set before the program can hold a pointer there. */
static struct span *chunk_of(uint64_t addr, struct region **rp)
{
    uint64_t c = (addr >> LOWFAT_REGION_SHIFT) - LOWFAT_FIRST_REGION;
    if (c >= NUM_CLASSES)
        return NULL;
    struct region *r = &lf_regions[c];
    if (!r->mapped) {
        refused_check();
        return NULL;
    }
    uint64_t j = (addr - r->start) >> CHUNK_SHIFT;
    if (j > r->max_chunks)          /* the table has max_chunks + 1 entries */
        return NULL;
    *rp = r;
    return span_at(r, j);
}

/* Count the pages of [lo, hi) as written.  Lock-free: a collection
 * changes the bits only with the world stopped, and a registered thread
 * cannot be stopped in the middle of the atomic and. */
static void mark_written(uint64_t lo, uint64_t hi)
{
    for (uint64_t p = lo & ~(uint64_t)(PAGE_SIZE - 1); p < hi; p += PAGE_SIZE) {
        struct region *r;
        struct span *ch = chunk_of(p, &r);
        if (!ch)
            continue;
        uint16_t bit = page_bit(p);
        if (__atomic_load_n(&ch->wp_pages, __ATOMIC_RELAXED) & bit)
            __atomic_fetch_and(&ch->wp_pages, (uint16_t)~bit, __ATOMIC_SEQ_CST);
    }
}

/* bdwgc: with its manual dirty bits, the object p points into has been
 * written.  Here: every page of it counts as written at the next
 * collection.  Pointer-free objects are never scanned, and addresses
 * outside the heap are roots (scanned every time) or nothing: both are
 * ignored. */
LFGC_EXPORT void GC_end_stubborn_change(const void *p)
{
    uint64_t a = (uintptr_t)p;
    struct region *r;
    if (!chunk_of(a, &r))
        return;
    uint64_t base = slot_of(r, a) * r->size;
    if (base < r->start)
        return;
    unsigned k = lf_chunk_map[chunk_entry(base)];
    if (!k || lf_kinds[k - 1].ptrfree)
        return;
    uint64_t len = r->large ? span_at(r, (base - r->start) >> CHUNK_SHIFT)->obj_bytes : r->size;
    mark_written(base, base + len);
}

/* Only the page of the stored word: the store may be into a huge array. */
LFGC_EXPORT void GC_ptr_store_and_dirty(void *p, const void *q)
{
    *(const void *volatile *)p = q;
    mark_written((uintptr_t)p, (uintptr_t)p + sizeof(void *));
    GC_reachable_here(q);
}

LFGC_EXPORT void GC_set_manual_vdb_allowed(int on)
{
    manual_vdb_allowed = on;
}

LFGC_EXPORT int GC_get_manual_vdb_allowed(void)
{
    return manual_vdb_allowed;
}

/* Pages never protected again: untracked_pages is checked by
 * protect_old_pages, and without protection a page counts as written.
 * Only chunks handed out so far are concerned (a range past them holds no
 * object yet); objects later allocated in the same memory stay excluded.
 * Lock held. */
void lf_dirty_exclude(uint64_t a, uint64_t b)
{
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped)
            continue;
        uint64_t end = r->start + (chunks_to_check(r) << CHUNK_SHIFT);
        uint64_t from = a > r->start ? a : r->start, to = b < end ? b : end;
        for (uint64_t p = from & ~(uint64_t)(PAGE_SIZE - 1); p < to; p += PAGE_SIZE) {
            struct span *ch = span_at(r, (p - r->start) >> CHUNK_SHIFT);
            ch->untracked_pages |= page_bit(p);
            __atomic_fetch_and(&ch->wp_pages, (uint16_t)~page_bit(p), __ATOMIC_SEQ_CST);
        }
    }
}

LFGC_EXPORT void lfgc_exclude_from_write_tracking(const void *lo, const void *hi)
{
    uint64_t a = (uintptr_t)lo, b = (uintptr_t)hi;
    if (b < a) {
        lf_warn("GC Warning: lfgc_exclude_from_write_tracking: the range ends (%p) before it "
                "starts; nothing excluded\n", (uintptr_t)hi);
        return;
    }
    lf_ensure_init();
    lock();
    lf_dirty_exclude(a, b);
    unlock();
}
