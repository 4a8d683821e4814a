#!/usr/bin/env bash
# compute-sanitizer on every stage: memcheck (out-of-bounds and misaligned accesses), racecheck
# (shared-memory hazards: a missing barrier), synccheck (barriers in divergent code), on the small
# problems of tests/lib.sh (tails; whole query tiles that see no key), head_dim 64 and 128, bf16
# and, on the stages that take it, e4m3.
# Usage (through make test / make sanitize): test_sanitizer.sh BINARY
# SANITIZER_TOOLS picks the tools (default "memcheck racecheck synccheck"; make sanitize adds
# initcheck unless SANITIZER_TOOLS is set), SANITIZER_STAGES the stage numbers (default every
# stage, e.g. SANITIZER_STAGES="8"), SANITIZER_PROBLEMS the problems of tests/lib.sh (default all
# five, e.g. SANITIZER_PROBLEMS=long), SANITIZER_JOBS how many sanitizer runs go at once (default
# the CPU count, at most 8: run_in_parallel in tests/lib.sh says why).
# A stage this GPU cannot run is skipped with the reason ./run gives.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
BIN=${1:-$BUILD/allstages}
TOOLS=${SANITIZER_TOOLS:-memcheck racecheck synccheck}
JOBS=$(sanitizer_jobs "${SANITIZER_JOBS:-}")
# Inside make test a machine without compute-sanitizer skips these; make sanitize, asked for
# directly, has already stopped with exit 2 naming it (need_program in the Makefile).
if ! command -v compute-sanitizer >/dev/null 2>&1; then
    skip "compute-sanitizer" "not found on this machine"; finish; exit
fi
LOGS=$BUILD/sanitizer
rm -rf "$LOGS"; mkdir -p "$LOGS"

# sanitize_case STAGE TOOL PROBLEM HEAD_DIM DTYPE: one sanitizer run (sanitizer_run, tests/lib.sh),
# its output in $LOGS/<case>.log and its exit status in <case>.log.rc.
sanitize_case() { sanitizer_run "$LOGS/stage$1.$2.$3.d$4.$5.log" compute-sanitizer "$BIN" "$@"; }
export -f sanitize_case sanitizer_run sanitizer_problem
export BIN LOGS

stage_numbers() { local e; for e in $STAGE_TABLE; do echo "${e%%:*}"; done | sed 's/^0//'; }
cases=()
for stage in ${SANITIZER_STAGES:-$(stage_numbers)}; do
    # A stage the GPU cannot run: ./run refuses it (exit 2) naming what it needs.
    if ! "$BIN" --stage "$stage" --batch 1 --seqlen 16 --heads 1 --head-dim 64 --iters 1 --warmup 0 >/dev/null 2>"$LOGS/probe.err"; then
        if grep -q "needs" "$LOGS/probe.err"; then skip "stage $stage sanitizer" "$(head -1 "$LOGS/probe.err")"; continue; fi
    fi
    # e4m3 too where the stage takes it (./run refuses it elsewhere, exit 2, naming the dtype).
    dtypes=bf16
    "$BIN" --stage "$stage" --dtype e4m3 --batch 1 --seqlen 16 --heads 1 --head-dim 64 --iters 1 --warmup 0 >/dev/null 2>&1 && dtypes="bf16 e4m3"
    for dtype in $dtypes; do
        for tool in $TOOLS; do
            for name in $SANITIZER_PROBLEMS; do
                for d in 64 128; do
                    cases+=("$stage $tool $name $d $dtype")
                done
            done
        done
    done
done

# Run them JOBS at a time, then report every case in the order above.
run_in_parallel "$JOBS" sanitize_case "${cases[@]}"
for c in "${cases[@]}"; do
    read -r stage tool name d dtype <<<"$c"
    case_name="stage$stage.$tool.$name.d$d.$dtype"
    if [ "$(cat "$LOGS/$case_name.log.rc" 2>/dev/null)" = 0 ]; then
        ok "stage $stage $tool $name d$d $dtype"
    else
        bad "stage $stage $tool $name d$d $dtype" \
            "$(grep -m3 -E 'ERROR|Error|error|hazard|FAIL' "$LOGS/$case_name.log" | tr '\n' ' ') (log: $LOGS/$case_name.log)"
    fi
done
finish
