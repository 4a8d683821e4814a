#!/usr/bin/env bash
# Stage 08 copies two K/V tiles per barrier where two blocks' shared memory fits an SM (Hopper),
# and one tile elsewhere (A100, RTX 30xx/40xx). A GPU runs only one of the two paths, so this
# rebuilds stage 08 with FLASH_COPY_TILES=1 forced and runs the correctness matrix and
# racecheck/synccheck on it: both paths are then checked on a Hopper card. Needs a GPU and the
# harness objects of `make all`; runs from make test.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
B=$BUILD/copy_tiles1
mkdir -p "$B"
# shellcheck disable=SC2086
if ! "$NVCC" $NVFLAGS $ARCH_HERE -DFLASH_COPY_TILES=1 -c kernel08_final/kernel.cu -o "$B/kernel08.o" 2>"$B/build.log" \
        || ! "$NVCC" $ARCH_HERE "$B/kernel08.o" "$BUILD"/harness/*.o "$BUILD"/common/*.o -o "$B/run" $LDLIBS 2>>"$B/build.log"; then
    bad "stage 08 with FLASH_COPY_TILES=1 builds" "$(head -5 "$B/build.log" | tr '\n' ' ')"; finish; exit
fi
ok "stage 08 with FLASH_COPY_TILES=1 builds"
"$B/run" --stage 8 --matrix
SANITIZER_STAGES=8 SANITIZER_TOOLS="racecheck synccheck" bash tests/test_sanitizer.sh "$B/run"
