#!/bin/sh
# malloc_programs.sh: real programs on liblfgc-malloc (LD_PRELOAD) must
# print what they print with glibc's malloc: python3 running a script,
# sort on a large generated file (several threads), gcc compiling a file,
# git on a small repository.  A missing tool fails the test, loudly (the
# packages come from scripts/setup.sh).
set -u
lib="$(cd "${top_builddir:-.}" && pwd)/.libs/liblfgc-malloc.so"
src="${top_srcdir:-.}"
status=0

if ! test -f "$lib"; then
    echo "FAIL: $lib not built" >&2
    exit 1
fi
for tool in /usr/bin/python3 /usr/bin/sort /usr/bin/gcc /usr/bin/git /usr/bin/cmp; do
    if ! test -x "$tool"; then
        echo "FAIL: $tool is missing: install it (scripts/setup.sh lists python3, coreutils, gcc, git)" >&2
        exit 1
    fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Any bad pointer aborts (the default), which the comparison then shows.
unset LFGC_MALLOC_ERRORS

# Run "$@" with glibc's malloc (into $tmp/NAME.glibc) and with lfgc's
# (into $tmp/NAME.lfgc), each in its own directory; compare stdout and
# the exit status.
compare() {
    name=$1
    shift
    mkdir -p "$tmp/glibc-$name" "$tmp/lfgc-$name"
    (cd "$tmp/glibc-$name" && "$@") > "$tmp/$name.glibc" 2>&1
    echo "exit $?" >> "$tmp/$name.glibc"
    (cd "$tmp/lfgc-$name" && LD_PRELOAD="$lib" "$@") > "$tmp/$name.lfgc" 2>&1
    echo "exit $?" >> "$tmp/$name.lfgc"
    if cmp -s "$tmp/$name.glibc" "$tmp/$name.lfgc"; then
        echo "PASS: $name ($(wc -c < "$tmp/$name.lfgc") bytes of output alike)"
    else
        echo "FAIL: $name prints differently on liblfgc-malloc:" >&2
        diff "$tmp/$name.glibc" "$tmp/$name.lfgc" | head -20 >&2
        status=1
    fi
}

# The preload must take: python's own malloc'ed address lies in the
# low-fat heap (16 TiB and up with the default layout: above 2^40).
where=$(LD_PRELOAD="$lib" /usr/bin/python3 -c '
import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc_usable_size.restype = ctypes.c_size_t
libc.malloc_usable_size.argtypes = [ctypes.c_void_p]
p = libc.malloc(100)
print("lowfat" if p >= 1 << 31 and libc.malloc_usable_size(p) == 112 else "glibc %x" % p)')
if test "$where" != lowfat; then
    echo "FAIL: python3 under LD_PRELOAD=$lib does not use it: $where" >&2
    status=1
fi

cat > "$tmp/script.py" <<'EOF'
import collections, json, re, hashlib
words = [("w%d" % (i * 7919 % 10007)) * (1 + i % 5) for i in range(60000)]
count = collections.Counter(words)
print(len(count), count.most_common(5))
d = {w: [len(w), w.upper(), {"k": i}] for i, w in enumerate(words)}
s = json.dumps(d, sort_keys=True)
print(len(s), hashlib.sha256(s.encode()).hexdigest())
back = json.loads(s)
print(sum(v[0] for v in back.values()))
text = " ".join(words)
print(len(re.findall(r"w1\d+", text)))
big = [bytearray(i % 5000) for i in range(20000)]
print(sum(len(b) for b in big))
del big, d, back
print(sorted(set(words))[:3], sorted(set(words))[-3:])
EOF
compare python3 /usr/bin/python3 "$tmp/script.py"

# 300 000 lines, about 7 MB; sort with two threads and a small buffer
# (temporary files, merges).
awk 'BEGIN { x = 12345; for (i = 0; i < 300000; i++) {
           x = (x * 1103515245 + 12345) % 2147483648;
           printf "%d\tkey%08d\tvalue %d\n", x % 100000, x, i } }' > "$tmp/big.txt"
compare sort sh -c "/usr/bin/sort --parallel=2 -S 8M -T . -k2,2 '$tmp/big.txt' | cksum;
                    /usr/bin/sort -n -s -k1,1 '$tmp/big.txt' | cksum; /usr/bin/sort -u -k1,1n '$tmp/big.txt' | wc -l"

# gcc (cc1 and as under the preload too) compiling one of lfgc's files.
compare gcc sh -c "/usr/bin/gcc -O2 -frandom-seed=1 -I'$src/include' -I'${top_builddir:-.}/include' \
                    -S -o - '$src/gc/malloc.c' | cksum"

# git: a small repository, commits, log, diff, gc, fsck.
compare git sh -c '
    export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
    export GIT_AUTHOR_DATE="2020-01-01T00:00:00Z" GIT_COMMITTER_DATE="2020-01-01T00:00:00Z"
    export HOME=$PWD GIT_CONFIG_NOSYSTEM=1
    /usr/bin/git init -q -b main repo && cd repo || exit 1
    for i in 1 2 3 4 5 6 7 8; do
        seq 1 $((i * 500)) > f$i.txt; seq $i 3 4000 >> f1.txt
        /usr/bin/git add . && /usr/bin/git commit -q -m "commit $i" || exit 1
    done
    /usr/bin/git log --stat --format="%H %s" | cksum
    /usr/bin/git diff HEAD~5 HEAD | cksum
    /usr/bin/git gc -q && /usr/bin/git fsck --no-progress 2>&1
    /usr/bin/git rev-list --all --objects | sort | cksum'

exit $status
