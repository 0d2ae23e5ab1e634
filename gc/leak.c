/* leak.c: bdwgc's leak-finding mode (GC_find_leak, GC_FIND_LEAK).
 *
 * The program frees its memory itself (leak_detector.h turns malloc and
 * free into the collector's calls); collections run as usual and report
 * every object they find unreachable: a leak, allocated and never freed.
 * As in bdwgc, each is reported once and then reclaimed (bdwgc frees it
 * after printing), and a last collection at exit reports what is left.
 *
 * Once marking is done (world stopped) every unmarked slot of the
 * collectable kinds that is not free is a leak: its address, size and
 * kind go to a buffer, and its second word gets a stamp (the free-slot
 * canary, changed) so that the next collection, should the lazy sweep
 * not have reached the slot by then, does not report it again.  The
 * sweep reclaims it like any dead object, and reuse clears the stamp.
 * The report is printed after the world restarts.  Collections are all
 * full in this mode (dirty.c): a minor one would keep the marks of old
 * objects that died.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

struct leak {
    void *base;
    uint64_t bytes;
    unsigned kind;
};

/* The leaks of the current collection, in memory of their own (mmap:
 * the marker never sees it and it costs nothing until used). */
static LF_UNSCANNED struct leak *leaks;
static LF_UNSCANNED size_t leaks_cap, leaks_n, leaks_lost;

static inline uint64_t leak_stamp(void)
{
    return lf_free_canary ^ 0x6c65616b6c65616bull;     /* "leakleak" */
}

static void leak_add(void *base, uint64_t bytes, unsigned kind)
{
    if (!lf_array_reserve((void **)&leaks, &leaks_cap, leaks_n, sizeof *leaks, 4096)) {
        leaks_lost++;
        return;
    }
    leaks[leaks_n++] = (struct leak){ base, bytes, kind };
}

/* World stopped, marks final (finalization included). */
static void leak_after_mark(void)
{
    if (!GC_find_leak)
        return;
    leaks_n = leaks_lost = 0;
    for_each_span_in_use(it) {
        struct region *r = it.r;
        const struct kind *kd = &lf_kinds[it.s->kind];
        /* Objects of disclaim kinds die through their procedure, which
         * reads them: neither reported nor stamped. */
        if (kd->manual || kd->uncollectable || lf_disclaim_tracked[it.s->kind])
            continue;
        uint64_t qa, qb;
        lf_span_slots(r, it.j, &qa, &qb);
        for (uint64_t q = qa; q < qb; q++) {
            if (bit_get(r->mark_bits, q - r->q0))
                continue;
            uint64_t *slot = (uint64_t *)(q * r->size);
            if (r->large) {
                /* Dead large objects go back at once: no stamp needed. */
                leak_add(slot, it.s->obj_bytes, it.s->kind);
                continue;
            }
            if (slot_is_free(slot) || slot[1] == leak_stamp())
                continue;
            leak_add(slot, r->size, it.s->kind);
            slot[1] = leak_stamp();
        }
    }
}

void lf_leak_never_allocated(const struct region *r, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to; i++)
        ((uint64_t *)((i + r->q0) * r->size))[1] = leak_stamp();
}

/* World restarted, lock held: the report, on stderr as bdwgc's. */
static void leak_after_restart(void)
{
    if (!GC_find_leak || (leaks_n == 0 && leaks_lost == 0))
        return;
    char line[160];
    int n = snprintf(line, sizeof line, "Found %zu leaked objects:\n", leaks_n + leaks_lost);
    ssize_t w = write(2, line, (size_t)n);
    for (size_t i = 0; i < leaks_n && w >= 0; i++) {
        const struct leak *l = &leaks[i];
        n = snprintf(line, sizeof line, "Leaked %s object at %p, %llu bytes (kind %u)\n",
                     lf_kinds[l->kind].ptrfree ? "atomic" : "composite", l->base,
                     (unsigned long long)l->bytes, l->kind);
        w = write(2, line, (size_t)n);
    }
    if (leaks_lost) {
        n = snprintf(line, sizeof line, "(%zu more: no memory to list them)\n", leaks_lost);
        w = write(2, line, (size_t)n);
    }
    (void)w;
    leaks_n = leaks_lost = 0;
}

static void leak_at_exit(void)
{
    if (GC_find_leak)
        GC_gcollect();
}

static LF_UNSCANNED bool exit_check_set;

/* Lock held, or at initialisation: a last collection at exit reports the
 * leaks left, as bdwgc's does. */
static void leak_exit_check(void)
{
    if (!exit_check_set) {
        exit_check_set = true;
        atexit(leak_at_exit);
    }
}

LF_MALLOC_TEXT void lf_leak_init(void)
{
    lf_hook_add(LF_HOOK_AFTER_MARK, leak_after_mark);
    lf_hook_add(LF_HOOK_AFTER_RESTART, leak_after_restart);
}

/* When collection turns on: GC_FIND_LEAK is read then, as bdwgc's GC_init
 * reads it. */
void lf_leak_collection_on(void)
{
    if (getenv("GC_FIND_LEAK"))
        GC_find_leak = 1;
    if (GC_find_leak)
        leak_exit_check();
}

LFGC_EXPORT LF_UNSCANNED int GC_find_leak;

LFGC_EXPORT int GC_get_find_leak(void)
{
    return GC_find_leak;
}

LFGC_EXPORT void GC_set_find_leak(int v)
{
    GC_find_leak = v;
    if (v && lf_gc_initialized)
        leak_exit_check();
}
