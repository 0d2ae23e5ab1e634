/* layout.c: the low-fat regions, their tables and their metadata.
 *
 * Regions are reserved once, at load time, with MAP_NORESERVE so that they
 * cost nothing until touched, and MAP_FIXED_NOREPLACE so that nothing
 * already mapped is clobbered.  Per-region metadata (mark bitmaps, span
 * table) is mapped the same way when a region is first used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include <elf.h>
#include <unistd.h>

#include "internal.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* The paper's size configuration (Appendix A): X(class, size). */
#define SIZE_LIST(X) \
    X(0, 16) X(1, 32) X(2, 48) X(3, 64) X(4, 80) X(5, 96) X(6, 112) \
    X(7, 128) X(8, 144) X(9, 160) X(10, 192) X(11, 224) X(12, 256) \
    X(13, 272) X(14, 320) X(15, 384) X(16, 448) X(17, 512) X(18, 528) \
    X(19, 640) X(20, 768) X(21, 896) X(22, 1024) X(23, 1040) X(24, 1280) \
    X(25, 1536) X(26, 1792) X(27, 2048) X(28, 2064) X(29, 2560) \
    X(30, 3072) X(31, 3584) X(32, 4096) X(33, 4112) X(34, 5120) \
    X(35, 6144) X(36, 7168) X(37, 8192) X(38, 8208) X(39, 10240) \
    X(40, 12288) X(41, 1ull << 14) X(42, 1ull << 15) X(43, 1ull << 16) \
    X(44, 1ull << 17) X(45, 1ull << 18) X(46, 1ull << 19) X(47, 1ull << 20) \
    X(48, 1ull << 21) X(49, 1ull << 22) X(50, 1ull << 23) X(51, 1ull << 24) \
    X(52, 1ull << 25) X(53, 1ull << 26) X(54, 1ull << 27) X(55, 1ull << 28) \
    X(56, 1ull << 29) X(57, 1ull << 30) X(58, 1ull << 31) X(59, 1ull << 32) \
    X(60, 1ull << 33)

/* A class exists only if one object fits in its region. */
#define FITS(s) ((uint64_t)(s) <= LOWFAT_REGION_SIZE)
/* 2^64 / s, plus one unless s is a power of two (then the quotient is
 * exact and the +1 would make it wrong): UINT64_MAX / s + 1 is both. */
#define MAGIC(s) (UINT64_MAX / (uint64_t)(s) + 1)

/* Zero-initialised, so that only the page with the heap's entries is ever
 * resident (in the file, as constants, the fault-around of any read mapped
 * all 64 KiB); filled by fill_tables before the heap exists.  Page-aligned,
 * as the other tables below, so that the entries in use take as few pages
 * as they can (PAGE_ALIGNED: the heap's regions' entries, one page). */
#define PAGE_ALIGNED __attribute__((aligned(PAGE_SIZE)))
LFGC_EXPORT LF_UNSCANNED_BSS PAGE_ALIGNED uint64_t lowfat_sizes[LOWFAT_TABLE_SIZE];
LFGC_EXPORT LF_UNSCANNED_BSS PAGE_ALIGNED uint64_t lowfat_magics[LOWFAT_TABLE_SIZE];

static const uint64_t class_sizes[NUM_CLASSES] LF_MALLOC_RODATA = {
#define CLASS_SIZE(c, s) [c] = (uint64_t)(s),
    SIZE_LIST(CLASS_SIZE)
#undef CLASS_SIZE
};

LF_MALLOC_TEXT static void fill_tables(void)
{
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        uint64_t s = class_sizes[c];
        if (!FITS(s))
            continue;
        lowfat_sizes[LOWFAT_FIRST_REGION + c] = s;
        lowfat_magics[LOWFAT_FIRST_REGION + c] = MAGIC(s);
    }
}

LFGC_EXPORT LF_UNSCANNED_BSS PAGE_ALIGNED uint64_t lowfat_heap_top[LOWFAT_TABLE_SIZE];
/* What programs built with this layout's lowfat.h refer to (see there). */
LFGC_EXPORT const char LOWFAT_LAYOUT_ID(LOWFAT_REGION_SHIFT, LOWFAT_FIRST_REGION);

LF_UNSCANNED_BSS PAGE_ALIGNED struct region lf_regions[NUM_CLASSES];
LF_UNSCANNED uint8_t *lf_chunk_map;
LF_UNSCANNED_BSS PAGE_ALIGNED struct span lf_span_heads[NUM_CLASSES][SPAN_HEAD_CHUNKS];
/* The first MARK_HEAD_BITS mark bits of every class, side by side, so
 * that a class with few spans does not cost a page of bitmap of its own
 * (see lf_region_cover_bits). */
LF_UNSCANNED_BSS PAGE_ALIGNED uint64_t lf_mark_heads[NUM_CLASSES][MARK_HEAD_BITS / 64];
/* Until the map is made (a free before the library's constructor and
 * before any malloc), the addresses below 256 MiB, NULL first, read zeros
 * here. */
LF_UNSCANNED_BSS uint8_t lf_free_map_boot[((256u << 20) >> CHUNK_SHIFT) * CHUNK_ENTRY];
LF_UNSCANNED_DATA uint8_t *lf_free_map = lf_free_map_boot;
LF_UNSCANNED bool lf_layout_ok;

_Static_assert(LOWFAT_FIRST_REGION >= 1, "region 0 is non-fat");
_Static_assert(LOWFAT_FIRST_REGION + NUM_CLASSES <= LOWFAT_TABLE_SIZE,
               "the regions must lie in user space");

LF_MALLOC_TEXT static void *map_noreserve(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Slot count (q - q0) bound of a region: p * (s - r) < 2^64, r = 2^64 mod s,
 * is what keeps the reciprocal exact for every byte below p. */
LF_MALLOC_TEXT static uint64_t precision_limit(uint64_t size)
{
    if ((size & (size - 1)) == 0)
        return UINT64_MAX;                    /* exact quotient */
    /* 2^64 mod size, in 64 bits: a 128-bit remainder is a libgcc call
     * laid out away from the rest of the start-up code. */
    uint64_t r = (UINT64_MAX % size + 1) % size;
    return UINT64_MAX / (size - r);
}

LF_MALLOC_TEXT static bool precision_ok(const struct region *r, uint64_t addr)
{
    return lowfat_slot_number((void *)addr) == addr / r->size;
}

/* Reserve [want, want + len) exactly, never over a mapping already there:
 * 0, or the errno of the refusal (EEXIST: something is mapped there). */
LF_MALLOC_TEXT static int reserve_at(uint64_t want, uint64_t len)
{
    void *got = mmap((void *)want, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (got == (void *)want)
        return 0;
    if (got == MAP_FAILED)
        return errno;
    munmap(got, len);               /* old kernel: the flag was a hint */
    return EEXIST;
}

/* The whole heap's address range, reserved in one call when nothing is
 * in the way (one mapping instead of one per class: a preloaded process
 * starts faster); otherwise region by region, which says which one
 * cannot be had. */
static LF_UNSCANNED bool heap_reserved;

LF_MALLOC_TEXT static bool reserve_region(unsigned c)
{
    struct region *r = &lf_regions[c];
    if (heap_reserved)
        return true;
    void *want = (void *)region_base(r);
    int err = reserve_at(region_base(r), LOWFAT_REGION_SIZE);
    if (!err)
        return true;
    if (err == EEXIST)
        fprintf(stderr,
                "lfgc: cannot reserve region %u (objects of %llu bytes) at "
                "[%p, %p): something is already mapped there.\n"
                "lfgc: rebuild lfgc with ./configure --with-first-region=N to "
                "move the heap, or find what maps that range "
                "(cat /proc/%d/maps).\n",
                LOWFAT_FIRST_REGION + c, (unsigned long long)r->size, want,
                (void *)region_end(r), (int)getpid());
    else
        fprintf(stderr,
                "lfgc: cannot reserve region %u at %p (%s): the address space "
                "is limited.\nlfgc: lfgc reserves %llu GiB of address space "
                "(not memory); raise 'ulimit -v', allow overcommit "
                "(vm.overcommit_memory 0 or 1), or rebuild with a smaller "
                "--with-region-shift.\n",
                LOWFAT_FIRST_REGION + c, want, strerror(err),
                (unsigned long long)((LOWFAT_HEAP_END - LOWFAT_HEAP_START) >> 30));
    return false;
}

/* A word into the first slot of region i + 1 when that slot starts in
 * region i (the region does not start on a multiple of its size): the
 * reciprocal of region i + 1 gives it a base in the last chunk of region
 * i and a slot number below the region's first.  If that chunk were in
 * use, the marker would take the word for an object and index the mark
 * bitmap at -1.  Region i therefore never hands that chunk out: it costs
 * one chunk of address space, and the marker needs no bounds check.
 * Returns that chunk's index from region i's base, or UINT64_MAX. */
static uint64_t successor_partial_chunk(size_t i)
{
    size_t next = i + 1;
    if (next >= LOWFAT_TABLE_SIZE || lowfat_magics[next] == 0)
        return UINT64_MAX;
    uint64_t start = (uint64_t)next << LOWFAT_REGION_SHIFT;
    uint64_t base = start / lowfat_sizes[next] * lowfat_sizes[next];
    if (base == start)
        return UINT64_MAX;
    return (base >> CHUNK_SHIFT) - ((uint64_t)i << (LOWFAT_REGION_SHIFT - CHUNK_SHIFT));
}

/* One copy of lfgc per process: two would both own the fixed regions.
 * The first to load maps this page just below the heap and writes its
 * name there; a second copy finds the page taken and says whose it is,
 * rather than only that a region is taken.  (The page is the program's
 * non-fat region's last; nothing maps there in practice.) */
static const char owner_magic[16] LF_MALLOC_RODATA = "lfgc heap owner";
struct heap_owner {
    char magic[16];
    char path[PAGE_SIZE - 16];
};

LF_MALLOC_TEXT static const char *own_path(void)
{
    Dl_info di;
    if (dladdr((void *)(uintptr_t)&lf_layout_init, &di) && di.dli_fname && di.dli_fname[0])
        return di.dli_fname;
    return LF_STR("the program (linked with liblfgc.a)");
}

LF_UNSCANNED bool lf_refused;
static LF_UNSCANNED_BSS char refused_owner[PAGE_SIZE - 16];

/* Every entry of a refused copy that would touch the heap, the threads or
 * the signals comes here: it cannot work (this copy has no heap) and must
 * not interfere with the copy that owns it. */
void lf_refused_abort(void)
{
    char msg[PAGE_SIZE + 1024];
    snprintf(msg, sizeof msg,
             "lfgc: this copy of lfgc (%s) was refused at load: %s owns the heap of this "
             "process.  The program called the refused copy, which cannot work; aborting.  "
             "A process must load lfgc once (see docs/design.md, One instance per "
             "process).\n", own_path(), refused_owner);
    ssize_t n = write(2, msg, strlen(msg));
    (void)n;
    abort();
}

LF_MALLOC_TEXT static bool claim_heap(void)
{
    void *want = (void *)(LOWFAT_HEAP_START - PAGE_SIZE);
    if (reserve_at(LOWFAT_HEAP_START - PAGE_SIZE, PAGE_SIZE) == 0) {
        struct heap_owner *o = want;
        memcpy(o->magic, owner_magic, sizeof owner_magic);
        const char *path = own_path();     /* the page is zeros: terminated */
        memcpy(o->path, path, strnlen(path, sizeof o->path - 1));
        mprotect(want, PAGE_SIZE, PROT_READ);
        return true;
    }
    /* Read whatever is there without faulting on it. */
    struct heap_owner o;
    struct iovec local = { &o, sizeof o }, remote = { want, sizeof o };
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof o &&
        memcmp(o.magic, owner_magic, sizeof owner_magic) == 0) {
        o.path[sizeof o.path - 1] = 0;
        lf_refused = true;
        memcpy(refused_owner, o.path, sizeof refused_owner);
        fprintf(stderr,
                "lfgc: another copy of lfgc already owns the heap of this process: %s.\n"
                "lfgc: this copy (%s) is not used, and a call into it aborts.\n"
                "lfgc: a process must load lfgc once: link with liblfgc.so.0 (libgc.so.1 "
                "and liblfgc-malloc.so use it), never also with a second copy such as "
                "liblfgc.a in a shared library.\n", o.path, own_path());
        return false;
    }
    /* Someone else's page: the regions will tell whether they are free. */
    return true;
}

LF_MALLOC_TEXT bool lf_layout_init(void)
{
    /* The small classes are those below the chunk (one chunk per span,
     * several objects in it); a small request, with the collector's extra
     * byte, must find one in the class table, with which the fast paths
     * index the thread caches' lists.  Constants of internal.h: */
    if (class_sizes[NUM_SMALL_CLASSES - 1] >= CHUNK_SIZE ||
        class_sizes[NUM_SMALL_CLASSES] < CHUNK_SIZE ||
        class_sizes[NUM_SMALL_CLASSES - 1] < SMALL_REQUEST_MAX + 1) {
        fprintf(stderr, "lfgc: NUM_SMALL_CLASSES or SMALL_REQUEST_MAX does not match "
                "CHUNK_SHIFT (gc/internal.h)\n");
        abort();
    }
    fill_tables();
    if (!claim_heap())
        return false;
    heap_reserved = reserve_at(LOWFAT_HEAP_START, LOWFAT_HEAP_END - LOWFAT_HEAP_START) == 0;
    for (unsigned c = 0; c < NUM_CLASSES; c++) {
        struct region *r = &lf_regions[c];
        size_t idx = LOWFAT_FIRST_REGION + c;
        r->size = FITS(class_sizes[c]) ? class_sizes[c] : UINT64_MAX;
        r->magic = lowfat_magics[idx];
        r->start = (uint64_t)idx << LOWFAT_REGION_SHIFT;
        if (r->magic == 0)          /* class larger than a region */
            continue;
        uint64_t end = r->start + LOWFAT_REGION_SIZE;
        /* Free reads the chunk-map entry of every object, and the marker
         * of every candidate word.  From the regions' bases, 32 GiB apart,
         * the first chunks' entries of all classes would share one L1
         * set, which a program that frees objects of many classes
         * thrashes (sed -E: docs/performance.md).  c MiB in puts class
         * c's on line c of the set index. */
        _Static_assert(SMALL_CLASS_OFFSET(NUM_SMALL_CLASSES - 1) <= LOWFAT_REGION_SIZE / 4,
                       "the small classes' offsets take a large part of their regions");
        if (c < NUM_SMALL_CLASSES)
            r->start += SMALL_CLASS_OFFSET(c);
        uint64_t limit = precision_limit(r->size);
        if (limit < end)
            end = limit;
        r->q0 = (r->start + r->size - 1) / r->size;
        /* Only whole slots, all of whose bytes divide exactly. */
        uint64_t last_q = end / r->size;            /* first slot not usable */
        r->usable_end = last_q * r->size;
        r->large = r->size >= CHUNK_SIZE;
        r->span_chunks = r->large ? (uint32_t)(r->size >> CHUNK_SHIFT) : 1;
        r->max_chunks = (r->usable_end - r->start) >> CHUNK_SHIFT;
        uint64_t edge = successor_partial_chunk(idx);
        if (edge != UINT64_MAX)             /* from the base, to from the start */
            edge -= (r->start - region_base(r)) >> CHUNK_SHIFT;
        if (edge < r->max_chunks)
            r->max_chunks = edge;
        /* A configuration where the reciprocal is wrong must fail loudly,
         * never mark the wrong object: check the edges of the first and
         * last slots.  Such a class is left out; the others still work. */
        uint64_t first_base = r->q0 * r->size;
        uint64_t last_base = r->usable_end - r->size;
        if (r->usable_end <= first_base || last_base < first_base ||
            !precision_ok(r, first_base) || !precision_ok(r, first_base + r->size - 1) ||
            !precision_ok(r, last_base) || !precision_ok(r, r->usable_end - 1)) {
            fprintf(stderr, "lfgc: the reciprocal of size %llu is not exact in "
                    "region %zu; objects of that size class will not be "
                    "allocated.\n", (unsigned long long)r->size, idx);
            continue;
        }
        if (!reserve_region(c))
            return false;
        r->reserved = 1;
    }
    /* After the regions, so that it cannot take their place.  The table
     * of the chunk and free maps covers every user-space address, so that
     * free needs no range check; only its part below the heap's end is
     * ever written. */
    uint64_t table_bytes = chunk_entry((uint64_t)1 << 47);
    uint64_t heap_part = chunk_entry(LOWFAT_HEAP_END);
    uint8_t *table = mmap(NULL, table_bytes, PROT_READ,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (table == MAP_FAILED || mprotect(table, heap_part, PROT_READ | PROT_WRITE) != 0) {
        fprintf(stderr, "lfgc: cannot map the chunk and free maps (%llu MiB of "
                "address space): %s\n", (unsigned long long)(table_bytes >> 20),
                strerror(errno));
        return false;
    }
    lf_chunk_map = table;
    uint8_t *fm = table + 1;
    __atomic_store_n(&lf_free_map, fm, __ATOMIC_RELEASE);
    /* Caches are made after this (the constructor runs it before main), but
     * threads without one use the empty cache's. */
    __atomic_store_n(&lf_empty_free[0], (uint8_t *)fm,
                     __ATOMIC_RELEASE);
    return true;
}

/* Bytes of a whole bitmap of region r: a bit per slot. */
LF_MALLOC_TEXT static uint64_t region_bitmap_bytes(const struct region *r)
{
    uint64_t slots = (r->usable_end - r->start) / r->size + 1;
    return (slots + 63) / 64 * 8;
}

LF_MALLOC_TEXT bool lf_region_map_metadata(struct region *r)
{
    if (r->mapped)
        return true;
    r->mark_bits = lf_mark_heads[r - lf_regions];
    r->alloc_bits = map_noreserve(region_bitmap_bytes(r));
    r->spans = map_noreserve((r->max_chunks + 1) * sizeof(struct span));
    if (!r->alloc_bits || !r->spans)
        return false;
    r->mapped = 1;
    return true;
}

/* The region's bitmap of slots cached at a collection, mapped at the first
 * one that finds any (malloc's kinds never need it). */
LF_UNSCANNED_BSS PAGE_ALIGNED uint64_t lf_cached_heads[NUM_SMALL_CLASSES][MARK_HEAD_BITS / 64];
LF_UNSCANNED_BSS uint64_t *lf_cached_bits[NUM_SMALL_CLASSES];

/* Collections only read and write these bits (world stopped). */
uint64_t *lf_region_cached_bits(struct region *r, uint64_t bit)
{
    size_t c = (size_t)(r - lf_regions);
    uint64_t *own = lf_cached_bits[c];
    if (own)
        return own;
    if (bit < MARK_HEAD_BITS)
        return lf_cached_heads[c];
    own = map_noreserve(region_bitmap_bytes(r));
    if (!own)
        return NULL;
    memcpy(own, lf_cached_heads[c], sizeof lf_cached_heads[c]);
    lf_cached_bits[c] = own;
    return own;
}

/* A region's mark bits start in its part of lf_mark_heads; before its
 * frontier passes `chunks`, they move to a bitmap of its own.  Only the
 * bits of spans below the frontier are ever read or written (the chunk
 * map tells spans in use), and the move is made under the lock with no
 * thread sweeping: bits change outside a collection only under the lock,
 * and sweeping threads read them without it. */
LF_MALLOC_TEXT bool lf_region_cover_bits(struct region *r, uint64_t chunks)
{
    if (r->mark_bits != lf_mark_heads[r - lf_regions])
        return true;
    uint64_t qa, qb;
    lf_span_slots(r, chunks - r->span_chunks, &qa, &qb);
    if (qb - r->q0 <= MARK_HEAD_BITS)
        return true;
    uint64_t *bits = map_noreserve(region_bitmap_bytes(r));
    if (!bits)
        return false;
    /* Already held by a collection (or by fork) when it allocates; no
     * marker runs then (allocation waits for marking to end). */
    bool hold = !AO_load(&lf_gc_pending);
    if (hold)
        lf_sweepers_hold();
    memcpy(bits, r->mark_bits, sizeof lf_mark_heads[0]);
    r->mark_bits = bits;
    if (hold)
        lf_sweepers_release();
    return true;
}

LF_MALLOC_TEXT void lf_span_slots(const struct region *r, uint64_t j, uint64_t *qfirst, uint64_t *qend)
{
    uint64_t lo = r->start + (j << CHUNK_SHIFT);
    uint64_t hi = lo + ((uint64_t)r->span_chunks << CHUNK_SHIFT);
    uint64_t qlast = r->usable_end / r->size;
    uint64_t a = (lo + r->size - 1) / r->size;
    uint64_t b = (hi + r->size - 1) / r->size;
    *qfirst = a < qlast ? a : qlast;
    *qend = b < qlast ? b : qlast;
}

LF_MALLOC_TEXT uint64_t lf_class_of_size(size_t bytes)
{
    /* Below 16 KiB the classes are not powers of two. */
    if (bytes <= ((size_t)1 << 14)) {
        for (unsigned c = 0; c < NUM_CLASSES; c++)
            if (lf_regions[c].size >= bytes)
                return c;
    }
    if (bytes > (1ull << 33))
        return NUM_CLASSES;
    unsigned log2 = 64 - __builtin_clzll(bytes - 1);       /* ceil(log2)   */
    if (log2 < 14)
        log2 = 14;
    uint64_t c = 41 + (log2 - 14);
    if (c >= NUM_CLASSES || lf_regions[c].magic == 0)
        return NUM_CLASSES;
    return c;
}

/* ------------------------------------------------------------------ */
/* Another collector in the process                                    */

LF_UNSCANNED bool lf_gc_names_foreign;

/* Is p in the main program's image?  Its data may hold our variables
 * (copy relocations of a program built against the drop-in), and its
 * PLT our functions' canonical addresses.  From the auxiliary vector:
 * no malloc, no loader lock (this runs at the first malloc, which may
 * come from inside the loader). */
LF_MALLOC_TEXT static bool in_main_program(const void *p)
{
    const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
    size_t n = getauxval(AT_PHNUM);
    if (!ph)
        return false;
    uintptr_t bias = 0;
    for (size_t i = 0; i < n; i++)
        if (ph[i].p_type == PT_PHDR)
            bias = (uintptr_t)ph - ph[i].p_vaddr;
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < n; i++)
        if (ph[i].p_type == PT_LOAD && a >= bias + ph[i].p_vaddr &&
            a < bias + ph[i].p_vaddr + ph[i].p_memsz)
            return true;
    return false;
}

extern int lf_own_parallel;
extern __typeof__(GC_malloc) lf_own_malloc;

LF_MALLOC_TEXT static bool foreign(const void *bound, const void *own)
{
    return bound != own && !in_main_program(bound);
}

LF_MALLOC_TEXT bool lf_gc_names_foreign_check(void)
{
    return foreign(&GC_parallel, &lf_own_parallel) || foreign((const void *)&GC_malloc,
                                                              (const void *)&lf_own_malloc);
}
