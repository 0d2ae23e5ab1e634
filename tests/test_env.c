/* test_env.c: the environment variables lfgc reads at start-up.
 *
 * GC_DONT_GC, GC_PRINT_STATS, GC_INITIAL_HEAP_SIZE, GC_MAXIMUM_HEAP_SIZE,
 * GC_FREE_SPACE_DIVISOR and LFGC_MARK_STACK_MAX take effect when the
 * collector initialises, so each case runs in a fresh process: this test
 * program re-executes itself (/proc/self/exe) with LFGC_TEST_CHILD=<mode>
 * and the variables under test; a constructor runs the workload of that
 * mode before Criterion's main, prints its figures on stdout as key=value
 * pairs and exits.  The parent compares them (and the child's stderr)
 * with a run without the variable.
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lfgc_malloc.h"

extern char **environ;

/* ------------------------------------------------------------------ */
/* Child side: the workloads                                           */

static size_t env_arg(const char *name, size_t dflt)
{
    const char *s = getenv(name);
    return s ? (size_t)strtoull(s, NULL, 10) : dflt;
}

static int child_oom_calls;
static void *child_oom(size_t bytes)
{
    (void)bytes;
    child_oom_calls++;
    return NULL;
}

static size_t max_heap_seen;
static void note_heap(void)
{
    size_t h = GC_get_heap_size();
    if (h > max_heap_seen)
        max_heap_seen = h;
}

/* `mib` MiB of 1000-byte garbage. */
static TU_NOINLINE void child_garbage(size_t mib)
{
    for (size_t done = 0; done < (mib << 20); done += 1000) {
        char *p = GC_malloc(1000);
        if (!p) {
            printf("alloc_failed=1 ");
            return;
        }
        p[0] = 1;
        if ((done & 0xffff) < 1000)
            note_heap();
    }
}

/* A live set of `mib` MiB in 1000-byte objects, in a chain from a root. */
static void *volatile live_head;
static TU_NOINLINE void child_live(size_t mib)
{
    for (size_t i = 0; i < (mib << 20) / 1000; i++) {
        uint64_t *p = GC_malloc(1000);
        if (!p)
            return;
        p[0] = (uint64_t)(uintptr_t)live_head;
        for (int j = 1; j < 125; j++)
            p[j] = tu_pattern(i, (uint64_t)j);
        live_head = p;
    }
}

static TU_NOINLINE int child_live_ok(size_t mib)
{
    size_t n = (mib << 20) / 1000, i = n;
    for (uint64_t *p = (uint64_t *)live_head; p; p = (uint64_t *)(uintptr_t)p[0]) {
        i--;
        for (int j = 1; j < 125; j++)
            if (p[j] != tu_pattern(i, (uint64_t)j))
                return 0;
    }
    return i == 0;
}

static int mode_garbage(void)
{
    GC_INIT();
    size_t heap0 = GC_get_heap_size();
    child_garbage(env_arg("LFGC_TEST_GARBAGE_MIB", 64));
    tu_clear_stack();
    GC_gcollect();
    printf("gc_no=%lu heap=%zu heap0=%zu maxheap=%zu\n", (unsigned long)GC_get_gc_no(),
           GC_get_heap_size(), heap0, max_heap_seen);
    return 0;
}

static int mode_workload(void)
{
    GC_INIT();
    GC_set_oom_fn(child_oom);
    size_t heap0 = GC_get_heap_size();
    size_t live = env_arg("LFGC_TEST_LIVE_MIB", 8);
    child_live(live);
    child_garbage(env_arg("LFGC_TEST_GARBAGE_MIB", 128));
    int ok = child_live_ok(live);
    printf("gc_no=%lu heap=%zu heap0=%zu maxheap=%zu ok=%d oom=%d\n",
           (unsigned long)GC_get_gc_no(), GC_get_heap_size(), heap0, max_heap_seen, ok,
           child_oom_calls);
    return 0;
}

/* Live 64 KiB objects until allocation fails. */
static int mode_fill(void)
{
    GC_INIT();
    GC_set_oom_fn(child_oom);
    size_t live = 0;
    for (int i = 0; i < 100000; i++) {
        void **p = GC_malloc(60000);
        if (!p)
            break;
        p[0] = (void *)live_head;
        live_head = p;
        live += 60000;
        note_heap();
    }
    printf("live=%zu oom=%d heap=%zu maxheap=%zu gc_no=%lu\n", live, child_oom_calls,
           GC_get_heap_size(), max_heap_seen, (unsigned long)GC_get_gc_no());
    return 0;
}

static int mode_print_stats(void)
{
    GC_INIT();
    for (int i = 0; i < 5; i++)
        GC_gcollect();
    child_garbage(32);
    fflush(stderr);
    printf("gc_no=%lu\n", (unsigned long)GC_get_gc_no());
    return 0;
}

/* Mark-stack overflow: a wide structure (one object with 40000 pointers,
 * each to a node with 8 children), a deep one (a binary tree of depth 16)
 * and a long chain, all of which must survive; half of the wide part is
 * then dropped and must be reclaimed. */
#define WIDE 40000
#define FAN 8
struct wnode {
    uint64_t id;
    struct wnode *kid[FAN];
    uint64_t check;
};
struct tnode {
    struct tnode *l, *r;
    uint64_t depth, check;
};
static struct wnode **volatile wide_root;
static struct tnode *volatile tree_root;
static struct wnode *volatile chain_root;
static GC_hidden_pointer *dropped;          /* malloc'ed: not a root */

static struct wnode *wnode_new(uint64_t id)
{
    struct wnode *n = GC_malloc(sizeof *n);
    if (!n)
        abort();
    n->id = id;
    n->check = tu_pattern(id, 1);
    return n;
}

static TU_NOINLINE struct tnode *tree(uint64_t depth)
{
    struct tnode *t = GC_malloc(sizeof *t);
    if (!t)
        abort();
    t->depth = depth;
    t->check = tu_pattern(depth, 2);
    if (depth) {
        t->l = tree(depth - 1);
        t->r = tree(depth - 1);
    }
    return t;
}

static long tree_check(const struct tnode *t, uint64_t depth)
{
    if (!t || t->depth != depth || t->check != tu_pattern(depth, 2) ||
        !lfgc_is_live(t))
        return -1000000000;
    if (!depth)
        return 1;
    return 1 + tree_check(t->l, depth - 1) + tree_check(t->r, depth - 1);
}

static TU_NOINLINE void build_overflow_graph(void)
{
    wide_root = GC_malloc(WIDE * sizeof(struct wnode *));
    if (!wide_root)
        abort();
    for (uint64_t i = 0; i < WIDE; i++) {
        struct wnode *n = wnode_new(i);
        for (int k = 0; k < FAN; k++)
            n->kid[k] = wnode_new(1000000 + i * FAN + (uint64_t)k);
        wide_root[i] = n;
    }
    tree_root = tree(16);
    struct wnode *head = NULL;
    for (uint64_t i = 0; i < 100000; i++) {
        struct wnode *n = wnode_new(5000000 + i);
        n->kid[0] = head;
        head = n;
    }
    chain_root = head;
}

static TU_NOINLINE int check_overflow_graph(void)
{
    for (uint64_t i = 0; i < WIDE; i++) {
        struct wnode *n = wide_root[i];
        if (!n)
            continue;
        if (n->id != i || n->check != tu_pattern(i, 1) || !lfgc_is_live(n))
            return 0;
        for (int k = 0; k < FAN; k++) {
            struct wnode *m = n->kid[k];
            uint64_t id = 1000000 + i * FAN + (uint64_t)k;
            if (m->id != id || m->check != tu_pattern(id, 1) || !lfgc_is_live(m))
                return 0;
        }
    }
    if (tree_check(tree_root, 16) != (2 << 16) - 1)
        return 0;
    uint64_t i = 100000;
    for (struct wnode *n = chain_root; n; n = n->kid[0]) {
        i--;
        if (n->id != 5000000 + i || n->check != tu_pattern(n->id, 1))
            return 0;
    }
    return i == 0;
}

static TU_NOINLINE void drop_half(void)
{
    for (uint64_t i = 0, k = 0; i < WIDE; i += 2) {
        struct wnode *n = wide_root[i];
        dropped[k++] = tu_hide(n);
        for (int j = 0; j < FAN; j++)
            dropped[k++] = tu_hide(n->kid[j]);
        wide_root[i] = NULL;
    }
}

static int mode_mark_overflow(void)
{
    tu_warm_up();
    dropped = malloc((WIDE / 2) * (FAN + 1) * sizeof *dropped);
    if (!dropped)
        return 1;
    build_overflow_graph();
    int ok = 1;
    for (int round = 0; round < 3; round++) {
        tu_collect();
        ok &= check_overflow_graph();
        child_garbage(8);
    }
    drop_half();
    tu_collect();
    ok &= check_overflow_graph();
    size_t ndropped = (WIDE / 2) * (FAN + 1), alive = 0;
    for (size_t k = 0; k < ndropped; k++)
        alive += tu_live(dropped[k]);
    struct lfgc_stats st;
    lfgc_get_stats(&st);
    printf("ok=%d overflows=%llu dropped=%zu alive=%zu gc_no=%lu\n", ok,
           (unsigned long long)st.mark_stack_overflows, ndropped, alive,
           (unsigned long)st.collections);
    return 0;
}

static int mode_heap0(void)
{
    GC_INIT();
    printf("heap0=%zu\n", GC_get_heap_size());
    return 0;
}

static int mode_entire(void)
{
    GC_INIT();
    printf("entire=%d\n", GC_use_entire_heap);
    return 0;
}

/* GC_set_all_interior_pointers(0) before initialisation: no extra byte. */
static int mode_no_interior(void)
{
    GC_set_all_interior_pointers(0);
    GC_INIT();
    char *p = GC_malloc(16), *q = GC_malloc(4096);
    printf("size16=%zu size4096=%zu get=%d\n", lowfat_size(p), lowfat_size(q),
           GC_get_all_interior_pointers());
    return 0;
}

/* The same after malloc's objects set the heap up (a runtime under
 * liblfgc-malloc.so mallocs before it sets this, as Guile does): malloc's
 * objects do not depend on the setting, so it still takes effect, and
 * the malloc'ed object is intact. */
static int mode_no_interior_after_malloc(void)
{
    unsigned char *m = lfgc_malloc(1000);
    if (!m)
        return 3;
    memset(m, 0x5c, 1000);
    GC_set_all_interior_pointers(0);
    GC_INIT();
    char *p = GC_malloc(16), *q = GC_malloc(4096);
    size_t intact = 0;
    while (intact < 1000 && m[intact] == 0x5c)
        intact++;
    printf("size16=%zu size4096=%zu get=%d intact=%zu\n", lowfat_size(p), lowfat_size(q),
           GC_get_all_interior_pointers(), intact);
    lfgc_free(m);
    return 0;
}

/* Runs before Criterion's main when this program is started as a child. */
__attribute__((constructor)) static void child_main(void)
{
    const char *mode = getenv("LFGC_TEST_CHILD");
    if (!mode)
        return;
    int rc = 2;
    if (!strcmp(mode, "garbage"))
        rc = mode_garbage();
    else if (!strcmp(mode, "workload"))
        rc = mode_workload();
    else if (!strcmp(mode, "fill"))
        rc = mode_fill();
    else if (!strcmp(mode, "print_stats"))
        rc = mode_print_stats();
    else if (!strcmp(mode, "mark_overflow"))
        rc = mode_mark_overflow();
    else if (!strcmp(mode, "heap0"))
        rc = mode_heap0();
    else if (!strcmp(mode, "entire"))
        rc = mode_entire();
    else if (!strcmp(mode, "no_interior"))
        rc = mode_no_interior();
    else if (!strcmp(mode, "no_interior_after_malloc"))
        rc = mode_no_interior_after_malloc();
    fflush(stdout);
    fflush(stderr);
    _exit(rc);
}

/* ------------------------------------------------------------------ */
/* Parent side                                                         */

struct child {
    int status;
    char out[4096];
    char err[65536];
    size_t err_len;
};

static void read_all(int fd, char *buf, size_t cap, size_t *len)
{
    ssize_t n = pread(fd, buf, cap - 1, 0);
    if (n < 0)
        n = 0;
    buf[n] = 0;
    if (len)
        *len = (size_t)n;
    close(fd);
}

static int temp_file(void)
{
    char path[] = "/tmp/lfgc-test-env-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp");
    unlink(path);
    return fd;
}

/* Run this program as child `mode` with the variables of `env` (NAME=VALUE,
 * NULL-terminated) set and every other GC_ / LFGC_ variable removed. */
static void run_child(const char *mode, const char *const *env, struct child *c)
{
    int out = temp_file(), err = temp_file();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        /* Collect the names first: unsetenv changes environ. */
        char *names[512];
        int nn = 0;
        for (char **e = environ; *e && nn < 512; e++)
            if (!strncmp(*e, "GC_", 3) || !strncmp(*e, "LFGC_", 5)) {
                const char *eq = strchr(*e, '=');
                names[nn++] = strndup(*e, eq ? (size_t)(eq - *e) : strlen(*e));
            }
        for (int i = 0; i < nn; i++)
            unsetenv(names[i]);
        for (const char *const *e = env; e && *e; e++)
            putenv((char *)*e);
        setenv("LFGC_TEST_CHILD", mode, 1);
        dup2(out, 1);
        dup2(err, 2);
        execl("/proc/self/exe", "test_env_child", (char *)NULL);
        _exit(127);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    c->status = status;
    read_all(out, c->out, sizeof c->out, NULL);
    read_all(err, c->err, sizeof c->err, &c->err_len);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "child '%s' failed (status %#x); stdout: %s; stderr: %.2000s", mode,
              status, c->out, c->err);
}

/* The value of key=... in the child's output. */
static unsigned long long field(const struct child *c, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "%s=", key);
    const char *s = c->out;
    for (;;) {
        s = strstr(s, pat);
        cr_assert_not_null(s, "no %s in the child's output: %s", key, c->out);
        if (s == c->out || s[-1] == ' ')
            break;
        s++;
    }
    return strtoull(s + strlen(pat), NULL, 10);
}

static size_t count_lines(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *line = s; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (!needle || (memmem(line, len, needle, strlen(needle)) != NULL))
            n++;
        if (!end)
            break;
        line = end + 1;
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* GC_DONT_GC                                                          */

Test(env, gc_dont_gc_disables_collection)
{
    struct child with, without;
    const char *const env[] = { "GC_DONT_GC=1", "LFGC_TEST_GARBAGE_MIB=64", NULL };
    const char *const base[] = { "LFGC_TEST_GARBAGE_MIB=64", NULL };
    run_child("garbage", env, &with);
    run_child("garbage", base, &without);
    cr_assert_eq(field(&with, "gc_no"), 0, "GC_DONT_GC set: %llu collections "
                 "(explicit GC_gcollect included)", field(&with, "gc_no"));
    cr_assert_geq(field(&with, "heap"), 64 * MiB, "GC_DONT_GC set: the heap holds "
                  "only %llu KiB after 64 MiB of allocation", field(&with, "heap") >> 10);
    cr_assert_gt(field(&without, "gc_no"), 1, "without GC_DONT_GC: %llu collections",
                 field(&without, "gc_no"));
    cr_assert_lt(field(&without, "maxheap"), 32 * MiB, "without GC_DONT_GC the heap "
                 "reached %llu KiB", field(&without, "maxheap") >> 10);
}

/* ------------------------------------------------------------------ */
/* GC_PRINT_STATS                                                      */

Test(env, gc_print_stats_one_line_per_collection)
{
    struct child with, without;
    const char *const env[] = { "GC_PRINT_STATS=1", NULL };
    run_child("print_stats", env, &with);
    run_child("print_stats", NULL, &without);
    unsigned long long n = field(&with, "gc_no");
    cr_assert_geq(n, 6, "only %llu collections", n);
    size_t lines = count_lines(with.err, NULL);
    cr_assert_eq(lines, n, "GC_PRINT_STATS: %zu lines on stderr for %llu collections:"
                 "\n%.3000s", lines, n, with.err);
    /* Each line names its collection. */
    for (unsigned long long i = 1; i <= n; i++) {
        char want[64];
        snprintf(want, sizeof want, "collection %llu", i);
        cr_assert_not_null(strstr(with.err, want), "no line for collection %llu:\n%s",
                           i, with.err);
    }
    cr_assert_eq(without.err_len, 0, "without GC_PRINT_STATS, stderr holds: %s",
                 without.err);
}

/* ------------------------------------------------------------------ */
/* GC_INITIAL_HEAP_SIZE                                                */

Test(env, gc_initial_heap_size)
{
    struct child with, without;
    const char *const env[] = { "GC_INITIAL_HEAP_SIZE=256m", "LFGC_TEST_LIVE_MIB=8",
                                "LFGC_TEST_GARBAGE_MIB=128", NULL };
    const char *const base[] = { "LFGC_TEST_LIVE_MIB=8", "LFGC_TEST_GARBAGE_MIB=128",
                                 NULL };
    run_child("workload", env, &with);
    run_child("workload", base, &without);
    cr_assert_eq(field(&with, "ok"), 1);
    cr_assert_eq(field(&without, "ok"), 1);
    cr_assert_geq(field(&with, "heap0"), 256 * MiB, "GC_INITIAL_HEAP_SIZE=256m: "
                  "initial heap %llu KiB", field(&with, "heap0") >> 10);
    cr_assert_lt(field(&without, "heap0"), 256 * MiB);
    /* 136 MiB fit in the initial heap: no collection was needed. */
    cr_assert_eq(field(&with, "gc_no"), 0, "GC_INITIAL_HEAP_SIZE=256m: %llu "
                 "collections for 136 MiB of allocation", field(&with, "gc_no"));
    cr_assert_gt(field(&without, "gc_no"), 2, "default heap: %llu collections",
                 field(&without, "gc_no"));
}

/* As bdwgc: GC_USE_ENTIRE_HEAP, whatever its value, sets GC_use_entire_heap
 * (test_policy.c checks what the setting does). */
Test(env, gc_use_entire_heap)
{
    struct child with, without;
    const char *const env[] = { "GC_USE_ENTIRE_HEAP=1", NULL };
    run_child("entire", env, &with);
    run_child("entire", NULL, &without);
    cr_assert_eq(field(&with, "entire"), 1, "GC_USE_ENTIRE_HEAP=1 did not set it");
    cr_assert_eq(field(&without, "entire"), 0, "set without GC_USE_ENTIRE_HEAP");
}

/* ------------------------------------------------------------------ */
/* GC_MAXIMUM_HEAP_SIZE                                                */

Test(env, gc_maximum_heap_size_bounds_the_heap)
{
    struct child c;
    const char *const env[] = { "GC_MAXIMUM_HEAP_SIZE=32m", "LFGC_TEST_LIVE_MIB=8",
                                "LFGC_TEST_GARBAGE_MIB=256", NULL };
    run_child("workload", env, &c);
    cr_assert_eq(field(&c, "ok"), 1, "live data corrupted under a heap limit");
    cr_assert_eq(field(&c, "oom"), 0, "OOM under the limit with 8 MiB live: %s", c.out);
    cr_assert_leq(field(&c, "maxheap"), 32 * MiB, "GC_MAXIMUM_HEAP_SIZE=32m: the heap "
                  "reached %llu KiB", field(&c, "maxheap") >> 10);
    cr_assert_null(strstr(c.out, "alloc_failed"));
}

Test(env, gc_maximum_heap_size_fails_allocation_past_it)
{
    struct child with, without;
    const char *const env[] = { "GC_MAXIMUM_HEAP_SIZE=32m", NULL };
    const char *const base[] = { "GC_MAXIMUM_HEAP_SIZE=128m", NULL };
    run_child("fill", env, &with);
    run_child("fill", base, &without);
    cr_assert_geq(field(&with, "oom"), 1, "no OOM call at the limit: %s", with.out);
    cr_assert_leq(field(&with, "maxheap"), 32 * MiB, "heap %llu KiB past a 32 MiB limit",
                  field(&with, "maxheap") >> 10);
    cr_assert_geq(field(&with, "live"), 16 * MiB, "only %llu KiB live when the 32 MiB "
                  "heap was declared full", field(&with, "live") >> 10);
    /* A larger limit lets more live data in. */
    cr_assert_gt(field(&without, "live"), field(&with, "live") + 64 * MiB);
    cr_assert_leq(field(&without, "maxheap"), 128 * MiB);
}

/* ------------------------------------------------------------------ */
/* GC_FREE_SPACE_DIVISOR                                               */

Test(env, gc_free_space_divisor)
{
    struct child d1, d20;
    const char *const env1[] = { "GC_FREE_SPACE_DIVISOR=1", "LFGC_TEST_LIVE_MIB=8",
                                 "LFGC_TEST_GARBAGE_MIB=128", NULL };
    const char *const env20[] = { "GC_FREE_SPACE_DIVISOR=20", "LFGC_TEST_LIVE_MIB=8",
                                  "LFGC_TEST_GARBAGE_MIB=128", NULL };
    run_child("workload", env1, &d1);
    run_child("workload", env20, &d20);
    cr_assert_eq(field(&d1, "ok"), 1);
    cr_assert_eq(field(&d20, "ok"), 1);
    unsigned long long g1 = field(&d1, "gc_no"), g20 = field(&d20, "gc_no");
    cr_assert_gt(g20, 2 * g1, "divisor 20: %llu collections, divisor 1: %llu", g20, g1);
    unsigned long long h1 = field(&d1, "maxheap"), h20 = field(&d20, "maxheap");
    cr_assert_lt(h20, h1, "divisor 20: heap %llu KiB, divisor 1: %llu KiB",
                 h20 >> 10, h1 >> 10);
}

/* ------------------------------------------------------------------ */
/* Mark-stack overflow                                                  */

Test(env, mark_stack_overflow_recovery, .timeout = 60)
{
    struct child small, normal;
    const char *const env[] = { "LFGC_MARK_STACK_MAX=16", NULL };
    run_child("mark_overflow", env, &small);
    run_child("mark_overflow", NULL, &normal);
    cr_assert_eq(field(&small, "ok"), 1, "with a 16-entry mark stack, live data were "
                 "lost or corrupted: %s", small.out);
    cr_assert_gt(field(&small, "overflows"), 0, "a 16-entry mark stack never "
                 "overflowed: %s", small.out);
    unsigned long long dropped = field(&small, "dropped");
    unsigned long long alive = field(&small, "alive");
    cr_assert_eq(alive, 0, "with a 16-entry mark stack, %llu of %llu dropped objects "
                 "survived", alive, dropped);
    /* The control run: same workload, default stack. */
    cr_assert_eq(field(&normal, "ok"), 1, "%s", normal.out);
    cr_assert_eq(field(&normal, "overflows"), 0, "the default mark stack overflowed: %s",
                 normal.out);
    cr_assert_eq(field(&normal, "alive"), 0);
}

/* Sizes as bdwgc reads them: a number with an optional k, m or g suffix. */
Test(env, heap_size_suffixes)
{
    struct { const char *var; size_t bytes; } cases[] = {
        { "GC_INITIAL_HEAP_SIZE=100000000", 100000000 },
        { "GC_INITIAL_HEAP_SIZE=65536k", (size_t)65536 << 10 },
        { "GC_INITIAL_HEAP_SIZE=40M", (size_t)40 << 20 },
        { "GC_INITIAL_HEAP_SIZE=1g", (size_t)1 << 30 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct child c;
        const char *const env[] = { cases[k].var, NULL };
        run_child("heap0", env, &c);
        unsigned long long h = field(&c, "heap0");
        cr_assert_geq(h, cases[k].bytes, "%s: initial heap %llu bytes", cases[k].var, h);
        cr_assert_lt(h, cases[k].bytes + 4 * MiB, "%s: initial heap %llu bytes",
                     cases[k].var, h);
    }
}

Test(env, all_interior_pointers_off_before_init)
{
    struct child c;
    run_child("no_interior", NULL, &c);
    cr_assert_eq(field(&c, "get"), 0);
    cr_assert_eq(field(&c, "size16"), 16, "with all interior pointers off, a 16-byte "
                 "object is in the %llu-byte class", field(&c, "size16"));
    cr_assert_eq(field(&c, "size4096"), 4096);
}

Test(env, all_interior_pointers_off_after_malloc_before_init)
{
    struct child c;
    run_child("no_interior_after_malloc", NULL, &c);
    cr_assert_eq(field(&c, "get"), 0, "GC_set_all_interior_pointers(0) after a malloc was ignored");
    cr_assert_eq(field(&c, "size16"), 16, "a 16-byte object is in the %llu-byte class",
                 field(&c, "size16"));
    cr_assert_eq(field(&c, "size4096"), 4096);
    cr_assert_eq(field(&c, "intact"), 1000, "the malloc'ed object changed");
}
