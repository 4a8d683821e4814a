#!/usr/bin/env bash
# A whole measuring session on a GPU in one command: build for the present card, then the steps
# named on the command line, each under a time limit, logging to $OUT (default build/gpu).
#   build      make all for the present GPU's architecture only (ARCH=here: quicker)
#   units      build/hopper_units: the Hopper instruction wrappers alone (skips off Hopper)
#   test       make test (CPU tests, instruction checks, GPU correctness matrix, sanitizer, API)
#   matrix     the correctness matrix alone, every stage (MATRIX_STAGE=13: that stage only)
#   sanitize   make sanitize: compute-sanitizer memcheck, racecheck, synccheck, initcheck
#              (SANITIZER_STAGES="13": those stages only, default every stage; SANITIZER_PROBLEMS="long":
#              that problem of tests/lib.sh only, default all five; SANITIZER_TOOLS="racecheck": those
#              tools only)
#   api        tests/test_api.py: the C API through ctypes, its GPU checks included
#   nokey      the no-key problem (causal, whole query tiles that see no key, filling the GPU): ten
#              runs of every stage at head_dim 64 and 128, then racecheck on it for each
#   peak       ./run --peak into the CSV
#   reference  FA2, cuDNN and (where it imports) FA3 through PyTorch into the CSV (headline + sweep)
#   rounds     make rounds: every stage and reference at the headline, the last stage of each track and
#              the references over the sweep, and the same in e4m3 for the stages that take it and FA3,
#              in ROUNDS alternating rounds (default 4), into plots/rounds/<gpu>_<commit>.csv: the rows
#              every ratio of README and docs comes from
#   again      the same into plots/rounds/<gpu>_<commit>_again.csv: a second measurement of the same
#              commit, which the reproducibility table of docs/measuring.md compares with the first
#   bench      make bench into the CSV
#   tune       make tune, its rows kept in plots/tune/<gpu>.csv (TUNE_K=NN picks the stage, default 08)
#   repeat     two stages' sweeps timed alternately, REPEAT="10 09" (stage numbers, or fa2 for
#              FlashAttention-2 and cuDNN through PyTorch) for REPEAT_ROUNDS rounds (default 3), into
#              plots/repeats/<gpu>_<A>_vs_<B>_<commit>.csv: the ratio of two kernels under the same
#              conditions, minutes apart at most, where one benchmark run puts them further apart
#   shapes     make rounds-shapes: the sweep's kernels on the shapes off the sweep (contract.py's
#              SHAPES_BASE), ROUNDS alternating rounds, into plots/shapes/<gpu>_<commit>.csv
#   fp8err     make fp8-error: the e4m3 error of the last stage that takes fp8 inputs and of FA3
#              against float64, on the same inputs, into plots/fp8_error/<gpu>_<commit>.csv
#   settle     tools/settle_trace.py: per-call times of the fp8 stage, the last bf16 stage and FA3
#              under both timing methods, SETTLE_ROUNDS alternating rounds (default 2), into
#              plots/settle/<gpu>_<commit>.csv (docs/16_fp8.md, "Two ways to time it")
#   ab         make ab K=$AB_STAGE AB="$AB": builds of one stage against its base, their sweeps in
#              turn, into plots/ab/<gpu>_NN_<commit>/ (tools/ab.sh)
#   grader     tests/test_grader.sh: make grade passes the real stages 05 and 15 and fails wrong ones
#   ncu        ncu metrics of every stage on the headline problem, kept in plots/ncu/<gpu>.csv
#   sass       make sass-table: ptxas usage, PTX and SASS histograms of every stage
#   plot       make plot
# Usage: COMMIT=abc123 bash tools/gpu_session.sh build test bench ...
set -u
cd "$(dirname "$0")/.."
nvidia-smi -L >/dev/null 2>&1 || { echo "gpu_session: no NVIDIA GPU answers here (nvidia-smi -L failed); it runs a" \
    "measuring session on the GPU, so run it on a machine with one" >&2; exit 2; }
OUT=${OUT:-build/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export COMMIT=${COMMIT:-unknown}
LOG="$OUT/session.log"
MAKE="make --no-print-directory ARCH=here COMMIT=$COMMIT"

step() {  # step NAME SECONDS COMMAND...
    local name=$1 secs=$2; shift 2
    echo "===== $name ($(date -u +%H:%M:%S), limit ${secs}s): $*" | tee -a "$LOG"
    local t0=$SECONDS
    timeout "$secs" "$@" >>"$LOG" 2>&1
    local rc=$?
    echo "===== $name: exit $rc after $((SECONDS - t0))s" | tee -a "$LOG"
    return $rc
}
slug() { build/allstages --gpu-slug; }
# repeat_sweeps A B: REPEAT_ROUNDS rounds of A's sweep then B's, appended to one CSV.
repeat_sweeps() {
    local a=$1 b=$2 csv round who
    csv="plots/repeats/$(slug)_${a}_vs_${b}_$COMMIT.csv"
    for round in $(seq 1 "${REPEAT_ROUNDS:-3}"); do
        for who in "$a" "$b"; do
            echo "round $round: $who"
            if [ "$who" = fa2 ]; then
                env FLASH_COMMIT="$COMMIT" python3 harness/reference.py --problems sweep --csv "$csv" || return
            else
                build/allstages --stage "$((10#$who))" --sweep --csv "$csv" || return
            fi
        done
    done
}
export -f repeat_sweeps slug

nvidia-smi >>"$LOG" 2>&1
for s in "$@"; do
    case $s in
    build)     step build 300 $MAKE -j16 all ;;
    units)     step units 120 build/hopper_units; grep -E '^(PASS|FAIL|SKIP):' "$LOG" | tail -n 24 ;;
    test)      step test 540 $MAKE test; tail -n 1 "$LOG" ;;
    matrix)    step matrix 300 build/allstages --stage "${MATRIX_STAGE:-all}" --matrix; grep -E '^(matrix|FAIL)' "$LOG" | tail -n 40 ;;
    sanitize)  step sanitize 540 $MAKE sanitize; grep -E '^(FAIL|[0-9]+ passed)' "$LOG" | tail -n 20 ;;
    api)       step api 300 python3 tests/test_api.py; grep -E '^(FAIL|SKIP)' "$LOG" | tail -n 20 ;;
    nokey)     step nokey 540 bash tools/nokey_check.sh; grep -E '^nokey' "$LOG" | tail -n 40 ;;
    peak)      step peak 60 build/allstages --peak --csv "plots/$(slug).csv" ;;
    reference) step reference 300 env FLASH_COMMIT="$COMMIT" python3 harness/reference.py --csv "plots/$(slug).csv" ;;
    rounds)    step rounds 540 $MAKE rounds ROUNDS="${ROUNDS:-4}" ;;
    again)     step again 540 $MAKE rounds ROUNDS="${ROUNDS:-4}" ROUNDS_TAG=_again ;;
    shapes)    step shapes 540 $MAKE rounds-shapes ROUNDS="${ROUNDS:-4}" ;;
    fp8err)    step fp8err 180 $MAKE fp8-error; grep -E '^(B=|note|error)' "$LOG" | tail -n 40 ;;
    settle)    mkdir -p plots/settle; step settle 300 python3 tools/settle_trace.py --csv "plots/settle/$(slug)_$COMMIT.csv" \
                   --rounds "${SETTLE_ROUNDS:-2}"; tail -n 12 "$LOG" ;;
    bench)     step bench 540 $MAKE bench ;;
    tune)      mkdir -p plots/tune; step tune 420 env TUNE_CSV="plots/tune/$(slug).csv" $MAKE tune K="${TUNE_K:-08}" ;;
    repeat)    mkdir -p plots/repeats; step repeat 540 bash -c 'repeat_sweeps "$@"' _ ${REPEAT:-10 09} ;;
    ab)        step ab 540 $MAKE ab K="${AB_STAGE:-13}" ;;
    grader)    step grader 540 env GRADE_ROUNDS="${GRADE_ROUNDS:-1}" bash tests/test_grader.sh; grep -E '^(PASS|FAIL|SKIP):' "$LOG" | tail -n 20 ;;
    ncu)       mkdir -p plots/ncu; step ncu 300 bash tools/ncu_metrics.sh "plots/ncu/$(slug).csv" ;;
    sass)      step sass_table 120 $MAKE sass-table ;;
    plot)      step plot 120 $MAKE plot; cp plots/*.png "$OUT/" 2>/dev/null ;;
    *)         echo "unknown step $s" | tee -a "$LOG" ;;
    esac
done
ls "$OUT" >>"$LOG"
