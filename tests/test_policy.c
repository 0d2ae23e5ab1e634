/* test_policy.c: when lfgc collects, grows the heap or passes room on.
 *
 * Each test runs in its own process (Criterion's default).
 *
 * The tests:
 *   pooled_room_passes_between_classes   spans a collection emptied in one
 *                                        class make room for another, with
 *                                        no collection and no growth
 */
#include "test_util.h"      /* first: it defines _GNU_SOURCE */

#include <unistd.h>

/* No warm-up (test_util.h): the tests need the heap of a fresh process,
 * and check reclamation with aggregate figures only. */
TestSuite(policy);

/* Resident set size of this process, in bytes. */
static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    unsigned long size = 0, resident = 0;
    cr_assert_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* ------------------------------------------------------------------ */
/* Pooled room passes from class to class                              */

/* A: garbage of one class (pointer-free, 2 KiB slots), enough to leave
 * its spans pooled, mapped and idle, after a collection.  B: live nodes
 * of another class (1 KiB slots), more than the heap's expanded size has
 * room for besides A's pooled spans. */
#define PR_A_SIZE   2000
#define PR_A_BYTES  (5 * MiB)
#define PR_EXPAND   (6 * MiB)
#define PR_B_SIZE   1000
#define PR_B_NODES  4096            /* 4 MiB of 1 KiB slots */

struct pr_node {
    struct pr_node *next;
    uint64_t seed;
    unsigned char bytes[PR_B_SIZE - 16];
};

static struct pr_node *volatile pr_list;

/* A's garbage. */
static TU_NOINLINE void pr_garbage(void)
{
    for (size_t done = 0; done < PR_A_BYTES; done += 2048) {
        char *p = GC_malloc_atomic(PR_A_SIZE);
        cr_assert_not_null(p);
        memset(p, 0xa5, PR_A_SIZE);
    }
}

static TU_NOINLINE void pr_build(void)
{
    for (uint64_t i = 0; i < PR_B_NODES; i++) {
        struct pr_node *n = GC_malloc(sizeof *n);
        cr_assert_not_null(n);
        n->seed = i;
        tu_fill_bytes(n->bytes, sizeof n->bytes, i);
        n->next = pr_list;
        pr_list = n;
    }
}

/* Nodes intact (PR_B_NODES of them, each with its bytes), or the count
 * of good ones before the first bad one. */
static TU_NOINLINE size_t pr_check(void)
{
    size_t good = 0;
    uint64_t want = PR_B_NODES;
    for (struct pr_node *n = pr_list; n; n = n->next) {
        want--;
        if (n->seed != want || tu_check_bytes(n->bytes, sizeof n->bytes, want) != sizeof n->bytes)
            return good;
        good++;
    }
    return good;
}

/* The spans a collection finds empty stay mapped in their class's pool
 * for a while, so that the class reuses them without page faults.  When
 * another class needs room past the heap's expanded size, that pooled
 * memory is free space: it is given back and the other class takes its
 * place, with no collection and no growth.  (Before, the heap grew for it
 * or collected, and a program whose allocation moves from class to
 * class, as bdwgc's gctest does, saw its heap grow with the sum of every
 * class's peak.) */
Test(policy, pooled_room_passes_between_classes, .timeout = 30)
{
    GC_INIT();
    cr_assert(GC_expand_hp(PR_EXPAND));
    GC_word gc0 = GC_get_gc_no();
    pr_garbage();
    cr_assert_eq(GC_get_gc_no(), gc0, "setup: A's allocation collected");
    tu_collect();
    size_t unmapped = GC_get_unmapped_bytes(), rss = rss_bytes();
    GC_word gc1 = GC_get_gc_no();

    pr_build();
    GC_word during = GC_get_gc_no() - gc1;
    size_t unmapped_after = GC_get_unmapped_bytes(), rss_after = rss_bytes();
    cr_assert_eq(during, 0, "%lu collections while pooled room was there",
                 (unsigned long)during);
    /* A's garbage reclaimed: its pages given back as B needed room. */
    cr_assert_geq(unmapped_after, unmapped + 2 * MiB,
                  "A's pooled spans were not given back (%zu -> %zu KiB unmapped)",
                  unmapped >> 10, unmapped_after >> 10);
    cr_assert_lt(rss_after, rss + 3 * MiB, "RSS grew by %zu KiB for B's 4 MiB",
                 (rss_after - rss) >> 10);
    cr_assert_eq(pr_check(), PR_B_NODES, "B's list is damaged at node %zu", pr_check());
    tu_collect();
    cr_assert_eq(pr_check(), PR_B_NODES, "B's list is damaged at node %zu", pr_check());
}
