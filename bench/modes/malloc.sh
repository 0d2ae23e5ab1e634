# modes/malloc.sh: malloc mode: lfgc as the process's malloc
# (liblfgc-malloc.so, preloaded) against glibc's malloc and the allocators
# Debian packages, each preloaded the same way.  See modes/gc.sh for what a
# mode file defines.
#
# Every workload (workloads/malloc_*.c) is built once, against nothing but
# the C library, and run under each allocator with LD_PRELOAD; "glibc" is
# the run with nothing preloaded.  The real programs (gcc, python3) run
# under workloads/malloc_exec.c, which checks that their output is the one
# they gave with glibc.
#
#   LFGC_MALLOC_LIB=/path/liblfgc-malloc.so   the subject (see lib.sh)
#   BENCH_MALLOC_PEERS="glibc mimalloc"       only these peers (lfgc is
#                                             always run when built)

MODE_TITLE="malloc mode: lfgc (liblfgc-malloc.so) vs glibc, mimalloc, jemalloc, tcmalloc, preloaded"

# Debian's packages of the peers, and the library each preloads.
MALLOC_LIBDIR=/usr/lib/x86_64-linux-gnu
MALLOC_PEERS=${BENCH_MALLOC_PEERS:-glibc mimalloc jemalloc tcmalloc}

malloc_peer_lib() {
    case $1 in
    glibc)    echo "" ;;
    mimalloc) echo "$MALLOC_LIBDIR/libmimalloc.so.2" ;;
    jemalloc) echo "$MALLOC_LIBDIR/libjemalloc.so.2" ;;
    tcmalloc) echo "$MALLOC_LIBDIR/libtcmalloc_minimal.so.4" ;;
    lfgc)     echo "$LFGC_MALLOC_LIB" ;;
    *) bench_die "malloc mode: unknown peer $1" ;;
    esac
}

mode_prepare() {
    bench_need_pkgs libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4
    bench_need_cmd gcc gcc
}

# malloc_build NAME [FLAGS...]: compile workloads/NAME.c into $MALLOC_BIN.
malloc_build() {
    local w=$1 out=$MALLOC_BIN/$1
    shift
    # shellcheck disable=SC2086
    if ! $CC $BENCH_CFLAGS -I"$BENCH_SRCDIR/workloads" "$@" \
            "$BENCH_SRCDIR/workloads/$w.c" -o "$out" 2>"$out.log"; then
        cat "$out.log" >&2
        bench_die "$w does not build (see $out.log)"
    fi
    [ -s "$out.log" ] && cat "$out.log" >&2
    return 0
}

# malloc_case GROUP CASE ARGS...: one plan line per allocator, running ARGS
# (a command; its RESULT line's wall_s is the key) with that allocator
# preloaded.  MALLOC_ENV: more environment for the command.
malloc_case() {
    local group=$1 case=$2 peer lib cmd
    shift 2
    for peer in lfgc $MALLOC_PEERS; do
        lib=$(malloc_peer_lib "$peer")
        if [ "$peer" = lfgc ] && [ ! -f "$lib" ]; then
            cmd="n/a: liblfgc-malloc.so not built ($lib)"
        elif [ -n "$lib" ] && [ ! -f "$lib" ]; then
            bench_die "malloc mode: $peer's library $lib is missing"
        else
            cmd="env${MALLOC_ENV:+ $MALLOC_ENV}${lib:+ LD_PRELOAD='$lib'} $*"
        fi
        plan_line "$group" "$case" "$peer" wall_s lo "$cmd"
    done
}

mode_plan() {
    local plan=$1 q=$BENCH_QUICK
    MALLOC_BIN=$BENCH_BUILD/malloc
    mkdir -p "$MALLOC_BIN"
    : >"$plan"
    local b=$MALLOC_BIN

    # 1. Single-thread small-object churn (batches, then a working set).
    malloc_build malloc_churn
    malloc_case single churn "'$b/malloc_churn'" "$([ "$q" = 1 ] && echo 5 || echo 20)" >>"$plan"

    # 2. Mixed sizes, 8 B..32 KiB, with realloc growing and shrinking.
    malloc_build malloc_realloc
    malloc_case single realloc "'$b/malloc_realloc'" "$([ "$q" = 1 ] && echo 0.3 || echo 1)" >>"$plan"

    # 3. Producer/consumer: every free is of another thread's object.
    malloc_build malloc_xthread -pthread
    malloc_case threads xthread "'$b/malloc_xthread'" 1 "$([ "$q" = 1 ] && echo 3 || echo 10)" >>"$plan"

    # 4. Larson-style server: threads replaced, objects inherited.
    malloc_build malloc_larson -pthread
    malloc_case threads larson "'$b/malloc_larson'" 2 "$([ "$q" = 1 ] && echo 3 || echo 10)" >>"$plan"

    # 5. Cache-scratch: false sharing through a reused object.
    malloc_build malloc_cscratch -pthread
    malloc_case threads cscratch "'$b/malloc_cscratch'" 2 1000 8 "$([ "$q" = 1 ] && echo 5000 || echo 20000)" >>"$plan"

    # 6. Rounds of threads with working sets of their own, half calloc'ed.
    malloc_build malloc_threadset -pthread
    malloc_case threads threadset "'$b/malloc_threadset'" 16 4 "$([ "$q" = 1 ] && echo 1 || echo 4)" >>"$plan"

    # 7. Real programs, their output checked against glibc's.
    malloc_build malloc_exec
    local hash src=$b/gcc-input.c fns=60 rounds=20
    [ "$q" = 1 ] && { fns=20; rounds=8; }
    "$PYTHON" "$BENCH_SRCDIR/workloads/malloc_gencode.py" "$fns" >"$src"
    hash=$("$b/malloc_exec" gcc print -- "$CC" -O2 -S -o - "$src") ||
        bench_die "malloc mode: $CC cannot compile $src"
    malloc_case real gcc "'$b/malloc_exec'" gcc "$hash" -- "'$CC'" -O2 -S -o - "'$src'" >>"$plan"
    hash=$(PYTHONMALLOC=malloc "$b/malloc_exec" python3 print -- "$PYTHON" \
           "$BENCH_SRCDIR/workloads/malloc_py.py" "$rounds") ||
        bench_die "malloc mode: $PYTHON cannot run workloads/malloc_py.py"
    MALLOC_ENV=PYTHONMALLOC=malloc \
        malloc_case real python3 "'$b/malloc_exec'" python3 "$hash" -- "'$PYTHON'" \
        "'$BENCH_SRCDIR/workloads/malloc_py.py'" "$rounds" >>"$plan"
}
