#!/usr/bin/env bash
# Instruction checks: each stage's PTX (and SASS, where cuobjdump exists) holds the instructions
# of its technique and not those of later stages; ptxas reports no spills and no stack frame.
# Needs the stage objects of `make all` (build/kernelNN.o and build/kernelNN.ptxas.txt); run it
# through `make test`.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
OUT=$BUILD/ptx
mkdir -p "$OUT"

# The per-stage expectations live in stage_checks.sh, shared with the grader; they report through
# ok/bad of lib.sh.
. tests/stage_checks.sh

have_sass=1
command -v cuobjdump >/dev/null 2>&1 || have_sass=0

check_stage() {  # check_stage NN DIR ARCH
    local nn=$1 dir=$2 arch=$3 ptx="$OUT/$2.ptx"
    # PTX for the stage's own architecture: compute_80 (the chapters' instruction set, which sm_90
    # runs too) or compute_90a for a Hopper stage.
    if ! "$NVCC" -std=c++17 -Icommon -arch="compute_${arch#sm_}" -ptx "$dir/kernel.cu" -o "$ptx" 2>"$OUT/$dir.err"; then
        bad "$dir PTX" "$(head -3 "$OUT/$dir.err")"; return
    fi
    stage_ptx_checks "$nn" "$dir" "$ptx"
    stage_spill_check "$dir" "$BUILD/kernel$nn.ptxas.txt"
    # SASS: the PTX above became the expected machine code (for sm_90, or the stage's own arch).
    if [ "$have_sass" = 1 ] && [ -f "$BUILD/kernel$nn.o" ]; then
        local sass="$OUT/kernel$nn.sass" sass_arch=sm_90
        case $arch in *a) sass_arch=$arch ;; esac
        cuobjdump -sass -arch "$sass_arch" "$BUILD/kernel$nn.o" >"$sass" 2>/dev/null
        stage_sass_checks "$nn" "kernel$nn SASS ($sass_arch)" "$sass"
    fi
}
for_each_stage check_stage
[ "$have_sass" = 1 ] || skip "SASS checks" "cuobjdump not found (the PTX checks above still ran)"
finish
