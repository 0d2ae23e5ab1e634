/* test_release.c: how a collection gives pages back to the OS.
 *
 * On a virtual machine each madvise(MADV_DONTNEED) is costly whatever its
 * length (it ends in a TLB flush, and under shadow paging in exits to
 * the hypervisor): Guile's workload spent 6% of its run in lfgc's 600
 * calls, a span or a large object each.  The pages a collection gives
 * back now go in one process_madvise, a vector of ranges.  This program
 * counts the calls by defining madvise and syscall (release_count.h).
 *
 * The tests:
 *   idle_spans_of_many_classes_go_back_in_one_call
 *                                spans left empty for two collections,
 *                                in eight classes: their pages go back
 *                                at once, the live data intact
 *   large_objects_found_dead_go_back_in_one_call
 *                                64 large objects that a collection
 *                                finds dead: one call, not 64
 *   refused_batches_still_give_pages_back
 *                                with process_madvise refused (a seccomp
 *                                filter), the ranges go by madvise, and
 *                                the refused call is not tried again
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */
#include "release_count.h"

/* No warm-up: fresh processes, and no object's address is looked for. */
TestSuite(release);

#define RL_CLASSES 8
static const size_t rl_sizes[RL_CLASSES] = { 16, 32, 64, 96, 128, 256, 512, 1024 };
#define RL_BYTES_PER_CLASS (2 * MiB)
#define RL_LIVE_NODES 20000
#define RL_SEED 0x5eedu

/* Pages of [p, p + n) the process holds. */
static size_t rl_resident(uintptr_t p, size_t n)
{
    uintptr_t lo = p & ~(uintptr_t)4095, hi = (p + n + 4095) & ~(uintptr_t)4095;
    unsigned char vec[(hi - lo) / 4096];
    cr_assert_eq(mincore((void *)lo, hi - lo, vec), 0);
    size_t k = 0;
    for (size_t i = 0; i < (hi - lo) / 4096; i++)
        k += vec[i] & 1;
    return k;
}

/* Garbage in each class, written so that its pages are resident; the
 * first object of each 64 KiB of it, hidden, in `probe`. */
#define RL_PROBES (RL_BYTES_PER_CLASS / (64 * KiB))
static GC_hidden_pointer rl_probe[RL_CLASSES][RL_PROBES];

static TU_NOINLINE void rl_garbage(void)
{
    for (unsigned c = 0; c < RL_CLASSES; c++) {
        size_t n = RL_BYTES_PER_CLASS / rl_sizes[c], every = 64 * KiB / rl_sizes[c];
        for (size_t i = 0; i < n; i++) {
            char *p = GC_MALLOC_ATOMIC(rl_sizes[c]);
            cr_assert_not_null(p);
            memset(p, 0xa5, rl_sizes[c]);
            if (i % every == 0 && i / every < RL_PROBES)
                rl_probe[c][i / every] = tu_hide(p);
        }
    }
}

/* Resident pages of the probed objects' 64 KiB stretches. */
static TU_NOINLINE size_t rl_probes_resident(void)
{
    size_t k = 0;
    for (unsigned c = 0; c < RL_CLASSES; c++)
        for (size_t i = 0; i < RL_PROBES; i++)
            if (rl_probe[c][i])
                k += rl_resident((uintptr_t)GC_REVEAL_POINTER(rl_probe[c][i]), 64 * KiB - 4096);
    return k;
}

Test(release, idle_spans_of_many_classes_go_back_in_one_call, .timeout = 60)
{
    if (!rc_batches_work())
        TU_SKIP("this kernel has no process_madvise(PIDFD_SELF, MADV_DONTNEED) (Linux 6.14): "
                "each range is given back by a madvise of its own");
    GC_INIT();
    static struct tu_node *volatile live;
    live = tu_list_build(RL_SEED, RL_LIVE_NODES);
    cr_assert_not_null(live);
    GC_disable();               /* no collection reuses the garbage's spans */
    rl_garbage();
    GC_enable();
    size_t before = rl_probes_resident();
    cr_assert_gt(before, RL_CLASSES * RL_PROBES * 8, "setup: only %zu garbage pages resident",
                 before);
    /* The first collection empties the spans, the next ones find them
     * idle; the pages go at the second. */
    rc_start();
    for (int i = 0; i < 3; i++)
        tu_collect();
    rc_stop();
    size_t after = rl_probes_resident();
    long calls = atomic_load(&rc_calls), bytes = atomic_load(&rc_bytes);
    cr_log_info("%zu of %zu probed garbage pages resident after; %ld calls gave back %ld KiB",
                after, before, calls, bytes >> 10);
    cr_assert_leq(after, before / 16, "%zu of %zu garbage pages still resident", after, before);
    cr_assert_geq(bytes, (long)(RL_CLASSES * RL_BYTES_PER_CLASS / 2),
                  "only %ld KiB given back", bytes >> 10);
    /* One call for the idle spans of eight classes (two, should they
     * straddle the collections); before, a call per run of spans of each
     * class: 8 at least. */
    cr_assert_leq(calls, 3, "%ld calls to give back %ld KiB in %d classes", calls, bytes >> 10,
                  RL_CLASSES);
    cr_assert_eq(tu_list_check(live, RL_SEED, RL_LIVE_NODES), 0,
                 "the live list is damaged at node %zu",
                 tu_list_check(live, RL_SEED, RL_LIVE_NODES));
    /* The pages given back are reused, zeroed. */
    for (unsigned c = 0; c < RL_CLASSES; c++)
        for (size_t i = 0; i < RL_BYTES_PER_CLASS / rl_sizes[c]; i += 7) {
            unsigned char *p = GC_MALLOC(rl_sizes[c]);
            cr_assert_not_null(p);
            cr_assert_eq(tu_first_nonzero(p, rl_sizes[c]), rl_sizes[c],
                         "a new object of %zu bytes holds old data", rl_sizes[c]);
        }
    tu_collect();
    cr_assert_eq(tu_list_check(live, RL_SEED, RL_LIVE_NODES), 0,
                 "the live list is damaged at node %zu",
                 tu_list_check(live, RL_SEED, RL_LIVE_NODES));
}

#define RL_LARGE 64
#define RL_LARGE_SIZE (64 * KiB)
static GC_hidden_pointer rl_large[RL_LARGE];

static TU_NOINLINE void rl_large_garbage(void)
{
    for (int i = 0; i < RL_LARGE; i++) {
        char *p = GC_MALLOC_ATOMIC(RL_LARGE_SIZE);
        cr_assert_not_null(p);
        memset(p, 0x5a, RL_LARGE_SIZE);
        rl_large[i] = tu_hide(p);
    }
}

static TU_NOINLINE size_t rl_large_resident(void)
{
    size_t k = 0;
    for (int i = 0; i < RL_LARGE; i++)
        k += rl_resident((uintptr_t)GC_REVEAL_POINTER(rl_large[i]), RL_LARGE_SIZE);
    return k;
}

/* Gives the large garbage back in one collection; returns the calls. */
static TU_NOINLINE long rl_large_collected(struct tu_node *volatile *live)
{
    *live = tu_list_build(RL_SEED, RL_LIVE_NODES);
    cr_assert_not_null(*live);
    GC_disable();
    rl_large_garbage();
    GC_enable();
    size_t before = rl_large_resident();
    cr_assert_geq(before, RL_LARGE * RL_LARGE_SIZE / 4096, "setup: %zu pages resident", before);
    rc_start();
    tu_collect();
    rc_stop();
    size_t after = rl_large_resident();
    long calls = atomic_load(&rc_calls), bytes = atomic_load(&rc_bytes);
    cr_log_info("large garbage: %zu of %zu pages resident after; %ld calls gave back %ld KiB",
                after, before, calls, bytes >> 10);
    cr_assert_eq(after, 0, "%zu pages of %d dead large objects still resident", after, RL_LARGE);
    cr_assert_geq(bytes, (long)(RL_LARGE * RL_LARGE_SIZE), "only %ld KiB given back",
                  bytes >> 10);
    cr_assert_eq(tu_list_check(*live, RL_SEED, RL_LIVE_NODES), 0,
                 "the live list is damaged at node %zu",
                 tu_list_check(*live, RL_SEED, RL_LIVE_NODES));
    return calls;
}

Test(release, large_objects_found_dead_go_back_in_one_call, .timeout = 60)
{
    if (!rc_batches_work())
        TU_SKIP("this kernel has no process_madvise(PIDFD_SELF, MADV_DONTNEED) (Linux 6.14): "
                "each range is given back by a madvise of its own");
    GC_INIT();
    static struct tu_node *volatile live;
    long calls = rl_large_collected(&live);
    cr_assert_leq(calls, 2, "%ld calls to give back %d dead large objects", calls, RL_LARGE);
}

Test(release, refused_batches_still_give_pages_back, .timeout = 60)
{
    rc_refuse_batches();
    cr_assert(!rc_batches_work(), "setup: the filter did not refuse process_madvise");
    GC_INIT();
    static struct tu_node *volatile live;
    long calls = rl_large_collected(&live);
    /* Refused once, process_madvise is not tried again. */
    long tried = atomic_load(&rc_batched_calls);
    cr_assert_leq(tried, 1, "process_madvise tried %ld times (of %ld calls) after a refusal",
                  tried, calls);
}
