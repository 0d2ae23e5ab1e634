/* gc/gc_mark.h: where bdwgc programs look for it. */
#include "../gc_mark.h"
