#!/usr/bin/env bash
# The prose and the data agree: tools/results_md.py --check regenerates every generated block,
# figure and kernel header from the committed CSVs and compares; tests/lint_docs.py finds figures
# typed by hand, words from how the project is run rather than for its readers, and chapters that
# do not link what their stage follows; the README's count of the plot tests that skip without
# matplotlib is right.
# Then the generator and the lint on fixtures (tests/fixtures/*.csv, small trees under $TMP), so
# that each rule is seen to fail where it should, whatever the committed CSVs hold today.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
PYTHON=${PYTHON:-python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if "$PYTHON" tools/results_md.py --check >"$BUILD/docs_check.log" 2>&1; then
    ok "README, docs and kernel headers match the committed CSVs (tools/results_md.py --check)"
else
    bad "README, docs and kernel headers match the committed CSVs" "$(head -5 "$BUILD/docs_check.log" | tr '\n' ' ')"
fi
"$PYTHON" tests/lint_docs.py

# The README says how many plot tests make test skips without matplotlib: tests/test_plot.sh run
# with matplotlib hidden (a package of that name on PYTHONPATH that fails to import) skips as many,
# here and where matplotlib is installed.
mkdir -p "$TMP/no_matplotlib/matplotlib"
echo 'raise ImportError("hidden by tests/test_docs.sh")' >"$TMP/no_matplotlib/matplotlib/__init__.py"
said=$(grep -o 'skips its [0-9]* plot tests' README.md | grep -o '[0-9][0-9]*')
skipped=$(PYTHONPATH=$TMP/no_matplotlib${PYTHONPATH:+:$PYTHONPATH} bash tests/test_plot.sh 2>&1 |
          grep -c '^SKIP: .*: matplotlib cannot be imported')
if [ -n "$said" ] && [ "$said" = "$skipped" ]; then
    ok "the README's count of plot tests skipped without matplotlib ($said) is tests/test_plot.sh's"
else
    bad "the README's count of plot tests skipped without matplotlib is tests/test_plot.sh's" \
        "README says '${said:-no count}', tests/test_plot.sh skips $skipped"
fi

# --- tools/results_md.py on the fixture CSVs ------------------------------------------------------
# Each case is a Python snippet on stdin, run after FIXTURE_PY: PASS if it exits 0. The benchmark
# CSV is tests/fixtures/plot_sample.csv (it has stage 09 and a wgmma_peak row); the rounds are
# tests/fixtures/plot_rounds.csv; the tune CSV is tests/fixtures/tune_sample.csv, with stage 08 and
# 10 candidates and no stage 09 ones. Two of its stage 10 candidates end in +st16, a variant (O by
# 16-byte stores) that stage 10 no longer has: tune10_data() renames them as four-slot candidates,
# which stage 10's block lists.
FIXTURE_PY='
import sys
sys.path.insert(0, "tools")
import results_md  # puts plots/ on the path
from plot import Rounds, parse_csv
TMP = sys.argv[1]
TUNE = "tests/fixtures/tune_sample.csv"
ROUNDS = "tests/fixtures/plot_rounds.csv"

def fixture_data(csv_path="tests/fixtures/plot_sample.csv"):
    data = results_md.Data(csv_path)
    # Data looks for plots/tune/<the benchmark CSV name>.csv and plots/rounds/<name>_*.csv; the
    # fixtures live elsewhere.
    data.tune = (TUNE, parse_csv(TUNE))
    data.rounds, data.again = (ROUNDS, Rounds.from_csv(ROUNDS)), None
    return data

def render(text, data=None):
    return results_md.render_markdown(data or fixture_data(), "fixture.md", text)

def tune10_data():
    """The fixtures with the +st16 rows of the tune CSV renamed as four-slot ring candidates
    (128x128x2x1x3+st16 -> 128x128x2x1x4): every stage 10 candidate then reads as its shape."""
    data = fixture_data()
    path, rows = data.tune
    data.tune = (path, [dict(r, name=r["name"].replace("x3+st16", "x4")) for r in rows])
    return data

def fails(text, *words, data=None):
    """The generator refuses `text`, with a message that holds every one of `words`."""
    try:
        render(text, data)
    except results_md.GenError as e:
        missing = [w for w in words if w not in str(e)]
        assert not missing, f"the message lacks {missing}: {e}"
        return
    raise AssertionError(f"no error for {text!r}")
'
# The e4m3 fixture (tests/fp8_fixture.py): stage 15 takes e4m3, stage 14 is the last Hopper stage
# without it; its rounds are what harness/rounds.py's "all" set writes for those stages.
"$PYTHON" tests/fp8_fixture.py "$TMP/fp8"
FIXTURE_PY="$FIXTURE_PY"'
import csv, functools, glob, statistics
import plot
FP8 = TMP + "/fp8"

def fp8_data(fp8=True):
    """The e4m3 fixture as results_md reads it; fp8=False: as if no stage took e4m3."""
    results_md.Results = functools.partial(plot.Results, stage_root=FP8 + "/stages")
    data = results_md.Data(FP8 + "/fp8_sample.csv")
    if not fp8:
        data.results.fp8, data.results.last_bf16 = set(), None
    return data

def fp8_series(kernel, problem):
    """TFLOP/s by round of a kernel at a problem, read from the fixture rounds by hand."""
    return [float(r["tflops"]) for r in csv.DictReader(open(glob.glob(FP8 + "/rounds/*.csv")[0]))
            if r["kernel"] == kernel and (r["dtype"],) + tuple(int(r[c]) for c in ("batch", "heads_q", "heads_kv",
            "seqlen_q", "seqlen_k", "head_dim", "causal")) == tuple(problem)]

def pairs_median(ours, theirs):
    """The median over pairs of rounds of the geometric mean of the two ratios of a pair, computed here."""
    r = [a / b for a, b in zip(ours, theirs)]
    return statistics.median((r[i] * r[i + 1]) ** 0.5 for i in range(0, len(r) - 1, 2))
'
py_case() {  # py_case NAME < snippet
    local out
    if out=$({ echo "$FIXTURE_PY"; cat; } | "$PYTHON" - "$TMP" 2>&1); then
        ok "$1"
    else
        bad "$1" "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    fi
}

# A page marked <!-- ROUNDS:COMMIT --> (and its stage's kernel header) quotes the rounds of that
# commit, not the latest; a commit with no rounds file is refused by name.
py_case docs_rounds_pin <<'PY'
import os, shutil
data = fixture_data()
pinned_path = os.path.join(results_md.ROOT, "plots", "rounds", data.slug + "_pin0test.csv")
shutil.copy("tests/fixtures/plot_rounds.csv", pinned_path)
try:
    data.rounds = None  # the latest: none here, so only the pin can answer
    out = results_md.render_markdown(data, "fixture.md", "<!-- ROUNDS:pin0test -->\n<!-- fig rounds -->?<!-- /fig -->")
    assert "plot_sample_pin0test" not in out and "<!-- fig rounds -->" in out and "?" not in out, out
finally:
    os.remove(pinned_path)
fails("<!-- ROUNDS:nosuch0 -->\n<!-- fig rounds -->?<!-- /fig -->", "nosuch0", "no plots/rounds/")
PY

# A stage the rounds timed but the benchmark run has no row of takes its place in the ladder, with
# no check ("-"), instead of failing the page.
py_case docs_ladder_stage_without_bench_row <<'PY'
data = fixture_data()
extra = [dict(r, kernel="kernel10", name="kernel10_tma") for r in data.rounds[1].rows if r["kernel"] == "kernel09"]
rows = data.rounds[1].rows + extra
data.rounds = (ROUNDS, Rounds(rows))
data.results.add_timed_stages(rows)
assert "kernel10" in data.results.stages and data.results.row("kernel10", results_md.headline()) is None
table = results_md.ladder_table(data)
line = [l for l in table.split("\n") if l.startswith("| kernel10_tma ")]
assert line and line[0].rstrip().endswith("| - |"), table
PY

# Stage 10's block: only kernel10_ rows, its five shape fields, the last of a re-run row, the
# fastest *passing* candidate in bold (the faster 128x128x2x1x2 failed its check), and only stage
# 10's commit and command in the note. A candidate with a suffix (the fixture's +st16 rows as they
# are) is refused by name.
py_case docs_tune_block_stage10 <<'PY'
out = render("<!-- TUNE:10 -->\n<!-- /TUNE -->", data=tune10_data())
want = """<!-- TUNE:10 -->
| head_dim | candidate (M x N x warpgroups x blocks/SM x stages) | non-causal | causal |
|---|---|---:|---:|
| 128 | **128x128x2x1x3** | **500.0** | **470.0** |
| 128 | 128x128x2x1x4 | 490.0 | 460.0 |
| 128 | 128x128x2x1x2 | 530.0 (check fail) | 480.0 (check fail) |
| 64 | 128x64x2x2x3 | 420.0 | 400.0 |
| 64 | **128x64x2x2x4** | **430.0** | **395.0** |

(`make tune K=10` on the FIXTURE GPU, commit def5678; rows in `tests/fixtures/tune_sample.csv`."""
assert out.startswith(want), out
fails("<!-- TUNE:10 -->\n<!-- /TUNE -->", "128x128x2x1x3+st16", "M x N x warpgroups x blocks/SM x stages")
PY

# Stage 08's block from the same file: its own rows, header and command, nothing of stage 10's;
# two blocks on one page each get their own stage.
py_case docs_tune_block_stage08 <<'PY'
out = render("<!-- TUNE:08 -->\n<!-- /TUNE -->\ntext\n<!-- TUNE:10 -->\n<!-- /TUNE -->", data=tune10_data())
block08 = out.split("<!-- /TUNE -->")[0]
want = """<!-- TUNE:08 -->
| head_dim | candidate (M x N x warps x blocks/SM) | non-causal | causal |
|---|---|---:|---:|
| 128 | **128x32x4x2** | **357.1** | **326.5** |
| 128 | 64x64x4x2 | 300.2 | 300.6 |
| 64 | **128x64x4x2** | **323.8** | **308.3** |

(`make tune` on the FIXTURE GPU, commit abc1234;"""
assert block08.startswith(want), block08
assert "kernel10" not in block08 and "128x128" not in block08 and "def5678" not in block08, block08
block10 = out.split("text")[1]
assert "M x N x warpgroups x blocks/SM x stages" in block10 and "def5678" in block10 and "abc1234" not in block10, out
PY

# Stage 13's candidates are the six numbers of its TileShape, as stages 11 and 12's, with no
# suffix: the stage 10 rows renamed as stage 13 candidates (+st16 ones with 240 consumer registers,
# the others with 232) make its table, the fastest passing one in bold. A suffix on a stage 13
# candidate (+np, the one-block-per-tile grid it no longer has, or +st16) is an error that names the
# candidate and the shape's fields.
py_case docs_tune_block_stage13 <<'PY'
data = fixture_data()
path, rows = data.tune
def as13(r, suffix=""):
    cand = r["name"].split(" ", 1)[1]
    m, n, wg, _, stages = cand.replace("+st16", "").split("x")
    regs = 240 if cand.endswith("+st16") else 232
    return dict(r, kernel="kernel13", name=f"kernel13_overlap {m}x{n}x{wg}x{regs}x{stages}x1{suffix}")
k10 = [r for r in rows if r["kernel"] == "kernel10"]
data.tune = (path, rows + [as13(r) for r in k10])
out = render("<!-- TUNE:13 -->\n<!-- /TUNE -->", data=data)
want = """<!-- TUNE:13 -->
| head_dim | candidate (M x N x consumer warpgroups x consumer registers x stages x blocks/SM) | non-causal | causal |
|---|---|---:|---:|
| 128 | **128x128x2x232x3x1** | **500.0** | **470.0** |
| 128 | 128x128x2x240x3x1 | 490.0 | 460.0 |
| 128 | 128x128x2x232x2x1 | 530.0 (check fail) | 480.0 (check fail) |
| 64 | 128x64x2x232x3x1 | 420.0 | 400.0 |
| 64 | **128x64x2x240x3x1** | **430.0** | **395.0** |

(`make tune K=13` on the FIXTURE GPU, commit def5678;"""
assert out.startswith(want), out
for suffix in ("+np", "+st16"):
    data.tune = (path, rows + [as13(r, suffix=suffix) for r in k10])
    fails("<!-- TUNE:13 -->\n<!-- /TUNE -->", "128x128x2x232x3x1" + suffix, "blocks/SM", data=data)
PY

# No stage 09 candidates in the tune CSV, a stage tools/tune.sh does not tune, a marker without a
# stage, a candidate with the wrong number of fields: each is an error that says what to do.
py_case docs_tune_block_errors <<'PY'
fails("<!-- TUNE:09 -->\n<!-- /TUNE -->", "stage 09", "make tune K=09", "tools/gpu_session.sh tune")
fails("<!-- TUNE:05 -->\n<!-- /TUNE -->", "stage 05", "08, 09, 10")
fails("<!-- TUNE -->\n<!-- /TUNE -->", "fixture.md", "<!-- TUNE:NN -->")
data = fixture_data()
path, rows = data.tune
rows = [dict(r, name=r["name"].replace("128x32x4x2", "128x32x4")) for r in rows]
data.tune = (path, rows)
fails("<!-- TUNE:08 -->\n<!-- /TUNE -->", "128x32x4", "M x N x warps x blocks/SM", data=data)
data.tune = (path, [dict(r, name=r["name"] + "+st16") if r["kernel"] == "kernel08" else r for r in rows])
fails("<!-- TUNE:08 -->\n<!-- /TUNE -->", "+st16", data=data)
data.tune = (TMP + "/none.csv", None)
fails("<!-- TUNE:10 -->\n<!-- /TUNE -->", "none.csv", "stage 10", "make tune K=10", data=data)
PY

# The wgmma ceiling figures: 929.03 in the fixture; stage 09's median over the fixture's rounds at
# the headline problem 460.0 (50 % of it), causal 414.0 (45 %), and 71 % of the mma.sync ceiling.
# A kernel and problem the rounds did not time is an error, never the one run's figure. Without a
# wgmma_peak row: an error that names the row and the page, while the mma.sync figures still work.
grep -v ',wgmma_peak,' tests/fixtures/plot_sample.csv >"$TMP/no_wgmma.csv"
py_case docs_wgmma_figures <<'PY'
out = render("a <!-- fig wgmmapeak -->x<!-- /fig --> b <!-- fig wgmmapeakpct kernel09 -->x<!-- /fig --> "
             "c <!-- fig wgmmapeakpct kernel09 headline/causal -->x<!-- /fig --> "
             "d <!-- fig peakpct kernel09 -->x<!-- /fig -->")
assert out == ("a <!-- fig wgmmapeak -->929.0<!-- /fig --> b <!-- fig wgmmapeakpct kernel09 -->50 %<!-- /fig --> "
               "c <!-- fig wgmmapeakpct kernel09 headline/causal -->45 %<!-- /fig --> "
               "d <!-- fig peakpct kernel09 -->71 %<!-- /fig -->"), out
fails("<!-- fig wgmmapeakpct kernel09 sweep/64/8192/causal -->x<!-- /fig -->", "plot_rounds.csv", "kernel09", "make rounds")
no_wgmma = fixture_data(TMP + "/no_wgmma.csv")
for fig in ("wgmmapeak", "wgmmapeakpct kernel09"):
    fails(f"<!-- fig {fig} -->x<!-- /fig -->", "fixture.md", "wgmma_peak", "./run --peak", data=no_wgmma)
assert render("<!-- fig peak -->x<!-- /fig -->", no_wgmma) == "<!-- fig peak -->646.0<!-- /fig -->"
PY

# Ratios come from the rounds, as the median over pairs of rounds (one forward, one reversed) of the
# geometric mean of the pair's ratios, and the one run's TFLOP/s only through "onerun": in the
# fixture's rounds kernel09 / fa2 at the headline that differs from the ratio of the medians.
py_case docs_ratio_figures_from_rounds <<'PY'
import statistics
data = fixture_data()
r = data.rounds[1]
h = results_md.headline()
per_round = [a / b for a, b in zip(r._tflops("kernel09", h), r._tflops("fa2", h))]
pairs = [(per_round[i] * per_round[i + 1]) ** 0.5 for i in range(0, len(per_round) - 1, 2)]
want = f"{statistics.median(pairs):.2f}x"
assert want != f"{r.medians('kernel09', h) / r.medians('fa2', h):.2f}x", "the fixture does not separate the two"
assert render("<!-- fig ratio kernel09 fa2 -->x<!-- /fig -->") == f"<!-- fig ratio kernel09 fa2 -->{want}<!-- /fig -->"
assert render("<!-- fig onerun kernel09 -->x<!-- /fig -->") == \
    f"<!-- fig onerun kernel09 -->{data.tflops('kernel09', h):.1f}<!-- /fig -->"
fails("<!-- fig ratio kernel09 fa2 sweep/64/8192 -->x<!-- /fig -->", "kernel09", "make rounds")
PY

# REPRO: the same commit's two measurements, per kind of ratio the largest and the median
# difference; a second measurement 2 % off everywhere but one ratio 5 % off gives that 5 % and names
# the stage; without a second measurement, an error that says how to make one.
py_case docs_repro_block <<'PY'
import csv
from contract import CSV_COLUMNS
data = fixture_data()
again = TMP + "/again.csv"
with open(ROUNDS) as f, open(again, "w", newline="") as g:
    w = csv.writer(g)
    w.writerow(CSV_COLUMNS)
    for row in csv.DictReader(f):
        scale = 1.05 if (row["kernel"] == "kernel05" and row["causal"] == "1") else 1.02 if row["kernel"].startswith("kernel") else 1.0
        row["tflops"] = f"{float(row['tflops']) * scale:.2f}"
        w.writerow([row[c] for c in CSV_COLUMNS])
data.again = (again, Rounds.from_csv(again))
out = results_md.repro_block(data)
assert "| / FA2 | headline | 1 |" in out and "| 5.0 % | kernel05 |" in out, out
assert "the largest difference is 5.0 %" in out, out
data.again = None
fails("<!-- REPRO -->\n<!-- /REPRO -->", "ROUNDS_TAG=_again", data=data)
PY

# AB:NN,COMMIT: each variant over the base, per sweep point, the median of the per-round ratios; a variant
# that lacks a point, or a directory without base.csv, is refused with the file named.
# diff A B: make diff's counts, as git diff --numstat gives them (diffbody: outside the header
# comments); a stage that does not exist is refused by its number.
py_case docs_diff_figure <<'PY'
import glob, subprocess
paths = [glob.glob(f"kernel{n:02d}_*/kernel.cu")[0] for n in (4, 5)]
added, removed = subprocess.run(["git", "diff", "--no-index", "--numstat", *paths], capture_output=True,
                                text=True).stdout.split()[:2]
data = fixture_data()
assert results_md.figure(data, "diff 4 5") == f"{added} lines added and {removed} removed"
assert (results_md.figure(data, "diffadd 4 5"), results_md.figure(data, "diffdel 4 5")) == (added, removed)
# diffbody leaves the header comments out: stage 05's header is rewritten, its body barely changed.
import re
out_, in_ = (int(x) for x in re.fullmatch(r"(\d+) lines out, (\d+) in", results_md.figure(data, "diffbody 4 5")).groups())
assert 0 < in_ < int(added) and 0 < out_ < int(removed), (in_, out_, added, removed)
fails("<!-- fig diff 4 99 -->?<!-- /fig -->", "no one stage 99")
PY

py_case docs_ab_block <<'PY'
import csv, os
from contract import CSV_COLUMNS, sweep_problems
d = TMP + "/ab"
os.makedirs(d, exist_ok=True)
def write(name, tflops_per_round, skip=None):
    with open(f"{d}/{name}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for tf in tflops_per_round:
            for p in sweep_problems():
                if p == skip:
                    continue
                row = dict(gpu="FIXTURE GPU", kernel="kernel13", name="kernel13_overlap", iters=30, ms_median=1,
                           ms_min=1, tflops=tf, max_abs_err=0.001, rel_l2_err=0.001, check="pass",
                           commit="abc1234", date="2026-11-29T20:15:00Z")
                row.update(zip(("dtype", "batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal"), p))
                w.writerow([row[c] for c in CSV_COLUMNS])
write("base", [100, 200])
write("faster", [110, 260])  # per round 1.10 and 1.30: the median 1.20
out = results_md.ab_block(fixture_data(), "13", "abc1234", d)
assert "| faster | 64 | 0 | 1.20x | 1.20x |" in out, out
assert "2 rounds" in out and "abc1234" in out, out
write("short", [100, 100], skip=sweep_problems()[3])
try:
    results_md.ab_block(fixture_data(), "13", "abc1234", d)
    raise SystemExit("a variant without a sweep point was not refused")
except results_md.GenError as e:
    assert "short.csv" in str(e), e
os.remove(f"{d}/short.csv")
os.remove(f"{d}/base.csv")
try:
    results_md.ab_block(fixture_data(), "13", "abc1234", d)
    raise SystemExit("a directory without base.csv was not refused")
except results_md.GenError as e:
    assert "base.csv" in str(e), e
PY

# SHAPES:NN,COMMIT: stage NN on the shapes off the sweep, its median TFLOP/s and the median over the
# pairs of rounds of its ratio to every other kernel there; "-" where a kernel sat a shape out; a
# shape without the stage's rows is refused with the file named.
py_case docs_shapes_block <<'PY'
import csv
from contract import CSV_COLUMNS, shape_problems
path = TMP + "/shapes.csv"
def write(rows_of):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r, (ours, theirs) in enumerate(rows_of):
            for p in shape_problems():
                for kernel, tf in (("kernel14", ours), ("fa3", theirs), ("cudnn", theirs)):
                    if kernel == "cudnn" and p[4] != p[5] and p[7]:
                        continue  # SDPA sits out causal seqlen_q != seqlen_k
                    if kernel == "kernel14" and ours is None:
                        continue
                    row = dict(gpu="FIXTURE GPU", kernel=kernel, name=kernel, iters=30, ms_median=1, ms_min=1,
                               tflops=tf, max_abs_err="", rel_l2_err="", check="skipped", commit="abc1234",
                               date="2026-12-03T14:00:00Z")
                    row.update(zip(("dtype", "batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal"), p))
                    w.writerow([row[c] for c in CSV_COLUMNS])
write([(110, 100), (90, 100), (120, 100), (100, 100)])  # pairs: sqrt(1.1 * 0.9), sqrt(1.2 * 1.0), median 1.045
out = results_md.shapes_block(fixture_data(), "14", "abc1234", path)
assert "| B 8 H 32/8 S 4096 D 128 | 0 | 105.0 | 1.05x | 1.05x |" in out, out
assert "| B 16 H 16 S 1024/8192 D 128 | 1 | 105.0 | - | 1.05x |" in out, out
assert "4 rounds" in out and "abc1234" in out, out
write([(None, 100), (None, 100)])
try:
    results_md.shapes_block(fixture_data(), "14", "abc1234", path)
    raise SystemExit("shapes without the stage's rows were not refused")
except results_md.GenError as e:
    assert "shapes.csv" in str(e) and "kernel14" in str(e), e
PY

# harness/rounds.py --set shapes visits every shape once, with and without the mask, and the other
# sets not at all; the labels name Hq/Hkv and Sq/Sk where they differ.
py_case rounds_shapes_set <<'PY'
sys.path.insert(0, "harness")
import rounds
from contract import shape_problems
rounds.stage_archs = lambda root: {"kernel08": "sm_80", "kernel14": "sm_90a"}
stages = [(8, "kernel08", "kernel08_final"), (14, "kernel14", "kernel14_cluster")]
sets = rounds.problem_sets("shapes", stages)
assert [p for p, _ in sets] == shape_problems() and len(sets) == 10, sets
assert all(names[-3:] == ["fa2", "cudnn", "fa3"] and "kernel14" in names for _, names in sets), sets
assert not any(p in [q for q, _ in rounds.problem_sets("all", stages)] for p in shape_problems())
assert rounds.problem_label(("bf16", 8, 32, 8, 1024, 8192, 128, 1)) == "B=8 Hq=32 Hkv=8 Sq=1024 Sk=8192 D=128 causal=1"
PY

# harness/rounds.py's sets with a stage that takes e4m3 (kernel15). "all": each headline problem in
# bf16 (every stage and reference, as before) followed by the same shape in e4m3 (stage 15 and FA3
# alone: SDPA takes no e4m3, the other stages refuse it), so that stage 15 in e4m3 and stage 14 in
# bf16 are timed seconds apart; the bf16 sweep as before with stage 14 added (the bf16 bar of the e4m3
# figures), then the e4m3 sweep; each point once. Without an fp8 stage the sets are what they were;
# "fp8" is the e4m3 problems alone, "headline" and "sweep" their halves; "shapes" stays bf16.
py_case rounds_fp8_sets <<'PY'
sys.path.insert(0, "harness")
import rounds
from contract import FP8_DTYPE, HEADLINE, shape_problems, sweep_problems
rounds.stage_archs = lambda root: {"kernel08": "sm_80", "kernel13": "sm_90a", "kernel14": "sm_90a", "kernel15": "sm_90a"}
stages = [(n, f"kernel{n:02d}", f"kernel{n:02d}_x") for n in (8, 13, 14, 15)]
refs = ["fa2", "cudnn", "fa3"]
h = [HEADLINE[:-1] + (c,) for c in (0, 1)]
h8 = [(FP8_DTYPE,) + p[1:] for p in h]
everything = ["kernel08", "kernel13", "kernel14", "kernel15"] + refs
old = rounds.problem_sets("all", stages)
assert old == [(p, everything) for p in h] + [(p, ["kernel08", "kernel15"] + refs) for p in sweep_problems() if p not in h]
new = rounds.problem_sets("all", stages, (), {"kernel15"})
fp8 = ["kernel15", "fa3"]
assert new[:4] == [(h[0], everything), (h8[0], fp8), (h[1], everything), (h8[1], fp8)], new[:4]
bf16_sweep = [(p, ["kernel14", "kernel08", "kernel15"] + refs) for p in sweep_problems() if p not in h]
assert new[4:] == bf16_sweep + [(p, fp8) for p in sweep_problems(FP8_DTYPE) if p not in h8], new[4:6]
assert len(new) == 48 and sum(len(k) for _, k in new) == 2 * 7 + 2 * 2 + 22 * 6 + 22 * 2, len(new)
assert [(p, [k for k in ks if k != "kernel14" or p in h]) for p, ks in new if p[0] == "bf16"] == old
assert rounds.problem_sets("fp8", stages, (), {"kernel15"}) == [s for s in new if s[0][0] == FP8_DTYPE]
assert rounds.problem_sets("headline", stages, (), {"kernel15"}) == new[:4]
assert rounds.problem_sets("sweep", stages, (), {"kernel15"}) == \
    [(p, bf16_sweep[0][1]) for p in sweep_problems()] + [(p, fp8) for p in sweep_problems(FP8_DTYPE)]
also = rounds.problem_sets("sweep", stages, ["kernel13"], {"kernel15"})
assert also[0][1] == ["kernel13", "kernel14", "kernel08", "kernel15"] + refs, also[0]
assert rounds.problem_sets("shapes", stages, (), {"kernel15"}) == rounds.problem_sets("shapes", stages)
assert rounds.table_label(h8[1]) == "e4m3 B=16 H=16 S=4096 D=128 causal=1" and rounds.table_label(h[1])[0] == "B"
PY

# MEASURED:15, a stage that takes e4m3: today's block as for any stage, then its e4m3 headline row
# and FA3's (median TFLOP/s, / FA3 e4m3, / stage 14 bf16 at the same shape, each the median over pairs
# of rounds, computed here from the rows) and its e4m3 sweep against FA3. The fixture's rounds make the
# median over pairs differ from the ratio of the medians. MEASURED:14 is what it is without e4m3 rows.
py_case docs_measured_fp8 <<'PY'
from contract import FP8_DTYPE
data = fp8_data()
assert data.results.fp8 == {"kernel15"} and data.results.last_bf16 == "kernel14"
block = results_md.measured_block(data, "15")
today = results_md.measured_block(fp8_data(fp8=False), "15")
assert block.startswith(today + "\n\nStage 15 with q, k and v in e4m3"), block[len(today):len(today) + 80]
assert results_md.measured_block(data, "14") == results_md.measured_block(fp8_data(fp8=False), "14")
want = []
for kernel, name in (("kernel15", "kernel15_fp8"), ("fa3", "FlashAttention-3 (its own kernels, fa3_fwd)")):
    cells = []
    for c in (0, 1):
        p, p16 = results_md.headline(c, FP8_DTYPE), results_md.headline(c)
        ours = fp8_series(kernel, p)
        cells += [f"{statistics.median(ours):.1f}", f"{pairs_median(ours, fp8_series('fa3', p)):.2f}x",
                  f"{pairs_median(ours, fp8_series('kernel14', p16)):.2f}x"]
    want.append(f"| {name} | " + " | ".join(cells) + " |")
assert "\n| e4m3 | TFLOP/s | / FA3 e4m3 | / stage 14 bf16 | causal TFLOP/s | / FA3 e4m3 | / stage 14 bf16 |\n" in block
assert "\n" + "\n".join(want) + "\n" in block, (want, block)
assert "| kernel15_fp8 | 801.6 | 0.88x | 1.44x |" in want[0], want  # 0.86x and 1.42x as ratios of the medians
h8 = results_md.headline(0, FP8_DTYPE)
r = data.rounds[1]
assert f"{r.medians('kernel15', h8) / r.medians('fa3', h8):.2f}" == "0.86"
sweep = block.split("Stage 15 over the sweep in e4m3")[1]
p = results_md.sweep_problem(1024, 64, 1, FP8_DTYPE)
ours = fp8_series("kernel15", p)
assert f"| 64 | 1 | TFLOP/s | " in sweep and f" {statistics.median(ours):.1f} |" in sweep, sweep
assert f" {pairs_median(ours, fp8_series('fa3', p)):.2f}x |" in sweep.split("| 64 | 1 |")[1].splitlines()[1], sweep
assert "/ cuDNN" not in sweep and "/ FA2" not in sweep
PY

# The e4m3 figures: a trailing DTYPE puts both kernels in it, FIRST/SECOND each in its own at the same
# shape; every value as MEASURED:15's table has it, the ranges over the e4m3 sweep computed here. A
# kernel without e4m3 rows (FA2) is an error that names it, and so is a DTYPE pair where one dtype goes.
py_case docs_fp8_figures <<'PY'
from contract import FP8_DTYPE, SWEEP_SEQLENS
data = fp8_data()
def fig(what):
    return render(f"<!-- fig {what} -->x<!-- /fig -->", data).split("-->")[1].split("<!--")[0]
h8c, h16c = results_md.headline(1, FP8_DTYPE), results_md.headline(1)
assert fig("ratio kernel15 fa3 headline e4m3") == "0.88x"
assert fig("ratio kernel15 kernel14 headline/causal e4m3/bf16") == \
    f"{pairs_median(fp8_series('kernel15', h8c), fp8_series('kernel14', h16c)):.2f}x"
assert fig("pct kernel15 fa3 headline/causal e4m3") == \
    f"{100 * pairs_median(fp8_series('kernel15', h8c), fp8_series('fa3', h8c)):.0f} %"
assert fig("tflops kernel15 e4m3") == f"{statistics.median(fp8_series('kernel15', results_md.headline(0, FP8_DTYPE))):.1f}"
assert fig("tflops kernel15 headline/causal e4m3") == f"{statistics.median(fp8_series('kernel15', h8c)):.1f}"
assert fig("tflops kernel14") == f"{statistics.median(fp8_series('kernel14', results_md.headline())):.1f}"
assert fig("onerun kernel15 sweep/64/1024 e4m3") == f"{data.tflops('kernel15', results_md.sweep_problem(1024, 64, 0, FP8_DTYPE)):.1f}"
points = [results_md.sweep_problem(s, 128, c, FP8_DTYPE) for c in (0, 1) for s in SWEEP_SEQLENS if s >= 1024]
ratios = [pairs_median(fp8_series("kernel15", p), fp8_series("kernel14", ("bf16",) + p[1:])) for p in points]
assert fig("sweepratio kernel15 kernel14 128 all >=1k e4m3/bf16") == f"{min(ratios):.2f}x–{max(ratios):.2f}x"
ratios = [pairs_median(fp8_series("kernel15", p), fp8_series("fa3", p)) for p in points]
assert fig("sweepratio kernel15 fa3 128 all >=1k e4m3") == f"{min(ratios):.2f}x–{max(ratios):.2f}x"
fails("<!-- fig ratio kernel15 fa2 headline e4m3 -->x<!-- /fig -->", "fa2", "make rounds", data=data)
fails("<!-- fig tflops kernel15 e4m3/bf16 -->x<!-- /fig -->", "e4m3/bf16", "DTYPE", data=data)
fails("<!-- fig ratio kernel15 fa3 headline e4m3/bf16/bf16 -->x<!-- /fig -->", "e4m3/bf16/bf16", data=data)
PY

# The README's results: where the rounds timed a stage in e4m3, its e4m3 headline table and the fp8
# plot after what was there (which does not change); without e4m3 rows nothing of them. REPRO then
# compares the e4m3 ratios too: a second measurement with stage 15's e4m3 rows 4 % up moves those
# alone, by 4 %.
py_case docs_results_fp8 <<'PY'
import csv as csv_module
from contract import CSV_COLUMNS
data = fp8_data()
block, today = results_md.results_block(data), results_md.results_block(fp8_data(fp8=False))
table = results_md.fp8_headline_table(data, ["kernel15"])
assert table in block and "![e4m3 TFLOP/s against seqlen](plots/fp8_sample_fp8.png)" in block
assert "e4m3" not in today and "_fp8.png" not in today
assert block.replace("\n\n" + results_md.fp8_headline_intro(data, ["kernel15"]) + "\n\n" + table, "").startswith(
    today.split("\n\n![stage ladder]")[0] + "\n\n![stage ladder]")
assert "e4m3" not in results_md.results_block(fixture_data())
again = TMP + "/fp8_again.csv"
with open(data.rounds[0]) as f, open(again, "w", newline="") as g:
    w = csv_module.writer(g)
    w.writerow(CSV_COLUMNS)
    for row in csv_module.DictReader(f):
        if row["kernel"] == "kernel15" and row["dtype"] == "e4m3":
            row["tflops"] = f"{float(row['tflops']) * 1.04:.2f}"
        w.writerow([row[c] for c in CSV_COLUMNS])
data.again = (again, Rounds.from_csv(again))
out = results_md.repro_block(data)
assert "| / FA3 e4m3 | headline | 0 | 1 | 4.0 % | kernel15 |" in out, out
assert "| e4m3 / stage 14 bf16 | headline | 1 | 2 | 4.0 % | kernel15 |" in out, out  # stage 15 and FA3
assert "| / FA3 | headline | 0 | 4 | 0.0 % |" in out, out
PY

# LADDER, README's front page: a row per stage at the headline, non-causal, bf16 (its directory, the
# technique of its header, the median TFLOP/s, the ratios to the stage before and to FA3, each the
# median over pairs of rounds: computed here from the rows, and as data.ratio gives them), the Hopper
# track after its row; stage 15 again in e4m3 (against stage 14 in bf16 and FA3 in e4m3); the
# references' medians, FA3's in e4m3 last; a sentence naming the GPU, the rounds, their commit and file.
# Without a stage that takes e4m3 the same table less the e4m3 rows; on plot_sample.csv's rounds, whose
# stages take no e4m3, none. The marker is filled through render_markdown and is a generated region.
py_case docs_ladder_block <<'PY'
from contract import FP8_DTYPE
plain = results_md.ladder_block(fixture_data())  # before fp8_data() points results_md at its stage tree
data = fp8_data()
block = results_md.ladder_block(data)
table, sentence = block.split("\n\n")
rows = table.splitlines()
assert rows[:2] == ["| stage | technique | TFLOP/s | \u00d7 previous | \u00d7 FA3 |", "|---|---|---:|---:|---:|"], rows[:2]
h, h8 = results_md.headline(), results_md.headline(0, FP8_DTYPE)
fa3 = fp8_series("fa3", h)
def stage_row(kernel, dirname, previous):
    ours = fp8_series(kernel, h)
    assert len(ours) == 4
    prev = f"{pairs_median(ours, fp8_series(previous, h)):.2f}x" if previous else "-"
    if previous:
        assert prev == results_md.xr(data.ratio(kernel, previous, h))
    assert f"{pairs_median(ours, fa3):.2f}x" == results_md.xr(data.ratio(kernel, "fa3", h))
    return (f"| `{dirname}` | the fixture's stage {kernel[-2:]}, a header only | {statistics.median(ours):.1f} | {prev} | "
            f"{pairs_median(ours, fa3):.2f}x |")
want = [stage_row("kernel08", "kernel08_final", None), "| *Hopper track (sm_90a)* | | | | |",
        stage_row("kernel13", "kernel13_overlap", "kernel08"), stage_row("kernel14", "kernel14_cluster", "kernel13"),
        stage_row("kernel15", "kernel15_fp8", "kernel14")]
k15, fa3_8 = fp8_series("kernel15", h8), fp8_series("fa3", h8)
over14, over_fa3 = pairs_median(k15, fp8_series("kernel14", h)), pairs_median(k15, fa3_8)
assert (f"{over14:.2f}", f"{over_fa3:.2f}") == ("1.44", "0.88"), "the fixture changed"
assert f"{over14:.2f}x" == results_md.xr(data.ratio("kernel15", "kernel14", h8, problem_b=h))
want.append(f"| `kernel15_fp8`, e4m3 | the same stage with q, k and v in e4m3 | {statistics.median(k15):.1f} | "
             f"{over14:.2f}x stage 14 bf16 | {over_fa3:.2f}x FA3 e4m3 |")
for kernel, name in (("fa2", "FlashAttention-2 (PyTorch SDPA flash)"), ("cudnn", "cuDNN (PyTorch SDPA cudnn)"),
                     ("fa3", "FlashAttention-3 (its own kernels, fa3_fwd)")):
    want.append(f"| {name} | | {statistics.median(fp8_series(kernel, h)):.1f} | | |")
want.append(f"| FlashAttention-3 (its own kernels, fa3_fwd), e4m3 | | {statistics.median(fa3_8):.1f} | | |")
assert rows[2:] == want, "\n".join(x for pair in zip(rows[2:], want) for x in pair if pair[0] != pair[1])
assert sentence.startswith("Measured on the FIXTURE GPU at B16 H16 S4096 D128, non-causal, in 4 alternating rounds "
                           "(`make rounds`, commit fp8c0de; rows in `") and sentence.count(". ") == 0, sentence
assert f"`{data.rounds_path()}`" in sentence and data.rounds_path().endswith("rounds/fp8_sample_fp8c0de.csv")
without = results_md.ladder_block(fp8_data(fp8=False)).split("\n\n")[0].splitlines()
assert without == [r for r in rows if "e4m3" not in r] and len(without) == len(rows) - 2, without
assert "e4m3" not in plain and "| `kernel09_wgmma` | " in plain and "\n| *Hopper track (sm_90a)* | | | | |\n" in plain, plain
out = render("a\n<!-- LADDER -->\nold\n<!-- /LADDER -->\nb", data)
assert out == f"a\n<!-- LADDER -->\n{block}\n<!-- /LADDER -->\nb", out
assert results_md.GENERATED_REGION.sub("", out) == "a\n\nb"
PY

# The kernel header's Measured: line of a stage that takes e4m3 adds the same shape in e4m3; stage
# 14's is what it was.
py_case docs_header_fp8 <<'PY'
data = fp8_data()
line15 = " ".join(l[14:].strip() for l in results_md.measured_line(data, "kernel15_fp8").splitlines())
assert " In e4m3: 801.6 TFLOP/s, 0.88x FA3 e4m3, 1.44x stage 14 bf16; causal " in line15, line15
assert results_md.measured_line(data, "kernel14_cluster") == results_md.measured_line(fp8_data(fp8=False), "kernel14_cluster")
PY

# FP8ERR:COMMIT: harness/fp8_error.py's rows as a table, the last row of each kernel and problem:
# stage 15's and FA3's max abs and rel L2 errors in e4m3 and the ratio of each, stage 14's and FA3's
# rel L2 in bf16 beside them, and on how many problems stage 15's error is no larger by both measures.
# A missing file, another file's header and e4m3 rows of two stages are refused, the file named.
py_case docs_fp8_error_block <<'PY'
sys.path.insert(0, "harness")
import fp8_error
path = TMP + "/fp8_error.csv"
problems = fp8_error.PROBLEMS[:3]
rows = []
def add(kernel, dtype, problem, max_abs, rel):
    rows.append(dict(zip(fp8_error.COLUMNS, ("FIXTURE GPU", kernel, kernel, dtype, *problem[1:], "0.01", "0.011",
                                             "0.0095", max_abs, rel, "e4e4e4e", "2026-12-03T12:00:00Z"))))
for n, p in enumerate(problems):
    add("kernel15", "e4m3", p, 0.05 if n == 2 else 0.02, 0.030)
    add("fa3", "e4m3", p, 0.04, 0.031 if n != 1 else 0.029)
    add("kernel14", "bf16", ("bf16",) + p[1:], 0.004, 0.0031)
    add("fa3", "bf16", ("bf16",) + p[1:], 0.004, 0.0029)
add("kernel15", "e4m3", problems[0], 0.01, 0.025)  # a re-run: the last row wins
fp8_error.write_rows(path, rows)
assert [r["max_abs_err"] for r in fp8_error.read_rows(path)][:2] == [0.02, 0.04]
out = results_md.fp8_error_block(fixture_data(), "e4e4e4e", path)
assert "| shape | causal | max abs: stage 15 | FA3 | stage 15 / FA3 | rel L2: stage 15 | FA3 | stage 15 / FA3 | bf16 rel L2: stage 14 | FA3 |" in out, out
assert "| B 2 H 8 S 1024 D 128 | 0 | 0.01 | 0.04 | 0.25x | 0.025 | 0.031 | 0.81x | 0.0031 | 0.0029 |" in out, out
assert "| B 2 H 8 S 1024 D 128 | 1 | 0.02 | 0.04 | 0.50x | 0.03 | 0.029 | 1.03x | 0.0031 | 0.0029 |" in out, out
assert "| B 2 H 16 S 1024 D 64 | 0 | 0.05 | 0.04 | 1.25x |" in out, out
assert "no larger than FA3's, by both measures, on 1 of the 3 problems" in out, out
assert "commit e4e4e4e" in out and "fp8_error.csv" in out
fails("<!-- FP8ERR:e4e4e4e -->\n<!-- /FP8ERR -->", "plots/fp8_error/plot_sample_e4e4e4e.csv", "make fp8-error")
assert results_md.GENERATED_REGION.sub("", "<!-- FP8ERR:e4e4e4e -->\n| 0.5x |\n<!-- /FP8ERR -->\n") == "\n"
with open(TMP + "/not_fp8.csv", "w") as f:
    f.write("gpu,kernel\n")
try:
    results_md.fp8_error_block(fixture_data(), "x", TMP + "/not_fp8.csv")
    raise SystemExit("another file's header was not refused")
except results_md.GenError as e:
    assert "not_fp8.csv:1" in str(e), e
add("kernel16", "e4m3", problems[0], 0.01, 0.02)
fp8_error.write_rows(path, rows[-1:])
try:
    results_md.fp8_error_block(fixture_data(), "x", path)
    raise SystemExit("e4m3 rows of two stages were not refused")
except results_md.GenError as e:
    assert "kernel15, kernel16" in str(e), e
PY

# lint_docs skips what the generator writes: a figure in a TUNE:NN block is not "hand-typed".
py_case docs_generated_region_tune <<'PY'
text = "<!-- TUNE:10 -->\n| 128 | **500.0** |\n<!-- /TUNE -->\n"
assert results_md.GENERATED_REGION.sub("", text) == "\n", "a TUNE:NN block is not a generated region"
PY

# --- tests/lint_docs.py's links rule on small trees ------------------------------------------------
# Stage 08 (sm_80) follows the blog, stage 09 (sm_90a) the PTX ISA: in tree "swapped" each chapter
# links the other one's, and both must be named; in tree "right" the rule passes.
make_tree() {  # make_tree DIR LINK_OF_08 LINK_OF_09
    local dir=$1
    mkdir -p "$dir/docs" "$dir/kernel08_final" "$dir/kernel09_wgmma"
    printf '/*\n * Needs:     sm_80: fixture.\n */\n' >"$dir/kernel08_final/kernel.cu"
    printf '/*\n * Needs:     sm_90a: fixture.\n */\n' >"$dir/kernel09_wgmma/kernel.cu"
    printf '# fixture\n' >"$dir/README.md"
    printf '# 08\n\n[read](https://%s)\n' "$2" >"$dir/docs/08_final.md"
    printf '# 09\n\n[read](https://%s)\n' "$3" >"$dir/docs/09_wgmma.md"
    printf '## Assignment 08 · final\n\n[read](https://lubits.ch/flash/Part-6)\n' >"$dir/docs/assignments.md"
}
BLOG=lubits.ch/flash/Part-6 PTX=docs.nvidia.com/cuda/parallel-thread-execution/index.html
make_tree "$TMP/swapped" $PTX $BLOG
make_tree "$TMP/right" $BLOG $PTX
name=lint_links_hopper_track
"$PYTHON" tests/lint_docs.py --root "$TMP/swapped" >"$TMP/lint_swapped.log" 2>&1
rc_swapped=$?
"$PYTHON" tests/lint_docs.py --root "$TMP/right" >"$TMP/lint_right.log" 2>&1
rc_right=$?
if [ $rc_swapped -ne 1 ] || ! grep -q "^FAIL: every chapter.*docs/08_final.md does not link the blog series" "$TMP/lint_swapped.log" \
        || ! grep -q "^FAIL: every chapter.*docs/09_wgmma.md does not link the PTX ISA" "$TMP/lint_swapped.log"; then
    bad $name "swapped links: exit $rc_swapped, expected 1 and both chapters named: $(grep FAIL "$TMP/lint_swapped.log" | head -c 300)"
elif [ $rc_right -ne 0 ]; then
    bad $name "right links: exit $rc_right, expected 0: $(grep FAIL "$TMP/lint_right.log" | head -c 300)"
else
    ok $name
fi
finish
