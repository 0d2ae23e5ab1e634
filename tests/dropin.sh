#!/bin/sh
# dropin.sh: programs built for bdwgc run unmodified on lfgc's libgc.so.1.
#
# 1. tests/dropin/bdwgc_client.c, compiled against Debian's bdwgc (<gc.h>,
#    -lgc), runs on bdwgc and then with LD_LIBRARY_PATH pointing at the
#    build tree's .libs (where libgc.so.1 and liblfgc.so.0 are): same
#    stdout, and its stderr shows it ran on lfgc (lfgc_get_stats found,
#    liblfgc.so mapped, bdwgc's libgc.so.1 not mapped).  The same for a C++
#    program built against bdwgc's gc_cpp.h and libgccpp.so.1, and for one
#    that uses the private names bdwgc's own tests use (GC_on_abort, ...).
# 2. Debian's mmv renames a few hundred files, and w3m -dump renders an
#    HTML page, on bdwgc and on lfgc (scripts/lfgc-run): same output and
#    same resulting files; the loader's own log (LD_DEBUG) shows that the
#    lfgc run initialised liblfgc.so.0 and never loaded bdwgc.
#
# What is missing is installed when we are root; otherwise the test fails
# (under CI, or when asked with DROPIN_REQUIRE=1) or is skipped, loudly.
set -u
top_builddir="${top_builddir:-.}"
top_srcdir="$(cd "${top_srcdir:-$(dirname "$0")/..}" && pwd)"   # absolute: used elsewhere
CC="${CC:-cc}"
CXX="${CXX:-c++}"
libs="$(cd "$top_builddir/.libs" && pwd)"
status=0

fail() { echo "FAIL: $*" >&2; status=1; }

missing() {
    echo "************************************************************" >&2
    echo "dropin.sh: $*" >&2
    echo "dropin.sh: run scripts/setup.sh (as root) to install it" >&2
    echo "************************************************************" >&2
    if [ -n "${CI:-}" ] || [ "${DROPIN_REQUIRE:-0}" = 1 ]; then
        exit 1
    fi
    exit 77
}

. "$top_srcdir/tests/packages.sh"

test -e "$libs/libgc.so.1" || { echo "FAIL: $libs/libgc.so.1 not built" >&2; exit 1; }
test -e "$libs/liblfgc.so.0" || { echo "FAIL: $libs/liblfgc.so.0 not built" >&2; exit 1; }
test -e "$libs/libgccpp.so.1" || { echo "FAIL: $libs/libgccpp.so.1 not built" >&2; exit 1; }
# A program's copy-relocated data (GC_dont_gc, ...) is the only copy: liblfgc
# must reach its exported data through the GOT, never bind them to itself.
readelf -dW "$libs/liblfgc.so.0" | grep -q -E 'SYMBOLIC|FLAGS.*BIND_SYMBOLIC' &&
    fail "liblfgc.so.0 is linked -Bsymbolic: a program's copy of GC_* data would be ignored"
for v in GC_all_interior_pointers GC_dont_gc GC_java_finalization GC_finalize_on_demand GC_on_abort; do
    readelf -rW "$libs/liblfgc.so.0" | grep -q "R_X86_64_GLOB_DAT .* $v + 0" ||
        fail "liblfgc.so.0 reads $v without the GOT: a program's copy of it would be ignored"
done
ensure_packages missing libgc-dev mmv w3m
bdwgc=$(ldconfig -p | awk '$1 == "libgc.so.1" { print $NF; exit }')
test -n "$bdwgc" || missing "the system's libgc.so.1 (Debian libgc1) is not found by ldconfig"

work=$(mktemp -d "${TMPDIR:-/tmp}/lfgc-dropin.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The lfgc run of a command: what an installed lfgc-run does, on the build
# tree, with the loader's log of the libraries it initialised.
run_lfgc() {
    LFGC_RUN_LIBDIR="$libs" LD_DEBUG=libs LD_DEBUG_OUTPUT="$work/ld" \
        sh "$top_srcdir/scripts/lfgc-run.in" "$@"
}

# Did the lfgc run (log $work/ld.PID) load lfgc and not bdwgc?
check_loader_log() {
    what=$1
    log=$(cat "$work"/ld.* 2>/dev/null)
    rm -f "$work"/ld.*
    printf '%s\n' "$log" | grep -q "calling init: $libs/liblfgc.so.0" ||
        fail "$what: the loader did not initialise $libs/liblfgc.so.0"
    printf '%s\n' "$log" | grep -q "calling init: .*/x86_64-linux-gnu/libgc.so" &&
        fail "$what: bdwgc's libgc.so.1 was loaded as well"
    return 0
}

# --- 1. A program built against bdwgc (plain, then with -DGC_DEBUG) ----
run_client() {
    flags=$1
    prog="$work/bdwgc_client$flags"
    # Debian's headers only: lfgc's include/ is not on the path.
    # shellcheck disable=SC2086 # flags is empty or one word
    if ! $CC -O1 -Wno-deprecated-declarations $flags -o "$prog" \
            "$top_srcdir/tests/dropin/bdwgc_client.c" -lgc 2>"$work/cc.err"; then
        cat "$work/cc.err" >&2
        fail "cannot build tests/dropin/bdwgc_client.c ($flags) against bdwgc"
        return
    fi
    ldd "$prog" | grep -q "libgc.so.1 => $bdwgc" ||
        fail "bdwgc_client$flags does not link the system's libgc.so.1"
    "$prog" >"$work/bdw.out" 2>"$work/bdw.err" || fail "bdwgc_client$flags failed on bdwgc"
    grep -q '^collector: bdwgc$' "$work/bdw.err" || fail "the bdwgc run did not run on bdwgc"
    LD_LIBRARY_PATH="$libs" "$prog" >"$work/lf.out" 2>"$work/lf.err" ||
        fail "bdwgc_client$flags failed on lfgc: $(cat "$work/lf.err")"
    grep -q '^collector: lfgc$' "$work/lf.err" || fail "bdwgc_client$flags did not run on lfgc"
    grep -q "^maps: $libs/liblfgc.so" "$work/lf.err" || fail "liblfgc.so not mapped in bdwgc_client$flags"
    grep -q "^maps: $libs/libgc.so.1" "$work/lf.err" || fail "lfgc's libgc.so.1 not mapped"
    grep "^maps: " "$work/lf.err" | grep -v "^maps: $libs/" >&2 &&
        fail "a second collector is mapped in bdwgc_client$flags"
    if ! cmp -s "$work/bdw.out" "$work/lf.out"; then
        fail "bdwgc_client$flags prints differently on lfgc"
        diff "$work/bdw.out" "$work/lf.out" >&2
    fi
    grep -q '^list checksum intact: yes$' "$work/lf.out" || fail "bdwgc_client$flags: live data damaged"
}
run_client ""
run_client -DGC_DEBUG

# build_and_run NAME COMPILER SOURCE LIBS...: build tests/dropin/SOURCE
# against bdwgc (Debian's headers and libraries only) into $work/NAME,
# run it on bdwgc and on lfgc ($work/NAME.bdw.* and $work/NAME.lf.*), and
# check that the lfgc run ran on lfgc and printed what the bdwgc run did.
# Fails (returns 1) when it cannot build or run.
build_and_run() {
    name=$1 compiler=$2 source=$3
    shift 3
    prog="$work/$name"
    if ! $compiler -O1 -o "$prog" "$top_srcdir/tests/dropin/$source" "$@" 2>"$work/$name.cc.err"; then
        cat "$work/$name.cc.err" >&2
        fail "cannot build tests/dropin/$source against bdwgc"
        return 1
    fi
    "$prog" >"$work/$name.bdw.out" 2>"$work/$name.bdw.err" || { fail "$name failed on bdwgc"; return 1; }
    LD_LIBRARY_PATH="$libs" "$prog" >"$work/$name.lf.out" 2>"$work/$name.lf.err" ||
        { fail "$name failed on lfgc: $(head -3 "$work/$name.lf.err")"; return 1; }
    grep -q '^collector: lfgc$' "$work/$name.lf.err" || fail "$name did not run on lfgc"
    cmp -s "$work/$name.bdw.out" "$work/$name.lf.out" ||
        { fail "$name prints differently on lfgc"; diff "$work/$name.bdw.out" "$work/$name.lf.out" >&2; }
    return 0
}

# --- 1a. The same program with lfgc's malloc preloaded -----------------
# bdwgc stays its collector (its libgc.so.1 comes before liblfgc.so.0 in
# the loader's order, so the GC_* names are bdwgc's) and lfgc serves
# malloc: lfgc must leave bdwgc's variables alone (it wrote GC_parallel,
# and bdwgc's first collection crashed: w3m under the preload did).
"$work/bdwgc_client" >"$work/plain.out" 2>/dev/null || fail "bdwgc_client failed on bdwgc"
LD_PRELOAD="$libs/liblfgc-malloc.so" "$work/bdwgc_client" >"$work/pre.out" 2>"$work/pre.err" ||
    fail "bdwgc_client on bdwgc with liblfgc-malloc.so preloaded failed: $(head -3 "$work/pre.err")"
cmp -s "$work/plain.out" "$work/pre.out" ||
    { fail "bdwgc_client prints differently with liblfgc-malloc.so preloaded"; diff "$work/plain.out" "$work/pre.out" >&2; }
grep -q "^maps: .*/x86_64-linux-gnu/libgc.so" "$work/pre.err" || fail "bdwgc's libgc.so.1 not mapped under the preload"
grep -q "^maps: $libs/liblfgc.so" "$work/pre.err" || fail "liblfgc.so not mapped under the preload"

# --- 1b. A C++ program built against bdwgc's gc_cpp.h and libgccpp -----
if build_and_run bdwgc_cpp_client "$CXX" bdwgc_cpp_client.cc -lgccpp -lgc; then
    out="$work/bdwgc_cpp_client.lf.out"
    grep -q '^vector and map intact: yes$' "$out" || fail "bdwgc_cpp_client: live data damaged"
    grep -q '^objects held from plain new intact: yes$' "$out" ||
        fail "bdwgc_cpp_client: objects held only from plain new were freed"
    grep -q '^plain new gives the collector.s memory: yes$' "$out" ||
        fail "bdwgc_cpp_client: plain new does not come from libgccpp.so.1"
fi

# --- 1b'. Names of bdwgc's private headers that its libgc.so.1 exports --
# bdwgc's own gctest, test_cpp and disclaim_bench, built as bdwgc builds
# them, reference GC_on_abort (a copy-relocated variable), GC_printf and
# the other calls tests/dropin/bdwgc_private.c uses: without them the
# loader refuses the program.
if build_and_run bdwgc_private "$CC" bdwgc_private.c -lgc -ldl; then
    out="$work/bdwgc_private.lf.out"
    grep -q ': no$' "$out" && fail "bdwgc_private: $(grep ': no$' "$out")"
    test "$(grep -c ': yes$' "$out")" = 7 || fail "bdwgc_private: not every check ran"
    grep -q '^GC_printf: 42 words 1099511627776$' "$out" || fail "GC_printf's output is wrong"
    for w in 'GC_err_printf: 7' 'GC_log_printf: to the log'; do
        grep -q "^$w\$" "$work/bdwgc_private.lf.err" || fail "bdwgc_private: '$w' not on stderr"
    done
fi

# --- 1c. A staged install, before any ldconfig ----------------------------
# The drop-in and the malloc library find liblfgc.so.0 beside them
# ($ORIGIN), not only in $(libdir): a DESTDIR install, or one into a
# system directory before ldconfig has run, works as it stands.
stage="$work/stage"
if ! ${MAKE:-make} -C "$top_builddir" install DESTDIR="$stage" >"$work/install.log" 2>&1; then
    tail -20 "$work/install.log" >&2
    fail "make install DESTDIR=... failed"
else
    smalloc=$(find "$stage" -name liblfgc-malloc.so | head -1)
    sdropin=$(find "$stage" -name libgc.so.1 | head -1)
    if [ -z "$smalloc" ] || [ -z "$sdropin" ]; then
        fail "the staged install lacks liblfgc-malloc.so or libgc.so.1"
    else
        out=$(LD_PRELOAD="$smalloc" /bin/echo staged 2>&1)
        [ "$out" = staged ] || fail "staged liblfgc-malloc.so does not load: $out"
        LD_LIBRARY_PATH="${sdropin%/*}" "$work/bdwgc_client" >"$work/st.out" 2>"$work/st.err" ||
            fail "bdwgc_client on the staged libgc.so.1 failed: $(head -3 "$work/st.err")"
        grep -q '^collector: lfgc$' "$work/st.err" || fail "bdwgc_client did not run on the staged lfgc"
    fi
fi

# --- 2. mmv: rename 300 files ------------------------------------------
for c in bdw lf; do
    mkdir -p "$work/mmv-$c"
    i=0
    while [ $i -lt 300 ]; do
        : >"$work/mmv-$c/file$i.txt"
        i=$((i + 1))
    done
done
(cd "$work/mmv-bdw" && mmv -v '*.txt' 'renamed-#1.dat') >"$work/mmv-bdw.out" 2>&1 ||
    fail "mmv failed on bdwgc"
(cd "$work/mmv-lf" && run_lfgc mmv -v '*.txt' 'renamed-#1.dat') >"$work/mmv-lf.out" 2>&1 ||
    fail "mmv failed on lfgc: $(head -5 "$work/mmv-lf.out")"
check_loader_log mmv
(cd "$work/mmv-bdw" && ls) >"$work/mmv-bdw.ls"
(cd "$work/mmv-lf" && ls) >"$work/mmv-lf.ls"
test "$(grep -c '^renamed-file.*\.dat$' "$work/mmv-lf.ls")" = 300 ||
    fail "mmv on lfgc did not rename the 300 files"
cmp -s "$work/mmv-bdw.out" "$work/mmv-lf.out" || fail "mmv prints differently on lfgc"
cmp -s "$work/mmv-bdw.ls" "$work/mmv-lf.ls" || fail "mmv renames differently on lfgc"

# --- 3. w3m -dump: render a page ---------------------------------------
html="$work/page.html"
{
    echo '<html><head><title>lfgc drop-in</title></head><body>'
    echo '<h1>Rendering on lfgc</h1><p>A paragraph with <b>bold</b>, <i>italic</i>'
    echo 'and a <a href="https://example.org/">link</a>.</p><ul>'
    i=0
    while [ $i -lt 200 ]; do
        echo "<li>item $i: $(printf '%s' "word$i " "word$((i * 7)) ")</li>"
        i=$((i + 1))
    done
    echo '</ul><table border="1"><tr><th>n</th><th>square</th></tr>'
    i=0
    while [ $i -lt 100 ]; do
        echo "<tr><td>$i</td><td>$((i * i))</td></tr>"
        i=$((i + 1))
    done
    echo '</table><pre>preformatted   text</pre></body></html>'
} >"$html"
HOME="$work" w3m -dump -cols 80 "$html" >"$work/w3m-bdw.out" 2>&1 || fail "w3m failed on bdwgc"
HOME="$work" run_lfgc w3m -dump -cols 80 "$html" >"$work/w3m-lf.out" 2>&1 ||
    fail "w3m failed on lfgc: $(head -5 "$work/w3m-lf.out")"
check_loader_log w3m
grep -q 'item 199: word199 word1393' "$work/w3m-lf.out" || fail "w3m on lfgc did not render the page"
if ! cmp -s "$work/w3m-bdw.out" "$work/w3m-lf.out"; then
    fail "w3m renders differently on lfgc"
    diff "$work/w3m-bdw.out" "$work/w3m-lf.out" | head -20 >&2
fi

test $status = 0 && echo "PASS: bdwgc_client (plain and -DGC_DEBUG), bdwgc_cpp_client, mmv (300 renames) and w3m -dump run on lfgc's libgc.so.1, output as on bdwgc"
exit $status
