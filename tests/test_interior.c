/* test_interior.c: GC_all_interior_pointers off, as bdwgc honours it.
 *
 * With interior pointers off, a word in static data or in a heap object
 * keeps an object only when it points at the object's base or at a
 * displacement registered with GC_register_displacement; a word of a
 * stack or of saved registers keeps it from anywhere inside, as in bdwgc.
 * Criterion runs every test in a process of its own, so each test sets
 * the mode before the collector starts. */
#include "test_util.h"
#include "gc_mark.h"
#include "gc_disclaim.h"

#include <signal.h>

#define OBJ 128

/* Roots in this program's data: checked as static data. */
static void *volatile roots[8];

static TU_NOINLINE GC_hidden_pointer leaf(uint64_t seed)
{
    char *p = GC_malloc_atomic(OBJ);
    cr_assert_not_null(p);
    tu_fill_bytes(p, OBJ, seed);
    return tu_hide(p);
}

static TU_NOINLINE int intact(GC_hidden_pointer h, uint64_t seed)
{
    return tu_check_bytes(GC_REVEAL_POINTER(h), OBJ, seed) == OBJ;
}

struct objs {
    GC_hidden_pointer base, inner, reg_after, reg_before, holder, heap_inner, heap_reg;
};

/* Objects held by words at various offsets, from static data and from a
 * heap object; collections are off until every object is rooted. */
static TU_NOINLINE void build(struct objs *o)
{
    GC_disable();
    o->base = leaf(1);
    o->inner = leaf(2);
    o->reg_after = leaf(3);
    o->reg_before = leaf(4);
    o->heap_inner = leaf(5);
    o->heap_reg = leaf(6);
    void **holder = GC_malloc(4 * sizeof(void *));
    cr_assert_not_null(holder);
    o->holder = tu_hide(holder);
    tu_store(&roots[0], o->base, 0);
    tu_store(&roots[1], o->inner, 8);          /* no displacement 8     */
    tu_store(&roots[2], o->reg_after, 24);     /* registered after init */
    tu_store(&roots[3], o->reg_before, 16);    /* registered before     */
    tu_store(&roots[4], o->holder, 0);
    tu_store((void *volatile *)&holder[0], o->heap_inner, 40);
    tu_store((void *volatile *)&holder[1], o->heap_reg, 24);
    holder = NULL;
    GC_enable();
}

static void check_only_bases_and_displacements_retain(void)
{
    tu_warm_up();
    GC_REGISTER_DISPLACEMENT(24);
    struct objs o;
    build(&o);
    tu_collect();
    cr_assert(tu_live(o.base) && intact(o.base, 1), "an object held by its base was lost");
    cr_assert(tu_live(o.reg_after) && intact(o.reg_after, 3),
              "an object held at a displacement registered after GC_INIT was lost");
    cr_assert(tu_live(o.reg_before) && intact(o.reg_before, 4),
              "an object held at a displacement registered before GC_INIT was lost");
    cr_assert(tu_live(o.heap_reg) && intact(o.heap_reg, 6),
              "an object held from the heap at a registered displacement was lost");
    cr_assert(tu_live(o.holder));
    cr_assert(!tu_live(o.inner), "an interior pointer in static data kept its object");
    cr_assert(!tu_live(o.heap_inner), "an interior pointer in a heap object kept its object");
    cr_assert(tu_slot_is(&roots[2], o.reg_after, 24));
}

Test(interior_off, data_symbol_only_bases_and_displacements_retain)
{
    cr_assert(!GC_is_init_called());
    GC_all_interior_pointers = 0;
    GC_register_displacement(16);
    GC_INIT();
    cr_assert_eq(GC_get_all_interior_pointers(), 0);
    check_only_bases_and_displacements_retain();
}

Test(interior_off, setter_only_bases_and_displacements_retain)
{
    GC_set_all_interior_pointers(0);
    GC_register_displacement(16);
    GC_INIT();
    check_only_bases_and_displacements_retain();
}

/* The same program with interior pointers on (the default): every
 * offset keeps its object. */
Test(interior_on, every_offset_retains)
{
    tu_warm_up();
    struct objs o;
    build(&o);
    tu_collect();
    cr_assert(tu_live(o.inner) && intact(o.inner, 2));
    cr_assert(tu_live(o.heap_inner) && intact(o.heap_inner, 5));
    cr_assert(tu_live(o.base) && tu_live(o.reg_after) && tu_live(o.heap_reg));
}

/* The interior pointer, never at the object's base, returned in a
 * register and kept in the caller's frame. */
static TU_NOINLINE char *interior_of(GC_hidden_pointer h)
{
    return (char *)GC_REVEAL_POINTER(h) + 56;
}

Test(interior_off, stack_interior_pointer_retains)
{
    GC_set_all_interior_pointers(0);
    tu_warm_up();
    GC_disable();
    GC_hidden_pointer kept = leaf(7), dropped = leaf(8);
    char *volatile inside = interior_of(kept);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(kept) && intact(kept, 7),
              "an interior pointer on the stack did not keep its object");
    cr_assert(!tu_live(dropped), "an unreferenced object was retained");
    cr_assert_eq((unsigned char)inside[-56], tu_byte(7, 0));
}

/* Objects of a program's own kind check offsets too. */
Test(interior_off, program_kinds_check_offsets)
{
    GC_set_all_interior_pointers(0);
    tu_warm_up();
    int k = (int)GC_new_kind(GC_new_free_list(), 0 | GC_DS_LENGTH, 1, 1);
    GC_disable();
    void *a = GC_generic_malloc(OBJ, k), *b = GC_generic_malloc(OBJ, k);
    cr_assert(a && b);
    GC_hidden_pointer ha = tu_hide(a), hb = tu_hide(b);
    a = b = NULL;
    tu_store(&roots[5], ha, 0);
    tu_store(&roots[6], hb, 32);
    GC_enable();
    tu_collect();
    cr_assert(tu_live(ha), "a program kind's object held by its base was lost");
    cr_assert(!tu_live(hb), "an interior pointer kept a program kind's object");
}

static int displacement_failures;
static void displacement_fail(void *p) { (void)p; displacement_failures++; }

Test(interior_off, is_valid_displacement_checks_offsets)
{
    GC_set_all_interior_pointers(0);
    GC_INIT();
    GC_is_valid_displacement_print_proc = displacement_fail;
    GC_register_displacement(8);
    char *p = GC_malloc(64);
    GC_is_valid_displacement(p);
    GC_is_valid_displacement(p + 8);
    cr_assert_eq(displacement_failures, 0);
    GC_is_valid_displacement(p + 16);
    cr_assert_eq(displacement_failures, 1, "an unregistered displacement passed");
    static int outside;
    GC_is_valid_displacement(&outside);
    cr_assert_eq(displacement_failures, 1);
}

Test(interior_on, is_valid_displacement_takes_any_offset)
{
    GC_INIT();
    GC_is_valid_displacement_print_proc = displacement_fail;
    char *p = GC_malloc(64);
    GC_is_valid_displacement(p + 16);
    cr_assert_eq(displacement_failures, 0);
}

/* bdwgc aborts on a displacement past its table (a block). */
Test(interior_off, displacement_too_large_aborts, .signal = SIGABRT)
{
    GC_set_all_interior_pointers(0);
    GC_INIT();
    GC_register_displacement(1 << 20);
}

/* Interior pointers off: an uncollectable object is a root like static
 * data (offsets checked), and finalization decides by the same rule. */
static int finalized;
static void count_finalized(void *obj, void *cd)
{
    (void)obj;
    (void)cd;
    finalized++;
}

static TU_NOINLINE GC_hidden_pointer finalizable(void)
{
    void *p = GC_malloc(OBJ);
    cr_assert_not_null(p);
    GC_register_finalizer(p, count_finalized, NULL, NULL, NULL);
    return tu_hide(p);
}

Test(interior_off, uncollectable_holders_and_finalizers)
{
    GC_set_all_interior_pointers(0);
    tu_warm_up();
    GC_disable();
    void **u = GC_malloc_uncollectable(4 * sizeof(void *));
    cr_assert_not_null(u);
    GC_hidden_pointer hu = tu_hide(u);
    u = NULL;
    GC_hidden_pointer kept = leaf(11), dropped = leaf(12);
    GC_hidden_pointer fin_kept = finalizable(), fin_dropped = finalizable();
    void **slots = GC_REVEAL_POINTER(hu);
    tu_store((void *volatile *)&slots[0], kept, 0);
    tu_store((void *volatile *)&slots[1], dropped, 8);
    tu_store((void *volatile *)&slots[2], fin_kept, 0);
    tu_store((void *volatile *)&slots[3], fin_dropped, 8);
    slots = NULL;
    GC_enable();
    tu_collect();
    GC_invoke_finalizers();
    tu_collect();
    GC_invoke_finalizers();
    cr_assert(tu_live(kept) && intact(kept, 11), "an uncollectable object's base pointer lost");
    cr_assert(!tu_live(dropped), "an interior pointer from an uncollectable object kept");
    cr_assert(tu_live(fin_kept), "a finalizable object held by its base was lost");
    cr_assert_eq(finalized, 1, "finalizers run: %d, expected the one held at offset 8",
                 finalized);
    cr_assert(!tu_live(fin_dropped));
    GC_free(GC_REVEAL_POINTER(hu));
}

/* GC_finalized_malloc's objects with interior pointers off: the program
 * holds each one word past its base, and each holds its closure through a
 * word tagged with bit 0.  Both offsets must retain (bdwgc registers them
 * as displacements), else a held object is disclaimed and its closure
 * reclaimed. */
static _Atomic int fin_runs, fin_bad;

static void fin_proc(void *obj, void *cd)
{
    if (tu_check_bytes(obj, OBJ, (uint64_t)(uintptr_t)cd) != OBJ)
        fin_bad++;
    fin_runs++;
}

static TU_NOINLINE GC_hidden_pointer new_finalized(uint64_t seed, GC_hidden_pointer *closure)
{
    struct GC_finalizer_closure *fc = GC_MALLOC_ATOMIC(sizeof *fc);
    cr_assert_not_null(fc);
    fc->proc = fin_proc;
    fc->cd = (void *)(uintptr_t)seed;
    void *p = GC_finalized_malloc(OBJ, fc);
    cr_assert_not_null(p);
    tu_fill_bytes(p, OBJ, seed);
    *closure = tu_hide(fc);
    return tu_hide(p);
}

Test(interior_off, finalized_malloc_objects_and_closures_retained)
{
    GC_set_all_interior_pointers(0);
    tu_warm_up();
    GC_init_finalized_malloc();
    GC_disable();
    GC_hidden_pointer kept_fc, dead_fc;
    GC_hidden_pointer kept = new_finalized(21, &kept_fc);
    GC_hidden_pointer dead = new_finalized(22, &dead_fc);
    tu_store(&roots[7], kept, 0);
    GC_enable();
    tu_collect();
    cr_assert_eq(fin_runs, 1, "%d closures ran, expected only the unreachable object's",
                 (int)fin_runs);
    cr_assert_eq(fin_bad, 0, "a closure saw a damaged object");
    cr_assert(tu_live(kept) && intact(kept, 21),
              "a finalized object held by its pointer was lost");
    cr_assert(tu_live(kept_fc), "the closure of a live finalized object was reclaimed");
    cr_assert_not(tu_live(dead), "an unreachable finalized object was not reclaimed");
    roots[7] = NULL;
    tu_collect();
    cr_assert_eq(fin_runs, 2, "the dropped object's closure did not run");
    cr_assert_eq(fin_bad, 0, "a closure saw a damaged object");
    cr_assert_not(tu_live(kept));
    tu_collect();
    cr_assert_not(tu_live(kept_fc), "a closure outlived its object");
    cr_assert_not(tu_live(dead_fc), "a closure outlived its object");
}
