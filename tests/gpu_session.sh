#!/usr/bin/env bash
# One call on a lent GPU machine does all the GPU work of a session: build for the card, then the
# steps named on the command line, each under a time limit, logging to $OUT (default build/gpu).
#   build      make all for the present GPU's arch
#   test       make test (CPU tests, instruction checks, GPU correctness matrix, sanitizer)
#   matrix     the correctness matrix alone, every stage
#   headline   every stage on the headline problem (checked), plus causal
#   peak       ./run --peak into the CSV
#   reference  FA2 and cuDNN through PyTorch into the CSV (headline + sweep)
#   bench      make bench into the CSV
#   tune       make tune (stage 08 tile candidates)
#   grader     tests/test_grader.sh: make grade passes the real stage 05 and fails three wrong ones
#   ncu        bank conflicts of stages 04 and 05, tensor pipe of 07 and 08
#   sass       make sass-table: ptxas usage, PTX and SASS histograms of every stage
#   plot       make plot
# Usage: COMMIT=abc123 bash tests/gpu_session.sh build test bench ...
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu}
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
COMMIT=${COMMIT:-unknown}
CC_MAJOR_MINOR=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
ARCH="-gencode arch=compute_${CC_MAJOR_MINOR:-90},code=sm_${CC_MAJOR_MINOR:-90}"
LOG="$OUT/session.log"
CSV_NAME=""

step() {  # step NAME SECONDS COMMAND...
    local name=$1 secs=$2; shift 2
    echo "===== $name ($(date -u +%H:%M:%S), limit ${secs}s): $*" | tee -a "$LOG"
    local t0=$SECONDS
    timeout "$secs" "$@" >>"$LOG" 2>&1
    local rc=$?
    echo "===== $name: exit $rc after $((SECONDS - t0))s" | tee -a "$LOG"
    return $rc
}

csv() { [ -n "$CSV_NAME" ] || CSV_NAME="plots/$(build/allstages --gpu-slug).csv"; echo "$CSV_NAME"; }

nvidia-smi >>"$LOG" 2>&1
for s in "$@"; do
    case $s in
    build)     step build 300 make -j16 all ARCH="$ARCH" COMMIT="$COMMIT" ;;
    test)      step test 420 make test ARCH="$ARCH" COMMIT="$COMMIT"; tail -n 1 "$LOG" ;;
    matrix)    step matrix 300 build/allstages --stage all --matrix; grep -E '^(matrix|FAIL)' "$LOG" | tail -n 40 ;;
    headline)  step headline 300 build/allstages --stage all --csv "$OUT/headline.csv"
               step headline_causal 300 build/allstages --stage all --causal 1 --csv "$OUT/headline.csv" ;;
    peak)      step peak 60 build/allstages --peak --csv "$(csv)" ;;
    reference) FLASH_COMMIT=$COMMIT step reference 240 python3 harness/reference.py --csv "$(csv)" ;;
    bench)     step bench 540 make bench ARCH="$ARCH" COMMIT="$COMMIT" ;;
    tune)      step tune 420 make tune ARCH="$ARCH" COMMIT="$COMMIT" ;;
    grader)    GRADE_ROUNDS=${GRADE_ROUNDS:-1} step grader 420 bash tests/test_grader.sh; grep -E '^(PASS|FAIL|SKIP):' "$LOG" | tail -n 12 ;;
    ncu)       for k in 04 05 07 08; do
                   step "ncu_$k" 120 ncu --clock-control none --kernel-name regex:flash_fwd_kernel --launch-skip 3 --launch-count 1 \
                       --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
                       build/allstages --stage "${k#0}" --no-check --warmup 3 --iters 1
               done ;;
    sass)      step sass_table 120 make sass-table ARCH="$ARCH" COMMIT="$COMMIT" ;;
    plot)      step plot 120 make plot; cp plots/*.png "$OUT/" 2>/dev/null ;;
    *)         echo "unknown step $s" | tee -a "$LOG" ;;
    esac
done
slug=$(build/allstages --gpu-slug 2>/dev/null) && [ -f "plots/$slug.csv" ] && cp "plots/$slug.csv" "$OUT/"
ls "$OUT" >>"$LOG"
