#!/bin/bash
# callgrind.sh: instruction counts of lfgc and bdwgc, exactly, with valgrind.
#
#   bench/callgrind.sh            (make bench runs it in a full run)
#
# valgrind cannot map lfgc's default heap (16..18 TiB), so lfgc is built a
# second time with ./configure --enable-valgrind-layout, in
# $abs_top_builddir/bench/build/vg (from a copy of the sources: a source tree
# that is itself configured cannot host a VPATH build).  Then
# workloads/cg_probe.c is built against that library and against bdwgc, and
# callgrind.py runs it under callgrind and writes
# bench/results/callgrind.csv: instructions per allocation (fast path and
# all-in), per word of live data marked, and per base lookup.  The fast
# paths of malloc and free (manual mode) come from workloads/cg_malloc.c run
# with that build's liblfgc-malloc.so preloaded.
#
#   LFGC_VG_LIB=/path/liblfgc.so  use this valgrind-layout build instead
#   (with LFGC_VG_INCLUDE=/its/include/dir)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -eu
. "$(dirname "$0")/lib.sh"

bench_need_base
bench_need_pkgs valgrind libgc-dev

VG=$BENCH_BUILD/vg
mkdir -p "$VG"

# Build lfgc with the valgrind layout; sets vg_lib and vg_inc.
build_vg_lfgc() {
    if [ -n "${LFGC_VG_LIB:-}" ]; then
        vg_lib=$LFGC_VG_LIB
        vg_inc=${LFGC_VG_INCLUDE:-$(dirname "$LFGC_VG_LIB")/../include}
        return 0
    fi
    local src=$VG/src item
    mkdir -p "$src"
    # Copy the sources (not the in-tree build products); cp -u keeps the
    # copy's own objects valid when nothing changed.
    for item in configure.ac Makefile.am autogen.sh configure Makefile.in \
                aclocal.m4 build-aux m4 gc tests scripts lfgc.pc.in lfgc-malloc.pc.in \
                README.md; do
        [ -e "$TOP_SRCDIR/$item" ] && cp -a -u "$TOP_SRCDIR/$item" "$src/"
    done
    mkdir -p "$src/include"
    for item in "$TOP_SRCDIR"/include/*; do
        case $(basename "$item") in lfgc_config.h) continue ;; esac
        cp -a -u "$item" "$src/include/"
    done
    rm -f "$src/gc"/*.o "$src/gc"/*.lo 2>/dev/null || true
    (
        cd "$src"
        if [ ! -x configure ]; then
            bench_need_pkgs autoconf automake libtool
            ./autogen.sh >"$VG/autogen.log" 2>&1 ||
                { cat "$VG/autogen.log" >&2; exit 1; }
        fi
        if [ ! -f config.status ] ||
           ! grep -q -- '--enable-valgrind-layout' config.status; then
            bench_need_pkgs libatomic-ops-dev libcriterion-dev
            ./configure --enable-valgrind-layout >"$VG/configure.log" 2>&1 ||
                { tail -30 "$VG/configure.log" >&2; exit 1; }
        fi
        make -j2 liblfgc.la liblfgc-malloc.la >"$VG/make.log" 2>&1 ||
            { tail -30 "$VG/make.log" >&2; exit 1; }
    ) || return 1
    vg_lib=$src/.libs/liblfgc.so
    [ -f "$vg_lib" ] || vg_lib=$src/gc/.libs/liblfgc.so
    vg_malloc_lib=$(dirname "$vg_lib")/liblfgc-malloc.so
    vg_inc=$src/include
    [ -f "$vg_lib" ]
}

probes=()
status=0
bench_log "callgrind: building lfgc with --enable-valgrind-layout in $VG"
if build_vg_lfgc; then
    # Build the probe against that library (its own lfgc_config.h).
    if ( TOP_BUILDDIR=$vg_inc/.. TOP_SRCDIR=$vg_inc/.. LFGC_LIB=$vg_lib
         bench_build lfgc "$BENCH_SRCDIR/workloads/cg_probe.c" \
             "$VG/cg_probe-lfgc" ); then
        probes+=("lfgc=$VG/cg_probe-lfgc")
    else
        bench_log "callgrind: cg_probe does not build against lfgc"
        probes+=("lfgc=n/a")
        status=1
    fi
else
    bench_log "callgrind: could not build lfgc with the valgrind layout (logs in $VG)"
    probes+=("lfgc=n/a")
    status=1
fi
bench_build bdwgc "$BENCH_SRCDIR/workloads/cg_probe.c" "$VG/cg_probe-bdwgc" ||
    bench_die "cg_probe does not build against bdwgc"
probes+=("bdwgc=$VG/cg_probe-bdwgc")

malloc_args=()
if [ -n "${vg_malloc_lib:-}" ] && [ -f "$vg_malloc_lib" ] &&
   $CC $BENCH_CFLAGS "$BENCH_SRCDIR/workloads/cg_malloc.c" -o "$VG/cg_malloc"; then
    malloc_args=(--malloc-lib "$vg_malloc_lib" --malloc-probe "$VG/cg_malloc")
else
    bench_log "callgrind: no liblfgc-malloc.so or cg_malloc: malloc's fast paths not counted"
    status=1
fi

mkdir -p "$BENCH_RESULTS"
bench_write_meta callgrind
"$PYTHON" "$BENCH_SRCDIR/callgrind.py" --out "$VG/out" "${malloc_args[@]}" \
    --csv "$BENCH_RESULTS/callgrind.csv" "${probes[@]}" || status=1
bench_log "callgrind: wrote $BENCH_RESULTS/callgrind.csv"
exit $status
