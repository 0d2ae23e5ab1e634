/* test_backptr.c: gc_backptr.h (why an object is reachable), installed
 * also as <gc/gc_backptr.h>. */
#define GC_THREADS 1
#include "test_util.h"
#include <semaphore.h>
#include <gc/gc_backptr.h>
#include <gc/gc_mark.h>

TestSuite(backptr, .init = tu_warm_up);

static void *volatile root_slot;
static void *volatile holder_root;

static TU_NOINLINE GC_hidden_pointer new_obj(size_t n)
{
    void *p = GC_malloc(n);
    cr_assert_not_null(p);
    return tu_hide(p);
}

static TU_NOINLINE GC_ref_kind info(GC_hidden_pointer h, size_t offset, void **base,
                                    size_t *off)
{
    return GC_get_back_ptr_info((char *)GC_REVEAL_POINTER(h) + offset, base, off);
}

static TU_NOINLINE int is(void *p, GC_hidden_pointer h)
{
    return p == GC_REVEAL_POINTER(h);
}

Test(backptr, roots_heap_objects_and_garbage)
{
    GC_disable();
    GC_hidden_pointer a = new_obj(64), b = new_obj(64), holder = new_obj(64), dead = new_obj(64);
    tu_store(&root_slot, a, 8);                       /* static data, interior */
    tu_store(&holder_root, holder, 0);
    void **h = GC_REVEAL_POINTER(holder);
    tu_store((void *volatile *)&h[2], b, 0);          /* offset 16 of holder */
    h = NULL;
    GC_enable();
    tu_collect();

    void *base = (void *)1;
    size_t off = 99;
    cr_assert_eq(info(a, 0, &base, &off), GC_REFD_FROM_ROOT);
    cr_assert_eq(base, (void *)&root_slot, "the root reported is not the slot holding it");
    cr_assert_eq(off, 0);
    cr_assert_eq(info(b, 40, &base, &off), GC_REFD_FROM_HEAP, "dest inside b");
    cr_assert(is(base, holder), "the referring object is not the holder");
    cr_assert_eq(off, 16);
    cr_assert_eq(info(holder, 0, &base, &off), GC_REFD_FROM_ROOT);
    cr_assert_eq(base, (void *)&holder_root);
    cr_assert_eq(info(dead, 0, &base, &off), GC_UNREFERENCED);
    cr_assert_null(base);
    static int outside;
    cr_assert_eq(GC_get_back_ptr_info(&outside, &base, &off), GC_NO_SPACE);
    root_slot = holder_root = NULL;
}

/* Held only by a slot of this frame: a root with an address, as bdwgc
 * reports stack words (a register is a root without one). */
Test(backptr, stack_reference_is_reported_as_a_root)
{
    GC_hidden_pointer a = new_obj(64);
    void *volatile on_stack = GC_REVEAL_POINTER(a);
    tu_collect();
    void *base;
    size_t off = 99;
    cr_assert_eq(info(a, 16, &base, &off), GC_REFD_FROM_ROOT);
    cr_assert_eq(base, (void *)&on_stack, "the root reported, %p, is not the stack slot %p",
                 base, (void *)&on_stack);
    cr_assert_eq(off, 0);
    cr_assert_not_null(on_stack);
    /* Dropped from the slot: not reported there (a stale copy elsewhere in
     * the frame may still hold it). */
    on_stack = NULL;
    tu_collect();
    base = NULL;
    GC_ref_kind k = info(a, 0, &base, &off);
    cr_assert(k != GC_REFD_FROM_ROOT || base != (void *)&on_stack,
              "still reported from the slot that no longer holds it");
}

/* Another thread's stack: the slot of its frame is reported. */
static sem_t held, done;
static GC_hidden_pointer other_obj;
static void *volatile *volatile other_slot;

static void *holder_thread(void *arg)
{
    (void)arg;
    void *volatile mine = GC_malloc(64);
    other_obj = tu_hide(mine);
    other_slot = &mine;
    sem_post(&held);
    while (sem_wait(&done) != 0)
        ;
    cr_assert_not_null(mine);
    return NULL;
}

Test(backptr, other_threads_stack_reference_is_reported_as_a_root)
{
    cr_assert_eq(sem_init(&held, 0, 0), 0);
    cr_assert_eq(sem_init(&done, 0, 0), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, holder_thread, NULL), 0);
    while (sem_wait(&held) != 0)
        ;
    tu_collect();               /* stops the thread: its stack is known */
    void *base = NULL;
    size_t off = 99;
    cr_assert_eq(info(other_obj, 0, &base, &off), GC_REFD_FROM_ROOT);
    cr_assert_eq(base, (void *)other_slot, "the root reported is not the thread's slot");
    cr_assert_eq(off, 0);
    sem_post(&done);
    pthread_join(t, NULL);
}

Test(backptr, random_addresses_and_backtraces)
{
    GC_disable();
    GC_hidden_pointer holder = new_obj(64), b = new_obj(64);
    tu_store(&holder_root, holder, 0);
    void **h = GC_REVEAL_POINTER(holder);
    tu_store((void *volatile *)&h[1], b, 0);
    h = NULL;
    GC_enable();
    tu_collect();
    for (int i = 0; i < 100; i++) {
        void *p = GC_generate_random_heap_address();
        cr_assert(lowfat_is_heap_ptr(p), "%p is not in the heap", p);
        void *v = GC_generate_random_valid_address();
        cr_assert_not_null(v);
        cr_assert_eq(lfgc_slot_state(v), LFGC_SLOT_ALLOCATED, "%p is not in an object in use", v);
    }
    char path[] = "/tmp/lfgc-bt-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    GC_set_log_fd(fd);
    GC_print_backtrace((char *)GC_REVEAL_POINTER(b) + 8);
    GC_generate_random_backtrace();
    GC_set_log_fd(2);
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
    char expect[64];
    snprintf(expect, sizeof expect, "referenced from offset 8 of %p", GC_REVEAL_POINTER(holder));
    cr_assert(strstr(buf, expect), "no step from b to its holder: %s", buf);
    snprintf(expect, sizeof expect, "referenced from the root at %p", (void *)&holder_root);
    cr_assert(strstr(buf, expect), "the chain does not end at the root: %s", buf);
    cr_assert(strstr(buf, "GC_generate_random_backtrace: backtrace of"), "%s", buf);
    holder_root = NULL;
}

/* GC_register_describe_type_fn: GC_print_backtrace names each object's
 * type with its kind's function (a marked object), else its kind. */
static void describe_pair(void *p, char *out)
{
    snprintf(out, GC_TYPE_DESCR_LEN, "pair of %zu bytes", GC_size(p));
}

Test(backptr, backtrace_describes_types)
{
    int k = (int)GC_new_kind(GC_new_free_list(), 0 | GC_DS_LENGTH, 1, 1);
    GC_register_describe_type_fn(k, describe_pair);
    GC_disable();
    GC_hidden_pointer holder = tu_hide(GC_generic_malloc(64, k)), b = new_obj(64);
    tu_store(&holder_root, holder, 0);
    void **h = GC_REVEAL_POINTER(holder);
    tu_store((void *volatile *)&h[1], b, 0);
    h = NULL;
    GC_enable();
    tu_collect();
    char path[] = "/tmp/lfgc-bt-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    GC_set_log_fd(fd);
    GC_print_backtrace(GC_REVEAL_POINTER(b));
    GC_set_log_fd(2);
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
    char expect[128];
    snprintf(expect, sizeof expect, "(object %p, %zu bytes, NORMAL)", GC_REVEAL_POINTER(b),
             GC_size(GC_REVEAL_POINTER(b)));
    cr_assert(strstr(buf, expect), "no \"%s\" in: %s", expect, buf);
    size_t hs = GC_size(GC_REVEAL_POINTER(holder));
    snprintf(expect, sizeof expect, "(object %p, %zu bytes, pair of %zu bytes)",
             GC_REVEAL_POINTER(holder), hs, hs);
    cr_assert(strstr(buf, expect), "no \"%s\" in: %s", expect, buf);
    holder_root = NULL;
}
