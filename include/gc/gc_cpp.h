/* gc/gc_cpp.h: where bdwgc programs look for it; lfgc keeps it in <gc_cpp.h>. */
#include "../gc_cpp.h"
