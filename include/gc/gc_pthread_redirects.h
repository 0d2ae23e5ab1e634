/* gc/gc_pthread_redirects.h: where programs written for bdwgc look for this part of it.
 * lfgc keeps it in <gc.h>, which this includes, so that
 * #include <gc/gc_pthread_redirects.h> finds lfgc and never a bdwgc header installed
 * elsewhere. */
#include "../gc.h"
