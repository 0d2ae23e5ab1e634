#!/bin/sh
# layout.sh: one layout and one copy of lfgc per process.
#
# 1. A program compiled with lowfat.h for another region layout than the
#    library's must fail to link (lowfat.h's inline functions would give
#    wrong answers in silence); with the library's own headers it links.
# 2. A second copy of the library loaded into a process that has one is
#    refused at load, with a message that names the first copy.
# 3. A refused copy that is called anyway (a plugin bound to its own copy)
#    does not act: every entry that would touch the heap, the threads or
#    the process's signals aborts with a message naming both copies.
set -u
# Absolute: the compilations below run in another directory (and an
# out-of-tree build passes relative paths).
top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=$(cd "${top_srcdir:-.}" && pwd)
CC="${CC:-cc}"
lib="$top_builddir/.libs"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lfgc-layout.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

cat > "$tmp/prog.c" <<'PROG'
#include <stdio.h>
#include "gc.h"
#include "lowfat.h"
int main(void)
{
    char *p = GC_MALLOC(100);
    printf("%zu\n", lowfat_size(p + 50));
    return lowfat_base(p + 50) == p ? 0 : 1;
}
PROG
inc="-I$top_builddir/include -I$top_srcdir/include"

# 1a. The library's own layout links and runs.
if ! $CC $inc "$tmp/prog.c" -o "$tmp/prog" "$lib/liblfgc.so" -Wl,-rpath,"$lib" \
        2> "$tmp/link.err"; then
    cat "$tmp/link.err" >&2
    fail "a program built with the library's own lowfat.h does not link"
elif ! "$tmp/prog" > /dev/null; then
    fail "a program built with the library's own lowfat.h does not run"
fi

# 1b. Another layout: lowfat.h next to an lfgc_config.h for it.
shift=$(sed -n 's/^#define LOWFAT_REGION_SHIFT \([0-9]*\).*/\1/p' "$top_builddir/include/lfgc_config.h")
first=$(sed -n 's/^#define LOWFAT_FIRST_REGION \([0-9]*\).*/\1/p' "$top_builddir/include/lfgc_config.h")
other=$((shift == 30 ? 29 : 30))
mkdir "$tmp/other"
cp "$top_srcdir/include/lowfat.h" "$top_srcdir/include/gc.h" "$tmp/other/"
printf '#define LOWFAT_REGION_SHIFT %s\n#define LOWFAT_FIRST_REGION %s\n' "$other" "$first" \
    > "$tmp/other/lfgc_config.h"
if $CC -I"$tmp/other" "$tmp/prog.c" -o "$tmp/prog_other" "$lib/liblfgc.so" \
        -Wl,-rpath,"$lib" 2> "$tmp/other.err"; then
    fail "a program built for regions of 2^$other bytes links with a library built for 2^$shift"
elif ! grep -q "lfgc_layout_${other}_${first}" "$tmp/other.err"; then
    cat "$tmp/other.err" >&2
    fail "the link failed, but not on the layout guard"
fi

# 2. A second copy, loaded with dlopen.
cat > "$tmp/two.c" <<'PROG'
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "gc.h"
int main(int argc, char **argv)
{
    (void)argc;
    char *p = GC_MALLOC(100);
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 2;
    strcpy(p, "intact");
    GC_gcollect();
    char *q = GC_MALLOC(100);
    return q && strcmp(p, "intact") == 0 ? 0 : 3;
}
PROG
cp "$lib/liblfgc.so.0" "$tmp/liblfgc-copy.so"
if ! $CC $inc "$tmp/two.c" -o "$tmp/two" "$lib/liblfgc.so" -Wl,-rpath,"$lib" -ldl; then
    fail "cannot build the two-copy program"
else
    "$tmp/two" "$tmp/liblfgc-copy.so" 2> "$tmp/two.err"
    rc=$?
    test $rc = 0 || fail "the first copy stopped working once a second was loaded (exit $rc)"
    if ! grep -q "another copy of lfgc already owns the heap of this process: .*liblfgc.so.0" \
            "$tmp/two.err" || ! grep -q "liblfgc-copy.so) is not used" "$tmp/two.err"; then
        cat "$tmp/two.err" >&2
        fail "a second copy of lfgc was not refused with a message naming both copies"
    fi
fi

# 3. Entries of the refused copy, called through dlsym (GC_do_blocking and
#    GC_call_with_stack_base only call back, setters and getters touch
#    the copy's own variables: they are left to work): name and arguments
#    (v: none, s: a size, p: an object of the first copy, ps: object and
#    size, pp: object twice, as: alignment and size, pf: object and
#    finalizer, lp: a link and an object, f: a callback, w: a heap-walk
#    callback, r: a range, d: a stack base).
cat > "$tmp/call.c" <<'PROG'
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "gc.h"
static void *slot;
static char range[64];
static void noop_fin(void *o, void *cd) { (void)o; (void)cd; }
static void *noop_fn(void *a) { return a; }
static int noop_walk(void *b, size_t n, int k, void *a) { (void)b; (void)n; (void)k; (void)a; return 0; }
typedef void *(*fn5)(void *, void *, void *, void *, void *);
int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    char *p = GC_MALLOC(100);
    strcpy(p, "intact");
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    fn5 f = h ? (fn5)dlsym(h, argv[2]) : NULL;
    if (!f)
        return 2;
    struct GC_stack_base sb;
    GC_get_stack_base(&sb);
    const char *a = argv[3];
    void *x[5] = { 0 };
    if (!strcmp(a, "s")) x[0] = (void *)100;
    else if (!strcmp(a, "p")) x[0] = p;
    else if (!strcmp(a, "ps")) { x[0] = p; x[1] = (void *)200; }
    else if (!strcmp(a, "pp")) { x[0] = p; x[1] = p; }
    else if (!strcmp(a, "as")) { x[0] = (void *)64; x[1] = (void *)100; }
    else if (!strcmp(a, "pf")) { x[0] = p; x[1] = (void *)noop_fin; }
    else if (!strcmp(a, "lp")) { x[0] = &slot; x[1] = p; }
    else if (!strcmp(a, "f")) x[0] = (void *)noop_fn;
    else if (!strcmp(a, "w")) x[0] = (void *)noop_walk;
    else if (!strcmp(a, "r")) { x[0] = range; x[1] = range + sizeof range; }
    else if (!strcmp(a, "d")) x[0] = &sb;
    f(x[0], x[1], x[2], x[3], x[4]);
    /* Reached only if the refused copy acted: the first copy must still
     * be intact, but the call should not have returned. */
    fprintf(stderr, "returned\n");
    return strcmp(p, "intact") == 0 ? 4 : 5;
}
PROG
if ! $CC $inc "$tmp/call.c" -o "$tmp/call" "$lib/liblfgc.so" -Wl,-rpath,"$lib" -ldl; then
    fail "cannot build the refused-copy caller"
else
    for entry in GC_init:v GC_gcollect:v GC_malloc:s GC_malloc_atomic:s \
                 GC_malloc_uncollectable:s GC_malloc_many:s GC_memalign:as GC_realloc:ps \
                 GC_free:p GC_base:p GC_size:p GC_is_heap_ptr:p lfgc_is_live:p \
                 lfgc_slot_state:p GC_same_obj:p GC_end_stubborn_change:p \
                 GC_register_finalizer:pf GC_general_register_disappearing_link:lp \
                 GC_add_roots:r GC_enable_incremental:v GC_register_my_thread:d \
                 GC_ptr_store_and_dirty:pp lfgc_heap_walk:w \
                 GC_enumerate_reachable_objects_inner:f GC_new_free_list:v \
                 GC_collect_a_little:v GC_expand_hp:s; do
        name=${entry%%:*}
        "$tmp/call" "$tmp/liblfgc-copy.so" "$name" "${entry#*:}" 2> "$tmp/call.err"
        rc=$?
        if test $rc = 2; then
            fail "$name: not found in the copy"
        elif test $rc -lt 128 ||
             ! grep -q "lfgc: .*liblfgc-copy.so) was refused at load: .*liblfgc.so.0 owns the heap" \
                  "$tmp/call.err"; then
            sed 's/^/    /' "$tmp/call.err" >&2
            fail "$name through a refused copy did not abort with the refusal (exit $rc)"
        fi
    done
fi

test $status = 0 && echo "PASS: layout guard and single instance"
exit $status
