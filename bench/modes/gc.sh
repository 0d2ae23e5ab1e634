# modes/gc.sh: GC mode: lfgc against bdwgc, each workload compiled from the
# same source against both collectors' gc.h.
#
# A mode file is sourced by run.sh (in a subshell, after lib.sh) and defines:
#   MODE_TITLE      one line for the table's heading
#   MODE_RUNS       runs per case and peer (optional; default $BENCH_RUNS)
#   mode_prepare    install what the peers need (only what is missing)
#   mode_plan FILE  build the programs and write the plan (see benchrun.py)
# Adding a workload means adding a source to workloads/ and a line below;
# adding a mode (malloc mode, say) means adding a file next to this one.

MODE_TITLE="GC mode: lfgc vs bdwgc $(pkg-config --modversion bdw-gc 2>/dev/null)"

# Peers of this mode, the subject first.
GC_PEERS="lfgc bdwgc"

mode_prepare() {
    bench_need_pkgs libgc-dev
}

# gc_build WORKLOAD SRC [FLAGS...]: build SRC for every peer into
# $GC_BIN/WORKLOAD-PEER.  Sets gc_cmd_PEER to the command prefix to run, or
# to "n/a: why" / "fail: why".
gc_build() {
    local w=$1 src=$2 peer
    shift 2
    for peer in $GC_PEERS; do
        local out=$GC_BIN/$w-$peer var=gc_cmd_$peer
        if [ "$peer" = lfgc ] && ! lfgc_available; then
            printf -v "$var" '%s' "n/a: liblfgc.so not built"
            continue
        fi
        if bench_build "$peer" "$src" "$out" "$@" 2>"$out.log"; then
            printf -v "$var" '%s' "'$out'"
            [ -s "$out.log" ] && cat "$out.log" >&2
        else
            cat "$out.log" >&2
            if [ "$peer" = lfgc ]; then
                printf -v "$var" '%s' "fail: $w does not build against lfgc (see $out.log)"
            else
                bench_die "$w does not build against $peer (see $out.log)"
            fi
        fi
    done
}

# gc_case GROUP CASE KEY BETTER ARGS...: one plan line per peer, running the
# last gc_build's programs with ARGS (and the environment in $GC_ENV).
gc_case() {
    local group=$1 case=$2 key=$3 better=$4 peer cmd
    shift 4
    for peer in $GC_PEERS; do
        local var=gc_cmd_$peer
        cmd=${!var}
        case $cmd in
        n/a:*|fail:*) ;;
        *) cmd="${GC_ENV:+env $GC_ENV }$cmd $*" ;;
        esac
        plan_line "$group" "$case" "$peer" "$key" "$better" "$cmd"
    done
}

mode_plan() {
    local plan=$1 q=$BENCH_QUICK
    GC_BIN=$BENCH_BUILD/gc
    mkdir -p "$GC_BIN"
    : >"$plan"

    # 1. Binary trees (the demo's program).
    gc_build trees "$BENCH_SRCDIR/trees.c"
    gc_case trees trees wall_s lo 18 >>"$plan"

    # 2. Multi-threaded trees, 1 and 2 threads, same total work.  lfgc runs
    # them once it exports GC_pthread_create.
    local mt_flags=(-pthread)
    if lfgc_has_symbol GC_pthread_create; then
        mt_flags+=(-DBENCH_LFGC_THREADS)
    fi
    gc_build mt_trees "$BENCH_SRCDIR/workloads/mt_trees.c" "${mt_flags[@]}"
    if ! lfgc_has_symbol GC_pthread_create && lfgc_available; then
        gc_cmd_lfgc="n/a: lfgc: threads not yet supported"
    fi
    gc_case mt mt_trees-1t wall_s lo 1 18 >>"$plan"
    gc_case mt mt_trees-2t wall_s lo 2 18 >>"$plan"
    # The same work with no collector (workloads/mt_trees.c, BENCH_ARENA):
    # the machine's own ceiling for how this work scales with threads.
    local arena=$GC_BIN/mt_trees-arena
    if bench_build bdwgc "$BENCH_SRCDIR/workloads/mt_trees.c" "$arena" \
            -pthread -DBENCH_ARENA 2>"$arena.log"; then
        plan_line mt mt_trees-1t arena wall_s lo "'$arena' 1 18" >>"$plan"
        plan_line mt mt_trees-2t arena wall_s lo "'$arena' 2 18" >>"$plan"
    else
        cat "$arena.log" >&2
        bench_die "mt_trees does not build with -DBENCH_ARENA (see $arena.log)"
    fi
    # The same with one marker thread: the parallel marker's effect on the
    # longest pause (bdwgc reads GC_MARKERS; lfgc is asked both ways).
    GC_ENV="GC_MARKERS=1 LFGC_MARKERS=1" \
        gc_case mt mt_trees-2t-1marker wall_s lo 2 18 >>"$plan"

    # 3. GCBench-style.
    gc_build gcbench "$BENCH_SRCDIR/workloads/gcbench.c"
    gc_case gcbench gcbench wall_s lo 16 >>"$plan"

    # 4. Mark-heavy: 128 MB of randomly linked nodes (2 M nodes), repeated
    # full collections; the key is the median world-stopped pause.
    gc_build mark "$BENCH_SRCDIR/workloads/mark.c"
    if [ "$q" = 1 ]; then
        gc_case mark mark-128mb mark_ms lo 128 4 >>"$plan"
    else
        gc_case mark mark-128mb mark_ms lo 128 10 >>"$plan"
    fi

    # 5. Raw allocation rate.
    gc_build alloc_rate "$BENCH_SRCDIR/workloads/alloc_rate.c"
    if [ "$q" = 1 ]; then
        gc_case alloc alloc_rate allocs_per_s hi 20 >>"$plan"
    else
        gc_case alloc alloc_rate allocs_per_s hi 50 >>"$plan"
    fi

    # 6. Finalization: finalizable objects that die young, a churning weak
    # table of disappearing links (the finalization issue's workload).
    gc_build finalize "$BENCH_SRCDIR/workloads/finalize.c"
    if [ "$q" = 1 ]; then
        gc_case finalize finalize wall_s lo 0.5 >>"$plan"
    else
        gc_case finalize finalize wall_s lo 2 >>"$plan"
    fi

    # 7. Base of interior pointers: lowfat_base (lfgc) vs GC_base (bdwgc).
    gc_build base "$BENCH_SRCDIR/workloads/base.c"
    gc_case base base ns_per_call lo 10 >>"$plan"
}
