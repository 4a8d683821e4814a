#!/usr/bin/env python3
"""Draw the project's plots from the benchmark CSVs (one CSV per GPU, written by ./run and by
harness/reference.py; see the CSV contract in the harness).

For every CSV `<dir>/<stem>.csv` it writes, into --out-dir (default: the CSV's directory):

  <stem>_ladder.png   the stage ladder at the headline problem (B=16, H=16, S=4096, D=128, bf16,
                      non-causal): one bar per stage, labelled with TFLOP/s, % of FA2 and, where
                      there are FA3 rows, the ratio to FA3; horizontal lines for FA2, cuDNN, FA3
                      and the two ceilings (mma.sync, the limit of stages 01-08; wgmma, Hopper's),
                      and the Hopper stages after a divider. A stage that takes e4m3 inputs gets a
                      second bar right after its bf16 one, a lighter shade of its colour dotted in
                      the full one: the same shape with q, k and v in e4m3, labelled with its ratio
                      to FA3 in e4m3, whose line is drawn beside FA3's bf16 one;
  <stem>_sweep.png    TFLOP/s against seqlen over the sweep (batch*seqlen = 65536,
                      heads*head_dim = 2048), one panel per (head_dim, causal);
  <stem>_fp8.png      the same sweep in e4m3: the stages that take fp8 inputs and FlashAttention-3,
                      both with q, k, v in e4m3, and for scale, thinner, the last Hopper stage
                      without fp8 and FlashAttention-3 in bf16.

The ladder comes from the alternating rounds (harness/rounds.py, make rounds) where there are any:
--rounds FILE, or else the newest plots/rounds/<stem>_*.csv beside the CSV (newest by the latest
date inside; a file ending in _again.csv is the second measurement of a reproducibility check and
is not used). Its bars are then each stage's median TFLOP/s over the rounds and its ratios the
medians of the per-round ratios; the ceilings still come from the benchmark CSV. Without rounds the
ladder, like the sweep always, is the benchmark CSV's one run; each title says which it shows.

The sweep draws bf16 rows only, and so does the ladder but for the e4m3 bars of the stages that take
fp8 inputs and FlashAttention-3's e4m3 line beside them (both at the headline shape, from the same
source as the bf16 bars, and only where that source holds a stage's e4m3 row). The e4m3 rows over
the sweep (dtype e4m3: the stages that take fp8 inputs, and FlashAttention-3's fp8 forward) have a
figure of their own, from the rounds where they hold e4m3 rows (make rounds times both dtypes),
else from the benchmark CSV's one run.

The CSV may hold re-runs of the same (kernel, problem): the last row wins. Which stages are on the
Hopper track is read from the "Needs:" line of each stage's kernel.cu header (sm_90a), and which take
fp8 inputs from whether their kernel.cu defines the fp8 entry point, both as the Makefile reads them,
not from the stage numbers.

Usage:  python3 plots/plot.py plots/*.csv [--out-dir DIR] [--stages-from DIR]
                                          [--rounds FILE | --no-rounds]
Exit codes: 0 plots written; 1 nothing to plot (no data, or matplotlib missing);
            2 a CSV is unreadable or malformed (the message names the file and line), or a bad
              argument.
"""

import argparse
import csv
import glob
import math
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "harness"))
from contract import (CSV_COLUMNS as COLUMNS, FP8_DTYPE, HEADLINE, MMA_PEAK, REFERENCE_KERNELS,  # noqa: E402
                      SWEEP_HEAD_DIMS, SWEEP_SEQLENS, SWEEP_TOKENS, SWEEP_WIDTH, TIMED_REFERENCES, WGMMA_PEAK,
                      seqlen_label, sweep_problems)

INT_COLUMNS = ["batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal", "iters"]
FLOAT_COLUMNS = ["ms_median", "ms_min", "tflops", "max_abs_err", "rel_l2_err"]
CHECK_VALUES = {"pass", "fail", "skipped"}

# How each reference is drawn: legend label, colour, line style. The dash patterns are explicit
# (offset, (on, off, ...)) in units of the line width, short enough that a legend handle of
# LEGEND_HANDLELENGTH shows several dashes on each side of the marker drawn in its middle. FA2 and
# cuDNN are neutral (black, gray) and dashed; FA3 dash-dotted in a colour no stage has (the palette
# check below includes it). The two ceilings are both red and dotted, as limits rather than
# competitors; the wgmma one darker, with dashes among its dots. Colours are sRGB hex, which
# srgb_to_lab reads without matplotlib.
REFERENCE_STYLE = {
    "fa2": ("FlashAttention-2", "#000000", (0, (3.5, 1.5))),
    "cudnn": ("cuDNN fused attention", "#7f7f7f", (0, (3.5, 1.5))),
    "fa3": ("FlashAttention-3", "#00ced1", (0, (3.5, 1.2, 1, 1.2))),
    MMA_PEAK: ("mma.sync ceiling", "#d62728", (0, (1, 1.5))),
    WGMMA_PEAK: ("Hopper ceiling (wgmma)", "#8b0000", (0, (4, 1.5, 1, 1.5))),
}
# FlashAttention-3 in e4m3, the reference of the ladder's e4m3 bars, keyed by a (kernel, dtype) pair
# among the ladder's references (which are otherwise keyed by kernel): FA3's colour, as the same
# kernel, with two dots after each dash where its bf16 line has one, and a little wider. Not in
# REFERENCE_STYLE: it adds no colour to the palette, and the sweep does not draw it (the fp8 figure
# draws FA3 in e4m3 in FA3's own style).
FA3_FP8 = ("fa3", FP8_DTYPE)
FP8_REFERENCE_STYLE = {
    FA3_FP8: ("FlashAttention-3, e4m3", REFERENCE_STYLE["fa3"][1], (0, (3.5, 1.2, 1, 1.2, 1, 1.2))),
}
FP8_REFERENCE_LINEWIDTH = 1.8  # the bf16 references' 1.4, a little wider
# The same headline shape with q, k and v in e4m3: the problem of the ladder's e4m3 bars.
FP8_HEADLINE = (FP8_DTYPE,) + HEADLINE[1:]
# An e4m3 bar: its stage's colour mixed this far towards white, hatched with dots in the full
# colour, so that it reads as the same stage in another dtype (a failed check's hatch is /// in red).
FP8_BAR_LIGHTEN = 0.55
FP8_BAR_HATCH = "..."
# The timed references, in the order the figures draw them and the legends list them.
TIMED = TIMED_REFERENCES
# The mma.sync ceiling bounds the stages built on mma.sync, not the Hopper ones, nor cuDNN, which
# runs on wgmma: its label names the stages it bounds ("ceiling of stages 01–08 (mma.sync)").
MMA_CEILING_LABEL = "ceiling of {stages} (mma.sync)"

# The stages whose kernel.cu says "Needs: sm_90a" form the Hopper track: the ladder draws them
# after a divider with this label, and the README table puts a row with it before them.
HOPPER_ARCH = "sm_90a"
HOPPER_TRACK_LABEL = "Hopper track (sm_90a)"
# The header line the Makefile reads too (its sed in the stage section), in the same form.
NEEDS_LINE = re.compile(r"^ \* Needs: *(sm_[0-9]+a?)", re.M)
# A stage takes e4m3 inputs when its kernel.cu names this entry point (common/flash_internal.h): the
# Makefile's STAGE_FP8 greps for the same text, and the dispatcher's stage table follows it.
FP8_ENTRY = "flash_forward_fp8_kernel{nn}"

# One colour and one marker per stage, the same in both figures, chosen by the stage's number
# (kernel05 -> the 5th entry) so that a stage keeps its style whichever other stages the CSV holds.
# Why these: the sweep draws up to 15 stage lines beside 5 reference lines, so each of the 20
# colours must differ from every other at a glance, and tab10 plus five extras did not (tab:olive
# beside #e7ba52 was CIEDE2000 13.6 apart, tab:pink beside #7b4173 one hue in two lightnesses).
# Off-the-shelf maximum-contrast sets do no better beside these references: Kelly's has
# near-white, pale yellows and a reddish brown CIEDE2000 5.5 from the wgmma ceiling's darkred. So
# the set was searched (offline, once): five hues that everyone names kept fixed (blue, orange,
# green, brown, pink; the blue and green from Okabe and Ito's set), then, one slot at a time, the
# named colour (xkcd and CSS lists) swapped in that most raised the smallest CIEDE2000 of any
# pair, stage-stage and stage-reference, keeping CIE76 >= 30 and skipping near-white, grayish
# (chroma < 25) and pale yellow colours, which vanish on white. CIEDE2000 leads because CIE76 overstates
# the differences among saturated colours (and the old palette passed CIE76 >= 20). Result: every
# pair >= 19.2 in CIEDE2000 (>= 20.0 among stages 01-13 and the references) and >= 32.1 in CIE76;
# PALETTE_MIN_DELTA_E below, with a margin, is what tests/test_plot.sh requires. For a reader
# who tells fewer hues apart, the markers still tell the stages apart.
STAGE_COLORS = [
    "#0072b2",  # 01 blue
    "#ff7f0e",  # 02 orange
    "#009e73",  # 03 bluish green
    "#8a2be2",  # 04 blue violet
    "#8c510a",  # 05 brown
    "#e7298a",  # 06 deep pink
    "#32cd32",  # 07 lime green
    "#758000",  # 08 olive
    "#1b2a80",  # 09 navy
    "#cb9d06",  # 10 mustard
    "#6c3461",  # 11 plum
    "#0b5509",  # 12 dark green
    "#8b88f8",  # 13 periwinkle
    "#dda0dd",  # 14 light plum
    "#f4a6a6",  # 15 salmon pink
    "#005555",  # 16 dark teal
]
# The smallest colour differences allowed between any two colours of the figures (stage-stage,
# stage-reference, FA3-reference; the two red ceilings, one family on purpose, excepted): CIE76
# and CIEDE2000. The old palette, 24.8 and 13.6, fails both.
PALETTE_MIN_DELTA_E = {"cie76": 28.0, "ciede2000": 17.0}
# Distinct shapes, so that coinciding lines (stages 02-04) still show every stage's marker; drawn
# hollow, so that markers at the same point show through each other. No 'x' or 'X': a red x marks
# a failed check. (6, 1, 0) is a six-pointed star.
STAGE_MARKERS = ["o", "s", "^", "D", "v", "P", "*", "p", "<", "h", ">", "d", "H", "8", (6, 1, 0)]
STAGE_MARKERSIZE = 6.5      # points; hollow markers need some size to be told apart
STAGE_MARKEREDGEWIDTH = 1.3
REFERENCE_MARKERSIZE = 3.5  # FA2, cuDNN and FA3: small filled dots on the dashed line
LEGEND_HANDLELENGTH = 4.0   # in font sizes: long enough to show the dash patterns
SWEEP_LEGEND_STAGE_COLUMNS = 2  # the sweep legend: stages in 2 columns, the references in a 3rd
# Stage markers in the sweep closer than this many marker sizes (vertically, at one seqlen) are set
# side by side, one marker size apart: only the markers move, the lines and values stay exact.
DODGE_THRESHOLD = 0.6
FAILED_MARKER = dict(marker="x", color="tab:red", markersize=8, markeredgewidth=2)


FIGSIZE = (10, 5)
DPI = 120
LADDER_INCHES_PER_BAR = 0.8


# --- colour differences: what the palette check measures (no dependency beyond the standard library)

def srgb_to_lab(color):
    """'#rrggbb' -> CIELAB (L*, a*, b*) under D65, through linear sRGB and XYZ."""
    value = color.lstrip("#")
    channels = [int(value[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    xyz = ((0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047,  # divided by D65's white
           (0.2126729 * r + 0.7151522 * g + 0.0721750 * b),
           (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883)
    fx, fy, fz = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29 for t in xyz]
    return (116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz))


def delta_e76(lab1, lab2):
    """CIE76: the Euclidean distance in CIELAB (overstates differences among saturated colours)."""
    return math.dist(lab1, lab2)


def delta_e2000(lab1, lab2):
    """CIEDE2000 (Sharma, Wu and Dalal 2005, with kL = kC = kH = 1): CIELAB corrected for the eye's
    lesser sensitivity to chroma differences among saturated colours and for the blue region."""
    (L1, a1, b1), (L2, a2, b2) = lab1, lab2
    c_mean = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1 = math.degrees(math.atan2(b1, a1)) % 360 if c1 else 0.0
    h2 = math.degrees(math.atan2(b2, a2)) % 360 if c2 else 0.0
    dh = h2 - h1
    dh = 0.0 if c1 * c2 == 0 else dh - 360 if dh > 180 else dh + 360 if dh < -180 else dh
    dL, dC = L2 - L1, c2 - c1
    dH = 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh / 2))
    L_mean, c_mean = (L1 + L2) / 2, (c1 + c2) / 2
    if c1 * c2 == 0:
        h_mean = h1 + h2
    elif abs(h1 - h2) <= 180:
        h_mean = (h1 + h2) / 2
    else:
        h_mean = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    def cos(degrees):
        return math.cos(math.radians(degrees))
    t = (1 - 0.17 * cos(h_mean - 30) + 0.24 * cos(2 * h_mean) + 0.32 * cos(3 * h_mean + 6)
         - 0.20 * cos(4 * h_mean - 63))
    s_L = 1 + 0.015 * (L_mean - 50) ** 2 / math.sqrt(20 + (L_mean - 50) ** 2)
    s_C, s_H = 1 + 0.045 * c_mean, 1 + 0.015 * c_mean * t
    r_T = (-2 * math.sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7))
           * math.sin(math.radians(60 * math.exp(-((h_mean - 275) / 25) ** 2))))
    return math.sqrt((dL / s_L) ** 2 + (dC / s_C) ** 2 + (dH / s_H) ** 2
                     + r_T * (dC / s_C) * (dH / s_H))


def palette_pairs(stage_colors=None):
    """[(name, colour, name, colour)]: every pair of figure colours that must be told apart, the
    stages' (STAGE_COLORS, or `stage_colors`) and the references', but for the two ceilings (both
    red on purpose: limits, told apart by their dashes)."""
    named = [(f"stage {n:02d}", c) for n, c in enumerate(stage_colors or STAGE_COLORS, 1)]
    named += [(kernel, style[1]) for kernel, style in REFERENCE_STYLE.items()]
    return [(n1, c1, n2, c2) for i, (n1, c1) in enumerate(named) for n2, c2 in named[i + 1:]
            if {n1, n2} != {MMA_PEAK, WGMMA_PEAK}]


def palette_min_delta_e(stage_colors=None):
    """{'cie76': (smallest difference, name, name), 'ciede2000': (...)} over palette_pairs."""
    pairs = [(srgb_to_lab(c1), srgb_to_lab(c2), n1, n2)
             for n1, c1, n2, c2 in palette_pairs(stage_colors)]
    return {metric: min((f(l1, l2), n1, n2) for l1, l2, n1, n2 in pairs)
            for metric, f in (("cie76", delta_e76), ("ciede2000", delta_e2000))}


class CsvError(Exception):
    """A malformed CSV; the message already names the file and line."""


def parse_csv(path):
    """Returns the rows of `path` as dicts with typed values (None for empty fields), after
    validating every line against the contract. Raises CsvError naming the file and line."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise CsvError(f"{path}: cannot read: {e.strerror}")
    rows = []
    with f:
        reader = csv.reader(f)
        try:
            header = next(reader, None)
            if header is None:
                return rows  # an empty file: no data, which the caller reports
            if header != COLUMNS:
                raise CsvError(f"{path}:{reader.line_num}: the header is not the expected one\n"
                               f"  expected: {','.join(COLUMNS)}\n  found:    {','.join(header)}")
            for fields in reader:
                if not fields:
                    continue  # blank line (e.g. a trailing one)
                rows.append(parse_row(fields, f"{path}:{reader.line_num}"))
        except csv.Error as e:  # e.g. a NUL byte
            raise CsvError(f"{path}:{reader.line_num}: {e}")
        except UnicodeDecodeError:
            raise CsvError(f"{path}:{reader.line_num + 1}: not UTF-8 text")
    return rows


def parse_row(fields, where):
    if len(fields) != len(COLUMNS):
        raise CsvError(f"{where}: expected {len(COLUMNS)} fields, found {len(fields)}")
    row = dict(zip(COLUMNS, (field.strip() for field in fields)))
    # Numeric fields may be empty: reference rows leave the errors empty, and the ceilings' rows
    # leave the problem columns empty.
    for column, kind in [(c, int) for c in INT_COLUMNS] + [(c, float) for c in FLOAT_COLUMNS]:
        value = row[column]
        if value == "":
            row[column] = None
            continue
        try:
            row[column] = kind(value)
        except ValueError:
            raise CsvError(f"{where}: column '{column}' is not a number: {value!r}")
    if row["check"] not in CHECK_VALUES:
        raise CsvError(f"{where}: column 'check' must be pass, fail or skipped, "
                       f"found {row['check']!r}")
    if not row["kernel"]:
        raise CsvError(f"{where}: column 'kernel' is empty")
    return row


def problem_key(row):
    return (row["dtype"], row["batch"], row["heads_q"], row["heads_kv"], row["seqlen_q"],
            row["seqlen_k"], row["head_dim"], row["causal"])


def usable_tflops(row):
    value = row["tflops"]
    return value if value is not None and math.isfinite(value) and value > 0 else None


def natural_key(text):
    """'kernel2' before 'kernel10': compare digit runs as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def stage_archs(root=ROOT):
    """{'kernel05': 'sm_80', 'kernel09': 'sm_90a', ...}: the architecture each stage directory
    kernelNN_name/ under `root` declares in its header, keyed as the CSV's kernel column names it.
    The same rule as the Makefile's (tests/test_contract.sh checks that the two agree)."""
    archs = {}
    for path in sorted(glob.glob(os.path.join(root, "kernel[0-9][0-9]_*", "kernel.cu"))):
        with open(path, encoding="utf-8") as f:
            match = NEEDS_LINE.search(f.read())
        if match:
            archs[os.path.basename(os.path.dirname(path))[:len("kernelNN")]] = match.group(1)
    return archs


def stage_fp8(root=ROOT):
    """{'kernel15', ...}: the stages under `root` that take e4m3 inputs, those whose kernel.cu names
    FP8_ENTRY with its own number, as the Makefile's STAGE_FP8 decides it (tests/test_plot.sh checks
    that the two agree)."""
    fp8 = set()
    for path in sorted(glob.glob(os.path.join(root, "kernel[0-9][0-9]_*", "kernel.cu"))):
        kernel = os.path.basename(os.path.dirname(path))[:len("kernelNN")]
        with open(path, encoding="utf-8") as f:
            if FP8_ENTRY.format(nn=kernel[len("kernel"):]) in f.read():
                fp8.add(kernel)
    return fp8


def last_bf16_stage(archs, fp8):
    """What the stages that take e4m3 are measured against in bf16: the last Hopper stage that does
    not take it (kernel14 beside kernel15), the bf16 kernel the fp8 stages start from. None when
    no stage takes e4m3, or no Hopper stage is without it."""
    bf16 = [k for k in sorted(archs, key=natural_key) if archs[k] == HOPPER_ARCH and k not in fp8]
    return bf16[-1] if fp8 and bf16 else None


class Results:
    """The last row of each (kernel, problem), the display name of each kernel, and the stages in
    drawing order: the mma.sync stages, then the Hopper track (the stages that `stage_root`'s
    headers build for sm_90a), each in stage order. `root` is the stage tree the headers were read
    from (tools/results_md.py reads the stages' directory names and techniques there too)."""

    def __init__(self, rows, stage_root=ROOT):
        self.latest = {}
        self.names = {}
        self.gpus = []
        for row in rows:  # in file order, so a later re-run replaces an earlier one
            self.latest[(row["kernel"], problem_key(row))] = row
            self.names[row["kernel"]] = row["name"] or row["kernel"]
            if row["gpu"] not in self.gpus:
                self.gpus.append(row["gpu"])
        self.root = stage_root
        self.archs = stage_archs(stage_root)
        self.fp8 = stage_fp8(stage_root)
        self.last_bf16 = last_bf16_stage(self.archs, self.fp8)
        stages = {k for k, _ in self.latest if k not in REFERENCE_KERNELS}
        # A stage of the CSV without a directory here (renamed, or from another checkout) cannot say
        # which track it is on; main() warns, and it is drawn with the mma.sync stages.
        self.unknown = sorted(stages - set(self.archs), key=natural_key)
        self.hopper = {k for k in stages if self.archs.get(k) == HOPPER_ARCH}
        self.stages = self.track_order(stages)
        self.mma_stages = [k for k in self.stages if k not in self.hopper]

    def add_timed_stages(self, rows):
        """The stages of `rows` (alternating rounds) that the benchmark run has no row of, as stages
        too: a stage timed in rounds but not yet in a `make bench` run still takes its place in the
        ladder, with no check of its own there (row() finds none)."""
        for row in rows:
            kernel = row["kernel"]
            if kernel not in REFERENCE_KERNELS and kernel not in self.names:
                self.names[kernel] = row["name"] or kernel
                if self.archs.get(kernel) == HOPPER_ARCH:
                    self.hopper.add(kernel)
        self.stages = self.track_order(set(self.stages) | {k for k in self.names if k not in REFERENCE_KERNELS})
        self.mma_stages = [k for k in self.stages if k not in self.hopper]

    def track_order(self, stages):
        """`stages` in drawing order: the mma.sync stages, then the Hopper track."""
        return sorted(stages, key=lambda k: (self.archs.get(k) == HOPPER_ARCH, natural_key(k)))

    def gpu_label(self):
        return " / ".join(self.gpus) if self.gpus else "unknown GPU"

    def row(self, kernel, key):
        return self.latest.get((kernel, key))

    def ceiling(self, kernel):
        """A ceiling (MMA_PEAK, WGMMA_PEAK) does not depend on the problem: the last such row."""
        rows = [r for (k, _), r in self.latest.items() if k == kernel and usable_tflops(r)]
        return usable_tflops(rows[-1]) if rows else None


def round_ratio(ours, theirs, paired=True):
    """The ratio of two kernels timed in the same rounds (TFLOP/s by round, None where a round has
    no value): the median over pairs of rounds of the geometric mean of the pair's two ratios.

    Why pairs: harness/rounds.py times the kernels of a problem in one order in even rounds and in
    the reverse order in odd ones, and the order alone moves some ratios by up to a tenth (the
    rounds of 7b0fa18 show stage 13 / FA3 at head_dim 128, 2k, causal near 0.96 in every forward
    round and near 0.87 in every reversed one). A median over single rounds then lands in one group
    or the other depending on how many rounds of each there were; the geometric mean of a forward
    and a reversed round cancels the order (an ABBA design), and the median over the pairs keeps
    what the rounds are for. A last unpaired round is left out; a single round is used alone.
    paired=False gives the median over single rounds (what docs/measuring.md compares it with)."""
    ratios = [a / b if a is not None and b is not None else None for a, b in zip(ours, theirs)]
    pairs = [(ratios[i] * ratios[i + 1]) ** 0.5 for i in range(0, len(ratios) - 1, 2)
             if paired and ratios[i] is not None and ratios[i + 1] is not None]
    if pairs:
        return statistics.median(pairs)
    single = [r for r in ratios if r is not None]
    return statistics.median(single) if single else None


class Rounds:
    """The rows of alternating rounds (harness/rounds.py): every kernel timed once per round at each
    problem it covers, so that kernels of one round met the same clocks. Round r's row of a (kernel,
    problem) is the r-th row of that (kernel, problem) in file order. `problem` is the tuple of
    contract.PROBLEM_FIELDS (problem_key of a row; HEADLINE, sweep_problem(...)).

      rows      every row, in file order
      series    {(kernel, problem): [row of round 1, row of round 2, ...]}
      rounds(kernel, problem)      -> int: how many rounds timed it (0: none)
      medians(kernel, problem)     -> float | None: its median TFLOP/s over the rounds
      ratio(kernel_a, kernel_b, problem[, problem_b]) -> float | None: round_ratio of their
                                      TFLOP/s (rounds zipped in order, so a kernel skipped in later
                                      rounds pairs only its first ones); with problem_b, kernel_b's
                                      at that problem: a stage in e4m3 over one in bf16 at the same
                                      shape, timed in the same rounds

    The median of the ratios, not the ratio of the medians: a round where the clocks sat in the
    slow group slows both kernels, and only the ratio within the round cancels that."""

    def __init__(self, rows, paired=True):
        self.rows, self.paired = list(rows), paired
        self.series = {}
        for row in self.rows:
            self.series.setdefault((row["kernel"], problem_key(row)), []).append(row)

    @classmethod
    def from_csv(cls, path):
        """Raises CsvError, as parse_csv."""
        return cls(parse_csv(path))

    def _tflops(self, kernel, problem):
        return [usable_tflops(r) for r in self.series.get((kernel, tuple(problem)), [])]

    def rounds(self, kernel, problem):
        return len(self.series.get((kernel, tuple(problem)), []))

    def medians(self, kernel, problem):
        values = [v for v in self._tflops(kernel, problem) if v is not None]
        return statistics.median(values) if values else None

    def ratio(self, kernel_a, kernel_b, problem, problem_b=None):
        return round_ratio(self._tflops(kernel_a, problem), self._tflops(kernel_b, problem_b or problem), self.paired)

    def fewest(self):
        """The fewest rounds any (kernel, problem) of the file was timed in: how many rounds every
        ratio of it is a median over, at least."""
        return min((len(v) for v in self.series.values()), default=0)

    def latest_date(self):
        return max((r["date"] or "" for r in self.rows), default="")

    def commits(self):
        return sorted({r["commit"] for r in self.rows if r["commit"]})


def find_rounds(csv_path):
    """The rounds file of the benchmark CSV <dir>/<stem>.csv: the newest <dir>/rounds/<stem>_*.csv
    (tools/results_md.py takes the same file for the README's ratios), newest by the latest date
    inside, which a checkout does not change, then by modification time. Names ending in
    _again.csv are the second measurement of a commit (the reproducibility check), names ending in
    _nosettle.csv its rounds without the settling work (make rounds-nosettle): never the ladder's. Returns (path, Rounds) or None; raises CsvError for a malformed candidate."""
    directory, name = os.path.split(csv_path)
    stem = os.path.splitext(name)[0]
    pattern = os.path.join(directory or ".", "rounds", glob.escape(stem) + "_*.csv")
    candidates = []
    for path in glob.glob(pattern):
        if path.endswith(("_again.csv", "_nosettle.csv")):
            continue
        rounds = Rounds.from_csv(path)
        if rounds.rows:
            candidates.append((rounds.latest_date(), os.path.getmtime(path), path, rounds))
    if not candidates:
        return None
    _, _, path, rounds = max(candidates, key=lambda c: c[:3])
    return path, rounds


def stage_label(name):
    """'kernel07_online_softmax' -> 'kernel07\\nonline_softmax': two short lines fit under a bar."""
    return name.replace("_", "\n", 1)


def stage_number(kernel):
    """The stage's number as written in its kernel id ('kernel05' -> '05'), or None."""
    match = re.search(r"\d+", kernel)
    return match.group() if match else None


def stage_styles(stages):
    """{kernel: (colour, marker)}, the same in both plots, so a reader can match bars to lines.
    A numbered stage takes the entry of its number, whatever other stages there are; a stage
    without a number takes the entries after the palette's end, in natural order."""
    styles = {}
    unnumbered = [k for k in stages if stage_number(k) is None]
    for kernel in stages:
        number = stage_number(kernel)
        if number is not None:
            slot = int(number) - 1
        else:
            slot = len(STAGE_COLORS) + unnumbered.index(kernel)
        # Past the palette the colours repeat; shift the markers so that the pair still differs.
        marker = STAGE_MARKERS[(slot + slot // len(STAGE_COLORS)) % len(STAGE_MARKERS)]
        styles[kernel] = (STAGE_COLORS[slot % len(STAGE_COLORS)], marker)
    return styles


def reference_style(kernel):
    """(legend label, colour, dash pattern) of a reference line: a kernel of REFERENCE_STYLE, or
    FA3_FP8 (FlashAttention-3 in e4m3, FP8_REFERENCE_STYLE)."""
    return FP8_REFERENCE_STYLE.get(kernel) or REFERENCE_STYLE[kernel]


def reference_label(kernel, value, decimals, mma_stages):
    """The legend text of a reference line with its value. The mma.sync ceiling names the stages
    it bounds, `mma_stages` (those not on the Hopper track), where they have numbers."""
    name = reference_style(kernel)[0]
    numbers = sorted((n for n in map(stage_number, mma_stages) if n is not None), key=int)
    if kernel == MMA_PEAK and numbers:
        span = (f"stage {numbers[0]}" if len(numbers) == 1
                else f"stages {numbers[0]}\u2013{numbers[-1]}")
        name = MMA_CEILING_LABEL.format(stages=span)
    return f"{name}: {value:.{decimals}f} TFLOP/s"


def lighter(color, amount=FP8_BAR_LIGHTEN):
    """'#rrggbb' mixed `amount` of the way towards white, as '#rrggbb' (an e4m3 bar's fill)."""
    value = color.lstrip("#")
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}"
                         for c in (int(value[i:i + 2], 16) for i in (0, 2, 4)))


def ladder_data(results, rounds=None):
    """What the ladder shows at the headline problem: (bars, references, source, from_rounds).
      bars        [(kernel, name, TFLOP/s, stage/FA2, stage/FA3, check, dtype)], in drawing order (a
                  ratio None where that reference has no row). dtype is bf16, but for the bar right
                  after each stage that takes e4m3 inputs (Results.fp8) where the source holds its
                  row at the same shape in e4m3 (FP8_HEADLINE): that bar's dtype is e4m3, its ratio
                  to FA2 None (FA2 takes no e4m3) and its ratio to FA3 the one to FA3 in e4m3;
      references  [(kernel, TFLOP/s)] of the timed references, then FA3 in e4m3 (FA3_FP8, only
                  beside an e4m3 bar), then the ceilings: those that have rows;
      source      the title's line that says where the figures come from.
    From `rounds` (a Rounds), where it holds a stage at the headline: each stage's and each
    reference's median over the rounds and the medians of the per-round ratios, the check of the
    benchmark CSV's row (a failed check makes any timing of that build meaningless). Otherwise the
    benchmark CSV's last rows, whose ratios are those of the one run. Returns None when neither
    holds a stage at the headline. The ceilings come from the benchmark CSV in both cases."""
    ceilings = [(k, results.ceiling(k)) for k in (MMA_PEAK, WGMMA_PEAK)]
    in_rounds = set()
    if rounds is not None:
        in_rounds = {k for k, problem in rounds.series
                     if problem == HEADLINE and k not in REFERENCE_KERNELS
                     and rounds.medians(k, HEADLINE) is not None}

    def check(kernel, problem):
        bench = results.row(kernel, problem)
        return bench["check"] if bench else "skipped"

    if in_rounds:
        stages = results.track_order(in_rounds)
        value = rounds.medians

        def ratio(kernel, reference, problem):
            return rounds.ratio(kernel, reference, problem)

        def name(kernel):
            return rounds.series[(kernel, HEADLINE)][-1]["name"] or results.names.get(kernel, kernel)
    else:
        def value(kernel, problem):
            row = results.row(kernel, problem)
            return usable_tflops(row) if row else None

        def ratio(kernel, reference, problem):
            ours, theirs = value(kernel, problem), value(reference, problem)
            return ours / theirs if ours is not None and theirs else None

        def name(kernel):
            return results.names[kernel]

        stages = [k for k in results.stages if value(k, HEADLINE) is not None]
        if not stages:
            return None
    bars = []
    for kernel in stages:
        bars.append((kernel, name(kernel), value(kernel, HEADLINE), ratio(kernel, "fa2", HEADLINE),
                     ratio(kernel, "fa3", HEADLINE), check(kernel, HEADLINE), HEADLINE[0]))
        if kernel in results.fp8 and value(kernel, FP8_HEADLINE) is not None:
            bars.append((kernel, name(kernel), value(kernel, FP8_HEADLINE), None,
                         ratio(kernel, "fa3", FP8_HEADLINE), check(kernel, FP8_HEADLINE), FP8_DTYPE))
    timed = [(k, value(k, HEADLINE)) for k in TIMED]
    if any(b[6] == FP8_DTYPE for b in bars):
        timed.append((FA3_FP8, value("fa3", FP8_HEADLINE)))
    if in_rounds:
        # Every drawn bar and reference line is a median over at least this many rounds.
        counted = [(b[0], FP8_HEADLINE if b[6] == FP8_DTYPE else HEADLINE) for b in bars]
        counted += [(("fa3", FP8_HEADLINE) if k == FA3_FP8 else (k, HEADLINE)) for k, v in timed if v is not None]
        n = min(rounds.rounds(k, p) for k, p in counted)
        commits = rounds.commits()
        source = (f"median of {n} alternating round{'s' if n != 1 else ''}"
                  + (f" at {', '.join(commits)}" if commits else "") + " (make rounds)")
    else:
        source = "one run (make bench)"
    references = [(k, v) for k, v in timed + ceilings if v is not None]
    return bars, references, source, bool(in_rounds)


def ladder_tick_label(name, dtype, has_fp8_bar):
    """A bar's tick label: the stage's name on two lines (stage_label), and below them its dtype
    where the stage has an e4m3 bar, so that its two bars say which is which."""
    return stage_label(name) + (f"\n{dtype}" if has_fp8_bar else "")


def draw_ladder(results, out_path, rounds=None):
    """The stage ladder at the headline problem, from `rounds` (a Rounds) where it has headline
    rows, else from the benchmark CSV (see ladder_data), with an e4m3 bar after each stage that takes
    e4m3 inputs where the same source holds it. Returns (summary, source) to print, or None when
    there is no stage at the headline problem. summary: [(name, TFLOP/s, /FA2, /FA3, check, dtype)],
    the ratio to FA3 of an e4m3 bar being the one to FA3 in e4m3."""
    import matplotlib.pyplot as plt
    from matplotlib.transforms import offset_copy

    data = ladder_data(results, rounds)
    if data is None:
        return None
    bars_data, references, source, from_rounds = data
    drawn = dict(references)
    with_fp8 = {b[0] for b in bars_data if b[6] == FP8_DTYPE}

    # Wider with more bars: a bar's label (its TFLOP/s and ratios) and its tick label need about
    # LADDER_INCHES_PER_BAR side by side, and a dozen stages and more would run them together.
    fig, ax = plt.subplots(figsize=(max(FIGSIZE[0], LADDER_INCHES_PER_BAR * len(bars_data) + 1.5), FIGSIZE[1]), dpi=DPI)
    styles = stage_styles(results.track_order(set(results.stages) | {b[0] for b in bars_data}))
    xs = range(len(bars_data))
    values = [b[2] for b in bars_data]
    bars = ax.bar(xs, values, width=0.65, zorder=2,
                  color=[lighter(styles[b[0]][0]) if b[6] == FP8_DTYPE else styles[b[0]][0] for b in bars_data])
    for bar, b in zip(bars, bars_data):
        if b[6] == FP8_DTYPE:
            # The same stage in e4m3: a lighter fill, dotted in the stage's colour, edged in it.
            bar.set_hatch(FP8_BAR_HATCH)
            bar.set_edgecolor(styles[b[0]][0])
            bar.set_linewidth(1.0)
    # Each bar wears its stage's marker on top, as in the sweep, so that bars and lines match by
    # shape as well as by colour. The marker sits just above the bar, its label above the marker.
    marker_lift = STAGE_MARKERSIZE / 2 + 1  # points from the bar's top to the marker's centre
    above_bar = offset_copy(ax.transData, fig=fig, y=marker_lift, units="points")
    for bar, (kernel, *_), value in zip(bars, bars_data, values):
        color, marker = styles[kernel]
        ax.plot(bar.get_x() + bar.get_width() / 2, value, marker=marker, color=color,
                markerfacecolor="white", markersize=STAGE_MARKERSIZE,
                markeredgewidth=STAGE_MARKEREDGEWIDTH, transform=above_bar, zorder=3,
                clip_on=False)

    summary = []
    top = 0  # the height the labels need, in data units: each bar's share of headroom below
    for bar, (kernel, name, value, of_fa2, of_fa3, check, dtype) in zip(bars, bars_data):
        failed = check == "fail"
        # The TFLOP/s, then the ratios, each on a line of its own: a bar is too narrow for two.
        lines = [f"{value:.1f}"]
        if of_fa2 is not None:
            lines.append(f"{100 * of_fa2:.0f}% of FA2")
        if of_fa3 is not None:
            lines.append(f"{of_fa3:.2f}\u00d7 FA3" + (f" {FP8_DTYPE}" if dtype == FP8_DTYPE else ""))
        if failed:
            # A failed correctness check makes the speed meaningless: say so on the bar itself.
            bar.set_hatch("///")
            bar.set_edgecolor("tab:red")
            bar.set_linewidth(1.5)
            bar.set_alpha(0.55)
            lines.insert(0, "FAIL")
        # Headroom for this bar's label: two lines fit in a fifth more than the bar, each further
        # one takes another 6%. Taken bar by bar, so that the tallest bar (an e4m3 one, with two
        # lines) is not given the room of a shorter bar's three.
        top = max(top, value * (1.22 + 0.06 * max(0, len(lines) - 2)))
        # The white box keeps the label readable where a reference line passes behind it.
        ax.annotate("\n".join(lines), (bar.get_x() + bar.get_width() / 2, value),
                    xytext=(0, marker_lift + STAGE_MARKERSIZE / 2 + 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8,
                    color="tab:red" if failed else "black", fontweight="bold" if failed else None,
                    bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="none"),
                    zorder=4)
        summary.append((name, value, of_fa2, of_fa3, check, dtype))

    for kernel, value in references:
        _, color, style = reference_style(kernel)
        ax.axhline(value, color=color, linestyle=style, zorder=1,
                   linewidth=FP8_REFERENCE_LINEWIDTH if kernel in FP8_REFERENCE_STYLE else 1.4,
                   label=reference_label(kernel, value, 1, results.mma_stages))
    hopper = [n for n, b in enumerate(bars_data) if results.archs.get(b[0]) == HOPPER_ARCH]
    if hopper:
        draw_track_divider(ax, hopper[0] - 0.5)

    # With few stages, widen the margins so that the bars keep their width instead of filling it.
    pad = 0.6 + max(0, 4 - len(bars_data)) / 2
    ax.set_xlim(-pad, len(bars_data) - 1 + pad)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([ladder_tick_label(b[1], b[6], b[0] in with_fp8) for b in bars_data],
                       fontsize=8 if len(bars_data) <= 10 else 7)  # 7: a dozen labels side by side
    ax.set_ylabel("TFLOP/s (median over the rounds)" if from_rounds else "TFLOP/s (median)")
    # Headroom for the labels (above) and above the highest reference line.
    ax.set_ylim(0, max(top, max((v for _, v in references), default=0) * 1.22))
    ax.grid(axis="y", alpha=0.3, zorder=0)
    ax.set_axisbelow(True)
    dtypes = f"bf16; {FP8_DTYPE} bars where a stage takes it" if with_fp8 else "bf16"
    title = (f"{results.gpu_label()}: stage ladder, {dtypes}, B=16 H=16 S=4096 D=128, non-causal\n"
             f"{source}")
    if "fa2" not in drawn:
        title += f"\n(no FA2 row in the {'rounds' if from_rounds else 'CSV'}: % of FA2 not shown)"
    ax.set_title(title, fontsize=11)
    if references:
        ax.legend(loc="upper left", fontsize=8, framealpha=0.95,
                  handlelength=LEGEND_HANDLELENGTH)
    fig.tight_layout()
    fig.savefig(out_path)
    plt.close(fig)
    return summary, source


def draw_track_divider(ax, x):
    """The line between the mma.sync stages and the Hopper track, at x in data units, labelled
    at the top, just right of it, reading upwards: horizontal text would not fit beside a single
    Hopper bar when there are a dozen stages."""
    from matplotlib.transforms import blended_transform_factory, offset_copy

    ax.axvline(x, color="0.3", linewidth=1.2, zorder=1)
    at_top = blended_transform_factory(ax.transData, ax.transAxes)  # x in data, y in axes fractions
    ax.text(x, 0.98, HOPPER_TRACK_LABEL, transform=offset_copy(at_top, fig=ax.figure, x=3, units="points"),
            rotation=90, ha="left", va="top", fontsize=8, color="0.2",
            bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none"), zorder=4)


def sweep_rows(results, kernel, head_dim, causal):
    """The (seqlen, TFLOP/s, failed) points of one kernel in one sweep panel, by seqlen."""
    points = []
    for (k, key), row in results.latest.items():
        dtype, batch, heads_q, heads_kv, seqlen_q, seqlen_k, d, c = key
        if k != kernel or dtype != "bf16" or d != head_dim or c != causal:
            continue
        if None in (batch, heads_q, seqlen_q) or seqlen_q != seqlen_k or heads_q != heads_kv:
            continue
        if batch * seqlen_q != SWEEP_TOKENS or heads_q * d != SWEEP_WIDTH:
            continue
        if usable_tflops(row):
            points.append((seqlen_q, usable_tflops(row), row["check"] == "fail"))
    return sorted(points)


def draw_sweep(results, out_path):
    """TFLOP/s against seqlen. Returns False when the CSV has no sweep point at all."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    kernels = results.stages + list(TIMED)
    # One row of panels per head_dim that has at least one sweep point.
    candidates = sorted({r["head_dim"] for r in results.latest.values() if r["head_dim"]})
    head_dims = [d for d in candidates
                 if any(sweep_rows(results, k, d, c) for k in kernels for c in (0, 1))]
    if not head_dims:
        return False

    nrows = len(head_dims)
    fig, axes = plt.subplots(nrows, 2, figsize=(FIGSIZE[0], 1.8 + 3.2 * nrows), dpi=DPI,
                             sharex=True, sharey=True, squeeze=False)
    styles = stage_styles(results.stages)
    ceilings = [(k, results.ceiling(k)) for k in (MMA_PEAK, WGMMA_PEAK)]
    ceilings = [(k, v) for k, v in ceilings if v is not None]
    stage_handles, reference_handles = {}, {}
    stage_points = {}  # ax -> [(kernel, points)]: their markers are drawn once the layout is set
    any_failed = False
    for i, head_dim in enumerate(head_dims):
        for j, causal in enumerate((0, 1)):
            ax = axes[i][j]
            stage_points[ax] = []
            for kernel in kernels:
                points = sweep_rows(results, kernel, head_dim, causal)
                if not points:
                    continue
                any_failed = any_failed or any(p[2] for p in points)
                xs, ys = [p[0] for p in points], [p[1] for p in points]
                if kernel in REFERENCE_STYLE:
                    label, color, style = REFERENCE_STYLE[kernel]
                    (line,) = ax.plot(xs, ys, linestyle=style, color=color, linewidth=1.8,
                                      marker="o", markersize=REFERENCE_MARKERSIZE)
                    reference_handles.setdefault(label, line)
                    draw_failed(ax, [p for p in points if p[2]])
                    continue
                # A stage: the line now, at its exact data; its markers later (see dodge_markers).
                color, shape = styles[kernel]
                ax.plot(xs, ys, "-", color=color, linewidth=1.5)
                stage_points[ax].append((kernel, points))
                stage_handles.setdefault(kernel, Line2D(
                    [], [], color=color, linewidth=1.5, marker=shape,
                    markersize=STAGE_MARKERSIZE, markerfacecolor="none",
                    markeredgewidth=STAGE_MARKEREDGEWIDTH))
            if not ax.get_lines():
                ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center",
                        color="tab:gray")
            for kernel, value in ceilings:
                _, color, style = REFERENCE_STYLE[kernel]
                line = ax.axhline(value, color=color, linestyle=style, linewidth=1.2)
                reference_handles.setdefault(reference_label(kernel, value, 0, results.mma_stages), line)
            sweep_panel_axes(ax, head_dim, causal, bottom=i == nrows - 1, left=j == 0)
    fig.suptitle(f"{results.gpu_label()}: forward TFLOP/s against seqlen, bf16, "
                 f"heads · head_dim = {SWEEP_WIDTH}, one run (make bench)", fontsize=11)
    # The panels share the y axis; set it once, after every panel is drawn, from all the data.
    top = max(max(line.get_ydata()) for ax in axes.flat for line in ax.get_lines())
    axes[0][0].set_ylim(0, top * 1.06)
    if any_failed:
        reference_handles["check failed"] = Line2D([], [], linestyle="none", **FAILED_MARKER)

    # One legend for all panels, below them, so that no line is hidden behind it: the stages in
    # the first columns, the references (and the failed-check mark) alone in the last one, so
    # that the long ceiling label widens only that column.
    refs = list(reference_handles.items())
    stages = [(results.names[k], h) for k, h in stage_handles.items()]
    legend_rows = max(-(-len(stages) // SWEEP_LEGEND_STAGE_COLUMNS), len(refs), 1)
    stage_columns = -(-len(stages) // legend_rows)
    blank = Line2D([], [], linestyle="none")
    entries = stages + [("", blank)] * (stage_columns * legend_rows - len(stages)) + refs
    entries += [("", blank)] * (legend_rows - len(refs) if refs else 0)
    legend_height = (0.1 + 0.2 * legend_rows) / fig.get_figheight()  # in figure fractions
    fig.legend([h for _, h in entries], [label for label, _ in entries], loc="lower center",
               ncol=stage_columns + (1 if refs else 0), fontsize=8, frameon=False,
               handlelength=LEGEND_HANDLELENGTH, columnspacing=3)
    fig.tight_layout(rect=(0, legend_height, 1, 1))
    # The layout is final: draw the stage markers, dodged apart where they would cover each other.
    for ax, kernel_points in stage_points.items():
        dodge_markers(fig, ax, kernel_points, styles)
    fig.savefig(out_path)
    plt.close(fig)
    return True


def sweep_panel_axes(ax, head_dim, causal, bottom, left):
    """The axes of one sweep panel, as the sweep and the fp8 figures share them: seqlen on a log
    scale with the sweep's points as ticks, the panel's (head_dim, causal) as its title, the axis
    labels on the bottom row and the left column."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(SWEEP_SEQLENS))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([seqlen_label(s) for s in SWEEP_SEQLENS])
    ax.set_xlim(SWEEP_SEQLENS[0] / 1.25, SWEEP_SEQLENS[-1] * 1.25)
    ax.grid(alpha=0.3)
    ax.set_title(f"head_dim {head_dim}, {'causal' if causal else 'non-causal'}",
                 fontsize=10)
    if bottom:
        ax.set_xlabel("seqlen (batch = 65536 / seqlen)")
    if left:
        ax.set_ylabel("TFLOP/s (median)")


# The fp8 figure: the e4m3 lines in their kernel's style; the bf16 lines beside them, there for
# scale, in the same colours but thinner, dotted and faded, so that the eye reads the e4m3 pair first.
FP8_SCALE_STYLE = dict(linestyle=(0, (1, 1.5)), linewidth=1.2, alpha=0.6)


def fp8_data(results, rounds=None):
    """What the fp8 figure shows: (lines, source, from_rounds), or None without an e4m3 stage row over
    the sweep.
      lines   [(kernel, dtype, label, {(head_dim, causal): [(seqlen, TFLOP/s, failed)]})]: each stage
              that takes e4m3 and FlashAttention-3 in e4m3, then the last Hopper stage without fp8
              (results.last_bf16) and FlashAttention-3 in bf16, those that have sweep points;
      source  the title's words for where the figures come from.
    From `rounds` (a Rounds) where it holds e4m3 sweep rows of a stage: each kernel's median over the
    rounds, bf16 and e4m3 having met the same clocks. Otherwise the benchmark CSV's one run (make
    bench for the stages, make reference for FA3), whose failed checks are marked."""
    wanted = [(k, FP8_DTYPE) for k in sorted(results.fp8, key=natural_key)] + [("fa3", FP8_DTYPE)]
    wanted += [(k, "bf16") for k in (results.last_bf16, "fa3") if k]

    def from_rounds(kernel, p):
        value = rounds.medians(kernel, p)
        return None if value is None else (value, False)

    def from_run(kernel, p):
        row = results.row(kernel, p)
        return (usable_tflops(row), row["check"] == "fail") if row and usable_tflops(row) else None

    def series(value, kernel, dtype):
        points = {}
        for p in sweep_problems(dtype):
            got = value(kernel, p)
            if got is not None:
                points.setdefault((p[6], p[7]), []).append((p[4],) + got)
        return points

    def stage_in(value):
        return any(series(value, k, FP8_DTYPE) for k in results.fp8)

    if rounds is not None and stage_in(from_rounds):
        value, n = from_rounds, rounds.fewest()
        commits = rounds.commits()
        source = (f"median of {n} alternating round{'s' if n != 1 else ''}"
                  + (f" at {', '.join(commits)}" if commits else "") + " (make rounds)")
    elif stage_in(from_run):
        value, source = from_run, "one run (make bench, make reference)"
    else:
        return None
    lines = []
    for kernel, dtype in wanted:
        points = series(value, kernel, dtype)
        if points:
            name = REFERENCE_STYLE[kernel][0] if kernel in REFERENCE_STYLE else results.names.get(kernel, kernel)
            lines.append((kernel, dtype, f"{name}, {dtype}", points))
    return lines, source, value is from_rounds


def draw_fp8(results, out_path, rounds=None):
    """The sweep in e4m3 beside bf16 (see fp8_data). Returns (source, from_rounds) to print, or None
    when there is no e4m3 stage row over the sweep to draw."""
    import matplotlib.pyplot as plt

    data = fp8_data(results, rounds)
    if data is None:
        return None
    lines, source, from_rounds = data
    styles = stage_styles(results.track_order({k for k, *_ in lines if k not in REFERENCE_STYLE}))
    fig, axes = plt.subplots(len(SWEEP_HEAD_DIMS), 2, figsize=(FIGSIZE[0], 1.8 + 3.2 * len(SWEEP_HEAD_DIMS)),
                             dpi=DPI, sharex=True, sharey=True, squeeze=False)
    handles = {}
    for i, head_dim in enumerate(SWEEP_HEAD_DIMS):
        for j, causal in enumerate((0, 1)):
            ax = axes[i][j]
            for kernel, dtype, label, points in lines:
                at = sorted(points.get((head_dim, causal), []))
                if not at:
                    continue
                if kernel in REFERENCE_STYLE:
                    _, color, style = REFERENCE_STYLE[kernel]
                    look = dict(linestyle=style, linewidth=1.8, marker="o", markersize=REFERENCE_MARKERSIZE)
                else:
                    color, shape = styles[kernel]
                    look = dict(linestyle="-", linewidth=1.5, marker=shape, markersize=STAGE_MARKERSIZE,
                                markerfacecolor="none", markeredgewidth=STAGE_MARKEREDGEWIDTH)
                if dtype != FP8_DTYPE:
                    look.update(FP8_SCALE_STYLE, markersize=look["markersize"] * 0.7)
                (line,) = ax.plot([p[0] for p in at], [p[1] for p in at], color=color, **look)
                handles.setdefault(label, line)
                draw_failed(ax, [p for p in at if p[2]])
            if not ax.get_lines():
                ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="tab:gray")
            sweep_panel_axes(ax, head_dim, causal, bottom=i == len(SWEEP_HEAD_DIMS) - 1, left=j == 0)
    fig.suptitle(f"{results.gpu_label()}: forward TFLOP/s against seqlen, q, k, v in e4m3 (bf16 for scale), "
                 f"heads · head_dim = {SWEEP_WIDTH}\n{source}", fontsize=11)
    top = max(max(line.get_ydata()) for ax in axes.flat for line in ax.get_lines())
    axes[0][0].set_ylim(0, top * 1.06)
    legend_height = 0.5 / fig.get_figheight()  # one row of entries, in figure fractions
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=len(handles), fontsize=8,
               frameon=False, handlelength=LEGEND_HANDLELENGTH, columnspacing=2)
    fig.tight_layout(rect=(0, legend_height, 1, 1))
    fig.savefig(out_path)
    plt.close(fig)
    return source, from_rounds


def draw_failed(ax, points, transform=None):
    """A red cross on each failed point: its speed is meaningless."""
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], linestyle="none",
                transform=transform or ax.transData, zorder=5, **FAILED_MARKER)


def dodge_markers(fig, ax, kernel_points, styles):
    """Draws the stage markers of one panel. Where several stages' markers would overlap at one
    seqlen (stages 02-04 run at nearly the same speed), they are set side by side, shifted a few
    points left and right in stage order; the lines and the values stay exact."""
    from matplotlib.transforms import offset_copy

    order = {kernel: n for n, (kernel, _) in enumerate(kernel_points)}
    # Pixels: markers closer than this hide each other's shape (further apart, hollow markers
    # overlap only partly and stay readable, so they are left in place).
    touch = DODGE_THRESHOLD * STAGE_MARKERSIZE * fig.dpi / 72
    offsets = {}  # (kernel, seqlen) -> horizontal shift in points
    for seqlen in sorted({p[0] for _, points in kernel_points for p in points}):
        here = sorted((ax.transData.transform((seqlen, p[1]))[1], kernel)
                      for kernel, points in kernel_points for p in points if p[0] == seqlen)
        clusters = []  # runs of markers that all lie within `touch` of the run's lowest one
        for y, kernel in here:
            if clusters and y - clusters[-1][0][0] < touch:
                clusters[-1].append((y, kernel))
            else:
                clusters.append([(y, kernel)])
        for cluster in clusters:
            kernels = sorted((kernel for _, kernel in cluster), key=order.get)
            for n, kernel in enumerate(kernels):
                offsets[(kernel, seqlen)] = (n - (len(kernels) - 1) / 2) * STAGE_MARKERSIZE
    for kernel, points in kernel_points:
        color, shape = styles[kernel]
        for shift in sorted({offsets[(kernel, p[0])] for p in points}):
            at = [p for p in points if offsets[(kernel, p[0])] == shift]
            transform = offset_copy(ax.transData, fig=fig, x=shift, units="points")
            ax.plot([p[0] for p in at], [p[1] for p in at], linestyle="none", marker=shape,
                    color=color, markersize=STAGE_MARKERSIZE, markerfacecolor="none",
                    markeredgewidth=STAGE_MARKEREDGEWIDTH, transform=transform, zorder=3)
            draw_failed(ax, [p for p in at if p[2]], transform)


def print_summary(csv_path, summary, source):
    """draw_ladder's summary, a line per bar; an e4m3 bar's after its stage's name, against FA3 in e4m3."""
    print(f"{csv_path}: headline ladder, {source}")
    for name, value, of_fa2, of_fa3, check, dtype in summary:
        fp8 = dtype == FP8_DTYPE
        share = (f"{100 * of_fa2:5.1f}% of FA2" if of_fa2 is not None
                 else f"(FA2: no {FP8_DTYPE})" if fp8 else "(no FA2 row)")
        fa3 = f"  {of_fa3:.3f}x FA3" + (f" {FP8_DTYPE}" if fp8 else "") if of_fa3 is not None else ""
        label = f"{name}, {FP8_DTYPE}" if fp8 else name
        print(f"  {label:<28} {value:8.1f} TFLOP/s  {share}{fa3}  check {check}")


def main():
    parser = argparse.ArgumentParser(
        description="Draw <stem>_ladder.png, <stem>_sweep.png and <stem>_fp8.png from each benchmark CSV.")
    parser.add_argument("csvs", nargs="+", metavar="CSV", help="CSV files (one per GPU)")
    parser.add_argument("--out-dir", metavar="DIR",
                        help="where to write the PNGs (default: beside each CSV)")
    parser.add_argument("--stages-from", metavar="DIR", default=ROOT,
                        help="the tree whose kernelNN_name/kernel.cu headers say which stages are "
                             "on the Hopper track (default: this repository)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--rounds", metavar="FILE",
                       help="the alternating rounds (harness/rounds.py) the ladder is drawn from "
                            "(default: the newest <dir>/rounds/<stem>_*.csv beside each CSV, not "
                            "an _again.csv); one CSV only")
    which.add_argument("--no-rounds", action="store_true",
                       help="draw the ladder from the benchmark CSV's one run even where there "
                            "are rounds")
    args = parser.parse_args()
    if args.rounds and len(args.csvs) > 1:
        print("error: --rounds FILE holds the rounds of one GPU: give one benchmark CSV with it",
              file=sys.stderr)
        return 2

    # Validate every file before drawing anything: a malformed CSV is an error to fix, not
    # something to half-plot.
    parsed = []
    for path in args.csvs:
        try:
            rows = parse_csv(path)
            if args.no_rounds:
                rounds = None
            elif args.rounds:
                rounds = (args.rounds, Rounds.from_csv(args.rounds))
            else:
                rounds = find_rounds(path)
        except CsvError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        parsed.append((path, rows, rounds))

    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed (pip install matplotlib): no plots drawn",
              file=sys.stderr)
        return 1
    matplotlib.use("Agg")  # files only, no display needed

    written = 0
    for path, rows, rounds in parsed:
        if not rows:
            print(f"{path}: no data rows, nothing to plot")
            continue
        results = Results(rows, args.stages_from)
        if results.unknown:
            print(f"warning: {path}: no kernelNN_name/kernel.cu in {args.stages_from} for "
                  f"{', '.join(results.unknown)}: drawn with the mma.sync stages", file=sys.stderr)
        if len(results.gpus) > 1:
            print(f"warning: {path} mixes several GPUs ({', '.join(results.gpus)}); "
                  f"expected one CSV per GPU", file=sys.stderr)
        out_dir = args.out_dir or os.path.dirname(path) or "."
        os.makedirs(out_dir, exist_ok=True)
        stem = os.path.join(out_dir, os.path.splitext(os.path.basename(path))[0])

        rounds_gpus = sorted({r["gpu"] for r in rounds[1].rows}) if rounds else []
        if set(rounds_gpus) - set(results.gpus):
            print(f"warning: {rounds[0]} was measured on {', '.join(rounds_gpus)}, "
                  f"{path} on {results.gpu_label()}", file=sys.stderr)
        ladder_rounds = rounds
        if rounds is not None and not any(problem == HEADLINE and kernel not in REFERENCE_KERNELS
                                          for kernel, problem in rounds[1].series):
            print(f"{path}: {rounds[0]} holds no stage at the headline problem: the ladder is the "
                  f"benchmark CSV's one run")
            ladder_rounds = None
        drawn = draw_ladder(results, stem + "_ladder.png", ladder_rounds[1] if ladder_rounds else None)
        if drawn is None:
            print(f"{path}: no stage row at the headline problem (B=16 H=16 S=4096 D=128 bf16 "
                  f"non-causal): no ladder plot")
        else:
            summary, source = drawn
            print_summary(path, summary, source + (f", {ladder_rounds[0]}" if ladder_rounds else ""))
            print(f"wrote {stem}_ladder.png")
            written += 1
        if draw_sweep(results, stem + "_sweep.png"):
            print(f"wrote {stem}_sweep.png")
            written += 1
        else:
            print(f"{path}: no sweep rows (batch*seqlen = {SWEEP_TOKENS}, "
                  f"heads*head_dim = {SWEEP_WIDTH}, bf16): no sweep plot")
        fp8 = draw_fp8(results, stem + "_fp8.png", rounds[1] if rounds else None)
        if fp8 is None:
            print(f"{path}: no e4m3 row of a stage over the sweep, in the rounds or the CSV: no fp8 plot")
        else:
            source, from_rounds = fp8
            print(f"wrote {stem}_fp8.png ({source}" + (f", {rounds[0]})" if from_rounds else ")"))
            written += 1

    if written == 0:
        print("nothing plotted: the CSVs hold no usable data", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
