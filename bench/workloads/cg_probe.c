/* cg_probe.c: small fixed workloads for instruction counting under
 * valgrind --tool=callgrind (bench/callgrind.sh).  Not timed.
 *
 *   cg_probe alloc N      N calls GC_MALLOC(16) in a loop, results dropped
 *   cg_probe mark K R     K live 64-byte nodes (a list with random edges),
 *                         then R calls of GC_gcollect()
 *   cg_probe base N       N base lookups of interior pointers into 1,000 live
 *                         objects, through base_of() (a non-inlined wrapper
 *                         of lowfat_base() with lfgc, of GC_base() with
 *                         bdwgc) and through GC_base() (both)
 *
 * callgrind.py reads the per-function counts: calls of GC_malloc, GC_base,
 * base_of, and the cost of GC_gcollect.  Prints a RESULT line with
 * check=ok when every answer was right.
 */
#include "bench_util.h"

struct cnode {
    struct cnode *next;
    struct cnode *edge[4];
    uint64_t id, pad;
};

void *base_of(void *p);
__attribute__((noinline)) void *base_of(void *p)
{
#ifdef LFGC_VERSION_STRING
    return lowfat_base(p);
#else
    return GC_base(p);
#endif
}

static int do_alloc(long n)
{
    void *volatile sink;
    for (long i = 0; i < n; i++)
        sink = GC_MALLOC(16);
    (void)sink;
    return 1;
}

static int do_mark(long k, int rounds)
{
    struct cnode **all = malloc((size_t)k * sizeof *all);
    struct cnode *head = NULL;
    uint64_t seed = 42;
    if (all == NULL)
        return 0;
    for (long i = 0; i < k; i++) {
        struct cnode *c = GC_NEW(struct cnode);
        if (c == NULL)
            return 0;
        c->id = (uint64_t)i;
        c->next = head;
        head = c;
        all[i] = c;
    }
    for (long i = 0; i < k; i++)
        for (int e = 0; e < 4; e++)
            all[i]->edge[e] = all[bench_rand(&seed) % (uint64_t)k];
    for (int r = 0; r < rounds; r++)
        GC_gcollect();
    long seen = 0;
    for (struct cnode *c = head; c; c = c->next)
        if (all[c->id] == c)
            seen++;
    BENCH_KEEP(head);
    free(all);
    return seen == k;
}

static int do_base(long n)
{
    enum { OBJS = 1000 };
    void **objs = GC_MALLOC(OBJS * sizeof *objs);
    uint64_t seed = 7;
    int ok = objs != NULL;
    for (int k = 0; ok && k < OBJS; k++) {
        objs[k] = GC_MALLOC(16 + (size_t)k % 200);
        ok = objs[k] != NULL;
    }
    for (long i = 0; ok && i < n; i++) {
        int k = (int)(bench_rand(&seed) % OBJS);
        char *p = (char *)objs[k] + (size_t)i % (16 + (size_t)k % 200);
        if (base_of(p) != objs[k] || GC_base(p) != objs[k])
            ok = 0;
    }
    BENCH_KEEP(objs);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cg_probe alloc N | mark K R | base N\n");
        return 2;
    }
    bench_init();
    long n = atol(argv[2]);
    int ok;
    if (strcmp(argv[1], "alloc") == 0)
        ok = do_alloc(n);
    else if (strcmp(argv[1], "mark") == 0)
        ok = do_mark(n, argc > 3 ? atoi(argv[3]) : 3);
    else if (strcmp(argv[1], "base") == 0)
        ok = do_base(n);
    else {
        fprintf(stderr, "cg_probe: unknown probe %s\n", argv[1]);
        return 2;
    }
    return bench_report("cg_probe", ok, "probe=%s n=%ld", argv[1], n);
}
