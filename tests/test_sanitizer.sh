#!/usr/bin/env bash
# compute-sanitizer on every stage: memcheck (out-of-bounds and misaligned accesses), racecheck
# (shared-memory hazards: a missing barrier), synccheck (barriers in divergent code), on the small
# problems of tests/lib.sh (tails; whole query tiles that see no key), head_dim 64 and 128, bf16
# and, on the stages that take it, e4m3.
# Usage (through make test / make sanitize): test_sanitizer.sh BINARY
# SANITIZER_TOOLS picks the tools (default "memcheck racecheck synccheck"; make sanitize adds
# initcheck unless SANITIZER_TOOLS is set), SANITIZER_STAGES the stage numbers (default every
# stage, e.g. SANITIZER_STAGES="8"), SANITIZER_PROBLEMS the problems of tests/lib.sh (default all
# five, e.g. SANITIZER_PROBLEMS=long).
# A stage this GPU cannot run is skipped with the reason ./run gives.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
BIN=${1:-$BUILD/allstages}
TOOLS=${SANITIZER_TOOLS:-memcheck racecheck synccheck}
if ! command -v compute-sanitizer >/dev/null 2>&1; then
    skip "compute-sanitizer" "not found on this machine"; finish; exit
fi
stage_numbers() { local e; for e in $STAGE_TABLE; do echo "${e%%:*}"; done | sed 's/^0//'; }
for stage in ${SANITIZER_STAGES:-$(stage_numbers)}; do
    # A stage the GPU cannot run: ./run refuses it (exit 2) naming what it needs.
    if ! "$BIN" --stage "$stage" --batch 1 --seqlen 16 --heads 1 --head-dim 64 --iters 1 --warmup 0 >/dev/null 2>"$BUILD/sanitizer.err"; then
        if grep -q "needs" "$BUILD/sanitizer.err"; then skip "stage $stage sanitizer" "$(head -1 "$BUILD/sanitizer.err")"; continue; fi
    fi
    # e4m3 too where the stage takes it (./run refuses it elsewhere, exit 2, naming the dtype).
    dtypes=bf16
    "$BIN" --stage "$stage" --dtype e4m3 --batch 1 --seqlen 16 --heads 1 --head-dim 64 --iters 1 --warmup 0 >/dev/null 2>&1 && dtypes="bf16 e4m3"
    for dtype in $dtypes; do
        for tool in $TOOLS; do
            for name in $SANITIZER_PROBLEMS; do
                for d in 64 128; do
                    log=$BUILD/sanitizer.log
                    if compute-sanitizer --tool "$tool" --error-exitcode 9 "$BIN" --stage "$stage" $(sanitizer_problem "$name") \
                            --head-dim "$d" --dtype "$dtype" --warmup 0 --iters 1 >"$log" 2>&1; then
                        ok "stage $stage $tool $name d$d $dtype"
                    else
                        bad "stage $stage $tool $name d$d $dtype" "$(grep -m3 -E 'ERROR|Error|error|hazard|FAIL' "$log" | tr '\n' ' ')"
                        cp "$log" "$BUILD/sanitizer.stage$stage.$tool.$name.d$d.$dtype.log"
                    fi
                done
            done
        done
    done
done
finish
