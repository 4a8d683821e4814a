#!/usr/bin/env bash
# Tests of the Python side: plots/plot.py on the fixture CSVs, and harness/reference.py without
# PyTorch. No GPU needed. One line per test: PASS: name / FAIL: name: why / SKIP: name: why.
# Exit status 0 when no test failed.
set -u
cd "$(dirname "$0")/.." || exit 1

. tests/lib.sh
PYTHON=${PYTHON:-python3}
FIXTURES=tests/fixtures
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The PNG signature: 0x89 'P' 'N' 'G' \r \n 0x1a \n.
is_png() {
    [ -s "$1" ] && [ "$(od -An -tx1 -N8 "$1" | tr -d ' \n')" = "89504e470d0a1a0a" ]
}

# Which track a stage is on comes from the "Needs:" line of its kernel.cu. The fixture's stages get
# a tree of their own, so that the tests do not depend on the stage directories of this checkout:
# stage 09 builds for sm_90a (the Hopper track), the others for sm_80.
for dir in kernel01_naive kernel02_mma kernel04_cp_async kernel05_swizzle kernel08_final kernel09_wgmma; do
    mkdir -p "$TMP/stages/$dir"
    case $dir in kernel09_*) arch=sm_90a ;; *) arch=sm_80 ;; esac
    printf '/*\n * Stage %s - fixture: a header only.\n * Needs:     %s: fixture.\n */\n' "${dir:6:2}" $arch \
        >"$TMP/stages/$dir/kernel.cu"
done

# Runs plot.py on the fixture's stage tree; leaves the exit code in $rc and stdout+stderr in $TMP/out.
run_plot() {
    "$PYTHON" plots/plot.py --stages-from "$TMP/stages" "$@" >"$TMP/out" 2>&1
    rc=$?
}

have_matplotlib=1
"$PYTHON" -c "import matplotlib" 2>/dev/null || have_matplotlib=0

# --- Plots from the fixture ----------------------------------------------------------------------
name=plot_fixture_pngs
if [ $have_matplotlib = 0 ]; then
    for name in plot_fixture_pngs plot_last_row_wins plot_without_fa2 plot_no_data plot_hopper_track \
                plot_unknown_stage plot_fa3_drawn plot_without_fa3 plot_e4m3_ignored plot_rounds_ladder \
                plot_rounds_found plot_fp8_figure plot_ladder_e4m3 plot_fp8_png; do
        skip $name "matplotlib cannot be imported"
    done
else
    run_plot $FIXTURES/plot_sample.csv --out-dir "$TMP/png"
    if [ $rc -ne 0 ]; then
        bad $name "exit code $rc: $(tail -n 3 "$TMP/out" | tr '\n' ' ')"
    elif ! grep -q "headline ladder, one run (make bench)" "$TMP/out"; then
        bad $name "without rounds beside the CSV the ladder is not the one run: $(head -n 1 "$TMP/out")"
    elif ! is_png "$TMP/png/plot_sample_ladder.png"; then
        bad $name "plot_sample_ladder.png missing or not a PNG"
    elif ! is_png "$TMP/png/plot_sample_sweep.png"; then
        bad $name "plot_sample_sweep.png missing or not a PNG"
    else
        ok $name
    fi

    # The fixture holds a stale kernel05 headline row (201.30) before the current one (262.40).
    name=plot_last_row_wins
    if grep -q "kernel05_swizzle *262.4" "$TMP/out" && ! grep -q "201.3" "$TMP/out"; then
        ok $name
    else
        bad $name "the ladder summary does not show the last kernel05 row (262.4)"
    fi

    name=plot_without_fa2
    grep -v ',fa2,' $FIXTURES/plot_sample.csv >"$TMP/nofa2.csv"
    run_plot "$TMP/nofa2.csv"
    if [ $rc -eq 0 ] && grep -q "no FA2 row" "$TMP/out" && is_png "$TMP/nofa2_ladder.png"; then
        ok $name
    else
        bad $name "exit code $rc, expected 0 and a ladder that says there is no FA2 row"
    fi

    name=plot_no_data
    head -n 1 $FIXTURES/plot_sample.csv >"$TMP/empty.csv"
    run_plot "$TMP/empty.csv"
    if [ $rc -eq 1 ] && grep -q "no data" "$TMP/out"; then
        ok $name
    else
        bad $name "exit code $rc, expected 1 and a 'no data' message"
    fi

    # The fixture's stage 09 (Needs: sm_90a) and wgmma_peak row: the ladder draws the Hopper stage
    # last, after a labelled divider, with both ceilings, each saying what it bounds; the sweep
    # draws stage 09 and both ceilings. The figures are taken where plot.py would close them.
    name=plot_hopper_track
    if out=$("$PYTHON" - "$FIXTURES/plot_sample.csv" "$TMP/stages" "$TMP/hopper" <<'PY' 2>&1
import os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
sys.path.insert(0, "plots")
import plot
csv_path, stages, out = sys.argv[1:]
os.makedirs(out, exist_ok=True)
figures = []
plt.close = figures.append
results = plot.Results(plot.parse_csv(csv_path), stages)
assert results.stages[-1] == "kernel09" and results.hopper == {"kernel09"}, results.stages
assert plot.draw_ladder(results, os.path.join(out, "ladder.png"))
assert plot.draw_sweep(results, os.path.join(out, "sweep.png"))
ladder, sweep = figures
ax = ladder.axes[0]
ticks = [t.get_text() for t in ax.get_xticklabels()]
assert ticks[-1] == "kernel09\nwgmma", ticks
mma, wgmma = "ceiling of stages 01\u201308 (mma.sync): 646", "Hopper ceiling (wgmma): 929"
legend = [t.get_text() for t in ax.get_legend().get_texts()]
for want in (mma + ".0 TFLOP/s", wgmma + ".0 TFLOP/s"):
    assert want in legend, (want, legend)
divider = len(ticks) - 1.5  # between the last mma.sync bar and stage 09's
assert any(list(line.get_xdata()) == [divider, divider] for line in ax.get_lines()), "no divider line"
assert [t.get_text().strip() for t in ax.texts if t.get_position()[0] == divider] == ["Hopper track (sm_90a)"]
sweep_legend = [t.get_text() for t in sweep.legends[0].get_texts()]
for want in ("kernel09_wgmma", mma + " TFLOP/s", wgmma + " TFLOP/s"):
    assert want in sweep_legend, (want, sweep_legend)
PY
    ); then
        ok $name
    else
        bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    fi

    # A stage that has no directory in the stage tree cannot say which track it is on: a warning
    # names it, and the plots are drawn all the same.
    name=plot_unknown_stage
    cp -r "$TMP/stages" "$TMP/stages_no09" && rm -r "$TMP/stages_no09/kernel09_wgmma"
    "$PYTHON" plots/plot.py --stages-from "$TMP/stages_no09" $FIXTURES/plot_sample.csv --out-dir "$TMP/no09" \
        >"$TMP/out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "warning: .*kernel09: drawn with the mma.sync stages" "$TMP/out"; then
        ok $name
    else
        bad $name "exit code $rc, expected 0 and a warning naming kernel09: $(head -n 2 "$TMP/out" | tr '\n' ' ')"
    fi

    # The checks below look at the figures themselves: figs.draw() runs plot.py's drawing functions
    # and hands back the figures where plot.py would close them.
    cat >"$TMP/figs.py" <<'PY'
import os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
sys.path.insert(0, "plots")
import plot

def draw(csv_path, stages, out, rounds=None):
    """(ladder figure or None, sweep figure or None, Results)."""
    os.makedirs(out, exist_ok=True)
    figures = []
    close = plt.close
    plt.close = figures.append
    try:
        results = plot.Results(plot.parse_csv(csv_path), stages)
        ladder = plot.draw_ladder(results, os.path.join(out, "ladder.png"),
                                  plot.Rounds.from_csv(rounds) if rounds else None)
        ladder = figures[-1] if ladder else None
        sweep = figures[-1] if plot.draw_sweep(results, os.path.join(out, "sweep.png")) else None
    finally:
        plt.close = close
    return ladder, sweep, results

def texts(fig):
    """Every text of a figure: titles, labels, legend entries, annotations."""
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text)]

def lines_of(ax, color):
    return [l for l in ax.get_lines() if matplotlib.colors.to_hex(l.get_color()) == color]
PY
    export FIGS_DIR="$TMP"

    # FA3 with rows: a line in the ladder at its headline TFLOP/s, each bar's ratio to it, and a
    # line in every sweep panel through its points, each under the label "FlashAttention-3".
    name=plot_fa3_drawn
    if out=$("$PYTHON" - "$FIXTURES/plot_sample.csv" "$TMP/stages" "$TMP/fa3" <<'PY' 2>&1
import os, sys
sys.path.insert(0, os.environ["FIGS_DIR"])
from figs import draw, lines_of, plot, texts
csv_path, stages, out = sys.argv[1:]
ladder, sweep, results = draw(csv_path, stages, out)
color = plot.REFERENCE_STYLE["fa3"][1]
ax = ladder.axes[0]
legend = [t.get_text() for t in ax.get_legend().get_texts()]
assert "FlashAttention-3: 480.0 TFLOP/s" in legend, legend
assert [list(l.get_ydata()) for l in lines_of(ax, color)] == [[480.0, 480.0]], "no FA3 line at 480"
labels = [t.get_text() for t in ax.texts if "FA2" in t.get_text()]
assert "262.4\n75% of FA2\n0.55\u00d7 FA3" in labels, labels  # kernel05: 262.4 / 480
assert all(l.endswith("\u00d7 FA3") for l in labels), labels
assert "FlashAttention-3" in [t.get_text() for t in sweep.legends[0].get_texts()]
want = {(d, c): sorted((r["seqlen_q"], r["tflops"]) for r in plot.parse_csv(csv_path)
                       if r["kernel"] == "fa3" and r["dtype"] == "bf16" and r["head_dim"] == d
                       and r["causal"] == c and r["batch"] * r["seqlen_q"] == 65536)
        for d in (64, 128) for c in (0, 1)}
for ax, key in zip(sweep.axes, sorted(want)):
    got = [sorted(zip(l.get_xdata(), l.get_ydata())) for l in lines_of(ax, color)]
    assert got == [want[key]], (key, got, want[key])
PY
    ); then
        ok $name
    else
        bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    fi

    # Without FA3 rows (the CSVs before FA3): the plots as before, no FA3 anywhere.
    name=plot_without_fa3
    grep -v ',fa3,' $FIXTURES/plot_sample.csv >"$TMP/nofa3.csv"
    run_plot "$TMP/nofa3.csv" --out-dir "$TMP/nofa3"
    if [ $rc -ne 0 ] || ! is_png "$TMP/nofa3/nofa3_ladder.png" || ! is_png "$TMP/nofa3/nofa3_sweep.png"; then
        bad $name "exit code $rc, expected 0 and both PNGs: $(tail -n 2 "$TMP/out" | tr '\n' ' ')"
    elif grep -q "FA3" "$TMP/out"; then
        bad $name "the summary speaks of FA3 without FA3 rows"
    elif out=$("$PYTHON" - "$TMP/nofa3.csv" "$TMP/stages" "$TMP/nofa3py" <<'PY' 2>&1
import os, sys
sys.path.insert(0, os.environ["FIGS_DIR"])
from figs import draw, lines_of, plot, texts
ladder, sweep, _ = draw(*sys.argv[1:])
for fig in (ladder, sweep):
    assert not [t for t in texts(fig) if "FA3" in t or "FlashAttention-3" in t], texts(fig)
    assert not any(lines_of(ax, plot.REFERENCE_STYLE["fa3"][1]) for ax in fig.axes)
assert "262.4\n75% of FA2" in [t.get_text() for t in ladder.axes[0].texts]
PY
    ); then
        ok $name
    else
        bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    fi

    # The fixture's FA3 fp8 rows (dtype e4m3, 1100-1190 TFLOP/s at the headline and sweep shapes)
    # must not reach the bf16 figures: both figures are the same as without those rows (every
    # line, bar, label and axis), no line goes that high, and FA3's lines hold its bf16 points only.
    name=plot_e4m3_ignored
    if out=$("$PYTHON" - "$FIXTURES/plot_sample.csv" "$TMP/stages" "$TMP/e4m3" <<'PY' 2>&1
import os, sys
sys.path.insert(0, os.environ["FIGS_DIR"])
from figs import draw, lines_of, plot, texts
csv_path = sys.argv[1]
rows = plot.parse_csv(csv_path)
fp8 = [r["tflops"] for r in rows if r["dtype"] == "e4m3"]
assert len(fp8) == 14 and min(fp8) >= 1100, "the fixture lost its e4m3 rows"
ladder, sweep, _ = draw(csv_path, *sys.argv[2:])
bf16_only = os.path.join(sys.argv[3], "bf16.csv")
with open(csv_path) as f, open(bf16_only, "w") as g:
    g.writelines(line for line in f if ",e4m3," not in line)
ladder0, sweep0, _ = draw(bf16_only, sys.argv[2], sys.argv[3] + "0")
def content(fig):
    return [(ax.get_ylim(), [(list(l.get_xdata()), list(l.get_ydata())) for l in ax.get_lines()],
             [p.get_height() for p in ax.patches], [t.get_text() for t in ax.texts]) for ax in fig.axes]
assert content(ladder) == content(ladder0), "the e4m3 rows change the ladder"
assert content(sweep) == content(sweep0), "the e4m3 rows change the sweep"
for fig in (ladder, sweep):
    for ax in fig.axes:
        for line in ax.get_lines():
            assert max(line.get_ydata(), default=0) < 1000, ("a line through e4m3 values", line.get_label())
    for t in texts(fig):
        assert not any(v in t for v in ("1190", "1150", "fp8", "e4m3")), t
color = plot.REFERENCE_STYLE["fa3"][1]
assert [list(l.get_ydata()) for l in lines_of(ladder.axes[0], color)] == [[480.0, 480.0]]
bf16_points = sum(1 for r in rows if r["kernel"] == "fa3" and r["dtype"] == "bf16"
                  and r["batch"] * r["seqlen_q"] == 65536)
assert sum(len(l.get_xdata()) for ax in sweep.axes for l in lines_of(ax, color)) == bf16_points
PY
    ); then
        ok $name
    else
        bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    fi

    # --rounds: the bars are each stage's median over the rounds, the labels the medians of the
    # per-round ratios to FA2 and FA3 (computed here from the rows, independently of plot.Rounds),
    # the reference lines the references' medians, the ceilings the benchmark CSV's, the title
    # names the rounds. The fixture moves FA2's and FA3's rounds so that for kernel02, 04, 05, 08
    # and 09 the median of the ratios differs from the ratio of the medians even as rounded in the
    # labels. The sweep stays the benchmark CSV's one run (the rounds' sweep rows, 666-889
    # TFLOP/s, are not in it). Also plot.Rounds' interface, which tools/results_md.py uses.
    name=plot_rounds_ladder
    if out=$("$PYTHON" - "$FIXTURES/plot_sample.csv" "$TMP/stages" "$TMP/rounds" "$FIXTURES/plot_rounds.csv" <<'PY' 2>&1
import os, statistics, sys
sys.path.insert(0, os.environ["FIGS_DIR"])
from figs import draw, lines_of, plot, texts
csv_path, stages, out, rounds_path = sys.argv[1:]
ladder, sweep, results = draw(csv_path, stages, out, rounds_path)
series = {}
for r in plot.parse_csv(rounds_path):
    if plot.problem_key(r) == plot.HEADLINE:
        series.setdefault(r["kernel"], []).append(r["tflops"])
assert {len(v) for v in series.values()} == {3}
median = {k: statistics.median(v) for k, v in series.items()}
def of(k, ref):  # the median over pairs of rounds (1 and 2; round 3 unpaired) of the pair's geometric mean
    r = [a / b for a, b in zip(series[k], series[ref])]
    return statistics.median((r[i] * r[i + 1]) ** 0.5 for i in range(0, len(r) - 1, 2))
def label(k, fa2, fa3):
    return f"{median[k]:.1f}\n{100 * fa2:.0f}% of FA2\n{fa3:.2f}\u00d7 FA3"
stages_in_order = ["kernel01", "kernel02", "kernel04", "kernel05", "kernel08", "kernel09"]
ax = ladder.axes[0]
assert [p.get_height() for p in ax.patches] == [median[k] for k in stages_in_order]
want = [label(k, of(k, "fa2"), of(k, "fa3")) for k in stages_in_order]
want[2] = "FAIL\n" + want[2]  # kernel04 failed its check in the benchmark run
got = [t.get_text() for t in ax.texts if "FA2" in t.get_text()]
assert got == want, (got, want)
differ = [k for k in stages_in_order if label(k, of(k, "fa2"), of(k, "fa3"))
          != label(k, median[k] / median["fa2"], median[k] / median["fa3"])]
assert differ == ["kernel01", "kernel02", "kernel04", "kernel05", "kernel08", "kernel09"], ("fixture", differ)
for kernel, value in (("fa2", 350.0), ("cudnn", 600.0), ("fa3", 500.0), (plot.MMA_PEAK, 646.0),
                      (plot.WGMMA_PEAK, 929.03)):
    assert [list(l.get_ydata()) for l in lines_of(ax, plot.REFERENCE_STYLE[kernel][1])] == [[value, value]], kernel
assert "median of 3 alternating rounds" in ax.get_title(), ax.get_title()
assert "one run (make bench)" in sweep.texts[0].get_text(), sweep.texts[0].get_text()
rounds_sweep = {r["tflops"] for r in plot.parse_csv(rounds_path) if plot.problem_key(r) != plot.HEADLINE}
assert not rounds_sweep & {y for a in sweep.axes for l in a.get_lines() for y in l.get_ydata()}
# The number of rounds in the title is the fewest any drawn kernel has.
rows = plot.parse_csv(rounds_path)
last_cudnn = max(i for i, r in enumerate(rows) if r["kernel"] == "cudnn" and plot.problem_key(r) == plot.HEADLINE)
_, _, source, _ = plot.ladder_data(results, plot.Rounds(rows[:last_cudnn] + rows[last_cudnn + 1:]))
assert source.startswith("median of 2 alternating rounds"), source
# plot.Rounds, as tools/results_md.py calls it.
rounds = plot.Rounds(rows)
assert rounds.rows == rows and len(rounds.series[("kernel05", plot.HEADLINE)]) == 3
assert rounds.rounds("kernel05", plot.HEADLINE) == 3 and rounds.rounds("kernel03", plot.HEADLINE) == 0
assert rounds.medians("kernel05", plot.HEADLINE) == 260.0 and rounds.medians("kernel03", plot.HEADLINE) is None
# 300/350, 240/300, 260/400: rounds 1 and 2 make the one pair, round 3 is left out.
assert abs(rounds.ratio("kernel05", "fa2", plot.HEADLINE) - (300 / 350 * 240 / 300) ** 0.5) < 1e-12
assert abs(plot.Rounds(rows, paired=False).ratio("kernel05", "fa2", plot.HEADLINE) - 0.8) < 1e-12
assert abs(plot.round_ratio([300.0, 240.0, 260.0, 250.0], [350.0, 300.0, 400.0, 250.0])
           - statistics.median([(300 / 350 * 240 / 300) ** 0.5, (260 / 400) ** 0.5])) < 1e-12
assert plot.round_ratio([300.0], [350.0]) == 300 / 350 and plot.round_ratio([None, 1.0], [1.0, 2.0]) == 0.5
assert rounds.ratio("kernel05", "kernel03", plot.HEADLINE) is None
sweep_point = ("bf16", 128, 32, 32, 512, 512, 64, 0)
assert rounds.medians("kernel08", sweep_point) == 778.7 and rounds.rounds("fa3", sweep_point) == 0
PY
    ); then
        ok $name
    else
        bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    fi

    # make plot gives no --rounds: beside plots/<stem>.csv the ladder takes the newest
    # rounds/<stem>_*.csv by the dates inside (here def5678's, not the older file touched last),
    # never an _again.csv (the later second measurement); --rounds overrides, --no-rounds draws the
    # one run, a rounds file without headline rows leaves the one run, and --rounds is refused with
    # several CSVs. The sweep is the same PNG with rounds and without.
    name=plot_rounds_found
    mkdir -p "$TMP/auto/rounds"
    cp $FIXTURES/plot_sample.csv "$TMP/auto/plot_sample.csv"
    cp $FIXTURES/plot_rounds.csv "$TMP/auto/rounds/plot_sample_def5678.csv"
    "$PYTHON" - $FIXTURES/plot_rounds.csv "$TMP/auto/rounds" <<'PY'
import csv, sys
src, out = sys.argv[1:]
rows = list(csv.reader(open(src)))
def variant(path, factor, date):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(rows[0])
        for r in rows[1:]:
            r = list(r)
            if r[1] == "kernel05":
                r[14] = f"{float(r[14]) * factor:.2f}"
            r[19] = date
            w.writerow(r)
variant(f"{out}/plot_sample_0ld0000.csv", 0.5, "2026-11-01T00:00:00Z")        # older measurement
variant(f"{out}/plot_sample_def5678_again.csv", 2.0, "2026-12-02T00:00:00Z")  # the second one
with open(f"{out}/plot_sample_sweeponly.csv", "w", newline="") as f:      # no headline row
    w = csv.writer(f)
    w.writerow(rows[0])
    w.writerows(r for r in rows[1:] if r[7] == "512")
PY
    touch -d '2026-12-05' "$TMP/auto/rounds/plot_sample_0ld0000.csv"
    sweeponly="$TMP/auto/rounds/plot_sample_sweeponly.csv"
    touch -d '2026-11-01' "$sweeponly"  # its dates are the oldest too
    why=""
    run_plot "$TMP/auto/plot_sample.csv" --out-dir "$TMP/auto/png"
    if [ $rc -ne 0 ] || ! grep -q "median of 3 alternating rounds at def5678 (make rounds), .*rounds/plot_sample_def5678.csv" "$TMP/out" \
        || ! grep -q "kernel05_swizzle *260.0 TFLOP/s *82.8% of FA2 *0.586x FA3" "$TMP/out"; then
        why="found rounds: exit code $rc: $(head -n 1 "$TMP/out")"
    fi
    run_plot "$TMP/auto/plot_sample.csv" --out-dir "$TMP/auto/png" --rounds "$TMP/auto/rounds/plot_sample_0ld0000.csv"
    if [ $rc -ne 0 ] || ! grep -q "plot_sample_0ld0000.csv" "$TMP/out" || ! grep -q "kernel05_swizzle *130.0" "$TMP/out"; then
        why="$why; --rounds FILE: exit code $rc: $(head -n 1 "$TMP/out")"
    fi
    cp "$TMP/auto/png/plot_sample_sweep.png" "$TMP/auto/sweep_with_rounds.png"
    run_plot "$TMP/auto/plot_sample.csv" --out-dir "$TMP/auto/png" --no-rounds
    if [ $rc -ne 0 ] || ! grep -q "headline ladder, one run (make bench)" "$TMP/out" || ! grep -q "kernel05_swizzle *262.4" "$TMP/out"; then
        why="$why; --no-rounds: exit code $rc: $(head -n 1 "$TMP/out")"
    elif ! cmp -s "$TMP/auto/png/plot_sample_sweep.png" "$TMP/auto/sweep_with_rounds.png"; then
        why="$why; the sweep differs with the rounds found: it is the benchmark CSV's alone"
    fi
    run_plot "$TMP/auto/plot_sample.csv" --out-dir "$TMP/auto/png" --rounds "$sweeponly"
    if [ $rc -ne 0 ] || ! grep -q "holds no stage at the headline problem" "$TMP/out" || ! grep -q "kernel05_swizzle *262.4" "$TMP/out"; then
        why="$why; rounds without headline rows: exit code $rc: $(head -n 1 "$TMP/out")"
    fi
    run_plot "$TMP/auto/plot_sample.csv" $FIXTURES/plot_sample.csv --rounds $FIXTURES/plot_rounds.csv
    if [ $rc -ne 2 ]; then
        why="$why; --rounds with two CSVs: exit code $rc, expected 2"
    fi
    if [ -z "$why" ]; then ok $name; else bad $name "${why#; }"; fi

    # The fp8 figure on tests/fp8_fixture.py's rows (stage 15 takes e4m3, stage 14 is the last Hopper
    # stage without it). From the rounds: per panel, stage 15 and FA3 in e4m3 in their styles, stage
    # 14 and FA3 in bf16 faded beside them, each line through the medians over the rounds (computed
    # here from the rows), the title naming the rounds. From the one run (no rounds): the same lines
    # through the benchmark CSV's rows. Without a stage that takes e4m3 (plot_sample.csv's tree): none.
    "$PYTHON" tests/fp8_fixture.py "$TMP/fp8"
    name=plot_fp8_figure
    if out=$("$PYTHON" - "$TMP/fp8" "$TMP/fp8png" "$FIXTURES/plot_sample.csv" "$TMP/stages" <<'PY' 2>&1
import csv, glob, os, statistics, sys
sys.path.insert(0, os.environ["FIGS_DIR"])
from figs import lines_of, plot, plt
fixture, out, sample, sample_stages = sys.argv[1:]
os.makedirs(out, exist_ok=True)
rounds_path = glob.glob(fixture + "/rounds/*.csv")[0]
results = plot.Results(plot.parse_csv(fixture + "/fp8_sample.csv"), fixture + "/stages")
assert results.fp8 == {"kernel15"} and results.last_bf16 == "kernel14"
figures = []
plt.close = figures.append
def medians(kernel, dtype, d, c):
    by = {}
    for r in csv.DictReader(open(rounds_path)):
        if (r["kernel"], r["dtype"], r["head_dim"], r["causal"]) == (kernel, dtype, str(d), str(c)) \
                and int(r["batch"]) * int(r["seqlen_q"]) == 65536:
            by.setdefault(int(r["seqlen_q"]), []).append(float(r["tflops"]))
    return sorted((s, statistics.median(v)) for s, v in by.items())
assert plot.draw_fp8(results, out + "/rounds.png", plot.Rounds.from_csv(rounds_path)) == \
    ("median of 4 alternating rounds at fp8c0de (make rounds)", True)
fig = figures[-1]
styles = plot.stage_styles(["kernel14", "kernel15"])
fa3 = plot.REFERENCE_STYLE["fa3"][1]
panels = [(d, c) for d in (64, 128) for c in (0, 1)]
for ax, (d, c) in zip(fig.axes, panels):
    assert ax.get_title() == f"head_dim {d}, {'causal' if c else 'non-causal'}", ax.get_title()
    got = {(color, l.get_alpha()): sorted(zip(l.get_xdata(), l.get_ydata()))
           for color in (styles["kernel15"][0], styles["kernel14"][0], fa3) for l in lines_of(ax, color)}
    want = {(styles["kernel15"][0], None): medians("kernel15", "e4m3", d, c), (fa3, None): medians("fa3", "e4m3", d, c),
            (styles["kernel14"][0], 0.6): medians("kernel14", "bf16", d, c), (fa3, 0.6): medians("fa3", "bf16", d, c)}
    assert got == want, (d, c, got.keys())
    assert len(want[(fa3, None)]) == 6 and want[(fa3, None)] != want[(fa3, 0.6)]
legend = [t.get_text() for t in fig.legends[0].get_texts()]
assert legend == ["kernel15_fp8, e4m3", "FlashAttention-3, e4m3", "kernel14_cluster, bf16", "FlashAttention-3, bf16"], legend
assert "median of 4 alternating rounds at fp8c0de" in fig.texts[0].get_text(), fig.texts[0].get_text()
assert plot.draw_fp8(results, out + "/run.png") == ("one run (make bench, make reference)", False)
one_run = figures[-1]
bench = {(r["kernel"], r["dtype"], r["head_dim"], r["causal"], r["seqlen_q"]): r["tflops"]
         for r in plot.parse_csv(fixture + "/fp8_sample.csv") if r["head_dim"]}
ax = one_run.axes[3]  # head_dim 128, causal
got = {l.get_alpha(): sorted(zip(l.get_xdata(), l.get_ydata())) for l in lines_of(ax, fa3)}
assert got == {a: sorted((s, bench[("fa3", dtype, 128, 1, s)]) for s in plot.SWEEP_SEQLENS)
               for a, dtype in ((None, "e4m3"), (0.6, "bf16"))}, got
assert [t.get_text() for t in one_run.legends[0].get_texts()] == legend
assert plot.draw_fp8(plot.Results(plot.parse_csv(sample), sample_stages), out + "/none.png") is None
PY
    ); then
        ok $name
    else
        bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    fi

    # The ladder on tests/fp8_fixture.py's rows: stage 15 takes e4m3, so right after its bf16 bar comes
    # a second one, the same shape in e4m3: its median over the rounds (computed here from the rows),
    # hatched in a lighter shade of the stage's colour, "e4m3" under it (and "bf16" under its bf16
    # bar), labelled with its TFLOP/s and its ratio to FA3 in e4m3 (the median over pairs of rounds:
    # 0.88x, where the ratio of the medians is 0.86x); a line for FA3 in e4m3 at its median, in a style
    # of its own, named "FlashAttention-3, e4m3" in the legend, beside FA3's bf16 line; every label
    # inside the axes (the headroom above the taller bar); the title says so. From the one run: the
    # same from the benchmark CSV's rows. Without the e4m3 rows: the ladder of the bf16 bars alone,
    # no e4m3 anywhere, as before.
    name=plot_ladder_e4m3
    if out=$("$PYTHON" - "$TMP/fp8" "$TMP/fp8ladder" <<'PY' 2>&1
import glob, os, statistics, sys
import matplotlib.colors as mc
sys.path.insert(0, os.environ["FIGS_DIR"])
from figs import lines_of, plot, plt, texts
fixture, out = sys.argv[1:]
os.makedirs(out, exist_ok=True)
rounds_path = glob.glob(fixture + "/rounds/*.csv")[0]
bench_path = fixture + "/fp8_sample.csv"
stages = fixture + "/stages"
figures = []
plt.close = figures.append
H16, H8 = plot.HEADLINE, ("e4m3",) + plot.HEADLINE[1:]
def series(path, kernel, problem):
    return [r["tflops"] for r in plot.parse_csv(path) if r["kernel"] == kernel and plot.problem_key(r) == problem]
def pairs(ours, theirs):
    r = [a / b for a, b in zip(ours, theirs)]
    return statistics.median((r[i] * r[i + 1]) ** 0.5 for i in range(0, len(r) - 1, 2))
color = plot.stage_styles(["kernel15"])["kernel15"][0]
fa3_color = plot.REFERENCE_STYLE["fa3"][1]

def check(fig, summary, value, ratio, fa3_value, fa3_bf16):
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["kernel08\nfinal", "kernel13\noverlap", "kernel14\ncluster", "kernel15\nfp8\nbf16",
                     "kernel15\nfp8\ne4m3"], ticks
    bars = ax.patches
    assert len(bars) == 5 and bars[4].get_height() == value, [b.get_height() for b in bars]
    assert bars[4].get_hatch() == plot.FP8_BAR_HATCH and not bars[3].get_hatch()
    assert mc.to_hex(bars[3].get_facecolor()) == color, "the bf16 bar lost its stage colour"
    assert mc.to_hex(bars[4].get_facecolor()) == plot.lighter(color) != color, mc.to_hex(bars[4].get_facecolor())
    assert mc.to_hex(bars[4].get_edgecolor()) == color
    labels = [t.get_text() for t in ax.texts if t.get_text()[:1].isdigit()]
    assert labels[-1] == f"{value:.1f}\n{ratio:.2f}\u00d7 FA3 e4m3", labels
    assert all(l.endswith("\u00d7 FA3") for l in labels[:-1]), labels
    fa3 = {l.get_label().split(":")[0]: l for l in lines_of(ax, fa3_color)}
    assert sorted(fa3) == ["FlashAttention-3", "FlashAttention-3, e4m3"], list(fa3)
    assert list(fa3["FlashAttention-3, e4m3"].get_ydata()) == [fa3_value, fa3_value]
    assert list(fa3["FlashAttention-3"].get_ydata()) == [fa3_bf16, fa3_bf16]
    assert fa3["FlashAttention-3, e4m3"].get_linewidth() > fa3["FlashAttention-3"].get_linewidth()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"FlashAttention-3, e4m3: {fa3_value:.1f} TFLOP/s" in legend, legend
    assert legend.index(f"FlashAttention-3, e4m3: {fa3_value:.1f} TFLOP/s") == legend.index(
        f"FlashAttention-3: {fa3_bf16:.1f} TFLOP/s") + 1, legend
    assert "stage ladder, bf16; e4m3 bars where a stage takes it, B=16" in ax.get_title(), ax.get_title()
    # Every label, the e4m3 bar's above all, and the highest line inside the axes.
    fig.canvas.draw()
    top = ax.get_window_extent().y1
    for t in ax.texts:
        if t.get_text()[:1].isdigit():
            assert t.get_window_extent().y1 <= top, ("a label past the top", t.get_text())
    assert ax.get_ylim()[1] >= 1.22 * max(value, fa3_value), ax.get_ylim()
    assert summary[-1][0] == "kernel15_fp8" and summary[-1][1:] == (value, None, ratio, "pass", "e4m3"), summary[-1]
    assert [s[-1] for s in summary] == ["bf16"] * 4 + ["e4m3"]

results = plot.Results(plot.parse_csv(bench_path), stages)
rounds = plot.Rounds.from_csv(rounds_path)
summary, source = plot.draw_ladder(results, out + "/rounds.png", rounds)
assert source == "median of 4 alternating rounds at fp8c0de (make rounds)", source
k15, fa3 = series(rounds_path, "kernel15", H8), series(rounds_path, "fa3", H8)
assert len(k15) == len(fa3) == 4
ratio = pairs(k15, fa3)
assert f"{ratio:.2f}" == "0.88" != f"{statistics.median(k15) / statistics.median(fa3):.2f}", "the fixture changed"
check(figures[-1], summary, statistics.median(k15), ratio, statistics.median(fa3),
      statistics.median(series(rounds_path, "fa3", H16)))
# The one run: the benchmark CSV's rows, the ratio theirs.
summary, source = plot.draw_ladder(results, out + "/run.png")
assert source == "one run (make bench)"
(k15,), (fa3,) = series(bench_path, "kernel15", H8), series(bench_path, "fa3", H8)
check(figures[-1], summary, k15, k15 / fa3, fa3, series(bench_path, "fa3", H16)[-1])

# An e4m3 bar above every line (stage 15's e4m3 rows 1.3 times as fast): the headroom is its own, its
# label still inside the axes.
import csv
with open(rounds_path) as f, open(out + "/fast.csv", "w", newline="") as g:
    w = csv.writer(g, lineterminator="\n")
    for row in csv.reader(f):
        if row[1] == "kernel15" and row[3] == "e4m3":
            row[14] = f"{float(row[14]) * 1.3:.2f}"
        w.writerow(row)
fast, fa3 = series(out + "/fast.csv", "kernel15", H8), series(rounds_path, "fa3", H8)
summary, _ = plot.draw_ladder(results, out + "/fast.png", plot.Rounds.from_csv(out + "/fast.csv"))
assert statistics.median(fast) > 1.1 * max(statistics.median(fa3), results.ceiling(plot.WGMMA_PEAK))
check(figures[-1], summary, statistics.median(fast), pairs(fast, fa3), statistics.median(fa3),
      statistics.median(series(rounds_path, "fa3", H16)))

# Without e4m3 rows, in the rounds and the benchmark CSV: the bf16 ladder alone, as before.
for path, name in ((rounds_path, "rounds16.csv"), (bench_path, "bench16.csv")):
    with open(path) as f, open(os.path.join(out, name), "w") as g:
        g.writelines(line for line in f if ",e4m3," not in line)
bf16 = plot.Results(plot.parse_csv(out + "/bench16.csv"), stages)
for rounds16 in (plot.Rounds.from_csv(out + "/rounds16.csv"), None):
    summary, _ = plot.draw_ladder(bf16, out + "/bf16.png", rounds16)
    ax = figures[-1].axes[0]
    assert len(ax.patches) == 4 and not any(p.get_hatch() for p in ax.patches)
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "kernel15\nfp8"
    assert not [t for t in texts(figures[-1]) if "e4m3" in t], [t for t in texts(figures[-1]) if "e4m3" in t]
    assert len(lines_of(ax, fa3_color)) == 1 and "stage ladder, bf16, B=16" in ax.get_title()
    assert [s[-1] for s in summary] == ["bf16"] * 4
# An e4m3 row of FA3 but none of the stage: no e4m3 bar, and no FA3 e4m3 line alone.
with open(rounds_path) as f, open(out + "/fa3only.csv", "w") as g:
    g.writelines(line for line in f if not (",e4m3," in line and ",kernel15," in line))
plot.draw_ladder(bf16, out + "/fa3only.png", plot.Rounds.from_csv(out + "/fa3only.csv"))
assert not [t for t in texts(figures[-1]) if "e4m3" in t] and len(figures[-1].axes[0].patches) == 4
PY
    ); then
        "$PYTHON" plots/plot.py --stages-from "$TMP/fp8/stages" "$TMP/fp8/fp8_sample.csv" --out-dir "$TMP/fp8png3" >"$TMP/out" 2>&1
        rc=$?
        if [ $rc -ne 0 ] || ! grep -q "^  kernel15_fp8, e4m3  *801.6 TFLOP/s  (FA2: no e4m3)  0.877x FA3 e4m3  check pass" "$TMP/out"; then
            bad $name "plot.py's summary: exit code $rc: $(grep e4m3 "$TMP/out" | head -n 1)"
        else
            ok $name
        fi
    else
        bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    fi

    # make plot's plot.py writes <stem>_fp8.png beside the others, from the rounds it finds beside the
    # CSV, and says so; for plot_sample.csv, with no stage that takes e4m3, it says there is none.
    name=plot_fp8_png
    "$PYTHON" plots/plot.py --stages-from "$TMP/fp8/stages" "$TMP/fp8/fp8_sample.csv" --out-dir "$TMP/fp8png2" >"$TMP/out" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || ! is_png "$TMP/fp8png2/fp8_sample_fp8.png" \
        || ! grep -q "wrote .*fp8_sample_fp8.png (median of 4 alternating rounds at fp8c0de (make rounds), .*rounds/fp8_sample_fp8c0de.csv)" "$TMP/out"; then
        bad $name "exit code $rc: $(grep fp8 "$TMP/out" | head -n 2 | tr '\n' ' ')"
    else
        run_plot $FIXTURES/plot_sample.csv --out-dir "$TMP/png_nofp8"
        if [ $rc -ne 0 ] || ! grep -q "no e4m3 row of a stage over the sweep, in the rounds or the CSV: no fp8 plot" "$TMP/out" \
            || [ -e "$TMP/png_nofp8/plot_sample_fp8.png" ]; then
            bad $name "plot_sample.csv: exit code $rc, expected 0 and no fp8 plot: $(grep fp8 "$TMP/out" | head -n 1)"
        else
            ok $name
        fi
    fi
fi

# --- the README's results table (tools/results_md.py, from the rounds) takes the new stage and the
# wgmma ceiling
name=results_table_hopper_track
if out=$("$PYTHON" - "$FIXTURES/plot_sample.csv" "$TMP/stages" "$FIXTURES/plot_rounds.csv" <<'PY' 2>&1
import functools, sys
sys.path.insert(0, "tools")
import results_md  # puts plots/ on the path
import plot
csv_path, stages, rounds = sys.argv[1:]
results_md.Results = functools.partial(plot.Results, stage_root=stages)  # the fixture's stage tree
results_md.find_rounds = lambda _: (rounds, plot.Rounds.from_csv(rounds))  # the fixture's rounds, not plots/rounds/
rows = results_md.ladder_table(results_md.Data(csv_path)).splitlines()
first = [r.split(" |")[0] for r in rows]
at = first.index("| *Hopper track (sm_90a)*")
assert first[at - 1] == "| kernel08_final" and first[at + 1] == "| kernel09_wgmma", first
assert "| wgmma.m64n128k16 bf16 f32-acc ceiling (`./run --peak`)" in first, first
PY
); then
    ok $name
else
    bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
fi

# --- Malformed CSVs: exit 2, and the message names the file and the line ---------------------------
# (validation runs before matplotlib is imported, so these need no matplotlib)
check_malformed() {  # name csv expected-location
    run_plot "$2" --out-dir "$TMP/bad"
    if [ $rc -ne 2 ]; then
        bad "$1" "exit code $rc, expected 2"
    elif ! grep -qF "$3" "$TMP/out"; then
        bad "$1" "message does not name '$3': $(head -n 1 "$TMP/out")"
    else
        ok "$1"
    fi
}

check_malformed plot_bad_field_count $FIXTURES/plot_bad.csv "plot_bad.csv:4:"

sed '4s/,104.70,/,fast,/' $FIXTURES/plot_sample.csv >"$TMP/bad_number.csv"
check_malformed plot_bad_number "$TMP/bad_number.csv" "bad_number.csv:4:"

sed '1s/tflops/tflop_s/' $FIXTURES/plot_sample.csv >"$TMP/bad_header.csv"
check_malformed plot_bad_header "$TMP/bad_header.csv" "bad_header.csv:1:"

check_malformed plot_missing_file "$TMP/does_not_exist.csv" "does_not_exist.csv"

# --- reference.py without PyTorch ---------------------------------------------------------------
name=reference_without_torch
if "$PYTHON" -c "import torch" 2>/dev/null; then
    skip $name "PyTorch is importable here"
else
    "$PYTHON" harness/reference.py --csv "$TMP/ref.csv" >"$TMP/out" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
        bad $name "exit code $rc, expected 0"
    elif ! grep -q "PyTorch not available: reference timings skipped" "$TMP/out"; then
        bad $name "no 'PyTorch not available' message: $(head -n 1 "$TMP/out")"
    elif [ -e "$TMP/ref.csv" ]; then
        bad $name "it wrote a CSV although nothing was timed"
    else
        ok $name
    fi
fi

# --- which stages take e4m3: plots/plot.py reads it as the Makefile does ------------------------------
# The Makefile's rule (STAGE_FP8, into the dispatcher's stage table: make -n prints the table without
# writing it) and plot.stage_fp8 agree on every stage of this checkout; on a small tree, a stage that
# names another stage's fp8 entry point does not take e4m3 for it, and the last Hopper stage without
# fp8 is the bf16 bar (none when no stage takes e4m3).
name=stage_fp8_rule
mk=$(make -s -n BUILD="$TMP/mkbuild" "$TMP/mkbuild/gen/stages.h" 2>&1 \
     | grep -o 'FLASH_STAGE([0-9]*, "[^"]*", "[^"]*", [01])' | sed -E 's/FLASH_STAGE\(([0-9]+), .*, ([01])\)/\1:\2/')
py=$("$PYTHON" -c 'import sys; sys.path.insert(0, "plots"); from plot import stage_archs, stage_fp8
fp8 = stage_fp8()
print("\n".join(f"{k[6:]}:{int(k in fp8)}" for k in stage_archs()))' 2>&1)
for dir in kernel13_overlap kernel14_cluster kernel15_fp8; do
    mkdir -p "$TMP/fp8tree/$dir"
    printf '/*\n * Needs:     sm_90a: fixture.\n */\n' >"$TMP/fp8tree/$dir/kernel.cu"
done
printf '/* stage 15 adds flash_forward_fp8_kernel15 */\n' >>"$TMP/fp8tree/kernel14_cluster/kernel.cu"
printf 'int flash_forward_fp8_kernel15(void);\n' >>"$TMP/fp8tree/kernel15_fp8/kernel.cu"
tree=$("$PYTHON" - "$TMP/fp8tree" <<'PY' 2>&1
import sys
sys.path.insert(0, "plots")
from plot import last_bf16_stage, stage_archs, stage_fp8
archs, fp8 = stage_archs(sys.argv[1]), stage_fp8(sys.argv[1])
assert fp8 == {"kernel15"}, fp8
assert last_bf16_stage(archs, fp8) == "kernel14" and last_bf16_stage(archs, set()) is None
PY
)
if [ -z "$mk" ] || [ "$mk" != "$py" ]; then
    bad $name "make: $(echo $mk) / plot.py: $(echo $py)"
elif [ -n "$tree" ]; then
    bad $name "$(echo "$tree" | tail -n 2 | tr '\n' ' ')"
else
    ok "$name: the Makefile and plots/plot.py agree on the $(echo "$mk" | grep -c ':1$') of $(echo "$mk" | wc -l) stages that take e4m3"
fi

# --- harness/rounds.py and reference.py in e4m3, on stand-ins for PyTorch, the library and FA3 -------
# StageCall: e4m3 inputs go to flash_forward_fp8 as FLASH_E4M3 with the inputs' descales (1 for the
# timed ones), O in bf16; bf16 ones to flash_forward as before. agreement_reference: in bf16 FA2's output
# (FA3's where FA2 sits the problem out), in e4m3 FA3's, or FA2's on the values widened to bf16 where
# FA3 is missing, each with its tolerance. SDPA's backends sit e4m3 out (None); FA3 gets its descale
# tensors of [batch, heads_kv], each filled with its tensor's factor.
name=rounds_reference_e4m3
if out=$("$PYTHON" - <<'PY' 2>&1
import contextlib, sys, types
sys.path.insert(0, "harness")
import libflash, reference as ref, rounds

class Tensor:
    def __init__(self, shape, dtype, fill=None):
        self.shape, self.dtype, self.fill = tuple(shape), dtype, fill
    def data_ptr(self):
        return 0x1000
    def transpose(self, *_):
        return self
    def repeat_interleave(self, *_, **__):
        return self
class FakeTorch:
    bfloat16, float32, float8_e4m3fn = "bf16", "f32", "e4m3"
    cuda = types.SimpleNamespace(current_stream=lambda: types.SimpleNamespace(cuda_stream=0))
    @staticmethod
    def empty_like(t, dtype=None):
        return Tensor(t.shape, dtype or t.dtype)
    @staticmethod
    def empty(shape, dtype, device):
        return Tensor(shape, dtype)
    @staticmethod
    def full(shape, fill, dtype, device):
        return Tensor(shape, dtype, fill)
    inference_mode = staticmethod(contextlib.nullcontext)

def inputs(dtype, descale=(1.0, 1.0, 1.0)):
    x = ref.Inputs.__new__(ref.Inputs)
    x.torch, x.dtype, x.batch, x.heads, x.heads_kv, x.seqlen, x.seqlen_k, x.head_dim, x.causal = \
        FakeTorch, dtype, 2, 8, 2, 300, 1000, 128, 1
    x.q = Tensor((2, 300, 8, 128), dtype)
    x.k = x.v = Tensor((2, 1000, 2, 128), dtype)
    x.descale = descale
    return x

calls = []
class Lib:
    def flash_forward(self, n, p, stream):
        calls.append(("flash_forward", n, p._obj.dtype, None))
        return libflash.FLASH_OK
    def flash_forward_fp8(self, n, p, d, stream):
        calls.append(("flash_forward_fp8", n, p._obj.dtype, (d._obj.q, d._obj.k, d._obj.v)))
        return libflash.FLASH_OK
stage = rounds.StageCall(FakeTorch, Lib(), 15)
o = stage.make_call(inputs("e4m3", (0.5, 0.25, 2.0)))()
assert o.dtype == "bf16" and o.shape == (2, 300, 8, 128), (o.dtype, o.shape)
assert calls[-1] == ("flash_forward_fp8", 15, libflash.FLASH_E4M3, (0.5, 0.25, 2.0)), calls
assert stage.make_call(inputs("bf16"))().dtype == "bf16"
assert calls[-1] == ("flash_forward", 15, libflash.FLASH_BF16, None), calls

# Reference kernels whose make_call says who can run what (None: not this problem), as Kernels' do.
def maker(kernel, takes):
    return (kernel, lambda x: (lambda: (kernel, x.dtype)) if x.dtype in takes else None)
kernels = types.SimpleNamespace(available={"fa2": maker("fa2", {"bf16"}), "fa3": maker("fa3", {"bf16", "e4m3"})})
x8 = inputs("e4m3")
x8.as_bf16 = lambda: inputs("bf16")
assert rounds.agreement_reference(kernels, inputs("bf16")) == ("fa2", ("fa2", "bf16"), ref.AGREEMENT_TOL)
assert rounds.agreement_reference(kernels, x8) == ("fa3", ("fa3", "e4m3"), ref.AGREEMENT_TOL_FP8)
del kernels.available["fa3"]
assert rounds.agreement_reference(kernels, x8) == ("fa2", ("fa2", "bf16"), ref.AGREEMENT_TOL_FP8)
kernels.available = {}
assert rounds.agreement_reference(kernels, x8) == (None, None, None)

k = ref.Kernels.__new__(ref.Kernels)
k.torch = FakeTorch
sdpa = k._sdpa(lambda q, kk, v, is_causal: Tensor(q.shape, q.dtype), lambda backend: None, "FLASH")
def square(dtype):  # a problem SDPA's mask can run (seqlen_q == seqlen_k)
    x = inputs(dtype)
    x.seqlen_k = x.seqlen
    return x
assert sdpa(square("e4m3")) is None and sdpa(square("bf16")) is not None and sdpa(inputs("bf16")) is None
seen = {}
fa3 = k._fa3(lambda q, kk, v, causal, **extra: seen.update(extra) or Tensor(q.shape, "bf16"))
fa3(inputs("e4m3", (0.5, 0.25, 2.0)))()
assert {n: (t.shape, t.dtype, t.fill) for n, t in seen.items()} == \
    {"q_descale": ((2, 2), "f32", 0.5), "k_descale": ((2, 2), "f32", 0.25), "v_descale": ((2, 2), "f32", 2.0)}, seen
seen.clear()
fa3(inputs("bf16"))()
assert seen == {}, seen
PY
); then
    ok $name
else
    bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
fi

# --- harness/fp8_error.py without a GPU -------------------------------------------------------------
# Its problems cover what its docstring says (head_dim 64 and 128, causal and not, a tail,
# grouped-query attention, seqlen_q != seqlen_k both ways); its rows go through write_rows and back
# through read_rows typed, the last row of a kernel and problem winning in comparison; a file of other
# columns is refused; without PyTorch the script exits 2 and says why.
name=fp8_error_offline
if out=$("$PYTHON" - "$TMP" <<'PY' 2>&1
import sys
sys.path.insert(0, "harness")
import fp8_error
from contract import FP8_DTYPE
P = fp8_error.PROBLEMS
assert all(p[0] == FP8_DTYPE and p[2] % p[3] == 0 for p in P), P
assert {p[6] for p in P} == {64, 128} and {p[7] for p in P} == {0, 1}
assert any(p[4] % 128 for p in P) and any(p[2] != p[3] for p in P)
assert any(p[4] < p[5] for p in P) and any(p[4] > p[5] for p in P)
assert max(p[1] * p[2] * p[4] * p[5] for p in P) * 8 <= 4 << 30, "a float64 score matrix past 4 GiB"
path = sys.argv[1] + "/fp8_error_rows.csv"
def row(kernel, max_abs, problem=P[0]):
    return dict(zip(fp8_error.COLUMNS, ("GPU", kernel, kernel, problem[0], *problem[1:], "0.01", "0.01", "0.01",
                                        max_abs, "0.03", "abc", "2026-12-03T12:00:00Z")))
fp8_error.write_rows(path, [row("kernel15", "0.02"), row("fa3", "0.03")])
fp8_error.write_rows(path, [row("kernel15", "0.04")])
rows = fp8_error.read_rows(path)
assert len(rows) == 3 and rows[0]["batch"] == P[0][1] and rows[0]["max_abs_err"] == 0.02, rows[0]
(problem, by_kernel), = fp8_error.comparison(rows)
assert problem == P[0] and by_kernel["kernel15"]["max_abs_err"] == 0.04, by_kernel
assert not fp8_error.no_larger(by_kernel["kernel15"], by_kernel["fa3"])
assert fp8_error.no_larger(rows[0], rows[1]) and fp8_error.comparison(rows, "bf16") == []
open(path, "a").write("GPU,only,three\n")
try:
    fp8_error.read_rows(path)
    raise SystemExit("a short row was read")
except ValueError as e:
    assert "fp8_error_rows.csv:5" in str(e), e
PY
); then
    if "$PYTHON" -c "import torch" 2>/dev/null; then
        skip $name "PyTorch is importable here: the run without it is not tried"
    else
        "$PYTHON" harness/fp8_error.py --lib "$FIXTURES/plot_sample.csv" --csv "$TMP/fp8err.csv" >"$TMP/out" 2>&1
        rc=$?
        if [ $rc -eq 2 ] && grep -q "PyTorch is not available" "$TMP/out" && [ ! -e "$TMP/fp8err.csv" ]; then
            ok $name
        else
            bad $name "without PyTorch: exit code $rc, expected 2 and a message: $(head -n 1 "$TMP/out")"
        fi
    fi
else
    bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
fi

# --- styles: stable per stage, distinct, and each ceiling says what it bounds ---------------------
name=plot_styles
if [ $have_matplotlib = 0 ]; then
    skip $name "matplotlib cannot be imported"
elif out=$("$PYTHON" - <<'PY' 2>&1
import sys
sys.path.insert(0, "plots")
from plot import MMA_PEAK, WGMMA_PEAK, reference_label, stage_styles
stages = [f"kernel{i:02d}" for i in range(1, 16)]  # 13 stages, and room for 14 and 15
styles = stage_styles(stages)
assert stage_styles(["kernel05"])["kernel05"] == styles["kernel05"], "a stage's style depends on the others"
assert len({c for c, _ in styles.values()}) == 15, "15 stages do not get 15 colours"
assert len({m for _, m in styles.values()}) == 15, "15 stages do not get 15 markers"
assert all(m not in ("x", "X") for _, m in styles.values()), "x marks a failed check"
label = reference_label(MMA_PEAK, 648.0, 0, ["kernel01", "kernel08"])
assert label == "ceiling of stages 01\u201308 (mma.sync): 648 TFLOP/s", label
assert reference_label(MMA_PEAK, 648.0, 0, []) == "mma.sync ceiling: 648 TFLOP/s"
assert reference_label(WGMMA_PEAK, 929.0, 1, stages) == "Hopper ceiling (wgmma): 929.0 TFLOP/s"
PY
); then
    ok $name
else
    bad $name "$out"
fi

# --- the palette: every two colours of the figures told apart ---------------------------------------
# The colour science first (sRGB -> CIELAB against known values, CIEDE2000 against pairs of Sharma,
# Wu and Dalal's test data), then every pair of stage and reference colours (but the two red
# ceilings) at least PALETTE_MIN_DELTA_E apart, no near-white or pale yellow colour, and, as a
# control that the check can fail, the palette before FA3 (tab10 and five extras, whose stages
# 05/13, 06/12 and 07/10 looked alike) below both thresholds.
name=plot_palette
if out=$("$PYTHON" - <<'PY' 2>&1
import math, sys
sys.path.insert(0, "plots")
import plot
def close(a, b, tol):
    return all(abs(x - y) < tol for x, y in zip(a, b))
assert close(plot.srgb_to_lab("#ffffff"), (100, 0, 0), 1e-3), plot.srgb_to_lab("#ffffff")
assert close(plot.srgb_to_lab("#ff0000"), (53.24, 80.09, 67.20), 0.01), plot.srgb_to_lab("#ff0000")
assert close(plot.srgb_to_lab("#0000ff"), (32.30, 79.19, -107.86), 0.01), plot.srgb_to_lab("#0000ff")
assert close(plot.srgb_to_lab("#808080"), (53.59, 0, 0), 0.01), plot.srgb_to_lab("#808080")
sharma = [((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425),
          ((50, 3.1571, -77.2803), (50, 0, -82.7485), 2.8615),
          ((50, 0, 0), (50, -1, 2), 2.3669),
          ((50, 2.5, 0), (73, 25, -18), 27.1492),
          ((50, 2.5, 0), (61, -5, 29), 22.8977),
          ((50, 2.5, 0), (56, -27, -3), 31.9030),
          ((50, 2.5, 0), (58, 24, 15), 19.4535)]
for lab1, lab2, want in sharma:
    for a, b in ((lab1, lab2), (lab2, lab1)):
        got = plot.delta_e2000(a, b)
        assert abs(got - want) < 1e-4, (a, b, got, want)
assert plot.delta_e76((50, 2.5, 0), (58, 24, 15)) == math.sqrt(8 ** 2 + 21.5 ** 2 + 15 ** 2)

assert len(plot.STAGE_COLORS) == 16 and len(set(plot.STAGE_COLORS)) == 16
for kernel in plot.TIMED + (plot.MMA_PEAK, plot.WGMMA_PEAK):
    assert kernel in plot.REFERENCE_STYLE, kernel
assert plot.REFERENCE_STYLE["fa3"][0] == "FlashAttention-3"
styles = [style for _, _, style in plot.REFERENCE_STYLE.values()]
assert len(set(map(str, styles))) == len(styles) - 1, "only FA2 and cuDNN share a dash pattern"
pairs = plot.palette_pairs()
assert len(pairs) == 21 * 20 // 2 - 1, len(pairs)  # 16 stages and 5 references, less the ceilings' pair
worst = plot.palette_min_delta_e()
for metric, minimum in plot.PALETTE_MIN_DELTA_E.items():
    assert worst[metric][0] >= minimum, (metric, worst[metric], minimum)
for n, color in enumerate(plot.STAGE_COLORS + [plot.REFERENCE_STYLE["fa3"][1]], 1):
    L, a, b = plot.srgb_to_lab(color)
    hue = math.degrees(math.atan2(b, a)) % 360
    assert L <= 80, (n, color, "too light: it vanishes on white")
    assert not (L > 70 and 70 <= hue <= 110), (n, color, "a pale yellow")
print(" ".join(f"{m} {v[0]:.1f} ({v[1]} / {v[2]})" for m, v in worst.items()))

old = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
       "#393b79", "#e7ba52", "#00876c", "#7b4173", "#8c6d31"]  # tab10 less red and gray, then five
labs = [plot.srgb_to_lab(c) for c in old]
for metric, f in (("cie76", plot.delta_e76), ("ciede2000", plot.delta_e2000)):
    smallest = min(f(labs[i], labs[j]) for i in range(13) for j in range(i + 1, 13))
    assert smallest < plot.PALETTE_MIN_DELTA_E[metric], (metric, "the old palette passes", smallest)
    assert plot.palette_min_delta_e(old)[metric][0] < plot.PALETTE_MIN_DELTA_E[metric]
PY
); then
    ok $name
    echo "  smallest differences: $out"
else
    bad $name "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
fi
finish
