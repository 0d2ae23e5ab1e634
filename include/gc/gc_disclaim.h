/* gc/gc_disclaim.h: where bdwgc's programs look for it. */
#include "../gc_disclaim.h"
