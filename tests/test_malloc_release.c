/* test_malloc_release.c: how malloc's freed large objects go back to the
 * OS (manual mode, linked with liblfgc-malloc).
 *
 * Each madvise(MADV_DONTNEED) of a multi-threaded process flushes the TLB
 * of every CPU running one of its threads, whatever the range's length.
 * Freed large objects past the retention budget go back a batch at a
 * time, in one process_madvise call, not one madvise each (alloc.c,
 * lf_pages_release_flush).  This program counts lfgc's calls by defining
 * madvise and syscall itself (release_count.h): the executable's
 * definitions come first for liblfgc's calls.
 */
#include "test_util.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lfgc_malloc.h"
#include "release_count.h"

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
    if (!rc_batches_work())
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
    rc_start();
    for (int i = 0; i < N; i++)
        free(v[i]);
    rc_stop();
    long calls = rc_plain_calls();
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
    rc_refuse_batches();
    rc_start();
    for (int i = 0; i < N; i++) {
        errno = 4242;
        free(v[i]);
        cr_assert_eq(errno, 4242, "free of object %d changed errno to %d", i, errno);
    }
    /* By madvise, a range a call (neighbours freed one after the other
     * make one range). */
    rc_stop();
    cr_assert_gt(rc_plain_calls(), 0, "no madvise call gave the pages back");
    size_t resident = resident_pages(v, N, SIZE);
    cr_assert_leq(resident * 4096, 6 * MiB, "%zu KiB of %d freed objects of %d KiB still "
                  "resident", resident * 4, N, SIZE >> 10);
}
