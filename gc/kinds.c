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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"


/* The predefined kinds' per-class state; later kinds' is mapped when they
 * are made (never scanned). */
LF_UNSCANNED struct class_kind lf_predefined_ck[NUM_PREDEFINED_KINDS][NUM_CLASSES];
/* The manual kinds' (malloc.c). */
static LF_UNSCANNED struct class_kind malloc_ck[3][NUM_CLASSES];

LF_UNSCANNED struct kind lf_kinds[MAX_KINDS] = {
    [KIND_PTRFREE]        = { .in_use = 1, .ptrfree = 1, .scan = SCAN_NONE,
                              .ck = lf_predefined_ck[KIND_PTRFREE] },
    [KIND_NORMAL]         = { .in_use = 1, .clear = 1, .scan = SCAN_CONSERVATIVE,
                              .ck = lf_predefined_ck[KIND_NORMAL] },
    [KIND_UNCOLLECTABLE]  = { .in_use = 1, .uncollectable = 1, .clear = 1,
                              .scan = SCAN_CONSERVATIVE,
                              .ck = lf_predefined_ck[KIND_UNCOLLECTABLE] },
    [KIND_AUNCOLLECTABLE] = { .in_use = 1, .uncollectable = 1, .ptrfree = 1,
                              .scan = SCAN_NONE,
                              .ck = lf_predefined_ck[KIND_AUNCOLLECTABLE] },
#define MANUAL_KIND(k) [k] = { .in_use = 1, .ptrfree = 1, .manual = 1, .scan = SCAN_NONE, \
                               .ck = malloc_ck[(k) - KIND_FIRST_MANUAL] }
    MANUAL_KIND(KIND_MALLOC_LARGE),
    MANUAL_KIND(KIND_MALLOC_HARD),
    MANUAL_KIND(KIND_MALLOC),
};
LF_UNSCANNED uint8_t lf_kind_mark[MAX_KINDS + 1] = {
    [1 + KIND_PTRFREE] = MARK_NO_SCAN,
    [1 + KIND_AUNCOLLECTABLE] = MARK_NO_SCAN,
    [1 + KIND_MALLOC_LARGE] = MARK_NO_SCAN,
    [1 + KIND_MALLOC_HARD] = MARK_NO_SCAN,
    [1 + KIND_MALLOC] = MARK_NO_SCAN,
};
static LF_UNSCANNED unsigned num_kinds = NUM_PREDEFINED_KINDS;     /* lock held to change */

unsigned lf_kinds_made(void)
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

int lf_kind_new_sized(enum scan_mode scan, uintptr_t descr, bool add_size, void *proc,
                      uintptr_t env, bool clear, bool uncollectable)
{
    /* Mark procedures come with the runtimes' interface: the marker does
     * not call them yet. */
    if (scan == SCAN_PROC)
        return -1;
    size_t bytes = NUM_CLASSES * sizeof(struct class_kind);
    struct class_kind *ck = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ck == MAP_FAILED)
        return -1;
    lock();
    if (num_kinds >= KIND_FIRST_MANUAL) {
        unlock();
        munmap(ck, bytes);
        return -1;
    }
    unsigned k = num_kinds;
    struct kind *kd = &lf_kinds[k];
    kd->scan = (uint8_t)scan;
    kd->ptrfree = scan == SCAN_NONE;
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
    unlock();
    return (int)k;
}

bool lf_kind_valid(unsigned kind)
{
    return kind < lf_kinds_made();
}

/* ------------------------------------------------------------------ */
/* bdwgc's interface (gc_mark.h), for the scan modes implemented        */

/* Entries bdwgc's gc_inline.h would index (granules 0..256); lfgc keeps
 * its lists per thread, so the array only stays NULL. */
#define BDWGC_FREE_LIST_ENTRIES 257

LFGC_EXPORT void **GC_new_free_list(void)
{
    refused_check();            /* the allocation would be the other copy's */
    void **fl = GC_malloc_atomic_uncollectable(BDWGC_FREE_LIST_ENTRIES * sizeof(void *));
    if (fl)
        memset(fl, 0, BDWGC_FREE_LIST_ENTRIES * sizeof(void *));
    return fl;
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

LFGC_EXPORT unsigned GC_new_kind(void **free_list, GC_word descr, int add_size, int clear)
{
    (void)free_list;
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
    default:
        kind_refused("mark procedures (GC_DS_PROC) are not supported so far", descr);
    }
    int k = lf_kind_new_sized(scan, descr, add_size != 0, NULL, 0, clear != 0, false);
    if (k < 0)
        kind_refused("too many kinds", descr);
    return (unsigned)k;
}

LFGC_EXPORT void *GC_generic_malloc(size_t bytes, int kind)
{
    if (kind < 0 || !lf_kind_valid((unsigned)kind)) {
        lf_warn("GC Warning: GC_generic_malloc: no kind %p; returning NULL\n",
                (uintptr_t)kind);
        return NULL;
    }
    return lf_alloc_kind(bytes, (unsigned)kind);
}
