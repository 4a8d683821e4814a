#!/usr/bin/env bash
# make tune [K=NN]: time candidate tile shapes of a stage (default 08) on the present GPU and record
# the winner per (head_dim, causal). Each candidate is the stage rebuilt with -DFLASH_TILE_D64 /
# -DFLASH_TILE_D128 = the numbers of its TileShape (stage 08: "kBlockM, kBlockN, kNWarps,
# kMinBlocks"; stage 09: "kBlockM, kBlockN, kNWarpgroups, kMinBlocks"; stage 10: the same and
# kStages; stages 11 to 13: kBlockM, kBlockN, consumer warpgroups, consumer registers,
# kStages, blocks/SM; stages 14 and 15 add the cluster size; stage 15 builds each as its causal
# tile too, and keeps its short causal tile, which the timed problem never runs).
# The shapes that ship are the defaults compiled into the kernel.cu, never searched at run time.
# Candidates that spill are reported and skipped. Every timing is a checked ./run, appended to
# $TUNE_CSV (default build/tune/results.csv) with the candidate in the name column
# ("kernel08_final 128x32x4x2"). Runs from `make tune`.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
T=$BUILD/tune
mkdir -p "$T"
CSV=${TUNE_CSV:-$T/results.csv}
rm -f "$T"/bin_* "$T"/winners.txt

NN=${TUNE_STAGE:-08}
stage_lookup "$NN"
DIR=$STAGE_DIR GENCODE=$STAGE_GENCODE_HERE
[ -n "$DIR" ] || { echo "make tune: no stage $NN" >&2; exit 2; }

case $NN in
08) DEF_D128="128,32,4,2 128,48,4,2 128,64,4,2 64,64,4,2 64,32,4,3 128,64,8,1"
    DEF_D64="128,64,4,2 128,48,4,2 128,96,4,2 128,32,4,2 64,64,4,2 64,64,4,3" ;;
09) DEF_D128="128,128,2,1 128,64,2,1 192,128,3,1"
    DEF_D64="128,128,2,1 128,64,2,2 192,128,3,1" ;;
10) DEF_D128="128,128,2,1,3 128,128,2,1,2 128,64,2,1,4"
    DEF_D64="128,64,2,2,3 128,64,2,2,2 128,64,2,2,4 128,128,2,1,2" ;;
11) DEF_D128="128,128,2,240,2,1 128,128,2,240,3,1 128,176,2,240,2,1"
    DEF_D64="128,128,2,240,2,1 192,64,3,160,2,1 192,64,3,160,3,1" ;;
12) DEF_D128="128,128,2,240,2,1 128,128,2,240,3,1 128,176,2,240,2,1"
    DEF_D64="128,128,2,240,2,1 128,128,2,240,3,1" ;;
13) DEF_D128="128,128,2,232,2,1 128,96,2,232,2,1 128,64,2,232,4,1"
    DEF_D64="128,128,2,232,2,1 128,96,2,232,2,1 128,64,2,232,4,1" ;;
14) DEF_D128="128,128,2,232,2,1,2 128,128,2,232,2,1,1 128,96,2,232,2,1,2"
    DEF_D64="128,128,2,232,2,1,1 128,128,2,232,2,1,2" ;;
15) DEF_D128="128,128,2,232,2,1,2 128,96,2,232,2,1,2 128,128,2,232,2,1,1"
    DEF_D64="192,128,3,160,2,1,1 192,128,3,160,3,1,1 192,96,3,160,2,1,1 128,128,2,232,2,1,1" ;;
*)  echo "make tune: stage $NN has no tile candidates (tools/tune.sh)" >&2; exit 2 ;;
esac
CANDIDATES_D128=${CANDIDATES_D128:-$DEF_D128}
CANDIDATES_D64=${CANDIDATES_D64:-$DEF_D64}

build_candidate() {  # build_candidate D SHAPE -> prints the binary path, or nothing if it spills
    local d=$1 shape=$2 tag
    tag="d${d}_$(echo "$shape" | tr ',' '_')"
    local obj="$T/kernel${NN}_$tag.o" bin="$T/run_$tag" hdr="$T/tile_$tag.h"
    printf "#define FLASH_TILE_D%s %s\n" "$d" "$shape" >"$hdr"
    # Stage 15's causal kernels have tile macros of their own: a candidate is timed as both, its
    # causal build without a cluster (the last number), which a causal grid cannot take.
    [ "$NN" = 15 ] && printf "#define FLASH_TILE_D%s_CAUSAL %s,1\n" "$d" "${shape%,*}" >>"$hdr"
    build_variant "$DIR/kernel.cu" "$hdr" "$obj" "$bin" "$GENCODE"
    case $? in
    0) echo "$bin" ;;
    2) echo "tune: d$d $shape spills, skipped" >&2 ;;
    *) echo "tune: $tag does not build: $(grep -m1 error "$obj.ptxas.txt")" >&2 ;;
    esac
}

# Build every candidate in parallel (they are independent), then time them one by one.
for d in 128 64; do
    var="CANDIDATES_D$d"
    for shape in ${!var}; do
        build_candidate "$d" "$shape" >"$T/bin_${d}_$shape" &
    done
done
wait

results=$T/results.txt
: >"$results"
for d in 128 64; do
    var="CANDIDATES_D$d"
    for shape in ${!var}; do
        bin=$(cat "$T/bin_${d}_$shape")
        [ -n "$bin" ] || { echo "d=$d $shape: spills (skipped)"; continue; }
        for causal in 0 1; do
            # The headline problem, with heads * head_dim kept at 2048 for d64 (the sweep's 4k point).
            log="$T/log_${d}_${shape}_$causal.txt"
            # A candidate that hangs (a setmaxnreg split the block cannot pay, say) fails, after 120 s.
            if ! timeout 120 "$bin" --stage "$((10#$NN))" --head-dim "$d" --heads $((2048 / d)) --causal "$causal" --csv "$T/last.csv" >"$log" 2>&1; then
                echo "tune: d$d $shape causal=$causal failed: $(tail -2 "$log")"; continue
            fi
            # Name the candidate in the row, then keep it: the CSV is the record of this tuning run.
            # Columns are found by their header names.
            [ -s "$CSV" ] || head -n 1 "$T/last.csv" >"$CSV"
            awk -F, -v OFS=, -v s="$(echo "$shape" | tr ',' 'x')" \
                'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next } { $col["name"] = $col["name"] " " s; print }' \
                "$T/last.csv" >>"$CSV"
            tf=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next } { print $col["tflops"] }' "$T/last.csv")
            ck=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next } { print $col["check"] }' "$T/last.csv")
            rm -f "$T/last.csv"
            echo "$d;$causal;$shape;$tf;$ck" >>"$results"
            printf 'd=%-3s causal=%s  %-12s  %8s TFLOP/s  %s\n' "$d" "$causal" "$shape" "$tf" "$ck"
        done
    done
done

if [ ! -s "$results" ]; then
    echo "make tune: no candidate was timed (see the messages above)" >&2
    exit 1
fi
echo
echo "winners of $DIR (head_dim, causal -> the TileShape numbers):"
sort -t";" -k1,1n -k2,2n -k4,4gr "$results" | awk -F";" '$5 == "pass" && !seen[$1","$2]++ {print "  d=" $1 " causal=" $2 " -> " $3 "  " $4 " TFLOP/s"}' | tee "$T/winners.txt"
echo "rows: $CSV"
