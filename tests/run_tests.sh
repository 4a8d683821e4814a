#!/usr/bin/env bash
# make test: everything that can be checked, here or on a machine with an NVIDIA GPU, ending in one line
# "N passed, N failed, N skipped". Each suite prints "PASS: name", "FAIL: name: why" or
# "SKIP: name: why" lines (the GPU matrix prints "PASS kernel..." / "FAIL kernel..."); this script
# counts them. A suite that exits non-zero without printing a FAIL line counts as one failure.
# The GPU part runs only where a CUDA device answers; elsewhere it is reported as skipped.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
LOG=$BUILD/test-logs
mkdir -p "$LOG"

pass=0 fail=0 skipped=0
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
    pass=$((pass + p)) fail=$((fail + f)) skipped=$((skipped + s))
}

# -- CPU: the float64 reference, the pass rule (and the e4m3 one against simulated kernels), dtype
# conversions, the inputs and their e4m3 quantization, CSV appending, the arch rule -------------
build_cpu_tests() {
    "$CC" -std=c11 -O1 -Wall -Wextra -Icommon -Iharness -I"$CUDA_HOME/include" \
        tests/test_cpu.c harness/cpu_ref.c harness/checks.c harness/csv.c harness/inputs.c harness/lowp.c \
        harness/problems.c common/flash_arch.c -lm -o "$BUILD/test_cpu" && echo "PASS: test_cpu builds" && "$BUILD/test_cpu"
}
suite cpu build_cpu_tests

# -- the host's e4m3 conversions against CUDA's own (cuda_fp8.h, on the host: no GPU needed) -----
build_fp8_tests() {
    "$NVCC" -std=c++17 -O2 -Icommon -Iharness tests/test_fp8_cuda.cu "$BUILD/harness/lowp.o" \
        -o "$BUILD/test_fp8_cuda" && echo "PASS: test_fp8_cuda builds" && "$BUILD/test_fp8_cuda"
}
suite fp8_cuda build_fp8_tests

# -- one definition per language: the C and Python sides agree on the problems and the CSV -------
suite contract bash tests/test_contract.sh

# -- the CLI: every bad argument exits 2 and names the parameter, before touching a device ------
suite cli bash tests/test_cli.sh "$BUILD/kernel01"
suite cli_allstages bash tests/test_cli.sh "$BUILD/allstages"

# -- the C API through build/libflash.so (ctypes): stage table, exports, argument errors, and on a
# GPU the rows that see no key ------------------------------------------------------------------
suite api "$PYTHON" tests/test_api.py

# -- the plot script and the docs generator on fixtures, reference.py without PyTorch -----------
suite plot bash tests/test_plot.sh
suite docs bash tests/test_docs.sh

# -- the tools: make tune / grade / sass without a GPU ------------------------------------------
suite tools bash tests/test_tools.sh

# -- the grader on its wrong fixtures with the GPU hidden: the gates that need none (build, entry
# points, instructions, spills); with a GPU, tools/gpu_session.sh grader runs the rest ----------
suite grader env CUDA_VISIBLE_DEVICES= bash tests/test_grader.sh

# -- each stage's PTX holds its technique, ptxas reports no spills -------------------------------
suite instructions bash tests/test_instructions.sh

# -- GPU: the correctness matrix and compute-sanitizer, only where a device answers -------------
if "$BUILD/allstages" --gpu-slug >/dev/null 2>&1; then
    suite hopper_units "$BUILD/hopper_units"
    suite gpu_matrix "$BUILD/allstages" --stage all --matrix
    suite sanitizer bash tests/test_sanitizer.sh "$BUILD/allstages"
    suite copy_tiles_1 bash tests/test_copy_tiles.sh
else
    echo "== gpu"
    for what in "Hopper wrapper unit tests (tests/hopper_units.cu)" "GPU correctness matrix" "compute-sanitizer memcheck/racecheck/synccheck" \
                "stage 08 with one K/V tile per copy (the Ampere path)"; do
        echo "SKIP: $what: no CUDA device here (run make test where an NVIDIA GPU is)"
        skipped=$((skipped + 1))
    done
fi

echo
echo "$pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
