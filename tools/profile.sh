#!/usr/bin/env bash
# make profile K=05 [PROFILE_ARGS="--causal 1"]: a few Nsight Compute metrics of one stage on the
# headline problem (or the problem PROFILE_ARGS describes): the 4th launch of flash_fwd_kernel,
# after 3 warm-up launches, clocks left alone. make has found ncu and nvidia-smi's GPU before it
# built anything; whether the CUDA runtime can use that GPU is asked here (--gpu-slug says why not).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
NN=$1; shift
"$BUILD/allstages" --gpu-slug >/dev/null || exit 2
METRICS=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
smsp__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,sm__warps_active.avg.pct_of_peak_sustained_active,\
dram__throughput.avg.pct_of_peak_sustained_elapsed
echo "ncu: stage $NN, the 4th launch of flash_fwd_kernel (3 warm-up launches skipped), clocks left alone"
ncu --clock-control none --kernel-name regex:flash_fwd_kernel --launch-skip 3 --launch-count 1 --metrics "$METRICS" \
    "$BUILD/allstages" --stage "${NN#0}" --no-check --warmup 3 --iters 1 "$@" || exit
echo "Reading it: pipe_tensor_op_hmma_cycles_active pct = how busy the tensor pipe was (the docs' figure); bank_conflicts ld/st = extra shared-memory"
echo "wavefronts (compare with wavefronts_mem_shared_op_ld: 0 conflicts is the goal of stage 05);"
echo "warps_active pct = achieved occupancy; dram__throughput pct = how close to the HBM bandwidth limit."
