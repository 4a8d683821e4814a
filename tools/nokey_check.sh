#!/usr/bin/env bash
# The problem a new user met: causal with seqlen_q - seqlen_k = 995, so whole query tiles of every
# stage see no key, at B64 H16 (it fills the GPU). Ten checked runs of every stage per head_dim,
# then compute-sanitizer racecheck on the same command for every stage and head_dim. Prints one
# line per result; exits 1 if any run failed or any hazard was found.
# Usage: tools/nokey_check.sh [BINARY]   (default build/allstages)
# Without compute-sanitizer or a usable GPU it exits 2 at once, naming what is missing.
set -u
cd "$(dirname "$0")/.."
BIN=${1:-build/allstages}
command -v compute-sanitizer >/dev/null 2>&1 || { echo "nokey_check: compute-sanitizer not found on this machine (not on PATH); it" \
    "comes with the CUDA toolkit, in its bin/" >&2; exit 2; }
"$BIN" --gpu-slug >/dev/null || exit 2  # no usable GPU: --gpu-slug says why
PROBLEM="--batch 64 --seqlen-q 1000 --seqlen-k 5 --heads 16 --causal 1"
log=$(mktemp)
fails=0
for d in 64 128; do
    for run in 1 2 3 4 5 6 7 8 9 10; do
        # shellcheck disable=SC2086
        if "$BIN" --stage all $PROBLEM --head-dim "$d" --iters 3 >"$log" 2>&1; then
            echo "nokey d$d run $run: $(grep -c ' PASS$' "$log") stages PASS"
        else
            fails=$((fails + 1)); echo "nokey d$d run $run: FAILED"; grep -E 'FAIL|error' "$log" | head -5
        fi
    done
done
for s in $(seq 1 "$(ls -d kernel[0-9][0-9]_*/ | wc -l)"); do
    for d in 64 128; do
        # shellcheck disable=SC2086
        if compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN" --stage "$s" $PROBLEM --head-dim "$d" \
                --no-check --warmup 0 --iters 1 >"$log" 2>&1; then
            echo "nokey racecheck stage $s d$d: clean ($(grep -m1 'RACECHECK SUMMARY' "$log" || echo no summary))"
        else
            fails=$((fails + 1)); echo "nokey racecheck stage $s d$d: FAILED"; grep -m5 -E 'hazard|ERROR|SUMMARY' "$log"
        fi
    done
done
rm -f "$log"
echo "nokey: $fails failures"
[ "$fails" -eq 0 ]
