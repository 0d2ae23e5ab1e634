# modes/gc-scale.sh: GC mode, scaling: marking cost and pause length against
# the size of the live heap, lfgc vs bdwgc.  Uses workloads/mark.c (randomly
# linked 64-byte nodes) at several live-heap sizes, 3 timed full collections
# per run (2 from 1 GiB up).  See modes/gc.sh for what a mode file defines.
#
#   BENCH_SCALE_SIZES="16 64 256"   live heap sizes in MiB (default: 16 64
#                                   256 1024 2048; quick: 16 64 200)
#   BENCH_SCALE_RUNS=N              runs per size (default: 3; quick: 3)
#
# The largest sizes take minutes per run, which is why this mode runs 3
# times rather than 5 even in the full suite.

. "$BENCH_SRCDIR/modes/gc.sh"

MODE_TITLE="GC mode, scaling: marking vs live heap size (lfgc vs bdwgc)"
MODE_RUNS=${BENCH_SCALE_RUNS:-3}

mode_plan() {
    local plan=$1 sizes mb
    if [ "$BENCH_QUICK" = 1 ]; then
        sizes=${BENCH_SCALE_SIZES:-16 64 200}
    else
        sizes=${BENCH_SCALE_SIZES:-16 64 256 1024 2048}
    fi
    GC_BIN=$BENCH_BUILD/gc
    mkdir -p "$GC_BIN"
    : >"$plan"
    gc_build mark "$BENCH_SRCDIR/workloads/mark.c"
    for mb in $sizes; do
        # 3 timed collections; 2 from 1 GiB up, where one takes seconds.
        local rounds=3
        [ "${mb%%.*}" -ge 1024 ] 2>/dev/null && rounds=2
        gc_case scale "scale-${mb}mb" ms_per_mb lo "$mb" $rounds >>"$plan"
    done
}
