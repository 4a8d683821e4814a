#!/usr/bin/env python3
"""Every measured figure of README.md, docs/*.md and the stages' header comments, written from
the CSVs the harness and the tools wrote on the GPU, so that the prose never carries a number
they did not produce:

  plots/<gpu>.csv           make bench, make reference, ./run --peak   (the benchmark run: one run)
  plots/rounds/<gpu>_<commit>.csv  make rounds                          (every stage and reference
                            at the headline, the last stage of each track and the references over
                            the sweep, in alternating rounds: every ratio the text states)
  plots/rounds/<gpu>_<commit>_again.csv   make rounds ROUNDS_TAG=_again (the same commit measured
                            a second time in the same call: the reproducibility table)
  plots/tune/<gpu>.csv      make tune K=NN                              (the candidate tiles of stages 08-15)
  plots/ncu/<gpu>.csv       tools/ncu_metrics.sh                        (Nsight Compute, every stage)
  plots/repeats/*.csv       two kernels' sweeps timed alternately       (tools/gpu_session.sh repeat)
  plots/ab/<gpu>_NN_<commit>/  builds of stage NN timed alternately     (make ab, tools/ab.sh)
  plots/fp8_error/<gpu>_<commit>.csv  make fp8-error                    (the e4m3 error of the last fp8
                            stage and of FA3 against float64: harness/fp8_error.py)

What it fills, between markers that the text keeps:

  <!-- RESULTS --> ... <!-- /RESULTS -->        README: the ladder table, the sweep tables of the
                                                last stage of each track, and the two plots
  <!-- LADDER --> ... <!-- /LADDER -->          README's front page: each stage at the headline,
                                                non-causal, bf16, with its technique, TFLOP/s and
                                                ratios to the stage before and to FA3; each stage
                                                that takes e4m3 again in e4m3; the references
  <!-- REPRO[:COMMIT] --> ... <!-- /REPRO -->   the README's ratios from two measurements of one commit
  <!-- STAGES --> ... <!-- /STAGES -->          the stage table, from the kernelNN_name directories
  <!-- MEASURED:NN --> ... <!-- /MEASURED -->  the ladder, and stage NN over the sweep; for a stage
                                                that takes e4m3 inputs, also in e4m3 at the headline
                                                (against FA3 in e4m3 and the last Hopper stage
                                                without fp8 in bf16) and over the sweep
  <!-- PEAK --> ... <!-- /PEAK -->              the mma.sync ceiling and what reaches how much of it
  <!-- TUNE:NN --> ... <!-- /TUNE -->           the make tune table of stage NN
  <!-- REPEATS:A,B --> ... <!-- /REPEATS -->    the alternating repeat of A against B (08,fa2; 10,09; 13,cudnn)
  <!-- AB:NN,COMMIT --> ... <!-- /AB -->        builds of stage NN against its base build, timed alternately
  <!-- NCU:NN,MM --> ... <!-- /NCU -->          Nsight Compute counters of stages NN and MM
  <!-- SHAPES:NN,COMMIT --> ... <!-- /SHAPES -->  stage NN on the shapes off the sweep (make rounds-shapes)
  <!-- FP8ERR:COMMIT --> ... <!-- /FP8ERR -->  the e4m3 error of the last fp8 stage and of FA3 (make fp8-error;
                                               SLUG:COMMIT: a run on another GPU)
  <!-- fig WHAT --> ... <!-- /fig -->           one figure inside a sentence (see FIGURES below)
  <!-- ROUNDS:COMMIT -->                        this page's rounds are plots/rounds/<gpu>_<commit>.csv,
                                                not the latest (a chapter that quotes pairs a later
                                                measurement did not time)
  " * Measured:" ... up to " * Needs:"          in each kernelNN_name/kernel.cu header

Usage: tools/results_md.py [--write | --check] [--csv plots/<gpu>.csv]
  (neither)  print what would be written;  --write  update the files;  --check  exit 1 if any file
  differs from what the CSVs give (tests/test_docs.sh runs this: prose and CSV never disagree).
"""
import argparse
import copy
import csv
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "plots"))
sys.path.insert(0, os.path.join(ROOT, "harness"))
from contract import (BENCH_DTYPES, FP8_DTYPE, HEADLINE, MMA_PEAK, ROUNDS_ITERS, SWEEP_HEAD_DIMS, SWEEP_SEQLENS,  # noqa: E402
                      WGMMA_PEAK, seqlen_label, shape_problems, sweep_problem)
from plot import HOPPER_TRACK_LABEL, CsvError, Results, Rounds, find_rounds, parse_csv, usable_tflops  # noqa: E402
import fp8_error  # noqa: E402


# Every region this script writes, as one pattern: tests/lint_docs.py skips them when it looks for
# figures typed by hand.
GENERATED_REGION = re.compile(
    r"<!-- (RESULTS|LADDER|REPRO(?::\w+)?|STAGES|MEASURED:\d\d|PEAK|TUNE:\d\d|REPEATS:\w+,\w+|AB:\d\d,\w+|NCU:[0-9,]+"
    r"|SHAPES:\d\d,\w+|FP8ERR:[\w:]+) -->.*?<!-- /(RESULTS|LADDER|REPRO|STAGES|MEASURED|PEAK|TUNE|REPEATS|AB|NCU|SHAPES|FP8ERR) -->"
    r"|<!-- fig [^\n]*?-->.*?<!-- /fig -->", re.S)


class GenError(Exception):
    """A marker asks for something the CSVs do not hold; the message names the file."""


# ------------------------------------------------------------------------------------------------
# Data

def headline(causal=0, dtype=HEADLINE[0]):
    return (dtype,) + HEADLINE[1:-1] + (causal,)


def problem_arg(text, dtype=HEADLINE[0]):
    """'headline', 'headline/causal', 'sweep/D/S' or 'sweep/D/S/causal' -> a problem tuple, in
    `dtype` (bf16, or e4m3: the same shape with q, k and v in e4m3)."""
    parts = text.split("/")
    causal = 1 if parts[-1] == "causal" else 0
    if parts[0] == "headline":
        return headline(causal, dtype)
    if parts[0] == "sweep" and len(parts) >= 3:
        return sweep_problem(int(parts[2]), int(parts[1]), causal, dtype)
    raise GenError(f"unknown problem '{text}'")


class Data:
    def __init__(self, csv_path):
        self.csv_path = csv_path
        self.slug = os.path.splitext(os.path.basename(csv_path))[0]
        self.results = Results(parse_csv(csv_path))
        self.tune = self._optional(os.path.join(ROOT, "plots", "tune", self.slug + ".csv"), parse_csv)
        self.ncu = self._optional(os.path.join(ROOT, "plots", "ncu", self.slug + ".csv"), read_ncu)
        # The alternating rounds: the latest first measurement (plot.find_rounds: the ladder plot
        # reads the same file), and the second measurement of the same commit where there is one.
        self.rounds = find_rounds(csv_path)
        if self.rounds:
            self.results.add_timed_stages(self.rounds[1].rows)
        self.again = None
        if self.rounds:
            again = self.rounds[0][:-len(".csv")] + "_again.csv"
            if os.path.exists(again):
                self.again = (again, Rounds(parse_csv(again)))

    def pinned(self, commit, where):
        """This data with the rounds of COMMIT (plots/rounds/<gpu>_<commit>.csv) in place of the
        latest: a page marked <!-- ROUNDS:COMMIT --> keeps the rounds it was written from, where the
        latest rounds do not time what it quotes (a chapter comparing a stage with the one before it
        over the sweep, ROUNDS_ALSO, while a later measurement timed another pair)."""
        path = os.path.join(ROOT, "plots", "rounds", f"{self.slug}_{commit}.csv")
        if not os.path.exists(path):
            raise GenError(f"{where}: <!-- ROUNDS:{commit} -->: no {os.path.relpath(path, ROOT)}")
        pinned = copy.copy(self)
        pinned.rounds = (path, Rounds(parse_csv(path)))
        again = path[:-len(".csv")] + "_again.csv"
        pinned.again = (again, Rounds(parse_csv(again))) if os.path.exists(again) else None
        return pinned

    def repeats(self, a, b):
        """The rows of the latest alternating repeat of a against b ("08", "fa2"), and its path. The
        reference sweep times FA2 and cuDNN together, so b = "cudnn" reads the repeat against fa2."""
        file_b = "fa2" if b == "cudnn" else b
        pattern = os.path.join(ROOT, "plots", "repeats", f"{self.slug}_{a}_vs_{file_b}_*.csv")
        paths = sorted(glob.glob(pattern), key=os.path.getmtime)
        if not paths:
            raise GenError(f"no {os.path.relpath(pattern, ROOT)}: REPEAT=\"{a} {file_b}\" bash tools/gpu_session.sh repeat "
                           f"writes one")
        return parse_csv(paths[-1]), paths[-1]

    def ab_dir(self, nn, commit):
        """Where tools/ab.sh kept one run of stage nn's builds: base.csv and one CSV per variant.
        COMMIT may be SLUG:COMMIT, a run on another GPU than the one the docs describe."""
        slug, _, commit = commit.rpartition(":")
        return os.path.join(ROOT, "plots", "ab", f"{slug or self.slug}_{nn}_{commit}")

    @staticmethod
    def _optional(path, reader):
        return (path, reader(path)) if os.path.exists(path) else (path, None)

    def gpu(self):
        return self.results.gpu_label()

    # -- one benchmark run (make bench): the check column, the ceilings, one-run TFLOP/s --------
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

    # -- the alternating rounds (make rounds): every ratio, and the TFLOP/s quoted with them ------
    def _rounds(self):
        if self.rounds is None:
            raise GenError(f"no plots/rounds/{self.slug}_<commit>.csv: make rounds (tools/gpu_session.sh rounds) "
                           f"writes the alternating rounds every ratio comes from")
        return self.rounds

    def rounds_path(self):
        return os.path.relpath(self._rounds()[0], ROOT)

    def rounds_count(self):
        return self._rounds()[1].fewest()

    def rounds_commit(self):
        return ", ".join(self._rounds()[1].commits())

    def has_rounds(self, kernel, problem, which=None):
        which = which or self.rounds
        return which is not None and which[1].rounds(kernel, problem) > 0

    def median(self, kernel, problem, which=None):
        path, rounds = which or self._rounds()
        value = rounds.medians(kernel, problem)
        if value is None:
            raise GenError(f"{os.path.relpath(path, ROOT)} has no {kernel} rows for {problem} "
                           f"(make rounds times every stage and reference at the headline, and over the sweep "
                           f"the last stage of each track and the references)")
        return value

    def ratio(self, a, b, problem, which=None, problem_b=None):
        """a's TFLOP/s over b's within a round, the median over the pairs of rounds (plot.round_ratio);
        with problem_b, b's at that problem (an e4m3 stage over a bf16 one at the same shape)."""
        path, rounds = which or self._rounds()
        self.median(a, problem, which)
        self.median(b, problem_b or problem, which)
        return rounds.ratio(a, b, problem, problem_b)

    def ncu_value(self, kernel, metric, problem="headline"):
        """The newest row of KERNEL's counter, or with KERNEL@COMMIT the newest of that commit's."""
        path, rows = self.ncu
        if rows is None:
            raise GenError(f"{path} does not exist (tools/gpu_session.sh ncu writes it)")
        kernel, _, commit = kernel.partition("@")
        key = (kernel, metric, problem) + ((commit,) if commit else ())
        if key not in rows:
            raise GenError(f"{path} has no {metric} for {kernel} at {problem}" + (f" from commit {commit}" if commit else "")
                           + f" (NCU_PROBLEM={problem} tools/ncu_metrics.sh writes it)")
        return rows[key]


def read_ncu(path):
    """{(kernel, metric, problem): (value, unit, commit)}: the last row of each wins; and the same
    under (kernel, metric, problem, commit), the last row of each commit."""
    rows = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                value = float(row["value"])
            except ValueError:
                continue
            rows[(row["kernel"], row["metric"], row["problem"])] = (value, row["unit"], row["commit"])
            rows[(row["kernel"], row["metric"], row["problem"], row["commit"])] = (value, row["unit"], row["commit"])
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

# The references a ratio is taken against, in the columns' order, and how the tables name them.
REFERENCES = (("fa2", "FA2"), ("cudnn", "cuDNN"), ("fa3", "FA3"))
REFERENCE_NAMES = {"fa2": "FlashAttention-2 (PyTorch SDPA flash)", "cudnn": "cuDNN (PyTorch SDPA cudnn)",
                   "fa3": "FlashAttention-3 (its own kernels, fa3_fwd)"}
# What the last stage of each track is measured against over the sweep: stages 01-08 follow the
# chapters towards FlashAttention-2; the Hopper track's bar is FlashAttention-3, with cuDNN beside it.
TRACK_REFERENCES = {False: ("fa2",), True: ("fa3", "cudnn")}


def xr(x):
    return f"{x:.2f}x"


def rounds_references(data, problem):
    """The references the rounds timed at `problem`, in REFERENCES order."""
    return [(k, label) for k, label in REFERENCES if data.has_rounds(k, problem)]


def ladder_table(data):
    """Every stage at the headline problem, non-causal and causal, from the alternating rounds: the
    median TFLOP/s, the median per-round ratio to each reference and to the stage before; the check
    of the benchmark run; the Hopper track after a row that says so, as the ladder plot draws it."""
    res = data.results
    refs = rounds_references(data, headline(0))
    half = "TFLOP/s | " + " | ".join(f"/ {label}" for _, label in refs) + " | vs previous"
    lines = [f"| stage | {half} | causal {half} | check |",
             "|---|" + "---:|" * (2 * (len(refs) + 2)) + "---|"]
    stages = [k for k in res.stages if data.has_rounds(k, headline(0))]
    hopper_row = False
    for n, stage in enumerate(stages):
        if stage in res.hopper and not hopper_row:
            lines.append(f"| *{HOPPER_TRACK_LABEL}* |" + " |" * (2 * (len(refs) + 2) + 1))
            hopper_row = True
        cells = []
        for c in (0, 1):
            p = headline(c)
            cells.append(fmt(data.median(stage, p)))
            cells += [xr(data.ratio(stage, k, p)) for k, _ in refs]
            cells.append(xr(data.ratio(stage, stages[n - 1], p)) if n > 0 else "-")
        checks = "/".join(r["check"] for r in (res.row(stage, headline(0)), res.row(stage, headline(1))) if r) or "-"
        lines.append(f"| {res.names.get(stage, stage)} | " + " | ".join(cells) + f" | {checks} |")
    for ref, _ in refs:
        cells = []
        for c in (0, 1):
            p = headline(c)
            cells.append(fmt(data.median(ref, p)))
            cells += [xr(data.ratio(ref, k, p)) for k, _ in refs]
            cells.append("")
        lines.append(f"| {REFERENCE_NAMES[ref]} | " + " | ".join(cells) + " | |")
    blank = " |" * (2 * (len(refs) + 2) - 1)
    lines.append(f"| mma.sync m16n8k16 ceiling (`./run --peak`) | {fmt(data.ceiling(MMA_PEAK))} |{blank} |")
    # Only a Hopper GPU measures the wgmma ceiling; its name column says which instruction.
    wgmma = res.ceiling(WGMMA_PEAK)
    if wgmma is not None:
        lines.append(f"| {res.names[WGMMA_PEAK]} ceiling (`./run --peak`) | {fmt(wgmma)} |{blank} |")
    return "\n".join(lines)


def ladder_intro(data):
    count = data.rounds_count()
    unpaired = ", the last, unpaired, left out" if count % 2 else ""
    return (f"Measured on the {data.gpu()} at the headline problem (B16 H16 S4096 D128 bf16), in "
            f"{count} alternating rounds in one call (`make rounds`, commit {data.rounds_commit()}; rows in "
            f"`{data.rounds_path()}`): each round times every stage and reference in turn, TFLOP/s is the median "
            f"over the rounds, and each ratio the median over the {count // 2} pairs of rounds (one in each order"
            f"{unpaired}) of the ratio within a round. The check column is the "
            f"correctness check of the benchmark run (`make bench`, rows in `{os.path.relpath(data.csv_path, ROOT)}`), "
            f"whose single run also draws the sweep plot; the ceilings come from `./run --peak` in that run.")


def track_last_stages(data, which=None):
    """[(stage, is_hopper)] for the last stage of each track that the rounds (`which`: one
    measurement, by default data.rounds) timed over the whole sweep."""
    res = data.results
    out = []
    for hopper in (False, True):
        track = [k for k in res.stages if (k in res.hopper) == hopper
                 and all(data.has_rounds(k, sweep_problem(s, d, c), which) for s in SWEEP_SEQLENS for d in SWEEP_HEAD_DIMS for c in (0, 1))]
        if track:
            out.append((track[-1], hopper))
    return out


def track_references(hopper):
    """[(reference, label)] that the last stage of a track is measured against over the sweep."""
    return [(k, label) for k, label in REFERENCES if k in TRACK_REFERENCES[hopper]]


def sweep_rounds_table(data, stage, refs, dtype=HEADLINE[0]):
    """A stage over the sweep in `dtype`, from the rounds: its median TFLOP/s, and the median
    per-round ratio to each of `refs` ([(reference, label)], at the same problems), per (head_dim,
    causal, seqlen)."""
    lines = ["| head_dim | causal | | " + " | ".join(seqlen_label(s) for s in SWEEP_SEQLENS) + " |",
             "|---|---|---|" + "---:|" * len(SWEEP_SEQLENS)]
    for d in SWEEP_HEAD_DIMS:
        for c in (0, 1):
            points = [sweep_problem(s, d, c, dtype) for s in SWEEP_SEQLENS]
            lines.append(f"| {d} | {c} | TFLOP/s | " + " | ".join(fmt(data.median(stage, p)) for p in points) + " |")
            for k, label in refs:
                lines.append(f"| | | / {label} | " + " | ".join(xr(data.ratio(stage, k, p)) for p in points) + " |")
    return "\n".join(lines)


def sweep_intro(data, stage, hopper):
    refs = " and ".join(label for _, label in track_references(hopper))
    return (f"Stage {stage_number(stage)} over the sweep (B·S = 65536, H·D = 2048, bf16) against {refs}, in the same "
            f"rounds: TFLOP/s (median), then the ratios (median over the pairs of rounds):")


def sweep_onerun_table(data, stage, dtype=HEADLINE[0]):
    """A stage the rounds did not sweep: its TFLOP/s over the sweep in the one benchmark run, and no
    ratio (between two kernels of one run a ratio moves with the clocks: docs/measuring.md)."""
    lines = ["| head_dim | causal | " + " | ".join(seqlen_label(s) for s in SWEEP_SEQLENS) + " |",
             "|---|---|" + "---:|" * len(SWEEP_SEQLENS)]
    for d in SWEEP_HEAD_DIMS:
        for c in (0, 1):
            lines.append(f"| {d} | {c} | " + " | ".join(fmt(data.tflops(stage, sweep_problem(s, d, c, dtype)))
                                                      for s in SWEEP_SEQLENS) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# e4m3: the stages that take fp8 inputs (plot.stage_fp8), timed by make rounds at the headline and
# over the sweep with q, k and v in e4m3 beside FlashAttention-3's fp8 forward, the one reference
# that takes them; and set against the last Hopper stage without fp8 in bf16 (plot.last_bf16_stage),
# timed in the same rounds at the same shape.

def fp8_bar(data):
    """The bf16 stage the e4m3 stages are set against (kernel14 beside kernel15)."""
    bar = data.results.last_bf16
    if bar is None:
        raise GenError("no Hopper stage without fp8 to set the e4m3 stages against")
    return bar


def fp8_headline_table(data, stages):
    """`stages` (those that take e4m3) and FA3 with e4m3 inputs at the headline problem, non-causal
    and causal, from the rounds: the median TFLOP/s, the median per-round ratio to FA3 in e4m3, and
    to the last Hopper stage without fp8 in bf16 at the same shape."""
    bar = fp8_bar(data)
    refs = ["fa3"] if data.has_rounds("fa3", headline(0, FP8_DTYPE)) else []
    half = "TFLOP/s | " + "".join("/ FA3 e4m3 | " for _ in refs) + f"/ stage {stage_number(bar)} bf16"
    lines = [f"| e4m3 | {half} | causal {half} |", "|---|" + "---:|" * (2 * (len(refs) + 2))]
    for kernel in stages + refs:
        cells = []
        for c in (0, 1):
            p = headline(c, FP8_DTYPE)
            cells.append(fmt(data.median(kernel, p)))
            cells += [xr(data.ratio(kernel, k, p)) for k in refs]
            cells.append(xr(data.ratio(kernel, bar, p, problem_b=headline(c))))
        name = REFERENCE_NAMES.get(kernel) or data.results.names.get(kernel, kernel)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fp8_headline_intro(data, stages):
    bar = fp8_bar(data)
    numbers = " and ".join(stage_number(k) for k in stages)
    return (f"Stage{'s' if len(stages) > 1 else ''} {numbers} with q, k and v in e4m3 (descales of 1, O in bf16) "
            f"at the headline problem, in the same rounds: TFLOP/s (median), and the ratios (median over the pairs "
            f"of rounds) to FlashAttention-3's fp8 forward on the same inputs and to stage {stage_number(bar)}, the "
            f"last Hopper stage without fp8, in bf16 at the same shape:")


def fp8_stages_in_rounds(data, which=None):
    """The stages that take e4m3 and that the rounds (`which`: one measurement, by default
    data.rounds) timed in e4m3 at the headline, non-causal and causal."""
    return [k for k in data.results.stages if k in data.results.fp8
            and all(data.has_rounds(k, headline(c, FP8_DTYPE), which) for c in (0, 1))]


def fp8_sweep_block(data, stage):
    """A stage that takes e4m3 over the sweep in e4m3: against FA3 in e4m3 from the rounds, which
    sweep the last such stage; else its TFLOP/s in the one benchmark run, without a ratio."""
    nn = stage_number(stage)
    if all(data.has_rounds(stage, p) for p in sweep_points("all", "all", (), FP8_DTYPE)):
        return (f"Stage {nn} over the sweep in e4m3 (B·S = 65536, H·D = 2048, q, k and v in e4m3), against "
                f"FA3 in e4m3, in the same rounds: TFLOP/s (median), then the ratio (median over the pairs of "
                f"rounds):\n\n" + sweep_rounds_table(data, stage, [("fa3", "FA3")], FP8_DTYPE))
    return (f"Stage {nn} over the sweep in e4m3 in the one benchmark run (`make bench`), TFLOP/s; the rounds did "
            f"not sweep this stage in e4m3, so no ratio is given here:\n\n" + sweep_onerun_table(data, stage, FP8_DTYPE))


def results_block(data):
    """README: the ladder, the sweep of the last stage of each track, the two plots; and where the
    rounds timed a stage in e4m3, its headline in e4m3 and the fp8 plot."""
    parts = [ladder_intro(data), ladder_table(data)]
    for stage, hopper in track_last_stages(data):
        parts += [sweep_intro(data, stage, hopper), sweep_rounds_table(data, stage, track_references(hopper))]
    fp8 = fp8_stages_in_rounds(data)
    if fp8:
        parts += [fp8_headline_intro(data, fp8), fp8_headline_table(data, fp8)]
    png = f"plots/{data.slug}"
    parts += [f"![stage ladder]({png}_ladder.png)",
              "The ladder plot draws the rounds' medians; the sweep plot below is the one benchmark run "
              "(`make bench`, `make reference`), so its lines carry that run's clocks.",
              f"![TFLOP/s against seqlen]({png}_sweep.png)"]
    if fp8:
        parts += ["The fp8 plot draws the e4m3 lines from the rounds' medians, with the bf16 ones beside them for scale.",
                  f"![e4m3 TFLOP/s against seqlen]({png}_fp8.png)"]
    return "\n\n".join(parts)


def ladder_block(data):
    """README's front page: one row per stage at the headline problem, non-causal, bf16, from the
    rounds: its directory, the technique its header names, the median TFLOP/s, and the ratios (the
    median over pairs of rounds) to the stage before and to FA3; the Hopper track after a row that
    says so, as in ladder_table; then each stage that takes e4m3 in e4m3 at the same shape, against
    the last Hopper stage without fp8 in bf16 and FA3 in e4m3 (as measured_line has them); then the
    references' TFLOP/s; and a sentence that says where the figures come from."""
    res = data.results
    p, p8 = headline(0), headline(0, FP8_DTYPE)
    fa3 = data.has_rounds("fa3", p)
    lines = ["| stage | technique | TFLOP/s | \u00d7 previous | \u00d7 FA3 |", "|---|---|---:|---:|---:|"]
    stages = [k for k in res.stages if data.has_rounds(k, p)]
    hopper_row = False
    for n, stage in enumerate(stages):
        if stage in res.hopper and not hopper_row:
            lines.append(f"| *{HOPPER_TRACK_LABEL}* | | | | |")
            hopper_row = True
        dirname = stage_dir(res, stage)
        previous = xr(data.ratio(stage, stages[n - 1], p)) if n > 0 else "-"
        lines.append(f"| `{dirname}` | {stage_technique(dirname, res.root)} | {fmt(data.median(stage, p))} | {previous} | "
                     f"{xr(data.ratio(stage, 'fa3', p)) if fa3 else '-'} |")
    fp8 = [k for k in stages if k in res.fp8 and data.has_rounds(k, p8)]
    fa3_fp8 = bool(fp8) and data.has_rounds("fa3", p8)
    for stage in fp8:
        bar = fp8_bar(data)
        lines.append(f"| `{stage_dir(res, stage)}`, {FP8_DTYPE} | the same stage with q, k and v in {FP8_DTYPE} | "
                     f"{fmt(data.median(stage, p8))} | "
                     f"{xr(data.ratio(stage, bar, p8, problem_b=p))} stage {stage_number(bar)} bf16 | "
                     + (f"{xr(data.ratio(stage, 'fa3', p8))} FA3 {FP8_DTYPE}" if fa3_fp8 else "-") + " |")
    for ref, _ in rounds_references(data, p):
        lines.append(f"| {REFERENCE_NAMES[ref]} | | {fmt(data.median(ref, p))} | | |")
    if fa3_fp8:
        lines.append(f"| {REFERENCE_NAMES['fa3']}, {FP8_DTYPE} | | {fmt(data.median('fa3', p8))} | | |")
    count = data.rounds_count()
    within = (f"the median over the {count // 2} pair{'s' if count // 2 != 1 else ''} of rounds (one in each order) "
              f"of the ratio within a round" if count > 1 else "the ratio within the round")
    return ("\n".join(lines) + f"\n\nMeasured on the {data.gpu()} at B16 H16 S4096 D128, non-causal, in {count} "
            f"alternating round{'s' if count != 1 else ''} (`make rounds`, commit {data.rounds_commit()}; rows in "
            f"`{data.rounds_path()}`): TFLOP/s is the median over the rounds, and each ratio {within}.")


def measured_block(data, nn):
    ladder = ladder_intro(data) + "\n\n" + ladder_table(data)
    if nn == "00":
        return ladder
    stages = [s for s in data.results.stages if s.endswith(nn)]
    if not stages:
        raise GenError(f"{data.csv_path} has no kernel{nn} rows")
    stage = stages[0]
    # The rounds sweep the last stage of each track, and any stage `make rounds ROUNDS_ALSO=...` named.
    if all(data.has_rounds(stage, p) for p in sweep_points("all", "all", ())):
        hopper = stage in data.results.hopper
        block = (ladder + "\n\n" + sweep_intro(data, stage, hopper) + "\n\n"
                 + sweep_rounds_table(data, stage, track_references(hopper)))
    else:
        block = (ladder + f"\n\nStage {nn} over the sweep in the one benchmark run (`make bench`), TFLOP/s; the rounds "
                 f"did not sweep this stage, so no ratio is given here:\n\n" + sweep_onerun_table(data, stage))
    if stage in data.results.fp8:
        block += ("\n\n" + fp8_headline_intro(data, [stage]) + "\n\n" + fp8_headline_table(data, [stage])
                  + "\n\n" + fp8_sweep_block(data, stage))
    return block


def readme_ratios(data, which):
    """{(stage or reference, what, causal): ratio} of every ratio the README's tables state, from
    one measurement (`which`: data.rounds, data.again or an earlier pair), for the stages it timed."""
    res = data.results
    out = {}
    refs = rounds_references(data, headline(0))
    stages = [k for k in res.stages if data.has_rounds(k, headline(0), which)]
    for n, stage in enumerate(stages):
        for c in (0, 1):
            for k, label in refs:
                out[(stage, f"/ {label}", c, "headline")] = data.ratio(stage, k, headline(c), which)
            if n > 0:
                out[(stage, "vs previous", c, "headline")] = data.ratio(stage, stages[n - 1], headline(c), which)
    fp8 = fp8_stages_in_rounds(data, which)
    if fp8:
        bar = fp8_bar(data)
        for stage in fp8 + ["fa3"]:
            for c in (0, 1):
                p = headline(c, FP8_DTYPE)
                if stage != "fa3" and data.has_rounds("fa3", p, which):
                    out[(stage, "/ FA3 e4m3", c, "headline")] = data.ratio(stage, "fa3", p, which)
                if data.has_rounds(stage, p, which):
                    out[(stage, f"e4m3 / stage {stage_number(bar)} bf16", c, "headline")] = \
                        data.ratio(stage, bar, p, which, problem_b=headline(c))
    for stage, hopper in track_last_stages(data, which):
        for k, label in REFERENCES:
            if k not in TRACK_REFERENCES[hopper]:
                continue
            for d in SWEEP_HEAD_DIMS:
                for c in (0, 1):
                    for s in SWEEP_SEQLENS:
                        out[(stage, f"/ {label}", c, f"d{d} {seqlen_label(s)}")] = data.ratio(stage, k, sweep_problem(s, d, c), which)
    return out


def repro_block(data, commit=None):
    """REPRO (or REPRO:COMMIT, an earlier pair): the README's ratios from the two measurements of one
    commit (make rounds, then make rounds ROUNDS_TAG=_again, in one call): per kind of ratio, how far
    the second lands from the first, at most and at the median."""
    if commit:
        first_path = os.path.join(ROOT, "plots", "rounds", f"{data.slug}_{commit}.csv")
        again_path = first_path[:-len(".csv")] + "_again.csv"
        for path in (first_path, again_path):
            if not os.path.exists(path):
                raise GenError(f"no {os.path.relpath(path, ROOT)} (make rounds at {commit}, with ROUNDS_TAG=_again for the second)")
        first = (first_path, Rounds(parse_csv(first_path)))
        again = (again_path, Rounds(parse_csv(again_path)))
    else:
        first = data._rounds()
        if data.again is None:
            raise GenError(f"no second measurement beside {data.rounds_path()}: make rounds ROUNDS_TAG=_again "
                           f"(tools/gpu_session.sh again) writes it, in the same call as the first")
        again = data.again
    count = first[1].fewest()
    a, b = readme_ratios(data, first), readme_ratios(data, again)
    # The same two measurements with each ratio the median over single rounds, the order left in.
    single = [(path, Rounds(rounds.rows, paired=False)) for path, rounds in (first, again)]
    a1, b1 = readme_ratios(data, single[0]), readme_ratios(data, single[1])
    singles = [abs(b1[k] / a1[k] - 1) for k in a1]
    kinds = {}
    for key in a:
        stage, what, c, where = key
        kind = (what, "headline" if where == "headline" else "sweep", c)
        kinds.setdefault(kind, []).append((abs(b[key] / a[key] - 1), key))
    lines = ["| ratio | problems | causal | ratios | largest difference | where | median difference |",
             "|---|---|---|---:|---:|---|---:|"]
    for (what, where, c), diffs in sorted(kinds.items(), key=lambda kv: (kv[0][1] != "headline", kv[0][0], kv[0][2])):
        worst, key = max(diffs)
        at = f"{key[0]}" + ("" if where == "headline" else f", {key[3]}")
        lines.append(f"| {what} | {where} | {c} | {len(diffs)} | {100 * worst:.1f} % | {at} | "
                     f"{100 * statistics.median(d for d, _ in diffs):.1f} % |")
    everything = [abs(b[k] / a[k] - 1) for k in a]
    worst = max(everything)
    within = sum(d <= REPRO_TOLERANCE for d in everything)
    unpaired = " (the last, unpaired, left out)" if count % 2 else ""
    return (f"Commit {', '.join(first[1].commits())}, measured twice in one call, {count} rounds each, "
            f"{count // 2} pairs of a forward and a reversed round{unpaired} "
            f"(rows in `{os.path.relpath(first[0], ROOT)}` and `{os.path.relpath(again[0], ROOT)}`): for each ratio the README states, "
            f"|second / first - 1|:\n\n" + "\n".join(lines) +
            f"\n\n{within} of the {len(everything)} ratios agree within {100 * REPRO_TOLERANCE:.0f} %; the largest difference is "
            f"{100 * worst:.1f} %. With each ratio the median over the {count} single rounds instead, "
            f"{sum(d <= REPRO_TOLERANCE for d in singles)} of {len(singles)} agree within {100 * REPRO_TOLERANCE:.0f} % "
            f"and the largest difference is {100 * max(singles):.1f} %.")


# How close two measurements of one commit must bring every README ratio (the reproducibility table).
REPRO_TOLERANCE = 0.03


def peak_block(data):
    """The mma.sync ceiling against FA2, cuDNN and the last stage it bounds (not a Hopper stage)."""
    peak = data.ceiling(MMA_PEAK)
    last = data.results.mma_stages[-1]
    parts = [f"{label} {fmt(data.median(k, headline()))} ({100 * data.median(k, headline()) / peak:.0f} %)"
             for k, label in (("fa2", "FA2"), (last, f"stage {stage_number(last)}"), ("cudnn", "cuDNN"))]
    return (f"`./run --peak` on the {data.gpu()}, in the benchmark run: **{fmt(peak)} TFLOP/s** (mma.sync "
            f"m16n8k16 bf16, f32 accumulate, registers only). On the headline problem, the medians of the "
            f"alternating rounds: " + ", ".join(parts) + ".")


# What the numbers of a candidate mean, per stage that tools/tune.sh tunes: the template arguments
# of the stage's TileShape, in order, as the table's column header spells them. (Rows of older
# candidates of a stage, from before its TileShape changed or of a variant it no longer has, stay in
# the tune CSV; the tune figure reads one by its full name.)
CONSUMER_SHAPE = "M x N x consumer warpgroups x consumer registers x stages x blocks/SM"  # stages 11-13
TUNE_SHAPES = {
    "08": "M x N x warps x blocks/SM",
    "09": "M x N x warpgroups x blocks/SM",
    "10": "M x N x warpgroups x blocks/SM x stages",
    "11": CONSUMER_SHAPE,
    "12": CONSUMER_SHAPE,
    "13": CONSUMER_SHAPE,
    "14": CONSUMER_SHAPE + " x cluster",
    "15": CONSUMER_SHAPE + " x cluster",
}


def tune_command(nn):
    """How the chapter names the command: tools/tune.sh tunes stage 08 unless told otherwise, so
    stage 08's chapter says plain `make tune`, as its reader would type it."""
    return "make tune" if nn == "08" else f"make tune K={nn}"


def check_tune_candidate(nn, candidate):
    """Refuses a candidate that does not read as stage NN's shape: as many numbers as the shape has
    fields, joined by x, and nothing else ('128x128x2x1x2' at stage 10). A candidate the header
    would mislabel is an error, not a row."""
    fields = TUNE_SHAPES[nn]
    if not re.fullmatch(r"\d+(x\d+)*", candidate) or candidate.count("x") != fields.count(" x "):
        raise GenError(f"stage {nn}'s tune candidate '{candidate}' does not read as {fields}")


def tune_block(data, nn):
    """Stage NN's rows of the make tune CSV: every candidate per head_dim, the fastest that passed
    its check (non-causal) in bold."""
    if nn not in TUNE_SHAPES:
        raise GenError(f"<!-- TUNE:{nn} -->: tools/tune.sh has no candidates for stage {nn} "
                       f"(it tunes stages {', '.join(TUNE_SHAPES)})")
    path, all_rows = data.tune
    how = f"`make tune K={nn}` writes them (or with the rest of a session: `TUNE_K={nn} bash tools/gpu_session.sh tune`)"
    if all_rows is None:
        raise GenError(f"{path} does not exist, so it has no stage {nn} candidates: {how}")
    # The file keeps every tuning run of every stage; the name column says which stage and which
    # candidate ("kernel10_tma 128x128x2x1x2"): one row per (head_dim, causal, candidate), the last
    # wins.
    rows = [r for r in all_rows if r["name"].startswith(f"kernel{nn}_")]
    if not rows:
        raise GenError(f"{path} has no kernel{nn}_ rows (stage {nn}'s tile candidates): {how}")
    table, order, commits = {}, [], set()
    for r in rows:
        # A name without a candidate stays whole, so that check_tune_candidate's error shows it.
        candidate = r["name"].split(" ", 1)[1] if " " in r["name"] else r["name"]
        key = (r["head_dim"], candidate)
        if key not in order:
            order.append(key)
        table[key + (r["causal"],)] = r
        commits.add(r["commit"])
    fields = TUNE_SHAPES[nn]
    lines = [f"| head_dim | candidate ({fields}) | non-causal | causal |",
             "|---|---|---:|---:|"]
    for d in sorted({k[0] for k in order}, reverse=True):
        candidates = [k[1] for k in order if k[0] == d]
        # A candidate that computes the wrong result is no winner, however fast (tools/tune.sh
        # picks its winners the same way).
        passed = [c for c in candidates if (r := table.get((d, c, 0))) and r["check"] == "pass" and usable_tflops(r)]
        best = max(passed, key=lambda c: usable_tflops(table[(d, c, 0)])) if passed else None
        for c in candidates:
            check_tune_candidate(nn, c)
            cells = []
            for causal in (0, 1):
                r = table.get((d, c, causal))
                v = fmt(usable_tflops(r)) if r else "-"
                if r and r["check"] != "pass":
                    v += " (check " + r["check"] + ")"
                cells.append(f"**{v}**" if c == best else v)
            name = f"**{c}**" if c == best else c
            lines.append(f"| {d} | {name} | {cells[0]} | {cells[1]} |")
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
        raise GenError(f"no {where}/base.csv: make ab K={nn} writes it (on a machine with a GPU)")
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


def shape_label(problem):
    """'B 8 H 32/8 S 4096 D 128': a problem's shape, H q/kv and S q/k where they differ."""
    _, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, _ = problem
    heads = f"H {heads_q}" if heads_q == heads_kv else f"H {heads_q}/{heads_kv}"
    seqlen = f"S {seqlen_q}" if seqlen_q == seqlen_k else f"S {seqlen_q}/{seqlen_k}"
    return f"B {batch} {heads} {seqlen} D {head_dim}"


def shapes_rounds(data, commit, path=None):
    """The rounds of make rounds-shapes at COMMIT (plots/shapes/<gpu>_<commit>.csv, or `path`), and
    where they are."""
    path = path or os.path.join(ROOT, "plots", "shapes", f"{data.slug}_{commit}.csv")
    where = os.path.relpath(path, ROOT)
    if not os.path.exists(path):
        raise GenError(f"no {where}: make rounds-shapes at {commit} writes it (on a machine with a GPU)")
    return Rounds(parse_csv(path)), where


def shapes_block(data, nn, commit, path=None):
    """SHAPES:NN,COMMIT: stage NN on the shapes off the sweep (harness/rounds.py --set shapes at
    COMMIT, rows in plots/shapes/): its median TFLOP/s and its ratio to every other kernel of those
    rounds, the median over the pairs of rounds; "-" where a reference cannot run the shape."""
    rounds, where = shapes_rounds(data, commit, path)
    stage = f"kernel{nn}"
    kernels = sorted({r["kernel"] for r in rounds.rows} - {stage}, key=lambda k: (not k.startswith("kernel"), k))
    labels = {k: label for k, label in REFERENCES}
    names = [f"stage {k[-2:]}" if k.startswith("kernel") else labels.get(k, k) for k in kernels]
    lines = ["| shape | causal | TFLOP/s | " + " | ".join(f"/ {n}" for n in names) + " |",
             "|---|---|---:|" + "---:|" * len(kernels)]
    for p in shape_problems():
        if not rounds.rounds(stage, p):
            raise GenError(f"{where} has no {stage} row at {p}")
        cells = [xr(rounds.ratio(stage, k, p)) if rounds.rounds(k, p) else "-" for k in kernels]
        lines.append(f"| {shape_label(p)} | {p[-1]} | {fmt(rounds.medians(stage, p))} | " + " | ".join(cells) + " |")
    return (f"{rounds.fewest()} rounds, commit {', '.join(rounds.commits())} (rows in `{where}`); H q/kv and "
            f"S q/k where they differ; each ratio is the median over the pairs of rounds:\n\n" + "\n".join(lines))


def fp8_error_block(data, commit, path=None):
    """FP8ERR:COMMIT: harness/fp8_error.py's rows at COMMIT (plots/fp8_error/<gpu>_<commit>.csv, or
    `path`): per problem the e4m3 error against float64 of the stage and of FA3 on the same inputs,
    and the stage's over FA3's; beside them, for scale, the bf16 rows where the file has them.
    COMMIT may be SLUG:COMMIT, a run on another GPU than the one the docs describe."""
    slug, _, commit = commit.rpartition(":")
    path = path or os.path.join(ROOT, "plots", "fp8_error", f"{slug or data.slug}_{commit}.csv")
    where = os.path.relpath(path, ROOT)
    if not os.path.exists(path):
        raise GenError(f"no {where}: make fp8-error at {commit} writes it (on a machine with a GPU)")
    try:
        rows = fp8_error.read_rows(path)
    except ValueError as e:
        raise GenError(str(e))
    e4m3, bf16 = fp8_error.comparison(rows), dict(fp8_error.comparison(rows, HEADLINE[0]))

    def the_stage(problems, dtype, required):
        found = sorted({k for by_kernel in problems for k in by_kernel if k != "fa3"})
        if len(found) > 1 or (required and not found):
            raise GenError(f"{where} holds {dtype} rows of {len(found)} stages ({', '.join(found) or 'none'}): one expected")
        return found[0] if found else None
    ours = the_stage([by for _, by in e4m3], FP8_DTYPE, True)
    bar = the_stage(bf16.values(), HEADLINE[0], False)
    nn = stage_number(ours)
    head = (f"| shape | causal | max abs: stage {nn} | FA3 | stage {nn} / FA3 | rel L2: stage {nn} | FA3 | stage {nn} / FA3 |"
            + (f" bf16 rel L2: stage {stage_number(bar)} | FA3 |" if bar else ""))
    lines = [head, "|---|---|" + "---:|" * (6 + (2 if bar else 0))]

    def value(by_kernel, kernel, column):
        return f"{by_kernel[kernel][column]:.3g}" if kernel in by_kernel else "-"
    compared = within = 0
    for problem, by_kernel in e4m3:
        if ours not in by_kernel:
            raise GenError(f"{where} has no {ours} row at {problem}")
        cells = []
        for column in ("max_abs_err", "rel_l2_err"):
            ratio = by_kernel[ours][column] / by_kernel["fa3"][column] if "fa3" in by_kernel else None
            cells += [value(by_kernel, ours, column), value(by_kernel, "fa3", column), "-" if ratio is None else xr(ratio)]
        if bar:
            scale = bf16.get((HEADLINE[0],) + problem[1:], {})
            cells += [value(scale, bar, "rel_l2_err"), value(scale, "fa3", "rel_l2_err")]
        if "fa3" in by_kernel:
            compared += 1
            within += fp8_error.no_larger(by_kernel[ours], by_kernel["fa3"])
        lines.append(f"| {shape_label(problem)} | {problem[-1]} | " + " | ".join(cells) + " |")
    commits = ", ".join(sorted({r["commit"] for r in rows}))
    gpus = " and ".join(sorted({r["gpu"] for r in rows}))
    scale = (f" For scale, the relative error in bf16 of stage {stage_number(bar)} and FlashAttention-3, given the same "
             f"numbers rounded to bf16, against float64 on those." if bar else "")
    return (f"Stage {nn} and FlashAttention-3 on the same inputs, q, k and v quantized to e4m3 per tensor (descale = "
            f"amax / 448), against attention in float64 on the numbers the inputs stand for (`make fp8-error` on the "
            f"{gpus}, commit {commits}; rows in `{where}`): max abs is max |O - O_ref|, rel L2 is ||O - O_ref|| / ||O_ref||, and "
            f"stage {nn} / FA3 the stage's error over FA3's.{scale}\n\n" + "\n".join(lines)
            + f"\n\nStage {nn}'s error is no larger than FA3's, by both measures, on {within} of the {compared} problems.")


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
#   tflops KERNEL [PROBLEM] [DTYPE]  339.1           a stage's or a reference's median TFLOP/s over the rounds
#   onerun KERNEL [PROBLEM] [DTYPE]  339.1           its TFLOP/s in the one benchmark run (make bench)
#   ratio KERNEL KERNEL [PROBLEM] [DTYPE]  4.22x     the first over the second: the median over pairs of rounds
#   pct KERNEL KERNEL [PROBLEM] [DTYPE]    53 %      the same as a percentage
#   peak                             648.0           the mma.sync ceiling (the mma_peak row of the benchmark run)
#   peakpct KERNEL [PROBLEM]         53 %            a kernel's median TFLOP/s as a percentage of the ceiling
#   wgmmapeak                        929.0           the wgmma ceiling (the wgmma_peak row: Hopper only)
#   wgmmapeakpct KERNEL [PROBLEM]    55 %            a kernel's median TFLOP/s as a percentage of the wgmma ceiling
#   ncu KERNEL METRIC [PROBLEM]      7.5 G / 12.6 %  one Nsight Compute counter (of NCU_PROBLEM's rows);
#                                                    KERNEL@COMMIT: the rows that commit's profile wrote
#   ncuratio KERNEL KERNEL METRIC    8.0x            the first kernel's counter over the second's
#   sweepratio KERNEL REF D C [DTYPE]  0.96x-1.23x   the range of KERNEL / REF (per-round medians) over the
#                                                    sweep (D: 64, 128 or all; C: 0, 1 or all; seqlen >= 1k: add >=1k,
#                                                    or >=2k and so on)
#   ab NN COMMIT VARIANT PROBLEM     1.02x           one point of an AB run: variant / base, median of the rounds
#                                                    (COMMIT as SLUG:COMMIT: a run on another GPU, nvidia_h100_...)
#   abrange NN COMMIT VARIANT D C    0.97x-1.01x     the range of those over the sweep (D, C and >=1k as above)
#   shaperange NN COMMIT KERNEL C    0.95x-1.02x     stage NN / KERNEL over the shapes off the sweep (C: 0, 1 or
#                                                    all), from make rounds-shapes at COMMIT
#   tune NN CANDIDATE D C            671.3           a make tune candidate's TFLOP/s (the tuning run's row)
#   diff A B                         24 lines added and 24 removed   what make diff A=.. B=.. changes in
#                                                    kernel.cu, as git diff --numstat counts it;
#                                                    diffadd A B and diffdel A B: each count alone
#   diffbody A B                     6 lines out, 8 in   the same outside the header comments
#   settle RUN A B MODE              0.98x           A's speed over B's in one timing mode (nosettle, settle,
#                                                    warm50) of tools/settle_trace.py's plots/settle/RUN.csv
#   rounds                           3               how many rounds the ratios are medians of
# PROBLEM is headline (the default), headline/causal, sweep/D/S or sweep/D/S/causal. DTYPE (last, default
# bf16) is the inputs' dtype, bf16 or e4m3: "ratio kernel16 fa3 headline e4m3" is stage 16 over FA3, both
# in e4m3; for a ratio, FIRST/SECOND gives each kernel its own, at the same shape in the same rounds:
# "ratio kernel16 kernel15 headline e4m3/bf16" is stage 16 in e4m3 over stage 15 in bf16. Every ratio
# comes from alternating rounds (make rounds, make ab): a ratio of two kernels of one run is not a figure.

# The two ceilings of ./run --peak, by figure kind ("peakpct" / "wgmmapeakpct" divide by them):
# mma.sync's bounds stages 01-08, wgmma's the Hopper track.
CEILING_FIGURES = {"peak": MMA_PEAK, "wgmmapeak": WGMMA_PEAK}


def sweep_points(d, c, rest, dtype=HEADLINE[0]):
    floors = [1024 * int(m.group(1)) for m in (re.fullmatch(r">=(\d+)k", r) for r in rest) if m]
    min_seqlen = max(floors, default=0)
    return [sweep_problem(s, hd, cc, dtype) for hd in SWEEP_HEAD_DIMS if d in ("all", str(hd)) for cc in (0, 1)
            if c in ("all", str(cc)) for s in SWEEP_SEQLENS if s >= min_seqlen]


def ab_ratios(data, nn, commit, variant):
    """{(head_dim, causal, seqlen): variant / base, the median over the rounds} of one AB run."""
    directory = data.ab_dir(nn, commit)
    where = os.path.relpath(directory, ROOT)
    paths = {name: os.path.join(directory, f"{name}.csv") for name in ("base", variant)}
    for name, path in paths.items():
        if not os.path.exists(path):
            raise GenError(f"no {where}/{name}.csv (make ab K={nn} at {commit} writes its rows)")
    points = {}
    for name, path in paths.items():
        for r in parse_csv(path):
            points.setdefault((r["head_dim"], r["causal"], r["seqlen_q"]), {}).setdefault(name, []).append(usable_tflops(r))
    return {key: statistics.median(x / y for x, y in zip(v[variant], v["base"]))
            for key, v in points.items() if variant in v and "base" in v}


def diff_size(a, b, body=False):
    """(added, removed) lines of stage b's kernel.cu against stage a's, as `make diff A=a B=b` shows
    them: git diff --numstat (other diff programs pair the lines differently, and count a few more).
    body: the files without their header comment (the stage's description, rewritten every stage)."""
    dirs = {d[len("kernel"):len("kernel") + 2]: d for d in stage_dirs()}
    paths = []
    for nn in (a, b):
        if f"{int(nn):02d}" not in dirs:
            raise GenError(f"diff {a} {b}: no one stage {nn} (kernel{int(nn):02d}_*/kernel.cu)")
        paths.append(os.path.join(ROOT, dirs[f"{int(nn):02d}"], "kernel.cu"))
    with tempfile.TemporaryDirectory() as tmp:
        if body:
            for i, path in enumerate(paths):
                text = open(path).read()
                header = re.match(r"/\*.*?\*/\n", text, re.S)
                paths[i] = os.path.join(tmp, f"{i}.cu")
                with open(paths[i], "w") as f:
                    f.write(text[header.end():] if header else text)
        try:
            out = subprocess.run(["git", "diff", "--no-index", "--numstat", *paths], capture_output=True, text=True).stdout
        except OSError:
            raise GenError(f"diff {a} {b}: git is not installed here, and the line counts are git's")
    if not out.strip():
        return 0, 0
    added, removed = (int(x) for x in out.split()[:2])
    return added, removed


def settle_ratio(run, first, second, mode):
    """First's speed over second's in one mode of tools/settle_trace.py's run `run`
    (plots/settle/<run>.csv): the median over the rounds of second's median ms over first's, each
    over its first ROUNDS_ITERS calls (the batch make rounds times)."""
    path = os.path.join(ROOT, "plots", "settle", f"{run}.csv")
    if not os.path.exists(path):
        raise GenError(f"no plots/settle/{run}.csv (tools/settle_trace.py writes it)")
    calls = {}  # (round, problem, kernel) -> ms: FA3 is timed at more than one problem
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["mode"] == mode and r["kernel"] in (first, second) and int(r["call"]) < ROUNDS_ITERS:
                calls.setdefault((r["round"], r["problem"], r["kernel"]), []).append(float(r["ms"]))
    pairs = sorted({(rnd, problem) for rnd, problem, _ in calls})
    ratios = [statistics.median(calls[(rnd, problem, second)]) / statistics.median(calls[(rnd, problem, first)])
              for rnd, problem in pairs if (rnd, problem, first) in calls and (rnd, problem, second) in calls]
    if not ratios:
        raise GenError(f"plots/settle/{run}.csv has no {first} and {second} rows in mode {mode}")
    return statistics.median(ratios)


def tune_tflops(data, nn, candidate, d, c):
    path, rows = data.tune
    if rows is None:
        raise GenError(f"{path} does not exist (make tune K={nn} writes it)")
    found = [r for r in rows if r["name"].startswith(f"kernel{nn}_") and r["name"].endswith(" " + candidate)
             and r["head_dim"] == int(d) and r["causal"] == int(c)]
    if not found or usable_tflops(found[-1]) is None:
        raise GenError(f"{path} has no stage {nn} candidate {candidate} at head_dim {d} causal {c}")
    return usable_tflops(found[-1])


def dtype_arg(rest, pair):
    """A figure's arguments less a trailing DTYPE, and the dtypes of its two kernels: 'e4m3' puts
    both in e4m3; for a ratio (`pair`), 'e4m3/bf16' the first in e4m3 and the second in bf16 at the
    same shape. Without one, both bf16."""
    if not rest or rest[-1].split("/")[0] not in BENCH_DTYPES:
        return rest, (HEADLINE[0], HEADLINE[0])
    dtypes = rest[-1].split("/")
    if len(dtypes) > (2 if pair else 1) or not set(dtypes) <= set(BENCH_DTYPES):
        raise GenError(f"'{rest[-1]}' is no DTYPE here: one of {', '.join(BENCH_DTYPES)}"
                       + (", or two of them as FIRST/SECOND" if pair else ""))
    return rest[:-1], (dtypes[0], dtypes[-1])


def figure(data, what):
    args = what.split()
    kind, rest = args[0], args[1:]
    if kind in ("tflops", "onerun"):
        rest, (dtype, _) = dtype_arg(rest, pair=False)
        p = problem_arg(rest[1], dtype) if len(rest) > 1 else headline(0, dtype)
        return fmt(data.median(rest[0], p) if kind == "tflops" else data.tflops(rest[0], p))
    if kind in ("ratio", "pct"):
        rest, (dtype, dtype_b) = dtype_arg(rest, pair=True)
        spec = rest[2] if len(rest) > 2 else "headline"
        ratio = data.ratio(rest[0], rest[1], problem_arg(spec, dtype), problem_b=problem_arg(spec, dtype_b))
        return xr(ratio) if kind == "ratio" else f"{100 * ratio:.0f} %"
    if kind in CEILING_FIGURES:
        return fmt(data.ceiling(CEILING_FIGURES[kind]))
    if kind.endswith("pct") and kind[:-len("pct")] in CEILING_FIGURES:
        ceiling = data.ceiling(CEILING_FIGURES[kind[:-len("pct")]])
        p = problem_arg(rest[1]) if len(rest) > 1 else headline()
        return f"{100 * data.median(rest[0], p) / ceiling:.0f} %"
    if kind == "ncu":
        value, unit, _ = data.ncu_value(rest[0], rest[1], *rest[2:3])
        return f"{value:.1f} %" if unit == "%" else count(value)
    if kind == "ncuratio":
        return f"{data.ncu_value(rest[0], rest[2])[0] / data.ncu_value(rest[1], rest[2])[0]:.1f}x"
    if kind == "sweepratio":
        rest, (dtype, dtype_b) = dtype_arg(rest, pair=True)
        kernel, ref, d, c = rest[:4]
        ratios = [data.ratio(kernel, ref, p, problem_b=(dtype_b,) + p[1:]) for p in sweep_points(d, c, rest, dtype)]
        return f"{min(ratios):.2f}x–{max(ratios):.2f}x"
    if kind == "ab":
        nn, commit, variant, spec = rest[:4]
        p = problem_arg(spec)
        ratios = ab_ratios(data, nn, commit, variant)
        key = (p[6], p[7], p[4])
        if key not in ratios:
            raise GenError(f"the AB run of stage {nn} at {commit} has no {variant} and base rows at {spec}")
        return xr(ratios[key])
    if kind == "abrange":
        nn, commit, variant, d, c = rest[:5]
        ratios = ab_ratios(data, nn, commit, variant)
        wanted = [(p[6], p[7], p[4]) for p in sweep_points(d, c, rest)]
        missing = [k for k in wanted if k not in ratios]
        if missing:
            raise GenError(f"the AB run of stage {nn} at {commit} has no {variant} and base rows at {missing[0]}")
        values = [ratios[k] for k in wanted]
        return f"{min(values):.2f}x–{max(values):.2f}x"
    if kind == "shaperange":
        nn, commit, kernel, c = rest[:4]
        rounds, where = shapes_rounds(data, commit)
        values = [rounds.ratio(f"kernel{nn}", kernel, p) for p in shape_problems() if c in ("all", str(p[-1]))
                  and rounds.rounds(kernel, p)]
        if not values or None in values:
            raise GenError(f"{where} has no kernel{nn} and {kernel} rows to compare")
        return f"{min(values):.2f}x–{max(values):.2f}x"
    if kind == "tune":
        return fmt(tune_tflops(data, *rest[:4]))
    if kind == "settle":
        return xr(settle_ratio(*rest[:4]))
    if kind in ("diff", "diffadd", "diffdel"):
        added, removed = diff_size(*rest[:2])
        return {"diff": f"{added} lines added and {removed} removed", "diffadd": str(added), "diffdel": str(removed)}[kind]
    if kind == "diffbody":
        added, removed = diff_size(*rest[:2], body=True)
        return f"{removed} lines out, {added} in"
    if kind == "rounds":
        return str(data.rounds_count())
    raise GenError(f"unknown figure '{what}'")


# ------------------------------------------------------------------------------------------------
# The stage table and the kernel headers

BLOG = "https://lubits.ch/flash/"


def stage_dirs():
    return sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "kernel[0-9][0-9]_*/kernel.cu")))


# The first line of a stage's header: " * Stage NN - name: the technique it adds."
STAGE_TITLE = re.compile(r"^ \* Stage \d\d - [a-z_0-9]+: (.*)$", re.M)


def stage_header(dirname):
    """(technique, [blog URLs]) from the header comment of the stage's kernel.cu."""
    text = open(os.path.join(ROOT, dirname, "kernel.cu")).read()
    title = STAGE_TITLE.search(text)
    read = re.search(r"^ \* Read: +(.*(?:\n \*  {11}.*)*)", text, re.M)
    if not title or not read:
        raise GenError(f"{dirname}/kernel.cu: the header needs a 'Stage NN - name: ...' line and a 'Read:' line")
    urls = re.findall(re.escape(BLOG) + r"[A-Za-z0-9-]+", read.group(1))
    return title.group(1).rstrip("."), urls


def stage_technique(dirname, root=ROOT):
    """The technique a stage adds, from the 'Stage NN - name: ...' line of root/dirname/kernel.cu (as
    stage_header reads it, without needing its 'Read:' line)."""
    path = os.path.join(root, dirname, "kernel.cu")
    title = STAGE_TITLE.search(open(path).read())
    if not title:
        raise GenError(f"{os.path.relpath(path, ROOT)}: the header needs a 'Stage NN - name: ...' line")
    return title.group(1).rstrip(".")


def stage_dir(results, kernel):
    """The directory of stage `kernel` ('kernel05' -> 'kernel05_swizzle') in the stage tree `results`
    (a plot.Results) read its headers from."""
    found = sorted(glob.glob(os.path.join(glob.escape(results.root), kernel + "_*", "kernel.cu")))
    if not found:
        raise GenError(f"no {kernel}_*/kernel.cu in {os.path.relpath(results.root, ROOT)} for the {kernel} rows")
    return os.path.basename(os.path.dirname(found[0]))


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
    """The 'Measured:' lines of a stage's header: the median of the rounds at the headline problem,
    against its track's bar (FA2 for stages 01-08, FA3 for the Hopper track) and the stage before."""
    kernel = dirname[:8]
    res = data.results
    if not data.has_rounds(kernel, headline()):
        raise GenError(f"{data.rounds_path()} has no {kernel} rows at the headline problem")
    bar, bar_label = ("fa3", "FA3") if kernel in res.hopper and data.has_rounds("fa3", headline()) else ("fa2", "FA2")
    stages = [k for k in res.stages if data.has_rounds(k, headline())]
    index = stages.index(kernel)
    halves = []
    for c in (0, 1):
        p = headline(c)
        text = f"{fmt(data.median(kernel, p))} TFLOP/s, {xr(data.ratio(kernel, bar, p))} {bar_label}"
        if index > 0:
            text += f", {xr(data.ratio(kernel, stages[index - 1], p))} stage {stage_number(stages[index - 1])}"
        halves.append(text)
    text = (f"{data.gpu()}, B16 H16 S4096 D128 bf16, median of {data.rounds_count()} alternating rounds (make rounds, "
            f"commit {data.rounds_commit()}): {halves[0]}; causal {halves[1]}.")
    if kernel in res.fp8:
        # A stage that takes e4m3: the same shape in e4m3, against FA3 in e4m3 and the last Hopper
        # stage without fp8 in bf16 (fp8_headline_table).
        bar = fp8_bar(data)
        halves = []
        for c in (0, 1):
            p = headline(c, FP8_DTYPE)
            fa3 = f"{xr(data.ratio(kernel, 'fa3', p))} FA3 e4m3, " if data.has_rounds("fa3", p) else ""
            halves.append(f"{fmt(data.median(kernel, p))} TFLOP/s, {fa3}"
                          f"{xr(data.ratio(kernel, bar, p, problem_b=headline(c)))} stage {stage_number(bar)} bf16")
        text += f" In e4m3: {halves[0]}; causal {halves[1]}."
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
    pin = re.search(r"<!-- ROUNDS:(\w+) -->", text)
    if pin:
        data = data.pinned(pin.group(1), where)
    if "<!-- RESULTS -->" in text:
        text = replace_block(text, "<!-- RESULTS -->", "<!-- /RESULTS -->", results_block(data), where)
    if "<!-- LADDER -->" in text:
        text = replace_block(text, "<!-- LADDER -->", "<!-- /LADDER -->", ladder_block(data), where)
    for commit in re.findall(r"<!-- REPRO(?::(\w+))? -->", text):
        marker = f"<!-- REPRO:{commit} -->" if commit else "<!-- REPRO -->"
        text = replace_block(text, marker, "<!-- /REPRO -->", repro_block(data, commit or None), where)
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
    for nn, commit in re.findall(r"<!-- SHAPES:(\d\d),(\w+) -->", text):
        text = replace_block(text, f"<!-- SHAPES:{nn},{commit} -->", "<!-- /SHAPES -->", shapes_block(data, nn, commit), where)
    for commit in re.findall(r"<!-- FP8ERR:([\w:]+) -->", text):
        text = replace_block(text, f"<!-- FP8ERR:{commit} -->", "<!-- /FP8ERR -->", fp8_error_block(data, commit), where)
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
    # The header quotes the rounds its chapter does (a chapter's <!-- ROUNDS:COMMIT -->).
    for chapter in glob.glob(os.path.join(ROOT, "docs", dirname[len("kernel"):len("kernelNN")] + "_*.md")):
        pin = re.search(r"<!-- ROUNDS:(\w+) -->", open(chapter).read())
        if pin:
            data = data.pinned(pin.group(1), os.path.relpath(chapter, ROOT))
    pattern = re.compile(r"^ \* Measured:.*?(?=^ \* Needs:)", re.S | re.M)
    if not pattern.search(text):
        raise GenError(f"{dirname}/kernel.cu: the header needs a ' * Measured:' line before ' * Needs:'")
    return pattern.sub(lambda _: measured_line(data, dirname), text, count=1)


def filled_files():
    """Every file the CSVs fill: README.md, docs/*.md and the stages' kernel.cu."""
    return ([os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
            + [os.path.join(ROOT, d, "kernel.cu") for d in stage_dirs()])


def outputs(data, paths=None):
    """{path: new text} for `paths` (default: every file the CSVs fill)."""
    files = {}
    for path in paths or filled_files():
        render = render_kernel if path.endswith(".cu") else render_markdown
        files[path] = render(data, path, open(path).read())
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", help="the benchmark CSV (default: the one plots/*.csv)")
    ap.add_argument("--only", nargs="+", metavar="FILE", help="write or check these files alone (README.md, docs/NN_*.md, kernelNN_*/kernel.cu)")
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
    paths = None
    if args.only:
        paths = [os.path.abspath(f) for f in args.only]
        unknown = set(paths) - set(filled_files())
        if unknown:
            print(f"error: --only: not a file the CSVs fill: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
    try:
        data = Data(csv_path)
        files = outputs(data, paths)
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
