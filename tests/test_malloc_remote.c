/* test_malloc_remote.c: malloc's objects freed by a thread other than the
 * one that allocated them (manual mode, linked with liblfgc-malloc).
 *
 * Such a slot goes back to the group of threads whose span holds it
 * (docs/design.md, "Remote frees go back to their owners"): the freeing
 * thread does not allocate it again beside its owners' objects, the
 * owners do, and nothing is lost when either thread exits.
 */
#include "test_util.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>

#include "lfgc_malloc.h"

#define CHUNK(p) ((uintptr_t)(p) / TU_CHUNK)

/* ------------------------------------------------------------------ */
/* A remote free goes back to the owner                                 */

struct handoff {
    void *given;            /* allocated by the main thread */
    void *got;              /* the thread's own allocation after freeing it */
};

static void *free_then_allocate(void *arg)
{
    struct handoff *h = arg;
    free(h->given);
    h->got = malloc(8);
    memset(h->got, 0x5a, 8);
    return NULL;
}

/* cache-scratch's pattern: two objects side by side, each freed by
 * another thread, which then allocates one of the same size.  Had the
 * freed slot gone onto the freeing thread's list, that thread would get
 * it back, and the two threads would write into one cache line. */
Test(remote, a_slot_freed_by_another_thread_goes_back_to_its_owner)
{
    struct handoff h[2];
    for (int i = 0; i < 2; i++)
        h[i].given = malloc(8);
    cr_assert_eq(CHUNK(h[0].given), CHUNK(h[1].given), "side by side");
    for (int i = 0; i < 2; i++) {
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, free_then_allocate, &h[i]), 0);
        pthread_join(t, NULL);
        cr_assert_neq(h[i].got, h[i].given, "thread %d allocated again the slot it freed", i);
        cr_assert_neq(CHUNK(h[i].got), CHUNK(h[i].given),
                      "thread %d got %p, in the span of the main thread's %p", i, h[i].got,
                      h[i].given);
    }
    /* Back with their owner: the main thread's allocations of the size
     * find both slots again once its list runs dry. */
    int found = 0;
    enum { MAX = 4096 };
    static void *v[MAX];
    int n = 0;
    while (n < MAX && found < 2) {
        v[n] = malloc(8);
        found += v[n] == h[0].given || v[n] == h[1].given;
        n++;
    }
    cr_assert_eq(found, 2, "the main thread got %d of its 2 slots back in %d allocations", found,
                 n);
    for (int i = 0; i < n; i++)
        free(v[i]);
    for (int i = 0; i < 2; i++)
        free(h[i].got);
}

/* ------------------------------------------------------------------ */
/* Stress: every thread frees another's objects                          */

enum { ST_THREADS = 4, ST_OBJS = 2000, ST_ROUNDS = 400 };
static unsigned char *st_obj[ST_THREADS][ST_OBJS];
static size_t st_size[ST_THREADS][ST_OBJS];
static pthread_barrier_t st_barrier;
static size_t st_arena[ST_ROUNDS];
static size_t st_live_most;         /* bytes requested in one round, at most */
static volatile int st_bad;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static void *stress_thread(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned r = 0; r < ST_ROUNDS; r++) {
        for (unsigned i = 0; i < ST_OBJS; i++) {
            uint64_t h = mix(r * 1000003ull + t * 7919ull + i);
            size_t n = 16 + h % 1500;
            unsigned char *p = malloc(n);
            for (size_t k = 0; k < n; k++)
                p[k] = (unsigned char)(h + k * 13);
            st_obj[t][i] = p;
            st_size[t][i] = n;
        }
        pthread_barrier_wait(&st_barrier);
        /* Check and free the next thread's objects, in reverse order. */
        unsigned o = (t + 1) % ST_THREADS;
        for (unsigned i = ST_OBJS; i-- > 0;) {
            uint64_t h = mix(r * 1000003ull + o * 7919ull + i);
            unsigned char *p = st_obj[o][i];
            for (size_t k = 0; k < st_size[o][i]; k++)
                if (p[k] != (unsigned char)(h + k * 13))
                    st_bad = 1;
            free(p);
        }
        pthread_barrier_wait(&st_barrier);
        if (t == 0) {
            st_arena[r] = mallinfo2().arena;
            size_t live = 0;
            for (unsigned u = 0; u < ST_THREADS; u++)
                for (unsigned i = 0; i < ST_OBJS; i++)
                    live += st_size[u][i];
            if (live > st_live_most)
                st_live_most = live;
        }
        pthread_barrier_wait(&st_barrier);
    }
    return NULL;
}

Test(remote, every_thread_freeing_anothers_objects_keeps_them_intact_and_reuses_them,
     .timeout = 60)
{
    pthread_barrier_init(&st_barrier, NULL, ST_THREADS);
    pthread_t th[ST_THREADS];
    for (unsigned t = 0; t < ST_THREADS; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, stress_thread, (void *)(uintptr_t)t), 0);
    for (unsigned t = 0; t < ST_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&st_barrier);
    cr_assert_not(st_bad, "an object changed between its allocation and its remote free");
    /* Each round allocates about 6 MiB in all: the remote frees of one
     * round serve the next.  The threads free only each other's objects,
     * so none ever trims its lists: a refill that took a class's remote
     * stack whole kept what it did not need for good, and a thread that
     * linked a fresh span's pages left the global list's slots unused.
     * The heap grew for hundreds of rounds (2026-11-28): 12.2 MiB at
     * round 25, 16-18 at round 300, 18.8 at round 1000 (mimalloc's peak
     * RSS: 11 MB).  Now a refill keeps a list's worth of a remote stack
     * and puts the rest back, and fresh pages come after the global
     * list: 11.2-11.9 at round 25, 12.6-13.3 at round 300 (13.6 at
     * 1000).  At round 400, against the bytes requested in a round: 2.35
     * to 2.41 times (release build), 2.27 to 2.51 (UBSan, slower: the
     * hand-overs fall differently); 2.87 to 3.26 before. */
    cr_assert_lt(st_arena[ST_ROUNDS - 1], st_arena[9] + 4 * MiB,
                 "heap grew from %zu (round 10) to %zu bytes (round %d)", st_arena[9],
                 st_arena[ST_ROUNDS - 1], ST_ROUNDS);
    cr_assert_lt(st_arena[ST_ROUNDS - 1], st_live_most * 11 / 4,
                 "heap of %zu bytes after %d rounds, for at most %zu bytes requested in a round",
                 st_arena[ST_ROUNDS - 1], ST_ROUNDS, st_live_most);
}

/* ------------------------------------------------------------------ */
/* Threads that exit                                                     */

enum { EX_OBJS = 1000, EX_ROUNDS = 60, EX_SIZE = 12 };
static void *ex_obj[EX_OBJS];

static void *allocate_all(void *arg)
{
    (void)arg;
    for (int i = 0; i < EX_OBJS; i++) {
        ex_obj[i] = malloc(EX_SIZE);
        memset(ex_obj[i], 1, EX_SIZE);
    }
    return NULL;
}

static void *free_all(void *arg)
{
    (void)arg;
    for (int i = 0; i < EX_OBJS; i++)
        free(ex_obj[i]);
    return NULL;
}

static size_t in_use(void)
{
    return mallinfo2().uordblks;
}

/* A thread frees the main thread's objects and exits: what it gathered
 * for their owner goes back, all of it (EX_OBJS is no multiple of a
 * batch), and the owner reuses it. */
Test(remote, a_thread_that_exits_hands_over_what_it_freed_for_others)
{
    free(malloc(EX_SIZE));
    size_t before = in_use(), arena = mallinfo2().arena;
    for (int r = 0; r < EX_ROUNDS; r++) {
        for (int i = 0; i < EX_OBJS; i++)
            ex_obj[i] = malloc(EX_SIZE);
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, free_all, NULL), 0);
        pthread_join(t, NULL);
    }
    size_t after = in_use();
    cr_assert_lt(after, before + 16 * 1024,
                 "%zu bytes in use before, %zu after %d rounds of remote frees", before, after,
                 EX_ROUNDS);
    cr_assert_lt(mallinfo2().arena, arena + 1 * MiB, "heap grew from %zu to %zu bytes", arena,
                 mallinfo2().arena);
}

/* The other way: threads allocate and exit, the main thread frees what
 * they allocated.  The slots go back to a group no thread is in; the next
 * threads reuse them rather than grow the heap. */
Test(remote, slots_freed_to_threads_that_exited_are_reused)
{
    free(malloc(EX_SIZE));
    size_t arena = mallinfo2().arena;
    for (int r = 0; r < EX_ROUNDS; r++) {
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, allocate_all, NULL), 0);
        pthread_join(t, NULL);
        free_all(NULL);
    }
    /* 60 rounds of 1000 16-byte slots: 1 MiB, had none been reused. */
    cr_assert_lt(mallinfo2().arena, arena + 256 * 1024, "heap grew from %zu to %zu bytes",
                 arena, mallinfo2().arena);
}

/* ------------------------------------------------------------------ */
/* Slots of threads that are gone                                        */

static void *allocate_one(void *arg)
{
    *(void **)arg = malloc(EX_SIZE);
    return NULL;
}

/* A thread allocates an object and exits; the main thread frees it.  No
 * thread is left to take the slot back, so it is the freeing thread's to
 * reuse at once (a server's worker replaced by another that frees what it
 * allocated), not parked on the list of a group nobody takes from. */
Test(remote, a_slot_whose_owners_are_gone_is_reused_by_the_thread_that_frees_it)
{
    for (int round = 0; round < 20; round++) {
        void *p;
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, allocate_one, &p), 0);
        pthread_join(t, NULL);
        free(p);
        void *v[10];
        int found = 0;
        for (int i = 0; i < 10; i++) {
            v[i] = malloc(EX_SIZE);
            found |= v[i] == p;
        }
        for (int i = 0; i < 10; i++)
            free(v[i]);
        cr_assert(found, "round %d: the slot freed after its thread exited was not reused", round);
    }
}

/* ------------------------------------------------------------------ */
/* Threads that leave in the middle of a span taken empty                */

enum { OR_THREADS = 20, OR_SIZE = 448 };
static void *or_obj[OR_THREADS];
static pthread_barrier_t or_barrier;

static void *allocate_one_and_wait(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    or_obj[i] = malloc(OR_SIZE);
    memset(or_obj[i], (int)i + 1, OR_SIZE);
    pthread_barrier_wait(&or_barrier);     /* all alive at once: groups shared */
    return NULL;
}

/* Pages of [lo, hi) that are resident. */
static int resident_in(uintptr_t lo, uintptr_t hi)
{
    unsigned char vec[TU_CHUNK / 4096];
    cr_assert_eq(mincore((void *)lo, hi - lo, vec), 0, "mincore: %s", strerror(errno));
    int n = 0;
    for (size_t i = 0; i < (hi - lo) / 4096; i++)
        n += vec[i] & 1;
    return n;
}

/* Each thread takes a span of the class empty and links its first page
 * or so.  The slots past those were never allocated: they stay untouched
 * when the thread leaves (linking them then would write every page of
 * every such span, for every thread that leaves: 96 pages here), and are
 * all handed out again later, as the spans are carried on by the threads
 * that need a span of the class. */
Test(remote, threads_that_leave_mid_span_touch_no_more_of_it)
{
    pthread_barrier_init(&or_barrier, NULL, OR_THREADS);
    pthread_t t[OR_THREADS];
    for (uintptr_t i = 0; i < OR_THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, allocate_one_and_wait, (void *)i), 0);
    for (int i = 0; i < OR_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&or_barrier);
    uintptr_t chunk[OR_THREADS];
    int chunks = 0, touched = 0;
    size_t free_slots = 0;
    for (int i = 0; i < OR_THREADS; i++) {
        uintptr_t c = (uintptr_t)or_obj[i] & ~(uintptr_t)(TU_CHUNK - 1);
        bool seen = false;
        for (int j = 0; j < chunks; j++)
            seen |= chunk[j] == c;
        if (seen)
            continue;
        chunk[chunks++] = c;
        touched += resident_in(c + 2 * 4096, c + TU_CHUNK);
        free_slots += (c + TU_CHUNK + OR_SIZE - 1) / OR_SIZE - (c + OR_SIZE - 1) / OR_SIZE;
    }
    free_slots -= OR_THREADS;               /* the threads' objects, live */
    cr_assert_eq(touched, 0, "%d pages past the first two of the %d spans the threads left "
                 "are resident", touched, chunks);
    enum { MINE = 4000 };
    static void *mine[MINE];
    size_t in_spans = 0;
    for (int i = 0; i < MINE; i++) {
        mine[i] = malloc(OR_SIZE);
        cr_assert_not_null(mine[i]);
        memset(mine[i], 0xa5, OR_SIZE);
        uintptr_t c = (uintptr_t)mine[i] & ~(uintptr_t)(TU_CHUNK - 1);
        for (int j = 0; j < chunks; j++)
            in_spans += chunk[j] == c;
    }
    cr_assert_eq(in_spans, free_slots, "%zu of the %zu free slots of the spans the threads "
                 "left were handed out again", in_spans, free_slots);
    for (int i = 0; i < OR_THREADS; i++) {
        unsigned char *b = or_obj[i];
        for (int k = 0; k < OR_SIZE; k++)
            cr_assert_eq(b[k], (unsigned char)(i + 1), "thread %d's object damaged", i);
    }
    for (int i = 0; i < MINE; i++)
        free(mine[i]);
    for (int i = 0; i < OR_THREADS; i++)
        free(or_obj[i]);
}
