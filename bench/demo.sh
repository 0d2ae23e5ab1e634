#!/bin/bash
# demo.sh: binary trees on lfgc and on the system's bdwgc, side by side.
#
#   bench/demo.sh            (or: make demo)
#   BENCH_QUICK=1 bench/demo.sh    3 runs instead of 5
#   BENCH_RUNS=N, BENCH_DEPTH=D (default 18)
#
# Builds bench/trees.c against both collectors into $abs_top_builddir/bench/
# build, runs them interleaved (lfgc, bdwgc, lfgc, bdwgc, ...), and prints
# the medians with the lfgc/bdwgc ratio of each.  Exits non-zero if a run
# crashes or fails its checks, or if liblfgc.so is not built (set
# BENCH_ALLOW_MISSING_LFGC=1 to run the bdwgc side alone).
# make runs this with $(SHELL), which may not be bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -eu
. "$(dirname "$0")/lib.sh"

depth=${BENCH_DEPTH:-18}
bench_need_base
bench_need_pkgs libgc-dev

missing_lfgc=0
if ! lfgc_available; then
    if [ "${BENCH_ALLOW_MISSING_LFGC:-0}" = 1 ]; then
        bench_log "demo: $LFGC_LIB is not built: running bdwgc only"
        missing_lfgc=1
    else
        bench_die "$LFGC_LIB is not built (run make first)"
    fi
fi

bin=$BENCH_BUILD
mkdir -p "$bin"
bench_log "demo: building trees against lfgc and bdwgc in $bin"
plan=$bin/demo.plan
: >"$plan"
if [ $missing_lfgc = 0 ]; then
    bench_build lfgc "$BENCH_SRCDIR/trees.c" "$bin/trees-lfgc" ||
        bench_die "trees.c does not build against lfgc"
    plan_line trees trees lfgc wall_s lo "'$bin/trees-lfgc' $depth" >>"$plan"
else
    plan_line trees trees lfgc wall_s lo "n/a: liblfgc.so not built" >>"$plan"
fi
bench_build bdwgc "$BENCH_SRCDIR/trees.c" "$bin/trees-bdwgc" ||
    bench_die "trees.c does not build against bdwgc"
plan_line trees trees bdwgc wall_s lo "'$bin/trees-bdwgc' $depth" >>"$plan"

echo "Binary trees, depth $depth (long-lived tree + 4 MB atomic array +"
echo "short-lived trees of depth 4..$depth), $BENCH_RUNS interleaved runs each"
echo "Machine: $(nproc) cores, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)"
echo
status=0
bench_run_plan demo "$plan" metrics || status=$?

# The core issue's goals against these medians.
"$PYTHON" - "$BENCH_RESULTS/demo-summary.csv" <<'EOF' || true
import csv, sys
rows = {r["peer"]: r for r in csv.DictReader(open(sys.argv[1]))}
b = rows.get("bdwgc", {})
goals = [("time", "ratio_wall_s", 0.8), ("peak RSS", "ratio_peak_rss_kb", 1.0),
         ("longest pause", "ratio_max_pause_ms", 1.0)]
out = []
for name, field, limit in goals:
    try:
        v = float(b[field])
    except (KeyError, ValueError):
        out.append(f"{name} <= {limit:.2f}x: not measured")
        continue
    out.append(f"{name} <= {limit:.2f}x: {v:.2f}x "
               + ("met" if v <= limit else "NOT MET"))
print("Goals (lfgc/bdwgc): " + "; ".join(out))
EOF
if [ $status = 0 ] && [ $missing_lfgc = 1 ]; then
    status=2
fi
exit $status
