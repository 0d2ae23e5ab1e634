/* malloc_info.c: the C library's reporting and tuning calls of malloc,
 * answered from lfgc's manual-mode heap.
 *
 * Under LD_PRELOAD a program that calls malloc_stats, malloc_info or
 * mallopt would otherwise reach glibc's own, which describe glibc's empty
 * arena (or create one).  The figures are lfgc_mallinfo2's; the layout of
 * the output is glibc's, which scripts and tests read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdio.h>

#include "internal.h"
#include "lfgc_malloc.h"

/* Bytes of small-object spans, plus large objects: what glibc calls the
 * system bytes. */
static size_t system_bytes(const struct mallinfo2 *mi)
{
    return mi->arena + mi->hblkhd;
}

/* The report is whole or absent: fprintf is a cancellation point, and a
 * thread cancelled in the middle would leave half of it (glibc makes
 * malloc_stats immune too, since 2.28). */
LFGC_EXPORT void lfgc_malloc_stats(void)
{
    int cancel = nocancel_begin();
    struct mallinfo2 mi = lfgc_mallinfo2();
    size_t in_use_small = mi.arena - mi.fordblks;
    fprintf(stderr, "Arena 0:\n"
            "system bytes     = %10zu\n"
            "in use bytes     = %10zu\n"
            "Total (incl. mmap):\n"
            "system bytes     = %10zu\n"
            "in use bytes     = %10zu\n"
            "max mmap regions = %10zu\n"
            "max mmap bytes   = %10zu\n",
            mi.arena, in_use_small, system_bytes(&mi), mi.uordblks, mi.hblks, mi.hblkhd);
    nocancel_end(cancel);
}

LFGC_EXPORT int lfgc_malloc_info(int options, FILE *fp)
{
    if (options != 0) {
        errno = EINVAL;
        return -1;
    }
    struct mallinfo2 mi = lfgc_mallinfo2();
    size_t sys = system_bytes(&mi);
    fprintf(fp, "<malloc version=\"1\">\n"
            "<heap nr=\"0\">\n"
            "<sizes>\n"
            "</sizes>\n"
            "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
            "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
            "<system type=\"current\" size=\"%zu\"/>\n"
            "<system type=\"max\" size=\"%zu\"/>\n"
            "<aspace type=\"total\" size=\"%zu\"/>\n"
            "<aspace type=\"mprotect\" size=\"%zu\"/>\n"
            "</heap>\n",
            mi.ordblks, mi.fordblks, mi.arena, mi.arena, mi.arena, mi.arena);
    fprintf(fp, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
            "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
            "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
            "<system type=\"current\" size=\"%zu\"/>\n"
            "<system type=\"max\" size=\"%zu\"/>\n"
            "<aspace type=\"total\" size=\"%zu\"/>\n"
            "<aspace type=\"mprotect\" size=\"%zu\"/>\n"
            "</malloc>\n",
            mi.ordblks, mi.fordblks, mi.hblks, mi.hblkhd, sys, sys, sys, sys);
    return 0;
}

/* glibc's parameters tune its arenas, bins and thresholds, which lfgc does
 * not have: each is accepted (1) and changes nothing, so that programs
 * which set them run as before.  Only values glibc itself refuses are
 * refused (0). */
LFGC_EXPORT int lfgc_mallopt(int param, int value)
{
    switch (param) {
    case M_MXFAST:
        return value >= 0 && (size_t)value <= 80 * sizeof(size_t) / 4;
    default:
        return 1;
    }
}
