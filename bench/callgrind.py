#!/usr/bin/env python3
"""callgrind.py: instruction counts of lfgc and bdwgc under callgrind.

    callgrind.py --out DIR --csv FILE PEER=PROBE_BINARY...

Runs workloads/cg_probe.c (built once per peer) under
`valgrind --tool=callgrind --dump-instr=yes` and reads the per-instruction
counts and the call graph from callgrind's output:

  alloc_fast_path  instructions of the allocation path most calls take:
                   starting from GC_malloc, every function that it (or such
                   a function) calls at least 90% of the times it is called,
                   counting the instructions that run at least once in every
                   two calls; divided by the number of GC_malloc calls.
  alloc_avg        all instructions spent inside GC_malloc (collections and
                   refills included) per call.
  mark_per_word    instructions of GC_gcollect() per word of live data:
                   the difference between two runs with different live
                   heaps, divided by the difference in live words times the
                   number of collections (so roots and fixed costs cancel).
                   Every probe runs with one marker (GC_MARKERS=1), so that
                   the collection's work is all on the calling thread.
  base_lookup      lfgc: lowfat_base() in a non-inlined wrapper (its ret
                   included); bdwgc: GC_base(), inclusive, per call.
  gc_base          GC_base() inclusive per call, both.
  malloc_fast_path lfgc only (--malloc-lib, --malloc-probe): the fast path
  free_fast_path   (as alloc_fast_path) of malloc and free from
                   workloads/cg_malloc.c run with liblfgc-malloc.so
                   preloaded, the shim's jump included.

Writes FILE (CSV: metric, what, lfgc, bdwgc, note) and prints a table.
Standard library only.
"""

import argparse
import csv
import os
import subprocess
import sys
from collections import defaultdict

ALLOC_N = 200000
MARK_K = (20000, 100000)
MARK_R = 3
BASE_N = 200000
WORDS_PER_NODE = 8      # 56-byte nodes live in 64-byte slots in both


class Profile:
    """The parts of a callgrind output file that we use."""

    def __init__(self, path):
        self.self_cost = defaultdict(lambda: defaultdict(int))  # fn->addr->Ir
        self.edge_calls = defaultdict(int)      # (caller, callee) -> calls
        self.edge_incl = defaultdict(int)       # (caller, callee) -> Ir
        self.calls_to = defaultdict(int)        # callee -> calls
        self.incl_to = defaultdict(int)         # callee -> Ir of those calls
        npos = 1
        fn = None
        callee = None
        pending_call = None
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                c = line[0]
                if c.isdigit() or c == "+" or c == "-" or c == "*":
                    parts = line.split()
                    if len(parts) <= npos:
                        continue
                    try:
                        addr = parts[0]
                        ir = int(parts[npos])
                    except ValueError:
                        continue
                    if pending_call is not None:
                        self.edge_incl[(fn, pending_call)] += ir
                        self.incl_to[pending_call] += ir
                        pending_call = None
                    elif fn is not None:
                        self.self_cost[fn][addr] += ir
                    continue
                key, _, val = line.partition("=")
                if line.startswith("positions:"):
                    npos = len(line.split(":", 1)[1].split())
                elif key == "fn":
                    fn = val
                elif key == "cfn":
                    callee = val
                elif key == "calls":
                    n = int(val.split()[0])
                    self.edge_calls[(fn, callee)] += n
                    self.calls_to[callee] += n
                    pending_call = callee

    def fast_path(self, entry, n):
        """Instructions per call of the path most calls of `entry` take."""
        included = {entry}
        todo = [entry]
        while todo:
            f = todo.pop()
            for (caller, callee), calls in self.edge_calls.items():
                if caller == f and callee not in included and \
                        calls >= 0.9 * n:
                    included.add(callee)
                    todo.append(callee)
        total = 0
        for f in included:
            for ir in self.self_cost[f].values():
                if ir >= 0.5 * n:
                    total += ir
        return total / n if n else None, sorted(included)

    def per_call(self, fn):
        n = self.calls_to.get(fn, 0)
        return (self.incl_to[fn] / n) if n else None

    def self_per_call(self, fn):
        n = self.calls_to.get(fn, 0)
        if not n:
            return None
        return sum(self.self_cost[fn].values()) / n


def run(binary, args, out, preload=None):
    cmd = ["valgrind", "--tool=callgrind", "--dump-instr=yes",
           "--compress-pos=no", "--compress-strings=no",
           f"--callgrind-out-file={out}", binary] + [str(a) for a in args]
    # One marker: all of a collection's work then runs on the thread that
    # called it, where callgrind's inclusive counts see it.
    env = dict(os.environ, GC_MARKERS="1", LFGC_MARKERS="1")
    if preload:
        env["LD_PRELOAD"] = preload
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="replace", env=env)
    ok = p.returncode == 0 and "check=ok" in p.stdout
    if not ok:
        tail = "\n".join(p.stderr.strip().splitlines()[-15:])
        print(f"callgrind: FAILED: {' '.join(cmd)}\n{p.stdout}{tail}",
              file=sys.stderr)
        return None
    return Profile(out)


MALLOC_ROUNDS = 10000


def measure_malloc(lib, probe, outdir, res, notes):
    prof = run(probe, [MALLOC_ROUNDS], os.path.join(outdir, "callgrind.lfgc.malloc.out"),
               preload=lib)
    if not prof:
        return
    for fn, metric in (("malloc", "malloc_fast_path"), ("free", "free_fast_path")):
        n = prof.calls_to.get(fn, 0)
        fp, fns = prof.fast_path(fn, n)
        res[metric] = fp
        notes[metric] = "+".join(fns)


def measure(peer, binary, outdir, malloc_lib=None, malloc_probe=None):
    res, notes = {}, {}
    tag = os.path.join(outdir, f"callgrind.{peer}")
    if peer == "lfgc" and malloc_lib and malloc_probe:
        measure_malloc(malloc_lib, malloc_probe, outdir, res, notes)

    prof = run(binary, ["alloc", ALLOC_N], f"{tag}.alloc.out")
    if prof:
        n = prof.edge_calls.get(("main", "GC_malloc"), 0) or \
            prof.calls_to.get("GC_malloc", 0)
        fp, fns = prof.fast_path("GC_malloc", n)
        res["alloc_fast_path"] = fp
        notes["alloc_fast_path"] = "+".join(fns)
        res["alloc_avg"] = prof.per_call("GC_malloc")

    incl = []
    for k in MARK_K:
        prof = run(binary, ["mark", k, MARK_R], f"{tag}.mark{k}.out")
        incl.append(prof.incl_to.get("GC_gcollect") if prof else None)
    if None not in incl:
        words = (MARK_K[1] - MARK_K[0]) * WORDS_PER_NODE * MARK_R
        res["mark_per_word"] = (incl[1] - incl[0]) / words

    prof = run(binary, ["base", BASE_N], f"{tag}.base.out")
    if prof:
        if peer == "lfgc":
            res["base_lookup"] = prof.self_per_call("base_of")
            notes["base_lookup"] = "lowfat_base() in a wrapper, ret included"
        else:
            res["base_lookup"] = prof.per_call("GC_base")
            notes["base_lookup"] = "GC_base()"
        res["gc_base"] = prof.per_call("GC_base")
    return res, notes


WHAT = [
    ("alloc_fast_path", "GC_MALLOC(16), the path most calls take"),
    ("alloc_avg", "GC_MALLOC(16), everything per call (collections included)"),
    ("mark_per_word", "GC_gcollect() per word of live data"),
    ("base_lookup", "base of an interior pointer (lfgc: lowfat_base)"),
    ("gc_base", "GC_base() per call"),
    ("malloc_fast_path", "malloc of 16-64 B, lfgc-malloc, the path most calls take"),
    ("free_fast_path", "free of those, the path most calls take"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="directory for raw outputs")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--malloc-lib", help="liblfgc-malloc.so to preload")
    ap.add_argument("--malloc-probe", help="cg_malloc binary")
    ap.add_argument("probes", nargs="+", help="PEER=BINARY")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    results, notes = {}, {}
    failed = False
    for spec in args.probes:
        peer, _, binary = spec.partition("=")
        if binary.startswith("n/a"):
            results[peer], notes[peer] = {}, {}
            continue
        print(f"callgrind: {peer}: {binary}", file=sys.stderr)
        r, n = measure(peer, binary, args.out, args.malloc_lib, args.malloc_probe)
        want = len(WHAT) - (0 if peer == "lfgc" and args.malloc_lib else 2)
        if len(r) < want:
            failed = True
        results[peer], notes[peer] = r, n

    peers = [s.partition("=")[0] for s in args.probes]
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["metric", "what"] + peers + ["note"])
        for metric, what in WHAT:
            row = [metric, what]
            for p in peers:
                v = results[p].get(metric)
                row.append("" if v is None else f"{v:.2f}")
            note = "; ".join(f"{p}: {notes[p][metric]}" for p in peers
                             if metric in notes[p])
            row.append(note)
            w.writerow(row)

    print(f"{'figure':<17}" + "".join(f"{p:>10}" for p in peers) +
          "   instructions per ...")
    for metric, what in WHAT:
        cells = []
        for p in peers:
            v = results[p].get(metric)
            cells.append(f"{'-' if v is None else f'{v:.1f}':>10}")
        print(f"{metric:<17}" + "".join(cells) + f"   {what}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
