/* gc/gc_allocator.h: where bdwgc programs look for it; lfgc keeps it in <gc_allocator.h>. */
#include "../gc_allocator.h"
