/* root_helper.c: a tiny shared library for tests/test_retention.c.
 *
 * Its writable data segment holds pointers set by the test: an object
 * referenced only from here must survive collections (lfgc scans the data
 * of every loaded shared object, found afresh at each collection, so a
 * library loaded with dlopen is covered too).
 */
#include <stddef.h>

/* In .bss. */
void *root_helper_bss_slot;
/* In .data (initialised, so not in .bss). */
void *root_helper_data_slot = (void *)&root_helper_bss_slot;

void root_helper_set(int which, void *p)
{
    if (which == 0)
        root_helper_bss_slot = p;
    else
        root_helper_data_slot = p;
}

void *root_helper_get(int which)
{
    return which == 0 ? root_helper_bss_slot : root_helper_data_slot;
}
