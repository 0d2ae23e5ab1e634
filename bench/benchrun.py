#!/usr/bin/env python3
"""benchrun.py: run a benchmark plan interleaved, take medians, print tables,
write CSV.

Standard library only.  The plan (a file, or - for stdin) has one line per
(case, peer), tab-separated:

    group  case  peer  key  better  command...

  group    what the case belongs to (trees, mt, scale, ...): report.py groups
           by it
  case     unique name of the case (a table row)
  peer     collector or allocator the command runs against; the subject
           (--subject, default lfgc) is compared against every other peer
  key      the case's headline field of the RESULT line (wall_s, allocs_per_s,
           ns_per_call, ...)
  better   lo or hi: whether a smaller or a larger key is better
  command  run with /bin/sh -c; or "n/a: reason" for a pair that cannot run,
           or "fail: reason" for one that should but cannot (a build error)

Lines starting with # and empty lines are ignored.  Each command must print a
line "RESULT key=value ..." on stdout (the last one counts).  Exit status 77
means "cannot run here" (recorded as n/a with the RESULT line's note=).

For each case, in plan order, the peers run one after another, N rounds
(subject, peer, subject, peer, ...), so that drifts of the machine hit all
peers alike.  Medians of every numeric field are taken per peer; ratios are
subject / peer (for 'hi' keys, peer / subject: below 1 always means the
subject is better).
"""

import argparse
import csv
import math
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time

# Fields shown in the tables, in order: (field, header, format)
MAIN_FIELDS = [
    ("wall_s", "wall s", "{:.3f}"),
    ("cpu_s", "cpu s", "{:.3f}"),
    ("gcs", "GCs", "{:.0f}"),
    ("max_pause_ms", "max pause ms", "{:.2f}"),
    ("p99_pause_ms", "p99 pause ms", "{:.2f}"),
    ("peak_rss_kb", "peak RSS MB", None),  # shown in MB
]

# Fields whose ratio is reported in the summary CSV (subject / peer).
RATIO_FIELDS = ["wall_s", "cpu_s", "gcs", "max_pause_ms", "p99_pause_ms",
                "peak_rss_kb"]


def log(msg="", end="\n"):
    sys.stderr.write(msg + end)
    sys.stderr.flush()


def parse_plan(path):
    f = sys.stdin if path == "-" else open(path)
    cases = []          # [(group, case, key, better)]
    cmds = {}           # case -> [(peer, command)]
    for lineno, line in enumerate(f, 1):
        line = line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) < 6:
            sys.exit(f"benchrun: plan line {lineno}: want 6 tab-separated "
                     f"fields, got {len(parts)}: {line!r}")
        group, case, peer, key, better = parts[:5]
        command = "\t".join(parts[5:])
        if better not in ("lo", "hi"):
            sys.exit(f"benchrun: plan line {lineno}: better must be lo or hi")
        if case not in cmds:
            cases.append((group, case, key, better))
            cmds[case] = []
        cmds[case].append((peer, command))
    return cases, cmds


def parse_result(stdout):
    result = None
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            result = line
    if result is None:
        return None
    fields = {}
    for tok in result.split()[1:]:
        if "=" in tok:
            k, v = tok.split("=", 1)
            fields[k] = v
    return fields


def as_number(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def run_one(command, timeout):
    """Run one command; return (status, fields, detail)."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(["/bin/sh", "-c", command], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout,
                           errors="replace")
    except subprocess.TimeoutExpired:
        return "timeout", {}, f"no result after {timeout} s"
    elapsed = time.monotonic() - t0
    fields = parse_result(p.stdout) or {}
    fields.setdefault("elapsed_s", f"{elapsed:.3f}")
    tail = "\n".join(p.stderr.strip().splitlines()[-8:])
    rc = p.returncode
    if rc == 77:
        return "n/a", fields, fields.get("note", "not supported")
    if rc < 0 or rc >= 128:
        sig = -rc if rc < 0 else rc - 128
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return "crash", fields, f"killed by {name}\n{tail}"
    if rc != 0:
        return "fail", fields, f"exit status {rc}\n{tail}"
    if not fields.get("check"):
        return "fail", fields, f"no RESULT line\n{tail}"
    if fields.get("check") != "ok":
        return "fail", fields, f"check={fields.get('check')}\n{tail}"
    return "ok", fields, ""


def fmt_num(v, fmt):
    if v is None:
        return "-"
    return fmt.format(v)


def fmt_key(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.2f}M"
    if a >= 1e4:
        return f"{v / 1e3:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.3f}"
    return f"{v:.4f}"


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}x"


def ratio(subj, peer, better="lo"):
    if subj is None or peer is None:
        return None
    if better == "hi":
        subj, peer = peer, subj
    if peer == 0:
        return None if subj != 0 else 1.0
    return subj / peer


class Table:
    """A plain text table, printed row by row as results arrive."""

    def __init__(self, columns, out=sys.stdout):
        self.columns = columns          # [(header, width, align)]
        self.out = out

    def line(self, cells):
        parts = []
        for (hdr, width, align), cell in zip(self.columns, cells):
            cell = str(cell)
            parts.append(cell.ljust(width) if align == "<"
                         else cell.rjust(width))
        self.out.write("  ".join(parts).rstrip() + "\n")
        self.out.flush()

    def header(self):
        self.line([c[0] for c in self.columns])
        self.line(["-" * c[1] for c in self.columns])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plan", help="plan file, or - for stdin")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--subject", default="lfgc")
    ap.add_argument("--reference", default="arena",
                    help="comma-separated peers that are reference points, "
                    "not rivals (no collector): shown, with ratios, but "
                    "left out of the geometric means")
    ap.add_argument("--name", default="bench",
                    help="prefix of the CSV files (runs, summary)")
    ap.add_argument("--results", default=None,
                    help="directory for the CSV files (none: no CSV)")
    ap.add_argument("--style", choices=["suite", "metrics"], default="suite",
                    help="suite: one row per case and peer; metrics: one "
                    "row per metric, peers side by side (for one case)")
    ap.add_argument("--timeout", type=float,
                    default=float(os.environ.get("BENCH_TIMEOUT", "900")))
    ap.add_argument("--title", default=None)
    args = ap.parse_args()

    cases, cmds = parse_plan(args.plan)
    if not cases:
        sys.exit("benchrun: empty plan")

    runs_rows = []       # every run
    summary_rows = []    # medians per case and peer
    failures = []
    time_ratios, rss_ratios = [], []

    if args.title:
        print(args.title)
        print()

    suite_table = Table([("case", 20, "<"), ("peer", 7, "<"),
                         ("wall s", 8, ">"), ("cpu s", 8, ">"),
                         ("GCs", 5, ">"), ("max ms", 8, ">"),
                         ("p99 ms", 8, ">"), ("RSS MB", 8, ">"),
                         ("key", 14, "<"), ("value", 9, ">"),
                         ("ratio", 7, ">"), ("note", 0, "<")])
    if args.style == "suite":
        suite_table.header()

    for group, case, key, better in cases:
        peers = cmds[case]
        per_peer = {peer: [] for peer, _ in peers}
        status = {peer: [] for peer, _ in peers}
        notes = {peer: "" for peer, _ in peers}
        runnable = [(p, c) for p, c in peers
                    if not c.strip().lower().startswith(("n/a", "fail:"))]
        for p, c in peers:
            c = c.strip()
            if c.lower().startswith("n/a"):
                notes[p] = c[4:].strip(" :") or "n/a"
                status[p].append("n/a")
            elif c.lower().startswith("fail:"):
                notes[p] = c[5:].strip()
                status[p].append("fail")
                failures.append((case, p, 0, "fail", notes[p], "(build)"))
        log(f"[{case}] ", end="")
        for r in range(args.runs):
            for peer, command in runnable:
                if "n/a" in status[peer] and not per_peer[peer]:
                    # Unsupported on the first try: do not repeat it.
                    if r > 0:
                        continue
                st, fields, detail = run_one(command, args.timeout)
                status[peer].append(st)
                row = {"group": group, "case": case, "peer": peer,
                       "run": r + 1, "status": st}
                row.update(fields)
                runs_rows.append(row)
                if st == "ok":
                    per_peer[peer].append(fields)
                    log(peer[0], end="")
                elif st == "n/a":
                    notes[peer] = detail
                    log("-", end="")
                else:
                    failures.append((case, peer, r + 1, st, detail, command))
                    log("X", end="")
                    log(f"\n  FAILED {case} {peer} run {r + 1}: {st}: "
                        f"{detail}\n  command: {command}\n[{case}] ", end="")
        log("")

        # Medians of every numeric field, per peer.
        med = {}
        for peer, _ in peers:
            runs = per_peer[peer]
            m = {}
            if runs:
                keys = set().union(*[set(f) for f in runs])
                for k in sorted(keys):
                    vals = [as_number(f.get(k)) for f in runs]
                    vals = [v for v in vals if v is not None]
                    if len(vals) == len(runs):
                        m[k] = statistics.median(vals)
            med[peer] = m

        def peer_status(peer):
            sts = status[peer]
            if not sts:
                return "missing"
            if any(s in ("crash", "fail", "timeout") for s in sts):
                bad = [s for s in sts if s != "ok"]
                return f"{bad[0]} ({len(bad)}/{len(sts)})"
            if all(s == "n/a" for s in sts):
                return "n/a"
            return "ok"

        subj = args.subject if args.subject in med else None
        subj_m = med.get(subj, {}) if subj else {}

        # Summary rows and ratios.
        for peer, _ in peers:
            m = med[peer]
            row = {"group": group, "case": case, "peer": peer,
                   "status": peer_status(peer), "runs": len(per_peer[peer]),
                   "key": key, "better": better,
                   "note": notes[peer].replace("\n", " ")}
            for k, v in m.items():
                row[k] = v
            rival = peer not in args.reference.split(",")
            if peer != subj and subj_m and m:
                for k in RATIO_FIELDS:
                    r_ = ratio(subj_m.get(k), m.get(k))
                    if r_ is not None:
                        row["ratio_" + k] = r_
                r_ = ratio(subj_m.get(key), m.get(key), better)
                if r_ is not None:
                    row["ratio_key"] = r_
                    if r_ > 0 and rival:
                        time_ratios.append(r_)
                rr = ratio(subj_m.get("peak_rss_kb"), m.get("peak_rss_kb"))
                if rr and rival:
                    rss_ratios.append(rr)
            summary_rows.append(row)

        # Print.
        if args.style == "suite":
            for peer, _ in peers:
                m = med[peer]
                st = peer_status(peer)
                rss = m.get("peak_rss_kb")
                row_ratio = None
                if peer != subj and subj_m and m:
                    row_ratio = ratio(subj_m.get(key), m.get(key), better)
                note = "" if st == "ok" else st
                if notes[peer]:
                    note = (note + " " if note else "") + notes[peer]
                suite_table.line([
                    case, peer,
                    fmt_num(m.get("wall_s"), "{:.3f}"),
                    fmt_num(m.get("cpu_s"), "{:.3f}"),
                    fmt_num(m.get("gcs"), "{:.0f}"),
                    fmt_num(m.get("max_pause_ms"), "{:.2f}"),
                    fmt_num(m.get("p99_pause_ms"), "{:.2f}"),
                    fmt_num(rss / 1024 if rss is not None else None,
                            "{:.1f}"),
                    key + (" (hi)" if better == "hi" else ""),
                    fmt_key(m.get(key)),
                    fmt_ratio(row_ratio), note])
        else:
            others = [p for p, _ in peers if p != subj]
            cols = [("metric", 16, "<")]
            for p, _ in peers:
                cols.append((p, 12, ">"))
            for p in others:
                if subj:
                    cols.append((f"{subj}/{p}", 12, ">"))
            t = Table(cols)
            print(f"{case}: medians of {args.runs} runs")
            t.header()
            metric_rows = [(f, h, fm) for f, h, fm in MAIN_FIELDS]
            if key not in [f for f, _, _ in MAIN_FIELDS]:
                metric_rows.append((key, key, None))
            for f, h, fm in metric_rows:
                cells = [h]
                vals = {}
                for p, _ in peers:
                    v = med[p].get(f)
                    if f == "peak_rss_kb" and v is not None:
                        v = v / 1024
                    vals[p] = v
                    if not med[p]:
                        cells.append(peer_status(p))
                    elif fm:
                        cells.append(fmt_num(v, fm))
                    elif f == "peak_rss_kb":
                        cells.append(fmt_num(v, "{:.1f}"))
                    else:
                        cells.append(fmt_key(v))
                for p in others:
                    if subj:
                        b = better if f == key else "lo"
                        cells.append(fmt_ratio(ratio(vals.get(subj),
                                                     vals.get(p), b)))
                t.line(cells)
            for p, _ in peers:
                if notes[p]:
                    print(f"  {p}: {notes[p]}")
            print()

    # Geometric means.
    def geomean(xs):
        xs = [x for x in xs if x and x > 0]
        if not xs:
            return None
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    gt, gr = geomean(time_ratios), geomean(rss_ratios)

    # CSV files.
    if args.results:
        os.makedirs(args.results, exist_ok=True)
        for rows, suffix in ((runs_rows, "runs"), (summary_rows, "summary")):
            cols = []
            for r in rows:
                for k in r:
                    if k not in cols:
                        cols.append(k)
            path = os.path.join(args.results, f"{args.name}-{suffix}.csv")
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=cols, restval="")
                w.writeheader()
                for r in rows:
                    w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                                for k, v in r.items()})
        log(f"benchrun: wrote {args.results}/{args.name}-runs.csv and "
            f"{args.name}-summary.csv")

    if failures:
        print()
        print(f"FAILED: {len(failures)} run(s) failed:")
        for case, peer, r, st, detail, command in failures:
            first = detail.splitlines()[0] if detail else ""
            print(f"  {case} / {peer} run {r}: {st}: {first}")
            print(f"    reproduce: {command}")

    if args.style == "suite" or len(cases) > 1:
        print()
        s = (f"SUMMARY {args.name}: geometric mean of {args.subject}/peer "
             f"ratios over {len(time_ratios)} case(s): time "
             f"{fmt_ratio(gt)}, peak RSS {fmt_ratio(gr)} "
             f"(below 1.00x: {args.subject} better)")
        print(s)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
