#!/bin/sh
# compat_table.sh: docs/compatibility.md's table matches what liblfgc.so
# exports, for every name Debian's bdwgc 8.2.2 libgc.so.1 exports.
#
# The list of bdwgc's names is kept in tests/bdwgc-8.2.2-exports.txt (so
# the check runs without libgc1); when the system's libgc.so.1 is there,
# its list is compared with the kept one and a difference is reported.
set -u
top_builddir="${top_builddir:-.}"
top_srcdir="${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}"
NM="${NM:-nm}"
lib="$top_builddir/.libs/liblfgc.so"
doc="$top_srcdir/docs/compatibility.md"
list="$top_srcdir/tests/bdwgc-8.2.2-exports.txt"
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

test -f "$lib" || { echo "FAIL: $lib not built" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lfgc-compat.XXXXXX")
trap 'rm -rf "$work"' EXIT

$NM -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sort -u >"$work/lfgc"
sort -u "$list" >"$work/bdwgc"
sys=/usr/lib/x86_64-linux-gnu/libgc.so.1
if test -e "$sys"; then
    $NM -D --defined-only "$sys" | awk 'NF >= 3 { print $3 }' | sort -u >"$work/sys"
    if ! cmp -s "$work/sys" "$work/bdwgc"; then
        echo "NOTE: the system's libgc.so.1 exports a different list than" \
             "tests/bdwgc-8.2.2-exports.txt:" >&2
        diff "$work/bdwgc" "$work/sys" | sed -n 's/^[<>]/  &/p' >&2
    fi
fi

# Table rows: | `NAME` | header | status | notes |
sed -n 's/^| `\([^`]*\)` | \([^|]*\) | \([^|]*\) | \(.*\) |$/\1|\3|\4/p' "$doc" |
    sed 's/ *|/|/g' >"$work/rows"
cut -d'|' -f1 "$work/rows" | sort | uniq -d >"$work/dups"
test -s "$work/dups" && fail "docs/compatibility.md lists these twice: $(tr '\n' ' ' <"$work/dups")"

checked=0
while read -r name; do
    row=$(grep "^$name|" "$work/rows" | head -n 1)
    if test -z "$row"; then
        fail "$name (exported by bdwgc) has no row in docs/compatibility.md"
        continue
    fi
    st=$(printf '%s' "$row" | cut -d'|' -f2)
    note=$(printf '%s' "$row" | cut -d'|' -f3)
    exported=no
    grep -q -x "$name" "$work/lfgc" && exported=yes
    case "$st" in
    provided)
        test $exported = yes || fail "$name: 'provided' but liblfgc.so does not export it" ;;
    difference|no-op)
        test $exported = yes || fail "$name: '$st' but liblfgc.so does not export it"
        test -n "$note" || fail "$name: '$st' needs a note saying what lfgc does" ;;
    "not yet (#15)"|internal)
        test $exported = no ||
            fail "$name: liblfgc.so exports it now; update its row ('$st') in docs/compatibility.md" ;;
    *)
        fail "$name: unknown status '$st' in docs/compatibility.md" ;;
    esac
    checked=$((checked + 1))
done <"$work/bdwgc"

# No row for a name bdwgc does not export (a typo would hide a real row).
cut -d'|' -f1 "$work/rows" | while read -r name; do
    grep -q -x "$name" "$work/bdwgc" || echo "$name"
done >"$work/extra"
test -s "$work/extra" && fail "docs/compatibility.md has rows for names bdwgc does not export: $(tr '\n' ' ' <"$work/extra")"

test $status = 0 && echo "PASS: docs/compatibility.md agrees with liblfgc.so on all $checked names bdwgc exports"
exit $status
