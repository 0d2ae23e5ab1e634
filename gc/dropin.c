/* dropin.c: the whole of libgc.so.1, lfgc's drop-in for bdwgc.
 *
 * The library defines nothing.  Its soname is libgc.so.1 and it depends on
 * liblfgc.so.0, so a program built against bdwgc that finds this library
 * first (LD_LIBRARY_PATH=$(libdir)/lfgc, or lfgc-run) loads liblfgc.so.0
 * too, and the dynamic loader binds the program's unversioned GC_*
 * references to liblfgc's definitions in global search order.  One body of
 * code, one heap: see "One instance per process" in docs/design.md. */

/* ISO C wants at least one declaration in a translation unit. */
typedef int lf_dropin_empty;
