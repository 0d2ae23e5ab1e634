/* malloc_once.c: a program that mallocs once and prints its peak RSS
 * (VmHWM, KiB).  test_malloc runs it with and without liblfgc-malloc
 * preloaded: the difference is lfgc's fixed cost per process.  Linked
 * with nothing but the C library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char *volatile p = malloc(100);
    if (!p)
        return 1;
    memset(p, 1, 100);
    free(p);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    printf("%ld\n", kb);
    return kb > 0 ? 0 : 1;
}
