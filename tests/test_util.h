/* test_util.h: helpers shared by lfgc's Criterion test programs.
 *
 * The collector is conservative: a stale copy of a pointer in a dead stack
 * slot or a callee-saved register keeps its object alive.  Tests that check
 * reclamation therefore
 *   - allocate in separate noinline functions,
 *   - keep their own references hidden (GC_HIDE_POINTER), revealing them only
 *     inside noinline helpers,
 *   - overwrite a large part of the stack below the caller before collecting
 *     (tu_collect()),
 *   - keep collections off (GC_disable) while they allocate objects that
 *     they hold only in hidden form, until the objects are rooted: any
 *     allocation may collect, and a hidden object is garbage.
 */
#ifndef LFGC_TEST_UTIL_H
#define LFGC_TEST_UTIL_H

/* Include this header before any system header: it needs _GNU_SOURCE.
 * Define GC_THREADS (if wanted) before it: it includes gc.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>

/* The real pthread functions, captured before gc.h redirects them (under
 * GC_THREADS): tests of unregistered threads need threads the collector
 * is not told about. */
static __attribute__((unused)) int tu_real_pthread_create(pthread_t *t,
                                                          const pthread_attr_t *attr,
                                                          void *(*fn)(void *), void *arg)
{
    return pthread_create(t, attr, fn, arg);
}

static __attribute__((unused)) int tu_real_pthread_join(pthread_t t, void **ret)
{
    return pthread_join(t, ret);
}

static __attribute__((unused)) int tu_real_pthread_sigmask(int how, const sigset_t *set,
                                                           sigset_t *old)
{
    return pthread_sigmask(how, set, old);
}

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gc.h"
#include "lfgc.h"
#include "lowfat.h"

#define TU_NOINLINE __attribute__((noinline, unused))
#define TU_UNUSED   __attribute__((unused))

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* The size classes of the paper's configuration (Appendix A). */
#define TU_NUM_CLASSES 61
static const uint64_t tu_class_sizes[TU_NUM_CLASSES] TU_UNUSED = {
    16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256, 272, 320,
    384, 448, 512, 528, 640, 768, 896, 1024, 1040, 1280, 1536, 1792, 2048,
    2064, 2560, 3072, 3584, 4096, 4112, 5120, 6144, 7168, 8192, 8208, 10240,
    12288,
    1ull << 14, 1ull << 15, 1ull << 16, 1ull << 17, 1ull << 18, 1ull << 19,
    1ull << 20, 1ull << 21, 1ull << 22, 1ull << 23, 1ull << 24, 1ull << 25,
    1ull << 26, 1ull << 27, 1ull << 28, 1ull << 29, 1ull << 30, 1ull << 31,
    1ull << 32, 1ull << 33,
};

/* The heap's chunk, the unit of its spans (gc/internal.h's CHUNK_SIZE:
 * tests/test_static checks that the two agree), and the number of classes
 * below it, whose spans hold several objects and whose slots go through
 * the thread caches (NUM_SMALL_CLASSES). */
#define TU_CHUNK ((uint64_t)32 << 10)
#define TU_NUM_SMALL_CLASSES 42
/* Where class c's chunks start, from its region's base: c MiB in for the
 * small classes (gc/internal.h's SMALL_CLASS_OFFSET, checked as above). */
#define TU_SMALL_CLASS_OFFSET(c) ((c) < TU_NUM_SMALL_CLASSES ? (uint64_t)(c) << 20 : 0)

/* Does class c exist in this build's layout (one object must fit in a
 * region: the valgrind layout has 1 GiB regions)? */
static inline int tu_class_exists(unsigned c)
{
    return tu_class_sizes[c] <= LOWFAT_REGION_SIZE;
}

/* Skip the current test, loudly: Criterion reports skips only with
 * --verbose, so the reason also goes to stderr (the test's log), where
 * .ci/run counts the "lfgc-test: SKIPPED" lines. */
#define TU_SKIP(...)                                                          \
    do {                                                                      \
        fprintf(stderr, "lfgc-test: SKIPPED %s::%s: ",                        \
                criterion_current_test->category, criterion_current_test->name); \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        cr_skip_test(__VA_ARGS__);                                            \
    } while (0)

/* ------------------------------------------------------------------ */
/* Stack hygiene                                                       */

/* Overwrite 256 KiB of stack below the caller's frame, wiping stale
 * pointers that earlier calls left there.  The asm keeps the compiler
 * from dropping the memset of an array that is never read. */
static TU_NOINLINE void tu_clear_stack(void)
{
    char buf[256 * 1024];
    memset(buf, 0, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
}

/* Wipe the stack, then collect. */
static TU_NOINLINE void tu_collect(void)
{
    tu_clear_stack();
    GC_gcollect();
    tu_clear_stack();
}

/* A minor collection if one can run, with the stack wiped around it:
 * 1 if it was minor, 0 if it was full. */
static TU_NOINLINE int tu_collect_minor(void)
{
    tu_clear_stack();
    int minor = lfgc_collect_minor();
    tu_clear_stack();
    return minor;
}

/* Whether minor collections run here (the collector starts from a full
 * collection, so this runs one first). */
static TU_NOINLINE int tu_minor_available(void)
{
    tu_collect();
    return lfgc_collect_minor();
}

/* Skip the test, loudly, where the kernel cannot track writes. */
#define TU_NEED_MINOR()                                                       \
    do {                                                                      \
        if (!tu_minor_available())                                            \
            TU_SKIP("minor collections unavailable: the kernel lacks "        \
                    "userfaultfd asynchronous write protection");             \
    } while (0)

static inline GC_hidden_pointer tu_hide(const void *p)
{
    return GC_HIDE_POINTER(p);
}

/* lfgc_is_live() of a hidden pointer, revealed only inside this frame. */
static TU_NOINLINE int tu_live(GC_hidden_pointer h)
{
    return lfgc_is_live(GC_REVEAL_POINTER(h));
}

/* *slot = revealed h + offset, without the revealed value ever sitting in
 * the caller's frame (a test body must hold only hidden pointers: the
 * compiler spills temporaries where it likes). */
static TU_NOINLINE void tu_store(void *volatile *slot, GC_hidden_pointer h, size_t offset)
{
    *slot = (char *)GC_REVEAL_POINTER(h) + offset;
}

/* Does *slot hold revealed h + offset? */
static TU_NOINLINE int tu_slot_is(void *volatile *slot, GC_hidden_pointer h, size_t offset)
{
    return *slot == (char *)GC_REVEAL_POINTER(h) + offset;
}

/* GC_base(revealed h + offset) == revealed h? */
static TU_NOINLINE int tu_base_is(GC_hidden_pointer h, size_t offset)
{
    char *p = GC_REVEAL_POINTER(h);
    return GC_base(p + offset) == p;
}

/* ------------------------------------------------------------------ */
/* Warm-up: keep false references away from test objects               */

/* Criterion links libcrypto, libgit2, libnanomsg and friends, whose static
 * data (scanned as roots, as bdwgc does) hold a few hundred words such as
 * 0x1000000010 or 0x6000000060: integers that happen to fall on the first
 * slots of several size classes.  Whatever object is allocated there is
 * retained for ever.  (lfgc's blacklisting leaves such chunks to pointer-
 * free and uncollectable objects, so that each word pins one object at
 * most; but pin it does.)  The test program's own data hold such words
 * too when it is instrumented: UndefinedBehaviorSanitizer's source
 * locations put a column and a line number side by side in a word
 * (column 48, line 288: 0x3000000120).  So that "was it reclaimed?" tests
 * do not depend on which slot an object happens to get, tu_warm_up() finds
 * those words (in the writable segments of every object but lfgc's, which
 * the collector skips: before anything is allocated none of them is a
 * pointer), allocates every slot of the classes concerned up to the last
 * such address, drops them all and collects: the slots pinned by a false
 * reference stay allocated and live, and are never handed out again; the
 * rest is reclaimed and reused normally. */
#define TU_WARM_MAX_OFFSET ((uint64_t)16 << 20)   /* false refs deeper than this
                                                      past where a class's chunks
                                                      start are ignored */
/* Classes up to 1 MiB: an object of a larger class pinned by the warm-up
 * would stay in every test's heap and live figures (with the heap at 2
 * GiB, the valgrind layout, a library word hit the 8 MiB class's first
 * slot: 8.7 MB live before each test).  test_reclaim's large objects
 * allow for false references (tu_foreign_refs). */
#define TU_WARM_MAX_SIZE   ((uint64_t)1 << 20)

static uint64_t tu_warm_limit[TU_NUM_CLASSES] TU_UNUSED;

/* Call visit(word, arg) for every word of the writable segments of the
 * shared objects, neither the program nor lfgc (what the collector scans
 * but a test does not control), or (program) of the program only, unless
 * lfgc is part of it (a static link: its data are no roots). */
struct tu_word_walk {
    uintptr_t lfgc_base;
    int program;
    void (*visit)(const uint64_t *word, void *arg);
    void *arg;
};

static TU_UNUSED int tu_walk_segments(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct tu_word_walk *ww = data;
    int is_program = info->dlpi_name == NULL || info->dlpi_name[0] == 0;
    if (is_program != ww->program || info->dlpi_addr == ww->lfgc_base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
            continue;
        uintptr_t lo = (info->dlpi_addr + ph->p_vaddr + 7) & ~(uintptr_t)7;
        uintptr_t hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        for (const uint64_t *w = (const uint64_t *)lo; (uintptr_t)(w + 1) <= hi; w++)
            ww->visit(w, ww->arg);
    }
    return 0;
}

static TU_UNUSED void tu_segment_words(int program, void (*visit)(const uint64_t *word, void *arg),
                                       void *arg)
{
    Dl_info di;
    memset(&di, 0, sizeof di);
    dladdr((void *)(uintptr_t)&GC_malloc, &di);
    struct tu_word_walk ww = { (uintptr_t)di.dli_fbase, program, visit, arg };
    dl_iterate_phdr(tu_walk_segments, &ww);
}

/* Where the program's own data held a word landing in the heap at the
 * warm-up (the first TU_MAX_PROGRAM_FALSE of them). */
#define TU_MAX_PROGRAM_FALSE 4096
static const uint64_t *tu_program_false[TU_MAX_PROGRAM_FALSE] TU_UNUSED;
static size_t tu_program_false_count TU_UNUSED;

static TU_UNUSED void tu_warm_note(const uint64_t *where, void *arg)
{
    uint64_t w = *where;
    if (!lowfat_is_ptr((void *)w))
        return;
    if (arg && tu_program_false_count < TU_MAX_PROGRAM_FALSE)
        tu_program_false[tu_program_false_count++] = where;
    uint64_t c = lowfat_index((void *)w) - LOWFAT_FIRST_REGION;
    /* Where the class's chunks start: a word below hits no object. */
    uint64_t start = ((uint64_t)lowfat_index((void *)w) << LOWFAT_REGION_SHIFT) +
                     TU_SMALL_CLASS_OFFSET(c);
    if (tu_class_sizes[c] > TU_WARM_MAX_SIZE || w < start || w - start >= TU_WARM_MAX_OFFSET)
        return;
    if (w + 1 > tu_warm_limit[c])
        tu_warm_limit[c] = w + 1;
}

static TU_NOINLINE void tu_warm_up_alloc(void)
{
    memset(tu_warm_limit, 0, sizeof tu_warm_limit);
    tu_program_false_count = 0;
    tu_segment_words(0, tu_warm_note, NULL);
    tu_segment_words(1, tu_warm_note, tu_program_false);
    for (unsigned c = 0; c < TU_NUM_CLASSES; c++) {
        if (!tu_warm_limit[c] || !tu_class_exists(c))
            continue;
        /* A span taken empty hands out its first page from a line that
         * depends on the class, then the slots before it, then the pages
         * in order: once an allocation lands in the page past the last
         * one hit, every slot up to it has been handed out. */
        uintptr_t past = (tu_warm_limit[c] + 4095) & ~(uintptr_t)4095;
        for (int i = 0; i < 1000000; i++) {
            char *p = GC_malloc_atomic(tu_class_sizes[c] - 1);
            if (!p || (uintptr_t)p >= past)
                break;
        }
    }
}

/* Words in the writable segments of the shared objects (not the program,
 * not lfgc), and at the places of the program's data that held one at
 * the warm-up, that point into [lo, hi): false references the warm-up
 * could not cover (in classes larger than TU_WARM_MAX_SIZE, or deep in a
 * region).  An object they point to is rightly retained. */
struct tu_ref_query {
    uintptr_t lo, hi;
    size_t count;
};

static TU_UNUSED void tu_ref_note(const uint64_t *where, void *arg)
{
    struct tu_ref_query *q = arg;
    if (*where >= q->lo && *where < q->hi)
        q->count++;
}

static TU_UNUSED size_t tu_foreign_refs(uintptr_t lo, uintptr_t hi)
{
    struct tu_ref_query q = { lo, hi, 0 };
    tu_segment_words(0, tu_ref_note, &q);
    for (size_t i = 0; i < tu_program_false_count; i++)
        tu_ref_note(tu_program_false[i], &q);
    return q.count;
}

/* The collector's figures right after the warm-up (the pinned slots are
 * live: compare live and heap sizes with these). */
static struct lfgc_stats tu_base_stats TU_UNUSED;

/* The warm-up's allocation collects nothing: the one collection after it
 * is full, and no minor one before it leaves its verdict (profitable or
 * not) to steer the tests' first collections. */
static TU_UNUSED void tu_warm_up(void)
{
    GC_INIT();
    GC_disable();
    tu_warm_up_alloc();
    GC_enable();
    tu_collect();
    lfgc_get_stats(&tu_base_stats);
}

/* ------------------------------------------------------------------ */
/* Deterministic pseudo-random numbers (xorshift64*)                    */

static inline uint64_t tu_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* A value for word j of object i, never a heap address: bit 63 is set.
 * (Objects filled with these retain nothing.) */
static inline uint64_t tu_pattern(uint64_t i, uint64_t j)
{
    return ((i * 0x9e3779b97f4a7c15ull) ^ (j * 0xc2b2ae3d27d4eb4full)) | (1ull << 63);
}

/* Byte pattern for byte j of object i. */
static inline unsigned char tu_byte(uint64_t i, uint64_t j)
{
    return (unsigned char)((i * 131u + j * 7u + (j >> 8)) ^ 0x5a);
}

static inline void tu_fill_bytes(void *p, size_t n, uint64_t seed)
{
    unsigned char *b = p;
    for (size_t j = 0; j < n; j++)
        b[j] = tu_byte(seed, j);
}

/* Index of the first byte that differs from the pattern, or n. */
static inline size_t tu_check_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    for (size_t j = 0; j < n; j++)
        if (b[j] != tu_byte(seed, j))
            return j;
    return n;
}

/* Index of the first nonzero byte of p[0..n), or n. */
static inline size_t tu_first_nonzero(const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t w;
        memcpy(&w, b + j, 8);
        if (w)
            break;
    }
    for (; j < n; j++)
        if (b[j])
            return j;
    return n;
}

/* ------------------------------------------------------------------ */
/* Time, waiting, this process's threads and memory                   */

static inline double tu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sleep against an absolute deadline: the collector's signals interrupt
 * sleeps often, and on some kernels the remaining time that nanosleep
 * reports after an interruption is far larger than what was asked for,
 * so a nanosleep(&ts, &ts) loop can sleep for seconds. */
static TU_UNUSED void tu_sleep_ms(unsigned ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
        ;
}

/* Wait (polling) until *v >= want; false after `secs` seconds. */
static TU_UNUSED bool tu_wait_at_least(atomic_long *v, long want, double secs)
{
    double end = tu_now_s() + secs;
    for (unsigned spins = 0; atomic_load(v) < want; spins++) {
        if (tu_now_s() > end)
            return false;
        if (spins < 200)
            sched_yield();
        else
            tu_sleep_ms(1);
    }
    return true;
}

/* Threads of this process, from /proc/self/task (-1: unreadable). */
static TU_UNUSED int tu_count_tasks(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static TU_UNUSED bool tu_task_exists(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
    return access(path, F_OK) == 0;
}

/* Wait until thread tid has exited (its task is gone); false after
 * `secs` seconds. */
static TU_UNUSED bool tu_wait_task_gone(pid_t tid, double secs)
{
    double end = tu_now_s() + secs;
    while (tu_task_exists(tid)) {
        if (tu_now_s() > end)
            return false;
        tu_sleep_ms(1);
    }
    return true;
}

/* Resident set size of this process, in bytes. */
static TU_UNUSED size_t tu_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    unsigned long size = 0, resident = 0;
    cr_assert_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* ------------------------------------------------------------------ */
/* Child processes                                                     */

/* Run fn(arg, &value) in a forked child, which must exit within `secs`
 * seconds (alarm(), then SIGKILL from here) with fn's result 0: a crash,
 * a hang or a nonzero result fails the test, naming `what`.  Returns the
 * value fn stored.  For tests that need a fresh collector or may
 * deadlock. */
static TU_UNUSED uint64_t tu_in_child_value(int (*fn)(void *arg, uint64_t *value), void *arg,
                                            unsigned secs, const char *what)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        alarm(secs);
        close(fds[0]);
        uint64_t value = 0;
        int rc = fn(arg, &value);
        if (write(fds[1], &value, sizeof value) != sizeof value && !rc)
            rc = 125;
        _exit(rc);
    }
    close(fds[1]);
    int status = 0;
    double end = tu_now_s() + secs + 5;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && tu_now_s() < end)
        tu_sleep_ms(5);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    uint64_t value = 0;
    ssize_t got = read(fds[0], &value, sizeof value);
    close(fds[0]);
    cr_assert(WIFEXITED(status), "%s: the child %s (status %#x)", what,
              WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? "hung (deadlock)"
                                                                : "was killed", status);
    cr_assert_eq(WEXITSTATUS(status), 0, "%s: the child failed (status %d)", what,
                 WEXITSTATUS(status));
    cr_assert_eq(got, (ssize_t)sizeof value, "%s: the child reported nothing", what);
    return value;
}

static TU_UNUSED int tu_call_plain(void *fn, uint64_t *value)
{
    (void)value;
    return ((int (*)(void))fn)();
}

/* tu_in_child_value for a child that only succeeds (0) or fails (its
 * status says which check). */
static TU_UNUSED void tu_in_child(int (*fn)(void), unsigned secs, const char *what)
{
    tu_in_child_value(tu_call_plain, (void *)fn, secs, what);
}

/* ------------------------------------------------------------------ */
/* Checksummed lists (liveness checks in threaded tests)               */

static inline uint64_t tu_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Word j of the data with seed s: bit 63 set, so never a heap address
 * (the values retain nothing). */
static inline uint64_t tu_pat(uint64_t s, uint64_t j)
{
    return tu_mix(s * 0x100000001b3ull + j) | (1ull << 63);
}

/* A singly linked list node (32 bytes: a 48-byte class). */
struct tu_node {
    struct tu_node *next;
    uint64_t key;
    uint64_t val[2];
};

/* A list of n nodes with seed `seed`, NULL when out of memory. */
static TU_NOINLINE struct tu_node *tu_list_build(uint64_t seed, size_t n)
{
    struct tu_node *head = NULL;
    for (size_t i = n; i-- > 0;) {
        struct tu_node *x = GC_MALLOC(sizeof *x);
        if (!x)
            return NULL;
        x->next = head;
        x->key = tu_pat(seed, 3 * i);
        x->val[0] = tu_pat(seed, 3 * i + 1);
        x->val[1] = tu_pat(seed, 3 * i + 2);
        head = x;
    }
    return head;
}

/* Index of the first bad node + 1 (n + 1 for a wrong length), or 0. */
static TU_UNUSED size_t tu_list_check(const struct tu_node *x, uint64_t seed, size_t n)
{
    for (size_t i = 0; i < n; i++, x = x->next) {
        if (!x)
            return n + 1;
        if (x->key != tu_pat(seed, 3 * i) || x->val[0] != tu_pat(seed, 3 * i + 1) ||
            x->val[1] != tu_pat(seed, 3 * i + 2))
            return i + 1;
    }
    return x ? n + 1 : 0;
}

/* ------------------------------------------------------------------ */
/* A warn proc that records what it is given                           */

#define TU_MAX_WARNINGS 64
struct tu_warning {
    char msg[512];
    GC_hidden_pointer arg;   /* hidden: a recorded pointer must not retain */
};
static struct tu_warning tu_warnings[TU_MAX_WARNINGS] TU_UNUSED;
static int tu_warn_count TU_UNUSED;

static TU_UNUSED void tu_warn_proc(char *msg, GC_word arg)
{
    if (tu_warn_count < TU_MAX_WARNINGS) {
        struct tu_warning *w = &tu_warnings[tu_warn_count];
        snprintf(w->msg, sizeof w->msg, "%s", msg ? msg : "(null)");
        w->arg = GC_HIDE_POINTER(arg);
    }
    tu_warn_count++;
}

static TU_UNUSED void tu_warn_reset(void)
{
    memset(tu_warnings, 0, sizeof tu_warnings);
    tu_warn_count = 0;
}

static TU_UNUSED GC_word tu_warn_arg(int i)
{
    return (GC_word)GC_REVEAL_POINTER(tu_warnings[i].arg);
}

/* Number of printf conversions in a format ("%%" is not one). */
static TU_UNUSED int tu_count_conversions(const char *fmt)
{
    int n = 0;
    for (const char *s = fmt; *s; s++) {
        if (*s != '%')
            continue;
        if (s[1] == '%') {
            s++;
            continue;
        }
        n++;
    }
    return n;
}

/* Capture what fn(arg) writes on stderr into out (NUL-terminated);
 * returns the number of bytes captured. */
static TU_UNUSED ssize_t tu_capture_stderr(void (*fn)(void *), void *arg,
                                           char *out, size_t size)
{
    char path[] = "/tmp/lfgc-stderr-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp");
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    memset(out, 0, size);
    ssize_t n = pread(fd, out, size - 1, 0);
    close(fd);
    return n;
}

#endif /* LFGC_TEST_UTIL_H */
