/* malloc_realloc.c: mixed sizes, with realloc.
 *
 *   malloc_realloc [millions]      (default 1 million operations)
 *
 * A working set of 4,000 slots, each empty or holding a buffer of 8 bytes
 * to 32 KiB (sizes logarithmically distributed, so most are small).  Each
 * step picks a random slot and, by a random draw: allocates a buffer there
 * (malloc or calloc) if it is empty; else grows it with realloc (by a
 * factor of 1.25 to 2, as a string or vector does), shrinks it with realloc,
 * or frees it.  Contents must survive every realloc: a buffer's first and
 * last words are tags, moved along with it and checked at each step.
 *
 * Extra RESULT fields: ops, reallocs, ns_per_op.
 */
#include "malloc_util.h"

#define SLOTS 4000
#define MAX_SIZE (32 * 1024)

struct slot {
    unsigned char *p;
    size_t size;
    uint64_t tag;
};

/* Tags live at both ends; realloc keeps the first min(old, new) bytes, so
 * after a resize the tail tag is rewritten at the new end. */
static int check_slot(const struct slot *s)
{
    return mb_check(s->p, s->size, s->tag);
}

int main(int argc, char **argv)
{
    double millions = argc > 1 ? atof(argv[1]) : 1;
    long ops = (long)(millions * 1e6);
    if (ops < 10000)
        ops = 10000;
    mb_init();
    struct slot *s = calloc(SLOTS, sizeof *s);
    if (!s)
        return 3;
    uint64_t st = 0x243F6A8885A308D3ULL, bad = 0, reallocs = 0, zeroes = 0;
    for (long k = 0; k < ops; k++) {
        uint64_t r = bench_rand(&st);
        struct slot *e = &s[r % SLOTS];
        unsigned action = (unsigned)(r >> 56);         /* 0..255 */
        if (e->p == NULL) {
            e->size = mb_log_size(&st, 8, MAX_SIZE);
            e->tag = (uint64_t)k * 0x9E3779B97F4A7C15ULL;
            if (action < 64) {
                e->p = calloc(1, e->size);
                if (e->p == NULL)
                    return 3;
                /* calloc's memory must read as zero. */
                if (e->p[0] || e->p[e->size / 2] || e->p[e->size - 1])
                    zeroes++;
            } else {
                e->p = mb_xmalloc(e->size);
            }
            mb_fill(e->p, e->size, e->tag);
            continue;
        }
        if (!check_slot(e))
            bad++;
        if (action < 96) {                              /* grow */
            size_t n = e->size + e->size * (1 + (r >> 40) % 4) / 4;
            if (n > MAX_SIZE * 2)
                n = MAX_SIZE * 2;
            e->p = realloc(e->p, n);
            if (e->p == NULL)
                return 3;
            e->size = n;
            mb_fill(e->p, e->size, e->tag);
            reallocs++;
        } else if (action < 160) {                      /* shrink */
            size_t n = e->size / 2 + 1;
            e->p = realloc(e->p, n);
            if (e->p == NULL)
                return 3;
            e->size = n;
            mb_fill(e->p, e->size, e->tag);
            reallocs++;
        } else {                                        /* free */
            free(e->p);
            e->p = NULL;
        }
    }
    for (size_t i = 0; i < SLOTS; i++) {
        if (s[i].p) {
            if (!check_slot(&s[i]))
                bad++;
            free(s[i].p);
        }
    }
    free(s);
    if (bad || zeroes)
        fprintf(stderr, "malloc_realloc: %llu buffers damaged, %llu callocs "
                "not zeroed\n", (unsigned long long)bad,
                (unsigned long long)zeroes);
    double wall = (double)(bench_now_ns() - mb_t0_ns);
    return mb_report("malloc_realloc", bad == 0 && zeroes == 0,
                     "ops=%ld reallocs=%llu ns_per_op=%.2f", ops,
                     (unsigned long long)reallocs, wall / (double)ops);
}
