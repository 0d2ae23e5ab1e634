#!/bin/sh
# private_layout.sh: liblfgc-malloc.so runs free's fast path on
# liblfgc.so.0's thread cache, whose layout it was built for.  A
# liblfgc-malloc of another build (here: the same source built as if the
# layout differed, tests/libmismatched-malloc.so) must stop with a message
# at load instead of writing into the wrong fields; the real one runs.
set -u
top_builddir="${top_builddir:-.}"
libs="$(cd "$top_builddir/.libs" && pwd)"
good="$libs/liblfgc-malloc.so"
bad="$(cd "$top_builddir/tests/.libs" && pwd)/libmismatched-malloc.so"
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

for f in "$good" "$bad"; do
    test -e "$f" || { echo "FAIL: $f not built" >&2; exit 1; }
done
out=$(LD_LIBRARY_PATH="$libs" LD_PRELOAD="$good" sh -c 'echo ran' 2>&1)
[ "$out" = ran ] || fail "with the matching liblfgc-malloc: $out"
out=$(LD_LIBRARY_PATH="$libs" LD_PRELOAD="$bad" sh -c 'echo ran' 2>&1)
rc=$?
case $out in
*"different builds of lfgc"*) ;;
*) fail "a mismatched liblfgc-malloc was not refused (exit $rc): $out" ;;
esac
case $out in *ran*) fail "the program ran under a mismatched liblfgc-malloc" ;; esac
test $status = 0 && echo "PASS: a liblfgc-malloc built for another layout refuses to run"
exit $status
