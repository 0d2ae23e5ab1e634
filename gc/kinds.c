/* kinds.c: the table of object kinds, and bdwgc's interface to make them.
 *
 * A kind says how the marker scans an object (not at all, every word, a
 * prefix given by a length descriptor, the words a bitmap or a descriptor
 * kept in the object names; mark procedures have their place in the table
 * and wait for the runtimes' interface), whether objects are zeroed when
 * allocated, and
 * whether they are ever reclaimed.  The chunk map names a span's kind in
 * a byte, so up to MAX_KINDS (255) kinds exist; the first four are
 * bdwgc's predefined ones.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"


/* The predefined kinds' per-class state; later kinds' is mapped when they
 * are made (never scanned). */
LF_UNSCANNED_BSS struct class_kind lf_predefined_ck[NUM_PREDEFINED_KINDS][NUM_CLASSES];
/* The manual kinds' (malloc.c). */
static LF_UNSCANNED_BSS struct class_kind malloc_ck[3][NUM_CLASSES];

/* Zeros in the file's place (12 KiB of data the first read of any
 * variable mapped whole): the predefined kinds are filled in by
 * lf_kinds_init, before anything can allocate. */
LF_UNSCANNED_BSS struct kind lf_kinds[MAX_KINDS];

/* Field by field, in a function the compiler neither inlines nor
 * specialises: initialisers became constants in .rodata, which a
 * malloc-only process must not read (LF_MALLOC_RODATA). */
LF_MALLOC_TEXT static __attribute__((noipa)) void kind_predefine(unsigned k, uint8_t ptrfree,
                                                                uint8_t uncollectable,
                                                                uint8_t manual,
                                                                struct class_kind *ck)
{
    struct kind *d = &lf_kinds[k];
    d->in_use = 1;
    d->ptrfree = ptrfree;
    d->uncollectable = uncollectable;
    d->clear = !ptrfree;
    d->scan = ptrfree ? SCAN_NONE : SCAN_CONSERVATIVE;
    d->manual = manual;
    d->ck = ck;
}

LF_MALLOC_TEXT void lf_kinds_init(void)
{
    kind_predefine(KIND_PTRFREE, 1, 0, 0, lf_predefined_ck[KIND_PTRFREE]);
    kind_predefine(KIND_NORMAL, 0, 0, 0, lf_predefined_ck[KIND_NORMAL]);
    kind_predefine(KIND_UNCOLLECTABLE, 0, 1, 0, lf_predefined_ck[KIND_UNCOLLECTABLE]);
    kind_predefine(KIND_AUNCOLLECTABLE, 1, 1, 0, lf_predefined_ck[KIND_AUNCOLLECTABLE]);
    for (unsigned k = KIND_FIRST_MANUAL; k <= KIND_MALLOC; k++)
        kind_predefine(k, 1, 0, 1, malloc_ck[k - KIND_FIRST_MANUAL]);
}
LF_UNSCANNED_DATA uint8_t lf_kind_mark[MAX_KINDS + 1] = {
    [1 + KIND_PTRFREE] = MARK_NO_SCAN,
    [1 + KIND_AUNCOLLECTABLE] = MARK_NO_SCAN,
    [1 + KIND_MALLOC_LARGE] = MARK_NO_SCAN,
    [1 + KIND_MALLOC_HARD] = MARK_NO_SCAN,
    [1 + KIND_MALLOC] = MARK_NO_SCAN,
};
static LF_UNSCANNED_DATA unsigned num_kinds = NUM_PREDEFINED_KINDS;     /* lock held to change */
LF_UNSCANNED bool lf_kinds_rescan_minor;

LF_MALLOC_TEXT unsigned lf_kinds_made(void)
{
    return __atomic_load_n(&num_kinds, __ATOMIC_ACQUIRE);
}

/* Kinds whose objects are scanned whole, word by word, take the marker's
 * plain path; every other scanned kind is looked up when its objects are
 * popped (a kind that is not cleared, because its free slots keep what
 * they held and must not be scanned). */
static uint8_t kind_mark_action(const struct kind *k)
{
    if (k->scan == SCAN_NONE)
        return MARK_NO_SCAN;
    if (k->scan == SCAN_CONSERVATIVE && k->clear)
        return 0;
    return MARK_DISPATCH_TAG;
}

int lf_kind_new(enum scan_mode scan, uintptr_t descr, void *proc, uintptr_t env,
                bool clear, bool uncollectable)
{
    return lf_kind_new_sized(scan, descr, false, proc, env, clear, uncollectable);
}

/* The work of lf_kind_new_sized; the lock held by the caller. */
static int kind_new_locked(enum scan_mode scan, uintptr_t descr, bool add_size, void *proc,
                           uintptr_t env, bool clear, bool uncollectable, struct class_kind *ck)
{
    if (num_kinds >= KIND_FIRST_MANUAL)
        return -1;
    unsigned k = num_kinds;
    struct kind *kd = &lf_kinds[k];
    kd->scan = (uint8_t)scan;
    kd->ptrfree = scan == SCAN_NONE;
    /* A long bitmap reads nothing outside the object. */
    kd->rescan_minor = scan == SCAN_PROC && !descr_long_bitmap(descr);
    if (kd->rescan_minor && !uncollectable)
        __atomic_store_n(&lf_kinds_rescan_minor, true, __ATOMIC_RELAXED);
    kd->clear = clear;
    kd->uncollectable = uncollectable;
    kd->descr = descr;
    kd->add_size = add_size;
    kd->proc = proc;
    kd->env = env;
    kd->ck = ck;
    lf_kind_mark[k + 1] = kind_mark_action(kd);
    kd->in_use = 1;
    __atomic_store_n(&num_kinds, k + 1, __ATOMIC_RELEASE);
    return (int)k;
}

/* Whether the calling thread holds lfgc's lock (glibc records the owner
 * of every mutex type): bdwgc's _inner calls expect the caller to hold
 * it, but a single-threaded program may call them without. */
static bool lock_held_by_self(void)
{
    return __atomic_load_n(&lf_gc_lock.__data.__owner, __ATOMIC_RELAXED) == gettid();
}

static int kind_new(enum scan_mode scan, uintptr_t descr, bool add_size, void *proc,
                    uintptr_t env, bool clear, bool uncollectable, bool maybe_locked)
{
    size_t bytes = NUM_CLASSES * sizeof(struct class_kind);
    struct class_kind *ck = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ck == MAP_FAILED)
        return -1;
    bool locked = maybe_locked && lock_held_by_self();
    if (!locked)
        lock();
    int k = kind_new_locked(scan, descr, add_size, proc, env, clear, uncollectable, ck);
    if (!locked)
        unlock();
    if (k < 0)
        munmap(ck, bytes);
    return k;
}

int lf_kind_new_sized(enum scan_mode scan, uintptr_t descr, bool add_size, void *proc,
                      uintptr_t env, bool clear, bool uncollectable)
{
    return kind_new(scan, descr, add_size, proc, env, clear, uncollectable, false);
}

bool lf_kind_valid(unsigned kind)
{
    return kind < lf_kinds_made();
}

/* ------------------------------------------------------------------ */
/* Mark procedures                                                     */

LF_UNSCANNED_BSS GC_mark_proc lf_mark_procs[GC_MAX_MARK_PROCS];
static LF_UNSCANNED_DATA unsigned num_procs = GC_RESERVED_MARK_PROCS;     /* lock held */

bool lf_mark_proc_set(unsigned i, GC_mark_proc proc)
{
    lock();
    /* num_procs starts past the reserved indices. */
    bool ok = i < num_procs && i != LF_TYPED_PROC_INDEX;
    if (ok && proc)
        __atomic_store_n(&lf_mark_procs[i], proc, __ATOMIC_RELEASE);
    unlock();
    return ok;
}

static unsigned new_proc(GC_mark_proc proc, bool maybe_locked)
{
    if (!proc)
        lf_abort("lfgc: GC_new_proc: NULL mark procedure");
    bool locked = maybe_locked && lock_held_by_self();
    if (!locked)
        lf_ensure_init();
    if (!locked)
        lock();
    unsigned i = num_procs;
    if (i < GC_MAX_MARK_PROCS) {
        num_procs++;
        __atomic_store_n(&lf_mark_procs[i], proc, __ATOMIC_RELEASE);
    }
    if (!locked)
        unlock();
    if (i >= GC_MAX_MARK_PROCS)
        lf_abort("lfgc: GC_new_proc: too many mark procedures (64, as in bdwgc)");
    return i;
}

LFGC_EXPORT unsigned GC_new_proc(GC_mark_proc proc)
{
    return new_proc(proc, false);
}

LFGC_EXPORT unsigned GC_new_proc_inner(GC_mark_proc proc)
{
    return new_proc(proc, true);
}

/* ------------------------------------------------------------------ */
/* bdwgc's interface to kinds (gc_mark.h, gc_inline.h)                 */

/* Entries bdwgc's gc_inline.h would index (granules 0..256); lfgc keeps
 * its lists per thread, so the array only stays NULL. */
#define BDWGC_FREE_LIST_ENTRIES 257

/* Never collected, never scanned (it stays NULL).  From mmap: the _inner
 * form may be called with the lock held, which allocation takes. */
static void **new_free_list(void)
{
    refused_check();
    void *fl = mmap(NULL, BDWGC_FREE_LIST_ENTRIES * sizeof(void *), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return fl == MAP_FAILED ? NULL : fl;
}

LFGC_EXPORT void **GC_new_free_list(void)
{
    return new_free_list();
}

LFGC_EXPORT void **GC_new_free_list_inner(void)
{
    return new_free_list();
}

/* Through the program's abort function (GC_set_abort_func), as bdwgc's
 * ABORT is. */
static __attribute__((noreturn)) void kind_refused(const char *why, GC_word descr)
{
    char msg[256];
    snprintf(msg, sizeof msg, "lfgc: GC_new_kind(descriptor %#lx): %s", (unsigned long)descr,
             why);
    lf_abort(msg);
}

static unsigned new_kind(GC_word descr, int add_size, int clear, bool maybe_locked)
{
    if (!maybe_locked || !lock_held_by_self())
        lf_ensure_init();
    enum scan_mode scan;
    switch (descr & GC_DS_TAGS) {
    case GC_DS_LENGTH:
        if (add_size)
            /* bdwgc's normal kind (0): the length is the object's own. */
            scan = descr == 0 ? SCAN_CONSERVATIVE : SCAN_LENGTH;
        else
            scan = descr == 0 ? SCAN_NONE : SCAN_LENGTH;
        break;
    case GC_DS_BITMAP:
        if (add_size)
            kind_refused("a bitmap cannot have the object size added", descr);
        scan = SCAN_BITMAP;
        break;
    case GC_DS_PER_OBJECT:
        scan = SCAN_PER_OBJECT;
        break;
    default:                                /* GC_DS_PROC */
        if (add_size)
            kind_refused("a mark procedure's descriptor cannot have the size added", descr);
        /* GC_make_descriptor's long layouts are accepted, as bdwgc's
         * (procedure descriptors there too) are. */
        if (!descr_long_bitmap(descr) &&
            !__atomic_load_n(&lf_mark_procs[descr_proc_index(descr)], __ATOMIC_ACQUIRE))
            kind_refused("no mark procedure has that index (GC_new_proc), nor is it a "
                         "GC_make_descriptor result", descr);
        scan = SCAN_PROC;
        break;
    }
    int k = kind_new(scan, descr, add_size != 0, NULL, 0, clear != 0, false, maybe_locked);
    if (k < 0)
        kind_refused("too many kinds", descr);
    return (unsigned)k;
}

LFGC_EXPORT unsigned GC_new_kind(void **free_list, GC_word descr, int add_size, int clear)
{
    (void)free_list;
    return new_kind(descr, add_size, clear, false);
}

LFGC_EXPORT unsigned GC_new_kind_inner(void **free_list, GC_word descr, int add_size, int clear)
{
    (void)free_list;
    return new_kind(descr, add_size, clear, true);
}

static bool kind_ok(int kind, const char *call)
{
    if (likely(kind >= 0 && lf_kind_valid((unsigned)kind)))
        return true;
    lf_warn(call, (uintptr_t)kind);
    return false;
}

LFGC_EXPORT void *GC_generic_malloc(size_t bytes, int kind)
{
    if (!kind_ok(kind, "GC Warning: GC_generic_malloc: no kind %p; returning NULL\n"))
        return NULL;
    return lf_alloc_kind(bytes, (unsigned)kind);
}

/* Interior pointers cost nothing here: the hint changes nothing. */
LFGC_EXPORT void *GC_generic_malloc_ignore_off_page(size_t bytes, int kind)
{
    if (!kind_ok(kind, "GC Warning: GC_generic_malloc_ignore_off_page: no kind %p; "
                       "returning NULL\n"))
        return NULL;
    return lf_alloc_kind(bytes, (unsigned)kind);
}

LFGC_EXPORT void *GC_malloc_kind(size_t bytes, int kind)
{
    if (!kind_ok(kind, "GC Warning: GC_malloc_kind: no kind %p; returning NULL\n"))
        return NULL;
    return lf_alloc_kind(bytes, (unsigned)kind);
}

/* bdwgc's form that bypasses its thread-local lists: lfgc's are as good. */
LFGC_EXPORT void *GC_malloc_kind_global(size_t bytes, int kind)
{
    if (!kind_ok(kind, "GC Warning: GC_malloc_kind_global: no kind %p; returning NULL\n"))
        return NULL;
    return lf_alloc_kind(bytes, (unsigned)kind);
}

static LF_UNSCANNED pthread_mutex_t twin_lock = PTHREAD_MUTEX_INITIALIZER;

int lf_kind_twin(unsigned kind, uint8_t *twin, bool uncollectable, void (*made)(unsigned k))
{
    unsigned t = __atomic_load_n(twin, __ATOMIC_ACQUIRE);
    if (likely(t))
        return (int)t - 1;
    pthread_mutex_lock(&twin_lock);
    t = *twin;
    if (!t) {
        const struct kind *kd = &lf_kinds[kind];
        int k = lf_kind_new_sized((enum scan_mode)kd->scan, kd->descr, kd->add_size, kd->proc,
                                  kd->env, true, uncollectable);
        if (k >= 0) {
            lf_kinds[k].fixed_layout = kd->fixed_layout;
            if (made)
                made((unsigned)k);
            t = (unsigned)k + 1;
            __atomic_store_n(twin, (uint8_t)t, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&twin_lock);
    return (int)t - 1;
}

/* Uncollectability is a property of the kind here (a span holds one
 * kind): each collectable kind gets an uncollectable twin, scanned the
 * same way and cleared, as bdwgc clears uncollectable objects. */
static LF_UNSCANNED_DATA uint8_t uncollectable_twin[MAX_KINDS] = {
    [KIND_PTRFREE] = KIND_AUNCOLLECTABLE + 1,
    [KIND_NORMAL] = KIND_UNCOLLECTABLE + 1,
};

static int twin_of(unsigned kind)
{
    if (lf_kinds[kind].uncollectable)
        return (int)kind;
    return lf_kind_twin(kind, &uncollectable_twin[kind], true, NULL);
}

LFGC_EXPORT void *GC_generic_malloc_uncollectable(size_t bytes, int kind)
{
    if (!kind_ok(kind, "GC Warning: GC_generic_malloc_uncollectable: no kind %p; "
                       "returning NULL\n"))
        return NULL;
    lf_ensure_init();
    int t = twin_of((unsigned)kind);
    if (t < 0) {
        lf_warn("GC Warning: GC_generic_malloc_uncollectable: too many kinds for the "
                "uncollectable form of kind %p; returning NULL\n", (uintptr_t)kind);
        return NULL;
    }
    return lf_alloc_kind(bytes, (unsigned)t);
}

/* The kind GC_get_kind_and_size reported is the object's own, uncollectable
 * ones included: allocating it again gives the same kind of object. */
LFGC_EXPORT void *GC_generic_or_special_malloc(size_t bytes, int kind)
{
    if (!kind_ok(kind, "GC Warning: GC_generic_or_special_malloc: no kind %p; "
                       "returning NULL\n"))
        return NULL;
    return lf_alloc_kind(bytes, (unsigned)kind);
}

LFGC_EXPORT void *GC_debug_generic_or_special_malloc(size_t bytes, int kind, const char *s,
                                                     int i)
{
    (void)s;
    (void)i;
    return GC_generic_or_special_malloc(bytes, kind);
}

LFGC_EXPORT int GC_get_kind_and_size(const void *p, size_t *psize)
{
    void *base = lf_base(p);
    unsigned k = base ? lf_chunk_map[chunk_entry((uintptr_t)base)] : 0;
    if (!k) {
        lf_warn("GC Warning: GC_get_kind_and_size: %p is not in lfgc's heap\n", (uintptr_t)p);
        if (psize)
            *psize = 0;
        return -1;
    }
    if (psize)
        *psize = GC_size(base);
    return (int)k - 1;
}

/* What GC_print_backtrace says of each object's type, as bdwgc's does. */
static LF_UNSCANNED_BSS GC_describe_type_fn describe_type[MAX_KINDS];

void lf_describe_type(void *base, char *buf)
{
    unsigned k = lf_chunk_map[chunk_entry((uintptr_t)base)];
    GC_describe_type_fn fn = k ? __atomic_load_n(&describe_type[k - 1], __ATOMIC_ACQUIRE) : NULL;
    /* Only an object the last collection marked: a free one (on a free
     * list) has no type to describe. */
    if (fn && GC_is_marked(base)) {
        buf[GC_TYPE_DESCR_LEN] = 0;
        fn(base, buf);
        buf[GC_TYPE_DESCR_LEN] = 0;
        return;
    }
    static const char *const names[NUM_PREDEFINED_KINDS] = {
        [KIND_PTRFREE] = "PTRFREE",
        [KIND_NORMAL] = "NORMAL",
        [KIND_UNCOLLECTABLE] = "UNCOLLECTABLE",
        [KIND_AUNCOLLECTABLE] = "ATOMIC_UNCOLLECTABLE",
    };
    if (k && k - 1 < NUM_PREDEFINED_KINDS)
        snprintf(buf, GC_TYPE_DESCR_LEN + 1, "%s", names[k - 1]);
    else
        snprintf(buf, GC_TYPE_DESCR_LEN + 1, "kind %u", k ? k - 1 : 0);
}

LFGC_EXPORT void GC_register_describe_type_fn(int kind, GC_describe_type_fn fn)
{
    if (kind < 0 || kind >= MAX_KINDS) {
        lf_warn("GC Warning: GC_register_describe_type_fn: no kind %p\n", (uintptr_t)kind);
        return;
    }
    __atomic_store_n(&describe_type[kind], fn, __ATOMIC_RELEASE);
}
