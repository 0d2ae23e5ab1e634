/* leak_detector.h: bdwgc's header that turns a program's malloc family
 * into the collector's debugging calls (include it last, or with
 * -include).
 *
 * It serves the leak-finding mode (GC_find_leak, GC_FIND_LEAK): collections
 * report on stderr the unreachable objects that were never freed, each
 * once, then reclaim them (docs/api.md).  CHECK_LEAKS() collects, and so
 * reports.
 */
#ifndef LFGC_LEAK_DETECTOR_H
#define LFGC_LEAK_DETECTOR_H

#ifndef GC_DEBUG
# define GC_DEBUG
#endif
#include "gc.h"

#ifndef GC_DONT_INCLUDE_STDLIB
/* The system's declarations first, so that the macros below do not
 * rename them. */
# include <stdlib.h>
# include <string.h>
#endif

#undef malloc
#define malloc(n) GC_MALLOC(n)
#undef calloc
#define calloc(m, n) GC_MALLOC((m) * (n))
#undef free
#define free(p) GC_FREE(p)
#undef realloc
#define realloc(p, n) GC_REALLOC(p, n)
#undef strdup
#define strdup(s) GC_STRDUP(s)
#undef strndup
#define strndup(s, n) GC_STRNDUP(s, n)
#undef memalign
#define memalign(a, n) GC_memalign(a, n)
#undef posix_memalign
#define posix_memalign(p, a, n) GC_posix_memalign(p, a, n)

#ifndef CHECK_LEAKS
# define CHECK_LEAKS() GC_gcollect()
#endif

#endif /* LFGC_LEAK_DETECTOR_H */
