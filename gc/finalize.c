/* finalize.c: finalizers, disappearing links and toggle references.
 *
 * Three tables, in memory of their own that no scan of roots sees (so an
 * entry never keeps its object alive), each packed entries with a hash
 * index (see "Tables" below):
 *   finalizers   keyed by the registered pointer;
 *   short links  keyed by the link's address (GC_general_register_disappearing_link);
 *   long links   keyed likewise (GC_register_long_link).
 * The lock guards them.  A collection decides them with the world stopped,
 * once marking is done (lf_finalize_after_mark), in bdwgc's order:
 *   1. short links to unmarked objects are cleared;
 *   2. each unmarked finalizable object marks what it reaches (not itself:
 *      unless a cycle leads back to it), as its registration's mode says;
 *   3. those still unmarked are ready: they leave the table for the queue
 *      and are marked, with all they reach, so that their finalizers see
 *      them whole and may resurrect them;
 *   4. long links to objects still unmarked are cleared;
 *   5. links that lie in unmarked objects go with them.
 * The queue's objects and the client data of every registration are roots.
 * Finalizers run outside the pause and the lock: in the thread that next
 * allocates or collects (or in GC_invoke_finalizers when the program asks
 * for them to run on demand).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "gc_disclaim.h"

/* Registration modes: how an unreachable finalizable object marks what
 * it reaches before the collection decides which are ready. */
enum fin_mode {
    FIN_NORMAL,          /* all it reaches: finalized after what points to it */
    FIN_IGNORE_SELF,     /* all but pointers into itself                     */
    FIN_NO_ORDER,        /* nothing                                           */
    FIN_UNREACHABLE,     /* as normal, and not while a no-order one reaches it */
};

/* One table: its entries packed at [0, n) in columns of words (column 0
 * the key), so that a collection walks only entries, and the client data
 * of all finalizers is one range to mark; and an index, open addressing
 * with linear probing, of 32-bit entry numbers plus one (0: empty slot),
 * at most half full.  Deleting moves the last entry into the hole, and
 * the index slot is emptied by shifting the rest of its run back: no
 * tombstones.  A collection that drops entries marks them (KEY_DEAD) and
 * compacts the columns once, then builds the index anew. */
#define KEY_DEAD   0u           /* no registered pointer or link is NULL  */
#define MAX_COLS   4

struct table {
    uintptr_t *col[MAX_COLS];   /* `cap` words each, mmap'ed               */
    unsigned ncols;
    size_t n, cap;              /* entries, room in the columns            */
    uint32_t *index;            /* icap slots                              */
    size_t icap;                /* a power of two, or 0                    */
    unsigned ishift;            /* 64 - log2(icap)                         */
    size_t peak;                /* most entries since the last compaction  */
    size_t touched;             /* most entries since pages were given back */
    size_t dead;                /* entries marked KEY_DEAD, not yet gone   */
};

/* Pages of a table's columns, of the queue, beyond what it holds, are
 * given back once they are at least this many: a table that swings by
 * less keeps them for its next entries. */
#define RELEASE_MIN_PAGES 16

/* Give back the whole pages of [lo, hi) bytes past p, if enough: in the
 * batch of releases that the end of lf_finalize_after_restart flushes. */
static void pages_release_past(void *p, size_t lo, size_t hi)
{
    lo = (lo + PAGE_SIZE - 1) & ~(size_t)(PAGE_SIZE - 1);
    hi = (hi + PAGE_SIZE - 1) & ~(size_t)(PAGE_SIZE - 1);
    if (hi >= lo + RELEASE_MIN_PAGES * PAGE_SIZE)
        lf_pages_release_add((uint64_t)(uintptr_t)p + lo, hi - lo);
}

/* Columns of the finalizer table, and of the two link tables. */
enum { F_KEY, F_FN, F_CD, F_MODE, F_COLS };
enum { L_KEY, L_TARGET, L_COLS };

struct ready {
    void *obj;
    GC_finalization_proc fn;
    void *cd;
    uintptr_t mode;             /* while deciding: the entry, see step 2   */
};

/* Unscanned: it holds heap addresses (see LF_UNSCANNED). */
static LF_UNSCANNED_DATA struct {
    struct table fins;
    struct table links[2];      /* short, long                             */
    struct ready *queue;        /* [head, len) wait to run                 */
    size_t head, len, cap;
    size_t queue_touched;       /* most entries since pages were given back */
    size_t queued_now;          /* queued by the current collection, from len - queued_now */
    uint64_t queued_bytes;      /* their bytes                               */
    uint64_t queued_ptrfree;    /* of which in pointer-free kinds            */
    size_t entries_at_gc;       /* fins.n when the last collection ended     */
    uint64_t bytes_per_finalizer;   /* GC_set_allocd_bytes_per_finalizer     */
    /* Figures of the last collection, printed with GC_PRINT_STATS. */
    size_t cleared[2];
    size_t dropped_links;
    size_t cycles;
    uintptr_t cycle_example;
    uint64_t notified_gc;       /* GC_gc_no when the notifier last ran      */
    GC_finalizer_notifier_proc notifier;
    GC_await_finalize_proc await;
    GC_toggleref_func toggleref;
    uintptr_t *toggles;         /* hidden pointers; bit 0 set: strong      */
    size_t toggles_len, toggles_cap;
    /* Disclaim procedures, per kind, and the objects a collection found
     * dead in their kinds (kept marked until after the restart). */
    GC_disclaim_proc disclaim[MAX_KINDS];
    uint8_t disclaim_all[MAX_KINDS];    /* mark_from_all                    */
    unsigned disclaim_kinds;            /* kinds with a procedure           */
    void **disclaimed;
    size_t disclaimed_len, disclaimed_cap;
    int finalized_kind;                 /* GC_finalized_malloc's, or -1     */
} fz = {
    .fins = { .ncols = F_COLS },
    .links = { { .ncols = L_COLS }, { .ncols = L_COLS } },
    .bytes_per_finalizer = 10000,
    .finalized_kind = -1,
};

/* Set while the queue is not empty: the allocation slow path reads it
 * without the lock. */
LF_UNSCANNED volatile AO_t lf_finalizers_due;
/* The innermost GC_invoke_finalizers running on this thread: a guard in
 * its frame, NULL when none.  While one runs, allocations (by the
 * finalizers) do not start others.  A finalizer may leave by longjmp (a
 * runtime's exception): the guard is then stale, which lf_finalize_due
 * sees (finalizers_running_here) instead of never running finalizers on
 * this thread again. */
struct finalizers_guard {
    uintptr_t token;
};
static __thread struct finalizers_guard *finalizers_guard __attribute__((tls_model("initial-exec")));
static __thread uintptr_t finalizers_guard_token __attribute__((tls_model("initial-exec")));
static __thread uintptr_t finalizers_calls __attribute__((tls_model("initial-exec")));

LFGC_EXPORT LF_UNSCANNED GC_finalizer_notifier_proc GC_finalizer_notifier;

/* ------------------------------------------------------------------ */
/* Tables                                                               */

static inline size_t hash_of(const struct table *t, uintptr_t key)
{
    /* Keys are at least 8-byte aligned: Fibonacci hashing of the rest. */
    return (size_t)(((key >> 3) * 0x9e3779b97f4a7c15ull) >> t->ishift);
}

/* The entry holding key, or SIZE_MAX. */
static size_t table_find(const struct table *t, uintptr_t key)
{
    if (!t->n)
        return SIZE_MAX;
    const uintptr_t *keys = t->col[0];
    for (size_t i = hash_of(t, key);; i = (i + 1) & (t->icap - 1)) {
        uint32_t v = t->index[i];
        if (!v)
            return SIZE_MAX;
        if (keys[v - 1] == key)
            return v - 1;
    }
}

/* Put entry e (its key in place) into the index, which has room. */
static inline void index_put(struct table *t, size_t e)
{
    size_t i = hash_of(t, t->col[0][e]);
    while (t->index[i])
        i = (i + 1) & (t->icap - 1);
    t->index[i] = (uint32_t)(e + 1);
}

/* The index anew, with icap slots, from the keys. */
static bool index_build(struct table *t, size_t icap)
{
    if (icap != t->icap) {
        uint32_t *index = lf_map_grow(NULL, 0, icap * sizeof *index);
        if (!index)
            return false;
        if (t->index)
            munmap(t->index, t->icap * sizeof *t->index);
        t->index = index;
        t->icap = icap;
        t->ishift = 64 - (unsigned)__builtin_ctzll(icap);
    } else {
        memset(t->index, 0, icap * sizeof *t->index);
    }
    for (size_t e = 0; e < t->n; e++)
        index_put(t, e);
    return true;
}

static size_t index_size_for(size_t entries)
{
    size_t icap = 128;
    while (icap < 2 * entries)
        icap *= 2;
    return icap;
}

/* Columns with room for cap entries (moved, not copied, by mremap). */
static bool columns_resize(struct table *t, size_t cap)
{
    for (unsigned c = 0; c < t->ncols; c++) {
        void *p = lf_map_grow(t->col[c], t->cap * sizeof(uintptr_t), cap * sizeof(uintptr_t));
        if (!p) {
            /* Columns already grown stay larger than t->cap says: a
             * later resize moves only their first t->cap words and
             * leaves the rest mapped (lost, out of memory anyway). */
            return false;
        }
        t->col[c] = p;
    }
    t->cap = cap;
    return true;
}

/* A new entry for a key known to be absent: its number (the caller fills
 * the other columns), or SIZE_MAX without memory. */
static size_t table_insert(struct table *t, uintptr_t key)
{
    if (t->n == t->cap && !columns_resize(t, t->cap ? 2 * t->cap : 64))
        return SIZE_MAX;
    if (2 * (t->n + 1) > t->icap && !index_build(t, index_size_for(t->n + 1)))
        return SIZE_MAX;
    size_t e = t->n++;
    t->col[0][e] = key;
    index_put(t, e);
    if (t->n > t->peak)
        t->peak = t->n;
    if (t->n > t->touched)
        t->touched = t->n;
    return e;
}

/* Empty index slot i, shifting back the entries of its run that may
 * use it (so that no probe stops early). */
static void index_remove_slot(struct table *t, size_t i)
{
    size_t mask = t->icap - 1;
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        uint32_t v = t->index[j];
        if (!v)
            break;
        size_t home = hash_of(t, t->col[0][v - 1]);
        /* v may move to i if its home is not in (i, j] (cyclically). */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->index[i] = v;
            i = j;
        }
    }
    t->index[i] = 0;
}

/* The index slot of entry e. */
static size_t index_slot_of(const struct table *t, size_t e)
{
    size_t i = hash_of(t, t->col[0][e]);
    while (t->index[i] != e + 1)
        i = (i + 1) & (t->icap - 1);
    return i;
}

/* Delete entry e: the last entry takes its place. */
static void table_delete(struct table *t, size_t e)
{
    index_remove_slot(t, index_slot_of(t, e));
    size_t last = --t->n;
    if (e != last) {
        size_t i = index_slot_of(t, last);
        for (unsigned c = 0; c < t->ncols; c++)
            t->col[c][e] = t->col[c][last];
        t->index[i] = (uint32_t)(e + 1);
    }
}

/* After a collection: drop the entries it marked dead (keeping the order
 * of the others), fit the memory to the entries the table held since the
 * last time, and build the index again. */
static void table_tidy(struct table *t)
{
    bool moved = t->dead != 0;
    if (moved) {
        uintptr_t *keys = t->col[0];
        size_t n = 0;
        for (size_t e = 0; e < t->n; e++) {
            if (keys[e] == KEY_DEAD)
                continue;
            if (n != e)
                for (unsigned c = 0; c < t->ncols; c++)
                    t->col[c][n] = t->col[c][e];
            n++;
        }
        t->n = n;
        t->dead = 0;
    }
    size_t want = t->peak > t->n ? t->peak : t->n;
    /* What a past peak left goes: columns beyond four times the recent
     * peak, an index beyond twice the size it needs (or beyond the size
     * it needs when it is built again anyway), and the pages of the
     * columns past the entries, which hold dead ones (a weak table that
     * lost most of its keys kept them for good). */
    if (t->cap > 64 && t->cap > 4 * want) {
        size_t cap = 64;
        while (cap < 2 * want)
            cap *= 2;
        columns_resize(t, cap);
    }
    if (t->touched > t->cap)
        t->touched = t->cap;
    if (t->touched > t->n) {
        for (unsigned c = 0; c < t->ncols; c++)
            pages_release_past(t->col[c], t->n * sizeof(uintptr_t), t->touched * sizeof(uintptr_t));
        t->touched = t->n;
    }
    if (t->icap) {
        size_t icap = index_size_for(want);
        bool smaller = moved ? t->icap > icap : t->icap > 2 * icap;
        /* At the same size the index needs no memory: it cannot fail. */
        if (!(smaller && index_build(t, icap)) && moved)
            index_build(t, t->icap);
    }
    t->peak = t->n;
}

/* ------------------------------------------------------------------ */
/* Registration                                                         */

LF_MALLOC_TEXT size_t lf_finalize_entries(void)
{
    return fz.fins.n + fz.links[0].n + fz.links[1].n;
}

/* Is p inside an allocated object?  Only such objects can be finalized
 * (not a free slot, nor a dead one the lazy sweep has not reached).  Lock
 * held.  Two cheap answers first, for a collectable small object that is
 * not free: marked by the last collection (so not dead), or just
 * allocated by this thread from the span it sweeps (its slot lies before
 * the thread's sweep position there).  Else the full answer
 * (lfgc_is_live), which looks for the span among every thread's. */
static bool is_object(const void *p)
{
    void *base = lf_base(p);
    if (!base)
        return false;
    struct region *r = region_of(base);
    unsigned kind = lf_chunk_map[chunk_entry((uintptr_t)base)] - 1;
    if (!r->large && !lf_kinds[kind].manual && !lf_kinds[kind].uncollectable &&
        !slot_is_free(base)) {
        uint64_t bit = lowfat_slot_number(base) - r->q0;
        if (bit_get(r->mark_bits, bit))
            return true;
        unsigned c = (unsigned)(r - lf_regions);
        if (kind < NUM_CACHED_KINDS && c < NUM_SMALL_CLASSES) {
            const struct sweep_cursor *cur = &lf_tl_cache->k[kind].cursor[c];
            const struct span *s = span_at(r, span_index_of(r, (uintptr_t)base));
            if (cur->span == s && s->state != SPAN_UNSWEPT && bit < cur->next)
                return true;
        }
    }
    return lfgc_is_live(p);
}

static void register_finalizer(void *obj, GC_finalization_proc fn, void *cd,
                               GC_finalization_proc *ofn, void **ocd, enum fin_mode mode)
{
    lf_ensure_init();
    lock();
    struct table *t = &fz.fins;
    size_t i = table_find(t, (uintptr_t)obj);
    if (i != SIZE_MAX) {
        if (ofn)
            *ofn = (GC_finalization_proc)t->col[F_FN][i];
        if (ocd)
            *ocd = (void *)t->col[F_CD][i];
        if (fn) {
            t->col[F_FN][i] = (uintptr_t)fn;
            t->col[F_CD][i] = (uintptr_t)cd;
            t->col[F_MODE][i] = mode;
        } else {
            table_delete(&fz.fins, i);
        }
        unlock();
        return;
    }
    if (!obj || !is_object(obj)) {
        /* Never collected, so never finalized: bdwgc ignores it too. */
        if (ofn)
            *ofn = NULL;
        if (ocd)
            *ocd = NULL;
        unlock();
        return;
    }
    if (!fn) {
        if (ofn)
            *ofn = NULL;
        if (ocd)
            *ocd = NULL;
        unlock();
        return;
    }
    i = table_insert(t, (uintptr_t)obj);
    if (i == SIZE_MAX) {
        unlock();
        lf_warn("GC Warning: out of memory registering a finalizer for %p\n", (uintptr_t)obj);
        return;                         /* *ofn and *ocd unchanged */
    }
    t->col[F_FN][i] = (uintptr_t)fn;
    t->col[F_CD][i] = (uintptr_t)cd;
    t->col[F_MODE][i] = mode;
    if (ofn)
        *ofn = NULL;
    if (ocd)
        *ocd = NULL;
    unlock();
}

LFGC_EXPORT void GC_register_finalizer(void *obj, GC_finalization_proc fn, void *cd,
                                       GC_finalization_proc *ofn, void **ocd)
{
    register_finalizer(obj, fn, cd, ofn, ocd, FIN_NORMAL);
}

LFGC_EXPORT void GC_register_finalizer_ignore_self(void *obj, GC_finalization_proc fn, void *cd,
                                                   GC_finalization_proc *ofn, void **ocd)
{
    register_finalizer(obj, fn, cd, ofn, ocd, FIN_IGNORE_SELF);
}

LFGC_EXPORT void GC_register_finalizer_no_order(void *obj, GC_finalization_proc fn, void *cd,
                                                GC_finalization_proc *ofn, void **ocd)
{
    register_finalizer(obj, fn, cd, ofn, ocd, FIN_NO_ORDER);
}

LFGC_EXPORT void GC_register_finalizer_unreachable(void *obj, GC_finalization_proc fn, void *cd,
                                                   GC_finalization_proc *ofn, void **ocd)
{
    register_finalizer(obj, fn, cd, ofn, ocd, FIN_UNREACHABLE);
}

/* Links must be aligned words; bdwgc aborts on anything else. */
static bool link_ok(void **link, const char *who)
{
    if (link && !((uintptr_t)link & (sizeof(void *) - 1)))
        return true;
    lf_warn("GC Warning: %s: a link must be the address of an aligned pointer\n",
            (uintptr_t)who);
    return false;
}

static int register_link(struct table *t, void **link, const void *obj)
{
    if (!link_ok(link, "GC_general_register_disappearing_link"))
        return GC_UNIMPLEMENTED;
    lf_ensure_init();
    lock();
    if (table_find(t, (uintptr_t)link) != SIZE_MAX) {
        unlock();
        return GC_DUPLICATE;
    }
    size_t e = table_insert(t, (uintptr_t)link);
    if (e != SIZE_MAX)
        t->col[L_TARGET][e] = (uintptr_t)obj;
    unlock();
    return e != SIZE_MAX ? GC_SUCCESS : GC_NO_MEMORY;
}

static int unregister_link(struct table *t, void **link)
{
    if (!link || ((uintptr_t)link & (sizeof(void *) - 1)))
        return 0;
    lf_ensure_init();
    lock();
    size_t i = table_find(t, (uintptr_t)link);
    if (i != SIZE_MAX)
        table_delete(t, i);
    unlock();
    return i != SIZE_MAX;
}

static int move_link(struct table *t, void **link, void **new_link)
{
    if (!link_ok(new_link, "GC_move_disappearing_link"))
        return GC_UNIMPLEMENTED;
    if (!link || ((uintptr_t)link & (sizeof(void *) - 1)))
        return GC_NOT_FOUND;
    lf_ensure_init();
    lock();
    int ret = GC_SUCCESS;
    size_t i = table_find(t, (uintptr_t)link);
    if (i == SIZE_MAX) {
        ret = GC_NOT_FOUND;
    } else if (new_link != link) {
        if (table_find(t, (uintptr_t)new_link) != SIZE_MAX) {
            ret = GC_DUPLICATE;
        } else {
            /* The key changes in place: the entry stays, its index slot
             * moves. */
            index_remove_slot(t, index_slot_of(t, i));
            t->col[L_KEY][i] = (uintptr_t)new_link;
            index_put(t, i);
        }
    }
    unlock();
    return ret;
}

LFGC_EXPORT int GC_general_register_disappearing_link(void **link, const void *obj)
{
    return register_link(&fz.links[0], link, obj);
}

LFGC_EXPORT int GC_register_disappearing_link(void **link)
{
    void *base = link ? lf_base(link) : NULL;
    if (!base) {
        lf_warn("GC Warning: GC_register_disappearing_link(%p): the link is not in a heap "
                "object; use GC_general_register_disappearing_link\n", (uintptr_t)link);
        return GC_NOT_FOUND;
    }
    return register_link(&fz.links[0], link, base);
}

LFGC_EXPORT int GC_unregister_disappearing_link(void **link)
{
    return unregister_link(&fz.links[0], link);
}

LFGC_EXPORT int GC_move_disappearing_link(void **link, void **new_link)
{
    return move_link(&fz.links[0], link, new_link);
}

LFGC_EXPORT int GC_register_long_link(void **link, const void *obj)
{
    return register_link(&fz.links[1], link, obj);
}

LFGC_EXPORT int GC_unregister_long_link(void **link)
{
    return unregister_link(&fz.links[1], link);
}

LFGC_EXPORT int GC_move_long_link(void **link, void **new_link)
{
    return move_link(&fz.links[1], link, new_link);
}

/* GC_free(p) of the object [p, p + bytes), lock held: its finalizer goes,
 * and so do the links that lie in it (clearing one later would write into
 * whatever reuses the memory). */
void lf_finalize_forget(void *p, size_t bytes)
{
    size_t i = table_find(&fz.fins, (uintptr_t)p);
    if (i != SIZE_MAX)
        table_delete(&fz.fins, i);
    for (int l = 0; l < 2; l++) {
        struct table *t = &fz.links[l];
        if (!t->n)
            continue;
        uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
        if (bytes / sizeof(void *) <= t->n) {
            for (uintptr_t a = lo; a < hi; a += sizeof(void *))
                if ((i = table_find(t, a)) != SIZE_MAX)
                    table_delete(t, i);
        } else {
            /* A deletion moves the last entry to i: look at i again. */
            for (i = 0; i < t->n;) {
                uintptr_t k = t->col[L_KEY][i];
                if (k >= lo && k < hi)
                    table_delete(t, i);
                else
                    i++;
            }
        }
    }
}

/* ------------------------------------------------------------------ */
/* Toggle references                                                    */

LFGC_EXPORT void GC_set_toggleref_func(GC_toggleref_func fn)
{
    lock();
    fz.toggleref = fn;
    unlock();
}

LFGC_EXPORT GC_toggleref_func GC_get_toggleref_func(void)
{
    lf_ensure_init();
    lock();
    GC_toggleref_func fn = fz.toggleref;
    unlock();
    return fn;
}

LFGC_EXPORT int GC_toggleref_add(void *obj, int is_strong)
{
    lf_ensure_init();
    lock();
    if (!fz.toggleref) {
        unlock();
        return GC_SUCCESS;              /* as bdwgc: nothing to decide with */
    }
    if (!lf_array_reserve((void **)&fz.toggles, &fz.toggles_cap, fz.toggles_len,
                          sizeof *fz.toggles, 512)) {
        unlock();
        return GC_NO_MEMORY;
    }
    fz.toggles[fz.toggles_len++] = GC_HIDE_POINTER(obj) & ~(uintptr_t)(is_strong ? 0 : 1);
    unlock();
    return GC_SUCCESS;
}

/* GC_HIDE_POINTER of an aligned pointer has its low bits set: a cleared
 * bit 0 marks a weak reference. */
static inline void *toggle_obj(uintptr_t t) { return GC_REVEAL_POINTER(t | 1); }
static inline bool toggle_strong(uintptr_t t) { return t & 1; }

/* Before the world stops, lock held: the program's callback says which
 * references are strong now, and which go. */
void lf_finalize_before_stop(void)
{
    if (!fz.toggleref || !fz.toggles_len)
        return;
    size_t n = 0;
    for (size_t i = 0; i < fz.toggles_len; i++) {
        uintptr_t t = fz.toggles[i];
        if (!t)
            continue;                   /* cleared: its object died */
        switch (fz.toggleref(toggle_obj(t))) {
        case GC_TOGGLE_REF_DROP:
            continue;
        case GC_TOGGLE_REF_STRONG:
            fz.toggles[n++] = t | 1;
            break;
        case GC_TOGGLE_REF_WEAK:
            fz.toggles[n++] = t & ~(uintptr_t)1;
            break;
        }
    }
    fz.toggles_len = n;
}

/* ------------------------------------------------------------------ */
/* Disclaim procedures (gc_disclaim.h)                                  */

LF_UNSCANNED uint8_t lf_disclaim_tracked[MAX_KINDS];

/* Which slots of a disclaim kind hold objects: a slot that is neither
 * free (no canary) nor allocated may be one the lazy sweep has not handed
 * out yet.  Several threads set bits of one bitmap word. */
void lf_disclaim_track(void *p, bool allocated)
{
    struct region *r = region_of(p);
    uint64_t bit = lowfat_slot_number(p) - r->q0;
    uint64_t mask = 1ull << (bit & 63);
    if (allocated)
        __atomic_fetch_or(&r->alloc_bits[bit >> 6], mask, __ATOMIC_RELAXED);
    else
        __atomic_fetch_and(&r->alloc_bits[bit >> 6], ~mask, __ATOMIC_RELAXED);
}

/* Call fn(base, len) for every object allocated since its kind got a
 * disclaim procedure (only mark_from_all kinds if asked). */
static void each_disclaim_object(bool only_all, void (*fn)(uintptr_t base, uint64_t len))
{
    for_each_span_in_use(it) {
        struct region *r = it.r;
        struct span *s = it.s;
        if (!fz.disclaim[s->kind] || (only_all && !fz.disclaim_all[s->kind]))
            continue;
        uint64_t qa, qb;
        lf_span_slots(r, it.j, &qa, &qb);
        for (uint64_t q = qa; q < qb; q++)
            if (bit_get(r->alloc_bits, q - r->q0))
                fn(q * r->size, r->large ? s->obj_bytes : r->size);
    }
}

static void push_contents(uintptr_t base, uint64_t len)
{
    const struct kind *k = &lf_kinds[lf_chunk_map[chunk_entry(base)] - 1];
    uint64_t scan = kind_scan_len(k, (const void *)base, len);
    if (scan)
        lf_mark_push_part((const void *)base, (const void *)base, (const void *)(base + scan));
}

/* Roots: what objects of mark_from_all kinds reach, dead or alive. */
static void disclaim_mark_from_all(void)
{
    each_disclaim_object(true, push_contents);
}

static void note_disclaimed(uintptr_t base, uint64_t len)
{
    (void)len;
    if (lf_mark_is_set((void *)base))
        return;
    if (!lf_array_reserve((void **)&fz.disclaimed, &fz.disclaimed_cap, fz.disclaimed_len,
                          sizeof *fz.disclaimed, 1024)) {
        lf_disclaim_track((void *)base, false);
        return;                         /* reclaimed without its procedure */
    }
    fz.disclaimed[fz.disclaimed_len++] = (void *)base;
}

/* After the finalizers are decided: dead objects of kinds with a disclaim
 * procedure survive this collection, with what they reach, until their
 * procedure has been asked (after the restart). */
static void disclaim_after_mark(void)
{
    fz.disclaimed_len = 0;
    each_disclaim_object(false, note_disclaimed);
    if (!fz.disclaimed_len)
        return;
    lf_mark_serial(true);
    for (size_t i = 0; i < fz.disclaimed_len; i++) {
        lf_mark_contents(fz.disclaimed[i], false);
        lf_mark_set(fz.disclaimed[i]);
    }
    lf_mark_finish();
    lf_mark_serial(false);
    AO_store(&lf_disclaim_pending, 1);
}

/* The waiting objects stay marked, so that no sweep hands their slots out
 * (sweeps read the mark bits without the lock), but to the program they
 * are unmarked, as bdwgc's are until its sweep reaches them: a procedure
 * tells a dead object from one the program has found again and marked
 * with GC_set_mark_bit (a weak map's lookup) by GC_is_marked.  That mark
 * is bit 0 of the object's entry in fz.disclaimed, which is in address
 * order (each_disclaim_object). */
LF_UNSCANNED volatile AO_t lf_disclaim_pending;

/* The entry of fz.disclaimed for the object p points into, or NULL. */
static uintptr_t *disclaimed_entry(const void *p)
{
    uintptr_t base = (uintptr_t)lowfat_base(p);
    uintptr_t *e = (uintptr_t *)fz.disclaimed;
    size_t lo = 0, hi = fz.disclaimed_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uintptr_t b = e[mid] & ~(uintptr_t)1;
        if (b == base)
            return &e[mid];
        if (b < base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The program's mark of waiting object p, after op; -1 when p is not one. */
int lf_disclaim_mark(const void *p, enum disclaim_mark_op op)
{
    uintptr_t *e = disclaimed_entry(p);
    if (!e)
        return -1;
    if (op == DISCLAIM_MARK_SET)
        __atomic_fetch_or(e, (uintptr_t)1, __ATOMIC_RELAXED);
    else if (op == DISCLAIM_MARK_CLEAR)
        __atomic_fetch_and(e, ~(uintptr_t)1, __ATOMIC_RELAXED);
    return (int)(__atomic_load_n(e, __ATOMIC_RELAXED) & 1);
}

/* Lock held, world running: ask each procedure, unless the program has
 * marked its object since; an object whose procedure returns 0 goes now,
 * the others stay marked until the next collection. */
static void disclaim_after_restart(void)
{
    uint64_t ptrful = 0, ptrfree = 0;
    uintptr_t *e = (uintptr_t *)fz.disclaimed;
    for (size_t i = 0; i < fz.disclaimed_len; i++) {
        if (__atomic_load_n(&e[i], __ATOMIC_RELAXED) & 1)
            continue;
        void *obj = (void *)e[i];
        unsigned kind = lf_chunk_map[chunk_entry((uintptr_t)obj)] - 1;
        if (fz.disclaim[kind](obj))
            continue;
        size_t bytes = GC_size(obj);
        if (lf_free_held(obj))
            *(lf_kinds[kind].ptrfree ? &ptrfree : &ptrful) += bytes;
    }
    AO_store(&lf_disclaim_pending, 0);
    fz.disclaimed_len = 0;
    lf_policy_discount(ptrful, ptrfree, true);
}

LFGC_EXPORT void GC_register_disclaim_proc(int kind, GC_disclaim_proc proc, int mark_from_all)
{
    lf_ensure_init();
    if (kind < 0 || !lf_kind_valid((unsigned)kind) || !proc) {
        lf_warn("GC Warning: GC_register_disclaim_proc: kind %p does not exist, or no "
                "procedure; ignored\n", (uintptr_t)kind);
        return;
    }
    lock();
    if (!fz.disclaim[kind])
        fz.disclaim_kinds++;
    lf_disclaim_tracked[kind] = 1;
    fz.disclaim[kind] = proc;
    fz.disclaim_all[kind] = mark_from_all != 0;
    unlock();
}

/* GC_finalized_malloc's objects: a word before the program's part holds
 * the closure, tagged with bit 0 until its procedure has run (the tagged
 * word still points into the closure, which it keeps alive). */
static int finalized_disclaim(void *obj)
{
    uintptr_t *w = obj;
    if (w[0] & 1) {
        const struct GC_finalizer_closure *fc = (void *)(w[0] & ~(uintptr_t)1);
        w[0] = 0;
        fc->proc(w + 1, fc->cd);
    }
    return 0;
}

static LF_UNSCANNED pthread_once_t finalized_once = PTHREAD_ONCE_INIT;

static void make_finalized_kind(void)
{
    /* With interior pointers off, the program's pointer (one word past the
     * base) and the tagged closure word must still retain. */
    GC_register_displacement(sizeof(uintptr_t));
    GC_register_displacement(1);
    int k = lf_kind_new(SCAN_CONSERVATIVE, 0, NULL, 0, true, false);
    if (k < 0)
        return;
    GC_register_disclaim_proc(k, finalized_disclaim, 1);
    fz.finalized_kind = k;
}

LFGC_EXPORT void GC_init_finalized_malloc(void)
{
    lf_ensure_init();
    pthread_once(&finalized_once, make_finalized_kind);
}

LFGC_EXPORT void *GC_finalized_malloc(size_t bytes, const struct GC_finalizer_closure *fc)
{
    GC_init_finalized_malloc();
    if (fz.finalized_kind < 0 || bytes > SIZE_MAX - sizeof(uintptr_t))
        return lf_oom(bytes);
    uintptr_t *p = lf_alloc_kind(bytes + sizeof(uintptr_t), (unsigned)fz.finalized_kind);
    if (!p)
        return NULL;
    p[0] = (uintptr_t)fc | 1;
    return p + 1;
}

/* ------------------------------------------------------------------ */
/* The collection                                                       */

/* Roots, world stopped: client data of every registration (one range:
 * the column), the queue (objects waiting for their finalizers, with what
 * they reach) and the strong toggle references. */
void lf_finalize_mark_roots(void)
{
    if (fz.fins.n)
        lf_mark_push(fz.fins.col[F_CD], fz.fins.col[F_CD] + fz.fins.n);
    if (fz.len > fz.head)
        lf_mark_push(&fz.queue[fz.head], &fz.queue[fz.len]);
    if (fz.disclaim_kinds)
        disclaim_mark_from_all();
    for (size_t i = 0; i < fz.toggles_len; i++) {
        if (toggle_strong(fz.toggles[i])) {
            void *obj = toggle_obj(fz.toggles[i]);
            lf_mark_object(obj);
        }
    }
}

static inline bool is_marked(uintptr_t p)
{
    return lf_mark_ref_is_set(lf_mark_ref((void *)p));
}

/* Write NULL into a link, unless it lies in a slot that is free (its
 * object was freed explicitly, which bdwgc calls unsafe): that would
 * break the free list. */
static void clear_link(uintptr_t link)
{
    if (lowfat_is_heap_ptr((void *)link) && !lf_mark_in_object((void *)link))
        return;
    *(void **)link = NULL;
}

/* Clear the links of table l whose objects are unmarked; with drop, also
 * forget the links that lie in unmarked heap objects (they die with
 * them).  Entries that go are marked dead; table_tidy removes them. */
static void links_decide(int l, bool drop)
{
    struct table *t = &fz.links[l];
    uintptr_t *keys = t->col[L_KEY], *targets = t->col[L_TARGET];
    for (size_t e = 0; e < t->n; e++) {
        uintptr_t link = keys[e];
        if (link == KEY_DEAD)
            continue;
        if (!is_marked(targets[e])) {
            clear_link(link);
            fz.cleared[l]++;
        } else if (!(drop && !is_marked(link))) {
            continue;
        } else {
            fz.dropped_links++;
        }
        keys[e] = KEY_DEAD;
        t->dead++;
    }
}

/* Short links whose own memory is unmarked go (after finalization decided
 * what stays). */
static void links_drop_dangling(int l)
{
    struct table *t = &fz.links[l];
    uintptr_t *keys = t->col[L_KEY];
    for (size_t e = 0; e < t->n; e++) {
        uintptr_t link = keys[e];
        if (link != KEY_DEAD && !is_marked(link)) {
            keys[e] = KEY_DEAD;
            t->dead++;
            fz.dropped_links++;
        }
    }
}

/* Entries of an empty queue kept across collections (256 KiB). */
#define QUEUE_KEEP 8192

/* Entries whose finalizers ran leave the head of the queue. */
static void queue_compact(void)
{
    if (!fz.head)
        return;
    memmove(fz.queue, fz.queue + fz.head, (fz.len - fz.head) * sizeof *fz.queue);
    fz.len -= fz.head;
    fz.head = 0;
}

static bool queue_reserve(size_t more)
{
    if (fz.head && fz.head == fz.len)
        fz.head = fz.len = 0;
    if (fz.len + more <= fz.cap)
        return true;
    if (fz.head) {
        queue_compact();
        if (fz.len + more <= fz.cap)
            return true;
    }
    size_t cap = fz.cap ? fz.cap : 256;
    while (cap < fz.len + more)
        cap *= 2;
    struct ready *n = lf_map_grow(fz.queue, fz.cap * sizeof *n, cap * sizeof *n);
    if (!n)
        return false;
    fz.queue = n;
    fz.cap = cap;
    return true;
}

/* After a collection: an empty queue much larger than what collections
 * queue now goes (a burst of finalization, then none, kept its pages for
 * good); the next one that queues maps it again.  A smaller one gives its
 * pages back.  Lock held. */
static void queue_tidy(void)
{
    if (fz.len > fz.queue_touched)
        fz.queue_touched = fz.len;
    if (!fz.queue || fz.head != fz.len)
        return;
    if (fz.cap > QUEUE_KEEP && fz.queued_now < fz.cap / 8) {
        munmap(fz.queue, fz.cap * sizeof *fz.queue);
        fz.queue = NULL;
        fz.head = fz.len = fz.cap = fz.queue_touched = 0;
        return;
    }
    pages_release_past(fz.queue, 0, fz.queue_touched * sizeof *fz.queue);
    fz.queue_touched = 0;
}

/* Steps 2 and 3: decide the finalizable objects. */
static void finalizers_decide(void)
{
    struct table *t = &fz.fins;
    uintptr_t *keys = t->col[F_KEY], *modes = t->col[F_MODE];
    fz.cycles = 0;
    /* Finalizers already run leave the queue first: growing it below must
     * not move the entries this decision adds (see queue_reserve). */
    queue_compact();
    /* 2: what unreachable finalizable objects reach is kept.  Each one
     * unmarked when its turn comes is a candidate, in the queue (with its
     * entry number in `mode`, until it is known whether it goes); one
     * marked by then is reachable from another, and stays. */
    size_t first = fz.len;
    bool no_order = false;
    /* Newest first: new objects tend to point to older ones, which are
     * then marked before their turn, and need no walk of their own. */
    for (size_t e = t->n; e-- > 0;) {
        uintptr_t obj = keys[e];
        if (is_marked(obj))
            continue;
        if (fz.len == fz.cap && !queue_reserve(1))
            break;                      /* left for a later collection */
        fz.queue[fz.len++] = (struct ready){ (void *)obj, NULL, NULL, e };
        if (modes[e] == FIN_NO_ORDER) {
            no_order = true;
            continue;
        }
        lf_mark_contents((void *)obj, modes[e] == FIN_IGNORE_SELF);
        if (is_marked(obj)) {
            /* It reaches itself: never finalized (nor collected). */
            if (!fz.cycles++)
                fz.cycle_example = obj;
        }
    }
    lf_mark_finish();
    /* 3: the candidates still unmarked are ready. */
    size_t n = first;
    bool unreachable_seen = false;
    for (size_t q = first; q < fz.len; q++) {
        if (is_marked((uintptr_t)fz.queue[q].obj))
            continue;
        unreachable_seen |= modes[fz.queue[q].mode] == FIN_UNREACHABLE;
        fz.queue[n++] = fz.queue[q];
    }
    fz.len = n;
    /* What no-order objects reach stays too; with Java-style finalization
     * it also keeps alive the `unreachable` ones it reaches, which are not
     * finalized yet. */
    if (no_order) {
        for (size_t q = first; q < fz.len; q++)
            if (modes[fz.queue[q].mode] == FIN_NO_ORDER)
                lf_mark_contents(fz.queue[q].obj, false);
        lf_mark_finish();
    }
    n = first;
    for (size_t q = first; q < fz.len; q++) {
        size_t e = fz.queue[q].mode;
        struct lf_mark_ref m = lf_mark_ref((void *)keys[e]);
        if (unreachable_seen && GC_java_finalization && modes[e] == FIN_UNREACHABLE &&
            lf_mark_ref_is_set(m))
            continue;                   /* stays registered */
        fz.queue[n++] = (struct ready){ (void *)keys[e], (GC_finalization_proc)t->col[F_FN][e],
                                        (void *)t->col[F_CD][e], modes[e] };
        /* Ready objects are marked: they and all they reach survive until
         * the finalizer has run (what they reach was marked above). */
        if (m.word) {
            *m.word |= m.mask;
            struct region *r = region_of((void *)keys[e]);
            void *base = lowfat_base((void *)keys[e]);
            uint64_t bytes = r->large ? GC_size(base) : r->size;
            fz.queued_bytes += bytes;
            if (lf_kinds[lf_chunk_map[chunk_entry((uintptr_t)base)] - 1].ptrfree)
                fz.queued_ptrfree += bytes;
        }
        keys[e] = KEY_DEAD;
        t->dead++;
    }
    fz.len = n;
    fz.queued_now = n - first;
}

/* With the world stopped, after marking and before the sweep. */
void lf_finalize_after_mark(void)
{
    fz.queued_now = 0;
    fz.queued_bytes = fz.queued_ptrfree = 0;
    fz.dropped_links = 0;
    fz.cleared[0] = fz.cleared[1] = 0;
    /* Weak toggle references to dead objects go first, as short links. */
    for (size_t i = 0; i < fz.toggles_len; i++)
        if (fz.toggles[i] && !lf_mark_is_set(toggle_obj(fz.toggles[i])))
            fz.toggles[i] = 0;
    if (!fz.fins.n && !fz.links[0].n && !fz.links[1].n) {
        if (fz.disclaim_kinds)
            disclaim_after_mark();
        return;
    }
    /* 1: short links; with no finalizers nothing is marked after this, so
     * the links lying in dead objects can go in the same walk. */
    links_decide(0, !fz.fins.n);
    if (fz.fins.n) {
        lf_mark_serial(true);
        finalizers_decide();
        lf_mark_serial(false);
        links_drop_dangling(0);
    }
    /* 4 and 5: long links, and those lying in unmarked objects. */
    links_decide(1, true);
    if (fz.disclaim_kinds)
        disclaim_after_mark();
}

/* After the world restarts, lock held. */
void lf_finalize_after_restart(void)
{
    if (fz.disclaimed_len)
        disclaim_after_restart();
    if (fz.await)
        for (size_t q = fz.len - fz.queued_now; q < fz.len; q++)
            fz.await(fz.queue[q].obj);
    if (fz.queued_now) {
        AO_store_release(&lf_finalizers_due, 1);
        /* Counted live by the collection: garbage once their finalizers
         * have run (see lf_policy_discount). */
        lf_policy_discount(fz.queued_bytes - fz.queued_ptrfree, fz.queued_ptrfree, false);
    }
    table_tidy(&fz.fins);
    fz.entries_at_gc = fz.fins.n;
    table_tidy(&fz.links[0]);
    table_tidy(&fz.links[1]);
    queue_tidy();
    lf_pages_release_flush();
    if (fz.cycles)
        lf_warn("GC Warning: finalization cycle involving %p: its objects are never "
                "finalized\n", fz.cycle_example);
    if (lf_print_stats && (fz.fins.n || fz.links[0].n || fz.links[1].n ||
                           fz.queued_now || fz.cleared[0] || fz.cleared[1]))
        fprintf(stderr,
                "lfgc: finalization: %zu finalizers registered, %zu queued, %zu waiting; "
                "links: %zu short (%zu cleared), %zu long (%zu cleared), %zu dropped with "
                "their objects\n",
                fz.fins.n, fz.queued_now, fz.len - fz.head, fz.links[0].n, fz.cleared[0],
                fz.links[1].n, fz.cleared[1], fz.dropped_links);
}

/* For the policy.  What a collection queued was dead: it counts as
 * allocated since.  And while the table of finalizable objects grows by
 * more than one per bytes_per_finalizer allocated (and some were
 * finalized last time), the heap should not grow before a collection: as
 * in bdwgc, a program that finalizes most of what it allocates keeps a
 * small heap.  The growth is net, as bdwgc's: Guile re-registers an object
 * each time its finalizer runs, after every collection, and counting
 * registrations made every span past the heap's size a collection. */
uint64_t lf_finalize_queued_bytes(void)
{
    return fz.queued_bytes;
}

bool lf_finalize_wants_collection(uint64_t allocd)
{
    return fz.fins.n > fz.entries_at_gc && fz.queued_bytes && fz.bytes_per_finalizer &&
           (fz.fins.n - fz.entries_at_gc) * fz.bytes_per_finalizer > allocd;
}

LFGC_EXPORT void GC_set_allocd_bytes_per_finalizer(GC_word bytes)
{
    fz.bytes_per_finalizer = bytes;
}

LFGC_EXPORT GC_word GC_get_allocd_bytes_per_finalizer(void)
{
    return fz.bytes_per_finalizer;
}

/* ------------------------------------------------------------------ */
/* Running finalizers                                                   */

LFGC_EXPORT int GC_should_invoke_finalizers(void)
{
    return AO_load(&lf_finalizers_due) != 0;
}

LFGC_EXPORT int GC_invoke_finalizers(void)
{
    lf_ensure_init();
    int count = 0;
    struct finalizers_guard *outer = finalizers_guard;
    uintptr_t outer_token = finalizers_guard_token;
    volatile struct finalizers_guard guard;
    /* Unlike any word a reused stack slot is likely to hold. */
    guard.token = ((uintptr_t)&guard ^ 0x9e3779b97f4a7c15u) + ++finalizers_calls;
    finalizers_guard = (struct finalizers_guard *)&guard;
    finalizers_guard_token = guard.token;
    for (;;) {
        lock();
        if (fz.head == fz.len) {
            fz.head = fz.len = 0;
            AO_store(&lf_finalizers_due, 0);
            unlock();
            break;
        }
        /* While it runs, the object is held by this frame (a root). */
        struct ready r = fz.queue[fz.head];
        fz.queue[fz.head++] = (struct ready){ 0 };
        unlock();
        r.fn(r.obj, r.cd);
        count++;
    }
    finalizers_guard = outer;
    finalizers_guard_token = outer_token;
    return count;
}

/* Whether the caller runs inside a GC_invoke_finalizers of this thread
 * (a finalizer allocating).  The guard is live if it lies in an older
 * frame than the caller's (at a higher address: the stack grows down)
 * and still holds its token; a frame left by longjmp lies at or below
 * the caller's, or has been overwritten since. */
static bool finalizers_running_here(void)
{
    volatile struct finalizers_guard *g = finalizers_guard;
    if (!g)
        return false;
    if ((uintptr_t)g > (uintptr_t)__builtin_frame_address(0) && g->token == finalizers_guard_token)
        return true;
    finalizers_guard = NULL;
    return false;
}

/* From the allocation and collection paths, lock not held, when some
 * finalizers are due: run them here, or tell the program. */
void lf_finalize_due(void)
{
    if (finalizers_running_here())
        return;                         /* a finalizer allocating */
    if (GC_finalize_on_demand) {
        GC_finalizer_notifier_proc fn = fz.notifier ? fz.notifier : GC_finalizer_notifier;
        lock();
        bool first = fz.notified_gc != GC_gc_no;
        fz.notified_gc = GC_gc_no;
        unlock();
        if (fn && first)
            fn();
        return;
    }
    GC_invoke_finalizers();
}

LFGC_EXPORT void GC_finalize_all(void)
{
    lf_ensure_init();
    for (;;) {
        lock();
        size_t moved = 0;
        struct table *t = &fz.fins;
        /* From the last entry down: deleting it moves nothing. */
        while (t->n && queue_reserve(1)) {
            size_t e = t->n - 1;
            fz.queue[fz.len++] = (struct ready){ (void *)t->col[F_KEY][e],
                                                 (GC_finalization_proc)t->col[F_FN][e],
                                                 (void *)t->col[F_CD][e], t->col[F_MODE][e] };
            table_delete(t, e);
            moved++;
        }
        if (moved)
            AO_store_release(&lf_finalizers_due, 1);
        unlock();
        if (!moved && !GC_should_invoke_finalizers())
            break;
        GC_invoke_finalizers();
    }
}

/* This setter and the other two stored-procedure ones do not initialise
 * the collector, as in bdwgc: programs call them before GC_init, which
 * must still read the environment (Whippet sets GC_MARKERS after them). */
LFGC_EXPORT void GC_set_finalizer_notifier(GC_finalizer_notifier_proc fn)
{
    lock();
    fz.notifier = fn;
    GC_finalizer_notifier = fn;
    unlock();
}

LFGC_EXPORT GC_finalizer_notifier_proc GC_get_finalizer_notifier(void)
{
    return fz.notifier ? fz.notifier : GC_finalizer_notifier;
}

LFGC_EXPORT void GC_set_finalize_on_demand(int on)
{
    GC_finalize_on_demand = on;
}

LFGC_EXPORT int GC_get_finalize_on_demand(void)
{
    return GC_finalize_on_demand;
}

LFGC_EXPORT void GC_set_java_finalization(int on)
{
    GC_java_finalization = on;
}

LFGC_EXPORT int GC_get_java_finalization(void)
{
    return GC_java_finalization;
}

LFGC_EXPORT void GC_set_await_finalize_proc(GC_await_finalize_proc fn)
{
    lock();
    fz.await = fn;
    unlock();
}

LFGC_EXPORT GC_await_finalize_proc GC_get_await_finalize_proc(void)
{
    lf_ensure_init();
    lock();
    GC_await_finalize_proc fn = fz.await;
    unlock();
    return fn;
}
