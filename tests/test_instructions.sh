#!/usr/bin/env bash
# Instruction checks: each stage's PTX (and SASS, where cuobjdump exists) holds the instructions
# of its technique and not those of later stages; ptxas reports no spills and no stack frame.
# Needs the stage objects of `make all` (build/kernelNN.o and build/kernelNN.ptxas.txt).
set -u
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
OUT=build/ptx
mkdir -p "$OUT"

# The per-stage expectations (and ok/bad/want/unwanted) live in stage_checks.sh, shared with the grader.
. tests/stage_checks.sh

for dir in kernel0*_*/; do
    dir=${dir%/}
    nn=${dir:6:2}
    ptx="$OUT/$dir.ptx"
    # compute_80: the chapters' Ampere instruction set; the same PTX feeds sm_90.
    if ! "$NVCC" -std=c++17 -Icommon -arch=compute_80 -ptx "$dir/kernel.cu" -o "$ptx" 2>"$OUT/$dir.err"; then
        bad "$dir PTX" "$(head -3 "$OUT/$dir.err")"; continue
    fi
    stage_ptx_checks "$nn" "$dir" "$ptx"

    # ptxas -v of the build: every kernel of the stage, every arch: no spill, no stack frame.
    stage_spill_check "$dir" "build/kernel$nn.ptxas.txt"
done

# SASS, where cuobjdump exists (the GPU machine): the PTX above became the expected machine code.
if command -v cuobjdump >/dev/null 2>&1; then
    for nn in 01 02 03 04 05 06 07 08; do
        obj=build/kernel$nn.o
        [ -f "$obj" ] || continue
        sass="$OUT/kernel$nn.sm90.sass"
        cuobjdump -sass -arch sm_90 "$obj" >"$sass" 2>/dev/null
        stage_sass_checks "$nn" "kernel$nn SASS" "$sass"
    done
else
    echo "SKIP: SASS checks: cuobjdump not found (the PTX checks above still ran)"
fi
exit 0
