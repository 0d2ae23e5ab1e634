#!/bin/sh
# Generate ./configure and Makefile.in from configure.ac and Makefile.am.
# Needs the Debian packages autoconf, automake, libtool and pkg-config
# (scripts/setup.sh installs them).
set -e
cd "$(dirname "$0")"

missing=
command -v autoreconf >/dev/null 2>&1 || missing="$missing autoconf"
command -v automake   >/dev/null 2>&1 || missing="$missing automake"
command -v libtoolize >/dev/null 2>&1 || missing="$missing libtool"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
if [ -n "$missing" ]; then
    echo "autogen.sh: missing tools; install them with:" >&2
    echo "    apt-get install$missing" >&2
    echo "(or run scripts/setup.sh, which installs every dependency)" >&2
    exit 1
fi

mkdir -p m4
autoreconf -fi
echo "autogen.sh: done; now run ./configure"
