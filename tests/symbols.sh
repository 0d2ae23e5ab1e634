#!/bin/sh
# symbols.sh: the names lfgc puts in a program's namespace.
#
# liblfgc.so exports exactly the public API: GC_* (bdwgc's), lfgc_* and
# lowfat_*.  liblfgc.a, whose internal names reach a static program's
# namespace whatever their visibility, defines no global name outside those
# and the internal prefix lf_ (an unprefixed name such as `warn` would take
# over the program's or libc's).
#
# In liblfgc.a every writable variable of the library lies in the section
# lf_unscanned, which the root scan leaves out: in a static link the
# library's data are the program's, and .data/.bss are scanned (a region
# bound, a count or a saved register there could pin a slot).
set -u
lib="${top_builddir:-.}/.libs"
NM="${NM:-nm}"
status=0

for f in "$lib/liblfgc.so" "$lib/liblfgc.a"; do
    if ! test -f "$f"; then
        echo "FAIL: $f not built" >&2
        exit 1
    fi
done

dyn=$($NM -D --defined-only "$lib/liblfgc.so" | awk 'NF >= 3 { print $3 }')
bad=$(printf '%s\n' "$dyn" | grep -v -E '^(GC_|lfgc_|lowfat_)' || true)
if test -n "$bad"; then
    echo "FAIL: liblfgc.so exports names outside GC_*, lfgc_*, lowfat_*:" >&2
    printf '  %s\n' $bad >&2
    status=1
fi
# The symbols must be unversioned (see gc/liblfgc.map).
ver=$(printf '%s\n' "$dyn" | grep '@' || true)
if test -n "$ver"; then
    echo "FAIL: liblfgc.so exports versioned symbols:" >&2
    printf '  %s\n' $ver >&2
    status=1
fi
for want in GC_malloc GC_gcollect GC_gc_no lfgc_get_stats lowfat_sizes lowfat_heap_top; do
    if ! printf '%s\n' "$dyn" | grep -q -x "$want"; then
        echo "FAIL: liblfgc.so does not export $want" >&2
        status=1
    fi
done

bad=$($NM -g --defined-only "$lib/liblfgc.a" | awk 'NF >= 3 { print $3 }' |
      grep -v -E '^(GC_|lfgc_|lowfat_|lf_)' | sort -u || true)
if test -n "$bad"; then
    echo "FAIL: liblfgc.a defines global names without a prefix (GC_, lfgc_, lowfat_, lf_):" >&2
    printf '  %s\n' $bad >&2
    status=1
fi

# objdump -t: "address flags section size name"; data objects (flag O) in
# .data*, .bss* or COMMON, but for the read-only-after-relocation
# .data.rel.ro* (RELRO is not scanned).
OBJDUMP="${OBJDUMP:-objdump}"
scanned=$($OBJDUMP -t "$lib/liblfgc.a" |
          awk '$1 ~ /^[0-9a-f]+$/ && / O / {
                   for (i = 2; i < NF; i++)
                       if ($i ~ /^(\.data|\.bss|\*COM\*)/ && $i !~ /^\.data\.rel\.ro/) {
                           print $NF " (" $i ")"; break
                       }
               }' | sort -u)
if test -n "$scanned"; then
    echo "FAIL: liblfgc.a has variables outside lf_unscanned (define them LF_UNSCANNED):" >&2
    printf '%s\n' "$scanned" | sed 's/^/  /' >&2
    status=1
fi

test $status = 0 && echo "PASS: $(printf '%s\n' "$dyn" | wc -l) exported names, all public; liblfgc.a's names all prefixed, its variables all unscanned"
exit $status
