/* mark.c: the mark phase.
 *
 * Each candidate word costs one shift and one compare when it is not a
 * heap address.  Otherwise the reciprocal gives the slot number and the
 * base, the chunk map says whether a span in use owns that slot and what
 * kind it is, and the region's bitmap gets the bit.  Objects to scan go on
 * an explicit stack; when the stack cannot grow, entries are dropped and
 * the heap is rescanned for marked objects afterwards (overflow recovery).
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

struct mark_entry {
    uintptr_t lo, hi;
};

/* Ranges longer than this are scanned a slice at a time, so that a huge
 * object does not keep the stack from draining. */
#define MARK_SLICE 4096u

static struct mark_entry *stack;      /* entries [stack, stack_top) */
static struct mark_entry *stack_top;
static struct mark_entry *stack_end;
static size_t stack_limit;            /* entries the stack may grow to */
static bool overflowed;

void mark_init(void)
{
    bool found;
    stack_limit = env_size("LFGC_MARK_STACK_MAX", (size_t)1 << 24, &found);
    if (stack_limit < 16)
        stack_limit = 16;
    size_t cap = stack_limit < 65536 ? stack_limit : 65536;
    void *p = mmap(NULL, cap * sizeof *stack, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        cap = 0, p = NULL;
    stack = stack_top = p;
    stack_end = stack + cap;
}

static bool stack_grow(void)
{
    size_t cap = (size_t)(stack_end - stack);
    if (cap >= stack_limit)
        return false;
    size_t used = (size_t)(stack_top - stack);
    size_t ncap = cap ? cap * 2 : 1024;
    if (ncap > stack_limit)
        ncap = stack_limit;
    void *p = stack ? mremap(stack, cap * sizeof *stack, ncap * sizeof *stack,
                             MREMAP_MAYMOVE)
                    : mmap(NULL, ncap * sizeof *stack, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    stack = p;
    stack_top = stack + used;
    stack_end = stack + ncap;
    return true;
}

/* The stack is full: grow it, or drop the entry and remember to recover. */
static struct mark_entry *__attribute__((noinline))
push_slow(struct mark_entry *top, uintptr_t lo, uintptr_t hi)
{
    stack_top = top;
    if (!stack_grow()) {
        if (!overflowed)
            hs.mark_overflows++;
        overflowed = true;           /* marked, not scanned: recovered later */
        return top;
    }
    top = stack_top;
    top->lo = lo;
    top->hi = hi;
    return top + 1;
}

/* The heart of the collector: one candidate word.  Returns the new top of
 * the mark stack, which the callers keep in a register. */
static inline struct mark_entry *mark_word(uintptr_t w, struct mark_entry *top)
{
    uint64_t c = (w >> LOWFAT_REGION_SHIFT) - LOWFAT_FIRST_REGION;
    if (c >= NUM_CLASSES)
        return top;
    const struct region *r = &regions[c];
    uint64_t q = (uint64_t)(((unsigned __int128)w * r->magic) >> 64);
    uint64_t base = q * r->size;
    unsigned k = chunk_map[base >> CHUNK_SHIFT];
    if (!k)
        return top;                  /* no span in use owns that slot */
    uint64_t bit = q - r->q0;
    uint64_t *word = &r->mark_bits[bit >> 6];
    uint64_t mask = 1ull << (bit & 63);
    if (*word & mask)
        return top;
    *word |= mask;
    if (kinds[k - 1].ptrfree)
        return top;
    uint64_t len = r->large ? r->spans[(base - r->start) >> CHUNK_SHIFT].obj_bytes
                            : r->size;
    if (unlikely(top == stack_end))
        return push_slow(top, base, base + len);
    top->lo = base;
    top->hi = base + len;
    return top + 1;
}

static inline struct mark_entry *scan_words(uintptr_t lo, uintptr_t hi,
                                            struct mark_entry *top)
{
    for (const uintptr_t *p = (const uintptr_t *)lo; (uintptr_t)(p + 1) <= hi; p++)
        top = mark_word(*p, top);
    return top;
}

/* Objects leave the stack through a small FIFO: each is prefetched when it
 * enters and scanned PREFETCH_DEPTH objects later, by when its cache line
 * has arrived.  Marking is pointer chasing; this hides most of the misses. */
#define PREFETCH_DEPTH 8

void mark_drain(void)
{
    struct mark_entry ring[PREFETCH_DEPTH];
    unsigned head = 0, count = 0;
    struct mark_entry *top = stack_top;
    for (;;) {
        while (count < PREFETCH_DEPTH && top > stack) {
            struct mark_entry e = *--top;
            if (e.hi - e.lo > MARK_SLICE) {
                /* Scan a slice now and leave the rest on the stack. */
                top->lo = e.lo + MARK_SLICE;
                top++;
                e.hi = e.lo + MARK_SLICE;
            }
            __builtin_prefetch((void *)e.lo);
            ring[(head + count) % PREFETCH_DEPTH] = e;
            count++;
        }
        if (!count)
            break;
        struct mark_entry e = ring[head];
        head = (head + 1) % PREFETCH_DEPTH;
        count--;
        top = scan_words(e.lo, e.hi, top);
    }
    stack_top = top;
}

void mark_range(const void *lo, const void *hi)
{
    uintptr_t a = ((uintptr_t)lo + 7) & ~(uintptr_t)7;
    uintptr_t b = (uintptr_t)hi;
    /* Scan in slices and drain as we go, so that the stack stays small. */
    while (a < b) {
        uintptr_t end = b - a > 65536 ? a + 65536 : b;
        stack_top = scan_words(a, end, stack_top);
        mark_drain();
        a = end;
    }
}

bool mark_is_set(const struct region *r, uint64_t q)
{
    uint64_t bit = q - r->q0;
    return (r->mark_bits[bit >> 6] >> (bit & 63)) & 1;
}

void mark_clear_all(void)
{
    overflowed = false;
    stack_top = stack;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &regions[c];
        if (!r->mapped || !r->next_chunk)
            continue;
        uint64_t qa, qb;
        span_slots(r, r->next_chunk - r->span_chunks, &qa, &qb);
        uint64_t bits = qb - r->q0;
        memset(r->mark_bits, 0, (bits + 63) / 64 * 8);
    }
}

/* Uncollectable objects are roots: mark and scan every allocated one. */
void uncollectables_push(void)
{
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &regions[c];
        if (!r->mapped)
            continue;
        for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
            struct span *s = &r->spans[j];
            if (s->state == SPAN_UNUSED || !kinds[s->kind].uncollectable)
                continue;
            uint64_t qa, qb;
            span_slots(r, j, &qa, &qb);
            for (uint64_t q = qa; q < qb; q++) {
                uint64_t bit = q - r->q0;
                if (!((r->alloc_bits[bit >> 6] >> (bit & 63)) & 1))
                    continue;
                r->mark_bits[bit >> 6] |= 1ull << (bit & 63);
                if (!kinds[s->kind].ptrfree) {
                    uint64_t len = r->large ? s->obj_bytes : r->size;
                    stack_top = scan_words(q * r->size, q * r->size + len, stack_top);
                }
            }
            mark_drain();
        }
    }
}

/* After an overflow some marked objects were never scanned.  Scan every
 * marked object of a scanned kind again; repeat until a pass completes
 * without overflowing.  Each pass marks more, so this terminates. */
void mark_recover_overflow(void)
{
    while (overflowed) {
        overflowed = false;
        for (unsigned c = 0; c < NUM_CLASSES; c++) {
            struct region *r = &regions[c];
            if (!r->mapped)
                continue;
            for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
                struct span *s = &r->spans[j];
                if (s->state == SPAN_UNUSED || kinds[s->kind].ptrfree)
                    continue;
                uint64_t qa, qb;
                span_slots(r, j, &qa, &qb);
                for (uint64_t q = qa; q < qb; q++) {
                    if (!mark_is_set(r, q))
                        continue;
                    uint64_t len = r->large ? s->obj_bytes : r->size;
                    stack_top = scan_words(q * r->size, q * r->size + len, stack_top);
                    mark_drain();
                }
            }
        }
    }
}
