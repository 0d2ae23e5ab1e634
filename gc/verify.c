/* verify.c: looking at the heap from outside the allocator.
 *
 * - lf_slot_state(): what a slot is (free, allocated, dead awaiting the
 *   sweep, not in the heap), from the chunk map, the span state, the slot's
 *   first two words, the bitmaps and the sweep cursors.
 * - lf_heap_walk(): every slot of every span in use, with its state.
 * - lf_heap_verify(): the heap's invariants, checked one by one.
 * - lf_verify_minor_marks(): a minor collection's marks against a full
 *   trace (debug builds, LFGC_VERIFY_MINOR).
 * - lf_assert_fail(), for lf_assert() in builds configured with
 *   --enable-debug.
 *
 * Everything here may run with the world stopped, while a stopped thread
 * may hold the stdio or malloc locks: output goes through write(2) and
 * scratch memory comes from mmap.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* ------------------------------------------------------------------ */
/* Output without stdio                                                */

struct out {
    char buf[512];
    size_t n;
};

static void out_flush(struct out *o)
{
    size_t done = 0;
    while (done < o->n) {
        ssize_t w = write(2, o->buf + done, o->n - done);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    o->n = 0;
}

static void out_char(struct out *o, char c)
{
    if (o->n == sizeof o->buf)
        out_flush(o);
    o->buf[o->n++] = c;
}

static void out_str(struct out *o, const char *s)
{
    while (*s)
        out_char(o, *s++);
}

static void out_num(struct out *o, unsigned long long v, unsigned base)
{
    if (base == 16)
        out_str(o, "0x");
    if (o->n + 24 > sizeof o->buf)      /* 20 digits at most, and a NUL */
        out_flush(o);
    o->n = lf_put_num(o->buf, o->n, sizeof o->buf, v, base, false);
}

/* A small printf: %s, %p and %llu only. */
static void out_vformat(struct out *o, const char *fmt, va_list ap)
{
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            out_char(o, *f);
        } else if (f[1] == 's') {
            const char *s = va_arg(ap, const char *);
            out_str(o, s ? s : "(null)");
            f++;
        } else if (f[1] == 'p') {
            out_num(o, (uintptr_t)va_arg(ap, const void *), 16);
            f++;
        } else if (f[1] == 'l' && f[2] == 'l' && f[3] == 'u') {
            out_num(o, va_arg(ap, unsigned long long), 10);
            f += 3;
        } else {
            out_char(o, *f);
        }
    }
}

void lf_assert_fail(const char *file, int line, const char *cond)
{
    struct out o = { .n = 0 };
    out_str(&o, "lfgc: assertion failed at ");
    out_str(&o, file);
    out_char(&o, ':');
    out_num(&o, (unsigned)line, 10);
    out_str(&o, ": ");
    out_str(&o, cond);
    out_char(&o, '\n');
    out_flush(&o);
    abort();
}

/* ------------------------------------------------------------------ */
/* Slot states                                                         */

struct cursor_find {
    const struct span *span;
    unsigned c;
    bool found;
    uint64_t next;
};

/* A thread's lists of a kind; NULL if it has none. */
static struct kind_cache *kind_cache_of(struct thread_cache *tc, unsigned k)
{
    return k < NUM_CACHED_KINDS ? &tc->k[k] : tc->more[k];
}

static void cursor_find(struct thread_cache *tc, void *arg)
{
    struct cursor_find *f = arg;
    const struct kind_cache *kc = kind_cache_of(tc, f->span->kind);
    if (kc && kc->cursor[f->c].span == f->span) {
        f->found = true;
        f->next = kc->cursor[f->c].next;
    }
}

/* Bitmap index from which the unmarked slots of a span in use still await
 * the sweep: its first slot for an unswept span, the position of the
 * thread sweeping it for a span a thread claimed, its end otherwise (all
 * swept; uncollectable and large spans are never swept lazily). */
static uint64_t unswept_from(const struct region *r, const struct span *s)
{
    uint64_t j = span_chunk_index(r, s), qa, qb;
    lf_span_slots(r, j, &qa, &qb);
    if (r->large || lf_kinds[s->kind].uncollectable)
        return qb - r->q0;
    if (s->state == SPAN_UNSWEPT)
        return qa - r->q0;
    unsigned c = (unsigned)(r - lf_regions);
    if (c < NUM_SMALL_CLASSES) {
        struct cursor_find f = { s, c, false, 0 };
        lf_caches_each(cursor_find, &f);
        if (f.found)
            return f.next;
    }
    return qb - r->q0;
}

/* The state of slot q of span s in use; *from is unswept_from(), computed
 * on first need (UINT64_MAX: not yet). */
static enum lfgc_slot_state slot_state_in(const struct region *r, const struct span *s,
                                          uint64_t q, uint64_t *from)
{
    if (r->large)
        return LFGC_SLOT_ALLOCATED;     /* dead large objects are freed at once */
    uint64_t bit = q - r->q0;
    /* malloc's: free ones show the canary; no sweep, no allocated bit. */
    if (lf_kinds[s->kind].manual)
        return slot_is_free((void *)(q * r->size)) ? LFGC_SLOT_FREE : LFGC_SLOT_ALLOCATED;
    if (lf_kinds[s->kind].uncollectable)
        return bit_get(r->alloc_bits, bit) ? LFGC_SLOT_ALLOCATED : LFGC_SLOT_FREE;
    if (slot_is_free((void *)(q * r->size)))
        return LFGC_SLOT_FREE;
    if (bit_get(r->mark_bits, bit))
        return LFGC_SLOT_ALLOCATED;
    /* Unmarked: allocated since the last collection, or dead and not yet
     * swept. */
    if (*from == UINT64_MAX)
        *from = unswept_from(r, s);
    return bit < *from ? LFGC_SLOT_ALLOCATED : LFGC_SLOT_DEAD;
}

static enum lfgc_slot_state slot_state_now(const void *p)
{
    void *base = lf_base(p);
    if (!base)
        return LFGC_SLOT_NOT_HEAP;
    struct region *r = region_of(base);
    struct span *s = span_at(r, span_index_of(r, (uintptr_t)base));
    if (s->state == SPAN_UNUSED)
        return LFGC_SLOT_NOT_HEAP;      /* freed meanwhile by another thread */
    uint64_t from = UINT64_MAX;
    return slot_state_in(r, s, lowfat_slot_number(base), &from);
}

/* The answer reads the mark bit, then the span's state and sweep
 * position, without the lock: a collection that stops the thread in
 * between marks an object allocated since the last one and puts its span
 * on the unswept list, and the clear bit read before it with the unswept
 * span read after said "dead" for an object the caller holds.  A
 * collection stops every registered thread and counts itself (GC_gc_no)
 * before restarting them, so an answer computed with the count unchanged
 * saw no collection; else it is computed again.  Within a collection
 * (its callbacks) the count does not move. */
enum lfgc_slot_state lf_slot_state(const void *p)
{
    for (;;) {
        GC_word no = __atomic_load_n(&GC_gc_no, __ATOMIC_ACQUIRE);
        enum lfgc_slot_state st = slot_state_now(p);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&GC_gc_no, __ATOMIC_RELAXED) == no)
            return st;
    }
}

LFGC_EXPORT enum lfgc_slot_state lfgc_slot_state(const void *p)
{
    return lf_slot_state(p);
}

/* Scratch arrays that the world-stopped phases fill (leak and smash
 * reports), and the root and exclusion tables: their memory, grown from old_bytes to new_bytes (a new
 * mapping when old is NULL; moved, not copied, by mremap).  NULL when
 * the kernel refuses; the old mapping is then unchanged. */
LF_MALLOC_TEXT void *lf_map_grow(void *old, size_t old_bytes, size_t new_bytes)
{
    void *m = old ? mremap(old, old_bytes, new_bytes, MREMAP_MAYMOVE)
                  : mmap(NULL, new_bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

LF_MALLOC_TEXT bool lf_array_reserve(void **arr, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : first;
    void *m = lf_map_grow(*arr, *cap * elem, ncap * elem);
    if (!m)
        return false;
    *arr = m;
    *cap = ncap;
    return true;
}

/* ------------------------------------------------------------------ */
/* Heap walk                                                           */

/* fn(base, bytes, kind, state, arg) for every slot of every span in use;
 * stops at the first nonzero return. */
typedef int (*slot_fn)(void *base, size_t bytes, unsigned kind, enum lfgc_slot_state st,
                       void *arg);

static int walk_slots(slot_fn fn, void *arg)
{
    for_each_span_in_use(it) {
        struct region *r = it.r;
        /* malloc's objects (manual mode) are not the collector's. */
        if (lf_kinds[it.s->kind].manual)
            continue;
        uint64_t qa, qb, from = UINT64_MAX;
        lf_span_slots(r, it.j, &qa, &qb);
        size_t bytes = r->large ? it.s->obj_bytes : r->size;
        for (uint64_t q = qa; q < qb; q++) {
            enum lfgc_slot_state st = slot_state_in(r, it.s, q, &from);
            int rc = fn((void *)(q * r->size), bytes, it.s->kind, st, arg);
            if (rc)
                return rc;
        }
    }
    return 0;
}

struct walk_allocated {
    lf_walk_fn fn;
    void *arg;
};

static int walk_allocated(void *base, size_t bytes, unsigned kind, enum lfgc_slot_state st,
                          void *arg)
{
    struct walk_allocated *w = arg;
    return st == LFGC_SLOT_ALLOCATED ? w->fn(base, bytes, kind, w->arg) : 0;
}

int lf_heap_walk(lf_walk_fn fn, void *arg)
{
    struct walk_allocated w = { fn, arg };
    return walk_slots(walk_allocated, &w);
}

struct walk_public {
    int (*fn)(void *base, size_t bytes, int kind, void *arg);
    void *arg;
};

static int walk_public(void *base, size_t bytes, unsigned kind, void *arg)
{
    struct walk_public *w = arg;
    return w->fn(base, bytes, (int)kind, w->arg);
}

LFGC_EXPORT int lfgc_heap_walk(int (*fn)(void *base, size_t bytes, int kind, void *arg),
                               void *arg)
{
    if (!fn)
        return 0;
    lf_ensure_init();
    struct walk_public w = { fn, arg };
    lock();
    lf_sweepers_hold();         /* no span changes under the walk */
    int rc = lf_heap_walk(walk_public, &w);
    lf_sweepers_release();
    unlock();
    return rc;
}

/* ------------------------------------------------------------------ */
/* The verifier                                                        */

/* Problems printed, at most; the rest are counted. */
#define MAX_PRINTED 50

struct verify {
    unsigned problems;
    bool after;                 /* at the end of a collection */
    /* Scratch bitmaps per small class, one bit per slot up to the
     * frontier: slots seen on a free list, and per chunk: spans that a
     * sweep cursor holds. */
    uint64_t *seen[NUM_CLASSES];
    uint64_t seen_bits[NUM_CLASSES];
    uint64_t *cursor_spans[NUM_CLASSES];
    unsigned threads;           /* registered threads */
    uint64_t loose_free;        /* free slots on no list that a sweep will not find */
    void *loose[8];             /* the first of them */
    uint64_t allocated_bytes;   /* walk: allocated objects */
    uint64_t marked_free_bytes; /* walk: free slots marked (thread caches,
                                   false references) */
};

static void vreport(const char *fmt, va_list ap)
{
    struct out o = { .n = 0 };
    out_str(&o, "lfgc: heap verify: ");
    out_vformat(&o, fmt, ap);
    out_char(&o, '\n');
    out_flush(&o);
}

static void problem(struct verify *v, const char *fmt, ...)
{
    v->problems++;
    if (v->problems > MAX_PRINTED)
        return;
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
}

/* A detail of the last problem: printed with it, not counted. */
static void detail(struct verify *v, const char *fmt, ...)
{
    if (v->problems > MAX_PRINTED)
        return;
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
}

static uint64_t *scratch_map(uint64_t bits)
{
    void *p = mmap(NULL, (bits + 63) / 64 * 8, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void scratch_unmap(uint64_t *p, uint64_t bits)
{
    if (p)
        munmap(p, (bits + 63) / 64 * 8);
}

static const char *kind_name(unsigned k)
{
    static const char *const names[] = { "pointer-free", "normal", "uncollectable",
                                         "pointer-free uncollectable" };
    return k < 4 ? names[k] : "custom";
}

/* The span owning slot base p (in use: chunk map checked by the caller). */
static struct span *span_of(struct region *r, const void *p)
{
    return span_at(r, span_index_of(r, (uintptr_t)p));
}

/* Spans, chunk map, pools; returns the number of unswept spans. */
static uint64_t verify_spans(struct verify *v, uint64_t *heap_sum, uint64_t *released_sum)
{
    uint64_t unswept = 0;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped) {
            if (r->next_chunk || r->pool || r->released)
                problem(v, "class %llu: spans taken but no metadata", (unsigned long long)c);
            continue;
        }
        if (r->next_chunk > r->max_chunks || r->next_chunk % r->span_chunks) {
            problem(v, "class %llu: frontier at chunk %llu (of %llu, spans of %llu)",
                    (unsigned long long)c, (unsigned long long)r->next_chunk,
                    (unsigned long long)r->max_chunks, (unsigned long long)r->span_chunks);
            continue;
        }
        /* The span past the frontier is no span's. */
        for (uint64_t i = r->next_chunk; i < r->next_chunk + r->span_chunks && i < r->max_chunks; i++)
            if (lf_chunk_map[region_chunk_entry(r, i)])
                problem(v, "class %llu: chunk map set past the frontier (chunk %llu)",
                        (unsigned long long)c, (unsigned long long)i);
        uint64_t unused = 0, top = 0;
        for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
            struct span *s = span_at(r, j);
            void *at = (void *)(r->start + (j << CHUNK_SHIFT));
            uint8_t m = lf_chunk_map[region_chunk_entry(r, j)];
            for (uint64_t i = 1; i < r->span_chunks; i++)
                if (lf_chunk_map[region_chunk_entry(r, j + i)] != m) {
                    problem(v, "span %p: its chunks disagree in the chunk map", at);
                    break;
                }
            uint64_t qa, qb;
            lf_span_slots(r, j, &qa, &qb);
            if (s->state == SPAN_UNUSED) {
                unused++;
                if (m)
                    problem(v, "span %p: unused, but the chunk map gives it kind %llu", at,
                            (unsigned long long)(m - 1));
                if (lf_bits_any(r->mark_bits, qa - r->q0, qb - r->q0))
                    problem(v, "span %p: unused, with mark bits set", at);
                continue;
            }
            if (s->state != SPAN_SWEPT && s->state != SPAN_UNSWEPT) {
                problem(v, "span %p: bad state %llu", at, (unsigned long long)s->state);
                continue;
            }
            if (m != s->kind + 1 || !lf_kinds[s->kind].in_use) {
                problem(v, "span %p: kind %llu, but its chunk map byte is %llu (kind + 1)", at,
                        (unsigned long long)s->kind, (unsigned long long)m);
                continue;
            }
            const struct kind *kd = &lf_kinds[s->kind];
            top = qb * r->size;
            if (s->state == SPAN_UNSWEPT) {
                unswept++;
                if (r->large || kd->uncollectable)
                    problem(v, "span %p: unswept, but %s", at,
                            r->large ? "large" : "uncollectable");
            }
            if (r->large) {
                if (!s->obj_bytes || s->obj_bytes > r->size || s->obj_bytes % PAGE_SIZE)
                    problem(v, "large object %p: size %llu in a slot of %llu", at,
                            (unsigned long long)s->obj_bytes, (unsigned long long)r->size);
                *heap_sum += s->obj_bytes;
            } else {
                *heap_sum += (uint64_t)r->span_chunks << CHUNK_SHIFT;
            }
            if (v->after && !kd->uncollectable && !kd->manual) {
                /* The sweep just counted the marks: none frees the span, all
                 * of them leave it swept, some put it on an unswept list. */
                uint64_t n = 0;
                for (uint64_t q = qa; q < qb; q++)
                    n += bit_get(r->mark_bits, q - r->q0);
                bool ok = s->state == SPAN_UNSWEPT ? n > 0 && n < qb - qa : n == qb - qa;
                if (!ok)
                    problem(v, "span %p: %s after the collection with %llu of %llu slots marked",
                            at, s->state == SPAN_UNSWEPT ? "unswept" : "swept",
                            (unsigned long long)n, (unsigned long long)(qb - qa));
            }
        }
        if (top > lowfat_heap_top[lowfat_index((void *)r->start)])
            problem(v, "class %llu: lowfat_heap_top %p below the end %p of a span in use",
                    (unsigned long long)c,
                    (void *)lowfat_heap_top[lowfat_index((void *)r->start)], (void *)top);
        /* Pooled, released and skipped (passed by the frontier, never
         * used) spans: the unused ones, each once. */
        static const char *const names[3] = { "pool", "released", "skipped" };
        uint64_t bound = r->next_chunk / r->span_chunks, listed = 0;
        struct span *lists[3] = { r->pool, r->released, r->skipped };
        for (int l = 0; l < 3; l++) {
            for (struct span *s = lists[l]; s; s = s->next) {
                if (!span_in_region(r, s, r->next_chunk) ||
                    span_chunk_index(r, s) % r->span_chunks) {
                    problem(v, "class %llu: %s list holds %p, not one of its spans",
                            (unsigned long long)c, names[l], (void *)s);
                    break;
                }
                if (++listed > bound) {
                    problem(v, "class %llu: span lists longer than the spans (a cycle?)",
                            (unsigned long long)c);
                    break;
                }
                if (s->state != SPAN_UNUSED)
                    problem(v, "span %p: in use, but on the %s list",
                            (void *)(r->start + (span_chunk_index(r, s) << CHUNK_SHIFT)), names[l]);
                uint64_t bytes = r->large ? s->obj_bytes : (uint64_t)r->span_chunks << CHUNK_SHIFT;
                if (l == 1)
                    *released_sum += bytes;
                else if (l == 0)
                    *heap_sum += bytes;
            }
        }
        if (listed != unused)
            problem(v, "class %llu: %llu unused spans, %llu on the pool, released and "
                    "skipped lists", (unsigned long long)c, (unsigned long long)unused,
                    (unsigned long long)listed);
    }
    return unswept;
}

/* The unswept lists: spans of their class and kind, unswept, each once
 * (a span on two lists or twice on one makes the counts disagree or the
 * walk exceed its bound). */
static void verify_unswept_lists(struct verify *v, uint64_t unswept)
{
    uint64_t listed = 0;
    unsigned kinds = lf_kinds_made();
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        for (unsigned k = 0; k < kinds; k++) {
            struct span *s = class_kind_of(c, k)->unswept;
            for (; s; s = s->next) {
                if (!r->mapped || !span_in_region(r, s, r->next_chunk) ||
                    span_chunk_index(r, s) % r->span_chunks) {
                    problem(v, "class %llu, kind %llu: unswept list holds %p, not one of "
                            "its spans", (unsigned long long)c, (unsigned long long)k,
                            (void *)s);
                    break;
                }
                if (++listed > unswept) {
                    problem(v, "unswept lists longer than the unswept spans (%llu): a span "
                            "listed twice, or a cycle", (unsigned long long)unswept);
                    return;
                }
                if (s->state != SPAN_UNSWEPT || s->kind != k)
                    problem(v, "span %p on the unswept list of kind %llu: state %llu, kind %llu",
                            (void *)(r->start + (span_chunk_index(r, s) << CHUNK_SHIFT)), (unsigned long long)k,
                            (unsigned long long)s->state, (unsigned long long)s->kind);
            }
        }
    }
    if (listed != unswept)
        problem(v, "%llu unswept spans, %llu on the unswept lists", (unsigned long long)unswept,
                (unsigned long long)listed);
}

/* One free list of class c and kind k.  `expect`: its recorded length,
 * or -1.  Returns the slots walked. */
static uint64_t verify_free_list(struct verify *v, void *head, unsigned c, unsigned k,
                                 const char *where, bool cache, int64_t expect)
{
    struct region *r = &lf_regions[c];
    uint64_t n = 0;
    bool broken = false;
    for (void **p = head; p; p = link_decode(p[0])) {
        if (!slot_in_use(p) || lowfat_index(p) != LOWFAT_FIRST_REGION + c || r->large) {
            problem(v, "%s list (class %llu, %s): %p is no slot in use of the class%s", where,
                    (unsigned long long)r->size, kind_name(k), (void *)p,
                    n ? " (a corrupt link)" : "");
            broken = true;
            break;
        }
        uint64_t bit = lowfat_slot_number(p) - r->q0;
        if (bit >= v->seen_bits[c] || !v->seen[c]) {
            problem(v, "%s list: %p lies past the frontier", where, (void *)p);
            broken = true;
            break;
        }
        if (bit_get(v->seen[c], bit)) {
            problem(v, "%s list (class %llu, %s): slot %p is on a free list twice (a cycle, "
                    "or two lists share it)", where, (unsigned long long)r->size,
                    kind_name(k), (void *)p);
            broken = true;
            break;
        }
        bit_set(v->seen[c], bit);
        n++;
        struct span *s = span_of(r, p);
        if (s->kind != k)
            problem(v, "%s list of kind %s holds %p, of a %s span", where, kind_name(k),
                    (void *)p, kind_name(s->kind));
        const uint64_t *w = (const uint64_t *)p;
        if (!(w[0] & LINK_TAG)) {
            problem(v, "%s list (class %llu, %s): free slot %p has an untagged link %p "
                    "(written after being freed?)", where, (unsigned long long)r->size,
                    kind_name(k), (void *)p, (void *)w[0]);
            broken = true;
            break;
        }
        if (w[1] != lf_free_canary)
            problem(v, "%s list (class %llu, %s): free slot %p has its canary overwritten "
                    "with %p (written after being freed?)", where, (unsigned long long)r->size,
                    kind_name(k), (void *)p, (void *)w[1]);
        if (lf_kinds[s->kind].uncollectable) {
            if (bit_get(r->alloc_bits, bit))
                problem(v, "%s list: uncollectable slot %p is free but its allocated bit is set",
                        where, (void *)p);
            continue;
        }
        bool marked = bit_get(r->mark_bits, bit);
        if (cache && v->after && !marked)
            problem(v, "%s list: slot %p is not marked at the end of a collection: a sweep "
                    "would hand it out again", where, (void *)p);
        else if (!marked && bit >= unswept_from(r, s))
            problem(v, "%s list: slot %p is unmarked in a part of its span still to sweep: "
                    "the sweep would hand it out again", where, (void *)p);
    }
    if (!broken && expect >= 0 && n != (uint64_t)expect)
        problem(v, "%s list (class %llu, %s): %llu slots, counted %llu", where,
                (unsigned long long)r->size, kind_name(k), (unsigned long long)n,
                (unsigned long long)expect);
    return n;
}

/* A thread's cache: its lists, and its cursors, which must be gone after a
 * collection and otherwise hold a swept span of their class and kind, one
 * cursor per span. */
static void verify_cache(struct thread_cache *tc, void *arg)
{
    struct verify *v = arg;
    v->threads++;
    unsigned kinds = lf_kinds_made();
    for (unsigned k = 0; k < kinds; k++) {
        const struct kind_cache *kc = kind_cache_of(tc, k);
        if (!kc)
            continue;
        for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
            verify_free_list(v, kc->free[c], c, k, "thread cache", true, -1);
            const struct sweep_cursor *cur = &kc->cursor[c];
            const struct span *s = cur->span;
            if (!s)
                continue;
            struct region *r = &lf_regions[c];
            if (v->after) {
                problem(v, "a sweep cursor (class %llu, %s) survived the collection",
                        (unsigned long long)r->size, kind_name(k));
                continue;
            }
            if (!r->mapped || !span_in_region(r, s, r->next_chunk)) {
                problem(v, "sweep cursor (class %llu, %s) holds %p, not one of its spans",
                        (unsigned long long)r->size, kind_name(k), (void *)s);
                continue;
            }
            uint64_t j = span_chunk_index(r, s);
            void *at = (void *)(r->start + (j << CHUNK_SHIFT));
            uint64_t qa, qb;
            lf_span_slots(r, j, &qa, &qb);
            if (s->state != SPAN_SWEPT || s->kind != k)
                problem(v, "span %p held by a sweep cursor of kind %s: state %llu, kind %s",
                        at, kind_name(k), (unsigned long long)s->state, kind_name(s->kind));
            if (cur->end != qb - r->q0 || cur->next < qa - r->q0 || cur->next > cur->end)
                problem(v, "span %p: sweep cursor at %llu..%llu, the span is %llu..%llu", at,
                        (unsigned long long)cur->next, (unsigned long long)cur->end,
                        (unsigned long long)(qa - r->q0), (unsigned long long)(qb - r->q0));
            uint64_t *held = v->cursor_spans[c];
            if (held) {
                if (bit_get(held, j))
                    problem(v, "span %p: two sweep cursors hold it", at);
                bit_set(held, j);
            }
        }
    }
}

/* Every slot of the spans in use (heap walk): unmarked free slots are on
 * a list, or in a part still to sweep, or (at most one per thread) being
 * popped by a stopped thread; uncollectable slots are free or allocated;
 * and the byte counts for the live bytes. */
static int verify_slot(void *base, size_t bytes, unsigned kind, enum lfgc_slot_state st,
                       void *arg)
{
    struct verify *v = arg;
    if (st == LFGC_SLOT_ALLOCATED)
        v->allocated_bytes += bytes;
    if (st != LFGC_SLOT_FREE)
        return 0;
    struct region *r = region_of(base);
    unsigned c = (unsigned)(r - lf_regions);
    uint64_t bit = lowfat_slot_number(base) - r->q0;
    bool listed = v->seen[c] && bit < v->seen_bits[c] && bit_get(v->seen[c], bit);
    if (lf_kinds[kind].uncollectable) {
        if (!listed && !slot_is_free(base))
            problem(v, "uncollectable slot %p: neither allocated nor free", base);
        else if (!listed && v->loose_free++ < sizeof v->loose / sizeof v->loose[0])
            v->loose[v->loose_free - 1] = base;
        return 0;
    }
    /* A marked free slot is left alone by the sweep: one on a thread's
     * list, or one a false reference reached (lost until a full collection
     * finds it unreferenced, harmless: it retains nothing). */
    if (bit_get(r->mark_bits, bit))
        v->marked_free_bytes += bytes;
    else if (!listed && bit < unswept_from(r, span_of(r, base)) &&
             v->loose_free++ < sizeof v->loose / sizeof v->loose[0])
        v->loose[v->loose_free - 1] = base;
    return 0;
}

static void unmap_scratch(struct verify *v)
{
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        scratch_unmap(v->seen[c], v->seen_bits[c]);
        scratch_unmap(v->cursor_spans[c], lf_regions[c].next_chunk);
    }
}

unsigned lf_heap_verify(bool after_collection)
{
    struct verify v;
    memset(&v, 0, sizeof v);
    v.after = after_collection;
    if (!lf_layout_ok || !lf_chunk_map)
        return 0;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped || !r->next_chunk || r->large)
            continue;
        uint64_t qa, qb;
        lf_span_slots(r, r->next_chunk - r->span_chunks, &qa, &qb);
        v.seen_bits[c] = qb - r->q0;
        v.seen[c] = scratch_map(v.seen_bits[c]);
        v.cursor_spans[c] = scratch_map(r->next_chunk);
        if (!v.seen[c] || !v.cursor_spans[c]) {
            problem(&v, "cannot map scratch memory to check the free lists");
            unmap_scratch(&v);
            return v.problems;
        }
    }

    uint64_t heap_sum = 0, released_sum = 0;
    uint64_t unswept = verify_spans(&v, &heap_sum, &released_sum);
    if (heap_sum != lf_hs.heap_bytes)
        problem(&v, "heap_bytes is %llu, the spans in use and pooled make %llu",
                (unsigned long long)lf_hs.heap_bytes, (unsigned long long)heap_sum);
    if (released_sum != lf_hs.released_bytes)
        problem(&v, "released_bytes is %llu, the released spans make %llu",
                (unsigned long long)lf_hs.released_bytes, (unsigned long long)released_sum);
    verify_unswept_lists(&v, unswept);

    /* Thread caches first: after a collection, a marked free slot must be
     * on one of them. */
    lf_caches_each(verify_cache, &v);
    unsigned kinds = lf_kinds_made();
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        if (lf_regions[c].large)
            continue;
        for (unsigned k = 0; k < kinds; k++) {
            void *head = class_kind_of(c, k)->free;
            uint32_t count = class_kind_of(c, k)->free_count;
            if (!head && !count)
                continue;
            if (!lf_kinds[k].in_use) {
                problem(&v, "free list of class %llu for unused kind %llu",
                        (unsigned long long)lf_regions[c].size, (unsigned long long)k);
                continue;
            }
            if (v.after && !lf_kinds[k].uncollectable)
                problem(&v, "global free list (class %llu, %s) not dropped by the collection",
                        (unsigned long long)lf_regions[c].size, kind_name(k));
            verify_free_list(&v, head, c, k, "global", false, count);
        }
    }

    walk_slots(verify_slot, &v);
    if (v.loose_free > v.threads) {
        problem(&v, "%llu free slots are on no free list and out of the sweep's way "
                "(lost until the next collection, or handed out twice), more than the "
                "%llu threads can be taking at once; the first:",
                (unsigned long long)v.loose_free, (unsigned long long)v.threads);
        for (uint64_t i = 0; i < v.loose_free && i < sizeof v.loose / sizeof v.loose[0]; i++) {
            struct region *r = region_of(v.loose[i]);
            struct span *s = span_of(r, v.loose[i]);
            uint64_t qa, qb;
            lf_span_slots(r, span_chunk_index(r, s), &qa, &qb);
            detail(&v, "  %p: class %llu, %s, span state %llu, slot %llu of %llu, swept "
                   "up to slot %llu", v.loose[i], (unsigned long long)r->size,
                   kind_name(s->kind), (unsigned long long)s->state,
                   (unsigned long long)(lowfat_slot_number(v.loose[i]) - qa),
                   (unsigned long long)(qb - qa),
                   (unsigned long long)(unswept_from(r, s) + r->q0 - qa));
        }
    }
    /* The free slots the threads' lists held were marked, and are left
     * out of live_bytes (lf_cache_mark); marked free slots a false
     * reference reached are in it. */
    uint64_t cached = lf_hs.cached_ptrful + lf_hs.cached_ptrfree;
    if (v.after && v.allocated_bytes + v.marked_free_bytes != lf_hs.live_bytes + cached)
        problem(&v, "live_bytes is %llu; the walk finds %llu allocated and %llu free but "
                "marked, %llu of them on the threads' lists", (unsigned long long)lf_hs.live_bytes,
                (unsigned long long)v.allocated_bytes, (unsigned long long)v.marked_free_bytes,
                (unsigned long long)cached);

    unmap_scratch(&v);
    if (v.problems > MAX_PRINTED) {
        struct out o = { .n = 0 };
        out_str(&o, "lfgc: heap verify: ");
        out_num(&o, v.problems, 10);
        out_str(&o, " problems, the first 50 printed\n");
        out_flush(&o);
    }
    return v.problems;
}

LFGC_EXPORT int lfgc_verify_heap(void)
{
    lf_ensure_init();
    lock();
    lf_sweepers_hold();
    lf_stop_world();
    unsigned n = lf_heap_verify(false);
    lf_start_world();
    lf_sweepers_release();
    unlock();
    return (int)n;
}

/* ------------------------------------------------------------------ */
/* A minor collection's marks against a full trace                     */

struct minor_check {
    uint64_t *saved[NUM_CLASSES];       /* the minor collection's marks   */
    uint64_t *missed[NUM_CLASSES];      /* reached by the full trace only */
    uint64_t words[NUM_CLASSES];
    uint64_t reported;
};

static uint64_t bitmap_words(const struct region *r)
{
    uint64_t qa, qb;
    lf_span_slots(r, r->next_chunk - r->span_chunks, &qa, &qb);
    return (qb - r->q0 + 63) / 64;
}

/* The base of the missed object w points into, or 0. */
static uint64_t missed_target(const struct minor_check *mc, uint64_t w)
{
    uint64_t c = (w >> LOWFAT_REGION_SHIFT) - LOWFAT_FIRST_REGION;
    if (c >= NUM_CLASSES || !mc->missed[c])
        return 0;
    const struct region *r = &lf_regions[c];
    uint64_t q = (uint64_t)(((unsigned __int128)w * r->magic) >> 64);
    if (q < r->q0 || q - r->q0 >= mc->words[c] * 64)
        return 0;
    uint64_t bit = q - r->q0;
    return (mc->missed[c][bit / 64] >> (bit & 63)) & 1 ? q * r->size : 0;
}

static void report_miss(struct minor_check *mc, uint64_t target, const char *holder,
                        uint64_t base, uint64_t len, uint64_t offset)
{
    if (++mc->reported > 8)
        return;
    struct out o = { .n = 0 };
    out_str(&o, "lfgc: verify minor: collection ");
    out_num(&o, GC_gc_no + 1, 10);
    out_str(&o, " left ");
    out_num(&o, target, 16);
    out_str(&o, " unmarked, held at offset ");
    out_num(&o, offset, 10);
    out_str(&o, " of ");
    out_str(&o, holder);
    out_char(&o, ' ');
    out_num(&o, base, 16);
    out_str(&o, " (");
    out_num(&o, len, 10);
    out_str(&o, " bytes)\n");
    out_flush(&o);
}

/* The objects the minor collection marked and had to scan (young, aging
 * or on a page written since the last collection: not an old object on
 * an unwritten page, whose words are those the last collection saw) that
 * hold a pointer to a missed object: each is an edge the minor collection
 * failed to follow.  Uncollectable objects are left out: both traces
 * scan them, the second after the collector's own frames may have been
 * written into one (a coroutine stack that is a heap object).  Roots and
 * stacks need no look: both traces scan them whole, with the same code. */
static void find_unfollowed_edges(struct minor_check *mc)
{
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!mc->saved[c])
            continue;
        for (uint64_t i = 0; i < mc->words[c]; i++)
            for (uint64_t m = mc->saved[c][i]; m; m &= m - 1) {
                uint64_t base = (r->q0 + i * 64 + (unsigned)__builtin_ctzll(m)) * r->size;
                unsigned k = lf_chunk_map[chunk_entry(base)];
                if (!k || lf_kinds[k - 1].ptrfree || lf_kinds[k - 1].uncollectable)
                    continue;
                const struct span *sp = span_at(r, span_index_of(r, base));
                uint64_t len = r->large ? sp->obj_bytes : r->size;
                for (const uint64_t *w = (const uint64_t *)base; (uint64_t)(w + 1) <= base + len; w++) {
                    uint64_t t = missed_target(mc, *w);
                    if (t && !(sp->old && lf_dirty_page_unwritten(r, (uint64_t)w)))
                        report_miss(mc, t, kind_name(k - 1), base, len, (uint64_t)w - base);
                }
            }
    }
}

/* World stopped, after a minor collection's mark: trace again from
 * `mark_roots` into cleared bits, as a full collection would, and look at
 * what that trace reaches and the minor one left unmarked.  Such objects
 * are normal in a conservative collector when only old objects on
 * unwritten pages hold them: their words were there at the last
 * collection, when the slot they name was free (a stale pointer, or an
 * integer that looks like one), and the object there now is reachable
 * only through them.  Held by anything the minor collection scanned, they
 * would be freed while reachable: each such edge is printed and the
 * process aborts.  The marks are then the union of both traces. */
void lf_verify_minor_marks(void (*mark_roots)(void))
{
    struct minor_check mc;
    memset(&mc, 0, sizeof mc);
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped || !r->next_chunk)
            continue;
        mc.words[c] = bitmap_words(r);
        mc.saved[c] = scratch_map(mc.words[c] * 64);
        mc.missed[c] = scratch_map(mc.words[c] * 64);
        if (!mc.saved[c] || !mc.missed[c])
            lf_assert_fail(__FILE__, __LINE__, "scratch memory for LFGC_VERIFY_MINOR");
        memcpy(mc.saved[c], r->mark_bits, mc.words[c] * 8);
    }
    lf_mark_clear_all();
    lf_caches_mark();
    lf_mark_begin(0);
    mark_roots();
    lf_mark_finish();
    bool any = false;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        for (uint64_t i = 0; mc.saved[c] && i < mc.words[c]; i++) {
            mc.missed[c][i] = r->mark_bits[i] & ~mc.saved[c][i];
            any |= mc.missed[c][i] != 0;
        }
    }
    if (any)
        find_unfollowed_edges(&mc);
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!mc.saved[c])
            continue;
        for (uint64_t i = 0; i < mc.words[c]; i++)
            r->mark_bits[i] |= mc.saved[c][i];
        scratch_unmap(mc.saved[c], mc.words[c] * 64);
        scratch_unmap(mc.missed[c], mc.words[c] * 64);
    }
    if (mc.reported)
        lf_assert_fail(__FILE__, __LINE__, "a minor collection left reachable objects unmarked");
}
