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

# Stage 13's tuning options that ship in no default tile (each measured slower on the H200) but
# that make tune K=13 times: the S-ahead pipeline (kSAhead = 1) must still compile to its
# wait_group 2, and the 160-key tile at head_dim 128 to wgmma m64n160, spill-free and without
# serialised wgmma, at the tiles the tune tries.
k13=$(ls -d kernel13_*/ 2>/dev/null | head -n 1)
if [ -n "$k13" ]; then
    hdr="$OUT/k13_tune.h"
    printf "#define FLASH_TILE_D64 128, 128, 2, 232, 2, 1, 0, 1\n#define FLASH_TILE_D128 128, 160, 2, 232, 2, 1, 0, 0\n" >"$hdr"
    if "$NVCC" -std=c++17 -Icommon -arch=compute_90a -include "$hdr" -ptx "${k13}kernel.cu" -o "$OUT/k13_tune.ptx" 2>"$OUT/k13_tune.err" &&
       "$NVCC" $NVFLAGS -gencode arch=compute_90a,code=sm_90a -Xptxas -v -include "$hdr" -c "${k13}kernel.cu" \
           -o "$OUT/k13_tune.o" 2>"$OUT/k13_tune.ptxas.txt"; then
        want "${k13%/} kSAhead=1" "$OUT/k13_tune.ptx" "wgmma.wait_group 2 (S of this tile done, the next S and P V running)" \
            "wgmma\.wait_group\.sync\.aligned 2"
        want "${k13%/} 160-key tiles" "$OUT/k13_tune.ptx" "160-key S tiles (wgmma m64n160)" "wgmma\.mma_async\.sync\.aligned\.m64n160k16"
        stage_spill_check "${k13%/} kSAhead=1, 160 keys" "$OUT/k13_tune.ptxas.txt"
        stage_async_check "${k13%/} kSAhead=1, 160 keys (sm_90a)" "$OUT/k13_tune.ptxas.txt"
    else
        bad "${k13%/} tuning options build" "$(grep -m2 error "$OUT"/k13_tune.err "$OUT"/k13_tune.ptxas.txt)"
    fi
fi

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
