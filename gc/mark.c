/* mark.c: the mark phase, on one or several marker threads.
 *
 * Each candidate word costs one shift and one compare when it is not a
 * heap address.  Otherwise the reciprocal gives the slot number and the
 * base, the chunk map says whether a span in use owns that slot and what
 * kind it is, and the region's bitmap gets the bit.  Objects to scan go on
 * the marker's own stack; when the stack cannot grow, entries are dropped
 * and the heap is rescanned for marked objects afterwards (overflow
 * recovery).
 *
 * With several markers (GC_MARKERS, default: the number of cores) the
 * collecting thread scans the roots while helper threads wait; a marker
 * whose stack is deep while others are idle moves its oldest entries (the
 * largest unexplored parts of the graph) to a shared list of packets.
 * Mark bits are then set with an atomic OR, after a plain read that
 * filters out the common already-marked case.  Marking ends when every
 * marker is idle and no packet is left.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* A mark stack holds words.  An object to scan is one word, its base: its
 * length follows from its region, as everything else does.  A range that
 * is not a whole object (the rest of a sliced large object, part of an old
 * object on a written page) is two words, its end and then its start with
 * RANGE_TAG set, on top.  Deep stacks (a random graph's) take half the
 * memory that (start, end) pairs did: 16 MiB less per marker at 256 MiB
 * of live data. */
#define RANGE_TAG ((uintptr_t)1)
/* An object whose kind is not scanned word by word carries
 * MARK_DISPATCH_TAG (bit 1): popping it looks its kind up.  Slot bases
 * are 16-byte aligned, so both tags are free bits, tested together once
 * per popped entry.  A range with both tags is the part [lo, hi) of an
 * object of a precise kind (a slice of a long one, or the words of an old
 * one on a written page): only the words in it that the kind's descriptor
 * names are scanned. */
#define ENTRY_TAGS (RANGE_TAG | MARK_DISPATCH_TAG)

/* What is scanned next, decoded. */
struct mark_entry {
    uintptr_t lo, hi;
};

/* Ranges longer than this are scanned a slice at a time, so that a huge
 * object does not keep the stack from draining (and can be shared). */
#define MARK_SLICE 4096u
/* Objects leave a stack through a small FIFO: each is prefetched when it
 * enters and scanned PREFETCH_DEPTH objects later, by when its cache line
 * has arrived.  Marking is pointer chasing; this hides most misses. */
#define PREFETCH_DEPTH 8
#define MAX_MARKERS 16
/* A packet fills one page exactly: each is its own mapping, and with 512
 * words its 16-byte header spilled into a second page, doubling the
 * resident memory of the packets (1.3 MB of them on a 100,000-node list). */
#define PACKET_WORDS (PAGE_SIZE / sizeof(uintptr_t) - 2)
/* pause instructions an idle marker spins before it sleeps: about 50 us
 * on the AMD EPYC machines this was measured on (a pause's length varies
 * between CPUs).  Ten times as long spent a tenth of the CPU time of
 * Whippet's mt-gcbench spinning, and lengthened its pauses on a loaded
 * machine (docs/performance.md, "Whippet"). */
#define IDLE_SPINS 2000
/* Below this much to scan, one marker is faster (about 1 ms of marking);
 * a serial mark that has scanned this much wakes the helpers. */
#define PARALLEL_MIN_LIVE ((uint64_t)4 << 20)
/* A marker shares work once its stack is at least this deep (words) and
 * some marker could take it. */
#define SHARE_MIN 16

struct marker {
    uintptr_t *stack;             /* words [stack, top)                  */
    uintptr_t *top;
    uintptr_t *end;
    pthread_t thread;
    unsigned id;
    /* What dispatch() leaves to scan as a plain range (through the
     * marker, not a pointer to the caller's entry: the hot loop keeps its
     * entries in registers). */
    uintptr_t plain_lo, plain_hi;
    bool atomic;                  /* marks atomically (for mark procedures) */
};

struct packet {
    struct packet *next;
    size_t n;
    uintptr_t w[PACKET_WORDS];
};
_Static_assert(sizeof(struct packet) == PAGE_SIZE, "a packet is one page");

/* The module's state.  Not scanned: it holds no heap pointers (stacks
 * and packets are mappings of their own).  All zero at start, so that it
 * takes no file-backed pages (LF_UNSCANNED_BSS). */
static LF_UNSCANNED_BSS struct mark_state {
    /* The markers */
    struct marker markers[MAX_MARKERS];     /* 0: the collecting thread's */
    unsigned num_helpers;       /* markers besides the collecting thread:
                                   GC_MARKERS - 1, else the cores - 1      */
    unsigned helpers_started;   /* helper threads running                   */
    size_t stack_limit;         /* words a stack may grow to                */
    volatile AO_t overflowed;   /* a stack dropped entries: the heap is
                                   rescanned for marked objects             */
    /* Ranges a full stack dropped, pushed again by the recovery: not all
     * are part of a marked object, which its rescan would find (roots,
     * the contents disclaim and finalization push, GC_push_all's).  Words
     * as on a stack (hi, then lo with its tags); under work_lock. */
    uintptr_t *dropped;
    size_t dropped_n, dropped_cap;

    /* Sharing work, under work_lock */
    pthread_mutex_t work_lock;
    pthread_cond_t work_cond;   /* work was shared, or the cycle is done:
                                   idle markers and sleeping helpers wait  */
    pthread_cond_t done_cond;   /* the last helper left the cycle           */
    struct packet *work_list;   /* shared work                              */
    struct packet *spare_packets;   /* emptied packets, for the next share  */
    volatile AO_t idle_markers;     /* joined markers waiting for work      */
    volatile AO_t sleeping_helpers; /* helpers outside any cycle: a marker
                                       with a deep stack shares for them    */
    unsigned active_markers;    /* markers taking part this cycle           */
    unsigned helpers_busy;      /* helpers that joined this cycle           */
    bool cycle_open;            /* a parallel mark is in progress           */
    volatile AO_t work_done;    /* every marker idle and no packet left     */

    /* This mark */
    bool indirect_procs;        /* some span holds objects whose descriptor
                                   names a mark procedure
                                   (span.indirect_procs): minor collections
                                   look for them                            */
    bool parallel_now;          /* this cycle uses several markers          */
    bool recovering;            /* overflow recovery: marker 0 alone        */
    bool serial_only;           /* finalization: marker 0 alone             */
    int64_t serial_budget;      /* bytes marker 0 scans before helpers join */
    unsigned requested_markers; /* GC_set_markers_count, 0: unset           */
} marking = {
    .work_lock = PTHREAD_MUTEX_INITIALIZER,
    .work_cond = PTHREAD_COND_INITIALIZER,
    .done_cond = PTHREAD_COND_INITIALIZER,
};

static void mark_recover_overflow(void);

/* ------------------------------------------------------------------ */
/* Stacks                                                              */

/* Words of a helper's new stack made present at once: its first hand-off
 * must not wait on page faults.  Marker 0's stack (made at start-up, also
 * in a malloc-only process, which never marks) is left to fault in as
 * marking reaches it, at most once: a small program should not pay a
 * stack in resident memory (marker 0's 1 MiB was a third of a small
 * program's peak RSS; 64 KiB of it present was 3% of a malloc-only one's). */
#define STACK_PREFAULT 8192

LF_MALLOC_TEXT static bool stack_init(struct marker *m, size_t cap, bool prefault)
{
    size_t bytes = cap * sizeof(uintptr_t);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    size_t hot = prefault ? (cap < STACK_PREFAULT ? cap : STACK_PREFAULT) * sizeof(uintptr_t) : 0;
    for (size_t off = 0; off < hot; off += 4096)
        ((volatile char *)p)[off] = 0;
    m->stack = m->top = p;
    m->end = m->stack + cap;
    return true;
}

static bool stack_grow(struct marker *m)
{
    size_t cap = (size_t)(m->end - m->stack);
    if (cap >= marking.stack_limit)
        return false;
    size_t used = (size_t)(m->top - m->stack);
    size_t ncap = cap * 2 > marking.stack_limit ? marking.stack_limit : cap * 2;
    void *p = mremap(m->stack, cap * sizeof(uintptr_t), ncap * sizeof(uintptr_t),
                     MREMAP_MAYMOVE);
    if (p == MAP_FAILED)
        return false;
    m->stack = p;
    m->top = m->stack + used;
    m->end = m->stack + ncap;
    return true;
}

/* Keep the ranges among the stack entries w[0, n) that are dropped: an
 * object's base needs nothing (it is marked, and the recovery rescans
 * marked objects).  Out of memory here, the mark cannot be completed. */
static __attribute__((cold)) void keep_dropped_locked(const uintptr_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i + 1 == n || !(w[i + 1] & RANGE_TAG))
            continue;                       /* an object */
        if (!lf_array_reserve((void **)&marking.dropped, &marking.dropped_cap,
                              marking.dropped_n + 1, sizeof(uintptr_t), 4096))
            lf_abort("lfgc: out of memory for the ranges the full mark stack dropped");
        marking.dropped[marking.dropped_n++] = w[i];
        marking.dropped[marking.dropped_n++] = w[i + 1];
        i++;
    }
}

static __attribute__((cold)) void keep_dropped(const uintptr_t *w, size_t n)
{
    pthread_mutex_lock(&marking.work_lock);
    keep_dropped_locked(w, n);
    pthread_mutex_unlock(&marking.work_lock);
}

/* The stack has no room for `words` more: grow it, or drop the entry
 * (an object's base, or the range [lo, hi)) and remember to recover. */
static uintptr_t *__attribute__((noinline))
push_slow(struct marker *m, uintptr_t *top, uintptr_t lo, uintptr_t hi, size_t words)
{
    m->top = top;
    while ((size_t)(m->end - m->top) < words) {
        if (!stack_grow(m)) {
            if (words == 2) {
                uintptr_t range[2] = {hi, lo | RANGE_TAG};
                keep_dropped(range, 2);
            }
            if (AO_compare_and_swap_full(&marking.overflowed, 0, 1))
                AO_fetch_and_add1((volatile AO_t *)&lf_hs.mark_overflows);
            return m->top;           /* an object: marked, not scanned;
                                      * recovered later (an earlier growth
                                      * may have moved the stack) */
        }
    }
    top = m->top;
    if (words == 1) {
        *top++ = lo;
    } else {
        *top++ = hi;
        *top++ = lo | RANGE_TAG;
    }
    return top;
}

/* Push the range [lo, hi), lo and hi multiples of 8. */
static inline uintptr_t *push_range(struct marker *m, uintptr_t *top, uintptr_t lo,
                                    uintptr_t hi)
{
    if (unlikely(m->end - top < 2))
        return push_slow(m, top, lo, hi, 2);
    top[0] = hi;
    top[1] = lo | RANGE_TAG;
    return top + 2;
}

/* The end of the object at base, a heap slot's base. */
static inline uintptr_t object_end(uintptr_t base)
{
    const struct region *r = &lf_regions[(base >> LOWFAT_REGION_SHIFT) - LOWFAT_FIRST_REGION];
    return base + (r->large ? span_at(r, (base - r->start) >> CHUNK_SHIFT)->obj_bytes : r->size);
}

/* ------------------------------------------------------------------ */
/* The heart of the collector: one candidate word.  Returns the new top of
 * the mark stack, which the callers keep in a register.  `atomic` and
 * `base_only` (interior pointers off: lf_base_only) are constants at the
 * hot call sites: the default copies carry no offset check at all.
 * `bounded`, for words of roots, stacks and mark procedures (where most
 * numbers that are no pointers are), looks a word up in the chunk map
 * only within the chunks handed out (chunk_kind), so that such words make
 * no page of it resident; words of heap objects skip that test, which
 * would add 1.4 instructions per word marked to the drain loop
 * (docs/design.md, Blacklisting). */
static inline __attribute__((always_inline)) uintptr_t *
mark_word_in(struct marker *m, uintptr_t w, uintptr_t *top, const bool atomic,
             const bool base_only, const bool bounded)
{
    uint64_t c = (w >> LOWFAT_REGION_SHIFT) - LOWFAT_FIRST_REGION;
    if (c >= NUM_CLASSES)
        return top;
    const struct region *r = &lf_regions[c];
    uint64_t q = (uint64_t)(((unsigned __int128)w * r->magic) >> 64);
    uint64_t base = q * r->size;
    unsigned k = bounded ? chunk_kind(r, base) : lf_chunk_map[chunk_entry(base)];
    if (unlikely(!k)) {
        /* No span in use owns that slot: not a pointer, but it would pin
         * what is allocated there later (blacklist.c). */
        blacklist_hit(r, base);
        return top;
    }
    lf_assert(base >= r->start && base < r->usable_end);   /* in the bitmap */
    uint64_t bit = q - r->q0;
    uint64_t *word = &r->mark_bits[bit >> 6];
    /* The 1 is made here, by a move the shift needs anyway: hoisted out
     * of the loop, it took a register that the pop path reuses, and was
     * made again for every object scanned. */
    uint64_t one = 1;
    __asm__ volatile("" : "+r"(one));
    uint64_t mask = one << (bit & 63);
    if (*word & mask)
        return top;
    if (base_only && !displacement_valid(w - base))
        return top;
    if (atomic) {
        /* Two markers racing for one object may both scan it: harmless,
         * and cheaper than learning who won. */
        AO_or((volatile AO_t *)word, mask);
    } else {
        *word |= mask;
    }
    unsigned action = lf_kind_mark[k];
    if (unlikely(action)) {
        if (action & MARK_NO_SCAN)
            return top;
        base |= MARK_DISPATCH_TAG;
    }
    if (unlikely(top == m->end))
        return push_slow(m, top, base, 0, 1);
    *top = base;
    return top + 1;
}

static inline __attribute__((always_inline)) uintptr_t *
mark_word(struct marker *m, uintptr_t w, uintptr_t *top, const bool atomic,
          const bool base_only)
{
    return mark_word_in(m, w, top, atomic, base_only, false);
}

static inline __attribute__((always_inline)) uintptr_t *
scan_words_in(struct marker *m, uintptr_t lo, uintptr_t hi, uintptr_t *top, const bool atomic,
              const bool base_only, const bool bounded)
{
    for (const uintptr_t *p = (const uintptr_t *)lo; (uintptr_t)(p + 1) <= hi; p++)
        top = mark_word_in(m, *p, top, atomic, base_only, bounded);
    return top;
}

static inline __attribute__((always_inline)) uintptr_t *
scan_words(struct marker *m, uintptr_t lo, uintptr_t hi, uintptr_t *top, const bool atomic,
           const bool base_only)
{
    return scan_words_in(m, lo, hi, top, atomic, base_only, false);
}

/* ------------------------------------------------------------------ */
/* Mark procedures (bdwgc's gc_mark.h)                                 */

/* The marker running a mark procedure on this thread, NULL outside one:
 * what GC_mark_and_push and GC_push_all find their stack through. */
static __thread struct marker *proc_marker __attribute__((tls_model("initial-exec")));

/* Room a procedure is told it has: the pointers it gets name the marker
 * and are never dereferenced, so the limit only has to lie beyond. */
#define PROC_STACK_ROOM ((size_t)1 << 16)

/* Call mark procedure proc (descriptor d) on the object at obj; returns
 * the new top. */
static __attribute__((noinline)) uintptr_t *
call_proc(struct marker *m, uintptr_t *top, uintptr_t obj, GC_mark_proc proc, uintptr_t d,
          bool atomic)
{
    m->top = top;
    m->atomic = atomic;
    struct marker *outer = proc_marker;
    proc_marker = m;
    struct GC_ms_entry *msp = (struct GC_ms_entry *)m;
    proc((GC_word *)obj, msp, msp + PROC_STACK_ROOM, descr_proc_env(d));
    proc_marker = outer;
    return m->top;
}

LFGC_EXPORT struct GC_ms_entry *GC_mark_and_push(void *obj, struct GC_ms_entry *msp,
                                                 struct GC_ms_entry *lim, void **src)
{
    (void)lim;
    (void)src;
    struct marker *m = proc_marker;
    if (unlikely(!m || msp != (struct GC_ms_entry *)m))
        lf_abort("lfgc: GC_mark_and_push called outside a mark procedure, or with a "
                 "mark-stack pointer its procedure was not given");
    m->top = m->atomic ? mark_word_in(m, (uintptr_t)obj, m->top, true, lf_base_only, true)
                       : mark_word_in(m, (uintptr_t)obj, m->top, false, lf_base_only, true);
    return msp;
}

/* ------------------------------------------------------------------ */
/* Precise kinds: the words a descriptor names                         */

/* Pick the copy of an always_inline scanner specialised for `atomic` and
 * for interior pointers off (lf_base_only). */
#define SPECIALISED(fn, ...)                                                  \
    (atomic ? (lf_base_only ? fn(__VA_ARGS__, true, true) : fn(__VA_ARGS__, true, false))  \
            : (lf_base_only ? fn(__VA_ARGS__, false, true) : fn(__VA_ARGS__, false, false)))

/* A bitmap descriptor's words (word i where bit 63 - i is set) of the
 * object at obj that lie in [lo, hi). */
static inline __attribute__((always_inline)) uintptr_t *
scan_bitmap(struct marker *m, uintptr_t *top, uintptr_t obj, uint64_t bits, uintptr_t lo,
            uintptr_t hi, const bool atomic, const bool base_only)
{
    bits &= ~(uint64_t)GC_DS_TAGS;
    while (bits) {
        unsigned i = (unsigned)__builtin_clzll(bits);
        uintptr_t p = obj + 8 * (uintptr_t)i;
        if (p + 8 > hi)
            break;
        bits &= ~((uint64_t)1 << (63 - i));
        if (p >= lo)
            top = mark_word(m, *(const uintptr_t *)p, top, atomic, base_only);
    }
    return top;
}

/* A long bitmap's words (word i where bit i is set) of the object at obj
 * that lie in [lo, hi), lo >= obj. */
static inline __attribute__((always_inline)) uintptr_t *
scan_long_bitmap(struct marker *m, uintptr_t *top, uintptr_t obj, const struct lf_long_bitmap *lb,
                 uintptr_t lo, uintptr_t hi, const bool atomic, const bool base_only)
{
    uint64_t i = (lo - obj + 7) / 8, limit = (hi - obj) / 8;
    if (limit > lb->nbits)
        limit = lb->nbits;
    while (i < limit) {
        uint64_t w = lb->bits[i >> 6] >> (i & 63);
        if (!w) {
            i = (i | 63) + 1;
            continue;
        }
        i += (uint64_t)__builtin_ctzll(w);
        if (i >= limit)
            break;
        top = mark_word(m, ((const uintptr_t *)obj)[i], top, atomic, base_only);
        i++;
    }
    return top;
}

/* Leave the part [lo + MARK_SLICE, hi) of a long object of a precise kind
 * on the stack, to be scanned later (and shared); the new end of the part
 * to scan now. */
static uintptr_t *slice_precise(struct marker *m, uintptr_t *top, uintptr_t lo, uintptr_t *hi)
{
    if (*hi - lo > MARK_SLICE) {
        top = push_range(m, top, (lo + MARK_SLICE) | MARK_DISPATCH_TAG, *hi);
        *hi = lo + MARK_SLICE;
    }
    return top;
}

/* Flag the span owning the slot obj lies in (obj may be an array's
 * element, past the chunk of its slot's base).  Every object whose
 * descriptor, read from it, names a procedure comes here (each gcj object
 * of such a type): inline, and a division only for spans of several
 * chunks. */
static inline void note_indirect_proc(uintptr_t obj)
{
    const struct region *r = &lf_regions[(obj >> LOWFAT_REGION_SHIFT) - LOWFAT_FIRST_REGION];
    uint64_t base = (uint64_t)(((unsigned __int128)obj * r->magic) >> 64) * r->size;
    uint64_t j = (base - r->start) >> CHUNK_SHIFT;
    if (unlikely(r->span_chunks != 1))
        j = j / r->span_chunks * r->span_chunks;
    struct span *s = span_at(r, j);
    if (unlikely(!__atomic_load_n(&s->indirect_procs, __ATOMIC_RELAXED))) {
        __atomic_store_n(&s->indirect_procs, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&marking.indirect_procs, true, __ATOMIC_RELAXED);
    }
}

/* GC_DS_PER_OBJECT: the descriptor of the object at [obj, end), read at a
 * byte offset in it, or (a negative offset) in the record its first word
 * points to.  False when the offset lies outside the object. */
static bool per_object_descr(uintptr_t d, uintptr_t obj, uintptr_t end, uintptr_t *out)
{
    intptr_t off = (intptr_t)(d & ~(uintptr_t)GC_DS_TAGS);
    if (off >= 0) {
        if ((uintptr_t)off + 8 > end - obj)
            return false;
        *out = *(const uintptr_t *)(obj + (uintptr_t)off);
        return true;
    }
    uintptr_t rec = *(const uintptr_t *)obj;
    /* No record yet: a new object whose type is not set, still zero. */
    *out = rec ? *(const uintptr_t *)(rec - (uintptr_t)(off + GC_INDIR_PER_OBJ_BIAS)) : 0;
    return true;
}

/* Descriptors inside descriptors (a per-object descriptor that is one
 * again) are followed this deep; deeper, the object is scanned whole. */
#define PER_OBJECT_DEPTH 4

/* Where descriptors are scanned (descr_calls_proc and kinds.c only ask
 * what one names).  Scan, of the object (or array
 * element) [obj, end), the words in [lo, hi) that descriptor d names.  A
 * length descriptor's prefix is a plain range: with e, it is returned
 * there for the caller to scan (in slices, prefetched); without, scanned
 * here.  Returns the new top. */
static uintptr_t *scan_descr(struct marker *m, uintptr_t *top, uintptr_t obj, uintptr_t end,
                             uintptr_t lo, uintptr_t hi, uintptr_t d, bool atomic,
                             struct mark_entry *e, unsigned depth)
{
    if (lo < obj)
        lo = obj;
    if (hi > end)
        hi = end;
    if (lo >= hi)
        return top;
    switch (d & GC_DS_TAGS) {
    case GC_DS_LENGTH:
        if (d < end - obj && obj + d < hi)
            hi = obj + d;
        if (lo >= hi)
            return top;
        break;                              /* [lo, hi): a plain range */
    case GC_DS_BITMAP:
        return SPECIALISED(scan_bitmap, m, top, obj, d, lo, hi);
    case GC_DS_PROC: {
        const struct lf_long_bitmap *lb = descr_long_bitmap(d);
        if (lb) {
            if (e)
                top = slice_precise(m, top, lo, &hi);
            return SPECIALISED(scan_long_bitmap, m, top, obj, lb, lo, hi);
        }
        GC_mark_proc fn = __atomic_load_n(&lf_mark_procs[descr_proc_index(d)], __ATOMIC_ACQUIRE);
        if (likely(fn)) {
            /* Not a procedure kind's own descriptor (depth 0, an entry):
             * one read from the object or its record, or a typed array's
             * element descriptor.  Its kind is not rescanned whole by
             * minor collections: the span is. */
            if (depth || !e)
                note_indirect_proc(obj);
            return call_proc(m, top, obj, fn, d, atomic);
        }
        /* An index no procedure has (a descriptor found in an object): the
         * object is scanned whole, conservatively. */
        break;
    }
    default: {                              /* GC_DS_PER_OBJECT */
        uintptr_t inner;
        if (depth < PER_OBJECT_DEPTH && per_object_descr(d, obj, end, &inner))
            return inner ? scan_descr(m, top, obj, end, lo, hi, inner, atomic, e, depth + 1)
                         : top;
        break;                              /* bad offset: whole, conservatively */
    }
    }
    if (e) {
        e->lo = lo;
        e->hi = hi;
        return top;
    }
    return SPECIALISED(scan_words, m, lo, hi, top);
}

/* GC_calloc_explicitly_typed's arrays end with three words: the count, the
 * element size and the element's descriptor (typed.c).  Decoded in this
 * one place, for the marker and for minor collections' question
 * (object_calls_proc), so that both take the same trailers for typed.c's. */
struct typed_trailer {
    uint64_t n, esize, ed;
};
enum trailer_state {
    TRAILER_UNSET,          /* not set up yet: all zero, nothing to scan   */
    TRAILER_OK,
    TRAILER_BAD,            /* not one of typed.c's (the program wrote over
                               it): the whole object, conservatively      */
};

static enum trailer_state typed_trailer(uintptr_t base, uintptr_t end, struct typed_trailer *t)
{
    if (end - base < 3 * 8)
        return TRAILER_UNSET;
    const uint64_t *w = (const uint64_t *)(end - 3 * 8);
    t->n = w[0];
    t->esize = w[1];
    t->ed = w[2];
    if (!t->n)
        return TRAILER_UNSET;
    if (!t->esize || t->esize % 8 || t->n > (end - base - 3 * 8) / t->esize)
        return TRAILER_BAD;
    return TRAILER_OK;
}

/* The elements in [lo, hi) of the array at [base, end), each as its
 * descriptor says. */
static uintptr_t *scan_typed_array(struct marker *m, uintptr_t *top, uintptr_t base,
                                   uintptr_t end, uintptr_t lo, uintptr_t hi, bool atomic,
                                   struct mark_entry *e)
{
    struct typed_trailer t;
    switch (typed_trailer(base, end, &t)) {
    case TRAILER_UNSET:
        return top;
    case TRAILER_BAD:
        e->lo = lo > base ? lo : base;
        e->hi = hi < end ? hi : end;
        return top;
    case TRAILER_OK:
        break;
    }
    uintptr_t aend = base + t.n * t.esize;
    if (hi > aend)
        hi = aend;
    if (lo >= hi)
        return top;
    top = slice_precise(m, top, lo, &hi);
    for (uintptr_t el = base + (lo - base) / t.esize * t.esize; el < hi; el += t.esize)
        top = scan_descr(m, top, el, el + t.esize, lo, hi, t.ed, atomic, NULL, 0);
    return top;
}

/* An entry of a kind the marker looks up: the object at base (hi =
 * UINTPTR_MAX), or its part [lo, hi).  Scans what a precise kind names
 * and leaves a plain range to scan in m->plain_lo, m->plain_hi (empty:
 * nothing). */
static uintptr_t *dispatch_entry(struct marker *m, uintptr_t *top, uintptr_t base, uintptr_t lo,
                                  uintptr_t hi, bool atomic, struct mark_entry *e)
{
    const struct kind *k = &lf_kinds[lf_chunk_map[chunk_entry(base)] - 1];
    uintptr_t end = object_end(base);
    uint64_t len = kind_scan_len(k, (const void *)base, end - base);
    e->lo = e->hi = base;
    if (!kind_precise(k)) {
        uintptr_t b = hi < base + len ? hi : base + len;
        if (lo < b) {
            e->lo = lo;
            e->hi = b;
        }
        return top;
    }
    if (!len)
        return top;                         /* a free slot */
    if (k->scan == SCAN_TYPED_ARRAY)
        return scan_typed_array(m, top, base, end, lo, hi, atomic, e);
    uintptr_t d = k->descr + (k->add_size ? end - base : 0);
    return scan_descr(m, top, base, end, lo, hi, d, atomic, e, 0);
}

/* A tagged entry (a range, a dispatched object or part), taken off the
 * stack out of line: what is left to scan as a plain range goes to
 * m->plain_lo, m->plain_hi, not through a pointer to the caller's entry,
 * so that the hot loop keeps its entries in registers. */
static __attribute__((noinline)) uintptr_t *pop_tagged(struct marker *m, uintptr_t *top,
                                                       bool atomic)
{
    struct mark_entry e;
    uintptr_t w = top[-1], lo = w & ~ENTRY_TAGS;
    if (w & RANGE_TAG) {
        uintptr_t hi = top[-2];
        top -= 2;
        if (likely(!(w & MARK_DISPATCH_TAG))) {
            e.lo = lo;
            e.hi = hi;
        } else {
            top = dispatch_entry(m, top, (uintptr_t)lowfat_base((const void *)lo), lo, hi,
                                 atomic, &e);
        }
    } else {
        top = dispatch_entry(m, top - 1, lo, lo, UINTPTR_MAX, atomic, &e);
    }
    m->plain_lo = e.lo;
    m->plain_hi = e.hi;
    return top;
}

/* Take the top entry off a non-empty stack, decoded. */
static inline __attribute__((always_inline)) uintptr_t *
pop_entry(struct marker *m, uintptr_t *top, struct mark_entry *e, const bool atomic)
{
    uintptr_t w = top[-1];
    if (unlikely(w & ENTRY_TAGS)) {
        top = pop_tagged(m, top, atomic);
        e->lo = m->plain_lo;
        e->hi = m->plain_hi;
        return top;
    }
    e->lo = w;
    e->hi = object_end(w);
    return top - 1;
}

/* ------------------------------------------------------------------ */
/* Sharing work between markers                                        */

/* How many of the words [w, w + n) can move together without splitting a
 * range (whose tagged start lies just above its end). */
static size_t whole_entries(const uintptr_t *w, size_t n, size_t have)
{
    if (n > 0 && n < have && (w[n] & RANGE_TAG))
        n--;
    return n;
}

/* Move the oldest entries of m's stack to the shared list. */
static void share(struct marker *m)
{
    size_t have = (size_t)(m->top - m->stack);
    size_t n = whole_entries(m->stack, have / 2 > PACKET_WORDS ? PACKET_WORDS : have / 2, have);
    if (!n)
        return;
    pthread_mutex_lock(&marking.work_lock);
    struct packet *p = marking.spare_packets;
    if (p) {
        marking.spare_packets = p->next;
    } else {
        p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            pthread_mutex_unlock(&marking.work_lock);
            return;
        }
    }
    memcpy(p->w, m->stack, n * sizeof(uintptr_t));
    memmove(m->stack, m->stack + n, (have - n) * sizeof(uintptr_t));
    m->top -= n;
    p->n = n;
    p->next = marking.work_list;
    marking.work_list = p;
    /* Wakes an idle marker of this cycle, or a sleeping helper, which then
     * joins. */
    pthread_cond_signal(&marking.work_cond);
    pthread_mutex_unlock(&marking.work_lock);
}

/* Drain m's stack.  With a budget (serial marking only), stop once that
 * many bytes were scanned, leaving the rest on the stack; true when the
 * stack was emptied. */
static inline __attribute__((always_inline)) bool
drain_impl(struct marker *m, const bool atomic, int64_t *budget, const bool base_only)
{
    struct mark_entry ring[PREFETCH_DEPTH];
    unsigned head = 0, count = 0;
    uintptr_t *top = m->top;
    for (;;) {
        while (count < PREFETCH_DEPTH && top > m->stack) {
            struct mark_entry e;
            top = pop_entry(m, top, &e, atomic);
            if (unlikely(e.hi - e.lo > MARK_SLICE)) {
                /* Scan a slice now and leave the rest on the stack. */
                top = push_range(m, top, e.lo + MARK_SLICE, e.hi);
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
        top = scan_words(m, e.lo, e.hi, top, atomic, base_only);
        if (budget && (*budget -= (int64_t)(e.hi - e.lo)) <= 0) {
            /* Out of budget: the prefetched entries go back on the stack
             * (through push_slow when it is full, as any push). */
            while (count--) {
                unsigned i = (head + count) % PREFETCH_DEPTH;
                top = push_range(m, top, ring[i].lo, ring[i].hi);
            }
            m->top = top;
            return top == m->stack;
        }
        /* Only into an empty list: packets an idle marker has not yet
         * taken (it may wait for a core) would pile up, each a page. */
        if (atomic && top - m->stack >= SHARE_MIN && !AO_load((volatile AO_t *)&marking.work_list) &&
            (AO_load(&marking.idle_markers) || AO_load(&marking.sleeping_helpers))) {
            m->top = top;
            share(m);
            top = m->top;
        }
    }
    m->top = top;
    return true;
}

/* Interior pointers off: copies with the offset check, chosen once per
 * drain, so that the default copies are as they were. */
static __attribute__((noinline)) void drain_serial_base_only(struct marker *m)
{
    drain_impl(m, false, NULL, true);
}
static __attribute__((noinline)) void drain_parallel_base_only(struct marker *m)
{
    drain_impl(m, true, NULL, true);
}
static __attribute__((noinline)) bool drain_serial_budget_base_only(struct marker *m,
                                                                     int64_t *budget)
{
    return drain_impl(m, false, budget, true);
}

static void drain_serial(struct marker *m)
{
    if (unlikely(lf_base_only))
        drain_serial_base_only(m);
    else
        drain_impl(m, false, NULL, false);
}
static void drain_parallel(struct marker *m)
{
    if (unlikely(lf_base_only))
        drain_parallel_base_only(m);
    else
        drain_impl(m, true, NULL, false);
}
static bool drain_serial_budget(struct marker *m, int64_t *budget)
{
    if (unlikely(lf_base_only))
        return drain_serial_budget_base_only(m, budget);
    return drain_impl(m, false, budget, false);
}

static void go_parallel(void);

static void drain(struct marker *m)
{
    if (!marking.parallel_now) {
        if (!marking.helpers_started || marking.recovering || marking.serial_only) {
            drain_serial(m);
            return;
        }
        /* A collection that turns out to have much to trace wakes the
         * helpers then: its own prediction may have been wrong. */
        if (drain_serial_budget(m, &marking.serial_budget))
            return;
        go_parallel();
    }
    drain_parallel(m);
}

/* Drain, then take shared work until every marker is idle and nothing is
 * left. */
static void mark_until_done(struct marker *m)
{
    for (;;) {
        drain_parallel(m);
        pthread_mutex_lock(&marking.work_lock);
        struct packet *p = NULL;
        for (;;) {
            if (marking.work_list) {
                p = marking.work_list;
                marking.work_list = p->next;
                break;
            }
            if (marking.work_done)
                break;
            AO_t idle = AO_fetch_and_add1_full(&marking.idle_markers) + 1;
            if (idle == marking.active_markers) {
                AO_store_release(&marking.work_done, 1);
                AO_fetch_and_sub1_full(&marking.idle_markers);
                pthread_cond_broadcast(&marking.work_cond);
                break;
            }
            /* Work usually comes back within microseconds: spin on the
             * shared list before paying for a sleep and a wake-up. */
            pthread_mutex_unlock(&marking.work_lock);
            for (unsigned i = 0; i < IDLE_SPINS; i++) {
                if (AO_load_acquire((volatile AO_t *)&marking.work_list) ||
                    AO_load_acquire(&marking.work_done))
                    break;
                __builtin_ia32_pause();
            }
            pthread_mutex_lock(&marking.work_lock);
            if (!marking.work_list && !marking.work_done)
                pthread_cond_wait(&marking.work_cond, &marking.work_lock);
            AO_fetch_and_sub1_full(&marking.idle_markers);
        }
        if (!p) {
            pthread_mutex_unlock(&marking.work_lock);
            return;
        }
        size_t n = p->n;
        while ((size_t)(m->end - m->top) < n && stack_grow(m))
            ;
        if ((size_t)(m->end - m->top) < n) {
            /* Cannot take it all: drop the rest (whole entries) and fall
             * into overflow mode. */
            AO_store_full(&marking.overflowed, 1);
            size_t all = n;
            n = whole_entries(p->w, (size_t)(m->end - m->top), n);
            keep_dropped_locked(p->w + n, all - n);
        }
        memcpy(m->top, p->w, n * sizeof(uintptr_t));
        m->top += n;
        p->next = marking.spare_packets;
        marking.spare_packets = p;
        pthread_mutex_unlock(&marking.work_lock);
    }
}

/* Helpers sleep until a marker shares work, then join the cycle and mark
 * until it ends.  A small heap never wakes them. */
static void *helper_main(void *arg)
{
    struct marker *m = arg;
    for (;;) {
        pthread_mutex_lock(&marking.work_lock);
        AO_fetch_and_add1_full(&marking.sleeping_helpers);
        while (!(marking.cycle_open && !marking.work_done && marking.work_list))
            pthread_cond_wait(&marking.work_cond, &marking.work_lock);
        AO_fetch_and_sub1_full(&marking.sleeping_helpers);
        marking.active_markers++;
        marking.helpers_busy++;
        pthread_mutex_unlock(&marking.work_lock);

        mark_until_done(m);

        pthread_mutex_lock(&marking.work_lock);
        if (--marking.helpers_busy == 0)
            pthread_cond_broadcast(&marking.done_cond);
        pthread_mutex_unlock(&marking.work_lock);
    }
    return NULL;
}

static void start_helpers(void)
{
    sigset_t all, old;
    sigfillset(&all);
    /* Helpers never run client code: keep every signal away from them. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (unsigned i = marking.helpers_started + 1; i <= marking.num_helpers; i++) {
        if (!marking.markers[i].stack && !stack_init(&marking.markers[i], 4096, true))
            break;
        if (pthread_create(&marking.markers[i].thread, NULL, helper_main, &marking.markers[i]) != 0)
            break;
        marking.helpers_started = i;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ------------------------------------------------------------------ */
/* Phases, called by the collector with the world stopped              */

void lf_mark_set_markers(unsigned n)
{
    marking.requested_markers = n;
}

LF_MALLOC_TEXT void lf_mark_init(void)
{
    bool found;
    marking.stack_limit = lf_env_size(LF_STR("LFGC_MARK_STACK_MAX"), (size_t)1 << 24, &found);
    if (marking.stack_limit < 16)
        marking.stack_limit = 16;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t n = lf_env_size(LF_STR("GC_MARKERS"), cores > 0 ? (size_t)cores : 1, &found);
    if (marking.requested_markers)
        n = marking.requested_markers;
    if (n < 1)
        n = 1;
    if (n > MAX_MARKERS)
        n = MAX_MARKERS;
    marking.num_helpers = (unsigned)n - 1;
    for (unsigned i = 0; i < MAX_MARKERS; i++)
        marking.markers[i].id = i;
    stack_init(&marking.markers[0], marking.stack_limit < 65536 ? marking.stack_limit : 65536,
               false);
}

LF_MALLOC_TEXT unsigned lf_mark_markers(void)
{
    return marking.num_helpers + 1;
}

/* Before the world stops: start the helper threads the first time (and
 * after fork), so that creating them is not part of a pause. */
void lf_mark_prepare(void)
{
    if (marking.helpers_started < marking.num_helpers)
        start_helpers();
}

/* Open a parallel cycle: helpers join once work is shared. */
static void go_parallel(void)
{
    pthread_mutex_lock(&marking.work_lock);
    marking.active_markers = 1;
    marking.helpers_busy = 0;
    AO_store(&marking.idle_markers, 0);
    AO_store(&marking.work_done, 0);
    marking.cycle_open = true;
    pthread_mutex_unlock(&marking.work_lock);
    marking.parallel_now = true;
}

/* Begin a mark.  Waking a helper costs tens of microseconds or more: the
 * mark is parallel from the start only when there is enough to scan (as
 * the last similar collection found); otherwise it goes parallel once
 * marker 0 alone has scanned that much. */
void lf_mark_begin(uint64_t expected_bytes)
{
    AO_store_full(&marking.overflowed, 0);
    marking.markers[0].top = marking.markers[0].stack;
    marking.parallel_now = false;
    marking.serial_budget = (int64_t)PARALLEL_MIN_LIVE;
    if (marking.helpers_started > 0 && expected_bytes >= PARALLEL_MIN_LIVE)
        go_parallel();
}

void lf_mark_range(const void *lo, const void *hi)
{
    struct marker *m = &marking.markers[0];
    uintptr_t a = ((uintptr_t)lo + 7) & ~(uintptr_t)7;
    uintptr_t b = (uintptr_t)hi;
    /* Scan in slices and drain as we go, so that the stack stays small. */
    while (a < b) {
        uintptr_t end = b - a > 65536 ? a + 65536 : b;
        m->top = marking.parallel_now ? scan_words_in(m, a, end, m->top, true, lf_base_only, true)
                              : scan_words_in(m, a, end, m->top, false, lf_base_only, true);
        drain(m);
        a = end;
    }
}

/* Interior pointers off: a word of a stack that points into an object
 * in use is taken as its base, as bdwgc takes any interior pointer from
 * stacks and registers.  Other words go as they are (blacklisting sees
 * them as before). */
void lf_mark_stack_range(const void *lo, const void *hi)
{
    if (likely(!lf_base_only)) {
        lf_mark_range(lo, hi);
        return;
    }
    struct marker *m = &marking.markers[0];
    const uintptr_t *p = (const uintptr_t *)(((uintptr_t)lo + 7) & ~(uintptr_t)7);
    for (size_t n = 1; (uintptr_t)(p + 1) <= (uintptr_t)hi; p++, n++) {
        uintptr_t w = *p;
        if (lowfat_is_ptr((void *)w)) {
            uintptr_t base = (uintptr_t)lowfat_base((void *)w);
            if (chunk_kind(region_of((void *)w), base))
                w = base;
        }
        m->top = marking.parallel_now ? mark_word_in(m, w, m->top, true, false, true)
                              : mark_word_in(m, w, m->top, false, false, true);
        if (n % 8192 == 0)
            drain(m);
    }
    drain(m);
}

/* Queue [lo, hi) to be scanned, as a range on the mark stack: many
 * small ranges (parts of old objects on written pages) cost a push each
 * rather than a drain each.  The stack is drained once it is deep. */
#define PUSH_DRAIN_DEPTH 4096

void lf_mark_push(const void *lo, const void *hi)
{
    struct marker *m = &marking.markers[0];
    uintptr_t a = ((uintptr_t)lo + 7) & ~(uintptr_t)7;
    uintptr_t b = (uintptr_t)hi & ~(uintptr_t)7;
    if (a >= b)
        return;
    m->top = push_range(m, m->top, a, b);
    if (m->top - m->stack >= PUSH_DRAIN_DEPTH)
        drain(m);
}

void lf_mark_push_part(const void *base, const void *lo, const void *hi)
{
    const struct kind *k = &lf_kinds[lf_chunk_map[chunk_entry((uintptr_t)base)] - 1];
    if (!kind_precise(k)) {
        lf_mark_push(lo, hi);
        return;
    }
    struct marker *m = &marking.markers[0];
    uintptr_t a = ((uintptr_t)lo + 7) & ~(uintptr_t)7;
    if (a >= (uintptr_t)hi)
        return;
    m->top = push_range(m, m->top, a | MARK_DISPATCH_TAG, (uintptr_t)hi);
    if (m->top - m->stack >= PUSH_DRAIN_DEPTH)
        drain(m);
}

/* Scan now what the marked object at base (len bytes of it scanned, as
 * kind_scan_len says) reaches, as its kind says. */
static void mark_object_now(const void *base, const struct kind *k, uint64_t len)
{
    if (kind_precise(k)) {
        lf_mark_push_part(base, base, (const char *)base + len);
        drain(&marking.markers[0]);
    } else {
        lf_mark_range(base, (const char *)base + len);
    }
}

/* ------------------------------------------------------------------ */
/* The push API (gc_mark.h): roots a program adds during a collection  */

/* bdwgc's default pushes what its own marker needs; lfgc's marks those
 * roots itself, so its default does nothing.  Non-NULL, as bdwgc's: a
 * program that chains to the procedure it replaced may call it. */
static void default_push_other_roots(void)
{
}

/* A variable, as in bdwgc, whose export list leaks it: ECL reads and
 * writes it directly rather than through the calls below. */
LFGC_EXPORT LF_UNSCANNED_DATA GC_push_other_roots_proc GC_push_other_roots =
    default_push_other_roots;

void lf_mark_push_other_roots(void)
{
    GC_push_other_roots_proc fn = __atomic_load_n(&GC_push_other_roots, __ATOMIC_ACQUIRE);
    if (fn)
        fn();
}

LFGC_EXPORT void GC_set_push_other_roots(GC_push_other_roots_proc fn)
{
    __atomic_store_n(&GC_push_other_roots, fn, __ATOMIC_RELEASE);
}

LFGC_EXPORT GC_push_other_roots_proc GC_get_push_other_roots(void)
{
    return __atomic_load_n(&GC_push_other_roots, __ATOMIC_ACQUIRE);
}

/* From a mark procedure, onto its marker's stack; from the collecting
 * thread (a push-other-roots procedure), onto marker 0's; from anywhere
 * else (no collection in progress) nothing. */
static void push_range_api(void *bottom, void *top, bool now)
{
    uintptr_t a = ((uintptr_t)bottom + 7) & ~(uintptr_t)7;
    uintptr_t b = (uintptr_t)top & ~(uintptr_t)7;
    if (a >= b)
        return;
    struct marker *m = proc_marker;
    if (m) {
        m->top = push_range(m, m->top, a, b);
        return;
    }
    if (!lf_collect_in_progress() || !lf_world_stopped_by_self())
        return;
    if (now)
        lf_mark_range((const void *)a, (const void *)b);
    else
        lf_mark_push((const void *)a, (const void *)b);
}

LFGC_EXPORT void GC_push_all(void *bottom, void *top)
{
    push_range_api(bottom, top, false);
}

LFGC_EXPORT void GC_push_all_eager(void *bottom, void *top)
{
    push_range_api(bottom, top, true);
}

LFGC_EXPORT void GC_push_conditional(void *bottom, void *top, int all)
{
    (void)all;
    push_range_api(bottom, top, false);
}

/* lfgc's finalization tables are marked by finalize.c anyway. */
LFGC_EXPORT void GC_push_finalizer_structures(void)
{
}

/* Finish the mark: all markers drain the shared work to the end, then
 * overflows are recovered. */
void lf_mark_finish(void)
{
    if (!marking.parallel_now)
        drain(&marking.markers[0]);         /* may go parallel */
    if (marking.parallel_now) {
        mark_until_done(&marking.markers[0]);
        pthread_mutex_lock(&marking.work_lock);
        while (marking.helpers_busy)
            pthread_cond_wait(&marking.done_cond, &marking.work_lock);
        marking.cycle_open = false;
        pthread_mutex_unlock(&marking.work_lock);
    }
    mark_recover_overflow();
    /* Finalization marks more after this, on this thread: serially until
     * it has enough to wake the helpers again. */
    marking.parallel_now = false;
}

/* After fork() only the forking thread exists: helpers must be made anew. */
LF_MALLOC_TEXT void lf_mark_after_fork(void)
{
    marking.helpers_started = 0;
    AO_store(&marking.sleeping_helpers, 0);
    marking.cycle_open = false;
    pthread_mutex_init(&marking.work_lock, NULL);
    pthread_cond_init(&marking.work_cond, NULL);
    pthread_cond_init(&marking.done_cond, NULL);
    marking.work_list = NULL;
}

/* ------------------------------------------------------------------ */
/* Queries and marks for finalization, after lf_mark_finish, world stopped */

/* Finalization marks from many small objects, one at a time: waking the
 * helpers for each would cost more than the marking. */
void lf_mark_serial(bool on)
{
    marking.serial_only = on;
}

bool lf_mark_is_set(const void *p)
{
    return lf_mark_ref_is_set(lf_mark_ref(p));
}

bool lf_mark_in_object(const void *p)
{
    struct region *r;
    uint64_t q;
    return lf_object_of(p, &r, &q) && (r->large || !slot_is_free((void *)(q * r->size)));
}

void lf_mark_object(const void *p)
{
    uintptr_t w = (uintptr_t)p;
    lf_mark_range(&w, &w + 1);
}

/* GC_register_finalizer_ignore_self's object at [base, end), slot q of r,
 * of a precise kind: its words as the marker decodes them (the words its
 * descriptor names, what its procedure pushes), less those pointing into
 * the object itself.  Its mark is set while its own words are decoded, so
 * that they push nothing into it, and cleared before what they reach is
 * traced, so that a way back to it through other objects still marks it
 * (a cycle, as bdwgc sees one).  Nothing of it is left on the stack for
 * later (a slice would be scanned with the mark cleared). */
static void contents_ignoring_self(struct region *r, uint64_t q, const struct kind *k,
                                   uintptr_t base, uintptr_t end)
{
    /* No helper may meet the object while its mark is borrowed. */
    if (marking.parallel_now)
        lf_mark_finish();
    struct marker *m = &marking.markers[0];
    uint64_t bit = q - r->q0;
    bool was_marked = bit_get(r->mark_bits, bit);
    bit_set(r->mark_bits, bit);
    uintptr_t *top = m->top;
    uintptr_t whole = base;                 /* scanned whole up to here */
    if (k->scan == SCAN_TYPED_ARRAY) {
        struct typed_trailer t;
        switch (typed_trailer(base, end, &t)) {
        case TRAILER_UNSET:
            break;
        case TRAILER_BAD:
            whole = end;
            break;
        case TRAILER_OK:
            for (uintptr_t el = base; el < base + t.n * t.esize; el += t.esize)
                top = scan_descr(m, top, el, el + t.esize, el, el + t.esize, t.ed, false, NULL,
                                 0);
            break;
        }
    } else {
        uintptr_t d = k->descr + (k->add_size ? end - base : 0);
        top = scan_descr(m, top, base, end, base, end, d, false, NULL, 0);
    }
    if (whole > base)
        top = likely(!lf_base_only) ? scan_words(m, base, whole, top, false, false)
                                    : scan_words(m, base, whole, top, false, true);
    m->top = top;
    if (!was_marked)
        bit_clear(r->mark_bits, bit);
    drain(m);
}

/* Mark what the object p points into reaches, not the object itself
 * (unless something leads back to it); with skip_self, words pointing
 * into the object are not followed. */
void lf_mark_contents(const void *p, bool skip_self)
{
    struct region *r;
    uint64_t q;
    if (!lf_object_of(p, &r, &q))
        return;
    const struct kind *k = &lf_kinds[lf_chunk_map[chunk_entry((q * r->size))] - 1];
    uintptr_t base = q * r->size, end = object_end(base);
    /* What the marker would scan of it: its kind says how much. */
    uint64_t len = kind_scan_len(k, (const void *)base, end - base);
    if (!len)
        return;
    /* A precise kind's object goes through its descriptor, as the marker
     * scans it: its words may hide references only its procedure finds. */
    if (kind_precise(k)) {
        if (skip_self)
            contents_ignoring_self(r, q, k, base, end);
        else
            mark_object_now((const void *)base, k, len);
        return;
    }
    uintptr_t skip = skip_self ? end - base : 0;
    end = base + len;
    struct marker *m = &marking.markers[0];
    if (!skip) {
        /* The marker's own loop: a push per word at most, and push_slow
         * copes with a full stack. */
        m->top = likely(!lf_base_only) ? scan_words(m, base, end, m->top, false, false)
                                       : scan_words(m, base, end, m->top, false, true);
    } else {
        for (const uintptr_t *w = (const uintptr_t *)base; (uintptr_t)(w + 1) <= end; w++) {
            if (*w - base < skip)
                continue;
            m->top = mark_word(m, *w, m->top, false, lf_base_only);
            if (m->top - m->stack >= PUSH_DRAIN_DEPTH)
                drain(m);
        }
    }
    if (m->top != m->stack)
        drain(m);
}

/* Set the mark of the object p points into, without scanning it: what it
 * reaches is marked already. */
void lf_mark_set(const void *p)
{
    struct lf_mark_ref m = lf_mark_ref(p);
    if (m.word)
        *m.word |= m.mask;
}

void lf_mark_clear_all(void)
{
    /* A full collection finds again which spans hold objects that call a
     * procedure through their descriptor. */
    bool procs = marking.indirect_procs;
    marking.indirect_procs = false;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped || !r->next_chunk)
            continue;
        uint64_t qa, qb;
        lf_span_slots(r, r->next_chunk - r->span_chunks, &qa, &qb);
        uint64_t bits = qb - r->q0;
        memset(r->mark_bits, 0, (bits + 63) / 64 * 8);
        if (procs)
            for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks)
                span_at(r, j)->indirect_procs = 0;
    }
}

/* Minor collection, before anything is marked: objects of aging spans are
 * young again.  No protected page points to them (dirty.c), so whatever
 * still reaches them is traced by this collection. */
void lf_mark_clear_aging(void)
{
    if (!lf_hs.aging_spans)
        return;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped || !r->next_chunk || r->large)
            continue;
        for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
            struct span *s = span_at(r, j);
            if (!s->aging)
                continue;
            uint64_t qa, qb;
            lf_span_slots(r, j, &qa, &qb);
            lf_bits_clear(r->mark_bits, qa - r->q0, qb - r->q0);
            s->aging = 0;
        }
    }
    lf_hs.live_aging = lf_hs.live_aging_ptrful = 0;
    lf_hs.aging_spans = 0;
}

/* Before the marks of a collection are cleared or kept: the slots that
 * were on threads' lists at the last collection were marked only to keep
 * the sweep off them.  Objects allocated from them since are young, and a
 * minor collection must trace them (and free them if dead) rather than
 * take their marks for an old object's; the slots still on lists are
 * marked again (lf_cache_mark). */
void lf_mark_clear_cached(void)
{
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        uint64_t *cached = lf_cached_bits[c] ? lf_cached_bits[c] : lf_cached_heads[c];
        if (!r->mapped)
            continue;
        for (uint64_t j = 0; j < r->next_chunk; j++) {
            struct span *s = span_at(r, j);
            if (!s->cached)
                continue;
            s->cached = 0;
            uint64_t qa, qb;
            lf_span_slots(r, j, &qa, &qb);
            /* Whole words: a neighbour's bits in a shared word are its
             * cached slots too. */
            for (uint64_t w = (qa - r->q0) >> 6; w <= (qb - 1 - r->q0) >> 6; w++) {
                r->mark_bits[w] &= ~cached[w];
                cached[w] = 0;
            }
        }
    }
}

/* Uncollectable objects are roots: mark and scan every allocated one. */
void lf_uncollectables_push(void)
{
    for_each_span_in_use(it) {
        struct region *r = it.r;
        struct span *s = it.s;
        if (!lf_kinds[s->kind].uncollectable)
            continue;
        uint64_t qa, qb;
        lf_span_slots(r, it.j, &qa, &qb);
        for (uint64_t q = qa; q < qb; q++) {
            uint64_t bit = q - r->q0;
            if (!bit_get(r->alloc_bits, bit))
                continue;
            AO_or((volatile AO_t *)&r->mark_bits[bit >> 6], 1ull << (bit & 63));
            void *base = (void *)(q * r->size);
            uint64_t len = kind_scan_len(&lf_kinds[s->kind], base,
                                         r->large ? s->obj_bytes : r->size);
            if (len)
                mark_object_now(base, &lf_kinds[s->kind], len);
        }
    }
}

/* The ranges the stacks dropped, pushed again and scanned (by marker 0:
 * the recovery's).  Those dropped meanwhile are kept for the next pass. */
static __attribute__((cold)) void push_dropped(void)
{
    struct marker *m = &marking.markers[0];
    pthread_mutex_lock(&marking.work_lock);
    uintptr_t *w = marking.dropped;
    size_t n = marking.dropped_n, cap = marking.dropped_cap;
    marking.dropped = NULL;
    marking.dropped_n = marking.dropped_cap = 0;
    pthread_mutex_unlock(&marking.work_lock);
    for (size_t i = 0; i < n; i += 2) {
        m->top = push_range(m, m->top, w[i + 1] & ~RANGE_TAG, w[i]);
        drain(m);
    }
    if (w)
        munmap(w, cap * sizeof(uintptr_t));
}

/* After an overflow some marked objects were never scanned.  Scan every
 * marked object of a scanned kind again; repeat until a pass completes
 * without overflowing.  Each pass marks more, so this terminates.  Runs
 * on the collecting thread alone. */
static void mark_recover_overflow(void)
{
    bool saved = marking.parallel_now;
    marking.parallel_now = false;
    marking.recovering = true;
    while (AO_compare_and_swap_full(&marking.overflowed, 1, 0)) {
        push_dropped();
        for_each_span_in_use(it) {
            struct region *r = it.r;
            struct span *s = it.s;
            if (lf_kinds[s->kind].ptrfree)
                continue;
            uint64_t qa, qb;
            lf_span_slots(r, it.j, &qa, &qb);
            for (uint64_t q = qa; q < qb; q++) {
                if (!bit_get(r->mark_bits, q - r->q0))
                    continue;
                void *base = (void *)(q * r->size);
                uint64_t len = kind_scan_len(&lf_kinds[s->kind], base,
                                             r->large ? s->obj_bytes : r->size);
                if (len)
                    mark_object_now(base, &lf_kinds[s->kind], len);
            }
        }
    }
    marking.recovering = false;
    marking.parallel_now = saved;
}

/* Does descriptor d, for the object (or array element) at [obj, end),
 * end in a call of a mark procedure?  Decoded as scan_descr does. */
static bool descr_calls_proc(uintptr_t d, uintptr_t obj, uintptr_t end)
{
    for (unsigned depth = 0;; depth++) {
        switch (d & GC_DS_TAGS) {
        case GC_DS_PROC:
            return !descr_long_bitmap(d) &&
                   __atomic_load_n(&lf_mark_procs[descr_proc_index(d)], __ATOMIC_ACQUIRE);
        case GC_DS_PER_OBJECT:
            if (depth >= PER_OBJECT_DEPTH || !per_object_descr(d, obj, end, &d) || !d)
                return false;
            break;
        default:
            return false;
        }
    }
}

/* Does the marked object at [base, end), of kind k, in a span where the
 * marker met indirect procedure calls, call one? */
static bool object_calls_proc(const struct kind *k, uintptr_t base, uintptr_t end)
{
    if (!kind_scan_len(k, (const void *)base, end - base))
        return false;                       /* a free slot */
    if (k->scan == SCAN_PER_OBJECT)
        return descr_calls_proc(k->descr + (k->add_size ? end - base : 0), base, end);
    struct typed_trailer t;
    if (k->scan != SCAN_TYPED_ARRAY || typed_trailer(base, end, &t) != TRAILER_OK)
        return false;                       /* none, or scanned whole */
    /* A descriptor read from each element may differ between elements. */
    uintptr_t last = (t.ed & GC_DS_TAGS) == GC_DS_PER_OBJECT ? base + t.n * t.esize
                                                             : base + t.esize;
    for (uintptr_t el = base; el < last; el += t.esize)
        if (descr_calls_proc(t.ed, el, el + t.esize))
            return true;
    return false;
}

/* A minor collection does not see writes a mark procedure reads outside
 * its object: every old object of a procedure kind is scanned again, and
 * every one of another precise kind whose descriptor names a procedure
 * (in the spans where the marker met one: span.indirect_procs). */
uint64_t lf_mark_rescan_kinds(void)
{
    uint64_t bytes = 0;
    if (!__atomic_load_n(&marking.indirect_procs, __ATOMIC_RELAXED) &&
        !__atomic_load_n(&lf_kinds_rescan_minor, __ATOMIC_RELAXED))
        return 0;
    for_each_span_in_use(it) {
        struct region *r = it.r;
        struct span *s = it.s;
        const struct kind *kd = &lf_kinds[s->kind];
        if (kd->uncollectable)
            continue;
        bool whole = kd->rescan_minor;
        if (!whole && !(s->indirect_procs && kind_precise(kd)))
            continue;
        uint64_t qa, qb;
        lf_span_slots(r, it.j, &qa, &qb);
        for (uint64_t q = qa; q < qb; q++) {
            if (!bit_get(r->mark_bits, q - r->q0))
                continue;
            uintptr_t base = q * r->size;
            uint64_t len = r->large ? s->obj_bytes : r->size;
            if (!whole && !object_calls_proc(kd, base, object_end(base)))
                continue;
            lf_mark_push_part((const void *)base, (const void *)base,
                              (const char *)base + len);
            bytes += len;
        }
    }
    return bytes;
}

/* ------------------------------------------------------------------ */
/* Mark bits (gc_mark.h)                                               */

/* The mark word and bit of the object p points into; false (reported)
 * when p is not in an object of lfgc's heap. */
static bool mark_bit_of(const void *p, const char *call, uint64_t **word, uint64_t *mask)
{
    struct lf_mark_ref m = lf_mark_ref(p);
    if (!m.word) {
        lf_warn(call, (uintptr_t)p);
        return false;
    }
    *word = m.word;
    *mask = m.mask;
    return true;
}

/* Objects of disclaim kinds waiting for their procedures have a mark of
 * their own (finalize.c, lf_disclaim_mark). */
LFGC_EXPORT int GC_is_marked(const void *p)
{
    uint64_t *w, mask;
    if (!mark_bit_of(p, "GC Warning: GC_is_marked: %p is not in lfgc's heap\n", &w, &mask))
        return 0;
    if (unlikely(AO_load(&lf_disclaim_pending))) {
        int m = lf_disclaim_mark(p, DISCLAIM_MARK_GET);
        if (m >= 0)
            return m;
    }
    return (AO_load((volatile AO_t *)w) & mask) != 0;
}

LFGC_EXPORT void GC_set_mark_bit(const void *p)
{
    uint64_t *w, mask;
    if (!mark_bit_of(p, "GC Warning: GC_set_mark_bit: %p is not in lfgc's heap\n", &w, &mask))
        return;
    if (unlikely(AO_load(&lf_disclaim_pending)) && lf_disclaim_mark(p, DISCLAIM_MARK_SET) >= 0)
        return;
    AO_or((volatile AO_t *)w, mask);
}

LFGC_EXPORT void GC_clear_mark_bit(const void *p)
{
    uint64_t *w, mask;
    if (!mark_bit_of(p, "GC Warning: GC_clear_mark_bit: %p is not in lfgc's heap\n", &w, &mask))
        return;
    if (unlikely(AO_load(&lf_disclaim_pending)) && lf_disclaim_mark(p, DISCLAIM_MARK_CLEAR) >= 0)
        return;
    AO_and((volatile AO_t *)w, ~mask);
}
