/* test_untracked_writes.c: writes the kernel does not report, and what
 * lfgc and the program do about them.
 *
 * Minor collections rescan old objects only on pages the kernel reports
 * written (userfaultfd asynchronous write protection).  Writes through
 * pages the kernel pinned earlier (io_uring registered buffers, RDMA,
 * device DMA) leave the protection in place and are not reported.  lfgc
 * finds io_uring's registered buffers itself and makes collections full
 * while other pins last; the program reports the rest with
 * GC_end_stubborn_change or GC_ptr_store_and_dirty, or excludes the
 * memory from tracking with lfgc_exclude_from_write_tracking.  The young
 * objects such writes point to must survive minor collections.
 *
 * Two ways to make such a write:
 *   - simulated, on every kernel with minor collections: the test stores
 *     into an old, protected object, then protects the page again through
 *     lfgc's own userfaultfd, so that the kernel reports it unwritten, as
 *     after a write through a pinned page (checked with PAGEMAP_SCAN);
 *   - real: an io_uring READ_FIXED into a registered buffer, reported,
 *     unreported, or through a ring whose descriptor is closed (it lives
 *     on as a registered ring, so lfgc cannot read its buffers).  Where
 *     io_uring is unavailable (kernel without it, or
 *     /proc/sys/kernel/io_uring_disabled) those tests log a warning and
 *     are reported as SKIPPED, with the reason; set
 *     LFGC_TEST_REQUIRE_IO_URING=1 to make them fail instead.
 * Without minor collections (kernel before 6.7, valgrind) the tests say so
 * and are skipped, as in test_generational.
 */
#define GC_THREADS
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

/* Linux 6.3, newer than Debian 12's headers. */
#ifndef IORING_REGISTER_USE_REGISTERED_RING
# define IORING_REGISTER_USE_REGISTERED_RING (1U << 31)
#endif

TestSuite(untracked, .init = tu_warm_up);

/* ------------------------------------------------------------------ */
/* What the kernel says about a page                                    */

/* PAGEMAP_SCAN (Linux 6.7), newer than Debian 12's headers. */
struct tu_page_region { uint64_t start, end, categories; };
struct tu_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define TU_PAGE_IS_WRITTEN (1ull << 1)
#define TU_PAGEMAP_SCAN _IOWR('f', 16, struct tu_pm_scan_arg)

/* 1 if the kernel reports the page of p written (not write-protected), 0
 * if not. */
static int page_written(const void *p)
{
    uint64_t page = (uintptr_t)p & ~(uint64_t)4095;
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open /proc/self/pagemap: %s", strerror(errno));
    struct tu_page_region out[2];
    struct tu_pm_scan_arg a = {
        .size = sizeof a, .start = page, .end = page + 4096,
        .vec = (uintptr_t)out, .vec_len = 2,
        .category_mask = TU_PAGE_IS_WRITTEN, .return_mask = TU_PAGE_IS_WRITTEN,
    };
    long n = ioctl(fd, TU_PAGEMAP_SCAN, &a);
    int e = errno;
    close(fd);
    cr_assert_geq(n, 0, "PAGEMAP_SCAN: %s", strerror(e));
    return n > 0;
}

/* lfgc's userfaultfd: the one descriptor of that type in the process. */
static int find_uffd(void)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    int found = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], link[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        if (strcmp(link, "anon_inode:[userfaultfd]") == 0)
            found = atoi(e->d_name);
    }
    closedir(d);
    cr_assert_geq(found, 0, "lfgc's userfaultfd not found, although minor "
                  "collections run");
    return found;
}

/* Hide the writes to the page of p from the kernel's tracking: protect it
 * again, as a write through a pinned page leaves it. */
static void hide_writes(int uffd, const void *p)
{
    struct uffdio_writeprotect wp = {
        .range = {.start = (uintptr_t)p & ~(uint64_t)4095, .len = 4096},
        .mode = UFFDIO_WRITEPROTECT_MODE_WP,
    };
    cr_assert_eq(ioctl(uffd, UFFDIO_WRITEPROTECT, &wp), 0,
                 "UFFDIO_WRITEPROTECT: %s", strerror(errno));
    cr_assert_eq(page_written(p), 0, "the page of %p still reads as written: "
                 "the simulated untracked write is not one", p);
}

/* ------------------------------------------------------------------ */
/* Old buffer, young objects                                            */

/* A large object (one per span, promoted at its first survival), so that
 * its pages hold nothing else and lfgc protects them once it is old. */
#define OLD_BYTES (64 * KiB)
#define NY 64
#define YOUNG_BYTES 48

static void *volatile *old_buf;            /* rooted here */
/* Old data that a minor collection does not trace: without it the test's
 * few old objects make minor collections look unprofitable, and lfgc then
 * runs full ones without protecting pages. */
#define BALLAST_BYTES (4 * MiB)
static void *volatile ballast;
static GC_hidden_pointer young[NY];        /* what old_buf[i] points to */
static GC_hidden_pointer garbage[NY];

static TU_NOINLINE void make_old_buf(void)
{
    old_buf = GC_malloc(OLD_BYTES);
    cr_assert_not_null(old_buf);
    ballast = GC_malloc(BALLAST_BYTES);
    cr_assert_not_null(ballast);
}

static TU_NOINLINE void clear_old_buf(void)
{
    for (int i = 0; i < NY; i++)
        old_buf[i] = NULL;
}

/* Young objects, filled with a pattern, held only hidden: collections off
 * until the caller has stored them somewhere. */
static TU_NOINLINE void make_young(uint64_t round)
{
    GC_disable();
    for (int i = 0; i < NY; i++) {
        char *y = GC_malloc(YOUNG_BYTES);
        char *g = GC_malloc(YOUNG_BYTES);
        cr_assert(y && g);
        tu_fill_bytes(y, YOUNG_BYTES, round * NY + (uint64_t)i);
        young[i] = tu_hide(y);
        garbage[i] = tu_hide(g);
    }
}

/* How many young objects are live, intact, and pointed to by old_buf. */
static TU_NOINLINE int young_intact(uint64_t round)
{
    int ok = 0;
    for (int i = 0; i < NY; i++) {
        char *y = GC_REVEAL_POINTER(young[i]);
        if (old_buf[i] == y && lfgc_is_live(y) &&
            tu_check_bytes(y, YOUNG_BYTES, round * NY + (uint64_t)i) == YOUNG_BYTES)
            ok++;
    }
    return ok;
}

static TU_NOINLINE int count_live(const GC_hidden_pointer *h)
{
    int n = 0;
    for (int i = 0; i < NY; i++)
        n += tu_live(h[i]);
    return n;
}

enum how { END_STUBBORN_CHANGE, END_STUBBORN_CHANGE_INTERIOR, PTR_STORE_AND_DIRTY,
           EXCLUDED };

/* Store the young objects into the old buffer as `how` says, then hide the
 * page's writes from the kernel. */
static TU_NOINLINE void store_young(enum how how, int uffd)
{
    for (int i = 0; i < NY; i++) {
        if (how == PTR_STORE_AND_DIRTY)
            GC_PTR_STORE_AND_DIRTY((void *)&old_buf[i], GC_REVEAL_POINTER(young[i]));
        else
            tu_store(&old_buf[i], young[i], 0);
    }
    hide_writes(uffd, (const void *)old_buf);
    if (how == END_STUBBORN_CHANGE)
        GC_END_STUBBORN_CHANGE((const void *)old_buf);
    else if (how == END_STUBBORN_CHANGE_INTERIOR)
        GC_end_stubborn_change((const char *)old_buf + 1000);
    GC_enable();
}

/* Rounds of: old buffer with no pointer, full collection (the buffer's
 * page is then protected), young objects stored into it unseen by the
 * kernel, minor collection.  The young objects must survive it, the young
 * garbage must not, and the young objects of the round before must go at
 * the full collection after the buffer forgot them. */
static void untracked_rounds(enum how how)
{
    TU_NEED_MINOR();
    int uffd = find_uffd();
    make_old_buf();
    if (how == EXCLUDED)
        lfgc_exclude_from_write_tracking((const void *)old_buf,
                                         (const char *)old_buf + OLD_BYTES);
    for (uint64_t round = 1; round <= 4; round++) {
        clear_old_buf();
        tu_collect();
        if (round > 1)
            cr_assert_eq(count_live(young), 0, "round %lu: young objects the old "
                         "buffer no longer holds survived a full collection",
                         (unsigned long)round);
        if (how != EXCLUDED)
            cr_assert_eq(page_written((const void *)old_buf), 0, "round %lu: lfgc "
                         "did not protect the page of an old object; this test "
                         "needs it to", (unsigned long)round);
        make_young(round);
        store_young(how, uffd);
        cr_assert(tu_collect_minor(), "round %lu: expected a minor collection",
                  (unsigned long)round);
        cr_assert_eq(young_intact(round), NY, "round %lu: %d of %d young objects "
                     "held only by an untracked write survived a minor collection",
                     (unsigned long)round, young_intact(round), NY);
        cr_assert_eq(count_live(garbage), 0, "round %lu: %d young garbage objects "
                     "survived a minor collection", (unsigned long)round,
                     count_live(garbage));
    }
}

Test(untracked, end_stubborn_change_makes_minor_collection_rescan)
{
    untracked_rounds(END_STUBBORN_CHANGE);
}

Test(untracked, end_stubborn_change_of_interior_pointer_rescans_the_object)
{
    untracked_rounds(END_STUBBORN_CHANGE_INTERIOR);
}

Test(untracked, ptr_store_and_dirty_makes_minor_collection_rescan)
{
    untracked_rounds(PTR_STORE_AND_DIRTY);
}

Test(untracked, excluded_range_is_rescanned_at_every_minor_collection)
{
    untracked_rounds(EXCLUDED);
}

/* The excluded pages are never protected, round after round, but the
 * rest of the heap is. */
Test(untracked, excluded_pages_stay_unprotected_others_do_not)
{
    TU_NEED_MINOR();
    void **a = GC_malloc(OLD_BYTES), **b = GC_malloc(OLD_BYTES);
    cr_assert(a && b);
    GC_set_warn_proc(tu_warn_proc);
    lfgc_exclude_from_write_tracking(a, (char *)a + OLD_BYTES);
    for (int round = 0; round < 3; round++) {
        for (size_t off = 0; off < OLD_BYTES / sizeof(void *); off += 512)
            a[off] = b[off] = NULL;            /* every page written */
        tu_collect();
        cr_assert_eq(page_written(b), 0, "round %d: the old object outside the "
                     "excluded range was not protected", round);
        for (size_t off = 0; off < OLD_BYTES; off += 4096)
            cr_assert_eq(page_written((char *)a + off), 1, "round %d: page %zu of "
                         "the excluded range was protected", round, off / 4096);
    }
    cr_assert_eq(tu_warn_count, 0);
    GC_reachable_here(a);
    GC_reachable_here(b);
}

Test(untracked, bad_or_foreign_arguments_are_harmless)
{
    GC_INIT();
    static void *not_heap[4];
    GC_end_stubborn_change(not_heap);
    GC_end_stubborn_change((void *)(uintptr_t)0x123456789000ull);
    GC_ptr_store_and_dirty(&not_heap[1], not_heap);
    cr_assert_eq(not_heap[1], (void *)not_heap);
    char *atomic = GC_malloc_atomic(100);
    GC_end_stubborn_change(atomic);
    lfgc_exclude_from_write_tracking(not_heap, not_heap + 4);
    tu_warn_reset();
    GC_set_warn_proc(tu_warn_proc);
    char *p = GC_malloc(OLD_BYTES);
    lfgc_exclude_from_write_tracking(p + 100, p);
    cr_assert_eq(tu_warn_count, 1, "a range that ends before it starts: %d warnings",
                 tu_warn_count);
    cr_assert(strstr(tu_warnings[0].msg, "lfgc_exclude_from_write_tracking"),
              "warning: %s", tu_warnings[0].msg);
    GC_set_manual_vdb_allowed(1);
    cr_assert_eq(GC_get_manual_vdb_allowed(), 1);
    GC_set_manual_vdb_allowed(0);
    cr_assert_eq(GC_get_manual_vdb_allowed(), 0);
    GC_reachable_here(atomic);
    GC_reachable_here(p);
}

/* ------------------------------------------------------------------ */
/* Survivors of a full collection: protected by it                      */

/* A full collection leaves the objects it finds in nursery spans aging:
 * the next minor collection traces them again.  It protects their pages
 * all the same, so that this minor collection need not read those pages
 * to check them before protecting them (it made the first minor
 * collection after a large structure was built twice as long as a full
 * one).  Stores into them must still be seen. */
#define CHAIN_N 8192
struct link { struct link *next; void *young; uint64_t pad[4]; };
static struct link *volatile chain;

static TU_NOINLINE void make_chain(void)
{
    GC_disable();
    struct link *head = NULL;
    for (int i = 0; i < CHAIN_N; i++) {
        struct link *l = GC_malloc(sizeof *l);
        cr_assert_not_null(l);
        l->next = head;
        l->pad[0] = tu_pattern((uint64_t)i, 0);
        head = l;
    }
    chain = head;
    GC_enable();
}

/* Pages holding the chain that the kernel reports unwritten. */
static TU_NOINLINE int chain_pages_protected(int *pages)
{
    int prot = 0, n = 0;
    uintptr_t last = 0;
    for (struct link *l = chain; l; l = l->next) {
        uintptr_t pg = (uintptr_t)l & ~(uintptr_t)4095;
        if (pg == last)
            continue;
        last = pg;
        n++;
        prot += !page_written(l);
    }
    *pages = n;
    return prot;
}

/* Every 64th link gets a young object, referenced from it only. */
static TU_NOINLINE void attach_young_to_chain(uint64_t round)
{
    int i = 0;
    for (struct link *l = chain; l; l = l->next, i++) {
        if (i % 64)
            continue;
        char *y = GC_malloc(YOUNG_BYTES);
        cr_assert_not_null(y);
        tu_fill_bytes(y, YOUNG_BYTES, round * CHAIN_N + (uint64_t)i);
        l->young = y;
    }
}

static TU_NOINLINE int chain_intact(uint64_t round)
{
    int i = CHAIN_N, bad = 0;
    for (struct link *l = chain; l; l = l->next) {
        i--;
        if (l->pad[0] != tu_pattern((uint64_t)i, 0))
            bad++;
    }
    i = 0;
    for (struct link *l = chain; l; l = l->next, i++) {
        if (i % 64)
            continue;
        if (!lfgc_is_live(l->young) ||
            tu_check_bytes(l->young, YOUNG_BYTES, round * CHAIN_N + (uint64_t)i) != YOUNG_BYTES)
            bad++;
    }
    return bad;
}

/* Forget the chain; its first link, hidden. */
static TU_NOINLINE GC_hidden_pointer drop_chain(void)
{
    struct link *l = chain;
    while (l->next)
        l = l->next;
    chain = NULL;
    return tu_hide(l);
}

Test(untracked, full_collection_protects_the_pages_of_its_survivors)
{
    TU_NEED_MINOR();
    make_old_buf();                 /* the ballast: minor collections pay */
    make_chain();
    tu_collect();                   /* full: the chain is aging */
    int pages;
    int prot = chain_pages_protected(&pages);
    cr_assert_geq(prot, pages / 2, "%d of the %d pages of a structure that "
                  "survived a full collection were protected", prot, pages);
    for (uint64_t round = 1; round <= 3; round++) {
        attach_young_to_chain(round);
        cr_assert(tu_collect_minor(), "round %lu: expected a minor collection",
                  (unsigned long)round);
        cr_assert_eq(chain_intact(round), 0, "round %lu: links or young objects "
                     "lost by a minor collection", (unsigned long)round);
    }
    GC_hidden_pointer first = drop_chain();
    tu_collect();
    cr_assert_not(tu_live(first), "the dropped structure survived a full collection");
}

/* ------------------------------------------------------------------ */
/* The real thing: io_uring READ_FIXED into a registered buffer          */

struct ring {
    int fd;
    int enter_fd;             /* fd, or the index of the registered ring */
    unsigned enter_flags;     /* 0, or IORING_ENTER_REGISTERED_RING     */
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

/* 0, or the errno of the failure. */
static int ring_open(struct ring *rg)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    rg->fd = (int)syscall(__NR_io_uring_setup, 4, &p);
    if (rg->fd < 0)
        return errno;
    rg->enter_fd = rg->fd;
    rg->enter_flags = 0;
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                    rg->fd, IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                    rg->fd, IORING_OFF_CQ_RING);
    rg->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
                    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, rg->fd,
                    IORING_OFF_SQES);
    cr_assert(sq != MAP_FAILED && cq != MAP_FAILED && rg->sqes != MAP_FAILED,
              "mapping the io_uring rings: %s", strerror(errno));
    rg->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    rg->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    rg->sq_array = (unsigned *)(sq + p.sq_off.array);
    rg->cq_head = (unsigned *)(cq + p.cq_off.head);
    rg->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    rg->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    rg->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
}

/* One READ_FIXED of len bytes at offset 0 of fd into buf (inside
 * registered buffer 0), waited for; its result. */
static int read_fixed(struct ring *rg, int fd, void *buf, unsigned len)
{
    unsigned tail = *rg->sq_tail, i = tail & *rg->sq_mask;
    struct io_uring_sqe *s = &rg->sqes[i];
    memset(s, 0, sizeof *s);
    s->opcode = IORING_OP_READ_FIXED;
    s->fd = fd;
    s->addr = (uintptr_t)buf;
    s->len = len;
    s->buf_index = 0;
    rg->sq_array[i] = i;
    __atomic_store_n(rg->sq_tail, tail + 1, __ATOMIC_RELEASE);
    long n = syscall(__NR_io_uring_enter, rg->enter_fd, 1, 1,
                     IORING_ENTER_GETEVENTS | rg->enter_flags, NULL, 0);
    cr_assert_eq(n, 1, "io_uring_enter: %s", strerror(errno));
    unsigned head = *rg->cq_head;
    cr_assert_neq(head, __atomic_load_n(rg->cq_tail, __ATOMIC_ACQUIRE),
                  "no completion after io_uring_enter waited for one");
    int res = rg->cqes[head & *rg->cq_mask].res;
    __atomic_store_n(rg->cq_head, head + 1, __ATOMIC_RELEASE);
    return res;
}

/* Write the young objects' addresses into the file, then forget them. */
static TU_NOINLINE void write_young_addresses(int fd)
{
    uintptr_t addr[NY];
    for (int i = 0; i < NY; i++)
        addr[i] = (uintptr_t)GC_REVEAL_POINTER(young[i]);
    cr_assert_eq(pwrite(fd, addr, sizeof addr, 0), (ssize_t)sizeof addr);
    memset(addr, 0, sizeof addr);
    __asm__ volatile("" : : "r"(addr) : "memory");
}

/* An io_uring with a registered buffer, or a loud skip where there is
 * none. */
static void ring_or_skip(struct ring *rg)
{
    memset(rg, 0, sizeof *rg);
    int err = ring_open(rg);
    if (err) {
        cr_log_warn("io_uring is unavailable here (io_uring_setup: %s): the "
                    "test of real fixed-buffer writes cannot run; only the "
                    "simulated ones were tested", strerror(err));
        const char *req = getenv("LFGC_TEST_REQUIRE_IO_URING");
        cr_assert(!req || strcmp(req, "1") != 0,
                  "LFGC_TEST_REQUIRE_IO_URING=1 and io_uring is unavailable");
        TU_SKIP("io_uring unavailable (io_uring_setup: %s)", strerror(err));
    }
}

enum fixed_how {
    FIXED_REPORTED,          /* GC_end_stubborn_change after each read    */
    FIXED_UNREPORTED,        /* nothing: lfgc finds the buffer itself     */
    FIXED_HIDDEN_RING,       /* the ring has no descriptor lfgc could read */
};

/* Rounds of: old registered buffer with no pointer, full collection,
 * young objects whose addresses READ_FIXED writes into the buffer, then a
 * collection.  The young objects must survive it and the young garbage
 * must not; with a hidden ring the collection must be full (lfgc cannot
 * place the pinned pages), otherwise minor. */
static void fixed_buffer_rounds(enum fixed_how how)
{
    TU_NEED_MINOR();
    struct ring rg;
    ring_or_skip(&rg);
    int fd = memfd_create("lfgc-untracked", MFD_CLOEXEC);
    cr_assert_geq(fd, 0);
    make_old_buf();
    struct iovec iov = {(void *)old_buf, OLD_BYTES};
    cr_assert_eq(syscall(__NR_io_uring_register, rg.fd, IORING_REGISTER_BUFFERS, &iov, 1),
                 0, "IORING_REGISTER_BUFFERS: %s", strerror(errno));
    unsigned reg_flag = 0;
    if (how == FIXED_HIDDEN_RING) {
        /* The registered ring and the mappings keep it alive after close:
         * /proc/self/fd no longer shows it, the pins stay. */
        struct io_uring_rsrc_update up = {.offset = -1U, .data = (uint64_t)rg.fd};
        cr_assert_eq(syscall(__NR_io_uring_register, rg.fd, IORING_REGISTER_RING_FDS,
                             &up, 1), 1, "IORING_REGISTER_RING_FDS: %s", strerror(errno));
        close(rg.fd);
        rg.enter_fd = (int)up.offset;
        rg.enter_flags = IORING_ENTER_REGISTERED_RING;
        reg_flag = IORING_REGISTER_USE_REGISTERED_RING;
    }
    for (uint64_t round = 1; round <= 4; round++) {
        clear_old_buf();
        tu_collect();
        if (round > 1)
            cr_assert_eq(count_live(young), 0, "round %lu: young objects the old "
                         "buffer no longer holds survived a full collection",
                         (unsigned long)round);
        make_young(round);
        write_young_addresses(fd);
        cr_assert_eq(read_fixed(&rg, fd, (void *)old_buf, NY * sizeof(void *)),
                     (int)(NY * sizeof(void *)), "READ_FIXED");
        if (how == FIXED_REPORTED)
            GC_end_stubborn_change((const void *)old_buf);
        GC_enable();
        int minor = tu_collect_minor();
        if (how == FIXED_HIDDEN_RING)
            cr_assert_not(minor, "round %lu: a minor collection ran while the "
                          "kernel pinned memory lfgc could not place",
                          (unsigned long)round);
        else
            cr_assert(minor, "round %lu: expected a minor collection",
                      (unsigned long)round);
        cr_assert_eq(young_intact(round), NY, "round %lu: %d of %d young objects "
                     "written by READ_FIXED survived the collection",
                     (unsigned long)round, young_intact(round), NY);
        cr_assert_eq(count_live(garbage), 0, "round %lu: young garbage survived",
                     (unsigned long)round);
    }
    cr_assert_eq(syscall(__NR_io_uring_register, rg.enter_fd,
                         IORING_UNREGISTER_BUFFERS | reg_flag, NULL, 0), 0,
                 "IORING_UNREGISTER_BUFFERS: %s", strerror(errno));
    if (how == FIXED_HIDDEN_RING) {
        /* Nothing pinned any more: minor collections again. */
        tu_collect();
        cr_assert(tu_collect_minor(), "no minor collection after the pins went");
        struct io_uring_rsrc_update up = {.offset = (unsigned)rg.enter_fd};
        cr_assert_eq(syscall(__NR_io_uring_register, rg.enter_fd,
                             IORING_UNREGISTER_RING_FDS | reg_flag, &up, 1), 1);
    } else
        close(rg.fd);
    close(fd);
}

Test(untracked, io_uring_fixed_buffer_writes_survive_with_end_stubborn_change)
{
    fixed_buffer_rounds(FIXED_REPORTED);
}

Test(untracked, io_uring_fixed_buffer_writes_survive_unreported)
{
    fixed_buffer_rounds(FIXED_UNREPORTED);
}

Test(untracked, pins_lfgc_cannot_place_make_collections_full)
{
    fixed_buffer_rounds(FIXED_HIDDEN_RING);
}
