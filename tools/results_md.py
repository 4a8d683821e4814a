#!/usr/bin/env python3
"""Every measured figure of README.md, docs/*.md and the stages' header comments, written from
the CSVs the harness and the tools wrote on the GPU, so that the prose never carries a number
they did not produce:

  plots/<gpu>.csv           make bench, make reference, ./run --peak   (the benchmark run)
  plots/tune/<gpu>.csv      make tune K=NN                              (the candidate tiles of stages 08-10)
  plots/ncu/<gpu>.csv       tools/ncu_metrics.sh                        (Nsight Compute, every stage)
  plots/repeats/*.csv       two kernels' sweeps timed alternately       (tools/gpu_session.sh repeat)
  plots/ab/<gpu>_NN_<commit>/  builds of stage NN timed alternately     (make ab, tools/ab.sh)

What it fills, between markers that the text keeps:

  <!-- RESULTS --> ... <!-- /RESULTS -->        README: the ladder table and the two plots
  <!-- STAGES --> ... <!-- /STAGES -->          the stage table, from the kernelNN_name directories
  <!-- MEASURED:NN --> ... <!-- /MEASURED -->  the ladder, and stage NN against FA2 over the sweep
  <!-- PEAK --> ... <!-- /PEAK -->              the mma.sync ceiling and what reaches how much of it
  <!-- TUNE:NN --> ... <!-- /TUNE -->           the make tune table of stage NN
  <!-- REPEATS:A,B --> ... <!-- /REPEATS -->    the alternating repeat of A against B (08,fa2; 10,09; 13,cudnn)
  <!-- AB:NN,COMMIT --> ... <!-- /AB -->        builds of stage NN against its base build, timed alternately
  <!-- NCU:NN,MM --> ... <!-- /NCU -->          Nsight Compute counters of stages NN and MM
  <!-- fig WHAT --> ... <!-- /fig -->           one figure inside a sentence (see FIGURES below)
  " * Measured:" ... up to " * Needs:"          in each kernelNN_name/kernel.cu header

Usage: tools/results_md.py [--write | --check] [--csv plots/<gpu>.csv]
  (neither)  print what would be written;  --write  update the files;  --check  exit 1 if any file
  differs from what the CSVs give (tests/test_docs.sh runs this: prose and CSV never disagree).
"""
import argparse
import csv
import glob
import os
import re
import statistics
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "plots"))
sys.path.insert(0, os.path.join(ROOT, "harness"))
from contract import (HEADLINE, MMA_PEAK, SWEEP_HEAD_DIMS, SWEEP_SEQLENS, WGMMA_PEAK, seqlen_label,  # noqa: E402
                      sweep_problem)
from plot import HOPPER_TRACK_LABEL, CsvError, Results, parse_csv, usable_tflops  # noqa: E402


# Every region this script writes, as one pattern: tests/lint_docs.py skips them when it looks for
# figures typed by hand.
GENERATED_REGION = re.compile(
    r"<!-- (RESULTS|STAGES|MEASURED:\d\d|PEAK|TUNE:\d\d|REPEATS:\w+,\w+|AB:\d\d,\w+|NCU:[0-9,]+) -->.*?"
    r"<!-- /(RESULTS|STAGES|MEASURED|PEAK|TUNE|REPEATS|AB|NCU) -->|<!-- fig [^\n]*?-->.*?<!-- /fig -->", re.S)


class GenError(Exception):
    """A marker asks for something the CSVs do not hold; the message names the file."""


# ------------------------------------------------------------------------------------------------
# Data

def headline(causal=0):
    return HEADLINE[:-1] + (causal,)


def problem_arg(text):
    """'headline', 'headline/causal', 'sweep/D/S' or 'sweep/D/S/causal' -> a problem tuple."""
    parts = text.split("/")
    causal = 1 if parts[-1] == "causal" else 0
    if parts[0] == "headline":
        return headline(causal)
    if parts[0] == "sweep" and len(parts) >= 3:
        return sweep_problem(int(parts[2]), int(parts[1]), causal)
    raise GenError(f"unknown problem '{text}'")


class Data:
    def __init__(self, csv_path):
        self.csv_path = csv_path
        self.slug = os.path.splitext(os.path.basename(csv_path))[0]
        self.results = Results(parse_csv(csv_path))
        self.tune = self._optional(os.path.join(ROOT, "plots", "tune", self.slug + ".csv"), parse_csv)
        self.ncu = self._optional(os.path.join(ROOT, "plots", "ncu", self.slug + ".csv"), read_ncu)

    def repeats(self, a, b):
        """The rows of the latest alternating repeat of a against b ("08", "fa2"), and its path. The
        reference sweep times FA2 and cuDNN together, so b = "cudnn" reads the repeat against fa2."""
        file_b = "fa2" if b == "cudnn" else b
        pattern = os.path.join(ROOT, "plots", "repeats", f"{self.slug}_{a}_vs_{file_b}_*.csv")
        paths = sorted(glob.glob(pattern), key=os.path.getmtime)
        if not paths:
            raise GenError(f"no {os.path.relpath(pattern, ROOT)}: REPEAT=\"{a} {file_b}\" bash tools/gpu_session.sh repeat "
                           f"writes one on the GPU machine")
        return parse_csv(paths[-1]), paths[-1]

    def ab_dir(self, nn, commit):
        """Where tools/ab.sh kept one run of stage nn's builds: base.csv and one CSV per variant."""
        return os.path.join(ROOT, "plots", "ab", f"{self.slug}_{nn}_{commit}")

    @staticmethod
    def _optional(path, reader):
        return (path, reader(path)) if os.path.exists(path) else (path, None)

    def gpu(self):
        return self.results.gpu_label()

    def tflops(self, kernel, problem):
        row = self.results.row(kernel, problem)
        value = usable_tflops(row) if row else None
        if value is None:
            raise GenError(f"{self.csv_path} has no {kernel} row for {problem}")
        return value

    def commit(self, kernel, problem):
        row = self.results.row(kernel, problem)
        return row["commit"] if row else "unknown"

    def ceiling(self, kernel):
        """MMA_PEAK or WGMMA_PEAK: both come from ./run --peak, but only a Hopper GPU writes the
        wgmma one, so a chapter that quotes it needs a benchmark run made on one."""
        value = self.results.ceiling(kernel)
        if value is None:
            raise GenError(f"{self.csv_path} has no {kernel} row (./run --peak writes it, "
                           f"through tools/gpu_session.sh peak; the {WGMMA_PEAK} row only on a Hopper GPU)")
        return value

    def ncu_value(self, kernel, metric, problem="headline"):
        path, rows = self.ncu
        if rows is None:
            raise GenError(f"{path} does not exist (tools/gpu_session.sh ncu writes it)")
        if (kernel, metric, problem) not in rows:
            raise GenError(f"{path} has no {metric} for {kernel} at {problem} "
                           f"(NCU_PROBLEM={problem} tools/ncu_metrics.sh writes it)")
        return rows[(kernel, metric, problem)]


def read_ncu(path):
    """{(kernel, metric, problem): (value, unit, commit)}: the last row of each wins."""
    rows = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                value = float(row["value"])
            except ValueError:
                continue
            rows[(row["kernel"], row["metric"], row["problem"])] = (value, row["unit"], row["commit"])
    return rows


# ------------------------------------------------------------------------------------------------
# Formatting

def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def pct(a, b):
    return f"{100 * a / b:.1f}%"


def count(x):
    """7530966197 -> '7.5 G', 55679 -> '56 k', 0.67 -> '0.67'."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            v = x / scale
            return f"{v:.{1 if v < 10 else 0}f} {unit}"
    return f"{x:.0f}" if x == int(x) else f"{x:.2f}"


def stage_number(kernel):
    return kernel[-2:]


# ------------------------------------------------------------------------------------------------
# Blocks

def ladder_table(data):
    """Every stage at the headline problem, non-causal and causal, with % of FA2 and the step; the
    Hopper track after a row that says so, as the ladder plot draws it after a divider."""
    res = data.results
    lines = ["| stage | TFLOP/s | % of FA2 | vs previous | causal TFLOP/s | causal % of FA2 | check |",
             "|---|---:|---:|---:|---:|---:|---|"]
    fa2 = {c: data.tflops("fa2", headline(c)) for c in (0, 1)}
    prev, hopper_row = None, False
    for stage in res.stages:
        r0, r1 = res.row(stage, headline(0)), res.row(stage, headline(1))
        if r0 is None:
            continue
        if stage in res.hopper and not hopper_row:
            lines.append(f"| *{HOPPER_TRACK_LABEL}* | | | | | | |")
            hopper_row = True
        t0, t1 = usable_tflops(r0), usable_tflops(r1) if r1 else None
        step = f"{t0 / prev:.2f}x" if prev and t0 else "-"
        checks = "/".join(r["check"] for r in (r0, r1) if r)
        lines.append(f"| {res.names[stage]} | {fmt(t0)} | {pct(t0, fa2[0])} | {step} | {fmt(t1)} | "
                     f"{pct(t1, fa2[1]) if t1 else '-'} | {checks} |")
        prev = t0
    for ref, label in (("fa2", "FlashAttention-2 (PyTorch SDPA flash)"), ("cudnn", "cuDNN (PyTorch SDPA cudnn)")):
        t0, t1 = data.tflops(ref, headline(0)), data.tflops(ref, headline(1))
        lines.append(f"| {label} | {fmt(t0)} | {pct(t0, fa2[0])} | | {fmt(t1)} | {pct(t1, fa2[1])} | |")
    peak = data.ceiling(MMA_PEAK)
    lines.append(f"| mma.sync m16n8k16 ceiling (`./run --peak`) | {fmt(peak)} | {pct(peak, fa2[0])} | | | | |")
    # Only a Hopper GPU measures the wgmma ceiling; its name column says which instruction.
    wgmma = res.ceiling(WGMMA_PEAK)
    if wgmma is not None:
        lines.append(f"| {res.names[WGMMA_PEAK]} ceiling (`./run --peak`) | {fmt(wgmma)} | {pct(wgmma, fa2[0])} | | | | |")
    return "\n".join(lines)


def ladder_intro(data):
    return (f"Measured on the {data.gpu()} at the headline problem (B16 H16 S4096 D128 bf16), all stages "
            f"and the references in one benchmark run (`make bench`, `make reference`, `./build/allstages --peak`; "
            f"rows in `{os.path.relpath(data.csv_path, ROOT)}`):")


def sweep_table(data, stage):
    """One stage against FA2 over the sweep: TFLOP/s and ratio per (head_dim, causal, seqlen)."""
    lines = ["| head_dim | causal | " + " | ".join(seqlen_label(s) for s in SWEEP_SEQLENS) + " |",
             "|---|---|" + "---:|" * len(SWEEP_SEQLENS)]
    for d in SWEEP_HEAD_DIMS:
        for c in (0, 1):
            cells = []
            for s in SWEEP_SEQLENS:
                problem = sweep_problem(s, d, c)
                t, f = data.tflops(stage, problem), data.tflops("fa2", problem)
                cells.append(f"{fmt(t)} ({t / f:.2f}x)")
            lines.append(f"| {d} | {c} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def measured_block(data, nn):
    ladder = ladder_intro(data) + "\n\n" + ladder_table(data)
    if nn == "00":
        return ladder
    stages = [s for s in data.results.stages if s.endswith(nn)]
    if not stages:
        raise GenError(f"{data.csv_path} has no kernel{nn} rows")
    return (ladder + f"\n\nStage {nn} over the sweep, TFLOP/s and (ratio to FlashAttention-2 in the same run), bf16:"
            f"\n\n" + sweep_table(data, stages[0]))


def peak_block(data):
    """The mma.sync ceiling against FA2, cuDNN and the last stage it bounds (not a Hopper stage)."""
    peak = data.ceiling(MMA_PEAK)
    last = data.results.mma_stages[-1]
    parts = [f"{label} {fmt(data.tflops(k, headline()))} ({100 * data.tflops(k, headline()) / peak:.0f} %)"
             for k, label in (("fa2", "FA2"), (last, f"stage {stage_number(last)}"), ("cudnn", "cuDNN"))]
    return (f"`./run --peak` on the {data.gpu()}, in the benchmark run: **{fmt(peak)} TFLOP/s** (mma.sync "
            f"m16n8k16 bf16, f32 accumulate, registers only). On the headline problem in the same run: "
            + ", ".join(parts) + ".")


# What the numbers of a candidate mean, per stage that tools/tune.sh tunes: the template arguments
# of the stage's TileShape, in order, as the table's column header spells them. Some stages'
# candidates also make one more choice, named by a suffix of the candidate (TUNE_VARIANTS): stage
# 10's how O leaves the kernel (TMA store by default, 16-byte stores with +st16), stage 13's grid
# (persistent by default, one block per query tile with +np); their tables get a column for it.
CONSUMER_SHAPE = "M x N x consumer warpgroups x consumer registers x stages x blocks/SM"  # stages 11-13
TUNE_SHAPES = {
    "08": "M x N x warps x blocks/SM",
    "09": "M x N x warpgroups x blocks/SM",
    "10": "M x N x warpgroups x blocks/SM x stages",
    "11": CONSUMER_SHAPE,
    "12": CONSUMER_SHAPE,
    "13": CONSUMER_SHAPE + " x exp split x S ahead",
}
# stage -> (suffix, column header, {has the suffix: label})
TUNE_VARIANTS = {
    "10": ("+st16", "O store", {False: "TMA store", True: "16-byte stores"}),
    "13": ("+np", "grid", {False: "persistent", True: "one block per tile"}),
}


def tune_command(nn):
    """How the chapter names the command: tools/tune.sh tunes stage 08 unless told otherwise, so
    stage 08's chapter says plain `make tune`, as its reader would type it."""
    return "make tune" if nn == "08" else f"make tune K={nn}"


def tune_candidate(nn, candidate):
    """'128x128x2x1x2+st16' -> ('128x128x2x1x2', True), after checking that it has as many numbers
    as stage NN's shape has fields and no suffix but the stage's own: a candidate the header would
    mislabel is an error, not a row."""
    fields = TUNE_SHAPES[nn]
    suffix = TUNE_VARIANTS[nn][0] if nn in TUNE_VARIANTS else None
    variant = suffix is not None and candidate.endswith(suffix)
    shape = candidate[:-len(suffix)] if variant else candidate
    if not re.fullmatch(r"\d+(x\d+)*", shape) or shape.count("x") != fields.count(" x "):
        raise GenError(f"stage {nn}'s tune candidate '{candidate}' does not read as {fields}"
                       + (f", optionally followed by {suffix}" if suffix else ""))
    return shape, variant


def tune_block(data, nn):
    """Stage NN's rows of the make tune CSV: every candidate per head_dim, the fastest that passed
    its check (non-causal) in bold."""
    if nn not in TUNE_SHAPES:
        raise GenError(f"<!-- TUNE:{nn} -->: tools/tune.sh has no candidates for stage {nn} "
                       f"(it tunes stages {', '.join(TUNE_SHAPES)})")
    path, all_rows = data.tune
    how = f"`make tune K={nn}` writes them (on the GPU machine: `K={nn} bash tools/gpu_session.sh tune`)"
    if all_rows is None:
        raise GenError(f"{path} does not exist, so it has no stage {nn} candidates: {how}")
    # The file keeps every tuning run of every stage; the name column says which stage and which
    # candidate ("kernel10_tma 128x128x2x1x2+st16"): one row per (head_dim, causal, candidate), the
    # last wins.
    rows = [r for r in all_rows if r["name"].startswith(f"kernel{nn}_")]
    if not rows:
        raise GenError(f"{path} has no kernel{nn}_ rows (stage {nn}'s tile candidates): {how}")
    table, order, commits = {}, [], set()
    for r in rows:
        # A name without a candidate stays whole, so that tune_candidate's error shows it.
        candidate = r["name"].split(" ", 1)[1] if " " in r["name"] else r["name"]
        key = (r["head_dim"], candidate)
        if key not in order:
            order.append(key)
        table[key + (r["causal"],)] = r
        commits.add(r["commit"])
    fields = TUNE_SHAPES[nn]
    variants = TUNE_VARIANTS.get(nn)
    variant_head, variant_rule = (f" {variants[1]} |", "---|") if variants else ("", "")
    lines = [f"| head_dim | candidate ({fields}) |{variant_head} non-causal | causal |",
             f"|---|---|{variant_rule}---:|---:|"]
    for d in sorted({k[0] for k in order}, reverse=True):
        candidates = [k[1] for k in order if k[0] == d]
        # A candidate that computes the wrong result is no winner, however fast (tools/tune.sh
        # picks its winners the same way).
        passed = [c for c in candidates if (r := table.get((d, c, 0))) and r["check"] == "pass" and usable_tflops(r)]
        best = max(passed, key=lambda c: usable_tflops(table[(d, c, 0)])) if passed else None
        for c in candidates:
            shape, variant = tune_candidate(nn, c)
            cells = []
            for causal in (0, 1):
                r = table.get((d, c, causal))
                v = fmt(usable_tflops(r)) if r else "-"
                if r and r["check"] != "pass":
                    v += " (check " + r["check"] + ")"
                cells.append(f"**{v}**" if c == best else v)
            names = [shape] + ([variants[2][variant]] if variants else [])
            names = [f"**{n}**" if c == best else n for n in names]
            lines.append(f"| {d} | " + " | ".join(names) + f" | {cells[0]} | {cells[1]} |")
    return ("\n".join(lines) + f"\n\n(`{tune_command(nn)}` on the {rows[0]['gpu']}, commit {', '.join(sorted(commits))}; "
            f"rows in `{os.path.relpath(path, ROOT)}`. Candidates that spill are not timed and not listed. The d128 rows "
            f"are the headline problem, the d64 rows the same with 32 heads of 64.)")


def repeats_block(data, a, b):
    """REPEATS:A,B: the alternating repeat of A against B, both a stage number, fa2 or cudnn:
    medians per sweep point and the median of the per-round ratio A / B."""
    rows, path = data.repeats(a, b)
    references = {"fa2": "FA2", "cudnn": "cuDNN"}
    kernel = {x: x if x in references else f"kernel{x}" for x in (a, b)}
    label = {x: references.get(x, f"stage {x}") for x in (a, b)}
    # A round is one sweep of each, one row per problem and kernel; rows of other kernels (cuDNN
    # beside FA2, or FA2 beside cuDNN) are not part of the comparison.
    by = {}
    for r in rows:
        key = (r["head_dim"], r["causal"], r["seqlen_q"])
        by.setdefault(key, {}).setdefault(r["kernel"], []).append(usable_tflops(r))
    lines = ["| head_dim | causal | " + " | ".join(seqlen_label(s) for s in SWEEP_SEQLENS) + " |",
             "|---|---|" + "---:|" * len(SWEEP_SEQLENS)]
    rounds = set()
    for d in SWEEP_HEAD_DIMS:
        for c in (0, 1):
            cells = []
            for s in SWEEP_SEQLENS:
                point = by.get((d, c, s), {})
                if kernel[a] not in point or kernel[b] not in point:
                    raise GenError(f"{os.path.relpath(path, ROOT)} has no {kernel[a]} and {kernel[b]} rows at d{d} causal {c} "
                                   f"seqlen {s}")
                ours, theirs = point[kernel[a]], point[kernel[b]]
                rounds.add(min(len(ours), len(theirs)))
                ratio = statistics.median(x / y for x, y in zip(ours, theirs))
                cells.append(f"{statistics.median(ours):.1f} / {statistics.median(theirs):.1f} ({ratio:.2f}x)")
            lines.append(f"| {d} | {c} | " + " | ".join(cells) + " |")
    commit = rows[0]["commit"]
    return (f"{'/'.join(map(str, sorted(rounds)))} rounds at commit {commit} (rows in "
            f"`{os.path.relpath(path, ROOT)}`); medians of {label[a]} / {label[b]} in TFLOP/s, and (the median of the "
            f"per-round ratio):\n\n" + "\n".join(lines))


def ab_block(data, nn, commit, directory=None):
    """AB:NN,COMMIT: every variant build of stage NN against the base build, their sweeps timed in
    alternation (tools/ab.sh at COMMIT): per sweep point, the median of the per-round ratio
    variant / base."""
    directory = directory or data.ab_dir(nn, commit)
    where = os.path.relpath(directory, ROOT)
    base_path = os.path.join(directory, "base.csv")
    if not os.path.exists(base_path):
        raise GenError(f"no {where}/base.csv: make ab K={nn} writes it on the GPU machine")
    variants = sorted(p for p in glob.glob(os.path.join(directory, "*.csv")) if p != base_path)
    if not variants:
        raise GenError(f"{where} holds no variant beside base.csv")

    rounds, commits = set(), set()

    def by_point(path):
        points = {}
        for r in parse_csv(path):
            points.setdefault((r["head_dim"], r["causal"], r["seqlen_q"]), []).append(usable_tflops(r))
            commits.add(r["commit"])
        return points
    base = by_point(base_path)
    lines = ["| variant | head_dim | causal | " + " | ".join(seqlen_label(s) for s in SWEEP_SEQLENS) + " |",
             "|---|---|---|" + "---:|" * len(SWEEP_SEQLENS)]
    for path in variants:
        name, points = os.path.splitext(os.path.basename(path))[0], by_point(path)
        for d in SWEEP_HEAD_DIMS:
            for c in (0, 1):
                cells = []
                for s in SWEEP_SEQLENS:
                    key = (d, c, s)
                    if key not in points or key not in base:
                        raise GenError(f"{where}: {name}.csv or base.csv has no row at d{d} causal {c} seqlen {s}")
                    rounds.add(min(len(points[key]), len(base[key])))
                    cells.append(f"{statistics.median(x / y for x, y in zip(points[key], base[key])):.2f}x")
                lines.append(f"| {name} | {d} | {c} | " + " | ".join(cells) + " |")
    return (f"{'/'.join(map(str, sorted(rounds)))} rounds of each build's sweep in turn, commit {', '.join(sorted(commits))} "
            f"(rows in `{where}/`); each cell is the median over the rounds of variant / base TFLOP/s at that point:"
            f"\n\n" + "\n".join(lines))


NCU_LABELS = {
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "extra wavefronts of shared loads (bank conflicts)",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "extra wavefronts of shared stores (bank conflicts)",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "wavefronts of shared loads, in all",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor pipe busy, % of active cycles",
}


def ncu_block(data, kernels):
    path = os.path.relpath(data.ncu[0], ROOT)
    lines = ["| Nsight Compute counter (headline problem, one launch) | " + " | ".join(f"stage {k[-2:]}" for k in kernels) + " |",
             "|---|" + "---:|" * len(kernels)]
    commits = set()
    for metric, label in NCU_LABELS.items():
        cells = []
        for k in kernels:
            value, unit, commit = data.ncu_value(k, metric)
            commits.add(commit)
            cells.append(f"{value:.1f} %" if unit == "%" else f"{value:,.0f}")
        lines.append(f"| `{metric}`: {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\n(`tools/gpu_session.sh ncu`, commit {', '.join(sorted(commits))}; rows in `{path}`.)"


# ------------------------------------------------------------------------------------------------
# Inline figures: <!-- fig WHAT --> ... <!-- /fig -->, WHAT one of
#   tflops KERNEL [PROBLEM]          339.1           a stage's or a reference's TFLOP/s
#   ratio KERNEL KERNEL [PROBLEM]    4.22x           the first over the second
#   pct KERNEL KERNEL [PROBLEM]      53 %            the first as a percentage of the second
#   peak                             648.0           the mma.sync ceiling (the mma_peak row)
#   peakpct KERNEL [PROBLEM]         53 %            a kernel's TFLOP/s as a percentage of the ceiling
#   wgmmapeak                        929.0           the wgmma ceiling (the wgmma_peak row: Hopper only)
#   wgmmapeakpct KERNEL [PROBLEM]    55 %            a kernel's TFLOP/s as a percentage of the wgmma ceiling
#   ncu KERNEL METRIC [PROBLEM]      7.5 G / 12.6 %  one Nsight Compute counter (of NCU_PROBLEM's rows)
#   ncuratio KERNEL KERNEL METRIC    8.0x            the first kernel's counter over the second's
#   sweepratio KERNEL REF D C        0.96x-1.23x     the range of KERNEL / REF over the sweep (D: 64,
#                                                    128 or all; C: 0, 1 or all; seqlen >= 1k: add >=1k)
# PROBLEM is headline (the default), headline/causal, sweep/D/S or sweep/D/S/causal.

# The two ceilings of ./run --peak, by figure kind ("peakpct" / "wgmmapeakpct" divide by them):
# mma.sync's bounds stages 01-08, wgmma's the Hopper track.
CEILING_FIGURES = {"peak": MMA_PEAK, "wgmmapeak": WGMMA_PEAK}


def figure(data, what):
    args = what.split()
    kind, rest = args[0], args[1:]
    if kind == "tflops":
        return fmt(data.tflops(rest[0], problem_arg(rest[1]) if len(rest) > 1 else headline()))
    if kind == "ratio":
        p = problem_arg(rest[2]) if len(rest) > 2 else headline()
        return f"{data.tflops(rest[0], p) / data.tflops(rest[1], p):.2f}x"
    if kind == "pct":
        p = problem_arg(rest[2]) if len(rest) > 2 else headline()
        return f"{100 * data.tflops(rest[0], p) / data.tflops(rest[1], p):.0f} %"
    if kind in CEILING_FIGURES:
        return fmt(data.ceiling(CEILING_FIGURES[kind]))
    if kind.endswith("pct") and kind[:-len("pct")] in CEILING_FIGURES:
        ceiling = data.ceiling(CEILING_FIGURES[kind[:-len("pct")]])
        p = problem_arg(rest[1]) if len(rest) > 1 else headline()
        return f"{100 * data.tflops(rest[0], p) / ceiling:.0f} %"
    if kind == "ncu":
        value, unit, _ = data.ncu_value(rest[0], rest[1], *rest[2:3])
        return f"{value:.1f} %" if unit == "%" else count(value)
    if kind == "ncuratio":
        return f"{data.ncu_value(rest[0], rest[2])[0] / data.ncu_value(rest[1], rest[2])[0]:.1f}x"
    if kind == "sweepratio":
        kernel, ref, d, c = rest[:4]
        min_seqlen = 1024 if ">=1k" in rest else 0
        ratios = [data.tflops(kernel, sweep_problem(s, hd, cc)) / data.tflops(ref, sweep_problem(s, hd, cc))
                  for hd in SWEEP_HEAD_DIMS if d in ("all", str(hd)) for cc in (0, 1) if c in ("all", str(cc))
                  for s in SWEEP_SEQLENS if s >= min_seqlen]
        return f"{min(ratios):.2f}x–{max(ratios):.2f}x"
    raise GenError(f"unknown figure '{what}'")


# ------------------------------------------------------------------------------------------------
# The stage table and the kernel headers

BLOG = "https://lubits.ch/flash/"


def stage_dirs():
    return sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "kernel[0-9][0-9]_*/kernel.cu")))


def stage_header(dirname):
    """(technique, [blog URLs]) from the header comment of the stage's kernel.cu."""
    text = open(os.path.join(ROOT, dirname, "kernel.cu")).read()
    title = re.search(r"^ \* Stage \d\d - [a-z_0-9]+: (.*)$", text, re.M)
    read = re.search(r"^ \* Read: +(.*(?:\n \*  {11}.*)*)", text, re.M)
    if not title or not read:
        raise GenError(f"{dirname}/kernel.cu: the header needs a 'Stage NN - name: ...' line and a 'Read:' line")
    urls = re.findall(re.escape(BLOG) + r"[A-Za-z0-9-]+", read.group(1))
    return title.group(1).rstrip("."), urls


def blog_label(url):
    page = url[len(BLOG):]
    match = re.match(r"(Part|Appendix)-?([0-9A-Z]*)", page)
    return f"{match.group(1)} {match.group(2)}".strip() if match else page


def stages_block(in_docs):
    """The stage table, for a page in docs/ (chapter links beside it) or at the root."""
    lines = ["| stage | technique | chapter | the blog's part |", "|---|---|---|---|"]
    for d in stage_dirs():
        technique, urls = stage_header(d)
        nn = d[6:8]
        docs = sorted(glob.glob(os.path.join(ROOT, "docs", nn + "_*.md")))
        if not docs:
            raise GenError(f"{d} has no chapter docs/{nn}_*.md")
        page = os.path.basename(docs[0])
        chapter = f"[{nn}]({page})" if in_docs else f"[docs/{nn}](docs/{page})"
        parts = ", ".join(f"[{blog_label(u)}]({u})" for u in urls) or "-"
        lines.append(f"| `{d}` | {technique} | {chapter} | {parts} |")
    return "\n".join(lines)


def measured_line(data, dirname):
    """The 'Measured:' lines of a stage's header."""
    kernel = dirname[:8]
    res = data.results
    if res.row(kernel, headline()) is None:
        raise GenError(f"{data.csv_path} has no {kernel} row at the headline problem")
    t0, t1 = data.tflops(kernel, headline(0)), data.tflops(kernel, headline(1))
    fa2_0, fa2_1 = data.tflops("fa2", headline(0)), data.tflops("fa2", headline(1))
    text = (f"{data.gpu()}, B16 H16 S4096 D128 bf16 (make bench, commit {data.commit(kernel, headline())}): "
            f"{fmt(t0)} TFLOP/s ({100 * t0 / fa2_0:.0f}% of FA2)")
    index = res.stages.index(kernel)
    if index > 0:
        prev = res.stages[index - 1]
        text += f", {t0 / data.tflops(prev, headline()):.2f}x stage {stage_number(prev)}"
    text += f"; causal {fmt(t1)} ({100 * t1 / fa2_1:.0f}% of FA2)."
    # The header's fields start at column 14 (" * Measured:  "); wrapped at 100 columns.
    lines = textwrap.wrap(text, width=100 - 14)
    return "".join((" * Measured:  " if i == 0 else " *" + " " * 12) + line + "\n" for i, line in enumerate(lines))


# ------------------------------------------------------------------------------------------------
# Applying it

def replace_block(text, start, end, body, where):
    pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise GenError(f"{where}: {start} without {end}")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", text)


def render_markdown(data, path, text):
    where = os.path.relpath(path, ROOT)
    if "<!-- RESULTS -->" in text:
        png = f"plots/{data.slug}"
        text = replace_block(text, "<!-- RESULTS -->", "<!-- /RESULTS -->",
                             ladder_intro(data) + "\n\n" + ladder_table(data)
                             + f"\n\n![stage ladder]({png}_ladder.png)\n\n![TFLOP/s against seqlen]({png}_sweep.png)", where)
    if "<!-- STAGES -->" in text:
        in_docs = os.path.dirname(os.path.abspath(path)) != ROOT
        text = replace_block(text, "<!-- STAGES -->", "<!-- /STAGES -->", stages_block(in_docs), where)
    for nn in re.findall(r"<!-- MEASURED:(\d\d) -->", text):
        text = replace_block(text, f"<!-- MEASURED:{nn} -->", "<!-- /MEASURED -->", measured_block(data, nn), where)
    if "<!-- PEAK -->" in text:
        text = replace_block(text, "<!-- PEAK -->", "<!-- /PEAK -->", peak_block(data), where)
    # The tune CSV holds the candidates of several stages: a block without a stage number would not
    # say whose, and is left over from when it held stage 08's alone.
    if "<!-- TUNE -->" in text:
        raise GenError(f"{where}: <!-- TUNE --> names no stage: write <!-- TUNE:NN --> (NN one of {', '.join(TUNE_SHAPES)})")
    for nn in re.findall(r"<!-- TUNE:(\d\d) -->", text):
        text = replace_block(text, f"<!-- TUNE:{nn} -->", "<!-- /TUNE -->", tune_block(data, nn), where)
    for a, b in re.findall(r"<!-- REPEATS:(\w+),(\w+) -->", text):
        text = replace_block(text, f"<!-- REPEATS:{a},{b} -->", "<!-- /REPEATS -->", repeats_block(data, a, b), where)
    for nn, commit in re.findall(r"<!-- AB:(\d\d),(\w+) -->", text):
        text = replace_block(text, f"<!-- AB:{nn},{commit} -->", "<!-- /AB -->", ab_block(data, nn, commit), where)
    for spec in re.findall(r"<!-- NCU:([0-9,]+) -->", text):
        kernels = [f"kernel{nn}" for nn in spec.split(",")]
        text = replace_block(text, f"<!-- NCU:{spec} -->", "<!-- /NCU -->", ncu_block(data, kernels), where)

    def fig(m):
        try:
            return f"<!-- fig {m.group(1)} -->{figure(data, m.group(1))}<!-- /fig -->"
        except (GenError, KeyError, IndexError, ValueError, ZeroDivisionError) as e:
            raise GenError(f"{where}: <!-- fig {m.group(1)} -->: {e}")
    return re.sub(r"<!-- fig ([^\n]*?) -->.*?<!-- /fig -->", fig, text, flags=re.S)


def render_kernel(data, path, text):
    dirname = os.path.basename(os.path.dirname(path))
    pattern = re.compile(r"^ \* Measured:.*?(?=^ \* Needs:)", re.S | re.M)
    if not pattern.search(text):
        raise GenError(f"{dirname}/kernel.cu: the header needs a ' * Measured:' line before ' * Needs:'")
    return pattern.sub(lambda _: measured_line(data, dirname), text, count=1)


def outputs(data):
    """{path: new text} for every file the CSVs fill."""
    files = {}
    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    for path in pages:
        files[path] = render_markdown(data, path, open(path).read())
    for d in stage_dirs():
        path = os.path.join(ROOT, d, "kernel.cu")
        files[path] = render_kernel(data, path, open(path).read())
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", help="the benchmark CSV (default: the one plots/*.csv)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="update the files in place")
    mode.add_argument("--check", action="store_true", help="exit 1 if a file differs from what the CSVs give")
    args = ap.parse_args()
    csv_path = args.csv
    if not csv_path:
        found = sorted(glob.glob(os.path.join(ROOT, "plots", "*.csv")))
        if len(found) != 1:
            print(f"error: name the benchmark CSV with --csv (plots/ holds {len(found)})", file=sys.stderr)
            return 2
        csv_path = found[0]
    try:
        data = Data(csv_path)
        files = outputs(data)
    except (CsvError, GenError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    stale = [p for p, text in files.items() if open(p).read() != text]
    if args.check:
        for p in stale:
            print(f"{os.path.relpath(p, ROOT)}: differs from what {os.path.relpath(csv_path, ROOT)} and the other CSVs give "
                  f"(tools/results_md.py --write regenerates it)")
        return 1 if stale else 0
    if args.write:
        for p in stale:
            open(p, "w").write(files[p])
            print(f"wrote {os.path.relpath(p, ROOT)}")
        return 0
    for p in stale:
        print(f"== {os.path.relpath(p, ROOT)} would change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
