/* lowfat_apps.c: the low-fat paper's applications (examples/) against the
 * plain way of doing the same thing, both on lfgc's malloc.
 *
 *   lowfat_apps CASE VARIANT [scale]      VARIANT: lowfat | plain
 *
 * CASE:
 *   memcpy      2 M copies of 16..1024 bytes between heap buffers:
 *               checked_memcpy (bounds.h, one check per call) | memcpy
 *   meta        metadata of the object under 2 M random interior pointers
 *               into 100,000 objects: meta_of (meta.h, lowfat_base) |
 *               binary search of a sorted table of the objects' ranges,
 *               which is what an ordinary malloc leaves a program with
 *   tree234     search of every key of a 2-3-4 tree of 300,000 keys: the
 *               node's kind from its size class (tree234.h) | from a word
 *               in the node (tree234_plain.h); the build is timed apart
 *   vec-build   10 M push_backs onto one vector: lfvec (lfvec.h) |
 *               {data, length, capacity}
 *   vec-access  the sum of its items by index, bounds-checked
 *   vec-small   1 M vectors of 3 items kept alive: key is peak RSS
 * `scale` multiplies the work (default 1).
 *
 * Extra RESULT fields: ns_per_op (the timed part per operation, in CPU
 * time), ops, build_s (tree234, vec-*: CPU time to build).
 */
#include "malloc_util.h"
#include "bounds.h"
#include "meta.h"
#include "tree234.h"
#include "tree234_plain.h"
#include "lfvec.h"

static int plain;
static double scale = 1;

/* The timed parts are measured in CPU time of the process (all the cases
 * are single-threaded): on a shared machine, wall time counts the other
 * programs' turns too. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t t_start;
static void timer_start(void) { t_start = cpu_ns(); }
static double timer_ns(void) { return (double)(cpu_ns() - t_start); }

static long scaled(long n) { return (long)((double)n * scale); }

/* --- memcpy ------------------------------------------------------------ */

static int run_memcpy(void)
{
    enum { BUFS = 512 };
    char *buf[BUFS];
    size_t size[BUFS];
    uint64_t st = 1;
    for (int i = 0; i < BUFS; i++) {
        size[i] = 16 + bench_rand(&st) % 1009;
        buf[i] = mb_xmalloc(size[i]);
        memset(buf[i], i, size[i]);
    }
    long n = scaled(2000000);
    uint64_t sum = 0;
    timer_start();
    for (long k = 0; k < n; k++) {
        uint64_t r = bench_rand(&st);
        int d = (int)(r % BUFS), s = (int)((r >> 16) % BUFS);
        size_t len = size[d] < size[s] ? size[d] : size[s];
        len -= (r >> 32) % 16;            /* sometimes a little less */
        if (plain)
            memcpy(buf[d], buf[s], len);
        else
            checked_memcpy(buf[d], buf[s], len);
        sum += (unsigned char)buf[d][len - 1];
    }
    double ns = timer_ns();
    BENCH_KEEP(sum);
    for (int i = 0; i < BUFS; i++)
        free(buf[i]);
    return mb_report(plain ? "memcpy-plain" : "memcpy-checked", 1,
                     "ops=%ld ns_per_op=%.3f", n, ns / (double)n);
}

/* --- meta ---------------------------------------------------------------- */

struct range { uintptr_t lo, hi; struct meta *m; };

static int cmp_range(const void *a, const void *b)
{
    uintptr_t x = ((const struct range *)a)->lo, y = ((const struct range *)b)->lo;
    return x < y ? -1 : x > y;
}

/* The plain way: objects' ranges sorted by address, binary search. */
static struct meta *lookup(const struct range *t, size_t n, uintptr_t p)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p < t[mid].lo)
            hi = mid;
        else if (p >= t[mid].hi)
            lo = mid + 1;
        else
            return t[mid].m;
    }
    return NULL;
}

static int run_meta(void)
{
    enum { OBJS = 100000 };
    char **obj = mb_xmalloc(OBJS * sizeof *obj);
    uint32_t *len = mb_xmalloc(OBJS * sizeof *len);
    struct range *t = mb_xmalloc(OBJS * sizeof *t);
    uint64_t st = 7;
    for (uint32_t i = 0; i < OBJS; i++) {
        len[i] = (uint32_t)(16 + bench_rand(&st) % 497);
        obj[i] = meta_malloc(len[i], i, "bench");
        if (obj[i] == NULL)
            return 3;
        t[i].lo = (uintptr_t)obj[i];
        t[i].hi = t[i].lo + len[i];
        t[i].m = (struct meta *)obj[i] - 1;
    }
    qsort(t, OBJS, sizeof *t, cmp_range);
    long n = scaled(2000000);
    /* The interior pointers, made before the clock starts. */
    enum { PROBES = 1 << 16 };
    const char **probe = mb_xmalloc(PROBES * sizeof *probe);
    uint32_t *want = mb_xmalloc(PROBES * sizeof *want);
    for (int k = 0; k < PROBES; k++) {
        uint64_t r = bench_rand(&st);
        uint32_t i = (uint32_t)(r % OBJS);
        probe[k] = obj[i] + (r >> 32) % len[i];
        want[k] = i;
    }
    long bad = 0;
    timer_start();
    for (long k = 0; k < n; k++) {
        int j = (int)(k & (PROBES - 1));
        const struct meta *m = plain ? lookup(t, OBJS, (uintptr_t)probe[j])
                                     : meta_of(probe[j]);
        bad += m == NULL || m->type != want[j];
    }
    double ns = timer_ns();
    for (uint32_t i = 0; i < OBJS; i++)
        meta_free(obj[i]);
    free(obj); free(len); free(t); free(probe); free(want);
    if (bad)
        fprintf(stderr, "lowfat_apps: %ld wrong metadata lookups\n", bad);
    return mb_report(plain ? "meta-plain" : "meta-lowfat", bad == 0,
                     "ops=%ld ns_per_op=%.3f", n, ns / (double)n);
}

/* --- tree234 ------------------------------------------------------------- */

static int run_tree(void)
{
    long n = scaled(300000);
    void *root = NULL;
    uint64_t st = 99;
    timer_start();
    for (long i = 0; i < n; i++) {
        long key = (long)(bench_rand(&st) >> 1);
        int r = plain ? p234_insert(&root, key) : t234_insert(&root, key);
        if (r < 0)
            return 3;
    }
    double build = timer_ns();
    long found = 0;
    int rounds = 2;
    timer_start();
    for (int round = 0; round < rounds; round++) {
        st = 99;
        for (long i = 0; i < n; i++) {
            long key = (long)(bench_rand(&st) >> 1);
            found += plain ? p234_find(root, key) : t234_find(root, key);
        }
    }
    double ns = timer_ns();
    size_t count;
    int ok = (plain ? p234_check(root, &count) : t234_check(root, &count)) == 0
             && found == rounds * n;
    if (plain)
        p234_free(root);
    else
        t234_free(root);
    return mb_report(plain ? "tree234-plain" : "tree234-sized", ok,
                     "ops=%ld ns_per_op=%.3f build_s=%.3f", rounds * n,
                     ns / (double)(rounds * n), build / 1e9);
}

/* --- vectors ------------------------------------------------------------- */

struct fatvec { long *data; size_t len, cap; };

static struct fatvec *fat_new(size_t cap)
{
    struct fatvec *v = mb_xmalloc(sizeof *v);
    v->cap = cap ? cap : 1;
    v->len = 0;
    v->data = mb_xmalloc(v->cap * sizeof(long));
    return v;
}

static inline void fat_push(struct fatvec *v, long x)
{
    if (v->len == v->cap) {
        v->cap *= 2;
        v->data = realloc(v->data, v->cap * sizeof(long));
        if (v->data == NULL)
            exit(3);
    }
    v->data[v->len++] = x;
}

static inline long fat_at(const struct fatvec *v, size_t i)
{
    if (__builtin_expect(i >= v->len, 0))
        abort();
    return v->data[i];
}

static void fat_free(struct fatvec *v)
{
    free(v->data);
    free(v);
}

static int run_vec(const char *what)
{
    if (strcmp(what, "vec-small") == 0) {
        long n = scaled(1000000);
        void **all = mb_xmalloc((size_t)n * sizeof *all);
        timer_start();
        for (long i = 0; i < n; i++) {
            if (plain) {
                struct fatvec *v = fat_new(3);
                for (long k = 0; k < 3; k++)
                    fat_push(v, i + k);
                all[i] = v;
            } else {
                lfvec v = lfvec_new(3);
                for (long k = 0; k < 3; k++)
                    if (lfvec_push(&v, i + k))
                        return 3;
                all[i] = v;
            }
        }
        double ns = timer_ns();
        long bad = 0;
        for (long i = 0; i < n; i++) {
            if (plain) {
                bad += fat_at(all[i], 2) != i + 2;
                fat_free(all[i]);
            } else {
                bad += lfvec_at(all[i], 2) != i + 2;
                lfvec_free(all[i]);
            }
        }
        free(all);
        return mb_report(plain ? "vec-small-fat" : "vec-small-lowfat",
                         bad == 0, "ops=%ld ns_per_op=%.3f build_s=%.3f", n,
                         ns / (double)n, ns / 1e9);
    }
    int access = strcmp(what, "vec-access") == 0;
    long n = scaled(10000000);
    struct fatvec *fv = NULL;
    lfvec lv = NULL;
    timer_start();
    if (plain) {
        fv = fat_new(0);
        for (long i = 0; i < n; i++)
            fat_push(fv, i);
    } else {
        lv = lfvec_new(0);
        for (long i = 0; i < n; i++)
            if (lfvec_push(&lv, i))
                return 3;
    }
    double build = timer_ns();
    long sum = 0, ops = n;
    double ns = build;
    if (access) {
        int rounds = 3;
        timer_start();
        for (int r = 0; r < rounds; r++) {
            if (plain)
                for (size_t i = 0; i < fv->len; i++)
                    sum += fat_at(fv, i);
            else
                for (size_t i = 0, len = lfvec_len(lv); i < len; i++)
                    sum += lfvec_at(lv, i);
        }
        ns = timer_ns();
        ops = rounds * n;
        sum -= rounds * (n * (n - 1) / 2);
    }
    if (plain)
        fat_free(fv);
    else
        lfvec_free(lv);
    char name[40];
    snprintf(name, sizeof name, "%s-%s", what, plain ? "fat" : "lowfat");
    return mb_report(name, sum == 0, "ops=%ld ns_per_op=%.3f build_s=%.3f",
                     ops, ns / (double)ops, build / 1e9);
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[2], "lowfat") && strcmp(argv[2], "plain"))) {
        fprintf(stderr, "usage: lowfat_apps memcpy|meta|tree234|vec-build|"
                "vec-access|vec-small lowfat|plain [scale]\n");
        return 2;
    }
    plain = strcmp(argv[2], "plain") == 0;
    if (argc > 3)
        scale = atof(argv[3]);
    if (scale <= 0)
        scale = 1;
    mb_init();
    void *probe = malloc(16);
    if (!lowfat_is_heap_ptr(probe)) {
        fprintf(stderr, "lowfat_apps: malloc is not lfgc's (link "
                "liblfgc-malloc)\n");
        return 2;
    }
    free(probe);
    const char *c = argv[1];
    if (strcmp(c, "memcpy") == 0)
        return run_memcpy();
    if (strcmp(c, "meta") == 0)
        return run_meta();
    if (strcmp(c, "tree234") == 0)
        return run_tree();
    if (strncmp(c, "vec-", 4) == 0)
        return run_vec(c);
    fprintf(stderr, "lowfat_apps: unknown case %s\n", c);
    return 2;
}
