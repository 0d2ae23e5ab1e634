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
 * other write.  Without this kernel support, in a child after fork(), or
 * after the program closed the descriptor, every collection is full until
 * tracking can be set up again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
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

static bool wanted;                 /* generational collections allowed   */
static int uffd = -1;
static bool tracking;               /* regions registered, protections valid */
static bool scanned_once;           /* a collection has set protections     */
static struct scan_region *written; /* written page ranges, this collection */
static size_t n_written, cap_written;

static bool written_reserve(size_t cap)
{
    if (cap <= cap_written)
        return true;
    size_t bytes = cap * sizeof *written;
    void *p = written
        ? mremap(written, cap_written * sizeof *written, bytes, MREMAP_MAYMOVE)
        : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    written = p;
    cap_written = cap;
    return true;
}

static bool register_regions(void)
{
    if (uffd < 0) {
        int fd = (int)syscall(SYS_userfaultfd,
                              O_CLOEXEC | O_NONBLOCK | UFFD_FLAG_USER_MODE_ONLY);
        if (fd < 0)
            return false;
        struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEAT_WP_ASYNC};
        if (ioctl(fd, UFFDIO_API, &api) != 0 || !(api.features & UFFD_FEAT_WP_ASYNC)) {
            close(fd);
            return false;
        }
        uffd = fd;
    }
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &regions[c];
        if (!r->reserved)
            continue;
        struct uffdio_register reg = {
            .range = {.start = r->start, .len = LOWFAT_REGION_SIZE},
            .mode = UFFDIO_REGISTER_MODE_WP,
        };
        if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0)
            return false;
    }
    return written_reserve(4096);
}

/* Turn generational collection on or off.  On only if the kernel can
 * track writes: the regions are registered at once (the first collection
 * then finds every page written, and is full). */
void dirty_init(bool enable)
{
    wanted = enable && layout_ok && (tracking || register_regions());
    if (!wanted) {
        /* Closing the descriptor unregisters the regions. */
        if (uffd >= 0)
            close(uffd);
        uffd = -1;
        tracking = false;
    } else {
        tracking = true;
    }
}

bool dirty_enabled(void)
{
    return wanted;
}

/* Bytes of region r that slots in use may touch, rounded to pages. */
static uint64_t region_used_end(const struct region *r)
{
    uint64_t top = lowfat_heap_top[lowfat_index((void *)r->start)];
    return (top + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
}

/* Ask the kernel for the written pages of every region in use. */
static bool scan_regions(void)
{
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0)
        return false;
    bool ok = true;
    for (unsigned c = 0; c < NUM_CLASSES && ok; c++) {
        struct region *r = &regions[c];
        if (!r->mapped || !r->next_chunk)
            continue;
        uint64_t lo = r->start, hi = region_used_end(r);
        while (lo < hi) {
            if (n_written == cap_written && !written_reserve(cap_written * 2)) {
                ok = false;
                break;
            }
            struct scan_arg a = {
                .size = sizeof a,
                .flags = SCAN_CHECK_WPASYNC,
                .start = lo,
                .end = hi,
                .vec = (uintptr_t)(written + n_written),
                .vec_len = cap_written - n_written,
                .category_mask = SCAN_PAGE_IS_WRITTEN,
                .return_mask = SCAN_PAGE_IS_WRITTEN,
            };
            long n = ioctl(pm, PAGEMAP_SCAN_IOCTL, &a);
            if (n < 0 || a.walk_end <= lo) {
                ok = false;
                break;
            }
            n_written += (size_t)n;
            lo = a.walk_end;
        }
    }
    close(pm);
    return ok;
}

/* World stopped, before marking: learn which pages were written since the
 * last collection.  True when a minor collection is possible; false means
 * this one must be full (tracking is being set up, or broke). */
bool dirty_begin(void)
{
    n_written = 0;
    if (!wanted)
        return false;
    bool was_tracking = tracking && scanned_once;
    if (!tracking)
        tracking = register_regions();
    scanned_once = true;
    if (tracking && !scan_regions()) {
        if (print_stats)
            fprintf(stderr, "lfgc: write tracking lost (%s); collections are "
                    "full until it is set up again\n", strerror(errno));
        tracking = false;
        n_written = 0;
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
        unsigned k = chunk_map[base >> CHUNK_SHIFT];
        i++;
        if (!k || kinds[k - 1].ptrfree)
            continue;
        uint64_t len = r->large ? r->spans[(base - r->start) >> CHUNK_SHIFT].obj_bytes
                                : r->size;
        if (base + len <= lo)
            continue;
        fn(base, len, lo, hi);
    }
}

static void scan_part(uint64_t base, uint64_t len, uint64_t lo, uint64_t hi)
{
    uint64_t a = base > lo ? base : lo;
    uint64_t b = base + len < hi ? base + len : hi;
    mark_range((void *)a, (void *)b);
}

/* Minor collection, after mark_begin: old objects on written pages may
 * now point to young ones; scan the parts of them on those pages. */
void dirty_mark_old(void)
{
    for (size_t i = 0; i < n_written; i++) {
        uint64_t lo = written[i].start, hi = written[i].end;
        each_old_object(region_of((void *)lo), lo, hi, scan_part);
    }
}

/* Whether to protect the page at p: only when every slot on it is marked
 * and some of them are scanned.  A page with dead or free slots will be
 * written by the sweep or by allocation anyway, and a write fault costs
 * more than scanning its old objects at the next collection, which is
 * what happens to an unprotected page (the kernel reports it written). */
static bool page_all_old(struct region *r, uint64_t p)
{
    if (r->large) {
        uint64_t base = slot_of(r, p) * r->size;
        unsigned k = chunk_map[base >> CHUNK_SHIFT];
        if (!k || kinds[k - 1].ptrfree)
            return false;
        uint64_t bit = slot_of(r, p) - r->q0;
        return (r->mark_bits[bit >> 6] >> (bit & 63)) & 1;
    }
    uint64_t qa = slot_of(r, p), qb = slot_of(r, p + PAGE_SIZE - 1) + 1;
    if (qa < r->q0)
        return false;
    bool scanned = false;
    for (uint64_t q = qa; q < qb; q++) {
        uint64_t bit = q - r->q0;
        if (!((r->mark_bits[bit >> 6] >> (bit & 63)) & 1))
            return false;
        unsigned k = chunk_map[(q * r->size) >> CHUNK_SHIFT];
        if (!k)
            return false;
        scanned |= !kinds[k - 1].ptrfree;
    }
    return scanned;
}

static bool protect(uint64_t lo, uint64_t hi)
{
    struct uffdio_writeprotect wp = {
        .range = {.start = lo, .len = hi - lo},
        .mode = UFFDIO_WRITEPROTECT_MODE_WP,
    };
    return ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) == 0;
}

/* World stopped, after marking: protect the written pages that hold only
 * old objects, pointerful ones among them, so that the next collection
 * learns of writes to them.  Other written pages stay unprotected and are
 * listed as written again next time. */
void dirty_protect(void)
{
    if (!tracking)
        return;
    for (size_t i = 0; i < n_written; i++) {
        uint64_t lo = written[i].start, hi = written[i].end;
        struct region *r = region_of((void *)lo);
        uint64_t run = 0;           /* start of the run of pages to protect */
        for (uint64_t p = lo; p < hi; p += PAGE_SIZE) {
            bool old = page_all_old(r, p);
            if (old && !run)
                run = p;
            if (!old && run) {
                if (!protect(run, p))
                    goto lost;
                run = 0;
            }
        }
        if (run && !protect(run, hi))
            goto lost;
    }
    return;
lost:
    /* Some old objects are unprotected: the next collection must be full. */
    tracking = false;
}

/* In a child after fork() the regions are no longer registered (the
 * descriptor belongs to the parent's registration). */
void dirty_after_fork(void)
{
    if (uffd >= 0)
        close(uffd);
    uffd = -1;
    tracking = false;
    scanned_once = false;
}
