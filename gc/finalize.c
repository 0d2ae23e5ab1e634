/* finalize.c: finalizers, disappearing links and toggle references.
 *
 * Three tables, in memory of their own that no scan of roots sees (so an
 * entry never keeps its object alive), each an open-addressing hash:
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

/* Keys of empty and deleted slots: no registered pointer or link address
 * can be either (both are below the first page). */
#define KEY_EMPTY 0u
#define KEY_GONE  8u

struct fin_entry {
    uintptr_t key;              /* the registered pointer                  */
    GC_finalization_proc fn;
    void *cd;
    uintptr_t mode;
};

struct link_entry {
    uintptr_t key;              /* the link's address                      */
    uintptr_t target;           /* the object it disappears with           */
};

/* One open-addressing table: `cap` slots (a power of two) of `entry`
 * bytes each, the key in the first word. */
struct table {
    void *slots;
    size_t cap;
    size_t used;                /* entries                                 */
    size_t gone;                /* deleted slots not yet reclaimed         */
    size_t peak;                /* most entries since the last rebuild     */
    size_t entry;
};

struct ready {
    void *obj;
    GC_finalization_proc fn;
    void *cd;
    uintptr_t mode;             /* while deciding: the table slot, see step 3 */
};

/* Unscanned: it holds heap addresses (see LF_UNSCANNED). */
static LF_UNSCANNED struct {
    struct table fins;
    struct table links[2];      /* short, long                             */
    struct ready *queue;        /* [head, len) wait to run                 */
    size_t head, len, cap;
    size_t queued_now;          /* queued by the current collection, from len - queued_now */
    uint64_t queued_bytes;      /* their bytes                               */
    size_t registered_since_gc; /* new registrations since the last collection */
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
    .fins = { .entry = sizeof(struct fin_entry) },
    .links = { { .entry = sizeof(struct link_entry) }, { .entry = sizeof(struct link_entry) } },
    .bytes_per_finalizer = 10000,
    .finalized_kind = -1,
};

/* Set while the queue is not empty: the allocation slow path reads it
 * without the lock. */
LF_UNSCANNED volatile AO_t lf_finalizers_due;
static __thread bool running_finalizers __attribute__((tls_model("initial-exec")));

LFGC_EXPORT LF_UNSCANNED GC_finalizer_notifier_proc GC_finalizer_notifier;

/* ------------------------------------------------------------------ */
/* Tables                                                               */

static void *map_bytes(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static inline uintptr_t *slot_key(const struct table *t, size_t i)
{
    return (uintptr_t *)((char *)t->slots + i * t->entry);
}

static inline size_t hash_of(uintptr_t key, size_t cap)
{
    /* Keys are at least 8-byte aligned: Fibonacci hashing of the rest. */
    return (size_t)(((key >> 3) * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

/* The slot holding key, or SIZE_MAX. */
static size_t table_find(const struct table *t, uintptr_t key)
{
    if (!t->used)
        return SIZE_MAX;
    for (size_t i = hash_of(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
        uintptr_t k = *slot_key(t, i);
        if (k == key)
            return i;
        if (k == KEY_EMPTY)
            return SIZE_MAX;
    }
}

/* Drop t's deleted slots where they are (the capacity stays): no second
 * table, so no second set of pages, which for a table of a million
 * entries is 32 MiB.  The scan starts after a slot that was empty before
 * the deleted ones were: no probe sequence crosses it, so each run of
 * slots is taken from its start, and each entry moves back, if at all,
 * to the first free slot from its home, within its run (linear probing
 * finds it there, as every slot between is taken). */
static void table_rehash_in_place(struct table *t)
{
    size_t mask = t->cap - 1, start = 0;
    while (*slot_key(t, start) != KEY_EMPTY)
        start++;                        /* at most half the slots are taken */
    for (size_t i = 0; i < t->cap; i++)
        if (*slot_key(t, i) == KEY_GONE)
            *slot_key(t, i) = KEY_EMPTY;
    for (size_t k = 1; k < t->cap; k++) {
        size_t i = (start + k) & mask;
        uintptr_t *e = slot_key(t, i);
        if (*e == KEY_EMPTY)
            continue;
        size_t j = hash_of(*e, t->cap);
        while (j != i && *slot_key(t, j) != KEY_EMPTY)
            j = (j + 1) & mask;
        if (j != i) {
            memcpy(slot_key(t, j), e, t->entry);
            *e = KEY_EMPTY;
        }
    }
    t->gone = 0;
    t->peak = t->used;
}

/* Rebuild t with room for `want` entries at most half full. */
static bool table_resize(struct table *t, size_t want)
{
    size_t cap = 64;
    while (cap < 2 * want)
        cap *= 2;
    if (t->slots && cap == t->cap) {
        table_rehash_in_place(t);
        return true;
    }
    void *slots = map_bytes(cap * t->entry);
    if (!slots)
        return false;
    struct table n = { slots, cap, 0, 0, 0, t->entry };
    for (size_t i = 0; i < t->cap; i++) {
        uintptr_t *e = slot_key(t, i);
        if (*e == KEY_EMPTY || *e == KEY_GONE)
            continue;
        size_t j = hash_of(*e, cap);
        while (*slot_key(&n, j) != KEY_EMPTY)
            j = (j + 1) & (cap - 1);
        memcpy(slot_key(&n, j), e, t->entry);
        n.used++;
    }
    if (t->slots)
        munmap(t->slots, t->cap * t->entry);
    n.peak = n.used;
    *t = n;
    return true;
}

/* A slot for a key known to be absent, or NULL without memory. */
static uintptr_t *table_insert(struct table *t, uintptr_t key)
{
    if (2 * (t->used + t->gone + 1) > t->cap && !table_resize(t, 2 * (t->used + 1)))
        return NULL;
    size_t i = hash_of(key, t->cap);
    while (*slot_key(t, i) != KEY_EMPTY && *slot_key(t, i) != KEY_GONE)
        i = (i + 1) & (t->cap - 1);
    if (*slot_key(t, i) == KEY_GONE)
        t->gone--;
    uintptr_t *e = slot_key(t, i);
    memset(e, 0, t->entry);
    *e = key;
    if (++t->used > t->peak)
        t->peak = t->used;
    return e;
}

static void table_delete(struct table *t, size_t i)
{
    *slot_key(t, i) = KEY_GONE;
    t->used--;
    t->gone++;
}

/* After a collection deleted many entries: reclaim their slots (and the
 * memory of a table that emptied). */
static void table_tidy(struct table *t)
{
    /* Collections walk every slot: a table that stays mostly empty
     * shrinks (not one that fills up again between collections). */
    if (t->gone > t->cap / 4 || (t->cap > 64 && t->peak < t->cap / 8))
        table_resize(t, t->peak > t->used ? t->peak : t->used);
    t->peak = t->used;
}

/* ------------------------------------------------------------------ */
/* Registration                                                         */

size_t lf_finalize_entries(void)
{
    return fz.fins.used + fz.links[0].used + fz.links[1].used;
}

/* Is p inside an object in use (allocated, or dead but not yet swept)?
 * Only such objects can be finalized. */
static bool is_object(const void *p)
{
    return lfgc_is_live(p);
}

static void register_finalizer(void *obj, GC_finalization_proc fn, void *cd,
                               GC_finalization_proc *ofn, void **ocd, enum fin_mode mode)
{
    lf_ensure_init();
    lock();
    size_t i = table_find(&fz.fins, (uintptr_t)obj);
    if (i != SIZE_MAX) {
        struct fin_entry *e = (struct fin_entry *)slot_key(&fz.fins, i);
        if (ofn)
            *ofn = e->fn;
        if (ocd)
            *ocd = e->cd;
        if (fn) {
            e->fn = fn;
            e->cd = cd;
            e->mode = mode;
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
    struct fin_entry *e = (struct fin_entry *)table_insert(&fz.fins, (uintptr_t)obj);
    if (!e) {
        unlock();
        lf_warn("GC Warning: out of memory registering a finalizer for %p\n", (uintptr_t)obj);
        return;                         /* *ofn and *ocd unchanged */
    }
    e->fn = fn;
    e->cd = cd;
    e->mode = mode;
    fz.registered_since_gc++;
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
    struct link_entry *e = (struct link_entry *)table_insert(t, (uintptr_t)link);
    if (e)
        e->target = (uintptr_t)obj;
    unlock();
    return e ? GC_SUCCESS : GC_NO_MEMORY;
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
            uintptr_t target = ((struct link_entry *)slot_key(t, i))->target;
            table_delete(t, i);
            struct link_entry *e = (struct link_entry *)table_insert(t, (uintptr_t)new_link);
            e->target = target;     /* the deletion left room */
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
        if (!t->used)
            continue;
        uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
        if (bytes / sizeof(void *) <= t->cap) {
            for (uintptr_t a = lo; a < hi; a += sizeof(void *))
                if ((i = table_find(t, a)) != SIZE_MAX)
                    table_delete(t, i);
        } else {
            for (i = 0; i < t->cap; i++) {
                uintptr_t k = *slot_key(t, i);
                if (k != KEY_EMPTY && k != KEY_GONE && k >= lo && k < hi)
                    table_delete(t, i);
            }
        }
    }
}

/* ------------------------------------------------------------------ */
/* Toggle references                                                    */

LFGC_EXPORT void GC_set_toggleref_func(GC_toggleref_func fn)
{
    lf_ensure_init();
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
    if (fz.toggles_len == fz.toggles_cap) {
        size_t cap = fz.toggles_cap ? 2 * fz.toggles_cap : 512;
        uintptr_t *n = map_bytes(cap * sizeof *n);
        if (!n) {
            unlock();
            return GC_NO_MEMORY;
        }
        if (fz.toggles) {
            memcpy(n, fz.toggles, fz.toggles_len * sizeof *n);
            munmap(fz.toggles, fz.toggles_cap * sizeof *n);
        }
        fz.toggles = n;
        fz.toggles_cap = cap;
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
    const struct kind *k = &lf_kinds[lf_chunk_map[base >> CHUNK_SHIFT] - 1];
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
    if (fz.disclaimed_len == fz.disclaimed_cap) {
        size_t cap = fz.disclaimed_cap ? 2 * fz.disclaimed_cap : 1024;
        void **n = map_bytes(cap * sizeof *n);
        if (!n) {
            lf_disclaim_track((void *)base, false);
            return;                     /* reclaimed without its procedure */
        }
        if (fz.disclaimed) {
            memcpy(n, fz.disclaimed, fz.disclaimed_len * sizeof *n);
            munmap(fz.disclaimed, fz.disclaimed_cap * sizeof *n);
        }
        fz.disclaimed = n;
        fz.disclaimed_cap = cap;
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
}

/* Lock held, world running: ask each procedure; those that return 0 let
 * their object go now. */
static void disclaim_after_restart(void)
{
    uint64_t ptrful = 0, ptrfree = 0;
    for (size_t i = 0; i < fz.disclaimed_len; i++) {
        void *obj = fz.disclaimed[i];
        unsigned kind = lf_chunk_map[(uintptr_t)obj >> CHUNK_SHIFT] - 1;
        if (fz.disclaim[kind](obj))
            continue;
        size_t bytes = GC_size(obj);
        if (lf_free_held(obj))
            *(lf_kinds[kind].ptrfree ? &ptrfree : &ptrful) += bytes;
    }
    fz.disclaimed_len = 0;
    lf_policy_discount(ptrful, ptrfree);
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

/* Roots, world stopped: client data of every registration, the queue
 * (objects waiting for their finalizers, with what they reach) and the
 * strong toggle references. */
void lf_finalize_mark_roots(void)
{
    if (fz.fins.used) {
        for (size_t i = 0; i < fz.fins.cap; i++) {
            struct fin_entry *e = (struct fin_entry *)slot_key(&fz.fins, i);
            if (e->key != KEY_EMPTY && e->key != KEY_GONE && lowfat_is_heap_ptr(e->cd))
                lf_mark_push(&e->cd, &e->cd + 1);
        }
    }
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

/* Write NULL into a link, unless it lies in a slot that is free (its
 * object was freed explicitly, which bdwgc calls unsafe): that would
 * break the free list. */
static void clear_link(uintptr_t link)
{
    if (lowfat_is_heap_ptr((void *)link) && !lf_mark_in_object((void *)link))
        return;
    *(void **)link = NULL;
}

/* Clear the links of table t whose objects are unmarked. */
static void links_disappear(int l)
{
    struct table *t = &fz.links[l];
    fz.cleared[l] = 0;
    if (!t->used)
        return;
    for (size_t i = 0; i < t->cap; i++) {
        struct link_entry *e = (struct link_entry *)slot_key(t, i);
        if (e->key == KEY_EMPTY || e->key == KEY_GONE || lf_mark_is_set((void *)e->target))
            continue;
        clear_link(e->key);
        table_delete(t, i);
        fz.cleared[l]++;
    }
}

/* Drop the links that lie in unmarked heap objects: they die with them. */
static void links_drop_dangling(int l)
{
    struct table *t = &fz.links[l];
    if (!t->used)
        return;
    for (size_t i = 0; i < t->cap; i++) {
        struct link_entry *e = (struct link_entry *)slot_key(t, i);
        if (e->key == KEY_EMPTY || e->key == KEY_GONE)
            continue;
        if (lowfat_is_heap_ptr((void *)e->key) && !lf_mark_is_set((void *)e->key)) {
            table_delete(t, i);
            fz.dropped_links++;
        }
    }
}

static bool queue_reserve(size_t more)
{
    if (fz.head && fz.head == fz.len)
        fz.head = fz.len = 0;
    if (fz.len + more <= fz.cap)
        return true;
    if (fz.head) {
        memmove(fz.queue, fz.queue + fz.head, (fz.len - fz.head) * sizeof *fz.queue);
        fz.len -= fz.head;
        fz.head = 0;
        if (fz.len + more <= fz.cap)
            return true;
    }
    size_t cap = fz.cap ? fz.cap : 256;
    while (cap < fz.len + more)
        cap *= 2;
    struct ready *n = map_bytes(cap * sizeof *n);
    if (!n)
        return false;
    if (fz.queue) {
        memcpy(n, fz.queue, fz.len * sizeof *n);
        munmap(fz.queue, fz.cap * sizeof *n);
    }
    fz.queue = n;
    fz.cap = cap;
    return true;
}

/* Steps 2 and 3: decide the finalizable objects. */
static void finalizers_decide(void)
{
    struct table *t = &fz.fins;
    fz.cycles = 0;
    /* 2: what unreachable finalizable objects reach is kept. */
    for (size_t i = 0; i < t->cap; i++) {
        struct fin_entry *e = (struct fin_entry *)slot_key(t, i);
        if (e->key == KEY_EMPTY || e->key == KEY_GONE || e->mode == FIN_NO_ORDER ||
            lf_mark_is_set((void *)e->key))
            continue;
        lf_mark_contents((void *)e->key, e->mode == FIN_IGNORE_SELF);
        if (lf_mark_is_set((void *)e->key)) {
            /* It reaches itself: never finalized (nor collected). */
            if (!fz.cycles++)
                fz.cycle_example = e->key;
        }
    }
    lf_mark_finish();
    /* 3: the rest are ready.  The queue keeps them (and the table slot
     * each came from, in `mode`, until it is known they go). */
    size_t first = fz.len;
    for (size_t i = 0; i < t->cap; i++) {
        struct fin_entry *e = (struct fin_entry *)slot_key(t, i);
        if (e->key == KEY_EMPTY || e->key == KEY_GONE || lf_mark_is_set((void *)e->key))
            continue;
        if (!queue_reserve(1))
            break;                      /* left for a later collection */
        fz.queue[fz.len++] = (struct ready){ (void *)e->key, e->fn, e->cd, i };
    }
    /* What no-order objects reach stays too; with Java-style finalization
     * it also keeps alive the `unreachable` ones it reaches, which are not
     * finalized yet. */
    bool unreachable_seen = false;
    for (size_t q = first; q < fz.len; q++) {
        struct fin_entry *e = (struct fin_entry *)slot_key(t, fz.queue[q].mode);
        if (e->mode == FIN_NO_ORDER)
            lf_mark_contents(fz.queue[q].obj, false);
        unreachable_seen |= e->mode == FIN_UNREACHABLE;
    }
    lf_mark_finish();
    size_t n = first;
    for (size_t q = first; q < fz.len; q++) {
        size_t slot = fz.queue[q].mode;
        struct fin_entry *e = (struct fin_entry *)slot_key(t, slot);
        if (unreachable_seen && GC_java_finalization && e->mode == FIN_UNREACHABLE &&
            lf_mark_is_set(fz.queue[q].obj))
            continue;                   /* stays registered */
        fz.queue[q].mode = e->mode;
        fz.queue[n++] = fz.queue[q];
        table_delete(t, slot);
    }
    fz.len = n;
    fz.queued_now = n - first;
    for (size_t q = first; q < fz.len; q++)
        fz.queued_bytes += GC_size(fz.queue[q].obj);
    /* Ready objects are marked: they and all they reach survive until the
     * finalizer has run (what they reach was marked above). */
    for (size_t q = first; q < fz.len; q++)
        lf_mark_set(fz.queue[q].obj);
}

/* With the world stopped, after marking and before the sweep. */
void lf_finalize_after_mark(void)
{
    fz.queued_now = 0;
    fz.queued_bytes = 0;
    fz.registered_since_gc = 0;
    fz.dropped_links = 0;
    fz.cleared[0] = fz.cleared[1] = 0;
    /* Weak toggle references to dead objects go first, as short links. */
    for (size_t i = 0; i < fz.toggles_len; i++)
        if (fz.toggles[i] && !lf_mark_is_set(toggle_obj(fz.toggles[i])))
            fz.toggles[i] = 0;
    if (!fz.fins.used && !fz.links[0].used && !fz.links[1].used) {
        if (fz.disclaim_kinds)
            disclaim_after_mark();
        return;
    }
    links_disappear(0);
    if (fz.fins.used) {
        lf_mark_serial(true);
        finalizers_decide();
        lf_mark_serial(false);
    }
    links_disappear(1);
    links_drop_dangling(0);
    links_drop_dangling(1);
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
    if (fz.queued_now)
        AO_store_release(&lf_finalizers_due, 1);
    table_tidy(&fz.fins);
    table_tidy(&fz.links[0]);
    table_tidy(&fz.links[1]);
    if (fz.cycles)
        lf_warn("GC Warning: finalization cycle involving %p: its objects are never "
                "finalized\n", fz.cycle_example);
    if (lf_print_stats && (fz.fins.used || fz.links[0].used || fz.links[1].used ||
                           fz.queued_now || fz.cleared[0] || fz.cleared[1]))
        fprintf(stderr,
                "lfgc: finalization: %zu finalizers registered, %zu queued, %zu waiting; "
                "links: %zu short (%zu cleared), %zu long (%zu cleared), %zu dropped with "
                "their objects\n",
                fz.fins.used, fz.queued_now, fz.len - fz.head, fz.links[0].used, fz.cleared[0],
                fz.links[1].used, fz.cleared[1], fz.dropped_links);
}

/* For the policy.  What a collection queued was dead: it counts as
 * allocated since.  And while finalizable objects are made faster than
 * one per bytes_per_finalizer allocated (and some were finalized last
 * time), the heap should not grow before a collection: as in bdwgc, a
 * program that finalizes most of what it allocates keeps a small heap. */
uint64_t lf_finalize_queued_bytes(void)
{
    return fz.queued_bytes;
}

bool lf_finalize_wants_collection(uint64_t allocd)
{
    return fz.registered_since_gc && fz.queued_bytes && fz.bytes_per_finalizer &&
           fz.registered_since_gc * fz.bytes_per_finalizer > allocd;
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
    bool nested = running_finalizers;
    running_finalizers = true;
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
    running_finalizers = nested;
    return count;
}

/* From the allocation and collection paths, lock not held, when some
 * finalizers are due: run them here, or tell the program. */
void lf_finalize_due(void)
{
    if (running_finalizers)
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
        for (size_t i = 0; i < fz.fins.cap && fz.fins.used; i++) {
            struct fin_entry *e = (struct fin_entry *)slot_key(&fz.fins, i);
            if (e->key == KEY_EMPTY || e->key == KEY_GONE || !queue_reserve(1))
                continue;
            fz.queue[fz.len++] = (struct ready){ (void *)e->key, e->fn, e->cd, e->mode };
            table_delete(&fz.fins, i);
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

LFGC_EXPORT void GC_set_finalizer_notifier(GC_finalizer_notifier_proc fn)
{
    lf_ensure_init();
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
    lf_ensure_init();
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
