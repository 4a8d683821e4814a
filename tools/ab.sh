#!/usr/bin/env bash
# make ab K=NN AB="name=MACRO=VALUE ...;name2=..." [AB_BASE_SRC=file.cu] [AB_ROUNDS=2]: is a change
# to stage NN faster? Builds the stage once as the base (its kernel.cu as it is, or AB_BASE_SRC: an
# older copy of it, to time a change against what came before) and once per variant (the stage's
# kernel.cu with the variant's macros forced in: "FLASH_CAUSAL_HEAD_GROUP=4", or a tile
# "FLASH_TILE_D128=128,128,2,232,2,1,0,0"; an empty list builds the file as it is; a name
# "name:FILE" builds FILE instead of kernel.cu, an older or a candidate copy of it), the builds
# side by side. Then AB_ROUNDS rounds, each timing every build's sweep in turn (even rounds in the
# reverse order), so that all of them meet the same clocks and power limit (docs/measuring.md). The rows, harness output as it is, go to
# plots/ab/<gpu>_NN_<commit>/base.csv and <name>.csv, a directory per run (emptied first);
# tools/results_md.py turns one into the <!-- AB:NN,<commit> --> table of per-point ratios to the
# base. AB_ARGS adds ./run arguments to every sweep (AB_ARGS="--dtype e4m3": that dtype's sweep
# alone; a stage that takes e4m3 runs both otherwise). Runs from `make ab`.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
T=$BUILD/ab
mkdir -p "$T"
NN=${AB_STAGE:?make ab needs K=NN}
stage_lookup "$NN"
DIR=$STAGE_DIR GENCODE=$STAGE_GENCODE_HERE
[ -n "$DIR" ] || { echo "make ab: no stage $NN" >&2; exit 2; }
[ -n "${AB:-}" ] || { echo "make ab: AB names no variant (AB=\"name=MACRO=VALUE ...;...\")" >&2; exit 2; }
BASE_SRC=${AB_BASE_SRC:-$DIR/kernel.cu}
[ -f "$BASE_SRC" ] || { echo "make ab: AB_BASE_SRC: no file $BASE_SRC" >&2; exit 2; }

build() {  # build NAME SOURCE [MACRO=VALUE ...]: build/ab/NAME, or a message and no binary
    local name=$1 src=$2 m hdr="$T/$1.h"
    shift 2
    : >"$hdr"
    for m in "$@"; do printf '#define %s %s\n' "${m%%=*}" "${m#*=}" >>"$hdr"; done
    build_variant "$src" "$hdr" "$T/$name.o" "$T/$name" "$GENCODE"
    case $? in
    0) return 0 ;;
    2) echo "make ab: $name spills; a spilling build is not timed" >&2 ;;
    *) echo "make ab: $name does not build: $(grep -m1 error "$T/$name.o.ptxas.txt")" >&2 ;;
    esac
    return 1
}

IFS=';' read -r -a specs <<<"$AB"
for spec in "${specs[@]}"; do
    name=${spec%%=*}
    src=${name#*:}
    name=${name%%:*}
    [ "$src" = "$name" ] || [ -f "$src" ] || { echo "make ab: variant $name: no file $src" >&2; exit 2; }
    case $name in ''|base|*[!A-Za-z0-9_]*) echo "make ab: '$name': a variant's name is letters, digits and _, and not base" >&2; exit 2 ;; esac
done
# The builds run side by side (each is one nvcc of one file), the timing only once all are done.
names=(base)
build base "$BASE_SRC" &
pids=($!)
for spec in "${specs[@]}"; do
    name=${spec%%=*}
    macros=${spec#"$name"}; macros=${macros#=}
    src=$DIR/kernel.cu
    case $name in *:*) src=${name#*:}; name=${name%%:*} ;; esac
    # shellcheck disable=SC2086
    build "$name" "$src" $macros &
    pids+=($!)
    names+=("$name")
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || exit 1

slug=$("$T/base" --gpu-slug) || exit 1
OUTDIR=plots/ab/${slug}_${NN}_${COMMIT:-unknown}
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/*.csv
# Odd rounds take the builds in order, even rounds in reverse: a build's place in a round moves its
# figures (docs/measuring.md), and pairs of rounds cancel that.
reversed=()
for ((i = ${#names[@]} - 1; i >= 0; --i)); do reversed+=("${names[i]}"); done
for round in $(seq 1 "${AB_ROUNDS:-2}"); do
    order=("${names[@]}")
    [ $((round % 2)) = 0 ] && order=("${reversed[@]}")
    for name in "${order[@]}"; do
        echo "round $round: $name"
        # shellcheck disable=SC2086
        timeout 300 "$T/$name" --stage "$((10#$NN))" --sweep ${AB_ARGS:-} --csv "$OUTDIR/$name.csv" >"$T/$name.log" 2>&1 ||
            { echo "make ab: $name failed: $(tail -n 2 "$T/$name.log")" >&2; exit 1; }
    done
done
echo "make ab: rows in $OUTDIR/ (tools/results_md.py --write fills <!-- AB:$NN,${COMMIT:-unknown} --> from them)"
