/* bdwgc_client.c: a program written for bdwgc, compiled against Debian's
 * <gc.h> and linked with -lgc (tests/dropin.sh builds it).  Run on bdwgc and
 * on lfgc's libgc.so.1, it must print the same thing on stdout; stderr says
 * which collector it ran on.
 *
 * It writes bdwgc's data symbols before GC_INIT, as programs do: through
 * copy relocations in this executable, which the library must read.
 * Built a second time with -DGC_DEBUG: the macros then call bdwgc's
 * debugging allocator (GC_debug_malloc, GC_debug_register_finalizer). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gc.h>

struct node {
    struct node *next;
    unsigned long value;
};

static int finalized;

static void count_finalizer(void *obj, void *cd)
{
    (void)obj;
    (void)cd;
    finalized++;
}

static struct node *build(int n)
{
    struct node *head = NULL;
    for (int i = 0; i < n; i++) {
        struct node *p = GC_NEW(struct node);
        p->value = (unsigned long)i * 2654435761u;
        p->next = head;
        head = p;
    }
    return head;
}

static unsigned long checksum(const struct node *p)
{
    unsigned long sum = 0;
    for (; p; p = p->next)
        sum = sum * 31 + p->value;
    return sum;
}

/* Garbage, in a frame of its own so that no pointer to it stays behind. */
static void __attribute__((noinline)) make_garbage(int rounds)
{
    for (int i = 0; i < rounds; i++) {
        char *p = GC_MALLOC(1000);
        memset(p, 1, 1000);
    }
}

static void __attribute__((noinline)) make_finalizable(int n)
{
    for (int i = 0; i < n; i++)
        GC_REGISTER_FINALIZER(GC_MALLOC(64), count_finalizer, NULL, NULL, NULL);
}

static void __attribute__((noinline)) wipe_stack(void)
{
    volatile char buf[16384];
    memset((char *)buf, 0, sizeof buf);
}

int main(void)
{
    /* Written before GC_INIT, read by it. */
    GC_all_interior_pointers = 0;
    GC_dont_gc = 1;
    GC_INIT();

    /* Without interior pointers an object gets no extra byte: a 16-byte
     * request fits a 16-byte object in both collectors. */
#ifndef GC_DEBUG
    /* (Under GC_DEBUG bdwgc's objects carry a header: sizes differ.) */
    printf("GC_size(GC_MALLOC(16)) = %lu\n", (unsigned long)GC_size(GC_MALLOC(16)));
#endif
    printf("GC_get_all_interior_pointers() = %d\n", GC_get_all_interior_pointers());

    make_garbage(20000);     /* 20 MB, while collection is off */
    printf("collections while GC_dont_gc was set: %lu\n", (unsigned long)GC_gc_no);
    GC_enable();
    printf("GC_is_disabled() after GC_enable: %d\n", GC_is_disabled());

    struct node *list = build(10000);
    unsigned long before = checksum(list);
    make_finalizable(100);
    wipe_stack();
    for (int i = 0; i < 3; i++) {
        make_garbage(20000);
        GC_gcollect();
        GC_invoke_finalizers();
    }
    printf("collected since GC_enable: %s\n", GC_gc_no > 0 ? "yes" : "no");
    printf("list checksum intact: %s\n", checksum(list) == before ? "yes" : "no");
    printf("most finalizers ran: %s\n", finalized >= 50 ? "yes" : "no");
    printf("heap below 64 MiB: %s\n", GC_get_heap_size() < (64u << 20) ? "yes" : "no");

    /* Which collector this was: stderr, so that stdout compares equal. */
    fprintf(stderr, "collector: %s\n", dlsym(RTLD_DEFAULT, "lfgc_get_stats") ? "lfgc" : "bdwgc");
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096], last[4096] = "";
    while (maps && fgets(line, sizeof line, maps)) {
        const char *path = strchr(line, '/');
        if (path && (strstr(path, "libgc.so") || strstr(path, "liblfgc.so")) &&
            strcmp(path, last) != 0) {
            fprintf(stderr, "maps: %s", path);
            snprintf(last, sizeof last, "%s", path);
        }
    }
    if (maps)
        fclose(maps);
    return 0;
}
