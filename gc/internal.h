/* internal.h: lfgc's private types and functions.
 *
 * Vocabulary:
 *   class   size class c in [0, NUM_CLASSES): region LOWFAT_FIRST_REGION + c.
 *   chunk   32 KiB piece of a region (CHUNK_SIZE); the unit in which regions
 *           grow.
 *   span    what the allocator hands out of a region: one chunk for classes
 *           smaller than a chunk (the slots whose base lies in the chunk),
 *           or one whole object for the larger classes.
 *   kind    what the collector does with an object (scan it or not, free it
 *           or not); every span holds objects of one kind, recorded per
 *           chunk in the chunk map, so the kind comes from the address.
 *   slot    the space of one object.  Slot numbers are address / size,
 *           computed by lowfat_slot_number() without division.
 */
#ifndef LFGC_INTERNAL_H
#define LFGC_INTERNAL_H

#include <atomic_ops.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <dlfcn.h>

#define LFGC_BUILDING 1
#include "gc.h"
#include "gc_mark.h"
#include "lfgc.h"
#include "lowfat.h"

/* Everything declared from here on is private to the library: without
 * this, -fvisibility=hidden leaves extern declarations going through the
 * GOT. */
#pragma GCC visibility push(hidden)

#define LFGC_EXPORT __attribute__((visibility("default")))
/* Every variable of lfgc is defined in this section, which the root scan
 * leaves out (roots.c): many hold heap addresses, or sizes that may equal
 * one (16 TiB + 32 GiB + 1 MiB is the first 32-byte slot).  In a static
 * link the library's data are the program's, and the scan cannot tell
 * them apart otherwise.
 * tests/symbols.sh fails for a variable defined without it. */
#define LF_UNSCANNED_DATA __attribute__((section("lf_unscanned")))
/* The same for zero-initialised state, in a section that takes no room in
 * the file (NOBITS, as .bss): its pages are anonymous and made only when
 * written, where lf_unscanned's are file-backed and the first read of any
 * maps them all (fault-around: the data segment is smaller than 64 KiB).
 * A non-zero initialiser here is an assembler error ("attempt to store
 * non-zero value"): such variables are LF_UNSCANNED_DATA, and few.  GCC
 * gives NOBITS only to sections named .bss.*, which the linker merges
 * into .bss without bounds: the type is written into the directive, and
 * '#' comments out the flags GCC appends to it. */
#define LF_UNSCANNED_BSS __attribute__((section("lf_unscanned_bss,\"aw\",@nobits#")))
/* Zero-initialised, and small: a section of its own, so that the state
 * a process writes lies on few pages, not between the large tables. */
#define LF_UNSCANNED __attribute__((section("lf_unscanned_zero,\"aw\",@nobits#")))
/* The code a process runs when it uses lfgc only as its malloc: start-up,
 * malloc, free and their slow paths, threads' first allocation and exit,
 * fork.  The linker lays .text.sorted.* out at the start of .text, so that
 * this code is a few pages together: a read fault maps the cached pages
 * around it, 64 KiB at a time (fault-around), and with malloc's code
 * spread over the file such a process had all of liblfgc's code resident.
 * LF_MALLOC_TEXT_END marks where the group ends (malloc_mode tests). */
#define LF_MALLOC_TEXT __attribute__((section(".text.sorted.lfgc_1_malloc")))
#define LF_MALLOC_TEXT_END __attribute__((section(".text.sorted.lfgc_2_end"), used, noinline))
/* The constants that code reads on its normal paths (the names it looks
 * up in the environment, the size classes), laid out with it: in
 * .rodata, the first read of any of them mapped the whole read-only
 * segment (44 KiB with the unwind tables) by fault-around.  LF_STR(s) is
 * the string literal s kept there.  tests/test_malloc.c checks that a
 * malloc-only process leaves that segment alone. */
#define LF_MALLOC_RODATA __attribute__((section(".text.sorted.lfgc_1_malloc_rodata")))
#define LF_STR(s) ({ static const char lf_str_[] LF_MALLOC_RODATA = s; lf_str_; })
#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* lf_assert(cond) checks an invariant in builds configured with
 * --enable-debug (LFGC_DEBUG) and costs nothing in the others, where cond
 * is not evaluated.  A failure prints the place and the condition with
 * write(2), not stdio (it may fire with the world stopped, while a stopped
 * thread holds a stdio lock), and aborts.  LF_DEBUG is 1 in those builds:
 * `if (LF_DEBUG)` keeps debugging code compiled, and type-checked, in all. */
#ifdef LFGC_DEBUG
#define LF_DEBUG 1
#define lf_assert(cond) (likely(cond) ? (void)0 : lf_assert_fail(__FILE__, __LINE__, #cond))
#else
#define LF_DEBUG 0
#define lf_assert(cond) ((void)sizeof(!(cond)))
#endif
void lf_assert_fail(const char *file, int line, const char *cond)
    __attribute__((noreturn, cold));

#define NUM_CLASSES    LOWFAT_NUM_CLASSES
/* 32 KiB: a span per class and kind that holds few objects costs half of
 * what it did at 64 KiB (docs/performance.md, "Chunks of 32 KiB"). */
#define CHUNK_SHIFT    15
#define CHUNK_SIZE     ((uint64_t)1 << CHUNK_SHIFT)
#define PAGE_SIZE      4096u
/* Requests up to this size find their class with one table load; one
 * byte more (the collector's extra byte) must still be a small class. */
#define SMALL_REQUEST_MAX 12288u
/* Classes below this index, those smaller than a chunk, have several
 * objects per span and go through the thread caches. */
#define NUM_SMALL_CLASSES 42     /* 16 .. 16384 bytes */
/* Where small class c's chunks start, from its region's base (layout.c):
 * c MiB in, so that the chunk-map entries of the classes' first chunks,
 * otherwise 2 MiB apart, fall in different L1 sets. */
#define SMALL_CLASS_OFFSET(c) ((uint64_t)(c) << 20)

/* Kinds.  The first four have bdwgc's numbers; the others are made at
 * run time (lf_kind_new).  The chunk map names a kind in a byte, as
 * kind + 1 with 0 for "no span": 255 kinds. */
#define KIND_PTRFREE        0
#define KIND_NORMAL         1
#define KIND_UNCOLLECTABLE  2
#define KIND_AUNCOLLECTABLE 3
#define NUM_PREDEFINED_KINDS 4
#define MAX_KINDS           255
/* Manual mode (malloc.c): the kinds of malloc's objects, never collected
 * and never scanned, at the top of the table so that the kinds programs
 * make keep bdwgc's numbers.  Small objects of the plain mode, of the
 * hardened mode (wipe on free, randomised lists: its frees miss the fast
 * path's chunk-map test), and large objects, each under their own
 * number so that the free fast path tells them apart with one compare. */
#define KIND_MALLOC_LARGE   252
#define KIND_MALLOC_HARD    253
#define KIND_MALLOC         254
#define KIND_FIRST_MANUAL   KIND_MALLOC_LARGE
/* Kinds whose thread-local lists sit inline in the cache (the fast
 * paths' kinds); other kinds get theirs on first use. */
#define NUM_CACHED_KINDS    2

/* Free slots: word 0 holds the link (tagged so that it is never a heap
 * address and so never retains anything), word 1 a per-process canary; a
 * slot showing both is free.  Allocation clears both words. */
#define LINK_TAG ((uint64_t)1 << 63)
/* a - b, or 0 when b is larger (byte counts that estimates may overshoot). */
static inline uint64_t sub_floor0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
static inline void *link_encode(void *next) { return (void *)((uintptr_t)next ^ LINK_TAG); }
static inline void *link_decode(void *word) { return (void *)((uintptr_t)word ^ LINK_TAG); }
extern uint64_t lf_free_canary;
extern uint8_t *lf_chunk_map;           /* see Layout below */
/* Where a chunk's bytes are in the chunk and free maps (Layout below);
 * chunk_kind (Layout) is the lookup for words that may be anything. */
#define CHUNK_ENTRY 2
static inline uint64_t chunk_entry(uint64_t addr)
{
    return (addr >> CHUNK_SHIFT) * CHUNK_ENTRY;
}
LF_MALLOC_TEXT static inline bool slot_is_free(const void *slot)
{
    const uint64_t *w = slot;
    return (w[0] & LINK_TAG) && w[1] == lf_free_canary;
}
/* Is p the base of a slot that a span in use owns?  Reads no heap memory,
 * so any word may be tested (assertions, the verifier). */
LF_MALLOC_TEXT static inline bool slot_in_use(const void *p)
{
    return lowfat_is_ptr(p) && lowfat_base(p) == p &&
           lf_chunk_map[chunk_entry((uintptr_t)p)] != 0;
}
/* A free-list link from slot p is sound: to nothing, or to a slot in use
 * of the same class (region) and kind (chunk map). */
LF_MALLOC_TEXT static inline bool link_sound(const void *p, const void *next)
{
    return !next || (slot_in_use(next) && lowfat_index(next) == lowfat_index(p) &&
                     lf_chunk_map[chunk_entry((uintptr_t)next)] ==
                     lf_chunk_map[chunk_entry((uintptr_t)p)]);
}
/* Take the first slot of a non-empty free list, its link and canary
 * cleared: the one pop every allocation path shares.  These helpers are
 * in malloc's group of code (LF_MALLOC_TEXT) for builds that do not
 * inline them: with assertions on, their copies otherwise lay past the
 * group, where a malloc-only process should never run. */
LF_MALLOC_TEXT static inline void **free_list_pop(void **head)
{
    void **p = *head;
    lf_assert(slot_in_use(p));
    lf_assert(slot_is_free(p));
    *head = link_decode(p[0]);
    lf_assert(link_sound(p, *head));
    p[0] = p[1] = NULL;
    return p;
}
LF_MALLOC_TEXT static inline void slot_make_free(void *slot, void *next)
{
    lf_assert(slot_in_use(slot));
    lf_assert(link_sound(slot, next));
    void **w = slot;
    w[0] = link_encode(next);
    ((uint64_t *)slot)[1] = lf_free_canary;
}

/* ------------------------------------------------------------------ */
/* Bitmaps (bitmap.c): mark and allocation bits, one per slot, and the  */
/* verifier's scratch maps.                                             */

static inline bool bit_get(const uint64_t *bits, uint64_t i)
{
    return (bits[i >> 6] >> (i & 63)) & 1;
}
static inline void bit_set(uint64_t *bits, uint64_t i)
{
    bits[i >> 6] |= 1ull << (i & 63);
}
static inline void bit_clear(uint64_t *bits, uint64_t i)
{
    bits[i >> 6] &= ~(1ull << (i & 63));
}
/* Bits [from, to): any set, all set, how many set; clear them all. */
bool lf_bits_any(const uint64_t *bits, uint64_t from, uint64_t to);
bool lf_bits_all(const uint64_t *bits, uint64_t from, uint64_t to);
size_t lf_bits_count(const uint64_t *bits, uint64_t from, uint64_t to);
void lf_bits_clear(uint64_t *bits, uint64_t from, uint64_t to);

/* ------------------------------------------------------------------ */
/* Layout (layout.c)                                                   */

enum span_state {
    SPAN_UNUSED = 0,   /* never handed out, or back in the region's pool   */
    SPAN_SWEPT,        /* in use; its free slots (if any) are on free lists */
    SPAN_UNSWEPT,      /* in use; dead slots await the lazy sweep           */
};

struct span {
    struct span *next;      /* unswept list, or the region's free pool       */
    uint8_t state;          /* enum span_state                               */
    uint8_t kind;
    uint8_t dirty;          /* memory may hold old data: zero before reuse   */
    uint8_t old;            /* holds scanned objects marked by the last
                               collection (old ones, to a minor collection) */
    uint8_t nursery;        /* taken empty since the last collection: every
                               object in it is younger than that           */
    uint8_t aging;          /* a nursery span whose objects survived one minor
                               collection: the next one unmarks them and
                               traces them again (see dirty.c)              */
    /* Per chunk, not per span: pages of this chunk that dirty.c protected
     * and that no write has touched as of its last look. */
    uint16_t wp_pages;
    uint32_t free_since;    /* GC number when it went back to the pool       */
    /* Per chunk: pages excluded from write tracking (never protected,
     * always rescanned: lfgc_exclude_from_write_tracking). */
    uint8_t untracked_pages;
    /* Per chunk: pages written after dirty.c protected them, left
     * unprotected for a while (dirty.c, HOT_PASSES). */
    uint8_t hot_pages;
    /* A collection called a mark procedure that a descriptor read from
     * one of its objects named (gcj vtables, per-object kinds, typed
     * arrays): every minor collection rescans such objects (mark.c). */
    uint8_t indirect_procs;
    /* Some of its slots were on threads' lists at the last collection,
     * which marked them (cached_bits say which): mark.c unmarks them at
     * the next one. */
    uint8_t cached;
    /* Large span: bytes scanned and reported by GC_size.  Small span of
     * malloc's kinds on its class's orphans: the bitmap index at which its
     * linking resumes (alloc.c, cursor_orphan). */
    uint64_t obj_bytes;
};

struct region {
    uint64_t size;          /* slot size                                    */
    uint64_t magic;         /* lowfat_magics entry, kept here for locality  */
    uint64_t start;         /* where its chunks start: its base, or
                               SMALL_CLASS_OFFSET past it for small classes */
    uint64_t usable_end;    /* no slot may extend past this (precision and
                               region bounds)                               */
    uint64_t q0;            /* slot number of the first slot                */
    uint64_t *mark_bits;    /* one bit per slot, index q - q0 (its part of
                               lf_mark_heads while that covers its spans) */
    uint64_t *alloc_bits;   /* uncollectable kinds: one bit per allocated slot */
    struct span *spans;     /* one entry per chunk (span_at: the first ones
                               are in lf_span_heads); a span uses its first */
    struct span *pool;      /* spans back from use, memory still mapped     */
    struct span *released;  /* spans back from use, pages given back        */
    struct span *skipped;   /* blacklisted chunks passed by the frontier:
                               never used, no memory                        */
    uint64_t bl_limit;      /* hits this far into the region are recorded   */
    uint64_t next_chunk;    /* chunks handed out so far (the frontier)      */
    uint64_t max_chunks;
    uint32_t span_chunks;   /* chunks per span                              */
    uint8_t large;          /* one object per span                          */
    uint8_t mapped;         /* metadata mapped                              */
    uint8_t reserved;       /* address range reserved at start-up           */
    uint8_t bl_resident;    /* its first page of the blacklist is resident */
    uint32_t bl_clean_gc;   /* 1 + GC_gc_no when that page was last found
                               not resident: no hit since, lock held */
} __attribute__((aligned(64)));  /* 128 bytes: the marker indexes regions
                                    with one shift, not with a multiply   */
_Static_assert(sizeof(struct region) == 128, "struct region: 128 bytes");

extern struct region lf_regions[NUM_CLASSES];
/* The chunk and free maps are one table with an entry of CHUNK_ENTRY
 * bytes per chunk of user space, the chunk map's byte first, so that a
 * class's first chunks cost one page of table, not one of each map;
 * chunk_entry(addr) indexes both.
 * lf_chunk_map[chunk_entry(addr)] = 1 + kind of the span owning the slot
 * whose base is addr, 0 when no span in use owns it. */
extern uint8_t *lf_chunk_map;
/* lf_free_map[chunk_entry(addr)] = 1 + class of the span of malloc's
 * plain small kind owning the chunk, 0 otherwise, for every user-space
 * address (8 GiB of address space, read-only beyond the heap): the free
 * fast path's one lookup for kind, class and heap membership. */
extern uint8_t *lf_free_map;
/* What lf_free_map points to until the table is made. */
extern uint8_t lf_free_map_boot[((256u << 20) >> CHUNK_SHIFT) * CHUNK_ENTRY];
/* Set the bytes of `chunks` chunks from the entry at `entry` of one map. */
static inline void chunk_entries_set(uint8_t *map, uint64_t entry, uint64_t chunks, uint8_t v)
{
    for (uint64_t i = 0; i < chunks; i++)
        map[entry + i * CHUNK_ENTRY] = v;
}
/* The entry of chunk j of region r. */
static inline uint64_t region_chunk_entry(const struct region *r, uint64_t j)
{
    return chunk_entry(r->start) + j * CHUNK_ENTRY;
}
/* The chunk map's byte for slot base `base` of region r (1 + kind, 0: no
 * span in use owns it), for a word that may be anything: outside the
 * chunks handed out the map is not read, so that such words make none of
 * its untouched pages resident (a read maps one: the zero page, or on
 * some kernels a fresh page, per 64 MiB of region probed).  The marker
 * tests words of roots, stacks and mark procedures this way, not those of
 * heap objects (mark.c, mark_word_in). */
static inline unsigned chunk_kind(const struct region *r, uint64_t base)
{
    return base - r->start < r->next_chunk << CHUNK_SHIFT ? lf_chunk_map[chunk_entry(base)] : 0;
}
extern bool lf_layout_ok;
/* Another copy of lfgc owned the heap when this one loaded: this copy
 * must not act (see "One instance per process" in docs/design.md). */
extern bool lf_refused;
void lf_refused_abort(void) __attribute__((noreturn, cold));
static inline void refused_check(void)
{
    if (unlikely(lf_refused))
        lf_refused_abort();
}

bool lf_layout_init(void);
bool lf_region_map_metadata(struct region *r);
/* Mark bits of the first slots of every class, in one table: a class
 * whose slots need more gets a bitmap of its own (lf_region_cover_bits,
 * before its frontier reaches `chunks`; false when out of memory). */
#define MARK_HEAD_BITS 4096
extern uint64_t lf_mark_heads[NUM_CLASSES][MARK_HEAD_BITS / 64];
bool lf_region_cover_bits(struct region *r, uint64_t chunks);
/* Per small class: the slots on threads' lists at the last collection, a
 * bit per slot as in mark_bits.  The first MARK_HEAD_BITS of every class
 * are side by side in lf_cached_heads, as the mark bits' are; a class
 * whose cached slots lie further gets a bitmap of its own
 * (lf_cached_bits[c], NULL until then).  lf_region_cached_bits gives the
 * bitmap that holds bit `bit` (NULL: out of memory). */
extern uint64_t lf_cached_heads[NUM_SMALL_CLASSES][MARK_HEAD_BITS / 64];
extern uint64_t *lf_cached_bits[NUM_SMALL_CLASSES];
uint64_t *lf_region_cached_bits(struct region *r, uint64_t bit);
uint64_t lf_class_of_size(size_t bytes);              /* NUM_CLASSES if too big */
/* Where region r's address range starts and ends (its chunks start at
 * r->start, SMALL_CLASS_OFFSET past the base for small classes). */
static inline uint64_t region_base(const struct region *r)
{
    return r->start & ~(LOWFAT_REGION_SIZE - 1);
}
static inline uint64_t region_end(const struct region *r)
{
    return region_base(r) + LOWFAT_REGION_SIZE;
}
static inline struct region *region_of(const void *p)
{
    return &lf_regions[lowfat_index(p) - LOWFAT_FIRST_REGION];
}
/* The region and slot number of the object p points into, if a span in
 * use holds it. */
static inline bool lf_object_of(const void *p, struct region **rp, uint64_t *qp)
{
    uint64_t c = ((uintptr_t)p >> LOWFAT_REGION_SHIFT) - LOWFAT_FIRST_REGION;
    if (c >= NUM_CLASSES)
        return false;
    struct region *r = &lf_regions[c];
    uint64_t q = (uint64_t)(((unsigned __int128)(uintptr_t)p * r->magic) >> 64);
    if (q < r->q0 || !chunk_kind(r, q * r->size))
        return false;
    *rp = r;
    *qp = q;
    return true;
}
static inline uint64_t span_index_of(const struct region *r, uint64_t addr)
{
    return ((addr - r->start) >> CHUNK_SHIFT) / r->span_chunks * r->span_chunks;
}
/* First and one-past-last slot numbers of the span at chunk index j. */
void lf_span_slots(const struct region *r, uint64_t j, uint64_t *qfirst, uint64_t *qend);
/* The span entries of each class's first SPAN_HEAD_CHUNKS chunks are in
 * one table shared by all classes, lf_span_heads, so that a class with
 * few chunks costs no page of span table of its own (a class in use cost
 * one); those of the other chunks are in the region's table, r->spans
 * (whose first SPAN_HEAD_CHUNKS entries are never used). */
#define SPAN_HEAD_CHUNKS 16
extern struct span lf_span_heads[NUM_CLASSES][SPAN_HEAD_CHUNKS];
/* Chunk j's entry. */
static inline struct span *span_at(const struct region *r, uint64_t j)
{
    return likely(j < SPAN_HEAD_CHUNKS) ? &lf_span_heads[r - lf_regions][j] : r->spans + j;
}
/* Which chunk's entry s is (s is one of r's). */
static inline uint64_t span_chunk_index(const struct region *r, const struct span *s)
{
    uint64_t h = ((uintptr_t)s - (uintptr_t)lf_span_heads[r - lf_regions]) / sizeof *s;
    return h < SPAN_HEAD_CHUNKS ? h : (uint64_t)(s - r->spans);
}
/* Is s the entry of one of region r's first `chunks` chunks (the
 * verifier's test of a span pointer)? */
static inline bool span_in_region(const struct region *r, const struct span *s, uint64_t chunks)
{
    uintptr_t head = (uintptr_t)lf_span_heads[r - lf_regions];
    uintptr_t off = (uintptr_t)s - head;
    if (off < sizeof lf_span_heads[0])
        return off % sizeof *s == 0 && off / sizeof *s < chunks;
    off = (uintptr_t)s - (uintptr_t)r->spans;
    return r->spans && (uintptr_t)s >= (uintptr_t)r->spans && off % sizeof *s == 0 &&
           off / sizeof *s >= SPAN_HEAD_CHUNKS && off / sizeof *s < chunks;
}

/* The spans in use of every region, region by region in address order:
 *     for_each_span_in_use(it) { ... it.r, it.j (its chunk index), it.s ... }
 * `break` and `continue` work as in any loop.  Lock held or world stopped
 * (spans taken or freed meanwhile may be missed or seen twice). */
struct span_iter {
    struct region *r;       /* NULL before the first span                  */
    uint64_t j;
    struct span *s;
};
static inline bool span_next(struct span_iter *it)
{
    struct region *r = it->r;
    uint64_t j = 0;
    if (r)
        j = it->j + r->span_chunks;
    else
        r = lf_regions;
    for (; r < lf_regions + NUM_CLASSES; r++, j = 0) {
        if (!r->mapped)
            continue;
        for (; j < r->next_chunk; j += r->span_chunks)
            if (span_at(r, j)->state != SPAN_UNUSED) {
                it->r = r;
                it->j = j;
                it->s = span_at(r, j);
                return true;
            }
    }
    return false;
}
#define for_each_span_in_use(it) for (struct span_iter it = { 0 }; span_next(&it);)

/* ------------------------------------------------------------------ */
/* Blacklist (blacklist.c)                                             */

/* lf_blacklist[addr >> CHUNK_SHIFT]: the epoch in which a word that is
 * not a pointer last hit the chunk while no span owned it (0: never). */
extern uint8_t *lf_blacklist;
extern uint8_t lf_bl_epoch;
bool lf_blacklist_init(void);
void lf_blacklist_horizon(struct region *r);
void lf_blacklist_new_epoch(void);
bool lf_blacklisted(struct region *r, uint64_t j);
void lf_blacklist_initial_scan(void);
/* A word hit slot base `base` of region r, in a chunk no span owns. */
static inline void blacklist_hit(const struct region *r, uint64_t base)
{
    if (base - r->start < r->bl_limit)
        lf_blacklist[base >> CHUNK_SHIFT] = lf_bl_epoch;
}

/* ------------------------------------------------------------------ */
/* Kinds (kinds.c)                                                     */

/* How the marker scans an object of a kind.  The modes from SCAN_BITMAP on
 * are *precise*: a descriptor (bdwgc's GC_DS_* word, decoded in one place,
 * mark.c's scan_descr) names the words that may hold pointers, and only
 * those are scanned. */
enum scan_mode {
    SCAN_NONE,              /* pointer-free: never scanned                  */
    SCAN_CONSERVATIVE,      /* every word of the object                     */
    SCAN_LENGTH,            /* the first `descr` bytes (bdwgc's GC_DS_LENGTH) */
    SCAN_BITMAP,            /* words whose bit is set in `descr` (GC_DS_BITMAP) */
    SCAN_PER_OBJECT,        /* the descriptor is read from the object, or from
                               the record its first word points to
                               (GC_DS_PER_OBJECT)                            */
    SCAN_PROC,              /* a mark procedure: `descr` is its GC_DS_PROC
                               descriptor (index and argument)               */
    SCAN_TYPED_ARRAY,       /* GC_calloc_explicitly_typed's arrays: the last
                               three words say count, element size and the
                               element's descriptor (typed.c)               */
};

/* Per (class, kind) state shared by all threads. */
struct class_kind {
    void *free;             /* free list (encoded links), lock held          */
    struct span *unswept;   /* spans awaiting the lazy sweep, lock held      */
    uint32_t free_count;    /* slots on `free`                              */
    /* Slots freed by threads that had too many of the class (cross-thread
     * frees): a lock-free stack of lists, pushed and taken whole inside
     * sweep_enter/sweep_exit so that no collection sees a list in transit. */
    volatile AO_t remote;
    volatile AO_t remote_count; /* its slots (alloc.c: remote_push)          */
    /* malloc's kinds: spans taken empty whose linking stopped part way,
     * when the thread linking them left; the next refill that would take
     * a span resumes one (alloc.c: cursor_orphan).  Lock held. */
    struct span *orphans;
};
/* Put the free list at head in front of ck's global one, lock held; its
 * length, counted on the way to its tail. */
static inline uint32_t free_list_prepend(struct class_kind *ck, void **head)
{
    void **tail = head;
    uint32_t n = 1;
    for (void **next; (next = link_decode(tail[0])); tail = next)
        n++;
    tail[0] = link_encode(ck->free);
    ck->free = head;
    ck->free_count += n;
    return n;
}

struct kind {
    uint8_t in_use;
    uint8_t ptrfree;        /* scan == SCAN_NONE                            */
    uint8_t uncollectable;  /* never reclaimed; scanned as a root           */
    uint8_t clear;          /* objects are zeroed                           */
    uint8_t scan;           /* enum scan_mode                               */
    uint8_t add_size;       /* the object's size is added to `descr` (bdwgc's
                               add_size_to_descriptor)                      */
    uint8_t fixed_layout;   /* objects keep their layout at their end: not
                               resizable (typed.c)                          */
    uint8_t manual;         /* malloc's: freed explicitly only, never swept,
                               its spans' mark bits meaningless           */
    /* Its old objects are scanned again by every minor collection, written
     * or not: a mark procedure may read memory outside the object, whose
     * writes no page protection sees. */
    uint8_t rescan_minor;
    uintptr_t descr;        /* bdwgc's descriptor word: SCAN_LENGTH's bytes,
                               SCAN_BITMAP's bits, SCAN_PER_OBJECT's offset  */
    void *proc;             /* SCAN_PROC                                    */
    uintptr_t env;          /* SCAN_PROC: the procedure's argument          */
    struct class_kind *ck;  /* NUM_CLASSES entries                          */
};
extern struct kind lf_kinds[MAX_KINDS];
extern struct class_kind lf_predefined_ck[NUM_PREDEFINED_KINDS][NUM_CLASSES];
void lf_kinds_init(void);           /* the predefined kinds, first thing */
/* What the marker does with an object it has just marked, indexed by the
 * chunk-map byte (kind + 1): push its base with this tag, or do not push
 * it (MARK_NO_SCAN).  One byte per kind keeps mark_word's load small. */
#define MARK_DISPATCH_TAG ((uintptr_t)2)
#define MARK_NO_SCAN      4
extern uint8_t lf_kind_mark[MAX_KINDS + 1];
/* Interior pointers off (GC_all_interior_pointers 0 when the heap is set
 * up): the marker keeps an object only for a word at its base or at a
 * displacement GC_register_displacement made valid (offset 0 always,
 * without an entry: the table is zeros until a displacement is added). */
extern bool lf_base_only;
#define LF_MAX_DISPLACEMENT 4096
extern uint8_t lf_valid_displacements[LF_MAX_DISPLACEMENT];
static inline bool displacement_valid(uint64_t offset)
{
    return offset == 0 || (offset < LF_MAX_DISPLACEMENT && lf_valid_displacements[offset]);
}
static inline struct class_kind *class_kind_of(unsigned c, unsigned kind)
{
    return &lf_kinds[kind].ck[c];
}
/* A new kind; its index, or -1 when the table is full or the scan mode is
 * not implemented yet.  Thread-safe. */
int lf_kind_new(enum scan_mode scan, uintptr_t descr, void *proc, uintptr_t env,
                bool clear, bool uncollectable);
/* The same with bdwgc's add_size_to_descriptor. */
int lf_kind_new_sized(enum scan_mode scan, uintptr_t descr, bool add_size, void *proc,
                      uintptr_t env, bool clear, bool uncollectable);
bool lf_kind_valid(unsigned kind);                   /* made by now */
/* A copy of kind `kind` made on first use, its number + 1 kept in *twin
 * (0 until made): the same scanning, objects always cleared, uncollectable
 * or not as asked (GC_generic_malloc_uncollectable's kinds, the debugging
 * allocator's).  `made`, if not NULL, learns a new one before *twin says
 * it.  -1 when no kind is left.  Thread-safe. */
int lf_kind_twin(unsigned kind, uint8_t *twin, bool uncollectable, void (*made)(unsigned k));
/* Describe the type of the object at base (a slot in use) in buf, of
 * GC_TYPE_DESCR_LEN + 1 bytes: GC_register_describe_type_fn's function
 * for a marked object of its kind, else the kind. */
void lf_describe_type(void *base, char *buf);
unsigned lf_kinds_made(void);
/* Some collectable kind is rescanned whole by every minor collection
 * (struct kind's rescan_minor): set when one is made, never cleared. */
extern bool lf_kinds_rescan_minor;
/* Mark procedures by index (GC_new_proc), read by the markers. */
extern GC_mark_proc lf_mark_procs[GC_MAX_MARK_PROCS];
/* Set procedure i (NULL: leave it) for gcj-style allocation, which
 * names it, as bdwgc requires, by a reserved index (not typed.c's) or one
 * GC_new_proc returned; false for any other, which a later GC_new_proc
 * would hand to another procedure. */
bool lf_mark_proc_set(unsigned i, GC_mark_proc proc);
static inline bool kind_precise(const struct kind *k)
{
    return k->scan >= SCAN_BITMAP;
}
/* Does the marker read an object of this kind to learn what to scan in
 * it (a descriptor in the object or in the record its first word points
 * to, a mark procedure, a typed array's trailer)?  A slot of such a kind
 * must never hold another kind's data, even before it is handed out. */
static inline bool kind_reads_objects(const struct kind *k)
{
    return k->scan >= SCAN_PER_OBJECT;
}
/* The part of the object at base (len bytes, of kind k) that the marker
 * scans, as a length: 0 for none.  For a precise kind, the whole object
 * (the words it names lie in it): the marker itself goes through
 * lf_mark_push_part, which follows the descriptor. */
static inline uint64_t kind_scan_len(const struct kind *k, const void *base, uint64_t len)
{
    if (k->scan == SCAN_NONE)
        return 0;
    if (k->scan == SCAN_LENGTH) {
        uint64_t d = k->descr + (k->add_size ? len : 0);
        return d < len ? d : len;
    }
    /* A free slot of a kind that is not cleared keeps what it held. */
    if ((!k->clear || kind_precise(k)) && len >= 16 && slot_is_free(base))
        return 0;
    return len;
}

/* ------------------------------------------------------------------ */
/* Allocation (alloc.c)                                                */

/* Where a thread is in the span it sweeps lazily for a class and kind. */
struct sweep_cursor {
    struct span *span;      /* NULL: none                                  */
    uint64_t next, end;     /* bitmap indices still to sweep               */
    bool clear;             /* zero dead slots                             */
    bool fresh;             /* the span was taken empty                    */
    uint32_t head;          /* slots just below `next`, the span's first,
                               to link after the first piece (alloc.c:
                               cursor_color)                                */
};

/* Owner groups of malloc's plain small spans.  Every thread belongs to
 * one (the one with fewest threads when it registered); a span belongs
 * to the group of the thread that claimed it, and lf_free_map's byte
 * for its chunks says which: 1 + class + group * FREE_GROUP_STRIDE, so
 * that the free fast path accepts only its own group's slots, and a slot
 * freed by another group's thread goes back to its owners (their
 * lock-free remote list, taken by their next refill) instead of staying
 * in the freeing thread's cache, beside its owners' objects. */
#define FREE_GROUPS       5
#define FREE_GROUP_STRIDE NUM_SMALL_CLASSES
_Static_assert(1 + FREE_GROUPS * FREE_GROUP_STRIDE <= 256, "free map byte: group and class");

/* A thread's lists of one kind. */
struct kind_cache {
    void *free[NUM_SMALL_CLASSES];
    struct sweep_cursor cursor[NUM_SMALL_CLASSES];
    /* Frees the fast paths (malloc's and GC_free's) may still push onto
     * free[c] before the list is measured (cache_trim), counted down. */
    int64_t credit[NUM_SMALL_CLASSES];  /* words, as free[]: one index */
    struct kind_cache *next;        /* spare list                         */
};

/* Bytes before thread_cache.k that put it at a page boundary of a thread
 * record (threads.c checks). */
#define LF_CACHE_K_PAD 64
struct thread_cache {
    /* In the order that keeps what a thread touches on two pages of its
     * record (threads.c: the record's own fields, then this): malloc's
     * part first, the free map's address (set at registration) in the
     * first page, the magics (set at the first free) in the second; the
     * collector's lists from the next page boundary (LF_CACHE_K_PAD,
     * checked in threads.c), so that a thread that only uses the
     * collector touches the first page and that one. */
    struct kind_cache mk;                   /* malloc's (the manual kinds) */
    /* Per thread, so that refills touch no cache line shared with other
     * threads: */
    volatile AO_t sweeping;     /* sweeping outside the lock (sweep_enter) */
    uint64_t allocd;            /* bytes refilled, not yet added to hs     */
    uint64_t freed_bytes;       /* bytes freed here, not yet added to hs   */
    uint64_t cycle;             /* GC_gc_no + 1 when cycle_allocd was reset */
    uint64_t cycle_allocd;      /* bytes added to hs since that collection */
    /* Registered by malloc (manual mode) only: the thread has a cache but
     * is neither stopped nor scanned by collections, until it calls the
     * collector (lf_thread_cache_create), which may never happen.  A
     * thread that only mallocs may block every signal. */
    uint8_t manual_only;
    /* The owner group of the malloc spans this thread claims (see
     * lf_free_fast), once free_grouped is set. */
    uint8_t free_group, free_grouped;
    /* What free's fast path reads (lf_free_fast), here so that it needs
     * nothing but the cache, through lf_tl_free (the cache's address moved
     * down by the group's shift, FREE_SHIFT): at FREE_MAP_AT(g) the
     * address of lf_free_map, which is also the free-slot canary; at
     * free_magic[FREE_MAGIC_OWN + c] lowfat_magics of malloc's class c,
     * which the fast path finds with the free map's byte k = 1 + c + g *
     * FREE_GROUP_STRIDE of a span of its own group; every other entry it
     * may read (another group's k, or 0 for anything but malloc's plain
     * small spans) is 0, which fails the slot-base test, as the own ones
     * do until the cache is armed and in lf_empty_cache.  liblfgc-malloc's
     * free reads them too: their offsets, and those of mk.free and
     * mk.credit, are a private interface between the two libraries
     * (LF_PRIVATE_ABI). */
    uint8_t *free_map_at[FREE_GROUP_STRIDE * (FREE_GROUPS - 1) + 1];
    /* Per class, slots of another group's spans freed here, gathered
     * into a list (all of one group) that goes onto the group's remote
     * list in one CAS (alloc.c: remote_defer). */
    struct remote_pending {
        void *head, *tail;
        int32_t left;           /* slots to gather before the next hand-over */
        uint8_t group;
    } pend[NUM_SMALL_CLASSES];
    uint64_t free_magic[FREE_GROUP_STRIDE * (FREE_GROUPS - 1) + 256];  /* see free_map_at */
    uint8_t k_pad[LF_CACHE_K_PAD];
    struct kind_cache k[NUM_CACHED_KINDS];  /* the collector's fast paths' lists */
    struct kind_cache *more[MAX_KINDS];     /* other kinds, made on first use */
};
#define FREE_MAP_AT(g)  (FREE_GROUP_STRIDE * (FREE_GROUPS - 1 - (g)))
#define FREE_MAGIC_OWN  (FREE_GROUP_STRIDE * (FREE_GROUPS - 1) + 1)
/* lf_tl_free of a cache of group g: its address less this many bytes. */
#define FREE_SHIFT(g)   ((uint64_t)(g) * FREE_GROUP_STRIDE * 8)
extern __thread struct thread_cache *lf_tl_cache __attribute__((tls_model("initial-exec")));
/* The calling thread's cache as free's fast path addresses it:
 * lf_tl_cache less FREE_SHIFT of its group. */
extern __thread struct thread_cache *lf_tl_free __attribute__((tls_model("initial-exec")));
extern struct thread_cache lf_empty_cache;
/* Free's fast path's view of it (alloc.c): the free map's address first. */
extern uint8_t *lf_empty_free[];
/* A new cache: its group and free map set; the magics once the heap is
 * set up (else the first free that takes the slow path does it). */
void lf_cache_arm_free(struct thread_cache *tc);
/* Its group and free map only: the magics wait for the thread's first
 * free, which takes the slow path (a thread that never frees leaves their
 * page of its record untouched). */
void lf_cache_arm_map(struct thread_cache *tc);
/* Make tc (armed, or lf_empty_cache) the calling thread's cache. */
void lf_tl_cache_set(struct thread_cache *tc);
void lf_groups_after_fork(struct thread_cache *tc);   /* in the child */

/* liblfgc-malloc reads struct thread_cache through this alias of
 * lf_tl_cache, whose name carries the number: bump it whenever a field
 * lf_free_fast reads moves, so that a liblfgc-malloc built for another
 * layout fails to load rather than corrupt the heap. */
#define LF_PRIVATE_ABI 5
#define LF_PRIVATE_TLS_CACHE_(n) lfgc_private_tl_cache_##n
#define LF_PRIVATE_TLS_CACHE(n) LF_PRIVATE_TLS_CACHE_(n)
/* Should the number not be bumped, the layout itself is compared:
 * liblfgc exports this value as built (lfgc_private_layout) and
 * liblfgc-malloc checks it against its own at load, so that a pair from
 * different builds stops with a message.  The salt only lets a test
 * build a mismatched liblfgc-malloc. */
#ifndef LF_PRIVATE_LAYOUT_SALT
# define LF_PRIVATE_LAYOUT_SALT 0
#endif
#define LF_LAYOUT_MIX(h, v) (((h) ^ (uint64_t)(v)) * 0x100000001b3ull)
#define LF_PRIVATE_LAYOUT                                                          \
    LF_LAYOUT_MIX(LF_LAYOUT_MIX(LF_LAYOUT_MIX(LF_LAYOUT_MIX(LF_LAYOUT_MIX(        \
    LF_LAYOUT_MIX(LF_LAYOUT_MIX(0xcbf29ce484222325ull, LF_PRIVATE_ABI),          \
        offsetof(struct thread_cache, free_map_at) + FREE_GROUPS),               \
        offsetof(struct thread_cache, free_magic) + FREE_GROUP_STRIDE),          \
        offsetof(struct thread_cache, mk.free)),                                 \
        offsetof(struct thread_cache, mk.credit)),                               \
        (uint64_t)NUM_SMALL_CLASSES << 8 | CHUNK_SHIFT),                         \
        LINK_TAG ^ (uint64_t)LF_PRIVATE_LAYOUT_SALT)

/* free's fast path, shared by lfgc_free and liblfgc-malloc's free: true
 * when p went onto the thread's list.  tc is lf_tl_free (the cache less
 * its group's shift).  The free map's address is the canary
 * (lf_alloc_init), so one register serves both.  One byte of the free map
 * gives k, 1 + the class + group * FREE_GROUP_STRIDE when a span of
 * malloc's plain small kind owns p's chunk (so: in the heap, a span in
 * use, malloc's, small, not hardened, not the collector's), 0 otherwise;
 * with the shift, the thread's own group's k index its own entries, and
 * any other k a zero magic; p is a slot base (its address a multiple of
 * the class's size: the low product with the reciprocal is below the
 * reciprocal, which is 0 for k = 0 and other groups' k, whose frees so go
 * back to their owners by the slow path); it is not free (the canary);
 * and the thread's credit of frees is not spent.  In assembly: GCC would
 * copy the reciprocal into a register for the compare and compute the
 * address of the thread's entries first (two instructions more). */
static inline __attribute__((always_inline)) bool lf_free_fast(void *p, struct thread_cache *tc)
{
    uint64_t m, t, k, link;
    __asm__ volatile goto("mov %c[map](%[tc]), %[m]\n\t"   /* map and canary */
                          "mov %[p], %[k]\n\t"
                          "shr %[chunk_shift], %[k]\n\t"
                          "movzbl (%[m],%[k],%c[entry]), %k[k]\n\t"
                          "mov %[p], %[t]\n\t"
                          "imul %c[magic](%[tc],%[k],8), %[t]\n\t"
                          "cmp %c[magic](%[tc],%[k],8), %[t]\n\t"
                          "jae %l[slow]\n\t"                  /* not a slot base */
                          "cmp %[m], 8(%[p])\n\t"
                          "je %l[slow]\n\t"                   /* free already */
                          "subq $1, %c[credit](%[tc],%[k],8)\n\t"
                          "js %l[slow]\n\t"                   /* time to trim */
                          "mov %c[head](%[tc],%[k],8), %[link]\n\t"
                          "mov %[m], 8(%[p])\n\t"
                          "btc $63, %[link]\n\t"              /* link_encode */
                          "mov %[link], (%[p])\n\t"
                          "mov %[p], %c[head](%[tc],%[k],8)"
                          : [m] "=&r"(m), [t] "=&r"(t), [k] "=&r"(k), [link] "=&r"(link)
                          : [p] "r"(p), [tc] "r"(tc), [chunk_shift] "i"(CHUNK_SHIFT), [entry] "i"(CHUNK_ENTRY),
                            [map] "i"(offsetof(struct thread_cache, free_map_at) +
                                      8 * FREE_MAP_AT(0)),
                            [magic] "i"(offsetof(struct thread_cache, free_magic) +
                                        8 * (FREE_MAGIC_OWN - 1)),
                            [credit] "i"(offsetof(struct thread_cache, mk.credit) - 8),
                            [head] "i"(offsetof(struct thread_cache, mk.free) - 8)
                          : "cc", "memory"
                          : slow);
    return true;
slow:
    return false;
}

extern const uint8_t *lf_request_class;     /* [SMALL_REQUEST_MAX + 1]: lf_malloc_class + extra */
extern size_t lf_extra_bytes;

void lf_alloc_init(void);
void lf_interior_setup(void);
/* An object of the collector's has been sized (with lf_extra_bytes):
 * GC_all_interior_pointers is fixed from then on, as from GC_init. */
extern bool lf_gc_objects_sized;
void *lf_alloc_kind(size_t bytes, unsigned kind);
void *lf_base(const void *p);                        /* GC_base */
void *lf_alloc_aligned(size_t align, size_t bytes, unsigned kind);
bool lf_free_held(void *p);                          /* GC_free, lock held */
void lf_caches_discard(void);
extern volatile AO_t lf_gc_pending;
void lf_sweepers_hold(void);
void lf_sweepers_release(void);
/* Puts a span back in its region's pool; a large one's pages join the
 * batch of releases below, which the caller flushes before it lets the
 * lock go (span_take flushes it too). */
void lf_span_free(struct region *r, struct span *s);
/* Pages given back a batch of ranges at a time, in one system call
 * (alloc.c; lock held): a range joins the batch, the flush gives the
 * batch back.  Memory in the batch is not written until the flush. */
void lf_pages_release_add(uint64_t base, uint64_t len);
void lf_pages_release_flush(void);
void lf_release_idle_spans(bool all);
/* Freed large malloc'ed objects keep their pages up to malloc's heap / 16,
 * within these bounds, or up to the largest one freed before (at most
 * LARGE_RETAIN_TOP, glibc's largest mmap threshold); lf_large_retained_release
 * gives them back (alloc.c; lock held). */
#define LARGE_RETAIN_MIN ((uint64_t)1 << 20)
#define LARGE_RETAIN_MAX ((uint64_t)4 << 20)
#define LARGE_RETAIN_TOP ((uint64_t)32 << 20)
/* Past the budget, freed spans of up to this many bytes stay until they
 * make this many, then go back together, in one system call. */
#define LARGE_RELEASE_BATCH ((uint64_t)1 << 20)
bool lf_large_retained_release(void);
/* Never-linked slots of class c's orphan spans of kind k (alloc.c:
 * cursor_orphan), counted as free by mallinfo.  Lock held. */
uint64_t lf_orphan_slots(unsigned c, unsigned k);
bool lf_heap_expand(size_t bytes);
void *lf_oom(size_t bytes);

/* Manual mode (malloc.c; alloc.c for what touches the caches). */
extern uint8_t lf_malloc_class[SMALL_REQUEST_MAX + 2];  /* no extra byte */
extern unsigned lf_malloc_small_kind;   /* KIND_MALLOC or KIND_MALLOC_HARD */
extern bool lf_malloc_wipe, lf_malloc_shuffle;
extern uint64_t lf_malloc_heap_bytes;   /* spans of the manual kinds, lock held */
void *lf_alloc_manual(unsigned c, size_t bytes, unsigned kind);
void lf_manual_free_small(void *p, unsigned c);
void lf_malloc_free_checked(void *p, struct region *r);  /* GC_free of malloc's */
void lf_malloc_remote_pushed(uint64_t bytes);
bool lf_malloc_scavenge_before_growth(void);   /* malloc.c; lock held */
int64_t lf_refill_credit_empty(unsigned c);    /* alloc.c */
/* Owner groups (alloc.c): their remote lists to the global ones (g < 0:
 * every group's), lock held; the free slots on them of class c, each
 * link checked with free_slot before it is followed, lock held. */
/* free once its fast path has failed: liblfgc-malloc's free goes here
 * (a private interface between the two libraries, as LF_PRIVATE_ABI).
 * Another group's slot goes back to it; anything else to malloc.c's
 * lf_malloc_free_slow, which says what is wrong. */
LFGC_EXPORT void lfgc_private_free_slow(void *p);
void lf_malloc_free_slow(void *p);
void lf_owner_remote_drain(int g);
void lf_groups_left_release(void);
uint64_t lf_owner_remote_count(unsigned c, bool (*free_slot)(void *p, unsigned c));
uint64_t lf_pending_count(struct thread_cache *tc, unsigned c,
                          bool (*free_slot)(void *p, unsigned c));
void lf_malloc_remote_taken(uint64_t bytes);
void lf_malloc_shuffle_list(void **head);
void lf_malloc_insert_random(void **head, void *p);
uint64_t lf_span_release(struct region *r, struct span *s);
bool lf_on_own_stack(const void *p);
void lf_fork_handlers_install(void);

/* Messages (api.c).  A format with one conversion (%p, %ld, %lu, %d, %u,
 * %x, %s) of arg.  lf_warn goes to the warn proc, lf_log to stderr
 * (GC_PRINT_STATS).  While the calling thread has the world stopped,
 * where a stopped thread may hold stdio's or malloc's lock, stderr output
 * is written at once with write(2) and the warn proc's calls wait in a
 * fixed queue until lf_messages_flush (after the world restarts). */
void lf_warn(const char *fmt, uintptr_t arg);
/* v in base (10 or 16, with '-' first if neg) into buf at `at`, without
 * stdio, leaving room for a NUL within size; returns where it ended. */
size_t lf_put_num(char *buf, size_t at, size_t size, uint64_t v, unsigned base, bool neg);
/* compat.c: abort through the program's GC_set_abort_func function; the
 * descriptor GC_set_log_fd chose for lf_log and GC_dump (2 by default);
 * GC_set_on_heap_resize's callback, called with the lock held. */
void lf_abort(const char *msg) __attribute__((noreturn));
extern int lf_log_fd;
/* Names of bdwgc's private headers that its libgc.so.1 exports and
 * programs built with those headers use (docs/compatibility.md): not in
 * lfgc's public headers either. */
LFGC_EXPORT extern GC_abort_func GC_on_abort;
LFGC_EXPORT void GC_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LFGC_EXPORT void GC_err_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LFGC_EXPORT void GC_log_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LFGC_EXPORT void GC_incr_bytes_allocd(size_t bytes);
LFGC_EXPORT void GC_incr_bytes_freed(size_t bytes);
void lf_heap_resized(uint64_t heap_bytes);
void lf_log(const char *fmt, uintptr_t arg);
/* Write len bytes of buf to fd, as much as write(2) takes, past EINTR
 * (api.c). */
void lf_write_all(int fd, const char *buf, size_t len);
void lf_messages_flush(void);
/* Leak-finding mode (leak.c): its collection hooks, at start-up; the
 * environment and the exit check, when collection turns on. */
void lf_leak_init(void);
/* strndup with the allocator given (api.c). */
char *lf_strndup_with(const char *s, size_t n, void *(*alloc)(size_t));
/* The debugging allocator's check at each collection (debug_alloc.c). */
void lf_debug_alloc_init(void);
void lf_leak_collection_on(void);
/* Slots [from, to) of region r were never allocated: the rest of a span a
 * thread was linking piece by piece (leak mode set after start-up, so not
 * taken whole).  A collection in leak mode, world stopped, marks them as
 * reported, so that they are not. */
void lf_leak_never_allocated(const struct region *r, uint64_t from, uint64_t to);
/* GC_set_disable_automatic_collection (compat.c): only explicit
 * collections and those of a heap that cannot grow. */
extern bool lf_auto_collect_off;
/* GC_deinit was called, and GC_init not since (compat.c). */
extern bool lf_deinit_called;
/* GC_dump_named's dump to lf_log_fd, lock not taken (stats.c). */
void lf_dump(const char *name);

/* ------------------------------------------------------------------ */
/* Marking (mark.c) and sweeping (sweep.c)                             */

void lf_mark_init(void);
void lf_mark_prepare(void);
void lf_mark_begin(uint64_t expected_bytes);  /* bytes it expects to trace */
void lf_mark_finish(void);
void lf_mark_after_fork(void);
unsigned lf_mark_markers(void);
void lf_mark_set_markers(unsigned n);
void lf_mark_clear_all(void);
void lf_mark_range(const void *lo, const void *hi);   /* scan a root range    */
/* A stack or saved registers: as lf_mark_range, but with interior
 * pointers off an interior pointer from there still keeps its object, as
 * in bdwgc (compilers keep derived pointers in frames and registers). */
void lf_mark_stack_range(const void *lo, const void *hi);
void lf_mark_push(const void *lo, const void *hi);    /* queue a range: scanned by a later drain */
/* Minor collection: queue the marked objects of kinds rescanned at every
 * minor collection (rescan_minor); their bytes. */
uint64_t lf_mark_rescan_kinds(void);
/* The program's push-other-roots procedure (GC_set_push_other_roots). */
void lf_mark_push_other_roots(void);
/* Queue the part [lo, hi) of the object at base (a slot in use), scanned
 * as its kind says: for a precise kind, only the words in it that the
 * descriptor names.  lo and hi within what kind_scan_len gives. */
void lf_mark_push_part(const void *base, const void *lo, const void *hi);
/* Clear the mark of the object at p (a slot base), lock held: objects
 * freed explicitly must not look old to a minor collection. */
static inline void mark_clear(struct region *r, const void *p)
{
    lf_assert(slot_in_use(p) && &lf_regions[lowfat_index(p) - LOWFAT_FIRST_REGION] == r);
    bit_clear(r->mark_bits, lowfat_slot_number(p) - r->q0);
}
void lf_uncollectables_push(void);
/* After lf_mark_finish, for finalization (world stopped).  A pointer
 * outside the heap counts as marked. */
void lf_mark_serial(bool on);                  /* marker 0 alone until off */
bool lf_mark_is_set(const void *p);
/* The mark bit of the object p points into, as lf_mark_is_set and
 * lf_mark_set see it, found once: the word holding it and its mask.
 * Without a word, the mask is the answer: 1 when p is not in the heap
 * (not the collector's to free, so it counts as marked), 0 when no span
 * in use holds p (unmarked, and never set).  Inline: finalization asks it
 * of every entry at each collection. */
struct lf_mark_ref {
    uint64_t *word;
    uint64_t mask;
};
static inline struct lf_mark_ref lf_mark_ref(const void *p)
{
    struct region *r;
    uint64_t q;
    if (!lowfat_is_heap_ptr(p))
        return (struct lf_mark_ref){ NULL, 1 };
    if (!lf_object_of(p, &r, &q))
        return (struct lf_mark_ref){ NULL, 0 };
    uint64_t bit = q - r->q0;
    return (struct lf_mark_ref){ &r->mark_bits[bit >> 6], 1ull << (bit & 63) };
}
static inline bool lf_mark_ref_is_set(struct lf_mark_ref m)
{
    return m.word ? (*m.word & m.mask) != 0 : m.mask != 0;
}
bool lf_mark_in_object(const void *p);          /* p is in an allocated slot */
void lf_mark_object(const void *p);             /* mark it and what it reaches */
void lf_mark_set(const void *p);                /* mark it alone           */
void lf_mark_contents(const void *p, bool skip_self);   /* what it reaches */
void lf_sweep_after_mark(bool generational);
void lf_mark_clear_aging(void);
void lf_mark_clear_cached(void);
void *lf_sweep_slots(struct region *r, uint64_t *next, uint64_t end, size_t want,
                  bool clear, size_t *count);
/* The same, linked as GC_generic_malloc_many hands lists out: plain
 * pointers in the first words, no canary, every other word zero where
 * `clear` (else as found, but for the second word, zeroed). */
void *lf_sweep_slots_plain(struct region *r, uint64_t *next, uint64_t end, size_t want,
                           bool clear, size_t *count);

/* Long bitmaps (typed.c): GC_make_descriptor's descriptors for layouts
 * longer than a bitmap descriptor holds are GC_MAKE_PROC(lf_typed_proc,
 * record), with the bits in a record of typed.c's that the marker reads
 * directly.  lf_typed_proc is LF_NO_PROC until the first one is made. */
#define LF_NO_PROC 0xffu
/* The index: one that GC_new_proc never hands out (bdwgc reserves the
 * first eight for clients that need a fixed one; gcj takes 0, lfgc the
 * last). */
#define LF_TYPED_PROC_INDEX 7u
extern unsigned lf_typed_proc;
struct lf_long_bitmap {
    uint64_t nbits;             /* words described                          */
    uint64_t bits[];            /* bit i % 64 of bits[i / 64]: word i        */
};
const struct lf_long_bitmap *lf_long_bitmap_of(uintptr_t env);   /* NULL: not one */
/* A GC_DS_PROC descriptor's procedure index and argument (GC_MAKE_PROC). */
static inline unsigned descr_proc_index(uintptr_t d)
{
    return (unsigned)(d >> GC_DS_TAG_BITS) & (GC_MAX_MARK_PROCS - 1);
}
static inline uintptr_t descr_proc_env(uintptr_t d)
{
    return d >> (GC_DS_TAG_BITS + GC_LOG_MAX_MARK_PROCS);
}
/* The one test of a GC_DS_PROC descriptor d: the long bitmap it names
 * (GC_make_descriptor's), or NULL when it names mark procedure
 * descr_proc_index(d). */
static inline const struct lf_long_bitmap *descr_long_bitmap(uintptr_t d)
{
    return descr_proc_index(d) == lf_typed_proc ? lf_long_bitmap_of(descr_proc_env(d)) : NULL;
}

/* ------------------------------------------------------------------ */
/* Written-page tracking for minor collections (dirty.c)               */

void lf_dirty_init(bool enable);
bool lf_dirty_enabled(void);
bool lf_dirty_begin(void);           /* false: this collection must be full  */
uint64_t lf_dirty_mark_old(void);       /* bytes of old objects queued */
void lf_dirty_protect(bool full);
void lf_dirty_after_fork(void);
void lf_dirty_exclude(uint64_t lo, uint64_t hi);   /* lock held */
/* Whether the heap page at addr was protected by the last collection and
 * not written since (as lf_dirty_begin learnt it). */
bool lf_dirty_page_unwritten(struct region *r, uint64_t addr);
bool lf_pins_allow_minor(void);      /* pins.c; world stopped */

/* ------------------------------------------------------------------ */
/* Finalization, disappearing links, toggle references (finalize.c)    */

extern volatile AO_t lf_finalizers_due;
size_t lf_finalize_entries(void);      /* finalizers and links registered */
void lf_finalize_before_stop(void);     /* lock held, world running   */
void lf_finalize_mark_roots(void);      /* world stopped              */
void lf_finalize_after_mark(void);      /* world stopped, marks final */
void lf_finalize_after_restart(void);   /* lock held                  */
void lf_finalize_due(void);             /* lock not held              */
void lf_finalize_forget(void *p, size_t bytes);  /* GC_free, lock held */
/* Kinds with a disclaim procedure: their objects in use are recorded in
 * the regions' alloc_bits (set by lf_alloc_kind, cleared by frees). */
extern uint8_t lf_disclaim_tracked[MAX_KINDS];
void lf_disclaim_track(void *p, bool allocated);
/* Set while dead objects of disclaim kinds wait for their procedures:
 * lf_disclaim_mark then answers GC_is_marked and friends for them. */
extern volatile AO_t lf_disclaim_pending;
enum disclaim_mark_op { DISCLAIM_MARK_GET, DISCLAIM_MARK_SET, DISCLAIM_MARK_CLEAR };
int lf_disclaim_mark(const void *p, enum disclaim_mark_op op);
uint64_t lf_finalize_queued_bytes(void);   /* by the last collection      */
bool lf_finalize_wants_collection(uint64_t allocd);   /* before growing  */

/* ------------------------------------------------------------------ */
/* Roots (roots.c)                                                     */

void lf_roots_init(void);
void lf_roots_prepare(void);         /* before stopping the world: list the
                                        data segments, hold the loader's lock */
void lf_roots_release(void);         /* after restarting it                  */
void lf_roots_mark(void);            /* data segments, user roots, stacks    */
size_t lf_roots_size(void);          /* bytes of roots seen by the last scan */
/* Address of a word of the data segments or added roots (exclusions left
 * out) holding a value in [lo, hi), or 0: lock held, outside a
 * collection (gc_backptr.h). */
uintptr_t lf_roots_find(uintptr_t lo, uintptr_t hi);
/* Address of the first aligned word of [lo, hi) holding a value in
 * [vlo, vhi), or 0 (the search of lf_roots_find and lf_stacks_find). */
uintptr_t lf_word_find(uintptr_t lo, uintptr_t hi, uintptr_t vlo, uintptr_t vhi);
/* Is p in the static data or added roots scanned (GC_is_visible)?  Lock
 * held, outside a collection. */
bool lf_roots_contain(uintptr_t p);

/* ------------------------------------------------------------------ */
/* Threads (threads.c)                                                 */

extern pthread_mutex_t lf_gc_lock;
void lf_threads_init(void);
struct thread_cache *lf_thread_cache_create(void);
struct thread_cache *lf_thread_cache_create_manual(void);   /* manual_only */
/* As those two for a free: NULL, not a new registration, in a thread
 * whose exit hook has run (the free then takes the lock). */
struct thread_cache *lf_thread_cache_for_free(bool manual);
void lf_caches_mark(void);                 /* lf_cache_mark() on every thread  */
bool lf_threads_sweeping(void);            /* some thread is in sweep_enter  */
void lf_cache_mark(struct thread_cache *tc);
/* fn(cache, arg) for every registered thread's cache: lock held. */
void lf_caches_each(void (*fn)(struct thread_cache *tc, void *arg), void *arg);
void lf_cache_return(struct thread_cache *tc);
void lf_stop_world(void);
void lf_start_world(void);
/* The unlock of GC_call_with_alloc_lock and GC_alloc_unlock (threads.c). */
void lf_unlock_to_caller(void);
bool lf_world_stopped_by_self(void);       /* between those two, by us */
void lf_stacks_set_scan_start(const void *sp);   /* see lf_collect() */
/* Call fn(a, b, c) with the calling thread's entry into the library
 * recorded: a collection it runs scans this thread's stack from the
 * caller's frame, with the callee-saved registers the caller had, and not
 * the library's frames in between (which hold stale words: padding, dead
 * locals).  Every path to lf_collect() goes through it. */
typedef void *lf_entry_fn(uintptr_t a, uintptr_t b, uintptr_t c);
void *lf_entered(lf_entry_fn *fn, uintptr_t a, uintptr_t b, uintptr_t c);
void lf_stacks_mark(void);
/* Is p in a registered thread's stack, between its lowest known address
 * (the caller's frame for the calling thread) and its base, or in its
 * static TLS?  Lock held (GC_is_visible). */
bool lf_stacks_contain(uintptr_t p);
size_t lf_stacks_size(void);       /* bytes of stack seen by the last scan */
/* Address of a word of a registered thread's stack (the calling
 * thread's from `own` up) or static TLS holding a value in [lo, hi), or
 * 0: lock held, outside a collection (gc_backptr.h). */
uintptr_t lf_stacks_find(uintptr_t lo, uintptr_t hi, uintptr_t own);
void lf_lock_contended(void);
/* The lock, uncontended in one atomic instruction.  A thread that must wait
 * for it waits as in GC_do_blocking (see lock_contended). */
static inline void lock(void)
{
    if (unlikely(pthread_mutex_trylock(&lf_gc_lock) != 0))
        lf_lock_contended();
}
static inline void unlock(void) { pthread_mutex_unlock(&lf_gc_lock); }
/* Cancellation is off while a thread collects, stops the world or waits
 * with the lock held: acted upon there (sem_timedwait, pthread_cond_wait,
 * open and read are cancellation points), it would unwind the thread with
 * the lock held and the world stopped, and the thread's cleanup would
 * wait for the lock for ever.  A pending request takes effect at the next
 * cancellation point after.  Slow paths only. */
static inline int nocancel_begin(void)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    return old;
}
/* glibc (2.36 here) acts on a pending request at once when the state
 * comes back to enabled with the asynchronous type (a thread interrupted
 * inside read() has it), but without storing PTHREAD_CANCELED: pthread_join
 * then returns whatever the descriptor held, perhaps the result of the
 * exited thread whose cached descriptor this one reuses.  So the state
 * comes back under the deferred type, and restoring the type acts on the
 * request, storing the result.  Safe in a signal handler: both calls are
 * only atomic operations on the thread's own flags. */
static inline void nocancel_end(int old)
{
    int type, ignored;
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &type);
    pthread_setcancelstate(old, &ignored);
    if (type != PTHREAD_CANCEL_DEFERRED)
        pthread_setcanceltype(type, &ignored);
}

/* ------------------------------------------------------------------ */
/* Collection (collect.c) and statistics (stats.c)                     */

struct gc_heap_stats {
    uint64_t heap_bytes;        /* bytes of spans in use or pooled, not released */
    uint64_t released_bytes;    /* pooled spans given back to the OS        */
    /* Of those, what was given back so that another class could grow
     * within the expanded size (alloc.c, pools_make_room): that room
     * went to the other class, and is not unmapped heap. */
    uint64_t passed_bytes;
    uint64_t live_bytes;        /* found live by the last collection        */
    uint64_t live_ptrful;       /* ... of them, in scanned kinds            */
    uint64_t live_ptrfree;
    uint64_t allocd_since_gc;   /* bytes handed to caches since then        */
    volatile AO_t caches_allocd; /* of allocd_since_gc, through caches     */
    volatile AO_t max_thread_allocd; /* most any thread added of it       */
    uint64_t exited_allocd;     /* ... added by threads since exited       */
    uint64_t total_allocd;
    /* Freed since then back to what refills hand out (freed under the
     * lock, or trimmed off a thread's list): allocd_since_gc counts slots
     * as they go onto a thread's list, and a slot freed onto the list is
     * handed out again with nothing counted, so it is not credited until
     * it leaves the list. */
    uint64_t freed_since_gc;
    uint64_t expl_freed_since_gc;   /* GC_free'd since then, however   */
    uint64_t reclaimed_last;
    uint64_t heap_target;       /* the heap's expanded size: spans up to it
                                   are taken without a collection unless
                                   one is overdue (bdwgc's GC_heapsize);
                                   GC_INITIAL_HEAP_SIZE and GC_expand_hp
                                   raise it                               */
    uint64_t heap_requested;    /* what those two asked for: below it, the
                                   expanded size is used whole (bdwgc's
                                   GC_requested_heapsize)                 */
    uint64_t max_heap;          /* 0: unlimited                             */
    uint64_t mark_overflows;
    uint64_t est_ptrful;        /* live bytes as the policy estimates them: */
    uint64_t est_ptrfree;       /* the marked bytes after a full collection,
                                   after a minor one those of the last full
                                   one plus what the minor one newly marked
                                   (promoted garbage left out)              */
    uint64_t minor_collections; /* collections that kept the old marks     */
    uint64_t live_aging;        /* of live_bytes, in aging spans (not old)  */
    uint64_t live_aging_ptrful; /* ... of them, in scanned kinds            */
    /* Spans the last collection left aging.  Not live_aging != 0: a span
     * whose only marked slots were free ones on a thread's list is aging
     * with no live bytes, and what the thread allocates there after the
     * collection is marked until the next minor one clears the span. */
    uint64_t aging_spans;
    /* Free slots on the threads' lists at the last collection: marked, so
     * that the sweep leaves them alone, but not live (lf_cache_mark). */
    uint64_t cached_ptrful, cached_ptrfree, cached_aging, cached_aging_ptrful;
    bool last_minor;            /* the last collection was minor           */
};
extern struct gc_heap_stats lf_hs;
extern bool lf_print_stats;
extern bool lf_gc_initialized;     /* collection on (lf_ensure_init) */
extern bool lf_heap_initialized;   /* the heap is set up (lf_ensure_heap) */
/* Another collector's library (bdwgc's libgc.so.1, ahead of liblfgc.so.0
 * in the loader's order) defines the GC_* names this process resolves:
 * lfgc serves only malloc here (liblfgc-malloc.so preloaded into a
 * program built with bdwgc) and leaves that collector's variables alone.
 * Set when the heap is set up. */
extern bool lf_gc_names_foreign;
bool lf_gc_names_foreign_check(void);
void lf_ensure_heap(void);          /* the heap only: collection stays off */
void lf_threads_collection_on(void);

void lf_ensure_init(void);
bool lf_gcollect_unmaps(void);
/* Why a collection runs: only one triggered by allocation may be minor. */
enum collect_reason { COLLECT_NONE, COLLECT_ALLOCATION, COLLECT_HEAP_FULL, COLLECT_EXPLICIT,
                      COLLECT_MINOR, COLLECT_BEFORE_GROWTH };
void lf_collect(enum collect_reason why);
bool lf_collect_in_progress(void);
/* Hook points of a collection, for internal callbacks (finalization,
 * disappearing links, leak reports), run in the order registered. */
enum lf_hook_point {
    LF_HOOK_AFTER_MARK,         /* marking done, world stopped, nothing swept */
    LF_HOOK_AFTER_RESTART,      /* world restarted, the lock still held     */
    LF_HOOK_POINTS
};
typedef void (*lf_hook_fn)(void);
void lf_hook_add(enum lf_hook_point at, lf_hook_fn fn);   /* at initialisation */

/* The collection policy (policy.c): when to collect, full or minor, and
 * when to grow the heap.  A collection as the policy sees it: */
struct lf_cycle {
    enum collect_reason why;
    bool tracked;               /* learns the written pages, protects pages */
    bool minor;                 /* keeps the old marks                       */
    uint64_t expected_trace;    /* bytes it expects to trace (mark.c)        */
    uint64_t carried_ptrful;    /* minor: old bytes it starts with marked    */
    uint64_t carried_ptrfree;
    uint64_t old_before;        /* old bytes before it                       */
    uint64_t old_rescanned;     /* minor: old bytes on written pages queued  */
};
void lf_policy_init(void);                 /* environment settings          */
bool lf_should_collect(void);              /* enough allocated to collect   */
/* The heap must grow by `bytes` (after `collections` collections for this
 * allocation): the collection to run first, or COLLECT_NONE to grow (the
 * expanded size raised as needed). */
enum collect_reason lf_policy_before_growth(uint64_t bytes, unsigned collections);
/* The program called GC_enable_incremental and the mode is on: as in
 * bdwgc's incremental mode, the heap it asked for does not defer
 * collections that are due. */
extern bool lf_incremental_asked;
void lf_policy_choose(struct lf_cycle *cy);      /* world stopped, before marking */
void lf_policy_after(const struct lf_cycle *cy); /* world stopped, spans classified */
void lf_policy_discount(uint64_t ptrful, uint64_t ptrfree, bool freed);
void lf_stats_record_pause(uint64_t ns);
void lf_stats_print_collection(uint64_t pause_ns);
void lf_event(GC_EventType e);
uint64_t lf_now_ns(void);
size_t lf_env_size(const char *name, size_t dflt, bool *found);

/* ------------------------------------------------------------------ */
/* Heap introspection and verification (verify.c)                      */

/* What the slot holding p is (see lfgc_slot_state in lfgc.h).  Exact with
 * the lock held or the world stopped; without, racy for slots that other
 * threads are allocating, freeing or sweeping. */
enum lfgc_slot_state lf_slot_state(const void *p);
/* fn(base, bytes, kind, arg) for every allocated object (state
 * LFGC_SLOT_ALLOCATED), region by region in address order, until fn
 * returns nonzero (which is returned).  Lock held and no thread sweeping
 * (lf_sweepers_hold), or the world stopped. */
typedef int (*lf_walk_fn)(void *base, size_t bytes, unsigned kind, void *arg);
int lf_heap_walk(lf_walk_fn fn, void *arg);
/* A scratch mapping grown (verify.c); NULL if refused. */
void *lf_map_grow(void *old, size_t old_bytes, size_t new_bytes);
/* Room for element n of the scratch array *arr (*cap elements of elem
 * bytes, in a mapping of its own), doubling from `first`: false, the
 * array unchanged, if the kernel refuses. */
bool lf_array_reserve(void **arr, size_t *cap, size_t n, size_t elem, size_t first);
/* Bytes of the expanded size given back to the OS (GC_get_unmapped_bytes):
 * the released spans less those whose room passed to another class. */
uint64_t lf_unmapped_bytes(void);
/* Check the heap's invariants; print each problem found (write(2)) and
 * return their number.  World stopped, lock held.  `after_collection`:
 * called at the end of a collection, which also checks what holds only
 * then (global free lists dropped, marks counted, no sweep cursors). */
unsigned lf_heap_verify(bool after_collection);
/* Debug builds (LFGC_VERIFY_MINOR): after a minor collection's mark, with
 * the world stopped, check its marks against a full trace from
 * mark_roots; abort, saying what was missed, if they fall short. */
void lf_verify_minor_marks(void (*mark_roots)(void));

#pragma GCC visibility pop
#endif /* LFGC_INTERNAL_H */
