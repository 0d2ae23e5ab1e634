/* An LD_AUDIT library for test_malloc's malloc_mode::malloc_code_is_grouped.
 *
 * LFGC_CODE_GUARD="FROM TO FD" (FROM and TO in hex, page-aligned offsets
 * from liblfgc.so's load address; FD a descriptor open for writing): when
 * the loader maps liblfgc.so, before its constructors run, those pages of
 * its code lose every permission, and "A from" is written to FD ("E from"
 * if that failed).  The first access to each such page then faults; the
 * handler writes "G offset" (the faulting address less the load address)
 * to FD, gives the page back its permissions and returns, so the program
 * runs to its end and every page it used past the guard is listed.  A
 * child forked by the program inherits the guard and the descriptor.
 *
 * Which code a process runs does not depend on the page cache, unlike
 * which pages of the file end up mapped (fault-around, large folios). */
#define _GNU_SOURCE
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uintptr_t guard_lo, guard_hi, load_base;
static int report_fd = -1;

static void put_hex_line(char tag, uintptr_t v)
{
    char line[24];
    size_t n = 0;
    line[n++] = tag;
    line[n++] = ' ';
    char digits[16];
    size_t k = 0;
    do {
        digits[k++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    while (k)
        line[n++] = digits[--k];
    line[n++] = '\n';
    ssize_t unused = write(report_fd, line, n);
    (void)unused;
}

static void on_fault(int sig, siginfo_t *si, void *context)
{
    (void)context;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (a < guard_lo || a >= guard_hi) {
        /* Not ours: fault again, with the default action. */
        signal(sig, SIG_DFL);
        return;
    }
    put_hex_line('G', a - load_base);
    mprotect((void *)(a & ~(uintptr_t)4095), 4096, PROT_READ | PROT_EXEC);
}

unsigned int la_version(unsigned int version)
{
    return version;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
    (void)lmid;
    (void)cookie;
    const char *spec = getenv("LFGC_CODE_GUARD");
    if (!spec || !map->l_name || !strstr(map->l_name, "/liblfgc.so"))
        return 0;
    char *rest;
    uintptr_t from = strtoull(spec, &rest, 16), to = strtoull(rest, &rest, 16);
    report_fd = (int)strtol(rest, NULL, 10);
    if (from >= to || (from | to) & 4095) {
        put_hex_line('E', from);
        return 0;
    }
    load_base = map->l_addr;
    guard_lo = load_base + from;
    guard_hi = load_base + to;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSEGV, &sa, NULL) != 0 || mprotect((void *)guard_lo, to - from, PROT_NONE) != 0)
        put_hex_line('E', from);
    else
        put_hex_line('A', from);
    return 0;
}
