# modes/runtimes.sh: Debian's Guile, ECL and neko, unmodified, on lfgc's
# drop-in libgc.so.1 against the system's bdwgc.  The workloads are the
# integration test's (tests/runtimes/), scaled up (LFGC_RT_SCALE); ECL
# compiles to bytecodes only here (LFGC_RT_NO_CC), so that the C
# compiler's time does not hide the collector's.  Each run's output must
# equal a reference run's on bdwgc.  See modes/gc.sh for what a mode file
# defines.
#
#   RT_SCALE=N   work multiplier (default 4, quick 2)

MODE_TITLE="Language runtimes (Debian's guile-3.0, ecl, neko) on lfgc's libgc.so.1 vs bdwgc"

mode_prepare() {
    bench_need_pkgs libgc1 neko ecl guile-3.0 guile-3.0-dev time
}

# rt_missing LIB: the GC_* calls LIB needs that lfgc does not export.
rt_missing() {
    local s miss=
    for s in $(nm -D --undefined-only "$1" | awk '$2 ~ /^GC_/ { print $2 }'); do
        lfgc_has_symbol "$s" || miss="$miss $s"
    done
    echo "$miss"
}

# rt_case NAME LIB DIR CMD...: the plan lines of one runtime, after one
# reference run on bdwgc (in DIR) whose output every timed run must repeat.
rt_case() {
    local name=$1 lib=$2 dir=$3 tries=3 miss
    shift 3
    local ref=$RT_DIR/$name.ref
    # Guile 3.0.8 itself crashes in par-map now and then on bdwgc: retry.
    until (cd "$dir" && "$@") >"$ref" 2>"$ref.err"; do
        tries=$((tries - 1))
        [ $tries -gt 0 ] || bench_die "$name fails on bdwgc (see $ref.err)"
    done
    local cmd="cd '$dir' && '$BENCH_SRCDIR/workloads/runtime_run.sh'"
    local args
    args=$(printf " '%s'" "$@")
    miss=$(rt_missing "$lib")
    if ! lfgc_available; then
        plan_line runtimes "$name" lfgc wall_s lo "n/a: liblfgc.so not built"
    elif [ -n "$miss" ]; then
        plan_line runtimes "$name" lfgc wall_s lo "n/a: lfgc does not export$miss"
    else
        plan_line runtimes "$name" lfgc wall_s lo "$cmd lfgc $name '$ref'$args"
    fi
    plan_line runtimes "$name" bdwgc wall_s lo "$cmd bdwgc $name '$ref'$args"
}

mode_plan() {
    local plan=$1 scale=${RT_SCALE:-4} src=$TOP_SRCDIR/tests/runtimes
    [ "$BENCH_QUICK" = 1 ] && scale=${RT_SCALE:-2}
    RT_DIR=$BENCH_BUILD/runtimes
    rm -rf "$RT_DIR"
    mkdir -p "$RT_DIR/go" "$RT_DIR/ecl"
    export LFGC_RUN_LIBDIR
    LFGC_RUN_LIBDIR=$(dirname "$LFGC_LIB")
    export HOME=$RT_DIR GUILE_AUTO_COMPILE=0 LFGC_RT_SCALE=$scale LFGC_RT_NO_CC=1
    export LFGC_ECL_WORK=$RT_DIR/ecl/
    : >"$plan"

    cp "$src/alloc.neko" "$RT_DIR/"
    (cd "$RT_DIR" && nekoc alloc.neko >/dev/null) || bench_die "nekoc failed"
    rt_case neko "$(ldconfig -p | awk '$1 == "libneko.so.2" { print $NF; exit }')" \
        "$RT_DIR" neko alloc.n >>"$plan"

    rt_case ecl "$(ldconfig -p | awk '$1 ~ /^libecl\.so\./ { print $NF; exit }')" \
        "$RT_DIR" ecl --norc --shell "$src/ecl.lisp" >>"$plan"

    guild-3.0 compile -o "$RT_DIR/go/lfgc-mod.go" "$src/lfgc-mod.scm" >/dev/null ||
        bench_die "guild compile failed"
    # As in tests/runtimes.sh, on both collectors: Guile's VM stack race
    # must not zero memory that is not Guile's (tests/guile_stack_guard.c).
    $CC -O2 -shared -fPIC -o "$RT_DIR/guile_stack_guard.so" \
        "$TOP_SRCDIR/tests/guile_stack_guard.c" -ldl ||
        bench_die "cannot build tests/guile_stack_guard.c"
    rt_case guile "$(ldconfig -p | awk '$1 == "libguile-3.0.so.1" { print $NF; exit }')" \
        "$RT_DIR" env LD_PRELOAD="$RT_DIR/guile_stack_guard.so" \
        guile-3.0 --no-auto-compile -C "$RT_DIR/go" "$src/gc.scm" >>"$plan"
}
