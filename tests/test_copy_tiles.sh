#!/usr/bin/env bash
# Stage 08 copies two K/V tiles per barrier where two blocks' shared memory fits an SM (Hopper),
# and one tile elsewhere (A100, RTX 30xx/40xx). A GPU runs only one of the two paths, so this
# rebuilds stage 08 with FLASH_COPY_TILES=1 forced and runs the correctness matrix and
# racecheck/synccheck on it: both paths are then checked on a Hopper card. Needs a GPU and the
# harness objects of `make all`. Usage: tests/test_copy_tiles.sh
set -u
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
ARCH="-gencode arch=compute_${cc:-90},code=sm_${cc:-90}"
B=build/copy_tiles1
mkdir -p "$B"
if ! $NVCC -O3 -std=c++17 $ARCH -Icommon -Xcompiler -fPIC -DFLASH_COPY_TILES=1 -c kernel08_final/kernel.cu -o "$B/kernel08.o" \
        || ! $NVCC $ARCH "$B/kernel08.o" build/harness/*.o build/common/flash_api.o -o "$B/run" -lcudart -lm; then
    echo "FAIL: stage 08 with FLASH_COPY_TILES=1 does not build"; exit 1
fi
echo "PASS: stage 08 with FLASH_COPY_TILES=1 builds"
"$B/run" --stage 8 --matrix
SANITIZER_STAGES=8 SANITIZER_TOOLS="racecheck synccheck" bash tests/test_sanitizer.sh "$B/run"
