#!/usr/bin/env bash
# Instruction checks: each stage's PTX (and SASS, where cuobjdump exists) holds the instructions
# of its technique and not those of later stages; ptxas reports no spills and no stack frame. The
# same for the wgmma ceiling kernel of ./run --peak, whose wgmma must not be serialised.
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
    case $arch in *a) stage_async_check "$dir ($arch)" "$BUILD/kernel$nn.ptxas.txt" ;; esac
    # SASS: the PTX above became the expected machine code (for sm_90, or the stage's own arch).
    if [ "$have_sass" = 1 ] && [ -f "$BUILD/kernel$nn.o" ]; then
        local sass="$OUT/kernel$nn.sass" sass_arch=sm_90
        case $arch in *a) sass_arch=$arch ;; esac
        cuobjdump -sass -arch "$sass_arch" "$BUILD/kernel$nn.o" >"$sass" 2>/dev/null
        stage_sass_checks "$nn" "kernel$nn SASS ($sass_arch)" "$sass"
    fi
}
for_each_stage check_stage

# The wgmma ceiling of ./run --peak (harness/peak_wgmma.cu, built for sm_90a by its own Makefile
# rule) must measure wgmma running asynchronously, back to back, or it reports a ceiling that the
# Hopper stages could beat. ptxas says so when it serialises wgmma (warning C7510) or inserts fences
# the source did not ask for (info C7519, which also means a wgmma waits on ordinary code).
peak=harness/peak_wgmma.cu
peak_info=$BUILD/harness/peak_wgmma.ptxas.txt
stage_spill_check "$peak" "$peak_info"
if [ -s "$peak_info" ]; then
    if grep -qE 'C7510|C7519|serializ' "$peak_info"; then
        bad "$peak wgmma stays asynchronous" "$(grep -E 'C7510|C7519|serializ' "$peak_info" | head -1)"
    else
        ok "$peak wgmma stays asynchronous (no C7510/C7519 from ptxas)"
    fi
fi
if [ "$have_sass" = 1 ] && [ -f "$BUILD/harness/peak_wgmma.o" ]; then
    cuobjdump -sass -arch sm_90a "$BUILD/harness/peak_wgmma.o" >"$OUT/peak_wgmma.sass" 2>/dev/null
    want "$peak SASS (sm_90a)" "$OUT/peak_wgmma.sass" "HGMMA.64x128x16" "HGMMA\.64x128x16"
fi
[ "$have_sass" = 1 ] || skip "SASS checks" "cuobjdump not found (the PTX checks above still ran)"
finish
