/* finalize.c: finalization and weak references under churn.
 *
 *   finalize [millions]         (default 2 million finalizable objects)
 *
 * Each step allocates a 64-byte object with a finalizer (which checks the
 * object's contents and counts), keeps it in a ring of the 4096 latest
 * (so that some survive several collections and most die young), and
 * every fourth step also stores it, hidden, in a 65536-entry weak table
 * whose slots are disappearing links: a slot's old link is unregistered
 * and the new one registered, as a runtime's weak hash table does.  A
 * quarter of the objects point to the previous one, so finalization
 * order matters.  At the end the ring is dropped and everything still
 * registered is collected and finalized.
 *
 * Checks: every finalizer sees an intact object, no object is finalized
 * twice (a flag in it), every weak slot is either cleared or points to an
 * intact live object, and nearly all objects are finalized by the end.
 *
 * Extra RESULT fields: objects, finalized, ns_per_object (loop only),
 * links_cleared.
 */
#include "bench_util.h"

#define RING 4096
#define TABLE 65536

struct obj {
    uint64_t id;
    uint64_t check;             /* ~id                                      */
    struct obj *prev;           /* a quarter point to the one before        */
    uint64_t finalized;         /* set by the finalizer: 1 once            */
    uint64_t pad[4];
};

static long finalized, bad;

static void fin(void *p, void *cd)
{
    struct obj *o = p;
    if (o->check != ~o->id || (uint64_t)(uintptr_t)cd != o->id || o->finalized++)
        bad++;
    if (o->prev && o->prev->check != ~o->prev->id)
        bad++;
    finalized++;
}

static struct obj *volatile ring[RING];
static GC_word table[TABLE];    /* hidden pointers, cleared by the collector */

/* Read a weak slot under the lock, so that it is not cleared meanwhile. */
static void *check_slot(void *arg)
{
    GC_word *slot = arg;
    if (*slot) {
        struct obj *o = GC_REVEAL_POINTER(*slot);
        if (o->check != ~o->id)
            bad++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double millions = argc > 1 ? atof(argv[1]) : 2;
    long count = (long)(millions * 1e6);
    if (count < 1000)
        count = 1000;
    bench_init();

    uint64_t t0 = bench_now_ns();
    struct obj *prev = NULL;
    long registered_links = 0;
    for (long i = 0; i < count; i++) {
        struct obj *o = GC_MALLOC(sizeof *o);
        if (!o) {
            fprintf(stderr, "finalize: out of memory\n");
            return 3;
        }
        o->id = (uint64_t)i;
        o->check = ~(uint64_t)i;
        o->prev = (i & 3) == 0 ? prev : NULL;
        GC_register_finalizer(o, fin, (void *)(uintptr_t)i, NULL, NULL);
        ring[i % RING] = o;
        if ((i & 3) == 1) {
            GC_word *slot = &table[(uint64_t)(i >> 2) % TABLE];
            if (*slot)
                GC_unregister_disappearing_link((void **)slot);
            *slot = GC_HIDE_POINTER(o);
            if (GC_general_register_disappearing_link((void **)slot, o) != GC_SUCCESS)
                bad++;
            registered_links++;
        }
        prev = o;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;

    long cleared = 0;
    for (long s = 0; s < TABLE; s++) {
        GC_call_with_alloc_lock(check_slot, &table[s]);
        cleared += table[s] == 0;
    }
    for (long s = 0; s < RING; s++)
        ring[s] = NULL;
    prev = NULL;
    for (int k = 0; k < 4; k++) {
        GC_gcollect();
        GC_invoke_finalizers();
    }
    int ok = !bad && finalized <= count && finalized >= count - RING;
    if (!ok)
        fprintf(stderr, "finalize: %ld bad, %ld of %ld finalized\n", bad, finalized, count);
    return bench_report("finalize", ok,
                        "objects=%ld finalized=%ld ns_per_object=%.1f links=%ld "
                        "links_cleared=%ld", count, finalized, secs * 1e9 / (double)count,
                        registered_links, cleared);
}
