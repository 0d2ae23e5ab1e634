#!/bin/sh
# whippet-run.sh PROGRAM ARGS...: run one of Whippet's benchmarks under
# /usr/bin/time and turn its closing summary into the RESULT line that
# benchrun.py reads (field names as bench/README.md gives them).  Whippet
# prints:
#   Completed N major collections (M minor).
#   T ms total time (S stopped); C ms CPU time (CS stopped).
#   P ms median pause time, P95 p95, MAX max.
# Whippet's own CPU figure is the calling thread's; cpu_s here is the
# process's user + system time.
tf=$(mktemp) || exit 1
trap 'rm -f "$tf"' EXIT
out=$(/usr/bin/time -f 'TIME %U %S %M' -o "$tf" "$@" 2>&1) || {
    printf '%s\n' "$out" | tail -20 >&2
    exit 1
}
{ printf '%s\n' "$out"; cat "$tf"; } | awk '
/major collections/ { gsub(/[()]/, ""); major = $2; minor = $5 }
/ms total time/     { gsub(/[();]/, ""); wall = $1; stopped = $5 }
/median pause time/ { gsub(/,/, ""); median = $1; p95 = $6; maxp = $8 }
/^TIME /            { cpu = $2 + $3; rss = $4 }
END {
    if (wall == "" || rss == "") {
        print "whippet-run: no summary in the output" > "/dev/stderr"; exit 1
    }
    printf "RESULT collector=whippet-bench wall_s=%.4f cpu_s=%.3f gcs=%d major=%s minor=%s stopped_ms=%s median_pause_ms=%s p95_pause_ms=%s max_pause_ms=%s peak_rss_kb=%s check=ok\n",
        wall / 1000, cpu, major + minor, major, minor, stopped, median, p95, maxp, rss
}'
