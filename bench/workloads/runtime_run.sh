#!/bin/sh
# runtime_run.sh PEER WORKLOAD REFERENCE COMMAND...: one timed run of a
# language runtime's unmodified binary (modes/runtimes.sh) on PEER's
# libgc.so.1: lfgc's drop-in (LFGC_RUN_LIBDIR, the build tree's .libs) or
# the system's bdwgc.  Its stdout must equal REFERENCE (the output of a
# bdwgc run made when the plan was built).  Prints the RESULT line that
# benchrun.py reads: wall and CPU seconds and peak RSS (GNU time).
set -u
peer=$1 workload=$2 ref=$3
shift 3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lfgc-rtbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
case $peer in
lfgc) set -- env LD_LIBRARY_PATH="$LFGC_RUN_LIBDIR" "$@" ;;
bdwgc) ;;
*) echo "runtime_run.sh: unknown peer $peer" >&2; exit 2 ;;
esac
# Guile 3.0.8 itself sometimes crashes or hangs, on bdwgc as on lfgc, when
# a collection comes while a thread expands its VM stack (a race in Guile:
# docs/compatibility.md, "Guile 3.0.8's crashes"): "madvise failed" or a
# silent SIGSEGV, or a collection walking zeroed frames for ever.  Those
# runs (Guile's only: a crash or hang elsewhere is a failure) are run
# again, at most twice, and said.  RT_TIMEOUT bounds a run: 120 s, far
# above any workload's 2 s, so that a hang costs a run of the suite two
# minutes, not ten.
tries=3
while :; do
    st=0
    /usr/bin/time -f '%e %U %S %M' -o "$tmp/time" timeout -k 10 "${RT_TIMEOUT:-120}" "$@" \
        >"$tmp/out" 2>"$tmp/err" || st=$?
    tries=$((tries - 1))
    if [ "$st" -eq 0 ] || [ $tries -le 0 ] || [ "$workload" != guile ] ||
            { [ "$st" -ne 139 ] && [ "$st" -ne 124 ] &&
              ! grep -q 'madvise failed: Cannot allocate memory' "$tmp/err"; }; then
        break
    fi
    echo "runtime_run.sh: $workload on $peer hit Guile's VM-stack race (exit $st), once more" >&2
done
check=ok
if [ "$st" -ne 0 ]; then
    echo "runtime_run.sh: $workload on $peer exited with $st:" >&2
    tail -5 "$tmp/err" >&2
    check=fail
elif ! cmp -s "$ref" "$tmp/out"; then
    echo "runtime_run.sh: $workload on $peer prints differently from bdwgc:" >&2
    diff "$ref" "$tmp/out" | head -10 >&2
    check=fail
fi
# shellcheck disable=SC2046 # four numbers
set -- $(tail -1 "$tmp/time")
cpu=$(echo "$2 $3" | awk '{ printf "%.2f", $1 + $2 }')
echo "RESULT collector=$peer workload=$workload wall_s=$1 cpu_s=$cpu peak_rss_kb=$4 check=$check"
[ $check = ok ]
