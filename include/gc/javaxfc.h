/* gc/javaxfc.h: where programs written for bdwgc look for the external
 * thread suspension calls (GC_suspend_thread, GC_resume_thread,
 * GC_is_thread_suspended).  lfgc declares them in <gc.h>, which this
 * includes.  bdwgc's GC_finalize_all, also declared there, is not
 * provided (lfgc has no finalization yet). */
#include "../gc.h"
