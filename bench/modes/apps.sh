# modes/apps.sh: the low-fat paper's applications (examples/) against the
# plain way of doing the same thing: bounds-checked memcpy, hidden
# metadata, size-typed 2-3-4 tree nodes, low-fat vectors.  One program,
# workloads/lowfat_apps.c, built with examples/'s headers and linked with
# lfgc's malloc (liblfgc-malloc); peer "lfgc" runs the low-fat version,
# peer "plain" the plain one, on the same malloc.  The key is CPU ns per
# operation (peak RSS for vec-small).  See modes/gc.sh for what a mode
# file defines.

MODE_TITLE="the low-fat paper's applications (examples/): low-fat version vs plain, both on lfgc's malloc"

mode_prepare() { :; }

mode_plan() {
    local plan=$1 q=$BENCH_QUICK scale=1 bin=$BENCH_BUILD/apps/lowfat_apps
    [ "$q" = 1 ] && scale=0.3
    mkdir -p "$(dirname "$bin")"
    : >"$plan"
    local run
    if ! lfgc_available || [ ! -f "$LFGC_MALLOC_LIB" ]; then
        run="n/a: liblfgc-malloc.so not built ($LFGC_MALLOC_LIB)"
    else
        # shellcheck disable=SC2086
        if ! $CC $BENCH_CFLAGS $(lfgc_cflags) -I"$TOP_SRCDIR/examples" \
                -I"$BENCH_SRCDIR/workloads" \
                "$BENCH_SRCDIR/workloads/lowfat_apps.c" -o "$bin" \
                "$LFGC_MALLOC_LIB" -Wl,-rpath,"$(dirname "$LFGC_MALLOC_LIB")" \
                $(lfgc_libs) 2>"$bin.log"; then
            cat "$bin.log" >&2
            bench_die "lowfat_apps does not build (see $bin.log)"
        fi
        run="'$bin'"
    fi
    local c key
    for c in memcpy meta tree234 vec-build vec-access vec-small; do
        key=ns_per_op
        [ "$c" = vec-small ] && key=peak_rss_kb
        local lf=$run pl=$run
        case $run in
        n/a:*) ;;
        *) lf="$run $c lowfat $scale"; pl="$run $c plain $scale" ;;
        esac
        plan_line apps "$c" lfgc "$key" lo "$lf" >>"$plan"
        plan_line apps "$c" plain "$key" lo "$pl" >>"$plan"
    done
}
