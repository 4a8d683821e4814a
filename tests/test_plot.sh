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
                plot_unknown_stage; do
        skip $name "matplotlib cannot be imported"
    done
else
    run_plot $FIXTURES/plot_sample.csv --out-dir "$TMP/png"
    if [ $rc -ne 0 ]; then
        bad $name "exit code $rc: $(tail -n 3 "$TMP/out" | tr '\n' ' ')"
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
fi

# --- the README's results table (tools/results_md.py) takes the new stage and the wgmma ceiling --
name=results_table_hopper_track
if out=$("$PYTHON" - "$FIXTURES/plot_sample.csv" "$TMP/stages" <<'PY' 2>&1
import functools, sys
sys.path.insert(0, "tools")
import results_md  # puts plots/ on the path
import plot
csv_path, stages = sys.argv[1:]
results_md.Results = functools.partial(plot.Results, stage_root=stages)  # the fixture's stage tree
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

# --- styles: stable per stage, distinct, and each ceiling says what it bounds ---------------------
name=plot_styles
if [ $have_matplotlib = 0 ]; then
    skip $name "matplotlib cannot be imported"
elif out=$("$PYTHON" - <<'PY' 2>&1
import sys
sys.path.insert(0, "plots")
from plot import MMA_PEAK, WGMMA_PEAK, reference_label, stage_styles
stages = [f"kernel{i:02d}" for i in range(1, 14)]
styles = stage_styles(stages)
assert stage_styles(["kernel05"])["kernel05"] == styles["kernel05"], "a stage's style depends on the others"
assert len({c for c, _ in styles.values()}) == 13, "13 stages do not get 13 colours"
assert len(set(styles.values())) == 13, "two stages share colour and marker"
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
finish
