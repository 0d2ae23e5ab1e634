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

static struct mark_entry *stack;
static size_t stack_cap;
static size_t stack_top;
static size_t stack_limit;          /* entries the stack may grow to */
static bool overflowed;

void mark_init(void)
{
    bool found;
    stack_limit = env_size("LFGC_MARK_STACK_MAX", (size_t)1 << 24, &found);
    if (stack_limit < 16)
        stack_limit = 16;
    stack_cap = stack_limit < 65536 ? stack_limit : 65536;
    stack = mmap(NULL, stack_cap * sizeof *stack, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) {
        stack = NULL;
        stack_cap = 0;
    }
}

static bool stack_grow(void)
{
    if (stack_cap >= stack_limit)
        return false;
    size_t cap = stack_cap * 2 > stack_limit ? stack_limit : stack_cap * 2;
    void *p = stack ? mremap(stack, stack_cap * sizeof *stack, cap * sizeof *stack,
                             MREMAP_MAYMOVE)
                    : mmap(NULL, cap * sizeof *stack, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    stack = p;
    stack_cap = cap;
    return true;
}

static inline void push(uintptr_t lo, uintptr_t hi)
{
    if (unlikely(stack_top == stack_cap) && !stack_grow()) {
        if (!overflowed)
            hs.mark_overflows++;
        overflowed = true;           /* marked, not scanned: recovered later */
        return;
    }
    stack[stack_top].lo = lo;
    stack[stack_top].hi = hi;
    stack_top++;
}

/* The heart of the collector: one candidate word. */
static inline void mark_word(uintptr_t w)
{
    uint64_t c = (w >> LOWFAT_REGION_SHIFT) - LOWFAT_FIRST_REGION;
    if (c >= NUM_CLASSES)
        return;
    const struct region *r = &regions[c];
    uint64_t q = (uint64_t)(((unsigned __int128)w * r->magic) >> 64);
    uint64_t base = q * r->size;
    unsigned k = chunk_map[base >> CHUNK_SHIFT];
    if (!k)
        return;                      /* no span in use owns that slot */
    uint64_t bit = q - r->q0;
    uint64_t *word = &r->mark_bits[bit >> 6];
    uint64_t mask = 1ull << (bit & 63);
    if (*word & mask)
        return;
    *word |= mask;
    if (kinds[k - 1].ptrfree)
        return;
    uint64_t len = r->large ? r->spans[(base - r->start) >> CHUNK_SHIFT].obj_bytes
                            : r->size;
    __builtin_prefetch((void *)base);
    push(base, base + len);
}

static inline void scan_words(uintptr_t lo, uintptr_t hi)
{
    for (const uintptr_t *p = (const uintptr_t *)lo; (uintptr_t)(p + 1) <= hi; p++)
        mark_word(*p);
}

void mark_drain(void)
{
    while (stack_top) {
        struct mark_entry e = stack[--stack_top];
        if (e.hi - e.lo > MARK_SLICE) {
            push(e.lo + MARK_SLICE, e.hi);
            e.hi = e.lo + MARK_SLICE;
        }
        scan_words(e.lo, e.hi);
    }
}

void mark_range(const void *lo, const void *hi)
{
    uintptr_t a = ((uintptr_t)lo + 7) & ~(uintptr_t)7;
    uintptr_t b = (uintptr_t)hi;
    /* Scan in slices and drain as we go, so that the stack stays small. */
    while (a < b) {
        uintptr_t end = b - a > 65536 ? a + 65536 : b;
        scan_words(a, end);
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
    stack_top = 0;
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
                    push(q * r->size, q * r->size + len);
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
                    scan_words(q * r->size, q * r->size + len);
                    mark_drain();
                }
            }
        }
    }
}
