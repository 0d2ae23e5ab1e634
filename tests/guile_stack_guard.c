/* Preloaded into the Guile runs of tests/runtimes.sh, on bdwgc and on lfgc
 * alike: keeps Guile 3.0.8's VM stack race from zeroing memory that is not
 * Guile's (docs/compatibility.md, "Guile 3.0.8's crashes").
 *
 * Guile's mark procedure for a thread's VM stack ends by giving back the
 * unused part of that stack with madvise(MADV_DONTNEED).  When a collection
 * comes while the thread expands its stack, the stack pointer it uses is
 * the old stack's, and the range runs from the new stack over whatever lies
 * between the two: the collector's own tables, other stacks.  This library
 * records the mappings libguile makes (mmap, mremap) and unmaps, and turns
 * a madvise from libguile that does not lie inside one of them into a
 * failed call (ENOMEM, which Guile reports as "madvise failed") instead of
 * zeroing someone else's pages.  Every refusal is written to stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_MAPPINGS 4096

struct mapping {
    uintptr_t lo, hi;
};

static struct mapping mappings[MAX_MAPPINGS];
static size_t mapping_count;
static bool overflowed;             /* then nothing is refused */
static int lock;

static void take(void)
{
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
}

static void give(void)
{
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}

static bool from_guile(const void *ret_addr)
{
    Dl_info di;
    return dladdr(ret_addr, &di) && di.dli_fname && strstr(di.dli_fname, "libguile");
}

/* Drops [lo, hi) from the records, splitting a mapping it cuts in two. */
static void forget(uintptr_t lo, uintptr_t hi)
{
    for (size_t i = 0; i < mapping_count; i++) {
        struct mapping *m = &mappings[i];
        if (m->hi <= lo || m->lo >= hi)
            continue;
        if (m->lo < lo && m->hi > hi) {
            if (mapping_count == MAX_MAPPINGS) {
                overflowed = true;
                return;
            }
            mappings[mapping_count++] = (struct mapping){hi, m->hi};
            m->hi = lo;
        } else if (m->lo < lo) {
            m->hi = lo;
        } else if (m->hi > hi) {
            m->lo = hi;
        } else {
            *m = mappings[--mapping_count];
            i--;
        }
    }
}

static void remember(uintptr_t lo, uintptr_t hi)
{
    forget(lo, hi);
    if (mapping_count == MAX_MAPPINGS)
        overflowed = true;
    else
        mappings[mapping_count++] = (struct mapping){lo, hi};
}

static bool recorded(uintptr_t lo, uintptr_t hi)
{
    for (size_t i = 0; i < mapping_count; i++)
        if (mappings[i].lo <= lo && hi <= mappings[i].hi)
            return true;
    return false;
}

static uintptr_t page_end(uintptr_t p, size_t len)
{
    return (p + len + 4095) & ~(uintptr_t)4095;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (r == -1)
        return MAP_FAILED;
    if (from_guile(__builtin_return_address(0))) {
        take();
        remember((uintptr_t)r, page_end((uintptr_t)r, len));
        give();
    }
    return (void *)r;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void *);
        va_end(ap);
    }
    long r = syscall(SYS_mremap, old, old_len, new_len, flags, want);
    if (r == -1)
        return MAP_FAILED;
    if (from_guile(__builtin_return_address(0))) {
        take();
        if (!(flags & MREMAP_DONTUNMAP))
            forget((uintptr_t)old, page_end((uintptr_t)old, old_len));
        remember((uintptr_t)r, page_end((uintptr_t)r, new_len));
        give();
    }
    return (void *)r;
}

int munmap(void *addr, size_t len)
{
    long r = syscall(SYS_munmap, addr, len);
    if (r == 0) {
        take();
        forget((uintptr_t)addr, page_end((uintptr_t)addr, len));
        give();
    }
    return r == 0 ? 0 : -1;
}

int madvise(void *addr, size_t len, int advice)
{
    if (advice == MADV_DONTNEED && len && from_guile(__builtin_return_address(0))) {
        take();
        bool ok = overflowed || recorded((uintptr_t)addr, (uintptr_t)addr + len);
        give();
        if (!ok) {
            char msg[200];
            int n = snprintf(msg, sizeof msg,
                             "guile_stack_guard: refused Guile's madvise(MADV_DONTNEED) of "
                             "[%p, %p), %zu bytes: not inside one of its mappings "
                             "(its VM stack race)\n",
                             addr, (void *)((uintptr_t)addr + len), len);
            ssize_t w = write(2, msg, (size_t)n);
            (void)w;
            errno = ENOMEM;
            return -1;
        }
    }
    return syscall(SYS_madvise, addr, len, advice) == 0 ? 0 : -1;
}
