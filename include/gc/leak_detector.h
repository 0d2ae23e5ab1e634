/* gc/leak_detector.h: where bdwgc's programs look for it. */
#include "../leak_detector.h"
