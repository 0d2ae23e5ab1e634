#!/bin/sh
# scripts/setup.sh: make a Debian 12 machine ready to build lfgc, then build it.
#
# Installs whichever of the packages below is missing (apt-get runs only when
# something is), then runs ./autogen.sh, ./configure --enable-werror and
# make -j2 in the source tree.  Safe to run again.  Arguments are passed on
# to ./configure, e.g. scripts/setup.sh --enable-valgrind-layout
set -eu

cd "$(dirname "$0")/.."

packages="build-essential autoconf automake libtool pkg-config
libatomic-ops-dev libcriterion-dev libgc-dev libjemalloc2 libmimalloc2.0
libtcmalloc-minimal4 gnuplot-nox hyperfine time valgrind git python3
ecl guile-3.0 guile-3.0-dev mmv neko w3m"

if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup.sh: this script expects a Debian system (dpkg and apt-get)" >&2
    exit 1
fi

missing=
for p in $packages; do
    if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
        missing="$missing $p"
    fi
done

if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        as_root=
    elif command -v sudo >/dev/null 2>&1; then
        as_root=sudo
    else
        echo "setup.sh: missing packages:$missing" >&2
        echo "setup.sh: run as root (or install sudo) to install them" >&2
        exit 1
    fi
    echo "setup.sh: installing:$missing"
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    # shellcheck disable=SC2086 # word splitting of the package list is wanted
    $as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends $missing
else
    echo "setup.sh: all required packages are installed"
fi

./autogen.sh
./configure --enable-werror "$@"
make -j2
echo "setup.sh: lfgc is built; try 'make demo' and 'make check'"
