#!/usr/bin/env bash
# Instruction checks: each stage's PTX (and SASS, where cuobjdump exists) holds the instructions
# of its technique and not those of later stages; ptxas reports no spills and no stack frame.
# Needs the stage objects of `make all` (build/kernelNN.o and build/kernelNN.ptxas.txt).
set -u
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
OUT=build/ptx
mkdir -p "$OUT"

ok()   { echo "PASS: $1"; }
bad()  { echo "FAIL: $1: $2"; }
has()  { grep -qE -- "$2" "$1"; }
# want STAGE FILE DESCRIPTION REGEX: the instruction must be there
want()   { if has "$2" "$4"; then ok "$1 has $3"; else bad "$1 has $3" "no match for /$4/ in $2"; fi; }
# unwanted STAGE FILE DESCRIPTION REGEX: the instruction must not be there yet
unwanted() { if has "$2" "$4"; then bad "$1 has no $3" "found /$4/ in $2"; else ok "$1 has no $3"; fi; }

MMA='mma\.sync\.aligned\.m16n8k16'
LDSM='ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16'
LDSM_T='ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16'
CPASYNC='cp\.async\.cg\.shared\.global'

for dir in kernel0*_*/; do
    dir=${dir%/}
    nn=${dir:6:2}
    ptx="$OUT/$dir.ptx"
    # compute_80: the chapters' Ampere instruction set; the same PTX feeds sm_90.
    if ! "$NVCC" -std=c++17 -Icommon -arch=compute_80 -ptx "$dir/kernel.cu" -o "$ptx" 2>"$OUT/$dir.err"; then
        bad "$dir PTX" "$(head -3 "$OUT/$dir.err")"; continue
    fi
    case $nn in
    01) unwanted "$dir" "$ptx" "tensor-core mma" "$MMA|wmma"
        unwanted "$dir" "$ptx" "ldmatrix" "ldmatrix"
        unwanted "$dir" "$ptx" "cp.async" "cp\.async" ;;
    02) want "$dir" "$ptx" "mma.sync m16n8k16" "$MMA"
        unwanted "$dir" "$ptx" "ldmatrix" "ldmatrix"
        unwanted "$dir" "$ptx" "cp.async" "cp\.async" ;;
    03) want "$dir" "$ptx" "mma.sync m16n8k16" "$MMA"
        want "$dir" "$ptx" "ldmatrix.x4" "$LDSM"
        want "$dir" "$ptx" "ldmatrix.x4.trans" "$LDSM_T"
        unwanted "$dir" "$ptx" "cp.async" "cp\.async" ;;
    04) want "$dir" "$ptx" "cp.async.cg 16 B" "$CPASYNC.*16"
        want "$dir" "$ptx" "cp.async.wait_group" "cp\.async\.wait_group"
        want "$dir" "$ptx" "16-byte vector global stores" "st\.global\.v4"
        unwanted "$dir" "$ptx" "swizzle xor" "xor\.b32" ;;
    05) want "$dir" "$ptx" "swizzle xor" "xor\.b32"
        want "$dir" "$ptx" "cp.async.cg 16 B" "$CPASYNC"
        unwanted "$dir" "$ptx" "split wait (wait_group 1)" "cp\.async\.wait_group 1;" ;;
    06) want "$dir" "$ptx" "split wait (wait_group 1)" "cp\.async\.wait_group 1;"
        want "$dir" "$ptx" "expf range reduction (textbook softmax)" "fma\.rm\.f32" ;;
    07) want "$dir" "$ptx" "ex2.approx" "ex2\.approx"
        unwanted "$dir" "$ptx" "expf range reduction" "fma\.rm\.f32" ;;
    08) want "$dir" "$ptx" "dynamic shared memory" "\.extern \.shared"
        want "$dir" "$ptx" "ex2.approx" "ex2\.approx"
        unwanted "$dir" "$ptx" "expf range reduction" "fma\.rm\.f32" ;;
    esac
    case $nn in 04|05|06|07|08) want "$dir" "$ptx" "mma.sync m16n8k16" "$MMA" ;; esac
    case $nn in 05|06|07|08) want "$dir" "$ptx" "ldmatrix.x4.trans" "$LDSM_T"; want "$dir" "$ptx" "cp.async.cg" "$CPASYNC" ;; esac

    # ptxas -v of the build: every kernel of the stage, every arch: no spill, no stack frame.
    info="build/kernel$nn.ptxas.txt"
    if [ ! -s "$info" ]; then
        bad "$dir no spills" "$info missing (run make all first)"
    elif grep -E 'spill (stores|loads)|stack frame' "$info" | grep -qvE '^ *0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads'; then
        bad "$dir no spills" "$(grep -E 'bytes (stack|spill)' "$info" | grep -v '^ *0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads' | head -2)"
    else
        ok "$dir no spills ($(grep -c 'Compiling entry' "$info") kernels, $(grep -o 'Used [0-9]* registers' "$info" | sort -u | tr '\n' ' '))"
    fi
done

# SASS, where cuobjdump exists (the GPU machine): the PTX above became the expected machine code.
if command -v cuobjdump >/dev/null 2>&1; then
    for nn in 01 02 03 04 05 06 07 08; do
        obj=build/kernel$nn.o
        [ -f "$obj" ] || continue
        sass="$OUT/kernel$nn.sm90.sass"
        cuobjdump -sass -arch sm_90 "$obj" >"$sass" 2>/dev/null
        case $nn in
        01) unwanted "kernel$nn SASS" "$sass" "HMMA" "HMMA" ;;
        02) want "kernel$nn SASS" "$sass" "HMMA.16816" "HMMA\.16816"; unwanted "kernel$nn SASS" "$sass" "LDSM" "LDSM" ;;
        03) want "kernel$nn SASS" "$sass" "LDSM" "LDSM"; want "kernel$nn SASS" "$sass" "LDSM.16.MT88" "LDSM\.16\.MT88"; unwanted "kernel$nn SASS" "$sass" "LDGSTS" "LDGSTS" ;;
        04|05|06) want "kernel$nn SASS" "$sass" "LDGSTS" "LDGSTS" ;;
        07|08) want "kernel$nn SASS" "$sass" "MUFU.EX2" "MUFU\.EX2"; want "kernel$nn SASS" "$sass" "LDGSTS" "LDGSTS" ;;
        esac
    done
else
    echo "SKIP: SASS checks: cuobjdump not found (the PTX checks above still ran)"
fi
exit 0
