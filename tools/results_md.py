#!/usr/bin/env python3
"""Markdown tables from a benchmark CSV (the one plots/plot.py draws), pasted between markers in
README.md and docs/: `<!-- RESULTS -->` ... `<!-- /RESULTS -->`, `<!-- MEASURED:NN -->` ...
`<!-- /MEASURED -->` and `<!-- PEAK -->` ... `<!-- /PEAK -->`. The numbers come from the CSV alone, so the prose never carries a number
the harness did not write.

Usage: python3 plots/results_md.py plots/nvidia_h200.csv [--write]   (without --write: print)
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import CsvError, Results, parse_csv, usable_tflops  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADLINE = ("bf16", 16, 16, 16, 4096, 4096, 128)


def key(problem, causal):
    return problem + (causal,)


def tf(results, kernel, k):
    row = results.row(kernel, k)
    return (usable_tflops(row), row) if row else (None, None)


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def ladder_table(results):
    """Every stage at the headline problem, non-causal and causal, with % of FA2 and the step."""
    lines = ["| stage | TFLOP/s | % of FA2 | vs previous | causal TFLOP/s | causal % of FA2 | check |",
             "|---|---:|---:|---:|---:|---:|---|"]
    fa2 = {c: tf(results, "fa2", key(HEADLINE, c))[0] for c in (0, 1)}
    prev = None
    for stage in results.stages:
        t0, r0 = tf(results, stage, key(HEADLINE, 0))
        t1, r1 = tf(results, stage, key(HEADLINE, 1))
        if r0 is None:
            continue
        pct = lambda t, c: fmt(100 * t / fa2[c]) + "%" if t and fa2[c] else "-"
        step = f"{t0 / prev:.2f}x" if prev and t0 else "-"
        checks = "/".join(r["check"] for r in (r0, r1) if r)
        lines.append(f"| {results.names[stage]} | {fmt(t0)} | {pct(t0, 0)} | {step} | {fmt(t1)} | {pct(t1, 1)} | {checks} |")
        prev = t0
    for ref, label in (("fa2", "FlashAttention-2 (PyTorch SDPA flash)"), ("cudnn", "cuDNN (PyTorch SDPA cudnn)")):
        t0, _ = tf(results, ref, key(HEADLINE, 0))
        t1, _ = tf(results, ref, key(HEADLINE, 1))
        if t0:
            lines.append(f"| {label} | {fmt(t0)} | {fmt(100 * t0 / fa2[0]) + '%' if fa2[0] else '-'} | | {fmt(t1)} | "
                         f"{fmt(100 * t1 / fa2[1]) + '%' if t1 and fa2[1] else '-'} | |")
    peak = results.peak()
    if peak:
        lines.append(f"| mma.sync m16n8k16 ceiling (`./run --peak`) | {fmt(peak)} | {fmt(100 * peak / fa2[0]) + '%' if fa2[0] else '-'} | | | | |")
    return "\n".join(lines)


def sweep_table(results, stage):
    """One stage against FA2 over the sweep: TFLOP/s and ratio per (head_dim, causal, seqlen)."""
    lines = ["| head_dim | causal | " + " | ".join(f"{s // 1024}k" if s >= 1024 else str(s) for s in SEQLENS) + " |",
             "|---|---|" + "---:|" * len(SEQLENS)]
    for d in (64, 128):
        for c in (0, 1):
            cells = []
            for s in SEQLENS:
                problem = ("bf16", 65536 // s, 2048 // d, 2048 // d, s, s, d)
                t, _ = tf(results, stage, key(problem, c))
                f, _ = tf(results, "fa2", key(problem, c))
                cells.append(f"{fmt(t)} ({t / f:.2f}x)" if t and f else fmt(t))
            lines.append(f"| {d} | {c} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]


def stage_block(results, nn):
    stages = [s for s in results.stages if s.endswith(nn)]
    if not stages:
        return None
    stage = stages[0]
    gpu = results.gpu_label()
    out = [f"On the {gpu}, TFLOP/s (and ratio to FlashAttention-2 timed in the same session) over the "
           f"sweep, bf16, from the committed CSV:", "", sweep_table(results, stage)]
    return "\n".join(out)


def replace_block(text, start, end, body):
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    block = f"{start}\n{body}\n{end}"
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    if start in text:
        return text.replace(start, block)
    return text

def peak_line(results):
    """The mma.sync ceiling and what FA2, the last stage and cuDNN reach of it at the headline."""
    peak = results.peak()
    if not peak:
        return None
    parts = []
    last = results.stages[-1] if results.stages else None
    for kernel, label in (("fa2", "FA2"), (last, f"stage {last[-2:]}" if last else ""), ("cudnn", "cuDNN")):
        t = tf(results, kernel, key(HEADLINE, 0))[0] if kernel else None
        if t:
            parts.append(f"{label} {fmt(t)} ({100 * t / peak:.0f} %)")
    return (f"`./run --peak` on the {results.gpu_label()}, in the benchmark session: **{fmt(peak)} TFLOP/s** "
            f"(mma.sync m16n8k16 bf16, f32 accumulate, registers only). On the headline problem in the same "
            f"session: " + ", ".join(parts) + ".")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--write", action="store_true", help="update README.md and docs/*.md in place")
    args = ap.parse_args()
    try:
        results = Results(parse_csv(args.csv))
    except CsvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    ladder = (f"Measured on the {results.gpu_label()} at the headline problem (B16 H16 S4096 D128 bf16), "
              f"all stages and the references from one session (`make bench`, `make reference`, "
              f"`./build/allstages --peak`):\n\n" + ladder_table(results))
    if not args.write:
        print(ladder)
        for nn in ("01", "02", "03", "04", "05", "06", "07", "08"):
            block = stage_block(results, nn)
            if block:
                print(f"\n## stage {nn}\n{block}")
        return 0
    png = os.path.splitext(os.path.basename(args.csv))[0]
    readme_body = ladder + f"\n\n![stage ladder](plots/{png}_ladder.png)\n\n![TFLOP/s against seqlen](plots/{png}_sweep.png)"
    path = os.path.join(ROOT, "README.md")
    text = open(path).read()
    open(path, "w").write(replace_block(text, "<!-- RESULTS -->", "<!-- /RESULTS -->", readme_body))
    for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
        path = os.path.join(ROOT, "docs", name)
        text = open(path).read()
        new = text
        for m in re.finditer(r"<!-- MEASURED:(\d\d) -->", text):
            nn = m.group(1)
            body = ladder if nn == "00" else stage_block(results, nn)
            if nn not in ("00",):
                body = ladder + "\n\n" + body if body else ladder
            new = replace_block(new, f"<!-- MEASURED:{nn} -->", "<!-- /MEASURED -->", body)
        if "<!-- PEAK -->" in new and peak_line(results):
            new = replace_block(new, "<!-- PEAK -->", "<!-- /PEAK -->", peak_line(results))
        if new != text:
            open(path, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
