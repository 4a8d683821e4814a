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

# Runs plot.py; leaves the exit code in $rc and stdout+stderr in $TMP/out.
run_plot() {
    "$PYTHON" plots/plot.py "$@" >"$TMP/out" 2>&1
    rc=$?
}

have_matplotlib=1
"$PYTHON" -c "import matplotlib" 2>/dev/null || have_matplotlib=0

# --- Plots from the fixture ----------------------------------------------------------------------
name=plot_fixture_pngs
if [ $have_matplotlib = 0 ]; then
    for name in plot_fixture_pngs plot_last_row_wins plot_without_fa2 plot_no_data; do
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

# --- styles: stable per stage, distinct, and the ceiling says what it bounds ----------------------
name=plot_styles
if [ $have_matplotlib = 0 ]; then
    skip $name "matplotlib cannot be imported"
elif out=$("$PYTHON" - <<'PY' 2>&1
import sys
sys.path.insert(0, "plots")
from plot import stage_styles, ceiling_label
stages = [f"kernel{i:02d}" for i in range(1, 14)]
styles = stage_styles(stages)
assert stage_styles(["kernel05"])["kernel05"] == styles["kernel05"], "a stage's style depends on the others"
assert len({c for c, _ in styles.values()}) == 13, "13 stages do not get 13 colours"
assert len(set(styles.values())) == 13, "two stages share colour and marker"
label = ceiling_label(["kernel01", "kernel08"], 648.0, 0)
assert "01" in label and "08" in label and "wgmma" in label, label
PY
); then
    ok $name
else
    bad $name "$out"
fi
finish
