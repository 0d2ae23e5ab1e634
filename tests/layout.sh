#!/bin/sh
# layout.sh: one layout and one copy of lfgc per process.
#
# 1. A program compiled with lowfat.h for another region layout than the
#    library's must fail to link (lowfat.h's inline functions would give
#    wrong answers in silence); with the library's own headers it links.
# 2. A second copy of the library loaded into a process that has one is
#    refused at load, with a message that names the first copy.
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

test $status = 0 && echo "PASS: layout guard and single instance"
exit $status
