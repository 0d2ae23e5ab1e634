/* meta.c: hidden metadata (meta.h) at work.
 *
 * Allocates records of three types with meta_malloc, then walks a list of
 * pointers into the middle of them (a field's address, an array element's)
 * and recovers, from each interior pointer alone, the type, the size asked
 * for and the allocation site, and checks exact bounds.  Exits 0 when
 * every lookup is right.
 */
#include "meta.h"
#include <stdio.h>
#include <string.h>

enum { T_POINT = 1, T_NAME = 2, T_SAMPLES = 3 };

struct point { double x, y, z; };

#define SITE __FILE__ ":" META_STR(__LINE__)
#define META_STR(x) META_STR_(x)
#define META_STR_(x) #x

int main(void)
{
    struct point *pt = meta_malloc(sizeof *pt, T_POINT, SITE);
    char *name = meta_malloc(20, T_NAME, SITE);
    int *samples = meta_malloc(1000 * sizeof(int), T_SAMPLES, SITE);
    if (!pt || !name || !samples || !lowfat_is_heap_ptr(pt)) {
        fprintf(stderr, "meta: malloc did not return a low-fat pointer: "
                "link lfgc's malloc\n");
        return 1;
    }
    strcpy(name, "hidden metadata");
    struct { const void *p; uint32_t type; size_t size; } probe[] = {
        {&pt->z, T_POINT, sizeof *pt},
        {name + 7, T_NAME, 20},
        {&samples[999], T_SAMPLES, 1000 * sizeof(int)},
        {&samples[123], T_SAMPLES, 1000 * sizeof(int)},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        struct meta *m = meta_of(probe[i].p);
        int right = m && m->type == probe[i].type && m->size == probe[i].size;
        printf("%p: type %u, %llu bytes, allocated at %s%s\n", probe[i].p,
               m ? m->type : 0, m ? (unsigned long long)m->size : 0ULL,
               m ? m->site : "?", right ? "" : "  WRONG");
        ok &= right;
    }
    /* Exact bounds from an interior pointer: the last int fits, one more
     * does not, although the slot has room for it. */
    ok &= meta_in_bounds(&samples[999], sizeof(int));
    ok &= !meta_in_bounds(&samples[999], 2 * sizeof(int));
    ok &= meta_of(&ok) == NULL;            /* not a heap pointer */
    meta_free(&pt->y);                     /* any pointer into it frees */
    meta_free(name + 3);
    meta_free(samples + 500);
    printf("%s\n", ok ? "all lookups right" : "FAILED");
    return ok ? 0 : 1;
}
