/* gc/gc_typed.h: where bdwgc's programs look for it. */
#include "../gc_typed.h"
