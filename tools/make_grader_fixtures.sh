#!/usr/bin/env bash
# Wrong student files, derived from the real kernels with sed so that they never drift from them;
# tests/test_grader.sh hands each to `make grade` and expects a FAIL for its reason. For stage 05:
#   wrong_causal.cu    top-left aligned causal mask (col > row instead of col > row + diag)
#                      -> the correctness matrix fails (causal cases with seqlen_q != seqlen_k)
#   missing_barrier.cu the __syncthreads() that keeps K_j, V_j alive until every warp is done with
#                      them is gone -> racecheck reports a shared-memory hazard
#   previous_stage.cu  stage 04 handed in as stage 05 (entry point renamed flash_forward_kernel05)
#                      -> the instruction checks fail (no swizzle xor) and it is no faster than 04
# For stage 16, the first that takes e4m3 inputs:
#   fp8_entry_misnamed.cu  the e4m3 entry point defined as flash_forward_kernel16_fp8: the whole e4m3
#                      path is compiled (its instructions are all there), but the dispatcher finds
#                      no flash_forward_fp8_kernel16 -> the exports check fails ([symbol]), no GPU needed
#   wrong_key_order.cu P packed for k32 step kk from the S tiles of step kk + 1 (the last from the
#                      first's): P's keys no longer meet the V^T rows written in their order. Same
#                      instructions, no race, the bf16 path untouched -> only the e4m3 cases of the
#                      correctness matrix fail
# For each Hopper assignment NN (09 on):
#   previous_stage_NN.cu  stage NN-1 handed in as stage NN
#                      -> the instruction checks fail: the technique of assignment NN is missing
# Each edit must change the file: when a kernel is rewritten so that a pattern no longer matches,
# this script fails instead of writing a fixture that is silently correct.
# Usage: tools/make_grader_fixtures.sh [OUTDIR]   (default build/grader_fixtures)
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-build/grader_fixtures}
K05=kernel05_swizzle/kernel.cu
K04=kernel04_cp_async/kernel.cu
K16=kernel16_fp8/kernel.cu
mkdir -p "$OUT"

# derive NAME SOURCE SED-SCRIPT EXPECTED-CHANGED-LINES
derive() {
    local name=$1 src=$2 script=$3 want=$4 changed
    sed -e "$script" "$src" >"$OUT/$name"
    changed=$(diff "$src" "$OUT/$name" | grep -c '^[<>]' || true)
    if [ "$changed" -ne "$want" ]; then
        echo "make_grader_fixtures: $name: expected $want changed lines from $src, got $changed;" \
             "the kernel changed, update the sed script in $0" >&2
        exit 1
    fi
    echo "$OUT/$name: from $src ($changed lines changed)"
}

# (a) The mask of the real kernel: `(p.causal && col > row[e >> 1] + diag)`; drop the diagonal offset.
derive wrong_causal.cu "$K05" 's/\(p\.causal && col > row\[e >> 1\]\) + diag)/\1)/' 2

# (b) The barrier right after the comment "Every warp must be done with the previous K_j, V_j ...".
derive missing_barrier.cu "$K05" '/Every warp must be done with the previous K_j, V_j/{n;/^ *__syncthreads();$/d;}' 1

# (c) Stage 04's file with stage 05's entry point.
derive previous_stage.cu "$K04" 's/\bflash_forward_kernel04\b/flash_forward_kernel05/' 2

# (d) Stage 16's e4m3 entry point under a name the dispatcher does not look for.
derive fp8_entry_misnamed.cu "$K16" '/^extern "C" int flash_forward_fp8_kernel16(/s/flash_forward_fp8_kernel16/flash_forward_kernel16_fp8/' 2

# (e) Stage 16's P packed in another key order than V^T's: the fragments of k32 step kk take the
# S tiles of step kk + 1, round the tile's steps, so every S tile is still used once, whatever the
# number of steps (3 in a 96-key tile, 5 in a 160-key one: kk ^ 1 would read past the last).
derive wrong_key_order.cu "$K16" 's/pack_p_e4m3(acc_s, kk, p_frag\[kk\])/pack_p_e4m3(acc_s, (kk + 1) % (kNTilesS \/ 4), p_frag[kk])/' 2

# (f) The Hopper assignments: each previous stage with the next stage's entry point. The stages come
# from the stage directories, so a new Hopper stage gets its fixture without an edit here.
for dir in kernel[0-9][0-9]_*/; do
    nn=${dir#kernel}; nn=${nn%%_*}
    [ "$((10#$nn))" -ge 9 ] || continue
    prev=$(printf '%02d' $((10#$nn - 1)))
    src=$(ls -d kernel${prev}_*/)kernel.cu
    derive "previous_stage_$nn.cu" "$src" "s/\bflash_forward_kernel$prev\b/flash_forward_kernel$nn/" 2
done
