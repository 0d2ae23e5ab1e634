/* release_count.h: counts the system calls that give pages back, for a
 * test program that includes it (once).
 *
 * madvise(MADV_DONTNEED) and process_madvise (reached through syscall())
 * are defined here: the executable's definitions come first for
 * liblfgc's calls.  While rc_counting is set (rc_start to rc_stop), each
 * call adds to rc_calls and its bytes to rc_bytes (process_madvise: the
 * lengths of its ranges, and a call to rc_batched_calls too).  Included
 * after test_util.h (Criterion).
 */
#ifndef LFGC_RELEASE_COUNT_H
#define LFGC_RELEASE_COUNT_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#define RC_PIDFD_SELF (-10001)      /* PIDFD_SELF_THREAD_GROUP */

static atomic_int rc_counting;
static atomic_long rc_calls, rc_bytes, rc_batched_calls;

/* The system call itself, as glibc's syscall() makes it: lfgc calls these
 * with its lock held, where looking glibc's up (dlsym) could allocate, and
 * in the malloc tests allocation is lfgc's. */
static long rc_forward(long nr, long a, long b, long c, long d, long e, long f)
{
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    if (ret < 0 && ret > -4096) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
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

/* Calls counted that were madvise, one range each. */
static inline long rc_plain_calls(void)
{
    return atomic_load(&rc_calls) - atomic_load(&rc_batched_calls);
}

/* process_madvise fails with EPERM from now on, as under Docker's default
 * seccomp profile for calls it does not know. */
static inline void rc_refuse_batches(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof code / sizeof code[0], .filter = code };
    cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    cr_assert_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), 0, "seccomp: %s",
                 strerror(errno));
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
