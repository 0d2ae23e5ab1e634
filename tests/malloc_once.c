/* malloc_once.c: a program that mallocs once and prints its peak RSS
 * (VmHWM, KiB) less the C library's and the loader's resident files.  test_malloc runs it with and without liblfgc-malloc
 * preloaded: the difference is lfgc's fixed cost per process.  Linked
 * with nothing but the C library.
 *
 *   malloc_once pages PERMS
 *
 * instead runs what a malloc-only program does (every allocation call,
 * a thread that allocates and exits, a fork), then prints, for each of
 * liblfgc.so's mappings with permissions PERMS (r-xp: the code; r--p:
 * the headers and symbols, the constants, the relocated data made
 * read-only), a line "M file-offset start end", then one line "P address"
 * for each of its resident pages (from /proc/self/pagemap).
 *
 *   malloc_once fds
 *
 * makes every allocation call, then prints the descriptors open beyond
 * the standard three, "fd target" a line. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *allocate_all_ways(void *arg)
{
    (void)arg;
    for (size_t n = 0; n < 70000; n = n * 2 + 1) {
        char *p = malloc(n), *q = calloc(1, n), *r = NULL;
        void *a = NULL;
        if (!p || !q || posix_memalign(&a, 64, n) != 0)
            abort();
        r = realloc(p, n * 3 + 1);
        memset(r, 1, n * 3 + 1);
        free(r);
        free(q);
        free(a);
    }
    return NULL;
}

static int print_pages(const char *want)
{
    allocate_all_ways(NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, allocate_all_ways, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        allocate_all_ways(NULL);
        _exit(0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
        return 1;
    FILE *maps = fopen("/proc/self/maps", "r");
    int pagemap = open("/proc/self/pagemap", O_RDONLY);
    if (!maps || pagemap < 0)
        return 1;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi, offset;
        char perms[8];
        if (!strstr(line, "/liblfgc.so") ||
            sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &offset) != 4 ||
            strcmp(perms, want) != 0)
            continue;
        found = 1;
        printf("M %lx %lx %lx\n", offset, lo, hi);
        for (unsigned long a = lo; a < hi; a += 4096) {
            uint64_t entry;
            if (pread(pagemap, &entry, sizeof entry, (off_t)(a / 4096 * 8)) != sizeof entry)
                return 1;
            if (entry >> 63)
                printf("P %lx\n", a);
        }
    }
    fclose(maps);
    close(pagemap);
    return found ? 0 : 1;
}

/* Resident KiB of the C library's and the loader's files.  How much of
 * them a process maps depends on the page cache (the kernel maps the
 * cached pages around each fault), which moves their share from run to
 * run and machine to machine: the peak is reported without them.  They
 * are never unmapped, so their share at exit is their share at the peak. */
static long c_library_kb(void)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    long total = 0, rss;
    int counted = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            counted = strstr(line, "/libc.so.6") || strstr(line, "/ld-linux-x86-64.so.2");
        else if (counted && sscanf(line, "Rss: %ld kB", &rss) == 1)
            total += rss;
    }
    if (f)
        fclose(f);
    return total;
}

/* After every allocation call: the descriptors open that are not the
 * standard ones, one per line ("fd target"). */
static int print_descriptors(void)
{
    allocate_all_ways(NULL);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 1;
    int own = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 2 || fd == own)
            continue;
        char path[64], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = 0;
        printf("%d %s\n", fd, target);
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "pages") == 0)
        return print_pages(argv[2]);
    if (argc > 1 && strcmp(argv[1], "fds") == 0)
        return print_descriptors();
    char *volatile p = malloc(100);
    if (!p)
        return 1;
    memset(p, 1, 100);
    free(p);
    c_library_kb();             /* the code that counts is resident from here */
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    printf("%ld\n", kb > 0 ? kb - c_library_kb() : -1);
    return kb > 0 ? 0 : 1;
}
