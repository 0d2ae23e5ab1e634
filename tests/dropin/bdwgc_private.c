/* bdwgc_private.c: a program built against bdwgc that uses the names of
 * bdwgc's private headers which its libgc.so.1 exports, as bdwgc's own
 * test programs do (gctest, test_cpp, disclaim_bench): the abort
 * function's variable GC_on_abort (data the program holds a copy of),
 * GC_printf, GC_err_printf, GC_log_printf, GC_incr_bytes_allocd and
 * GC_incr_bytes_freed.  They are declared here as bdwgc's gc_priv.h
 * and gc_alloc_ptrs.h declare them.
 *
 * stdout must be the same on bdwgc and on lfgc (tests/dropin.sh); each
 * check prints its answer there, and stderr names the collector. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <gc.h>

extern GC_abort_func GC_on_abort;
void GC_printf(const char *format, ...);
void GC_err_printf(const char *format, ...);
void GC_log_printf(const char *format, ...);
void GC_incr_bytes_allocd(size_t bytes);
void GC_incr_bytes_freed(size_t bytes);

static jmp_buf back;
static char abort_msg[256];

static void catch_abort(const char *msg)
{
    snprintf(abort_msg, sizeof abort_msg, "%s", msg ? msg : "(null)");
    longjmp(back, 1);
}

static void show(const char *what, int ok)
{
    printf("%s: %s\n", what, ok ? "yes" : "no");
    fflush(stdout);
}

int main(void)
{
    GC_INIT();
    fprintf(stderr, "collector: %s\n", dlsym(RTLD_DEFAULT, "lfgc_get_stats") ? "lfgc" : "bdwgc");

    /* The variable and the calls are one setting, both ways. */
    GC_abort_func dflt = GC_on_abort;
    show("GC_on_abort is the default abort function", dflt != NULL && GC_get_abort_func() == dflt);
    GC_on_abort = catch_abort;
    show("GC_get_abort_func reads GC_on_abort", GC_get_abort_func() == catch_abort);
    GC_set_abort_func(dflt);
    show("GC_set_abort_func writes GC_on_abort", GC_on_abort == dflt);

    /* The collector's own aborts go through the program's copy. */
    GC_on_abort = catch_abort;
    if (setjmp(back) == 0) {
        GC_abort_on_oom();
        show("GC_abort_on_oom called GC_on_abort", 0);
    } else {
        show("GC_abort_on_oom called GC_on_abort", abort_msg[0] != '\0');
    }
    GC_on_abort = dflt;

    /* Output: written whole, unbuffered, so flush ours first. */
    GC_printf("GC_printf: %d %s %lu\n", 42, "words", (unsigned long)1 << 40);
    GC_err_printf("GC_err_printf: %d\n", 7);
    GC_log_printf("GC_log_printf: %s\n", "to the log");
    GC_printf("GC_printf again: %.3f\n", 0.5);

    /* Allocation counted by an allocator built over the collector. */
    size_t since = GC_get_bytes_since_gc();
    GC_incr_bytes_allocd((size_t)1 << 20);
    show("GC_incr_bytes_allocd adds to GC_get_bytes_since_gc",
         GC_get_bytes_since_gc() >= since + ((size_t)1 << 20));
    size_t freed = GC_get_expl_freed_bytes_since_gc();
    GC_incr_bytes_freed(4096);
    show("GC_incr_bytes_freed adds to GC_get_expl_freed_bytes_since_gc",
         GC_get_expl_freed_bytes_since_gc() == freed + 4096);
    GC_gcollect();
    show("a collection starts both counts again",
         GC_get_expl_freed_bytes_since_gc() == 0 && GC_get_bytes_since_gc() < ((size_t)1 << 20));
    return 0;
}
