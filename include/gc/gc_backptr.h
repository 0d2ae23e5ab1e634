/* gc/gc_backptr.h: where bdwgc's programs look for it. */
#include "../gc_backptr.h"
