#!/usr/bin/env python3
"""Where two builds of a kernel spend their warps' time differently, from Nsight Compute's source
page of each (ncu -i REPORT --page source --print-source sass --csv > FILE.csv, of a report taken
with --set full).

A build that runs a few percent slower with the same instructions per key usually stalls longer
somewhere; this prints, for A and B:
  - the warp-stall samples by reason, over the whole kernel;
  - the samples by region: instructions grouped by how often they executed (a loop's body shares
    one count, so the consumer loop, the masked loop and the epilogue each come out as a row);
  - in the region whose samples differ most, the instructions with the most samples in either
    build, matched by opcode sequence, so that a stall one build has and the other lacks stands out.
Usage: python3 tools/ncu_source_diff.py A.csv B.csv [--top 12]
"""
import argparse
import collections
import csv
import difflib
import re


def load(path):
    """The instruction rows of one source page: [(source, executed, samples, {reason: samples})]."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = next(i for i, r in enumerate(rows) if r[:2] == ["Address", "Source"])
    names = rows[header]
    reasons = [n for n in names if n.startswith("stall_") and "Not Issued" not in n]
    out = []
    for r in rows[header + 1:]:
        if len(r) != len(names):
            continue
        d = dict(zip(names, r))
        out.append((d["Source"].strip(), int(d["Instructions Executed"] or 0),
                    int(d["Warp Stall Sampling (All Samples)"] or 0), {k: int(d[k] or 0) for k in reasons}))
    return out


def opcode(source):
    m = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_.]+)", source)
    return m.group(2) if m else source


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    a, b = load(args.a), load(args.b)
    total = {name: sum(s for _, _, s, _ in rows) for name, rows in (("A", a), ("B", b))}
    print(f"A = {args.a}\nB = {args.b}")
    print(f"samples: A {total['A']}, B {total['B']} ({total['B'] / total['A'] - 1:+.1%})")
    print(f"instructions executed: A {sum(e for _, e, _, _ in a)}, B {sum(e for _, e, _, _ in b)}\n")

    print(f"{'stall reason':28s} {'A':>8s} {'B':>8s} {'B - A':>8s}")
    reasons = collections.Counter(), collections.Counter()
    for counter, rows in zip(reasons, (a, b)):
        for _, _, _, by in rows:
            counter.update(by)
    for k in sorted(reasons[0], key=lambda k: -(reasons[0][k] + reasons[1][k]))[:args.top]:
        print(f"{k:28s} {reasons[0][k]:8d} {reasons[1][k]:8d} {reasons[1][k] - reasons[0][k]:+8d}")

    print(f"\n{'region (times executed)':>24s} {'A instrs':>9s} {'A samples':>10s} {'B instrs':>9s} {'B samples':>10s} {'B - A':>8s}")
    regions = []
    for count in sorted({e for _, e, _, _ in a + b if e}, reverse=True):
        ra = [r for r in a if r[1] == count]
        rb = [r for r in b if r[1] == count]
        sa, sb = sum(r[2] for r in ra), sum(r[2] for r in rb)
        regions.append((abs(sb - sa), count, ra, rb))
        if sa + sb >= 0.01 * (total["A"] + total["B"]):
            print(f"{count:24d} {len(ra):9d} {sa:10d} {len(rb):9d} {sb:10d} {sb - sa:+8d}")

    _, count, ra, rb = max(regions, key=lambda r: r[0])
    print(f"\nregion executed {count} times: instructions with the most samples in A or B, matched by opcode")
    match = difflib.SequenceMatcher(None, [opcode(r[0]) for r in ra], [opcode(r[0]) for r in rb], autojunk=False)
    pairs = []
    for op, i1, i2, j1, j2 in match.get_opcodes():
        if op == "equal":
            pairs += [(ra[i1 + k], rb[j1 + k]) for k in range(i2 - i1)]
        else:
            pairs += [(r, None) for r in ra[i1:i2]] + [(None, r) for r in rb[j1:j2]]
    pairs.sort(key=lambda p: -max(p[0][2] if p[0] else 0, p[1][2] if p[1] else 0))
    for pa, pb in pairs[:args.top]:
        sa, sb = (pa[2] if pa else 0), (pb[2] if pb else 0)
        print(f"  A {sa:6d}  B {sb:6d}  {(pa or pb)[0] if pa and pb else ('A only: ' + pa[0] if pa else 'B only: ' + pb[0])}")


if __name__ == "__main__":
    main()
