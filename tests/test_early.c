/* test_early.c: allocation before lfgc's constructor has run.
 *
 * The program's preinit functions run before the constructors of every
 * shared object, lfgc's among them: the first allocation must reserve
 * the layout itself. */
#include "test_util.h"

static void *early;
static size_t early_size;

static void allocate_early(int argc, char **argv, char **envp)
{
    (void)argc;
    (void)argv;
    (void)envp;
    early = GC_malloc(100);
    if (early) {
        memset(early, 0x3c, 100);
        early_size = GC_size(early);
    }
}

__attribute__((section(".preinit_array"), used))
static void (*const preinit_early)(int, char **, char **) = allocate_early;

Test(early, allocation_before_the_constructor)
{
    cr_assert_not_null(early, "GC_malloc before lfgc's constructor returned NULL");
    cr_assert_geq(early_size, 100);
    cr_assert(lfgc_is_live(early));
    for (int i = 0; i < 100; i++)
        cr_assert_eq(((unsigned char *)early)[i], 0x3c);
    /* The heap works as usual afterwards. */
    tu_collect();
    cr_assert(lfgc_is_live(early), "the early object is rooted in .bss");
    void *p = GC_malloc(1 << 20);
    cr_assert_not_null(p);
}
