/* pins.c: heap memory the kernel writes behind the write tracking's back.
 *
 * A page the kernel pinned for the long term (io_uring registered buffers,
 * RDMA memory regions) is written through the kernel's own mapping: the
 * write-protection of dirty.c is never hit, so a minor collection would
 * not rescan the old objects there and would free the young objects only
 * such writes refer to.  The kernel tells two things about pins:
 *   - /proc/self/status, VmPin: how much of the process's memory is pinned
 *     that way (io_uring and RDMA account their pins there);
 *   - /proc/self/fdinfo/N of an io_uring descriptor, UserBufs: the address
 *     and length of each registered buffer.
 * Before each minor collection: no pin, nothing to do (one read of the
 * status file).  Otherwise the registered buffers of
 * every io_uring descriptor are excluded from write tracking (their pages
 * count as written at every minor collection from then on), and when they
 * do not account for every pinned page (an RDMA region, a ring reachable
 * through no descriptor, a ring whose lock was busy while we read) the
 * collection is full: it cannot miss what it does not know about.
 *
 * Nothing here allocates or takes a lock a stopped thread may hold (it
 * runs with the world stopped); directory entries come from getdents64
 * into a stack buffer.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* /proc/self/status, kept open: reading it again costs half of opening
 * it.  A child of fork() must open its own.  Its identity is kept, as
 * dirty.c keeps pagemap's: the inherited descriptor is closed only if the
 * child did not close it and reuse its number for a file of its own. */
static LF_UNSCANNED_DATA int status_fd = -1;
static LF_UNSCANNED pid_t status_pid;
static LF_UNSCANNED dev_t status_dev;
static LF_UNSCANNED ino_t status_ino;

static bool status_fd_is_ours(void)
{
    struct stat st;
    return status_fd >= 0 && fstat(status_fd, &st) == 0 && st.st_dev == status_dev &&
           st.st_ino == status_ino;
}

/* The value of "VmPin:" in /proc/self/status, in KiB; -1 if it cannot be
 * read. */
static long pinned_kib(void)
{
    char buf[4096];
    ssize_t len = -1;
    for (int tries = 0; tries < 2 && len < 0; tries++) {
        pid_t me = getpid();
        if (status_fd < 0 || status_pid != me) {
            /* The old descriptor is the parent's or was closed by the
             * program (whose number it may be now): forgotten, not closed,
             * unless it is this process's own. */
            if (status_pid != me && status_fd_is_ours())
                close(status_fd);
            status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
            status_pid = me;
            if (status_fd < 0)
                return -1;
            struct stat st;
            if (fstat(status_fd, &st) != 0) {
                close(status_fd);
                status_fd = -1;
                return -1;
            }
            status_dev = st.st_dev;
            status_ino = st.st_ino;
        }
        len = pread(status_fd, buf, sizeof buf - 1, 0);
        if (len < 6 || memcmp(buf, "Name:", 5) != 0) {
            len = -1;
            status_fd = -1;
        }
    }
    if (len < 0)
        return -1;
    buf[len] = '\0';
    const char *p = strstr(buf, "\nVmPin:");
    if (!p)
        return -1;
    p += strlen("\nVmPin:");
    while (*p == ' ' || *p == '\t')
        p++;
    long kib = 0;
    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9')
        kib = kib * 10 + (*p++ - '0');
    return kib;
}

/* One line of an io_uring fdinfo: "%5u: 0x%llx/%u" after "UserBufs:".
 * True, with the buffer's address and length, if the line is one. */
static bool parse_user_buf(const char *l, uint64_t *addr, uint64_t *len)
{
    while (*l == ' ')
        l++;
    if (*l < '0' || *l > '9')
        return false;
    while (*l >= '0' && *l <= '9')
        l++;
    if (strncmp(l, ": 0x", 4) != 0)
        return false;
    l += 4;
    uint64_t a = 0, n = 0;
    int digits = 0;
    for (;; l++, digits++) {
        unsigned d;
        if (*l >= '0' && *l <= '9')
            d = (unsigned)(*l - '0');
        else if (*l >= 'a' && *l <= 'f')
            d = (unsigned)(*l - 'a' + 10);
        else
            break;
        a = a << 4 | d;
    }
    if (!digits || *l++ != '/' || *l < '0' || *l > '9')
        return false;
    while (*l >= '0' && *l <= '9')
        n = n * 10 + (uint64_t)(*l++ - '0');
    *addr = a;
    *len = n;
    return true;
}

/* The registered buffers of the io_uring behind descriptor fd: each is
 * excluded from write tracking; returns the KiB of pages they span. */
static uint64_t ring_buffers(const char *fd_name)
{
    char path[64] = "/proc/self/fdinfo/", buf[4096], line[256];
    size_t pl = strlen(path), nl = strlen(fd_name);
    if (pl + nl >= sizeof path)
        return 0;
    memcpy(path + pl, fd_name, nl + 1);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    uint64_t kib = 0;
    size_t ll = 0;
    bool in_bufs = false, overlong = false;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (ll < sizeof line - 1)
                    line[ll++] = buf[i];
                else
                    overlong = true;
                continue;
            }
            line[ll] = '\0';
            uint64_t a, len;
            if (overlong)
                in_bufs = false;
            else if (strncmp(line, "UserBufs:", 9) == 0)
                in_bufs = true;
            else if (in_bufs && parse_user_buf(line, &a, &len)) {
                if (len) {
                    uint64_t lo = a & ~(uint64_t)(PAGE_SIZE - 1);
                    uint64_t hi = (a + len + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
                    kib += (hi - lo) >> 10;
                    lf_dirty_exclude(a, a + len);
                }
            } else
                in_bufs = false;
            ll = 0;
            overlong = false;
        }
    }
    close(fd);
    return kib;
}

/* KiB of pinned memory found in the registered buffers of the process's
 * io_uring descriptors, each of them now excluded from write tracking. */
static uint64_t io_uring_buffers(void)
{
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return 0;
    uint64_t kib = 0;
    char ents[4096] __attribute__((aligned(8)));
    long n;
    while ((n = syscall(SYS_getdents64, dir, ents, sizeof ents)) > 0) {
        for (long off = 0; off < n;) {
            struct { uint64_t ino; int64_t off; unsigned short reclen;
                     unsigned char type; char name[]; } *e = (void *)(ents + off);
            off += e->reclen;
            if (e->name[0] < '0' || e->name[0] > '9')
                continue;
            char target[64];
            ssize_t tl = readlinkat(dir, e->name, target, sizeof target - 1);
            if (tl <= 0)
                continue;
            target[tl] = '\0';
            if (strcmp(target, "anon_inode:[io_uring]") == 0)
                kib += ring_buffers(e->name);
        }
    }
    close(dir);
    return kib;
}

/* World stopped, before a collection that would be minor marks: true
 * when every page the kernel pinned is known and rescanned (the io_uring
 * buffers are excluded from tracking here), false when the collection
 * must be full.  Full collections need no check: they rescan everything,
 * and the next minor one checks again.  A pin taken since the last check
 * wrote its pages as it was taken (the kernel pins for writing), so they
 * were not protected while unknown. */
static LF_UNSCANNED_DATA bool pins_placed = true;

bool lf_pins_allow_minor(void)
{
    if (!lf_dirty_enabled())
        return true;
    long pinned = pinned_kib();
    if (pinned == 0) {
        pins_placed = true;
        return true;
    }
    uint64_t found = pinned > 0 ? io_uring_buffers() : 0;
    bool placed = pinned > 0 && found >= (uint64_t)pinned;
    if (lf_print_stats && placed != pins_placed)
        lf_log(placed ? "lfgc: the %lu KiB the kernel pinned are io_uring buffers, "
                        "rescanned at every collection\n"
                      : "lfgc: %lu KiB pinned by the kernel in memory lfgc cannot "
                        "place (RDMA?); collections are full while it stays\n",
               (uintptr_t)(pinned > 0 ? pinned : 0));
    pins_placed = placed;
    return placed;
}
