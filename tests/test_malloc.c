/* test_malloc.c: manual mode, liblfgc-malloc as the process's malloc.
 *
 * This program is linked with liblfgc-malloc: every malloc in it,
 * Criterion's included, is lfgc's.  Bad pointers are tried in forked
 * children whose stderr is read back.
 */
#include "test_util.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "lfgc_malloc.h"

static size_t rss_bytes(void);

/* Each function: every size class, content kept, the low-fat API agrees. */
static void check_object(void *p, size_t n)
{
    cr_assert(p, "malloc(%zu) failed", n);
    cr_assert(lowfat_is_heap_ptr(p), "malloc(%zu) = %p is not a low-fat heap pointer", n, p);
    cr_assert_eq((uintptr_t)p % 16, 0, "malloc(%zu) = %p not 16-aligned", n, p);
    cr_assert_eq(lowfat_base(p), p);
    cr_assert_geq(malloc_usable_size(p), n);
    cr_assert_eq(malloc_usable_size(p), lowfat_usable_size(p));
    cr_assert_eq(malloc_usable_size(p), lowfat_size(p));
    if (n) {
        char *q = (char *)p + n - 1;
        cr_assert_eq(lowfat_base(q), p);
        cr_assert_eq(lowfat_offset(q), n - 1);
        cr_assert_eq(lowfat_usable_size(q), lowfat_size(p) - (n - 1));
    }
}

Test(malloc, sizes_and_lowfat_api)
{
    static const size_t sizes[] = { 0, 1, 15, 16, 17, 100, 512, 513, 4096, 12288, 12289,
                                    16384, 65536, 65537, 1 << 20, (1 << 20) + 1 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *p = malloc(n);
        check_object(p, n);
        memset(p, (int)(i + 1), n);
        for (size_t k = 0; k < n; k++)
            cr_assert_eq(p[k], (unsigned char)(i + 1));
        free(p);
    }
    /* The smallest class fits 16 bytes: malloc adds no byte to requests. */
    void *p = malloc(16);
    cr_assert_eq(lowfat_size(p), 16);
    free(p);
    free(NULL);
}

Test(malloc, calloc_zeroes_reused_memory)
{
    /* Dirty the slots and large spans first, then calloc them back. */
    static const size_t sizes[] = { 24, 1000, 12000, 100000, 3 << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        void *v[64];
        for (int k = 0; k < 64; k++) {
            v[k] = malloc(n);
            memset(v[k], 0xa5, n);
        }
        for (int k = 0; k < 64; k++)
            free(v[k]);
        for (int k = 0; k < 64; k++) {
            unsigned char *q = calloc(1, n);
            check_object(q, n);
            for (size_t b = 0; b < n; b++)
                cr_assert_eq(q[b], 0, "calloc(1, %zu) byte %zu is %#x", n, b, q[b]);
            v[k] = q;
        }
        for (int k = 0; k < 64; k++)
            free(v[k]);
    }
}

Test(malloc, realloc_keeps_content)
{
    size_t n = 1;
    unsigned char *p = realloc(NULL, n);
    p[0] = 0;
    /* Grow through small and large classes, then shrink. */
    while (n < (4 << 20)) {
        size_t m = n * 3 + 7;
        p = realloc(p, m);
        check_object(p, m);
        for (size_t k = 0; k < n; k++)
            cr_assert_eq(p[k], (unsigned char)k, "realloc lost byte %zu of %zu", k, n);
        for (size_t k = n; k < m; k++)
            p[k] = (unsigned char)k;
        n = m;
    }
    while (n > 10) {
        n /= 5;
        p = realloc(p, n);
        check_object(p, n);
        for (size_t k = 0; k < n; k++)
            cr_assert_eq(p[k], (unsigned char)k);
    }
    /* Shrinking much moves the object to a smaller class. */
    void *big = malloc(100000);
    void *small = realloc(big, 100);
    cr_assert_leq(malloc_usable_size(small), 128);
    errno = 0;
    cr_assert_null(realloc(small, 0));
    void *q = reallocarray(NULL, 10, 10);
    check_object(q, 100);
    free(q);
}

/* realloc within the slot moves nothing: growth up to the usable size,
 * and shrinking that keeps more than half of a small slot. */
Test(malloc, realloc_in_place_within_the_slot)
{
    for (unsigned c = 0; c < TU_NUM_SMALL_CLASSES; c++) {
        size_t s = tu_class_sizes[c];
        size_t n = (c ? tu_class_sizes[c - 1] : 0) + 1, half = s / 2 + 1;
        unsigned char *p = malloc(n);
        cr_assert_eq(malloc_usable_size(p), s);
        for (size_t k = 0; k < n; k++)
            p[k] = (unsigned char)(k * 7);
        uintptr_t was = (uintptr_t)p;
        p = realloc(p, s);
        cr_assert_eq((uintptr_t)p, was, "class %zu: growth to the usable size moved", s);
        p = realloc(p, half);
        cr_assert_eq((uintptr_t)p, was, "class %zu: shrink to over half moved", s);
        for (size_t k = 0; k < (n < half ? n : half); k++)
            cr_assert_eq(p[k], (unsigned char)(k * 7));
        free(p);
    }
}

/* A large object shrunk but still large stays where it is (no copy) and
 * gives back the pages past its new end; grown again within its slot, it
 * stays too. */
Test(malloc, realloc_shrinks_large_objects_in_place)
{
    malloc_trim(0);
    size_t big = 8 * MiB, kept = 200 * KiB;
    unsigned char *p = malloc(big);
    for (size_t k = 0; k < big; k++)
        p[k] = (unsigned char)(k % 251);
    struct mallinfo2 a = mallinfo2();
    size_t full = rss_bytes();
    uintptr_t was = (uintptr_t)p;
    unsigned char *q = realloc(p, kept);
    cr_assert_eq((uintptr_t)q, was, "shrinking a large object moved it");
    size_t shrunk = rss_bytes();
    cr_assert_lt(shrunk + big - kept - 512 * KiB, full,
                 "RSS %zu KiB with 8 MiB, %zu KiB after shrinking to 200 KiB", full >> 10,
                 shrunk >> 10);
    struct mallinfo2 b = mallinfo2();
    cr_assert_eq(b.hblkhd, a.hblkhd - big + kept, "hblkhd %zu -> %zu", a.hblkhd, b.hblkhd);
    for (size_t k = 0; k < kept; k++)
        cr_assert_eq(q[k], (unsigned char)(k % 251), "byte %zu lost", k);
    p = realloc(q, 4 * MiB);
    cr_assert_eq((uintptr_t)p, was, "growing within the slot moved it");
    for (size_t k = 0; k < kept; k++)
        cr_assert_eq(p[k], (unsigned char)(k % 251), "byte %zu lost", k);
    cr_assert_eq(p[kept + 4096], 0, "released pages kept their data");
    struct mallinfo2 c = mallinfo2();
    cr_assert_eq(c.hblkhd, a.hblkhd - big + 4 * MiB);
    free(p);
}

/* A large object shrunk by less than 128 KiB keeps the pages past its
 * new end: a buffer that shrinks and grows by turns does not fault them
 * in again each time (glibc keeps such tails too).  Before, every shrink
 * gave them back: 14 faults per round here. */
Test(malloc, realloc_keeps_short_tails)
{
    size_t big = 96 * KiB, small = 40 * KiB;
    unsigned char *p = malloc(big);
    cr_assert_not_null(p);
    memset(p, 7, big);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    uintptr_t was = (uintptr_t)p;
    for (int round = 0; round < 200; round++) {
        p = realloc(p, small);
        cr_assert_eq((uintptr_t)p, was, "shrinking a large object moved it");
        p = realloc(p, big);
        cr_assert_eq((uintptr_t)p, was, "growing it back within its slot moved it");
        cr_assert_eq(p[small - 1], 7, "round %d: content lost", round);
        memset(p + small, (unsigned char)round, big - small);
    }
    getrusage(RUSAGE_SELF, &after);
    long faults = after.ru_minflt - before.ru_minflt;
    cr_assert_lt(faults, 100, "%ld page faults in 200 rounds of shrinking 96 KiB to 40 and "
                 "back", faults);
    free(p);
    /* What calloc gets from that class is still zeroed. */
    unsigned char *z = calloc(1, big);
    for (size_t k = 0; k < big; k++)
        cr_assert_eq(z[k], 0, "calloc: byte %zu is %d", k, z[k]);
    free(z);
}

Test(malloc, alignment)
{
    for (size_t a = 1; a <= (1 << 21); a <<= 1) {
        static const size_t sizes[] = { 0, 1, 100, 5000, 70000 };
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            void *p = memalign(a, n);
            check_object(p, n);
            cr_assert_eq((uintptr_t)p % a, 0, "memalign(%zu, %zu) = %p", a, n, p);
            free(p);
            p = aligned_alloc(a, n);
            check_object(p, n);
            cr_assert_eq((uintptr_t)p % a, 0, "aligned_alloc(%zu, %zu) = %p", a, n, p);
            free(p);
            if (a >= sizeof(void *)) {
                p = NULL;
                cr_assert_eq(posix_memalign(&p, a, n), 0);
                check_object(p, n);
                cr_assert_eq((uintptr_t)p % a, 0, "posix_memalign(%zu, %zu) = %p", a, n, p);
                free(p);
            }
        }
    }
    void *p = valloc(10);
    check_object(p, 10);
    cr_assert_eq((uintptr_t)p % 4096, 0);
    free(p);
    p = pvalloc(10);
    check_object(p, 4096);
    cr_assert_eq((uintptr_t)p % 4096, 0);
    free(p);
    /* glibc's memalign rounds an odd alignment up. */
    p = memalign(48, 10);
    cr_assert_eq((uintptr_t)p % 64, 0);
    free(p);
}

/* Through volatile, so that the compiler does not refuse the calls. */
static volatile size_t v_max = SIZE_MAX, v_half = SIZE_MAX / 2, v_2_33 = (size_t)1 << 33,
                       v_2_40 = (size_t)1 << 40;

Test(malloc, impossible_requests)
{
    errno = 0;
    cr_assert_null(malloc(v_max));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(malloc(v_2_40));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(calloc(v_half, 3));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(calloc(v_2_33, v_2_33));
    cr_assert_eq(errno, ENOMEM);
    /* Called through pointers: GCC takes p for freed after the calls. */
    void *(*volatile reallocarray_f)(void *, size_t, size_t) = reallocarray;
    void *(*volatile realloc_f)(void *, size_t) = realloc;
    void *p = malloc(10);
    strcpy(p, "kept");
    errno = 0;
    cr_assert_null(reallocarray_f(p, v_half, 3));
    cr_assert_eq(errno, ENOMEM);
    cr_assert_str_eq(p, "kept");
    errno = 0;
    cr_assert_null(realloc_f(p, v_max - 10));
    cr_assert_eq(errno, ENOMEM);
    cr_assert_str_eq(p, "kept");
    free(p);
    errno = 0;
    cr_assert_null(aligned_alloc(3, 10));
    cr_assert_eq(errno, EINVAL);
    errno = 0;
    cr_assert_null(aligned_alloc(0, 10));
    cr_assert_eq(errno, EINVAL);
    void *q = (void *)1;
    cr_assert_eq(posix_memalign(&q, 4, 10), EINVAL);
    cr_assert_eq(posix_memalign(&q, 24, 10), EINVAL);
    cr_assert_eq(posix_memalign(&q, (size_t)1 << 40, 10), ENOMEM);
    cr_assert_eq(q, (void *)1, "posix_memalign changed *out on failure");
    errno = 0;
    cr_assert_null(memalign((size_t)1 << 63 | 1, 10));
    cr_assert_eq(errno, EINVAL);
    errno = 0;
    cr_assert_null(pvalloc(v_max - 100));
    cr_assert_eq(errno, ENOMEM);
}

/* ------------------------------------------------------------------ */
/* Bad pointers, in forked children                                     */

static int global_object[8];

enum bad { BAD_INTERIOR, BAD_STACK, BAD_GLOBAL, BAD_FOREIGN, BAD_DOUBLE, BAD_DOUBLE_LARGE,
           BAD_GC_OBJECT };

/* What a child writes on fd until it closes it, as a string in out (len
 * bytes at most, the NUL included); fd is closed. */
static void read_all(int fd, char *out, size_t len)
{
    size_t got = 0;
    ssize_t n;
    while (got + 1 < len && (n = read(fd, out + got, len - 1 - got)) > 0)
        got += (size_t)n;
    out[got] = 0;
    close(fd);
}

/* Free (or realloc, or ask the size of) a bad pointer in a child;
 * return its stderr and how it ended, and the pointer in *pp. */
static void run_bad(enum bad what, int call, const char *mode, char *out, size_t outlen,
                    int *status, void **pp)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    int pp_fd[2];
    cr_assert_eq(pipe(pp_fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        if (mode)
            setenv("LFGC_MALLOC_ERRORS", mode, 1);
        else
            unsetenv("LFGC_MALLOC_ERRORS");
        int local[4] = { 0 };
        char *obj = malloc(100);
        char *large = malloc(200000);
        strcpy(obj, "intact");
        void *p;
        switch (what) {
        case BAD_INTERIOR: p = obj + 16; break;
        case BAD_STACK:    p = local; break;
        case BAD_GLOBAL:   p = global_object; break;
        case BAD_FOREIGN:
            p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            break;
        case BAD_DOUBLE:   free(obj); p = obj; break;
        case BAD_DOUBLE_LARGE: free(large); p = large; break;
        default:           p = GC_malloc_uncollectable(32); break;
        }
        ssize_t w = write(pp_fd[1], &p, sizeof p);
        (void)w;
        void *r = NULL;
        size_t sz = 0;
        if (call == 0)
            free(p);
        else if (call == 1)
            r = realloc(p, 50);
        else
            sz = malloc_usable_size(p);
        /* Survived (warn, ignore): the heap is sound. */
        if (r || sz != 0)
            _exit(3);
        char *a = malloc(100), *b = malloc(100);
        if (what != BAD_DOUBLE && strcmp(obj, "intact") != 0)
            _exit(4);
        if (a == b || (what == BAD_DOUBLE && (a == b)))
            _exit(5);
        free(a);
        free(b);
        (void)local[0];
        _exit(0);
    }
    close(fd[1]);
    close(pp_fd[1]);
    read_all(fd[0], out, outlen);
    if (read(pp_fd[0], pp, sizeof *pp) != (ssize_t)sizeof *pp)
        *pp = NULL;
    close(pp_fd[0]);
    cr_assert_eq(waitpid(pid, status, 0), pid);
}

static void expect_abort(enum bad what, int call, const char *fn, const char *words)
{
    char out[1024], want[64];
    int status;
    void *p;
    run_bad(what, call, NULL, out, sizeof out, &status, &p);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
              "%s of a bad pointer (%d) did not abort (status %#x); stderr: %s", fn, what,
              status, out);
    snprintf(want, sizeof want, "lfgc-malloc: %s(%p): ", fn, p);
    cr_assert(strstr(out, want), "message lacks \"%s\": %s", want, out);
    cr_assert(strstr(out, words), "message lacks \"%s\": %s", words, out);
    cr_assert(strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);
    /* warn: the same line, and the child goes on with its heap intact. */
    run_bad(what, call, "warn", out, sizeof out, &status, &p);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "%s of a bad pointer (%d) with warn: status %#x; stderr: %s", fn, what, status,
              out);
    cr_assert(strstr(out, words) && strstr(out, "ignored"), "warn: %s", out);
    run_bad(what, call, "ignore", out, sizeof out, &status, &p);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "%s of a bad pointer (%d) with ignore: status %#x; stderr: %s", fn, what,
              status, out);
    cr_assert_str_empty(out, "ignore printed: %s", out);
}

Test(malloc_errors, interior_pointer)
{
    expect_abort(BAD_INTERIOR, 0, "free", "interior pointer");
    expect_abort(BAD_INTERIOR, 1, "realloc", "interior pointer");
    expect_abort(BAD_INTERIOR, 2, "malloc_usable_size", "interior pointer");
}

Test(malloc_errors, stack_address)
{
    expect_abort(BAD_STACK, 0, "free", "stack address");
    expect_abort(BAD_STACK, 1, "realloc", "stack address");
}

Test(malloc_errors, global_address)
{
    expect_abort(BAD_GLOBAL, 0, "free", "global");
    expect_abort(BAD_GLOBAL, 1, "realloc", "global");
}

Test(malloc_errors, foreign_pointer)
{
    expect_abort(BAD_FOREIGN, 0, "free", "not allocated by lfgc");
    expect_abort(BAD_FOREIGN, 1, "realloc", "not allocated by lfgc");
}

Test(malloc_errors, double_free)
{
    expect_abort(BAD_DOUBLE, 0, "free", "already freed");
    expect_abort(BAD_DOUBLE, 1, "realloc", "already freed");
    expect_abort(BAD_DOUBLE_LARGE, 0, "free", "already freed");
}

Test(malloc_errors, collector_object)
{
    expect_abort(BAD_GC_OBJECT, 0, "free", "collector");
}

/* ------------------------------------------------------------------ */
/* Threads                                                              */

#define XFER_SLOTS 1024
struct xfer {
    void *volatile slot[XFER_SLOTS];
    size_t rounds;
};

static uint64_t sum_of(const unsigned char *p, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s = s * 31 + p[i];
    return s;
}

/* Producer: objects tagged with their size and a checksum. */
static void *producer(void *arg)
{
    struct xfer *x = arg;
    for (size_t r = 0; r < x->rounds; r++) {
        for (size_t i = 0; i < XFER_SLOTS; i++) {
            size_t n = 16 + (r * 7 + i * 13) % 700;
            unsigned char *p = malloc(n);
            for (size_t k = 16; k < n; k++)
                p[k] = (unsigned char)(k + r);
            ((uint64_t *)p)[0] = n;
            ((uint64_t *)p)[1] = sum_of(p + 16, n - 16);
            while (__atomic_load_n(&x->slot[i], __ATOMIC_ACQUIRE))
                sched_yield();
            __atomic_store_n(&x->slot[i], p, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

static void *consumer(void *arg)
{
    struct xfer *x = arg;
    for (size_t r = 0; r < x->rounds; r++) {
        for (size_t i = 0; i < XFER_SLOTS; i++) {
            unsigned char *p;
            while (!(p = __atomic_load_n(&x->slot[i], __ATOMIC_ACQUIRE)))
                sched_yield();
            __atomic_store_n(&x->slot[i], NULL, __ATOMIC_RELEASE);
            size_t n = ((uint64_t *)p)[0];
            if (((uint64_t *)p)[1] != sum_of(p + 16, n - 16))
                return (void *)1;
            free(p);
        }
    }
    return NULL;
}

Test(malloc_threads, cross_thread_free)
{
    static struct xfer x;
    x.rounds = 200;
    struct mallinfo2 before = mallinfo2();
    pthread_t a, b;
    pthread_create(&a, NULL, producer, &x);
    pthread_create(&b, NULL, consumer, &x);
    void *ra, *rb;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    cr_assert_null(rb, "an object changed between its producer and its consumer");
    /* 200 rounds of up to 1024 live objects: the consumer's frees came back
     * to the producer, or the heap would hold all 200 * 1024. */
    struct mallinfo2 after = mallinfo2();
    cr_assert_lt(after.arena, before.arena + 16 * MiB,
                 "heap grew from %zu to %zu bytes: cross-thread frees not reused",
                 before.arena, after.arena);
}

/* A thread that frees in bursts of a few batches, then allocates as many
 * again, keeps its slots: handing them to the remote stack would only
 * have its next refills take them back (walking them twice).  A thread
 * that frees far more than it allocates still hands the surplus over.
 * Which slots left the thread shows in what another thread's allocations
 * get. */
enum { BF_SIZE = 64, BF_BURST = 160, BF_WIDE = 12 * 64, BF_MANY = 8192 };   /* batch: 64 slots */
static uintptr_t bf_got[BF_MANY];
static size_t bf_want;

/* Allocates bf_want objects, notes where, frees them: its cache goes back
 * to the global lists when it exits. */
static void *bf_take(void *arg)
{
    (void)arg;
    void **p = malloc(bf_want * sizeof *p);
    for (size_t i = 0; i < bf_want; i++) {
        p[i] = malloc(BF_SIZE);
        bf_got[i] = (uintptr_t)p[i];
    }
    for (size_t i = 0; i < bf_want; i++)
        free(p[i]);
    free(p);
    return NULL;
}

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* Another thread allocates n objects: how many were among the m of set? */
static size_t taken_by_another_thread(uintptr_t *set, size_t m, size_t n)
{
    bf_want = n;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, bf_take, NULL), 0);
    pthread_join(t, NULL);
    qsort(set, m, sizeof *set, ptr_cmp);
    size_t hits = 0;
    for (size_t i = 0; i < n; i++)
        hits += bsearch(&bf_got[i], set, m, sizeof *set, ptr_cmp) != NULL;
    return hits;
}

/* rounds bursts of `burst` mallocs, each freed at once: none may be
 * allocated by another thread just after. */
static void bursts_stay(void **v, uintptr_t *gone, int rounds, int burst)
{
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < burst; i++)
            v[i] = malloc(BF_SIZE);
        for (int i = 0; i < burst; i++) {
            gone[i] = (uintptr_t)v[i];
            free(v[i]);
        }
        size_t hits = taken_by_another_thread(gone, (size_t)burst, (size_t)burst);
        cr_assert_eq(hits, 0, "round %d: %zu of a burst of %d frees left the thread", round,
                     hits, burst);
    }
}

Test(malloc_threads, burst_frees_stay_with_the_thread)
{
    static void *v[BF_MANY];
    static uintptr_t gone[BF_MANY];     /* freed: kept as numbers */
    bursts_stay(v, gone, 20, BF_BURST);
    /* malloc's lists have room for 16 batches: a thread that frees about
     * as much as it allocates, in random order, keeps what it frees
     * rather than have other threads allocate in its chunks (larson).
     * Twelve batches stay. */
    bursts_stay(v, gone, 5, BF_WIDE);
    for (int i = 0; i < BF_MANY; i++)
        v[i] = malloc(BF_SIZE);
    for (int i = 0; i < BF_MANY; i++) {
        gone[i] = (uintptr_t)v[i];
        free(v[i]);
    }
    /* malloc's lists keep up to 16 batches (TRIM_MANUAL): the rest of
     * the surplus goes. */
    size_t want = BF_MANY - 17 * 64;
    size_t hits = taken_by_another_thread(gone, BF_MANY, want);
    cr_assert_geq(hits, want - 64, "another thread got %zu of %zu frees: the surplus stayed "
                  "with the thread", hits, BF_MANY);
}

static void *churn_and_exit(void *arg)
{
    (void)arg;
    void *v[256];
    for (int r = 0; r < 20; r++) {
        for (int i = 0; i < 256; i++)
            v[i] = malloc(32 + (size_t)(i % 8) * 100);
        for (int i = 0; i < 256; i++)
            free(v[i]);
    }
    return NULL;
}

Test(malloc_threads, exiting_threads_return_caches)
{
    struct mallinfo2 before = mallinfo2();
    for (int t = 0; t < 200; t++) {
        pthread_t th;
        pthread_create(&th, NULL, churn_and_exit, NULL);
        pthread_join(th, NULL);
    }
    /* Each thread leaves its free slots to the next: the heap does not
     * grow by a thread's worth per thread. */
    struct mallinfo2 after = mallinfo2();
    cr_assert_lt(after.arena, before.arena + 8 * MiB, "heap grew from %zu to %zu bytes",
                 before.arena, after.arena);
}

static volatile int stop_workers;

static void *fork_worker(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop_workers, __ATOMIC_RELAXED)) {
        void *v[64];
        for (int i = 0; i < 64; i++)
            v[i] = malloc(16 + (size_t)i * 40);
        for (int i = 0; i < 64; i++)
            free(v[i]);
        free(malloc(100000));
    }
    return NULL;
}

Test(malloc_threads, fork_with_threads, .timeout = 60)
{
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, fork_worker, NULL);
    for (int k = 0; k < 100; k++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            /* Only this thread exists here: its allocator must work. */
            alarm(10);
            for (int i = 0; i < 1000; i++)
                free(malloc((size_t)i * 8));
            free(malloc(1 << 20));
            _exit(0);
        }
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child %d after fork: status %#x (deadlock: SIGALRM)", k, status);
    }
    stop_workers = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
}

/* Run tests/HELPER [ARG] in a fresh process with liblfgc-malloc preloaded
 * (and, if as_limit, that address-space limit); what it writes on
 * descriptor `fd` (1 or 2) goes to out.  Returns its wait status. */
static int run_preloaded(const char *helper, const char *arg, int fd, rlim_t as_limit,
                         char *out, size_t len)
{
    const char *top = getenv("top_builddir");
    char prog[4096], lib[4096];
    snprintf(prog, sizeof prog, "%s/tests/%s", top ? top : ".", helper);
    snprintf(lib, sizeof lib, "%s/.libs/liblfgc-malloc.so", top ? top : ".");
    cr_assert_eq(access(lib, R_OK), 0, "%s not built", lib);
    int pipe_fd[2];
    cr_assert_eq(pipe(pipe_fd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(pipe_fd[1], fd);
        close(pipe_fd[0]);
        close(pipe_fd[1]);
        if (as_limit) {
            struct rlimit rl = {as_limit, as_limit};
            setrlimit(RLIMIT_AS, &rl);
        }
        setenv("LD_PRELOAD", lib, 1);
        execl(prog, prog, arg, (char *)NULL);
        _exit(127);
    }
    close(pipe_fd[1]);
    read_all(pipe_fd[0], out, len);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* Under an address-space limit lfgc cannot reserve its regions (all of
 * them, or those after the first few): it says so, and liblfgc-malloc,
 * which can then neither allocate nor free (free's fast path reads a map
 * the failed layout never made), stops the process at load with a
 * message of its own.  tests/malloc_once died of SIGFPE or SIGSEGV at its
 * first malloc; under UBSan the runtime's own start-up freed memory the
 * loader had allocated, and faulted in free. */
Test(malloc_errors, address_space_limit_fails_allocations, .timeout = 30)
{
    /* 4 GiB: no region; 1.77 TiB: the first regions but not all, in the
     * default layout (1.88 TiB of regions).  Where the regions take less
     * (--with-region-shift), the metadata's reservations (8 GiB of maps)
     * would fail before the regions do: that limit is left out. */
    const rlim_t limits[] = {(rlim_t)4 << 30, (rlim_t)1900000000 << 10};
    size_t nlimits = LOWFAT_HEAP_END - LOWFAT_HEAP_START > ((uint64_t)1900000000 << 10) ? 2 : 1;
    for (size_t i = 0; i < nlimits; i++) {
        char err[4096];
        int status = run_preloaded("malloc_once", NULL, 2, limits[i], err, sizeof err);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
                  "limit %llu KiB: status %#x, not lfgc-malloc's abort\n%s",
                  (unsigned long long)(limits[i] >> 10), status, err);
        cr_assert_not_null(strstr(err, "lfgc: cannot reserve region"),
                           "limit %llu KiB: no message on stderr:\n%s",
                           (unsigned long long)(limits[i] >> 10), err);
        cr_assert_not_null(strstr(err, "lfgc-malloc: lfgc has no heap in this process"),
                           "limit %llu KiB: liblfgc-malloc did not stop the process:\n%s",
                           (unsigned long long)(limits[i] >> 10), err);
    }
}

/* A process that only mallocs finds no descriptor it did not open: the
 * collector's write tracking (a userfaultfd) waits for collection to turn
 * on.  (Python's test_subprocess lists a child's descriptors and failed
 * on the one lfgc had opened at the first malloc.) */
Test(malloc_mode, no_descriptor_of_its_own, .timeout = 30)
{
    char out[8192];
    int status = run_preloaded("malloc_once", "fds", 1, 0, out, sizeof out);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "malloc_once fds: status %#x", status);
    cr_assert_null(strstr(out, "anon_inode:"), "descriptors of a malloc-only process:\n%s", out);
    cr_assert_null(strstr(out, "/proc/"), "descriptors of a malloc-only process:\n%s", out);
}

/* Run tests/fork_cases CASE preloaded; its wait status, and whether it
 * printed "ok". */
static int fork_case(const char *name, bool *said_ok)
{
    char out[64];
    int status = run_preloaded("fork_cases", name, 1, 0, out, sizeof out);
    *said_ok = strcmp(out, "ok\n") == 0;
    return status;
}

/* fork takes stdio's list lock before lfgc's, as glibc orders its own
 * malloc locks: threads forking while others reallocate under a stream's
 * lock (getline) and flush every stream (fflush(NULL)) deadlocked. */
Test(malloc_threads, fork_while_stdio_reallocates, .timeout = 60)
{
    bool ok;
    int status = fork_case("stdio", &ok);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok,
              "fork_cases stdio: status %#x (SIGALRM %d: deadlock)", status, SIGALRM);
}

/* In a process with one thread, fork takes no lock (as glibc's fork):
 * a signal handler that forks may have interrupted this very thread
 * inside malloc or free, holding lfgc's lock. */
Test(malloc_signals, fork_in_a_handler_that_interrupted_malloc, .timeout = 60)
{
    bool ok;
    int status = fork_case("handler", &ok);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok,
              "fork_cases handler: status %#x (SIGALRM %d: deadlock)", status, SIGALRM);
}

/* ------------------------------------------------------------------ */
/* Signal handlers                                                      */

/* malloc and free in a signal handler, as far as glibc allows in
 * practice: the code the signal interrupts is not inside malloc or free
 * (here, arithmetic), while other threads allocate and free. */
#define SIG_SLOTS 64
static unsigned char *volatile sig_obj[SIG_SLOTS];
static volatile size_t sig_size[SIG_SLOTS];
static volatile unsigned sig_calls, sig_bad;

static void sig_alloc(int sig)
{
    (void)sig;
    int saved = errno;
    unsigned n = sig_calls, k = n % SIG_SLOTS;
    unsigned char *old = sig_obj[k];
    if (old) {
        if (old[0] != (unsigned char)k || old[sig_size[k] - 1] != (unsigned char)~k)
            sig_bad++;
        free(old);
    }
    size_t size = (size_t)16 << (n * 7 % 15);     /* 16 B .. 256 KiB */
    unsigned char *p = malloc(size);
    if (!p) {
        sig_bad++;
    } else {
        p[0] = (unsigned char)k;
        p[size - 1] = (unsigned char)~k;
    }
    sig_size[k] = size;
    sig_obj[k] = p;
    sig_calls = n + 1;
    errno = saved;
}

static void *sig_neighbour(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop_workers, __ATOMIC_RELAXED)) {
        size_t n = 16 + (size_t)(rand() % 3000);
        unsigned char *p = malloc(n);
        memset(p, 0x5a, n);
        if (p[n - 1] != 0x5a)
            __atomic_add_fetch(&sig_bad, 1, __ATOMIC_RELAXED);
        free(p);
    }
    return NULL;
}

/* A thread whose first malloc is in a signal handler: its cache is made
 * there. */
static volatile int sig_spinner_go;
static void *sig_spinner(void *arg)
{
    (void)arg;
    volatile uint64_t x = 1;
    while (!sig_spinner_go)
        x = x * 6364136223846793005ull + 1;
    return NULL;
}

Test(malloc_signals, handler_allocates_while_the_thread_is_outside_malloc, .timeout = 60)
{
    struct sigaction sa = {.sa_handler = sig_alloc, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
    cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
    /* The neighbour never takes SIGALRM: only this thread does. */
    sigset_t alrm, old;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, &old);
    stop_workers = 0;
    pthread_t nb, sp;
    cr_assert_eq(pthread_create(&nb, NULL, sig_neighbour, NULL), 0);
    cr_assert_eq(pthread_create(&sp, NULL, sig_spinner, NULL), 0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    /* The spinner allocates only in handlers. */
    for (int i = 0; i < 200; i++) {
        unsigned before = sig_calls;
        pthread_kill(sp, SIGUSR2);
        double give_up = tu_now_s() + 5;
        while (sig_calls == before && tu_now_s() < give_up)
            sched_yield();
        cr_assert_neq(sig_calls, before, "no handler ran in the spinner");
    }
    sig_spinner_go = 1;
    pthread_join(sp, NULL);

    /* This thread: arithmetic, interrupted every 50 us. */
    struct itimerval it = {.it_interval = {0, 50}, .it_value = {0, 50}};
    cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
    volatile uint64_t x = 1;
    double end = tu_now_s() + 20;
    while (sig_calls < 2200 && tu_now_s() < end)
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005ull + 1;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    __atomic_store_n(&stop_workers, 1, __ATOMIC_RELAXED);
    pthread_join(nb, NULL);
    signal(SIGALRM, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);

    cr_assert_geq(sig_calls, 700, "only %u handlers ran", sig_calls);
    cr_assert_eq(sig_bad, 0, "%u objects lost their contents or were not allocated", sig_bad);
    /* What the handlers allocated (partly in the spinner, which exited)
     * is sound here, and goes back. */
    for (unsigned k = 0; k < SIG_SLOTS; k++) {
        unsigned char *p = sig_obj[k];
        if (!p)
            continue;
        cr_assert_eq(p[0], (unsigned char)k);
        cr_assert_eq(p[sig_size[k] - 1], (unsigned char)~k);
        cr_assert_eq(lfgc_slot_state(p), LFGC_SLOT_ALLOCATED);
        void (*volatile free_f)(void *) = free;
        free_f(p);
        cr_assert_neq(lfgc_slot_state(p), LFGC_SLOT_ALLOCATED);
        sig_obj[k] = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* Memory goes back to the OS                                           */

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    cr_assert(f && fscanf(f, "%lu %lu", &size, &rss) == 2);
    fclose(f);
    return rss * (size_t)sysconf(_SC_PAGESIZE);
}

Test(malloc_rss, bulk_free_returns_memory)
{
    const size_t total = 256 * MiB;
    static const size_t sizes[] = { 48, 200, 1000, 4000, 100000 };
    size_t nobj = 0;
    for (size_t i = 0; i < 5; i++)
        nobj += total / 5 / sizes[i];
    void **v = mmap(NULL, nobj * sizeof *v, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(v, 0, nobj * sizeof *v);        /* resident before, not after */
    size_t before = rss_bytes(), k = 0;
    for (size_t i = 0; i < 5; i++)
        for (size_t n = 0; n < total / 5 / sizes[i]; n++) {
            v[k] = malloc(sizes[i]);
            memset(v[k++], 1, sizes[i]);
        }
    size_t full = rss_bytes();
    cr_assert_gt(full, before + total * 9 / 10, "working set not resident: %zu -> %zu", before,
                 full);
    for (size_t i = 0; i < k; i++)
        free(v[i]);
    size_t freed = rss_bytes();
    /* All but a few MiB (thread caches, the last frees not yet past the
     * scavenging threshold) back to the OS, without malloc_trim. */
    cr_assert_lt(freed, before + 16 * MiB,
                 "RSS %zu MiB before, %zu MiB with 256 MiB allocated, %zu MiB after freeing it",
                 before >> 20, full >> 20, freed >> 20);
    malloc_trim(0);
    size_t trimmed = rss_bytes();
    cr_assert_leq(trimmed, freed);
    munmap(v, nobj * sizeof *v);
}

/* A program that moves from one size to another: the spans of the first
 * size, all free, go back before the heap grows for the second (a span
 * goes back only when all its slots are on the global lists, so the
 * thread's own list joins them).  3 MiB of each is below the remote-free
 * scavenging threshold (4 MiB), which would also give some back. */
Test(malloc_rss, a_new_size_takes_the_memory_an_old_one_freed)
{
    enum { BYTES = 3 << 20, A = 128, B = 256 };
    static void *v[BYTES / A];
    for (size_t i = 0; i < BYTES / A; i++) {
        v[i] = malloc(A);
        cr_assert_not_null(v[i]);
        memset(v[i], 0xa, A);
    }
    for (size_t i = 0; i < BYTES / A; i++)
        free(v[i]);
    size_t after_a = mallinfo2().arena;
    cr_assert_geq(after_a, BYTES, "heap of %zu KiB for 3 MiB of objects", after_a >> 10);
    for (size_t i = 0; i < BYTES / B; i++) {
        v[i] = malloc(B);
        cr_assert_not_null(v[i]);
        memset(v[i], 0xb, B);
    }
    size_t after_b = mallinfo2().arena;
    /* Each 256-byte object checked: nothing handed out twice. */
    for (size_t i = 0; i < BYTES / B; i++) {
        const unsigned char *p = v[i];
        cr_assert(p[0] == 0xb && p[B - 1] == 0xb, "object %zu overwritten", i);
        memset(v[i], (int)(i & 0xff), B);
    }
    for (size_t i = 0; i < BYTES / B; i++) {
        const unsigned char *p = v[i];
        cr_assert(p[0] == (i & 0xff) && p[B - 1] == (i & 0xff), "object %zu shared", i);
        free(v[i]);
    }
    cr_assert_lt(after_b, after_a + BYTES / 2, "heap %zu KiB after the first size, %zu KiB "
                 "after the second: the first's free spans were not given back", after_a >> 10,
                 after_b >> 10);
}

/* Spans given back to the OS take all their pages with them, those they
 * share with a neighbouring span too once that one holds nothing: a
 * 48-byte slot straddles every chunk boundary, and a page at the start of
 * every chunk stayed resident (a sixteenth of them with 64 KiB chunks,
 * an eighth with 32 KiB ones). */
Test(malloc_rss, released_spans_leave_no_page_behind)
{
    enum { N = 200000 };
    void **v = mmap(NULL, N * sizeof *v, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
    cr_assert_neq(v, MAP_FAILED);
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < N; i++) {
        v[i] = malloc(48);
        memset(v[i], 0x5a, 48);
        lo = (uintptr_t)v[i] < lo ? (uintptr_t)v[i] : lo;
        hi = (uintptr_t)v[i] + 48 > hi ? (uintptr_t)v[i] + 48 : hi;
    }
    for (int i = 0; i < N; i++)
        free(v[i]);
    munmap(v, N * sizeof *v);
    malloc_trim(0);
    lo &= ~(uintptr_t)4095;
    size_t pages = (hi - lo + 4095) / 4096, resident = 0;
    unsigned char *vec = mmap(NULL, pages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                              -1, 0);
    cr_assert_neq(vec, MAP_FAILED);
    cr_assert_eq(mincore((void *)lo, hi - lo, vec), 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < pages; i++)
        resident += vec[i] & 1;
    munmap(vec, pages);
    /* Under half of a page per chunk: the thread cache keeps the spans
     * of the slots on its lists (a few), the bug kept a page per chunk. */
    size_t page_per_chunk = pages / (TU_CHUNK / 4096);
    cr_assert_lt(resident, page_per_chunk / 2, "%zu of the %zu pages of 9 MiB of freed 48-byte "
                 "objects are resident after malloc_trim", resident, pages);
}

/* A large object freed and another allocated in its place (a growing
 * buffer, realloc) reuses the pages it had: no page faults again, and
 * calloc still gets zeroes; malloc_trim gives the pages back. */
static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static int resident_pages(const void *p, size_t n)
{
    unsigned char vec[n / 4096 + 1];
    cr_assert_eq(mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), n, vec), 0);
    int k = 0;
    for (size_t i = 0; i < n / 4096; i++)
        k += vec[i] & 1;
    return k;
}

Test(malloc_rss, freed_large_objects_keep_their_pages_for_reuse)
{
    const size_t n = 256 * KiB;
    const int rounds = 100;
    malloc_trim(0);
    char *p = malloc(n);
    memset(p, 0xff, n);
    /* The stores are seen: the compiler may not drop them before free. */
    __asm__ volatile("" : : "r"(p) : "memory");
    free(p);
    long before = minor_faults();
    for (int i = 0; i < rounds; i++) {
        char *q = malloc(n);
        cr_assert_not_null(q);
        memset(q, i + 1, n);
        __asm__ volatile("" : : "r"(q) : "memory");
        free(q);
    }
    long faults = minor_faults() - before;
    cr_assert_lt(faults, rounds, "%ld page faults for %d rounds of a %zu-byte object freed "
                 "and allocated again", faults, rounds, n);
    /* The pages kept hold old data: calloc clears them. */
    char *z = calloc(1, n);
    cr_assert_eq(z, p, "the freed object's span was not reused (%p, then %p)", (void *)p,
                 (void *)z);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(z[i], 0, "calloc returned old data at offset %zu", i);
    volatile uintptr_t where = (uintptr_t)z;    /* only its pages are looked at */
    free(z);
    cr_assert_eq(resident_pages((void *)where, n), (int)(n / 4096),
                 "the freed object's pages were not kept");
    cr_assert_eq(malloc_trim(0), 1);
    cr_assert_eq(resident_pages((void *)where, n), 0, "malloc_trim kept the freed object's pages");
}

/* A buffer larger than the retention budget, allocated, filled and freed
 * again and again (liblzma's 16 MiB match finder per stream): as glibc's
 * mmap threshold rises to the size of a chunk freed, the first free
 * raises what lfgc keeps, and from the second cycle on the buffer's pages
 * are reused.  Before, each cycle faulted all 4,096 pages in again:
 * CPython's lzma tests took 7 times glibc's system time. */
Test(malloc_rss, a_large_buffer_cycled_is_reused_from_the_second_cycle)
{
    const size_t n = 16 * MiB;
    const int rounds = 20;
    malloc_trim(0);
    long before = minor_faults();
    uintptr_t first = 0;
    for (int i = 0; i < rounds; i++) {
        unsigned char *q = malloc(n);
        cr_assert_not_null(q);
        if (i == 0)
            first = (uintptr_t)q;
        memset(q, i + 1, n);
        cr_assert_eq(q[n / 2], (unsigned char)(i + 1));
        __asm__ volatile("" : : "r"(q) : "memory");
        free(q);
    }
    long faults = minor_faults() - before;
    cr_assert_lt(faults, 3 * (long)(n / 4096), "%ld page faults for %d cycles of a %zu-MiB "
                 "buffer (%zu pages each)", faults, rounds, n >> 20, n / 4096);
    unsigned char *z = calloc(1, n);
    cr_assert_not_null(z);
    for (size_t i = 0; i < n; i += 4093)
        cr_assert_eq(z[i], 0, "calloc returned old data at offset %zu", i);
    free(z);
    cr_assert_eq(malloc_trim(0), 1, "malloc_trim gave nothing back");
    cr_assert_eq(resident_pages((void *)first, n), 0, "malloc_trim kept the buffer's pages");
}

/* calloc of a large object on pages that were never written (or were
 * given back) returns them zero without writing them.  Up to 1 MiB they
 * come faulted in writable: a program that reads its calloc'ed memory
 * before writing it would map the zero page first and fault again on the
 * write, a TLB flush on every CPU of the process each time.  Larger ones
 * stay lazy: a sparse array costs only the pages it uses. */
Test(malloc_rss, calloc_faults_in_moderate_large_objects_and_leaves_big_ones_lazy)
{
    void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(probe, MAP_FAILED);
    int populate = madvise(probe, 4096, MADV_POPULATE_WRITE);
    munmap(probe, 4096);
    if (populate != 0)
        cr_skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14): calloc stays lazy");
    malloc_trim(0);
    const size_t small = 600 * KiB, big = 6 * MiB;
    unsigned char *p = calloc(1, small);
    cr_assert_not_null(p);
    cr_assert_eq(resident_pages(p, small), (int)(small / 4096),
                 "calloc(%zu): %d of %zu pages resident", small, resident_pages(p, small),
                 small / 4096);
    for (size_t i = 0; i < small; i += 512)
        cr_assert_eq(p[i], 0, "calloc(%zu) byte %zu is %d", small, i, p[i]);
    unsigned char *q = calloc(1, big);
    cr_assert_not_null(q);
    cr_assert_lt(resident_pages(q, big), 16, "calloc(%zu) made %d pages resident", big,
                 resident_pages(q, big));
    for (size_t i = 0; i < big; i += 64 * KiB)
        cr_assert_eq(q[i], 0, "calloc(%zu) byte %zu is %d", big, i, q[i]);
    free(p);
    free(q);
}

Test(malloc_rss, mallinfo_figures)
{
    malloc_trim(0);
    struct mallinfo2 a = mallinfo2();
    void *v[1000];
    for (int i = 0; i < 1000; i++)
        v[i] = malloc(1000);
    void *big = malloc(10 * MiB);
    memset(big, 1, 10 * MiB);       /* or GCC drops the malloc and the free */
    struct mallinfo2 b = mallinfo2();
    cr_assert_geq(b.uordblks, a.uordblks + 1000 * 1000 + 10 * MiB,
                  "in use %zu -> %zu after 11 MB", a.uordblks, b.uordblks);
    cr_assert_geq(b.hblkhd, a.hblkhd + 10 * MiB);
    cr_assert_eq(b.hblks, a.hblks + 1);
    for (int i = 0; i < 1000; i++)
        free(v[i]);
    free(big);
    malloc_trim(0);
    struct mallinfo2 c = mallinfo2();
    cr_assert_lt(c.uordblks, b.uordblks - 10 * MiB);
    cr_assert_eq(c.hblks, a.hblks);
}

/* Free slots that threads keep in their caches are free in mallinfo2:
 * this thread's and another's, which waits with its cache full. */
static pthread_barrier_t mi_barrier;

static void *mi_cacher(void *arg)
{
    (void)arg;
    void *v[500];
    for (int i = 0; i < 500; i++)
        v[i] = malloc(2000);
    pthread_barrier_wait(&mi_barrier);      /* allocated */
    pthread_barrier_wait(&mi_barrier);
    for (int i = 0; i < 500; i++)
        free(v[i]);
    pthread_barrier_wait(&mi_barrier);      /* freed, cached */
    pthread_barrier_wait(&mi_barrier);
    return NULL;
}

Test(malloc_rss, mallinfo_counts_cached_slots_as_free)
{
    void *v[1000];
    for (int i = 0; i < 1000; i++)
        v[i] = malloc(1000);
    size_t slot = malloc_usable_size(v[0]);     /* 1024 */
    struct mallinfo2 a = mallinfo2();
    for (int i = 0; i < 1000; i++)
        free(v[i]);
    struct mallinfo2 b = mallinfo2();
    cr_assert_eq(a.uordblks - b.uordblks, 1000 * slot, "in use %zu -> %zu after freeing %zu",
                 a.uordblks, b.uordblks, 1000 * slot);
    cr_assert_eq(b.fordblks - a.fordblks, 1000 * slot);
    cr_assert_eq(b.ordblks - a.ordblks, 1000);
    cr_assert_eq(a.arena, b.arena);

    pthread_barrier_init(&mi_barrier, NULL, 2);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, mi_cacher, NULL), 0);
    pthread_barrier_wait(&mi_barrier);
    struct mallinfo2 c = mallinfo2();
    pthread_barrier_wait(&mi_barrier);
    pthread_barrier_wait(&mi_barrier);
    struct mallinfo2 d = mallinfo2();
    pthread_barrier_wait(&mi_barrier);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&mi_barrier);
    cr_assert_eq(c.uordblks - d.uordblks, 500 * 2048, "another thread's frees: in use %zu -> %zu",
                 c.uordblks, d.uordblks);
}

/* ------------------------------------------------------------------ */
/* No collection machinery in a malloc-only process                     */

Test(malloc_mode, no_collector_machinery)
{
    /* In a child of our own, which has only this thread. */
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 10000; i++)
            free(malloc((size_t)i));
        struct sigaction sa;
        sigaction(SIGPWR, NULL, &sa);
        if (sa.sa_handler != SIG_DFL)
            _exit(2);
        sigaction(SIGXCPU, NULL, &sa);
        if (sa.sa_handler != SIG_DFL)
            _exit(3);
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        int threads = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "Threads: %d", &threads) == 1)
                break;
        fclose(f);
        _exit(threads == 1 ? 0 : 4);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "malloc-only process: status %#x (2, 3: a signal handler, 4: a thread)", status);
}

/* A malloc-only process does not read its data segments: the collector
 * scans them (and, once, to set its blacklist up) only when collection is
 * on, and reading a page of zeroes makes it resident (a page of the
 * zero page or, on some kernels, a new one).  So untouched data stays
 * out of memory, as with glibc's malloc. */
static char untouched_data[1 << 20] __attribute__((aligned(4096), used));

Test(malloc_mode, data_segments_are_not_read)
{
    for (int i = 0; i < 1000; i++)
        free(malloc((size_t)i * 8));
    unsigned char vec[sizeof untouched_data / 4096];
    char *volatile base = untouched_data;
    cr_assert_eq(mincore(base, sizeof untouched_data, vec), 0, "mincore: %s", strerror(errno));
    size_t resident = 0;
    for (size_t i = 0; i < sizeof vec; i++)
        resident += vec[i] & 1;
    cr_assert_eq(resident, 0, "%zu of the %zu pages of an untouched static array are "
                 "resident after mallocs", resident, sizeof vec);
}

/* The section headers of the open ELF file f (malloc'ed, *count of
 * them), and the index of the section names' table. */
static Elf64_Shdr *section_headers(FILE *f, unsigned *count, unsigned *names_index)
{
    Elf64_Ehdr eh;
    cr_assert_eq(fread(&eh, sizeof eh, 1, f), 1);
    cr_assert_eq(eh.e_shentsize, sizeof(Elf64_Shdr));
    Elf64_Shdr *sh = malloc(eh.e_shnum * sizeof *sh);
    cr_assert_not_null(sh);
    cr_assert_eq(fseek(f, (long)eh.e_shoff, SEEK_SET), 0);
    cr_assert_eq(fread(sh, sizeof sh[0], eh.e_shnum, f), eh.e_shnum);
    *count = eh.e_shnum;
    *names_index = eh.e_shstrndx;
    return sh;
}

/* The section headers of the ELF file at path: sets *bss and *data to
 * the sizes of lf_unscanned_bss (0 unless NOBITS) and lf_unscanned. */
static void unscanned_sections(const char *path, uint64_t *bss, uint64_t *data)
{
    *bss = *data = 0;
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    unsigned count, names_index;
    Elf64_Shdr *sh = section_headers(f, &count, &names_index);
    char names[sh[names_index].sh_size + 1];
    cr_assert_eq(fseek(f, (long)sh[names_index].sh_offset, SEEK_SET), 0);
    cr_assert_eq(fread(names, 1, sizeof names - 1, f), sizeof names - 1);
    names[sizeof names - 1] = 0;
    fclose(f);
    for (unsigned i = 0; i < count; i++) {
        if (sh[i].sh_name >= sizeof names)
            continue;
        const char *name = names + sh[i].sh_name;
        if (strcmp(name, "lf_unscanned_bss") == 0 && sh[i].sh_type == SHT_NOBITS)
            *bss = sh[i].sh_size;
        else if (strcmp(name, "lf_unscanned") == 0)
            *data = sh[i].sh_size;
    }
    free(sh);
}

/* lfgc's own state costs a malloc-only process little memory: its large
 * zero-initialised tables are in a NOBITS section (anonymous pages, made
 * when written), not in the file-backed data, which a read fault maps
 * many pages at a time whether they are used or not (fault-around).  The
 * bound on the mapping holds for an uninstrumented library:
 * UndefinedBehaviorSanitizer adds its source locations and type
 * descriptors (about 130 KiB) to liblfgc's data; the sections are checked
 * in every build. */
Test(malloc_mode, library_state_is_not_file_backed)
{
    free(malloc(100));
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert(f);
    char line[512], path[512] = "";
    bool in_data = false;
    int mappings = 0;
    unsigned long size_kb = 0, rss_kb = 0, v;
    while (fgets(line, sizeof line, f)) {
        char perms[8];
        if (sscanf(line, "%*x-%*x %7s", perms) == 1) {
            char *lib = strstr(line, "/liblfgc.so");
            in_data = lib && strcmp(perms, "rw-p") == 0;
            mappings += in_data;
            if (in_data && !path[0] && sscanf(strchr(line, '/'), "%511s", path) != 1)
                path[0] = 0;
        } else if (in_data && sscanf(line, "Size: %lu kB", &v) == 1) {
            size_kb += v;
        } else if (in_data && sscanf(line, "Rss: %lu kB", &v) == 1) {
            rss_kb += v;
        }
    }
    fclose(f);
    cr_assert_geq(mappings, 1, "no writable mapping of liblfgc.so in /proc/self/smaps");
    uint64_t bss, data;
    unscanned_sections(path, &bss, &data);
    cr_assert_geq(bss, 64 << 10, "%s: lf_unscanned_bss is %lu bytes of NOBITS", path,
                  (unsigned long)bss);
    cr_assert_leq(data, 48 << 10, "%s: lf_unscanned holds %lu bytes of file-backed data", path,
                  (unsigned long)data);
    if (dlsym(RTLD_DEFAULT, "__ubsan_handle_type_mismatch_v1") == NULL) {
        cr_assert_leq(size_kb, 48, "liblfgc.so's file-backed writable data: %lu KiB "
                      "(%lu resident)", size_kb, rss_kb);
        cr_assert_leq(rss_kb, 48);
    }
}

/* The type of the section of the ELF file at path that holds virtual
 * address vaddr (relative to the file's load base); SHT_NULL if none. */
static uint32_t section_type_at(const char *path, uint64_t vaddr)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    unsigned count, names_index;
    Elf64_Shdr *sh = section_headers(f, &count, &names_index);
    fclose(f);
    uint32_t type = SHT_NULL;
    for (unsigned i = 0; i < count && type == SHT_NULL; i++)
        if ((sh[i].sh_flags & SHF_ALLOC) && vaddr >= sh[i].sh_addr &&
            vaddr < sh[i].sh_addr + sh[i].sh_size)
            type = sh[i].sh_type;
    free(sh);
    return type;
}

/* lowfat.h's tables have an entry for every region a user-space address
 * can be in (64 KiB for the two), of which the heap's fit in one page:
 * zero-initialised (NOBITS), only that page becomes resident, where
 * constants in the file were mapped whole by the fault-around of the
 * first read. */
Test(malloc_mode, lowfat_tables_are_not_file_backed)
{
    free(malloc(100));
    /* The library's own definitions: this program refers to the tables,
     * so it has copies of them (copy relocations), which are what its own
     * code and the library use. */
    void *lib = dlopen("liblfgc.so.0", RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(lib, "liblfgc.so.0 is not loaded: %s", dlerror());
    const char *names[] = { "lowfat_sizes", "lowfat_magics", "lowfat_heap_top" };
    for (size_t t = 0; t < sizeof names / sizeof names[0]; t++) {
        Dl_info di;
        const void *table = dlsym(lib, names[t]);
        cr_assert(table && dladdr(table, &di) && di.dli_fname, "%s not found", names[t]);
        uint64_t vaddr = (uint64_t)(uintptr_t)table - (uint64_t)(uintptr_t)di.dli_fbase;
        cr_assert_eq(section_type_at(di.dli_fname, vaddr), SHT_NOBITS,
                     "%s is file-backed data in %s", names[t], di.dli_fname);
    }
    dlclose(lib);
    cr_assert_eq(lowfat_size(&errno), SIZE_MAX);
    void *p = malloc(40);
    cr_assert_eq(lowfat_size(p), 48);
    free(p);
}

#ifdef LFGC_DEBUG
#define LF_TEST_DEBUG 1
#else
#define LF_TEST_DEBUG 0
#endif

/* Peak RSS (KiB) of tests/malloc_once, with `preload` (NULL: none), the
 * least of five runs; address randomisation is turned off where the
 * system lets us, so that the kernel maps the same neighbouring file
 * pages (fault-around) in each run.  Where it is not (a container's
 * seccomp filter may refuse the personality call), placement only adds
 * pages, and the least of five is the figure that repeats. */
static long malloc_once_peak_kb(const char *preload, bool *randomised)
{
    const char *top = getenv("top_builddir");
    char prog[4096];
    snprintf(prog, sizeof prog, "%s/tests/malloc_once", top ? top : ".");
    long least = -1;
    for (int i = 0; i < 5; i++) {
        int fd[2];
        cr_assert_eq(pipe(fd), 0);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fd[1], 1);
            personality(ADDR_NO_RANDOMIZE);
            /* The first line says whether randomisation stayed on. */
            dprintf(1, "%d\n", (personality(0xffffffff) & ADDR_NO_RANDOMIZE) == 0);
            if (preload)
                setenv("LD_PRELOAD", preload, 1);
            else
                unsetenv("LD_PRELOAD");
            execl(prog, prog, (char *)NULL);
            _exit(127);
        }
        close(fd[1]);
        char buf[64] = "";
        ssize_t n = 0, got;
        while (n < (ssize_t)sizeof buf - 1 &&
               (got = read(fd[0], buf + n, sizeof buf - 1 - (size_t)n)) > 0)
            n += got;
        close(fd[0]);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0 && n > 0,
                  "%s (LD_PRELOAD=%s) failed: status %#x", prog, preload ? preload : "", status);
        char *second = strchr(buf, '\n');
        cr_assert(second, "%s: no output", prog);
        if (buf[0] == '1')
            *randomised = true;
        long kb = atol(second + 1);
        if (least < 0 || kb < least)
            least = kb;
    }
    return least;
}

/* What lfgc adds to a process that mallocs once: its code, data and
 * tables (the malloc-mode benchmarks' small workloads are mostly this).
 * 772 KiB before its zero-initialised state left the file-backed data
 * and marker 0's stack stopped being made present at start-up; 640
 * after; 432 once the blacklist's scan waited for collection and
 * lowfat.h's tables left the file (x86_64 Debian 12); 488 -> 348 once
 * the constants stayed unread, the data segment shrank to 10 KiB and a
 * thread's record to two pages (2026-11-28).  Those figures moved by up
 * to 150 KiB with the page cache (how much of the C library the kernel
 * maps around each fault: +348 on one day was +504 on another, for the
 * same library); malloc_once now leaves the C library's and the loader's
 * files out of both figures, which measures lfgc's share alone: +232. */
Test(malloc_mode, fixed_cost_per_process)
{
    const char *top = getenv("top_builddir");
    char lib[4096];
    snprintf(lib, sizeof lib, "%s/.libs/liblfgc-malloc.so", top ? top : ".");
    cr_assert_eq(access(lib, R_OK), 0, "%s not built", lib);
    bool randomised = false;
    long glibc = malloc_once_peak_kb(NULL, &randomised);
    long lfgc = malloc_once_peak_kb(lib, &randomised);
    /* The bound is for the default build: the debugging one
     * (assertions), an instrumented one (UBSan) and other layouts (the
     * valgrind one's tables differ) have more code or tables; there only
     * a loose bound holds. */
    bool plain = !LF_TEST_DEBUG && LOWFAT_REGION_SHIFT == 35 && LOWFAT_FIRST_REGION == 512 &&
                 !dlsym(RTLD_DEFAULT, "__ubsan_handle_type_mismatch_v1");
    /* Where randomisation cannot be turned off, placement moves both
     * figures by up to 100 KiB each (measured +768..+884 here). */
    long bound = !plain ? 2048 : randomised ? 960 : 320;
    cr_log_info("malloc_once: %ld KiB with glibc's malloc, %ld with liblfgc-malloc "
                "(bound +%ld%s)", glibc, lfgc, bound, randomised ? ", addresses randomised" : "");
    cr_assert_leq(lfgc - glibc, bound, "peak RSS of a program that mallocs once: %ld KiB with "
                  "glibc's malloc, %ld with liblfgc-malloc (+%ld)", glibc, lfgc, lfgc - glibc);
}

/* The path of the liblfgc.so this process loaded, in buf. */
static void liblfgc_path(char *buf, size_t size)
{
    void *handle = dlopen("liblfgc.so.0", RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(handle, "liblfgc.so.0 is not loaded: %s", dlerror());
    Dl_info di;
    cr_assert(dladdr(dlsym(handle, "lfgc_malloc"), &di) && di.dli_fname);
    snprintf(buf, size, "%s", di.dli_fname);
    dlclose(handle);
}

/* The loadable segments (PT_LOAD program headers) of the ELF file at
 * path, at most max of them; returns how many there are. */
static size_t load_segments(const char *path, Elf64_Phdr *out, size_t max)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    Elf64_Ehdr eh;
    cr_assert_eq(fread(&eh, sizeof eh, 1, f), 1);
    size_t n = 0;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        cr_assert_eq(fseek(f, (long)(eh.e_phoff + i * sizeof ph), SEEK_SET), 0);
        cr_assert_eq(fread(&ph, sizeof ph, 1, f), 1);
        if (ph.p_type != PT_LOAD)
            continue;
        if (n < max)
            out[n] = ph;
        n++;
    }
    fclose(f);
    cr_assert_leq(n, max, "%s has %zu loadable segments", path, n);
    return n;
}

/* The value of the symbol `name` in the ELF file at path (its .symtab:
 * internal symbols too), and the virtual address of the loadable segment
 * that starts at file offset `offset`; both 0 if not found. */
static void elf_symbol_and_segment(const char *path, const char *name, uint64_t offset,
                                   uint64_t *value, uint64_t *segment_vaddr)
{
    *value = *segment_vaddr = 0;
    Elf64_Phdr seg[16];
    size_t nseg = load_segments(path, seg, 16);
    for (size_t i = 0; i < nseg; i++)
        if ((seg[i].p_offset & ~(uint64_t)4095) == offset)
            *segment_vaddr = seg[i].p_vaddr & ~(uint64_t)4095;
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    unsigned count, names_index;
    Elf64_Shdr *sh = section_headers(f, &count, &names_index);
    for (unsigned i = 0; i < count && !*value; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= count)
            continue;
        const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
        char *strings = malloc(strtab->sh_size);
        Elf64_Sym *syms = malloc(sh[i].sh_size);
        cr_assert(strings && syms);
        cr_assert_eq(fseek(f, (long)strtab->sh_offset, SEEK_SET), 0);
        cr_assert_eq(fread(strings, 1, strtab->sh_size, f), strtab->sh_size);
        cr_assert_eq(fseek(f, (long)sh[i].sh_offset, SEEK_SET), 0);
        cr_assert_eq(fread(syms, 1, sh[i].sh_size, f), sh[i].sh_size);
        for (size_t k = 0; k < sh[i].sh_size / sizeof *syms; k++)
            if (syms[k].st_name < strtab->sh_size && strcmp(strings + syms[k].st_name, name) == 0)
                *value = syms[k].st_value;
        free(strings);
        free(syms);
    }
    free(sh);
    fclose(f);
}

/* The mappings of liblfgc.so with permissions `perms` in tests/malloc_once
 * after it ran what a malloc-only program runs (malloc_once pages), and
 * their resident pages; the library's path in `path`. */
struct lib_mapping {
    unsigned long offset, lo, hi;
    size_t resident;
    unsigned long pages[64];        /* the first resident ones */
};

/* With `guard` non-NULL, the run also takes every permission from the
 * pages of liblfgc.so's code at offsets guard->from to guard->to from its
 * load address, before its constructors run (tests/code_guard.c, an
 * LD_AUDIT library): guard->hits gets the offsets of those the run
 * touched, guard->armed whether the audit library set the guard up. */
struct code_guard {
    uint64_t from, to;
    bool armed;
    size_t nhits;
    unsigned long hits[16];
};

static void read_guard_report(int fd, struct code_guard *guard)
{
    FILE *in = fdopen(fd, "r");
    cr_assert_not_null(in);
    char kind[2];
    unsigned long a;
    while (fscanf(in, "%1s %lx", kind, &a) == 2) {
        if (kind[0] == 'A')
            guard->armed = true;
        else if (kind[0] == 'G' && guard->nhits < sizeof guard->hits / sizeof guard->hits[0])
            guard->hits[guard->nhits++] = a;
        else
            cr_assert(kind[0] == 'G', "code guard: could not protect +%#lx (kind %c)", a,
                      kind[0]);
    }
    fclose(in);
}

static size_t malloc_only_mappings(const char *perms, struct lib_mapping *m, size_t max,
                                   char *path, size_t path_size, struct code_guard *guard)
{
    const char *top = getenv("top_builddir");
    char prog[4096], lib[4096];
    snprintf(prog, sizeof prog, "%s/tests/malloc_once", top ? top : ".");
    snprintf(lib, sizeof lib, "%s/.libs/liblfgc-malloc.so", top ? top : ".");
    liblfgc_path(path, path_size);

    int fd[2], gfd[2] = {-1, -1};
    char audit[4096], spec[64];
    cr_assert_eq(pipe(fd), 0);
    if (guard) {
        snprintf(audit, sizeof audit, "%s/tests/.libs/libcode_guard.so", top ? top : ".");
        cr_assert_eq(access(audit, R_OK), 0, "%s not built", audit);
        cr_assert_eq(pipe(gfd), 0);
        snprintf(spec, sizeof spec, "%lx %lx %d", (unsigned long)guard->from,
                 (unsigned long)guard->to, gfd[1]);
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        setenv("LD_PRELOAD", lib, 1);
        if (guard) {
            setenv("LD_AUDIT", audit, 1);
            setenv("LFGC_CODE_GUARD", spec, 1);
        }
        execl(prog, prog, "pages", perms, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    if (guard)
        close(gfd[1]);
    FILE *out = fdopen(fd[0], "r");
    cr_assert_not_null(out);
    size_t n = 0;
    char kind[2];
    unsigned long a, b, c;
    while (fscanf(out, "%1s", kind) == 1) {
        if (kind[0] == 'M') {
            cr_assert_eq(fscanf(out, "%lx %lx %lx", &a, &b, &c), 3);
            cr_assert_lt(n, max, "more than %zu %s mappings of liblfgc.so", max, perms);
            m[n++] = (struct lib_mapping){.offset = a, .lo = b, .hi = c};
        } else {
            cr_assert(kind[0] == 'P' && n > 0 && fscanf(out, "%lx", &a) == 1,
                      "%s pages %s: bad output", prog, perms);
            struct lib_mapping *last = &m[n - 1];
            if (last->resident < sizeof last->pages / sizeof last->pages[0])
                last->pages[last->resident] = a;
            last->resident++;
        }
    }
    fclose(out);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s pages %s: status %#x", prog,
              perms, status);
    if (guard)
        read_guard_report(gfd[0], guard);    /* every writer has exited */
    cr_assert_gt(n, 0, "%s pages %s: no such mapping of liblfgc.so", prog, perms);
    return n;
}

/* The file offset and the bounds (virtual addresses from the load
 * address, pages) of the ELF file's executable loadable segment. */
static void code_segment(const char *path, uint64_t *offset, uint64_t *lo, uint64_t *hi)
{
    *offset = *lo = *hi = 0;
    Elf64_Phdr seg[16];
    size_t nseg = load_segments(path, seg, 16);
    unsigned found = 0;
    for (size_t i = 0; i < nseg; i++) {
        if (!(seg[i].p_flags & PF_X))
            continue;
        found++;
        *offset = seg[i].p_offset & ~(uint64_t)4095;
        *lo = seg[i].p_vaddr & ~(uint64_t)4095;
        *hi = (seg[i].p_vaddr + seg[i].p_memsz + 4095) & ~(uint64_t)4095;
    }
    cr_assert_eq(found, 1, "%s: %u executable segments", path, found);
}

/* A malloc-only process runs only the start of liblfgc's code: what it
 * needs is grouped there (LF_MALLOC_TEXT), so that the pages the kernel
 * maps around its faults (fault-around, 64 KiB) stay in the group's
 * reach.  Before the grouping, malloc's code was spread over the file and
 * all of it (124 KiB) was resident; with it, 64 KiB.
 *
 * Which pages end up mapped also depends on how the file entered the page
 * cache (a freshly written file maps in large folios, up to 9 pages past
 * the window, as a fresh clone's build showed), so the test checks the
 * cause, not the residency: every page of the code past the group's last
 * one is taken away from the process (tests/code_guard.c) while
 * malloc_once runs every allocation call, a thread and a fork; none may
 * be touched. */
Test(malloc_mode, malloc_code_is_grouped)
{
    char lib_path[4096];
    liblfgc_path(lib_path, sizeof lib_path);
    uint64_t offset, lo, hi, end, segment;
    code_segment(lib_path, &offset, &lo, &hi);
    elf_symbol_and_segment(lib_path, "lf_malloc_text_end", offset, &end, &segment);
    cr_assert(end && segment == lo, "%s: no symbol lf_malloc_text_end", lib_path);
    uint64_t group_last = (end - 1) & ~(uint64_t)4095;    /* the group's last page */
    cr_assert(group_last >= lo && group_last + 4096 < hi, "the group ends at +%#lx, outside "
              "the code (+%#lx to +%#lx)", (unsigned long)end, (unsigned long)lo, (unsigned long)hi);
    struct code_guard guard = {.from = group_last + 4096, .to = hi};

    char path[4096];
    struct lib_mapping m[4];
    size_t n = malloc_only_mappings("r-xp", m, 4, path, sizeof path, &guard);
    cr_assert_str_eq(path, lib_path);
    cr_assert(guard.armed, "the code guard (LD_AUDIT) did not protect liblfgc.so's code");
    cr_assert_eq(guard.nhits, 0, "a malloc-only process ran or read %zu pages of liblfgc.so's "
                 "code past the malloc-mode group, which ends at +%#lx from its load address; the "
                 "first at +%#lx",
                 guard.nhits, (unsigned long)end, guard.nhits ? guard.hits[0] : 0ul);
    /* Untouched, the guarded pages are one mapping without permissions,
     * and the group's part of the code is the only executable one. */
    cr_assert_eq(n, 1, "%zu executable mappings of liblfgc.so", n);
    cr_assert_eq(m[0].hi - m[0].lo, guard.from - lo, "the executable mapping is not the code "
                 "up to the guard");
    cr_assert_gt(m[0].resident, 0);
    cr_log_info("liblfgc.so's code: %zu of the group's %lu pages resident, group ends at +%#lx",
                m[0].resident, (m[0].hi - m[0].lo) / 4096, (unsigned long)(end - lo));
}

/* The file offset (page-aligned) of the ELF file's read-only loadable
 * segment that does not start the file: the constants and unwind tables
 * (-z separate-code); 0 if none. */
static uint64_t constants_segment_offset(const char *path)
{
    Elf64_Phdr seg[16];
    size_t nseg = load_segments(path, seg, 16);
    uint64_t found = 0;
    for (size_t i = 0; i < nseg; i++)
        if (seg[i].p_flags == PF_R && seg[i].p_offset != 0)
            found = seg[i].p_offset & ~(uint64_t)4095;
    return found;
}

/* Nor does it read liblfgc's constants: those its code needs are laid
 * out with that code (LF_MALLOC_RODATA), so the segment of .rodata and
 * the unwind tables stays out of memory.  Before, the first read of an
 * environment variable's name mapped all of it by fault-around (44 of
 * its 44 KiB resident). */
Test(malloc_mode, constants_stay_out_of_memory)
{
    char path[4096];
    struct lib_mapping m[8];
    size_t n = malloc_only_mappings("r--p", m, 8, path, sizeof path, NULL);
    uint64_t offset = constants_segment_offset(path);
    cr_assert_neq(offset, 0, "%s has no read-only segment of constants", path);
    size_t checked = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].offset != offset)
            continue;
        checked++;
        cr_log_info("liblfgc.so's constants: %zu of %lu pages resident", m[i].resident,
                    (m[i].hi - m[i].lo) / 4096);
        cr_assert_eq(m[i].resident, 0, "%zu of the %lu pages of liblfgc.so's constants (file "
                     "offset %#lx) are resident in a malloc-only process, the first at +%#lx",
                     m[i].resident, (m[i].hi - m[i].lo) / 4096, m[i].offset,
                     m[i].pages[0] - m[i].lo);
    }
    cr_assert_eq(checked, 1, "%zu mappings of %s at file offset %#lx", checked, path,
                 (unsigned long)offset);
}

/* The file-backed part of liblfgc.so's writable segment is mapped whole
 * by the first read of any variable in it (fault-around: it is far below
 * 64 KiB), in every process, malloc-only or not.  Zero-initialised state
 * is NOBITS (LF_UNSCANNED); the initialised data are a few words, the
 * relocated pointers and the part of an empty cache that free's fast path
 * reads.  Before: 42 KiB, with the whole empty cache, the kind table and
 * the zero-initialised variables in the file. */
Test(malloc_mode, little_data_is_file_backed)
{
    char path[4096];
    liblfgc_path(path, sizeof path);
    Elf64_Phdr seg[16];
    size_t nseg = load_segments(path, seg, 16);
    uint64_t file_bytes = 0;
    unsigned writable = 0;
    for (size_t i = 0; i < nseg; i++) {
        if (seg[i].p_flags & PF_W) {
            file_bytes += seg[i].p_filesz;
            writable++;
        }
    }
    cr_assert_eq(writable, 1, "%u writable segments in %s", writable, path);
    cr_log_info("liblfgc.so's writable segment: %llu bytes in the file",
                (unsigned long long)file_bytes);
    /* The instrumented build (UBSan) adds its own initialised data, the
     * descriptions of every checked type and place (157 KiB here). */
    uint64_t bound = dlsym(RTLD_DEFAULT, "__ubsan_handle_type_mismatch_v1") ? 256 * 1024 : 16 * 1024;
    cr_assert_leq(file_bytes, bound, "liblfgc.so's writable segment has %llu bytes in the file",
                  (unsigned long long)file_bytes);
}

/* With the collector on in the same process: one heap; malloc's objects
 * are neither collected nor scanned. */
static uintptr_t hidden_malloced[64];

static TU_NOINLINE void make_malloced(void)
{
    for (int i = 0; i < 64; i++) {
        unsigned char *p = malloc(100 + (size_t)i * 50);
        memset(p, i, 100 + (size_t)i * 50);
        hidden_malloced[i] = GC_HIDE_POINTER(p);
    }
}

static TU_NOINLINE uintptr_t make_gc_referenced_only_from_malloc(void **holder)
{
    void *g = GC_malloc(64);
    *holder = g;
    return GC_HIDE_POINTER(g);
}

Test(malloc_mode, with_collector, .timeout = 30)
{
    GC_INIT();
    make_malloced();
    void **holder = malloc(sizeof(void *));
    uintptr_t hg = make_gc_referenced_only_from_malloc(holder);
    GC_disable();
    GC_enable();
    for (int r = 0; r < 3; r++)
        tu_collect();
    for (int i = 0; i < 64; i++) {
        unsigned char *p = GC_REVEAL_POINTER(hidden_malloced[i]);
        cr_assert(lfgc_is_live(p), "malloc'ed object %d collected", i);
        for (size_t k = 0; k < 100 + (size_t)i * 50; k++)
            cr_assert_eq(p[k], i, "malloc'ed object %d changed", i);
        free(p);
    }
    /* Not scanned: the collector object held only by malloc'ed memory went. */
    cr_assert_not(lfgc_is_live(GC_REVEAL_POINTER(hg)),
                  "malloc'ed memory was scanned: its referent survived");
    free(holder);
}

/* A thread that only mallocs is neither stopped nor scanned, and is
 * registered without its stack: the memory map is read when it first
 * calls the collector (a server's short-lived workers may never do).
 * From then on its stack is known: the base it is told is its own, what
 * only its stack holds survives a collection, and what it dropped goes. */
static TU_NOINLINE void make_kept_and_dropped(void *volatile *kept, GC_hidden_pointer *hk,
                                              GC_hidden_pointer *hd)
{
    unsigned char *k = GC_malloc(4096), *d = GC_malloc(4096);
    memset(k, 0x3c, 4096);
    memset(d, 0x3c, 4096);
    *kept = k;
    *hk = tu_hide(k);
    *hd = tu_hide(d);
}

struct lazy_stack {
    uintptr_t base, lo, hi, here;
    int kept_live, kept_intact, dropped_live;
};

static void *malloc_only_then_collector(void *arg)
{
    struct lazy_stack *r = arg;
    free(malloc(24));                   /* known to malloc only */
    struct GC_stack_base sb;
    GC_get_my_stackbottom(&sb);
    r->base = (uintptr_t)sb.mem_base;
    r->here = (uintptr_t)__builtin_frame_address(0);
    pthread_attr_t a;
    void *lo;
    size_t size;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &lo, &size);
    pthread_attr_destroy(&a);
    r->lo = (uintptr_t)lo;
    r->hi = (uintptr_t)lo + size;
    void *volatile kept = NULL;
    GC_hidden_pointer hk, hd;
    make_kept_and_dropped(&kept, &hk, &hd);     /* now the collector's too */
    tu_clear_stack();
    tu_collect();
    tu_collect();
    r->kept_live = tu_live(hk);
    r->kept_intact = 1;
    for (size_t i = 0; i < 4096; i++)
        if (((unsigned char *)kept)[i] != 0x3c)
            r->kept_intact = 0;
    r->dropped_live = tu_live(hd);
    kept = NULL;
    return NULL;
}

Test(malloc_threads, a_malloc_only_thread_finds_its_stack_when_it_calls_the_collector,
     .timeout = 30)
{
    GC_INIT();
    static struct lazy_stack r;
    pthread_t t;
    cr_assert_eq(tu_real_pthread_create(&t, NULL, malloc_only_then_collector, &r), 0);
    tu_real_pthread_join(t, NULL);
    cr_assert(r.base > r.here && r.base <= r.hi && r.here >= r.lo,
              "stack base %#lx: not that of the thread's stack [%#lx, %#lx) (frame %#lx)",
              (unsigned long)r.base, (unsigned long)r.lo, (unsigned long)r.hi,
              (unsigned long)r.here);
    cr_assert(r.kept_live && r.kept_intact,
              "an object held only by the thread's stack was collected or changed");
    cr_assert_not(r.dropped_live, "the object the thread dropped was not collected");
}

/* In malloc mode the collector's own allocations come from this malloc
 * too, some of them while it holds the heap lock: the first collection
 * starts the marker's helper threads, and pthread_create allocates
 * (glibc's thread descriptor and TLS vectors).  A collecting thread whose
 * list of such a class is empty must not wait for the lock it holds: the
 * first collection here runs on a thread that has allocated nothing of
 * those sizes. */
static void *first_collection(void *arg)
{
    GC_hidden_pointer *h = arg;
    free(malloc(24));
    unsigned char *p = GC_malloc(64);
    memset(p, 0x7e, 64);
    *h = tu_hide(p);
    p = NULL;
    tu_collect();
    return NULL;
}

Test(malloc_mode, first_collection_on_a_thread_with_empty_lists, .timeout = 30)
{
    GC_set_markers_count(2);            /* one helper to start, whatever the machine */
    GC_INIT();
    cr_assert_eq(GC_get_parallel(), 1, "no helper thread to start: the test would show nothing");
    static GC_hidden_pointer h;
    pthread_t t;
    cr_assert_eq(tu_real_pthread_create(&t, NULL, first_collection, &h), 0);
    tu_real_pthread_join(t, NULL);
    /* Reached: the collection finished.  Its object, dropped, went. */
    tu_clear_stack();
    tu_collect();
    cr_assert_not(tu_live(h), "the collection's garbage survived two collections");
}

/* The free fast path's slot-base test (the reciprocal's low product)
 * must reject every interior pointer of every small class: with errors
 * ignored, no interior pointer may reach a free list. */
Test(malloc_errors, fast_path_rejects_interior_pointers_of_every_class)
{
    setenv("LFGC_MALLOC_ERRORS", "ignore", 1);
    void (*volatile free_f)(void *) = free;     /* GCC refuses free(p + k) */
    for (unsigned c = 0; c < TU_NUM_SMALL_CLASSES; c++) {
        size_t s = tu_class_sizes[c];
        char *p = malloc(s);
        cr_assert_eq(lowfat_size(p), s);
        size_t offs[] = { 1, 8, 16, s / 2, s - 16, s - 1 };
        for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
            if (offs[i] == 0 || offs[i] >= s)
                continue;
            free_f(p + offs[i]);
        }
        cr_assert_eq(lfgc_slot_state(p), LFGC_SLOT_ALLOCATED, "class %zu: object freed", s);
        for (int k = 0; k < 600; k++) {
            char *q = malloc(s);
            cr_assert_eq(lowfat_base(q), q, "class %zu: interior pointer %p handed out", s,
                         (void *)q);
        }
        free(p);
    }
    unsetenv("LFGC_MALLOC_ERRORS");
}

/* The free fast path learns a chunk's kind and class from the free map:
 * a span of malloc's that went back to the OS and was taken again by the
 * collector must no longer pass for malloc's. */
static uint64_t malloc_chunks[LOWFAT_REGION_SIZE / TU_CHUNK / 64];

Test(malloc_errors, fast_path_follows_released_spans)
{
    enum { N = 20000 };
    void (*volatile free_f)(void *) = free;
    void **v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) {
        v[i] = malloc(48);
        uint64_t chunk = ((uintptr_t)v[i] % LOWFAT_REGION_SIZE) / TU_CHUNK;
        malloc_chunks[chunk / 64] |= 1ull << (chunk % 64);
    }
    for (int i = 0; i < N; i++)
        free(v[i]);
    free(v);
    cr_assert(malloc_trim(0), "no span of malloc's went back to the OS");
    void *hit = NULL;
    for (int i = 0; i < 4 * N && !hit; i++) {
        void *g = GC_malloc_uncollectable(40);
        cr_assert_eq(lowfat_size(g), 48);
        uint64_t chunk = ((uintptr_t)g % LOWFAT_REGION_SIZE) / TU_CHUNK;
        if (malloc_chunks[chunk / 64] >> (chunk % 64) & 1)
            hit = g;
    }
    cr_assert(hit, "the collector took none of malloc's released spans");
    setenv("LFGC_MALLOC_ERRORS", "ignore", 1);
    free_f(hit);
    unsetenv("LFGC_MALLOC_ERRORS");
    cr_assert_eq(lfgc_slot_state(hit), LFGC_SLOT_ALLOCATED, "the collector's object was freed");
    for (int k = 0; k < 2000; k++)
        cr_assert_neq(malloc(48), hit, "malloc handed out the collector's object");
}

/* dlopen and dlclose allocate and free with malloc inside the dynamic
 * linker (link maps, search paths, dlerror strings), while another thread
 * allocates: all of it on lfgc's malloc, and nothing kept after dlclose. */
static void *dl_churn(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop_workers, __ATOMIC_RELAXED))
        free(malloc(200));
    return NULL;
}

Test(malloc_threads, dlopen_dlclose)
{
    char exe[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = 0;
    *strrchr(exe, '/') = 0;
    snprintf(path, sizeof path, "%s/.libs/libroot_helper.so", exe);
    cr_assert_eq(access(path, R_OK), 0, "%s not built (make check builds it)", path);
    stop_workers = 0;
    pthread_t th;
    pthread_create(&th, NULL, dl_churn, NULL);
    size_t before = 0;
    for (int i = 0; i < 300; i++) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        cr_assert_not_null(h, "dlopen: %s", dlerror());
        void (*set)(int, void *) = (void (*)(int, void *))dlsym(h, "root_helper_set");
        cr_assert_not_null(set);
        cr_assert_null(dlsym(h, "no_such_symbol"));
        cr_assert_not_null(dlerror());
        cr_assert_eq(dlclose(h), 0);
        if (i == 50)
            before = mallinfo2().uordblks;
    }
    stop_workers = 1;
    pthread_join(th, NULL);
    size_t after = mallinfo2().uordblks;
    cr_assert_lt(after, before + 1 * MiB, "in use grew from %zu to %zu over 250 dlopen/dlclose",
                 before, after);
}
