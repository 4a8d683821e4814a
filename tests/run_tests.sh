#!/usr/bin/env bash
# make test: everything that can be checked, here or on a GPU machine, ending in one line
# "N passed, N failed, N skipped". Each suite prints "PASS: name", "FAIL: name: why" or
# "SKIP: name: why" lines (the GPU matrix prints "PASS kernel..." / "FAIL kernel..."); this script
# counts them. A suite that exits non-zero without printing a FAIL line counts as one failure.
# The GPU part runs only where a CUDA device answers; elsewhere it is reported as skipped.
set -u
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
PYTHON=${PYTHON:-python3}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v "$NVCC")")")}
LOG=build/test-logs
mkdir -p "$LOG"

pass=0 fail=0 skip=0
suite() {  # suite NAME COMMAND...: run, echo, and count its result lines
    local name=$1; shift
    echo "== $name"
    "$@" >"$LOG/$name.log" 2>&1
    local rc=$?
    cat "$LOG/$name.log"
    local p f s
    p=$(grep -cE '^(PASS:|PASS )' "$LOG/$name.log")
    f=$(grep -cE '^(FAIL:|FAIL )' "$LOG/$name.log")
    s=$(grep -cE '^SKIP:' "$LOG/$name.log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL: $name: exited with status $rc"
        f=1
    fi
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
}

# -- CPU: the float64 reference, the pass rule, dtype conversions, CSV appending ---------------
build_cpu_tests() {
    gcc -std=c11 -O1 -Wall -Wextra -Icommon -Iharness -I"$CUDA_HOME/include" \
        tests/test_cpu.c harness/cpu_ref.c harness/checks.c harness/csv.c harness/inputs.c harness/lowp.c \
        -lm -o build/test_cpu && echo "PASS: test_cpu builds" && build/test_cpu
}
suite cpu build_cpu_tests

# -- the CLI: every bad argument exits 2 and names the parameter, before touching a device ------
suite cli bash tests/test_cli.sh build/kernel01
suite cli_allstages bash tests/test_cli.sh build/allstages

# -- the C API through build/libflash.so (ctypes): stage table and argument errors --------------
suite api "$PYTHON" tests/test_api.py

# -- plot.py on a fixture CSV, the reference script without PyTorch -----------------------------
suite plot env PYTHON="$PYTHON" bash tests/test_plot.sh

# -- each stage's PTX holds its technique, ptxas reports no spills -------------------------------
suite instructions bash tests/test_instructions.sh

# -- GPU: the correctness matrix and compute-sanitizer, only where a device answers -------------
if build/allstages --gpu-slug >/dev/null 2>&1; then
    suite gpu_matrix build/allstages --stage all --matrix
    suite sanitizer bash tests/test_sanitizer.sh build/allstages
    suite copy_tiles_1 bash tests/test_copy_tiles.sh
else
    echo "== gpu"
    echo "SKIP: GPU correctness matrix: no CUDA device here (run make test on a GPU machine)"
    echo "SKIP: compute-sanitizer memcheck/racecheck/synccheck: no CUDA device here"
    echo "SKIP: stage 08 with one K/V tile per copy (the Ampere path): no CUDA device here"
    skip=$((skip + 3))
fi

echo
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
