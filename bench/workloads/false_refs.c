/* false_refs.c: how much garbage do data full of small integers retain?
 *
 *   false_refs KIND WHEN
 *
 * A table of 2^20 words (8 MiB of static data, scanned as a root by both
 * collectors) holds integers of one KIND:
 *   none     zeros (the baseline)
 *   pairs    two 32-bit integers per word, each in [0, 1024)
 *            (arrays of small structs: counts, indices, coordinates)
 *   pairs64k the same in [0, 65536)
 *   sizes    64-bit integers in [0, 2^40) (byte counts, offsets, ids)
 *   strings  4 to 7 ASCII characters, NUL-padded to 8 bytes
 *   mix      a quarter of each of the four
 * WHEN says when the table is filled: `before` the collector's first
 * allocation (initialised data, or a program that reads its tables
 * first), or `after` the first of 16 rounds (tables computed while the
 * heap is in use).  Each round allocates 16 MiB of garbage: lists of 100
 * pointerful nodes of 16 to 4000 bytes, dropped at once; 1 MiB of live
 * list stays throughout and is checked at the end.  After the last round
 * the stack is cleared and the program collects twice, then prints the
 * heap, the free bytes and the difference (in use), in KiB.  Retention is
 * the in-use figure of a KIND less that of `none`.
 *
 * Build: gcc -O2 false_refs.c -lgc (bdwgc) or against lfgc.
 */
#include <gc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NWORDS (1u << 20)
uint64_t table[NWORDS];

struct node {
    struct node *next;
    uint64_t id;
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t pair(uint64_t bound)
{
    uint64_t r = next_rand();
    return ((r >> 40) % bound) << 32 | ((r >> 8) % bound);
}

static uint64_t ascii(void)
{
    uint64_t r = next_rand(), w = 0;
    unsigned len = 4 + (unsigned)(r % 4);
    for (unsigned i = 0; i < len; i++)
        w |= (uint64_t)(' ' + (next_rand() >> 20) % 95) << (8 * i);
    return w;
}

static void fill(const char *kind)
{
    for (unsigned i = 0; i < NWORDS; i++) {
        unsigned k = !strcmp(kind, "mix") ? i % 4 :
                     !strcmp(kind, "pairs") ? 0 : !strcmp(kind, "pairs64k") ? 1 :
                     !strcmp(kind, "sizes") ? 2 : !strcmp(kind, "strings") ? 3 : 4;
        table[i] = k == 0 ? pair(1024) : k == 1 ? pair(65536) :
                   k == 2 ? next_rand() >> 24 : k == 3 ? ascii() : 0;
    }
}

static const size_t sizes[] = { 16, 24, 40, 88, 200, 500, 1000, 4000 };
static volatile uintptr_t sink;

static __attribute__((noinline)) void garbage_round(void)
{
    size_t bytes = 0;
    for (unsigned l = 0; bytes < (16u << 20); l++) {
        struct node *head = NULL;
        size_t sz = sizes[l % 8];
        for (unsigned j = 0; j < 100; j++) {
            struct node *n = GC_MALLOC(sz);
            n->next = head;
            n->id = j;
            head = n;
            bytes += sz;
        }
        sink = (uintptr_t)head & 1;
    }
}

static struct node *live;           /* a root */

static __attribute__((noinline)) void make_live(void)
{
    for (uint64_t i = 0; i < (1u << 20) / 48; i++) {
        struct node *n = GC_MALLOC(40);
        n->next = live;
        n->id = i * 0x9e3779b97f4a7c15ull;
        live = n;
    }
}

static __attribute__((noinline)) void clear_stack(void)
{
    volatile char buf[65536];
    memset((char *)buf, 0, sizeof buf);
}

int main(int argc, char **argv)
{
    const char *kind = argc > 1 ? argv[1] : "mix";
    int before = argc > 2 ? !strcmp(argv[2], "before") : 1;
    if (before)
        fill(kind);
    GC_INIT();
    make_live();
    for (int round = 0; round < 16; round++) {
        garbage_round();
        if (round == 0 && !before)
            fill(kind);
    }
    clear_stack();
    GC_gcollect();
    GC_gcollect();
    uint64_t n = 0, i = (1u << 20) / 48;
    for (struct node *p = live; p; p = p->next)
        if (p->id != --i * 0x9e3779b97f4a7c15ull)
            return fprintf(stderr, "live list corrupted\n"), 1;
        else
            n++;
    size_t heap = GC_get_heap_size(), freeb = GC_get_free_bytes();
    printf("false_refs %s %s: heap=%zuKB free=%zuKB in-use=%zuKB live-nodes=%llu\n",
           kind, before ? "before" : "after", heap >> 10, freeb >> 10,
           (heap - freeb) >> 10, (unsigned long long)n);
    return 0;
}
