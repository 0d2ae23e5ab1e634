#!/bin/bash
# run.sh: lfgc's benchmark suite (make bench; make bench BENCH_QUICK=1).
#
#   bench/run.sh                 every mode in bench/modes/, 5 runs each
#   BENCH_QUICK=1 bench/run.sh   3 runs, smaller sizes (a few minutes)
#   BENCH_MODES="gc" bench/run.sh          only these modes (file names in
#                                          bench/modes/ without .sh)
#   BENCH_CALLGRIND=1|0          run bench/callgrind.sh too (default: 1 in a
#                                full run when valgrind is there, 0 in quick)
#   BENCH_DOCS=0                 do not rewrite docs/performance.md and plots
#   BENCH_ALLOW_MISSING_LFGC=1   run the peers even if liblfgc.so is missing
# (see lib.sh for the other variables).
#
# For each mode: build the workloads against every peer, run them
# interleaved, print a table as results come in, and write
# bench/results/MODE-{runs,summary}.csv plus MODE-meta.txt (machine, commit).
# Then bench/report.py draws the plots (docs/bench/*.png) and writes
# docs/performance.md from the CSV files, and prints the summary line.
# Exits non-zero if any run crashed or failed its checks.
# make runs this with $(SHELL), which may not be bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -eu
. "$(dirname "$0")/lib.sh"

bench_need_base
[ "${BENCH_DOCS:-1}" = 0 ] || bench_need_cmd gnuplot gnuplot-nox

if ! lfgc_available; then
    if [ "${BENCH_ALLOW_MISSING_LFGC:-0}" = 1 ]; then
        bench_log "bench: $LFGC_LIB is not built: lfgc rows will be n/a"
    else
        bench_die "$LFGC_LIB is not built (run make first, or set BENCH_ALLOW_MISSING_LFGC=1)"
    fi
fi

if [ -n "${BENCH_MODES:-}" ]; then
    modes=$BENCH_MODES
else
    modes=$(cd "$BENCH_SRCDIR/modes" && ls ./*.sh | sed 's|^\./||; s|\.sh$||' | sort)
fi

mkdir -p "$BENCH_BUILD" "$BENCH_RESULTS"
echo "lfgc benchmark suite: $( [ "$BENCH_QUICK" = 1 ] && echo quick || echo full) run, modes: ${modes//$'\n'/ }"
bench_machine_info | grep -E '^(commit|cpu|cores|kernel)=' | sed 's/^/  /'
echo

t_start=$(date +%s)
failed=()
ran=()
for m in $modes; do
    f=$BENCH_SRCDIR/modes/$m.sh
    [ -f "$f" ] || bench_die "no such mode: $m ($f)"
    st=0
    (
        set -eu
        MODE_RUNS=
        . "$f"
        mode_prepare
        plan=$BENCH_BUILD/$m.plan
        bench_log "bench: [$m] building"
        mode_plan "$plan"
        [ -n "$MODE_RUNS" ] && BENCH_RUNS=$MODE_RUNS
        echo "== $MODE_TITLE: medians of $BENCH_RUNS interleaved runs"
        bench_run_plan "$m" "$plan" suite
    ) || st=$?
    echo
    ran+=("$m")
    [ $st = 0 ] || failed+=("$m")
done

cg_default=0
if [ "$BENCH_QUICK" != 1 ] && command -v valgrind >/dev/null 2>&1; then
    cg_default=1
fi
if [ "${BENCH_CALLGRIND:-$cg_default}" = 1 ]; then
    echo "== Instruction counts (callgrind)"
    if ! "$BENCH_SRCDIR/callgrind.sh"; then
        failed+=("callgrind")
    fi
    echo
fi

t_total=$(( $(date +%s) - t_start ))
report_args=(--results "$BENCH_RESULTS" --docs "$BENCH_DOCS_OUT"
             --modes "${ran[*]}" --seconds "$t_total")
[ "${BENCH_DOCS:-1}" = 0 ] && report_args+=(--no-docs)
"$PYTHON" "$BENCH_SRCDIR/report.py" "${report_args[@]}" || failed+=("report")

if [ ${#failed[@]} -gt 0 ]; then
    echo "bench: FAILED: ${failed[*]} (see above)"
    exit 1
fi
if ! lfgc_available; then
    echo "bench: liblfgc.so was not built: the lfgc side did not run"
    exit 2
fi
