#!/usr/bin/env python3
"""The consumer loop's executed instructions per key, by opcode, from Nsight Compute source pages.

    tools/ncu_loop.py CSV [CSV ...]

Each CSV is what `ncu --section SourceCounters --page source --csv` wrote for one kernel (as in
plots/ncu/source/): every SASS instruction with the number of times a warp executed it. The loop is
tools/sass_loop.py's (an innermost loop that issues wgmma), the one that executed most. A warp runs
its turn barrier (BAR.SYNC) once per iteration, so that count is the loop's iterations; the keys
of one iteration are the N of its S wgmma (the one whose A operand is a descriptor: S = Q K^T reads
Q from shared memory, where P V takes P from registers). Dividing gives what docs/15 compares:
instructions per key, not per iteration, since the two kernels' tiles have different numbers of
keys. Prints a table, an opcode (its first mnemonic) per row and a column per CSV.
"""
import argparse
import collections
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_loop import WGMMA, loops, opcode  # noqa: E402


def read(path):
    """[(address, instruction)] and {address: executed} of the CSV's one kernel."""
    with open(path) as f:
        lines = f.read().split("\n")
    start = next((k for k, line in enumerate(lines) if line.startswith('"Address"')), None)
    if start is None:
        sys.exit(f"ncu_loop: {path}: no source page (a header starting with \"Address\")")
    code, executed = [], {}
    for row in csv.DictReader(lines[start:]):
        try:
            address = int(row["Address"], 16)
        except (TypeError, ValueError):
            continue
        code.append((address, row["Source"].strip().rstrip(";").strip()))
        executed[address] = int(row["Instructions Executed"] or 0)
    return code, executed


def per_key(path):
    code, executed = read(path)
    found = [(sum(executed[a] for a, _ in code[j:i + 1]), j, i) for j, i in loops(code)]
    if not found or max(found)[0] == 0:
        sys.exit(f"ncu_loop: {path}: no executed loop that issues wgmma")
    _, j, i = max(found)
    body = code[j:i + 1]
    barrier = [executed[a] for a, x in body if opcode(x).startswith("BAR.SYNC")]
    s_gemm = [x for _, x in body if opcode(x).startswith(WGMMA) and x.split()[2].startswith("gdesc")]
    if len(barrier) != 1 or not s_gemm:
        sys.exit(f"ncu_loop: {path}: the loop has {len(barrier)} turn barriers and {len(s_gemm)} S wgmma; expected one and some")
    iterations = barrier[0]
    keys = int(opcode(s_gemm[0]).split(".")[1].split("x")[1])
    counts = collections.Counter()
    for a, x in body:
        counts[opcode(x).split(".")[0]] += executed[a]
    return iterations, keys, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+")
    args = ap.parse_args()
    runs = [(os.path.basename(p), *per_key(p)) for p in args.csv]
    print("executed instructions of the consumer loop, per warp and key (per warp and iteration in brackets)")
    for name, iterations, keys, _ in runs:
        print(f"  {name}: {iterations} warp-iterations of {keys} keys")
    ops = sorted({o for *_, c in runs for o in c}, key=lambda o: (-max(c[o] / (n * k) for _, n, k, c in runs), o))
    width = max(len(name) for name, *_ in runs)
    print(f"{'opcode':12s} " + " ".join(f"{name:>{max(width, 16)}s}" for name, *_ in runs))
    for o in ops + ["total"]:
        cells = []
        for _, n, k, c in runs:
            total = sum(c.values()) if o == "total" else c[o]
            cells.append(f"{total / (n * k):7.3f} ({total / n:6.1f})".rjust(max(width, 16)))
        print(f"{o:12s} " + " ".join(cells))


if __name__ == "__main__":
    main()
