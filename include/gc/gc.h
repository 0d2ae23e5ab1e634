/* gc/gc.h: where programs written for bdwgc look for its header.
 * lfgc keeps its whole interface in <gc.h>, which this includes, so that
 * #include <gc/gc.h> finds lfgc and never a bdwgc header installed
 * elsewhere. */
#include "../gc.h"
