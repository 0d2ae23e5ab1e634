/* malloc.c: manual mode, lfgc as the process's malloc.
 *
 * malloc's objects are of the manual kinds (internal.h): never collected,
 * never scanned, freed only by free.  Small ones come from the thread's
 * own lists (tc->mk) as GC_malloc's do: the fast paths below are a pop
 * and a push, no lock, no atomic.  A thread that frees more than it
 * allocates hands its surplus to the class's remote stack (alloc.c), and
 * when enough has gone there, spans found wholly free go back to the OS
 * (scavenge).  The functions with the C library's names are defined by
 * the thin liblfgc-malloc library (malloc_shim.c), which calls these.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "lfgc_malloc.h"

LF_UNSCANNED_BSS uint8_t lf_malloc_class[SMALL_REQUEST_MAX + 2];   /* filled by lf_alloc_init */
LF_UNSCANNED_DATA unsigned lf_malloc_small_kind = KIND_MALLOC;
LF_UNSCANNED bool lf_malloc_wipe, lf_malloc_shuffle;

enum { ERRORS_ABORT, ERRORS_WARN, ERRORS_IGNORE };

/* Bytes pushed onto the manual kinds' remote stacks and not taken back
 * since the last scavenge: when they are a good part of malloc's heap, a
 * large working set was freed. */
static LF_UNSCANNED volatile AO_t remote_bytes;

static LF_UNSCANNED pthread_once_t malloc_once = PTHREAD_ONCE_INIT;
static LF_UNSCANNED bool malloc_ready;

LF_MALLOC_TEXT static bool env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

LF_MALLOC_TEXT static void malloc_once_fn(void)
{
    lf_ensure_heap();
    lf_malloc_wipe = env_is(LF_STR("LFGC_MALLOC_WIPE"), LF_STR("1"));
    lf_malloc_shuffle = env_is(LF_STR("LFGC_MALLOC_RANDOM"), LF_STR("1"));
    /* The hardened modes' spans have their own kind, which the free fast
     * path's chunk-map test rejects: their frees take the slow path, and
     * the plain mode pays nothing for the options. */
    if (lf_malloc_wipe || lf_malloc_shuffle)
        lf_malloc_small_kind = KIND_MALLOC_HARD;
    /* Held around fork, as glibc holds its arenas' locks.  (pthread_atfork
     * may call malloc: the heap is ready by now.) */
    __atomic_store_n(&malloc_ready, true, __ATOMIC_RELEASE);
    lf_fork_handlers_install();
}

static inline void malloc_ensure(void)
{
    if (unlikely(!__atomic_load_n(&malloc_ready, __ATOMIC_ACQUIRE)))
        pthread_once(&malloc_once, malloc_once_fn);
}

/* ------------------------------------------------------------------ */
/* Bad input                                                           */

/* One line on stderr naming the call, the pointer and what it is, then
 * abort() (LFGC_MALLOC_ERRORS=abort, the default), or go on without
 * touching anything (warn, ignore).  Written with write(2): the caller
 * may be inside malloc. */
static void bad_pointer(const char *call, const void *p, const char *what, const void *base)
{
    /* Read now, not at start-up: errors are rare, and a program may set
     * it for a part of its run. */
    int error_mode = env_is("LFGC_MALLOC_ERRORS", "warn")     ? ERRORS_WARN
                     : env_is("LFGC_MALLOC_ERRORS", "ignore") ? ERRORS_IGNORE
                                                              : ERRORS_ABORT;
    if (error_mode == ERRORS_IGNORE)
        return;
    char line[512];
    int n;
    if (base)
        n = snprintf(line, sizeof line, "lfgc-malloc: %s(%p): %s %p; %s\n", call, p, what,
                     base, error_mode == ERRORS_ABORT ? "aborting" : "ignored");
    else
        n = snprintf(line, sizeof line, "lfgc-malloc: %s(%p): %s; %s\n", call, p, what,
                     error_mode == ERRORS_ABORT ? "aborting" : "ignored");
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1;
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
    if (error_mode == ERRORS_ABORT)
        abort();
}

/* What p is, when it is not the base of a malloc'ed object in use; NULL
 * when it is (*rp its region).  Reads only what does not change while an
 * object is in use, as GC_free's check does. */
LF_MALLOC_TEXT static const char *classify(const void *p, struct region **rp, const void **basep)
{
    *basep = NULL;
    if (!lowfat_is_ptr(p) || !lf_heap_initialized) {
        if (lf_on_own_stack(p))
            return "a stack address, not a heap object";
        Dl_info info;
        if (dladdr(p, &info) && info.dli_fname)
            return "an address in the code or data of a loaded object (a global?), "
                   "not a heap object";
        return "not allocated by lfgc's malloc (another allocator's, or no object)";
    }
    struct region *r = region_of(p);
    const void *base = lowfat_base(p);
    if (!r->mapped || (uintptr_t)p >= r->usable_end || !chunk_kind(r, (uintptr_t)base))
        return "no allocated object there (already freed, or never allocated)";
    if (base != p) {
        *basep = base;
        return "an interior pointer, not the start of its object, which starts at";
    }
    unsigned kind = lf_chunk_map[chunk_entry((uintptr_t)base)] - 1u;
    if (!lf_kinds[kind].manual)
        return "an object of the collector (GC_malloc and friends), not malloc's";
    if (!r->large && slot_is_free(p))
        return "already freed (double free)";
    *rp = r;
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Free                                                                 */

/* p validated (a malloc'ed object in use of region r). */
LF_MALLOC_TEXT static void free_valid(void *p, struct region *r)
{
    unsigned c = (unsigned)(r - lf_regions);
    if (c < NUM_SMALL_CLASSES) {
        lf_manual_free_small(p, c);
        return;
    }
    lock();
    lf_free_held(p);
    unlock();
}

LF_MALLOC_TEXT void lf_malloc_free_checked(void *p, struct region *r)
{
    malloc_ensure();
    free_valid(p, r);
}

LF_MALLOC_TEXT void lf_malloc_free_slow(void *p)
{
    if (!p)
        return;
    struct region *r;
    const void *base;
    const char *what = classify(p, &r, &base);
    if (what) {
        bad_pointer("free", p, what, base);
        return;
    }
    malloc_ensure();
    free_valid(p, r);
}

/* The fast path is lf_free_fast (internal.h), which liblfgc-malloc's free
 * runs too; anything it does not take (NULL, foreign pointers, large
 * objects, the hardened modes, a thread without a cache) goes to the
 * slow path, which says what is wrong. */
LF_MALLOC_TEXT LFGC_EXPORT void lfgc_free(void *p)
{
    if (likely(lf_free_fast(p, lf_tl_free)))
        return;
    lfgc_private_free_slow(p);
}

/* ------------------------------------------------------------------ */
/* Allocation                                                           */

LF_MALLOC_TEXT static unsigned malloc_class(size_t n)
{
    if (n <= SMALL_REQUEST_MAX)
        return lf_malloc_class[n];
    return (unsigned)lf_class_of_size(n);
}

LF_MALLOC_TEXT static void *alloc_class(unsigned c, size_t n)
{
    if (c >= NUM_CLASSES) {
        errno = ENOMEM;
        return NULL;
    }
    unsigned kind = c < NUM_SMALL_CLASSES ? lf_malloc_small_kind : KIND_MALLOC_LARGE;
    void *p = lf_alloc_manual(c, n, kind);
    if (!p)
        errno = ENOMEM;
    return p;
}

LF_MALLOC_TEXT static __attribute__((noinline)) void *malloc_slow(size_t n)
{
    malloc_ensure();
    return alloc_class(malloc_class(n), n);
}

LF_MALLOC_TEXT LFGC_EXPORT void *lfgc_malloc(size_t n)
{
    if (likely(n <= SMALL_REQUEST_MAX)) {
        unsigned c = lf_malloc_class[n];
        struct kind_cache *kc = &lf_tl_cache->mk;
        void **p = kc->free[c];
        if (likely(p)) {
            uint64_t link = (uint64_t)p[0];
            __asm__("btc $63, %0" : "+r"(link));       /* link_decode */
            kc->free[c] = (void *)link;
            p[1] = NULL;            /* the canary: no longer free */
            return p;
        }
    }
    return malloc_slow(n);
}

#define CALLOC_POPULATE_MAX ((size_t)1 << 20)

LF_MALLOC_TEXT LFGC_EXPORT void *lfgc_calloc(size_t count, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = lfgc_malloc(n);
    if (!p || !n)
        return p;
    /* Large objects come zeroed (fresh spans, or given back with
     * MADV_DONTNEED when freed) unless their span kept its pages.  Zeroed
     * ones up to CALLOC_POPULATE_MAX are faulted in writable at once: a
     * program that reads its calloc'ed memory before writing it maps the
     * zero page and then takes a second fault, whose TLB flush interrupts
     * every CPU the process runs on (mimalloc's test-stress, 32 threads:
     * system time 7.6 s, 3.0 s with this; docs/performance.md).  Larger
     * ones stay lazy, for sparse arrays. */
    struct region *r = region_of(p);
    if (r->large) {
        struct span *s = span_at(r, span_index_of(r, (uintptr_t)p));
        if (s->dirty)
            memset(p, 0, n);
        else if (n <= CALLOC_POPULATE_MAX)
            (void)madvise(p, n, MADV_POPULATE_WRITE);   /* lazy on kernels before 5.14 */
        s->dirty = 0;
    } else {
        memset(p, 0, n);
    }
    return p;
}

/* Usable bytes of malloc's object at base p: its slot. */
LF_MALLOC_TEXT static size_t usable(const struct region *r)
{
    return r->size;
}

/* Tails shorter than this stay when a large object shrinks in place: a
 * program that shrinks and grows a buffer by turns would fault them in
 * again each time (glibc's heap keeps up to its trim threshold, 128 KiB,
 * the same way). */
#define SHRINK_RELEASE_MIN ((uint64_t)128 << 10)

/* Large object p of region r resized to n bytes in its slot (lock held):
 * when it shrinks by at least SHRINK_RELEASE_MIN, its pages past the new
 * end go back to the OS (the whole rest of the slot: malloc_usable_size
 * promised it, so the program may have written there), else they stay
 * (freeing the object decides about the whole span, as for any large
 * object); its span's size and the heap's figures follow it either way. */
LF_MALLOC_TEXT static void large_resize(struct region *r, void *p, size_t n)
{
    struct span *s = span_at(r, span_index_of(r, (uintptr_t)p));
    uint64_t want = (n + PAGE_SIZE - 1) & ~(uint64_t)(PAGE_SIZE - 1);
    if (want < s->obj_bytes && r->size - want >= SHRINK_RELEASE_MIN)
        madvise((char *)p + want, r->size - want, MADV_DONTNEED);
    lf_hs.heap_bytes = lf_hs.heap_bytes - s->obj_bytes + want;
    lf_malloc_heap_bytes = lf_malloc_heap_bytes - s->obj_bytes + want;
    s->obj_bytes = want;
}

LF_MALLOC_TEXT LFGC_EXPORT void *lfgc_realloc(void *p, size_t n)
{
    if (!p)
        return lfgc_malloc(n);
    if (n == 0) {
        lfgc_free(p);
        return NULL;
    }
    struct region *r;
    const void *base;
    const char *what = classify(p, &r, &base);
    if (what) {
        bad_pointer("realloc", p, what, base);
        errno = EINVAL;
        return NULL;
    }
    malloc_ensure();
    size_t old = usable(r);
    unsigned nc = malloc_class(n);
    /* A large object that stays large stays in its slot when it fits:
     * no copy, and the pages past its new end go back. */
    if (r->large && n <= old && nc < NUM_CLASSES && lf_regions[nc].large) {
        lock();
        large_resize(r, p, n);
        unlock();
        return p;
    }
    /* A small one in place while it fits its slot and keeps at least half
     * of it. */
    if (n <= old && (n > old / 2 || nc == (unsigned)(r - lf_regions)))
        return p;
    void *q = lfgc_malloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, old < n ? old : n);
    free_valid(p, r);
    return q;
}

LF_MALLOC_TEXT LFGC_EXPORT void *lfgc_reallocarray(void *p, size_t count, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return lfgc_realloc(p, n);
}

/* An object of n bytes at a multiple of align (a power of two): slots lie
 * at multiples of their size, so the first class at least n long whose
 * size is a multiple of align gives it with no padding. */
LF_MALLOC_TEXT static void *aligned(size_t align, size_t n)
{
    if (align <= 16)
        return lfgc_malloc(n);
    malloc_ensure();
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        uint64_t s = lf_regions[c].size;
        if (lf_regions[c].reserved && s >= n && s % align == 0)
            return alloc_class(c, n);
    }
    errno = ENOMEM;
    return NULL;
}

LF_MALLOC_TEXT static bool power_of_two(size_t x)
{
    return x && !(x & (x - 1));
}

LF_MALLOC_TEXT LFGC_EXPORT void *lfgc_memalign(size_t align, size_t n)
{
    /* glibc's: a non-power-of-two alignment is rounded up. */
    if (align > ((size_t)1 << 63)) {
        errno = EINVAL;
        return NULL;
    }
    if (!power_of_two(align))
        align = align ? (size_t)1 << (64 - __builtin_clzll(align)) : 1;
    return aligned(align, n);
}

LF_MALLOC_TEXT LFGC_EXPORT void *lfgc_aligned_alloc(size_t align, size_t n)
{
    if (!power_of_two(align)) {
        errno = EINVAL;
        return NULL;
    }
    return aligned(align, n);
}

LF_MALLOC_TEXT LFGC_EXPORT int lfgc_posix_memalign(void **out, size_t align, size_t n)
{
    if (!power_of_two(align) || align % sizeof(void *) != 0)
        return EINVAL;
    int saved = errno;
    void *p = aligned(align, n);
    if (!p) {
        errno = saved;
        return ENOMEM;
    }
    *out = p;
    return 0;
}

LF_MALLOC_TEXT LFGC_EXPORT void *lfgc_valloc(size_t n)
{
    return aligned(PAGE_SIZE, n);
}

LF_MALLOC_TEXT LFGC_EXPORT void *lfgc_pvalloc(size_t n)
{
    if (n > SIZE_MAX - PAGE_SIZE) {
        errno = ENOMEM;
        return NULL;
    }
    return aligned(PAGE_SIZE, (n + PAGE_SIZE - 1) & ~(size_t)(PAGE_SIZE - 1));
}

LF_MALLOC_TEXT LFGC_EXPORT size_t lfgc_malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    struct region *r;
    const void *base;
    const char *what = classify(p, &r, &base);
    if (what) {
        bad_pointer("malloc_usable_size", p, what, base);
        return 0;
    }
    return usable(r);
}

/* ------------------------------------------------------------------ */
/* Giving memory back                                                   */

LF_MALLOC_TEXT void lf_malloc_remote_taken(uint64_t bytes)
{
    AO_t now = AO_load(&remote_bytes);
    while (!AO_compare_and_swap(&remote_bytes, now, now > bytes ? now - bytes : 0))
        now = AO_load(&remote_bytes);
}

static bool scavenge(void);

/* A scavenge holds the lock while it walks the global lists.  One that
 * finds most of what it walks in wholly free spans, and gives those back,
 * is worth it (a bulk free).  One that walks many slots it cannot give
 * back (threads freeing each other's objects all the time: the lists then
 * hold a good part of the heap, and the spans it does give back are
 * wanted again soon after) is not, and the scavenges malloc runs by
 * itself are then paced: after one that took d and kept more than an
 * eighth of what it gave back, the next waits d * SCAVENGE_SHARE.
 * (mimalloc's test-stress with 32 threads: 25 scavenges of 35-160 ms
 * each, a heap going from 93 to 27 MiB and back; docs/performance.md.)
 * malloc_trim is never paced. */
#define SCAVENGE_SHARE 20
static LF_UNSCANNED uint64_t scavenge_next_ns;
static LF_UNSCANNED uint64_t scavenge_kept, scavenge_released;   /* bytes, by the last one */

LF_MALLOC_TEXT static bool scavenge_due(void)
{
    uint64_t next = __atomic_load_n(&scavenge_next_ns, __ATOMIC_RELAXED);
    return !next || lf_now_ns() >= next;
}

/* Lock held. */
LF_MALLOC_TEXT static bool scavenge_paced(void)
{
    uint64_t t = lf_now_ns();
    bool released = scavenge();
    uint64_t end = lf_now_ns();
    uint64_t next = scavenge_kept > scavenge_released / 8 ? end + (end - t) * SCAVENGE_SHARE : 0;
    __atomic_store_n(&scavenge_next_ns, next, __ATOMIC_RELAXED);
    return released;
}

LF_MALLOC_TEXT void lf_malloc_remote_pushed(uint64_t bytes)
{
    AO_t now = AO_fetch_and_add(&remote_bytes, bytes) + bytes;
    uint64_t heap = __atomic_load_n(&lf_malloc_heap_bytes, __ATOMIC_RELAXED);
    uint64_t bound = heap / 4 > ((uint64_t)4 << 20) ? heap / 4 : (uint64_t)4 << 20;
    if (now >= bound && scavenge_due()) {
        lock();
        scavenge_paced();
        unlock();
    }
}

/* bit_set, in malloc's code group (an inline function may stay out of
 * line, elsewhere, in a build without optimisation). */
LF_MALLOC_TEXT static void scratch_bit_set(uint64_t *bits, uint64_t i)
{
    bits[i >> 6] |= 1ull << (i & 63);
}

/* The scratch bits of region r's spans of `kind`, cleared a word at a time. */
LF_MALLOC_TEXT static void scratch_bits_clear(struct region *r, unsigned kind)
{
    for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
        struct span *s = span_at(r, j);
        if (s->state != SPAN_UNUSED && s->kind == kind) {
            uint64_t qa, qb;
            lf_span_slots(r, j, &qa, &qb);
            lf_bits_clear(r->mark_bits, qa - r->q0, qb - r->q0);
        }
    }
}

/* Spans of malloc's small kind whose every slot is on the class's global
 * list (remote stacks emptied into it) go back to the OS.  Lock held.
 * The mark bits of these spans serve as scratch: malloc's spans are never
 * swept, and a collection (which may have marked some of their slots)
 * runs only with the lock.  Slots in thread caches, or not yet linked by
 * a thread's cursor, keep their span. */
LF_MALLOC_TEXT static bool scavenge(void)
{
    unsigned kind = lf_malloc_small_kind;
    bool released = false;
    scavenge_kept = scavenge_released = 0;
    AO_store(&remote_bytes, 0);
    lf_owner_remote_drain(-1);
    lf_groups_left_release();
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        struct class_kind *ck = class_kind_of(c, kind);
        if (!r->mapped)
            continue;
        if (AO_load(&ck->remote)) {
            void **head = (void **)__atomic_exchange_n(&ck->remote, 0, __ATOMIC_ACQ_REL);
            AO_store(&ck->remote_count, 0);
            if (head)
                free_list_prepend(ck, head);
        }
        if (!ck->free)
            continue;
        scratch_bits_clear(r, kind);
        for (void **p = ck->free; p; p = link_decode(p[0]))
            scratch_bit_set(r->mark_bits, lowfat_slot_number(p) - r->q0);
        uint64_t empty = 0;
        for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
            struct span *s = span_at(r, j);
            s->old = 0;
            if (s->state == SPAN_UNUSED || s->kind != kind)
                continue;
            uint64_t qa, qb;
            lf_span_slots(r, j, &qa, &qb);
            if (lf_bits_all(r->mark_bits, qa - r->q0, qb - r->q0)) {
                s->old = 1;             /* to go: its slots leave the list */
                empty++;
            }
        }
        if (!empty)
            goto clear;
        /* The list without the slots of the spans that go. */
        void **keep = NULL, **keep_tail = NULL;
        uint32_t kept = 0;
        for (void **p = ck->free, **next; p; p = next) {
            next = link_decode(p[0]);
            if (span_at(r, span_index_of(r, (uintptr_t)p))->old)
                continue;
            p[0] = link_encode(NULL);
            if (keep_tail)
                keep_tail[0] = link_encode(p);
            else
                keep = p;
            keep_tail = p;
            kept++;
        }
        ck->free = keep;
        ck->free_count = kept;
        for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
            struct span *s = span_at(r, j);
            if (!s->old)
                continue;
            s->old = 0;
            uint64_t qa, qb;
            lf_span_slots(r, j, &qa, &qb);
            lf_bits_clear(r->mark_bits, qa - r->q0, qb - r->q0);
            lf_span_free(r, s);
            lf_malloc_heap_bytes -= CHUNK_SIZE;
            /* lf_span_free pooled it, at the head: give its pages back. */
            r->pool = s->next;
            lf_span_release(r, s);
            scavenge_released += CHUNK_SIZE;
            released = true;
        }
        lf_pages_release_flush();
    clear:
        scavenge_kept += (uint64_t)ck->free_count * r->size;
        /* Span by span: walking the list again would miss the cache at
         * every slot. */
        scratch_bits_clear(r, kind);
    }
    return released;
}

/* Before malloc's heap grows by a span (lock held): when the free slots
 * on the global lists are a good part of the heap, the memory may be in
 * the wrong classes (a program that moves from one set of sizes to
 * another), and a span is given back only once all its slots are free on
 * those lists.  So the calling thread's own lists go there too and
 * spans that are wholly free go back to the OS, before new pages are
 * taken.  At most once per eighth of the heap's growth (256 KiB at
 * least): a scavenge walks every span of malloc's classes. */
static LF_UNSCANNED uint64_t grown_scavenge_at;

LF_MALLOC_TEXT bool lf_malloc_scavenge_before_growth(void)
{
    uint64_t heap = lf_malloc_heap_bytes;
    uint64_t step = heap / 8 > ((uint64_t)256 << 10) ? heap / 8 : (uint64_t)256 << 10;
    if (heap < grown_scavenge_at + step)
        return false;
    unsigned kind = lf_malloc_small_kind;
    uint64_t idle = 0;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        const struct class_kind *ck = class_kind_of(c, kind);
        idle += ((uint64_t)ck->free_count + AO_load(&ck->remote_count)) * lf_regions[c].size;
    }
    if (idle < heap / 4 || !scavenge_due())
        return false;
    grown_scavenge_at = heap;
    struct thread_cache *tc = lf_tl_cache;
    if (tc != &lf_empty_cache) {
        struct kind_cache *kc = &tc->mk;
        for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
            if (!kc->free[c])
                continue;
            free_list_prepend(class_kind_of(c, kind), kc->free[c]);
            kc->free[c] = NULL;
            kc->credit[c] = lf_refill_credit_empty(c);
        }
    }
    return scavenge_paced();
}

LF_MALLOC_TEXT LFGC_EXPORT int lfgc_malloc_trim(size_t pad)
{
    (void)pad;
    if (!lf_heap_initialized)
        return 0;
    malloc_ensure();
    lock();
    bool released = scavenge();
    released |= lf_large_retained_release();
    unlock();
    return released;
}

/* ------------------------------------------------------------------ */
/* Figures                                                              */

struct cached {
    uint64_t slots, bytes;
};

/* Is p a free slot of malloc's small kind, class c?  Reads p only once
 * the chunk map says a span in use owns it (so it is mapped). */
static bool cached_free_slot(void *p, unsigned c, unsigned kind)
{
    return lowfat_is_ptr(p) && lowfat_index(p) == LOWFAT_FIRST_REGION + c &&
           lowfat_base(p) == p && lf_chunk_map[chunk_entry((uintptr_t)p)] == kind + 1 &&
           slot_is_free(p);
}

static bool plain_free_slot(void *p, unsigned c)
{
    return cached_free_slot(p, c, KIND_MALLOC);
}

/* The free slots a thread holds for malloc: its lists and the rest of the
 * span it links.  Lock held, so no span goes back meanwhile; the owner
 * pushes and pops without it, so each link is checked to be a free slot
 * of the class before it is followed, and the walk stops at the first
 * that is not (the owner took it meanwhile).  Exact for a thread that is
 * not allocating or freeing at the time, a close figure otherwise. */
static void count_cached(struct thread_cache *tc, void *arg)
{
    struct cached *sum = arg;
    unsigned kind = lf_malloc_small_kind;
    struct kind_cache *kc = &tc->mk;
    for (unsigned c = 0; c < NUM_SMALL_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped)
            continue;
        uint64_t n = 0, limit = (r->next_chunk << CHUNK_SHIFT) / r->size + 1;
        void **p = __atomic_load_n((void ***)&kc->free[c], __ATOMIC_RELAXED);
        while (p && n < limit && cached_free_slot(p, c, kind)) {
            n++;
            p = link_decode(__atomic_load_n(&p[0], __ATOMIC_RELAXED));
        }
        struct sweep_cursor *cur = &kc->cursor[c];
        uint64_t next = __atomic_load_n(&cur->next, __ATOMIC_RELAXED);
        uint64_t end = __atomic_load_n(&cur->end, __ATOMIC_RELAXED);
        if (__atomic_load_n(&cur->span, __ATOMIC_RELAXED) && end > next)
            n += end - next;
        if (kind == KIND_MALLOC)
            n += lf_pending_count(tc, c, plain_free_slot);
        sum->slots += n;
        sum->bytes += n * r->size;
    }
}

LFGC_EXPORT struct mallinfo2 lfgc_mallinfo2(void)
{
    struct mallinfo2 mi;
    memset(&mi, 0, sizeof mi);
    if (!lf_heap_initialized)
        return mi;
    lock();
    uint64_t free_bytes = 0, free_slots = 0, large = 0, large_bytes = 0;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        if (!r->mapped)
            continue;
        if (c < NUM_SMALL_CLASSES) {
            struct class_kind *ck = class_kind_of(c, lf_malloc_small_kind);
            uint64_t n = ck->free_count + AO_load(&ck->remote_count) +
                         lf_orphan_slots(c, lf_malloc_small_kind);
            if (lf_malloc_small_kind == KIND_MALLOC)
                n += lf_owner_remote_count(c, plain_free_slot);
            free_slots += n;
            free_bytes += n * r->size;
            continue;
        }
        for (uint64_t j = 0; j < r->next_chunk; j += r->span_chunks) {
            struct span *s = span_at(r, j);
            if (s->state != SPAN_UNUSED && s->kind == KIND_MALLOC_LARGE) {
                large++;
                large_bytes += s->obj_bytes;
            }
        }
    }
    /* Slots in the threads' caches are free, not in use. */
    struct cached cached = {0, 0};
    lf_caches_each(count_cached, &cached);
    free_slots += cached.slots;
    free_bytes += cached.bytes;
    uint64_t heap = lf_malloc_heap_bytes;
    unlock();
    mi.arena = heap - large_bytes;
    mi.ordblks = free_slots;
    mi.hblks = large;
    mi.hblkhd = large_bytes;
    mi.fordblks = free_bytes < mi.arena ? free_bytes : mi.arena;
    mi.uordblks = mi.arena - mi.fordblks + large_bytes;
    mi.fsmblks = 0;
    mi.keepcost = 0;
    return mi;
}

LFGC_EXPORT struct mallinfo lfgc_mallinfo(void)
{
    struct mallinfo2 m = lfgc_mallinfo2();
    struct mallinfo mi;
    memset(&mi, 0, sizeof mi);
    mi.arena = (int)m.arena;
    mi.ordblks = (int)m.ordblks;
    mi.hblks = (int)m.hblks;
    mi.hblkhd = (int)m.hblkhd;
    mi.uordblks = (int)m.uordblks;
    mi.fordblks = (int)m.fordblks;
    return mi;
}

/* ------------------------------------------------------------------ */
/* Hardened mode: randomised list order                                 */

static __thread uint64_t rng_state __attribute__((tls_model("initial-exec")));

LF_MALLOC_TEXT static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    if (!x)
        x = lf_free_canary ^ (uintptr_t)&rng_state ^ lf_now_ns();
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return x;
}

/* A freed slot goes in at a random place among the first few of the
 * list, so that the next allocations do not come in the reverse order of
 * the frees. */
LF_MALLOC_TEXT void lf_malloc_insert_random(void **head, void *p)
{
    void **at = *head;
    unsigned k = (unsigned)(rng_next() % 8);
    if (k == 0) {
        slot_make_free(p, at);
        *head = p;
        return;
    }
    while (--k && link_decode(at[0]))
        at = link_decode(at[0]);
    slot_make_free(p, link_decode(at[0]));
    at[0] = link_encode(p);
}

/* A refilled list in a random order (Fisher-Yates over its first 256). */
LF_MALLOC_TEXT void lf_malloc_shuffle_list(void **head)
{
    void *v[256];
    size_t n = 0;
    for (void **p = *head; p && n < 256; p = link_decode(p[0]))
        v[n++] = p;
    if (n < 2)
        return;
    void *rest = link_decode(((void **)v[n - 1])[0]);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(rng_next() % (i + 1));
        void *t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        ((void **)v[i])[0] = link_encode(i + 1 < n ? v[i + 1] : rest);
    *head = v[0];
}

/* The end of the malloc-mode code group (LF_MALLOC_TEXT in internal.h):
 * tests/test_malloc checks that such a process's resident code lies
 * before it. */
LF_MALLOC_TEXT_END void lf_malloc_text_end(void)
{
}
