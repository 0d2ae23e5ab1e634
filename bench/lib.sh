# lib.sh: shell helpers shared by lfgc's benchmark scripts.  Source it:
#     . "$(dirname "$0")/lib.sh"
#
# Environment (all optional):
#   abs_top_builddir  lfgc's build directory (set by make; default: the
#                     source tree, i.e. an in-tree build)
#   abs_top_srcdir    lfgc's source directory (default: found from this file)
#   BENCH_QUICK=1     fewer runs and smaller sizes
#   BENCH_RUNS=N      runs per case and peer (default 5, quick 3)
#   BENCH_RESULTS_DIR where CSV files go (default $builddir/bench/results)
#   BENCH_DOCS_DIR    where performance.md and the plots go (default
#                     $srcdir/docs)
#   CC, BENCH_CFLAGS  compiler and flags for the workloads
#   LFGC_LIB          path of liblfgc.so (default: $builddir/.libs/liblfgc.so
#                     or $builddir/gc/.libs/liblfgc.so, whichever exists)
#   LFGC_MALLOC_LIB   path of liblfgc-malloc.so, the malloc that malloc mode
#                     preloads (default: found as LFGC_LIB is)
#   BDWGC_CFLAGS, BDWGC_LIBS  how to build against bdwgc (default: pkg-config)

set -u

BENCH_SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP_SRCDIR=${abs_top_srcdir:-$(cd "$BENCH_SRCDIR/.." && pwd)}
TOP_BUILDDIR=${abs_top_builddir:-$TOP_SRCDIR}
BENCH_BUILD=${BENCH_BUILD:-$TOP_BUILDDIR/bench/build}
BENCH_RESULTS=${BENCH_RESULTS_DIR:-$TOP_BUILDDIR/bench/results}
BENCH_DOCS_OUT=${BENCH_DOCS_DIR:-$TOP_SRCDIR/docs}
BENCH_QUICK=${BENCH_QUICK:-0}
case $BENCH_QUICK in ''|0|no|false) BENCH_QUICK=0 ;; *) BENCH_QUICK=1 ;; esac
if [ "$BENCH_QUICK" = 1 ]; then
    BENCH_RUNS=${BENCH_RUNS:-3}
else
    BENCH_RUNS=${BENCH_RUNS:-5}
fi
CC=${CC:-cc}
BENCH_CFLAGS=${BENCH_CFLAGS:--std=gnu11 -O2 -g -Wall -Wextra}
# The library: make passes LFGC_LIB; otherwise look where libtool puts it
# (a non-recursive build: .libs/, a recursive one: gc/.libs/).
if [ -z "${LFGC_LIB:-}" ]; then
    LFGC_LIB=$TOP_BUILDDIR/gc/.libs/liblfgc.so
    for _l in "$TOP_BUILDDIR/.libs/liblfgc.so" "$TOP_BUILDDIR/gc/.libs/liblfgc.so"; do
        if [ -f "$_l" ]; then LFGC_LIB=$_l; break; fi
    done
    unset _l
fi
if [ -z "${LFGC_MALLOC_LIB:-}" ]; then
    LFGC_MALLOC_LIB=$TOP_BUILDDIR/.libs/liblfgc-malloc.so
    for _l in "$TOP_BUILDDIR/.libs/liblfgc-malloc.so" "$TOP_BUILDDIR/gc/.libs/liblfgc-malloc.so"; do
        if [ -f "$_l" ]; then LFGC_MALLOC_LIB=$_l; break; fi
    done
    unset _l
fi
PYTHON=${PYTHON:-python3}

bench_log() { printf '%s\n' "$*" >&2; }
bench_die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

# bench_need_pkgs PKG...: install the Debian packages that are missing.
bench_need_pkgs() {
    local missing=() p
    for p in "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    bench_log "bench: installing missing packages: ${missing[*]}"
    local sudo=
    [ "$(id -u)" = 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
        { $sudo apt-get update >&2 &&
          $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2; } ||
        bench_die "could not install ${missing[*]}"
}

# bench_need_cmd CMD PKG: make sure CMD exists, installing PKG if not.
bench_need_cmd() {
    command -v "$1" >/dev/null 2>&1 || bench_need_pkgs "$2"
}

# The tools every mode needs.
bench_need_base() {
    bench_need_cmd "$CC" gcc
    bench_need_cmd pkg-config pkg-config
    bench_need_cmd "$PYTHON" python3
}

# lfgc_available: is liblfgc.so built?
lfgc_available() { [ -f "$LFGC_LIB" ]; }

# lfgc_has_symbol NAME: does liblfgc.so export NAME?
lfgc_has_symbol() {
    lfgc_available || return 1
    command -v nm >/dev/null 2>&1 || bench_need_pkgs binutils
    nm -D --defined-only "$LFGC_LIB" 2>/dev/null |
        awk '{print $NF}' | grep -qx "$1"
}

# Compiler flags to build against each collector.
lfgc_cflags() {
    echo "-I$TOP_BUILDDIR/include -I$TOP_SRCDIR/include"
}
lfgc_libs() {
    echo "$LFGC_LIB -Wl,-rpath,$(dirname "$LFGC_LIB") -lpthread"
}
bdwgc_cflags() {
    if [ -n "${BDWGC_LIBS:-}" ]; then echo "${BDWGC_CFLAGS:-}"
    else pkg-config --cflags bdw-gc; fi
}
bdwgc_libs() {
    if [ -n "${BDWGC_LIBS:-}" ]; then echo "$BDWGC_LIBS"
    else pkg-config --libs bdw-gc; fi
}

# bench_build PEER SRC OUT [EXTRA_FLAGS...]: compile one workload source
# against PEER (lfgc or bdwgc).  Prints the compiler's messages; returns its
# status.
bench_build() {
    local peer=$1 src=$2 out=$3
    shift 3
    local cflags libs
    case $peer in
    lfgc)  cflags=$(lfgc_cflags);  libs=$(lfgc_libs) ;;
    bdwgc) cflags=$(bdwgc_cflags); libs=$(bdwgc_libs) ;;
    *) bench_die "bench_build: unknown peer $peer" ;;
    esac
    mkdir -p "$(dirname "$out")"
    # shellcheck disable=SC2086
    $CC $BENCH_CFLAGS $cflags -I"$BENCH_SRCDIR/workloads" "$@" \
        "$src" -o "$out" $libs
}

# bench_machine_info: key=value lines describing the machine and the tree.
bench_machine_info() {
    local commit
    commit=$(git -C "$TOP_SRCDIR" rev-parse --short HEAD 2>/dev/null) ||
        commit=uncommitted
    if [ "$commit" != uncommitted ] &&
       [ -n "$(git -C "$TOP_SRCDIR" status --porcelain 2>/dev/null | head -1)" ]; then
        commit="$commit-dirty"
    fi
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit=$commit"
    echo "cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "cores=$(nproc)"
    echo "mem_gib=$(awk '/^MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)"
    echo "kernel=$(uname -sr)"
    echo "loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "os=$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null)"
    echo "cc=$($CC --version 2>/dev/null | head -1)"
    echo "cflags=$BENCH_CFLAGS"
    echo "bdwgc=$(pkg-config --modversion bdw-gc 2>/dev/null)"
    echo "lfgc_lib=$LFGC_LIB"
    echo "lfgc_malloc_lib=$LFGC_MALLOC_LIB"
    echo "quick=$BENCH_QUICK"
    echo "runs=$BENCH_RUNS"
}

# bench_write_meta NAME: write $BENCH_RESULTS/NAME-meta.txt.
bench_write_meta() {
    mkdir -p "$BENCH_RESULTS"
    bench_machine_info >"$BENCH_RESULTS/$1-meta.txt"
}

# bench_run_plan NAME PLAN STYLE [TITLE]: run a plan with benchrun.py,
# writing NAME-runs.csv and NAME-summary.csv.
bench_run_plan() {
    local name=$1 plan=$2 style=$3 title=${4:-}
    bench_write_meta "$name"
    "$PYTHON" "$BENCH_SRCDIR/benchrun.py" --runs "$BENCH_RUNS" \
        --name "$name" --results "$BENCH_RESULTS" --style "$style" \
        ${title:+--title "$title"} "$plan"
}

# plan_line GROUP CASE PEER KEY BETTER COMMAND...: one line of a plan.
plan_line() {
    local group=$1 case=$2 peer=$3 key=$4 better=$5
    shift 5
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$group" "$case" "$peer" "$key" \
        "$better" "$*"
}
