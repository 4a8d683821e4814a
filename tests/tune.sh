#!/usr/bin/env bash
# make tune: time candidate tile shapes of stage 08 on the present GPU and record the winner per
# (head_dim, causal). Each candidate is stage 08 rebuilt with -DFLASH_TILE_D64 / -DFLASH_TILE_D128
# = "kBlockM, kBlockN, kNWarps, kMinBlocks"; the shapes that ship are the defaults compiled into
# kernel08_final/kernel.cu, never searched at run time. Candidates that spill are reported and
# skipped. Usage: tests/tune.sh [ARCH flags]
set -u
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:--gencode arch=compute_90,code=sm_90}
T=build/tune
mkdir -p "$T"
rm -f "$T/results.csv"

CANDIDATES_D128=${CANDIDATES_D128:-"128,32,4,2 128,48,4,2 128,64,4,2 64,64,4,2 64,32,4,3 128,64,8,1"}
CANDIDATES_D64=${CANDIDATES_D64:-"128,64,4,2 128,48,4,2 128,96,4,2 128,32,4,2 64,64,4,2 64,64,4,3"}

harness_objs=$(ls build/harness/*.o) || { echo "run make all first"; exit 2; }

build_candidate() {  # build_candidate D SHAPE -> prints the binary path, or nothing if it spills
    local d=$1 shape=$2 tag
    tag="d${d}_$(echo "$shape" | tr ',' '_')"
    local obj="$T/kernel08_$tag.o" bin="$T/run_$tag" hdr="$T/tile_$tag.h"
    # nvcc splits -D values at commas, so the shape travels in a forced include instead.
    printf "#define FLASH_TILE_D%s %s\n" "$d" "$shape" >"$hdr"
    if ! $NVCC -O3 -std=c++17 $ARCH -Icommon -Xcompiler -fPIC -Xptxas -v -include "$hdr" \
            -c kernel08_final/kernel.cu -o "$obj" 2>"$T/ptxas_$tag.txt"; then
        echo "tune: $tag does not compile: $(grep -m1 error "$T/ptxas_$tag.txt")" >&2; return
    fi
    if grep -E 'bytes spill (stores|loads)' "$T/ptxas_$tag.txt" | grep -vq ' 0 bytes spill stores, 0 bytes spill loads'; then
        echo "tune: $tag spills, skipped" >&2; return
    fi
    $NVCC $ARCH "$obj" $harness_objs build/common/flash_api.o -o "$bin" -lcudart -lm || return
    echo "$bin"
}

# Build every candidate in parallel (they are independent), then time them one by one.
for d in 128 64; do
    var="CANDIDATES_D$d"
    for shape in ${!var}; do
        build_candidate "$d" "$shape" >"$T/bin_${d}_$shape" &
    done
done
wait

for d in 128 64; do
    var="CANDIDATES_D$d"
    for shape in ${!var}; do
        bin=$(cat "$T/bin_${d}_$shape")
        [ -n "$bin" ] || continue
        for causal in 0 1; do
            # The headline problem for d128; the sweep's 4k point for d64 (heads * d = 2048).
            heads=$((2048 / d))
            "$bin" --batch 16 --seqlen 4096 --heads "$heads" --head-dim "$d" --causal "$causal" \
                --csv "$T/results_$d.csv" >"$T/log_${d}_${shape}_$causal.txt" 2>&1 \
                || { echo "tune: d$d $shape causal=$causal failed: $(tail -2 "$T/log_${d}_${shape}_$causal.txt")"; continue; }
            tf=$(tail -n 1 "$T/results_$d.csv" | awk -F, '{print $(NF-5)}')
            ck=$(tail -n 1 "$T/results_$d.csv" | awk -F, '{print $(NF-2)}')
            echo "$d;$causal;$shape;$tf;$ck" >>"$T/results.csv"
            printf 'd=%-3s causal=%s  %-12s  %8s TFLOP/s  %s\n' "$d" "$causal" "$shape" "$tf" "$ck"
        done
    done
done

echo
echo "winners (head_dim, causal -> kBlockM,kBlockN,kNWarps,kMinBlocks):"
sort -t";" -k1,1n -k2,2n -k4,4gr "$T/results.csv" | awk -F";" '$5 == "pass" && !seen[$1","$2]++ {print "  d=" $1 " causal=" $2 " -> " $3 "  " $4 " TFLOP/s"}' | tee "$T/winners.txt"
