/* gc/gc_inline.h: where bdwgc programs look for it. */
#include "../gc_inline.h"
