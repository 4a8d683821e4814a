#!/usr/bin/env bash
# compute-sanitizer on small problems (tails, seqlen_q != seqlen_k, causal, GQA), every stage:
# memcheck (out-of-bounds and misaligned accesses), racecheck (shared-memory hazards: a missing
# barrier), synccheck (barriers in divergent code). Needs a GPU; usage: test_sanitizer.sh BINARY
# SANITIZER_TOOLS picks the tools (default "memcheck racecheck synccheck"; make sanitize adds initcheck),
# SANITIZER_STAGES the stages (default every stage of the tree, e.g. SANITIZER_STAGES="8").
set -u
BIN=${1:-build/allstages}
TOOLS=${SANITIZER_TOOLS:-memcheck racecheck synccheck}
if ! command -v compute-sanitizer >/dev/null 2>&1; then
    echo "SKIP: compute-sanitizer not found"; exit 0
fi
# Small enough for racecheck, large enough for several K/V tiles, a Q tail and a K tail.
PROBLEM="--batch 1 --seqlen-q 150 --seqlen-k 203 --heads 2 --kv-heads 1 --causal 1 --warmup 0 --iters 1"
for stage in ${SANITIZER_STAGES:-$(ls -d kernel0*_*/ 2>/dev/null | sed 's/^kernel0*\([0-9]*\)_.*/\1/')}; do
    for tool in $TOOLS; do
        for d in 64 128; do
            log=$(mktemp)
            if compute-sanitizer --tool "$tool" --error-exitcode 9 "$BIN" --stage "$stage" $PROBLEM --head-dim "$d" >"$log" 2>&1; then
                echo "PASS: stage $stage $tool d$d"
            else
                echo "FAIL: stage $stage $tool d$d: $(grep -m3 -E 'ERROR|Error|error|hazard|FAIL' "$log" | tr '\n' ' ')"
            fi
            rm -f "$log"
        done
    done
done
exit 0
