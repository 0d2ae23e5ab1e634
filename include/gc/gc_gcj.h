/* gc/gc_gcj.h: where bdwgc's programs look for it. */
#include "../gc_gcj.h"
