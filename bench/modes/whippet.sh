# modes/whippet.sh: Whippet's benchmarks (github.com/wingo/whippet) built
# unmodified three ways: its bdwgc backend (src/bdw.c) against lfgc's
# headers and library, the same backend against Debian's bdwgc, and
# Whippet's own stack-conservative parallel mmc collector, which traces the
# heap precisely and is the fastest collector Whippet has for these.
# See modes/gc.sh for what a mode file defines.
#
#   WHIPPET_SRC=DIR     a Whippet checkout (default: cloned from GitHub into
#                       the build directory; the rows say n/a when neither
#                       is possible)
#   WHIPPET_URL=URL     where to clone it from
#   WHIPPET_MMC=NAME    Whippet's own collector to compare with (default
#                       stack-conservative-parallel-mmc)
#
# Whippet sizes the heap at a multiplier of the live data (2.5 here): its
# bdw backend expands the heap to that size and caps it there
# (GC_expand_hp, GC_set_max_heap_size), and turns interior pointers off.

MODE_TITLE="Whippet's benchmarks: lfgc and bdwgc through Whippet's bdw backend, and Whippet's own mmc"
MODE_RUNS=${WHIPPET_RUNS:-}

mode_prepare() {
    bench_need_pkgs libgc-dev
    bench_need_cmd git git
}

# whippet_source: print the Whippet tree to use, cloning it if needed;
# fails when there is none.
whippet_source() {
    if [ -n "${WHIPPET_SRC:-}" ]; then
        [ -f "$WHIPPET_SRC/src/bdw.c" ] || return 1
        echo "$WHIPPET_SRC"
        return 0
    fi
    local dir=$BENCH_BUILD/whippet-src
    if [ ! -f "$dir/src/bdw.c" ]; then
        rm -rf "$dir"
        git clone -q --depth 1 "${WHIPPET_URL:-https://github.com/wingo/whippet}" "$dir" >&2 ||
            return 1
    fi
    echo "$dir"
}

# whippet_build PEER SRC OUTDIR: build mt-gcbench and quads for PEER (lfgc,
# bdwgc, or mmc) in a copy of the tree.  Prints the make output on failure.
whippet_build() {
    local peer=$1 src=$2 out=$3 collector=bdw
    local -a vars=()
    case $peer in
    lfgc)
        vars=("GC_IMPL_CFLAGS_bdw=$(lfgc_cflags)"
              "GC_LIBS_bdw=$(lfgc_libs) -lm") ;;
    bdwgc) ;;
    mmc) collector=${WHIPPET_MMC:-stack-conservative-parallel-mmc} ;;
    esac
    rm -rf "$out"
    mkdir -p "$out"
    cp -r "$src/." "$out/"
    rm -rf "$out/.git" "$out/obj" "$out/bin" "$out/.deps"
    if ! make -C "$out" -j2 "${vars[@]}" \
            "bin/mt-gcbench.$collector" "bin/quads.$collector" >"$out/build.log" 2>&1; then
        cat "$out/build.log" >&2
        return 1
    fi
    ln -sf "mt-gcbench.$collector" "$out/bin/mt-gcbench"
    ln -sf "quads.$collector" "$out/bin/quads"
}

mode_plan() {
    local plan=$1 src peer
    local bin=$BENCH_BUILD/whippet run=$BENCH_SRCDIR/whippet-run.sh
    mkdir -p "$bin"
    : >"$plan"
    local peers="lfgc bdwgc mmc"
    # Depth 10 quads: a 56 MB long-lived tree; quick: depth 9.
    local depth=10
    [ "$BENCH_QUICK" = 1 ] && depth=9
    if ! src=$(whippet_source); then
        for peer in $peers; do
            for c in mt-gcbench-1t mt-gcbench-2t quads; do
                plan_line whippet "$c" "$peer" wall_s lo \
                    "n/a: no Whippet tree (set WHIPPET_SRC)" >>"$plan"
            done
        done
        return 0
    fi
    for peer in $peers; do
        local cmd_mt cmd_q
        if [ "$peer" = lfgc ] && ! lfgc_available; then
            cmd_mt="n/a: liblfgc.so not built"; cmd_q=$cmd_mt
        elif whippet_build "$peer" "$src" "$bin/$peer"; then
            cmd_mt="'$run' '$bin/$peer/bin/mt-gcbench'"
            cmd_q="'$run' '$bin/$peer/bin/quads'"
        else
            [ "$peer" = lfgc ] || bench_die "Whippet does not build for $peer (see $bin/$peer/build.log)"
            cmd_mt="fail: Whippet's bdw backend does not build against lfgc (see $bin/$peer/build.log)"
            cmd_q=$cmd_mt
        fi
        case $cmd_mt in
        n/a:*|fail:*)
            plan_line whippet mt-gcbench-1t "$peer" wall_s lo "$cmd_mt"
            plan_line whippet mt-gcbench-2t "$peer" wall_s lo "$cmd_mt"
            plan_line whippet quads "$peer" wall_s lo "$cmd_q" ;;
        *)
            plan_line whippet mt-gcbench-1t "$peer" wall_s lo "$cmd_mt 2.5 1"
            plan_line whippet mt-gcbench-2t "$peer" wall_s lo "$cmd_mt 2.5 2"
            plan_line whippet quads "$peer" wall_s lo "$cmd_q $depth 2.5" ;;
        esac >>"$plan"
    done
    # benchrun.py wants each case's peers together, subject first.
    sort -s -t "$(printf '\t')" -k2,2 "$plan" -o "$plan"
}
