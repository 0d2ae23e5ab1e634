/* test_malloc_release.c: how malloc's freed large objects go back to the
 * OS (manual mode, linked with liblfgc-malloc).
 *
 * Each madvise(MADV_DONTNEED) of a multi-threaded process flushes the TLB
 * of every CPU running one of its threads, whatever the range's length.
 * Freed large objects past the retention budget go back a batch at a
 * time, in one process_madvise call, not one madvise each (alloc.c,
 * pages_release_flush).  This program counts lfgc's madvise calls by
 * defining madvise itself: the executable's definition comes first for
 * liblfgc's calls.
 */
#include "test_util.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lfgc_malloc.h"

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#define PIDFD_SELF_PROCESS_ (-10001)

static volatile long dontneed_calls;

int madvise(void *addr, size_t len, int advice)
{
    if (advice == MADV_DONTNEED)
        __atomic_add_fetch(&dontneed_calls, 1, __ATOMIC_RELAXED);
    return (int)syscall(SYS_madvise, addr, len, advice);
}

/* Whether this kernel gives back a vector of the calling process's ranges
 * in one call (Linux 6.14: PIDFD_SELF, and MADV_DONTNEED on oneself). */
static bool batched_release_works(void)
{
    char *p = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    memset(p, 1, 4 * 4096);
    struct iovec v[2] = { { p, 4096 }, { p + 2 * 4096, 4096 } };
    long done = syscall(SYS_process_madvise, PIDFD_SELF_PROCESS_, v, 2, MADV_DONTNEED, 0);
    bool ok = done == 2 * 4096 && p[0] == 0 && p[4096] == 1 && p[2 * 4096] == 0;
    munmap(p, 4 * 4096);
    return ok;
}

static size_t resident_pages(void *const *v, size_t n, size_t size)
{
    unsigned char vec[size / 4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(mincore(v[i], size, vec), 0);
        for (size_t j = 0; j < size / 4096; j++)
            k += vec[j] & 1;
    }
    return k;
}

/* A bulk free of 32 KiB objects (the main thread freeing what exited
 * workers left, malloc_threadset) made one madvise per object past the
 * budget: 1,900 of them here.  The pages still go back, the budget's and
 * one batch's worth aside, and the objects allocated again are zero
 * where calloc promises it. */
Test(malloc_release, a_bulk_free_of_large_objects_gives_pages_back_in_batches)
{
    if (!batched_release_works())
        TU_SKIP("this kernel has no process_madvise(PIDFD_SELF, MADV_DONTNEED) (Linux 6.14): "
                "each range is given back by a madvise of its own");
    enum { N = 2048, SIZE = 32 << 10 };
    static void *v[N];
    malloc_trim(0);
    for (int i = 0; i < N; i++) {
        v[i] = malloc(SIZE);
        cr_assert_not_null(v[i]);
        cr_assert_eq(malloc_usable_size(v[i]), (size_t)SIZE, "32 KiB is not a class of its own");
        memset(v[i], 0xa5, SIZE);
    }
    long before = dontneed_calls;
    for (int i = 0; i < N; i++)
        free(v[i]);
    long calls = dontneed_calls - before;
    cr_assert_lt(calls, N / 32, "%ld madvise calls to give back %d freed objects of %d KiB",
                 calls, N, SIZE >> 10);
    /* Given back all the same: what is kept is the budget (at most 4
     * MiB) and one batch (1 MiB), of 64 MiB freed. */
    size_t resident = resident_pages(v, N, SIZE);
    cr_assert_leq(resident * 4096, 6 * MiB, "%zu KiB of %d freed objects of %d KiB still "
                  "resident", resident * 4, N, SIZE >> 10);
    /* Allocated again: kept pages are cleared, given-back ones are zero. */
    for (int i = 0; i < N; i++) {
        unsigned char *p = calloc(1, SIZE);
        cr_assert_not_null(p);
        for (size_t k = 0; k < SIZE; k += 1024)
            cr_assert_eq(p[k], 0, "calloc'ed object %d holds %#x at %zu", i, p[k], k);
        v[i] = p;
    }
    for (int i = 0; i < N; i++)
        free(v[i]);
    cr_assert_eq(malloc_trim(0), 1, "malloc_trim gave nothing back");
    cr_assert_eq(resident_pages(v, N, SIZE), 0, "malloc_trim kept pages of freed objects");
}

/* Objects of a larger class, kept and given back the same way (by
 * madvise, one range a call, where the kernel refuses the batches). */
Test(malloc_release, freed_large_objects_past_the_budget_go_back)
{
    enum { N = 1024, SIZE = 64 << 10 };
    static void *v[N];
    malloc_trim(0);
    for (int i = 0; i < N; i++) {
        v[i] = malloc(SIZE);
        cr_assert_not_null(v[i]);
        memset(v[i], 0x5a, SIZE);
    }
    for (int i = 0; i < N; i++)
        free(v[i]);
    size_t resident = resident_pages(v, N, SIZE);
    cr_assert_leq(resident * 4096, 6 * MiB, "%zu KiB of %d freed objects of %d KiB still "
                  "resident", resident * 4, N, SIZE >> 10);
    cr_assert_eq(malloc_trim(0), 1, "malloc_trim gave nothing back");
    cr_assert_eq(resident_pages(v, N, SIZE), 0, "malloc_trim kept pages of freed objects");
}

/* Where process_madvise fails (a seccomp filter that refuses it, an
 * older kernel), the batch goes back one madvise a range, and free still
 * keeps errno, as glibc's does.  The filter here makes the call fail
 * with EPERM, as Docker's default profile does for calls it does not
 * know. */
static void refuse_process_madvise(void)
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

Test(malloc_release, refused_batches_go_back_range_by_range_and_free_keeps_errno)
{
    enum { N = 1024, SIZE = 32 << 10 };
    static void *v[N];
    malloc_trim(0);
    for (int i = 0; i < N; i++) {
        v[i] = malloc(SIZE);
        cr_assert_not_null(v[i]);
        memset(v[i], 0x3c, SIZE);
    }
    refuse_process_madvise();
    long before = dontneed_calls;
    for (int i = 0; i < N; i++) {
        errno = 4242;
        free(v[i]);
        cr_assert_eq(errno, 4242, "free of object %d changed errno to %d", i, errno);
    }
    /* By madvise, a range a call (neighbours freed one after the other
     * make one range). */
    cr_assert_gt(dontneed_calls - before, 0, "no madvise call gave the pages back");
    size_t resident = resident_pages(v, N, SIZE);
    cr_assert_leq(resident * 4096, 6 * MiB, "%zu KiB of %d freed objects of %d KiB still "
                  "resident", resident * 4, N, SIZE >> 10);
}
