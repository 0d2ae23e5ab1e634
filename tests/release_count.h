/* release_count.h: counts the system calls that give pages back, for a
 * test program that includes it (once).
 *
 * madvise(MADV_DONTNEED) and process_madvise (reached through syscall())
 * are defined here: the executable's definitions come first for
 * liblfgc's calls.  While rc_counting is set, each call adds to rc_calls
 * and its bytes to rc_bytes (process_madvise: the lengths of its ranges).
 */
#ifndef LFGC_RELEASE_COUNT_H
#define LFGC_RELEASE_COUNT_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#define RC_PIDFD_SELF (-10001)      /* PIDFD_SELF_THREAD_GROUP */

static atomic_int rc_counting;
static atomic_long rc_calls, rc_bytes, rc_batched_calls;

static long rc_forward(long nr, long a, long b, long c, long d, long e, long f)
{
    static long (*next)(long, ...);
    if (!next)
        next = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return next(nr, a, b, c, d, e, f);
}

int madvise(void *addr, size_t len, int advice)
{
    if (advice == MADV_DONTNEED && atomic_load(&rc_counting)) {
        atomic_fetch_add(&rc_calls, 1);
        atomic_fetch_add(&rc_bytes, (long)len);
    }
    return (int)rc_forward(SYS_madvise, (long)addr, (long)len, advice, 0, 0, 0);
}

long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
    long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_process_madvise && d == MADV_DONTNEED && atomic_load(&rc_counting)) {
        const struct iovec *v = (const struct iovec *)b;
        long bytes = 0;
        for (long i = 0; i < c; i++)
            bytes += (long)v[i].iov_len;
        atomic_fetch_add(&rc_calls, 1);
        atomic_fetch_add(&rc_batched_calls, 1);
        atomic_fetch_add(&rc_bytes, bytes);
    }
    return rc_forward(nr, a, b, c, d, e, f);
}

static inline void rc_start(void)
{
    atomic_store(&rc_calls, 0);
    atomic_store(&rc_bytes, 0);
    atomic_store(&rc_batched_calls, 0);
    atomic_store(&rc_counting, 1);
}

static inline void rc_stop(void)
{
    atomic_store(&rc_counting, 0);
}

/* Whether this kernel gives back a vector of the calling process's ranges
 * in one call (Linux 6.14: PIDFD_SELF, and MADV_DONTNEED on oneself). */
static inline bool rc_batches_work(void)
{
    char *p = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    memset(p, 1, 4 * 4096);
    struct iovec v[2] = { { p, 4096 }, { p + 2 * 4096, 4096 } };
    long done = rc_forward(SYS_process_madvise, RC_PIDFD_SELF, (long)v, 2, MADV_DONTNEED, 0, 0);
    bool ok = done == 2 * 4096 && p[0] == 0 && p[4096] == 1 && p[2 * 4096] == 0;
    munmap(p, 4 * 4096);
    return ok;
}

#endif
