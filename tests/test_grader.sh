#!/usr/bin/env bash
# Proves the grader (make grade, tools/grade.sh) on stage 05: the real kernel05 must PASS, and each
# wrong file of tools/make_grader_fixtures.sh must FAIL for its own reason:
#   wrong_causal.cu     -> [matrix]        (and not for its instructions: the technique is there)
#   missing_barrier.cu  -> [racecheck]     (a shared-memory hazard)
#   previous_stage.cu   -> [instructions]  (no swizzle xor); whether the timing also caught it
#                                          ("not faster than stage 04") is reported
# and for each Hopper assignment NN (09 on), stage NN-1 handed in as stage NN must FAIL
# [instructions]: the PTX/SASS checks see the missing technique without a GPU, so these are graded
# with the GPU hidden (CUDA_VISIBLE_DEVICES=) on every machine, which keeps them quick.
# Prints PASS:/FAIL:/SKIP: lines. Without a GPU, the CPU part still runs (fixtures generate, the
# build and instruction checks of the grader, the NOT GRADED exit status) and the GPU
# expectations are SKIP lines. Usage: bash tests/test_grader.sh   (ARCH=... is passed to make)
set -u
cd "$(dirname "$0")/.."
OUT=build/test-grader
mkdir -p "$OUT"
MAKE_ARGS=()
[ -n "${ARCH:-}" ] && MAKE_ARGS+=("ARCH=$ARCH")

. tests/lib.sh

if bash tools/make_grader_fixtures.sh build/grader_fixtures >"$OUT/fixtures.log" 2>&1; then
    ok "grader fixtures generate from kernel05/kernel04"
else
    bad "grader fixtures generate" "$(tail -2 "$OUT/fixtures.log")"
    exit 0
fi

# grade NAME FILE: make grade K=05 SRC=FILE into $OUT/NAME.log; sets rc. make exits 2 whenever the
# recipe fails, so tools/grade.sh's own status (1 FAIL, 2 NOT GRADED) is told by its GRADE line.
grade() {
    make -s grade K=05 SRC="$2" "${MAKE_ARGS[@]}" >"$OUT/$1.log" 2>&1
    rc=$?
}
# reasons NAME: the "  - [tag] ..." lines of the verdict
has_reason() { grep -q "^  - \[$2\]" "$OUT/$1.log"; }
is_fail() { grep -q "^GRADE: FAIL" "$OUT/$1.log"; }
verdict() { grep -m1 '^GRADE:' "$OUT/$1.log" || echo "(no GRADE line; see $OUT/$1.log)"; }

# The Hopper assignments: the previous stage handed in fails on its instructions, GPU or not.
for f in build/grader_fixtures/previous_stage_[0-9][0-9].cu; do
    [ -e "$f" ] || continue
    nn=${f%.cu}; nn=${nn##*_}
    name=previous_stage_$nn
    CUDA_VISIBLE_DEVICES= make -s grade K="$nn" SRC="$f" "${MAKE_ARGS[@]}" >"$OUT/$name.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && is_fail "$name" && has_reason "$name" instructions && ! has_reason "$name" build; then
        ok "grade $name.cu (stage $(printf '%02d' $((10#$nn - 1))) as $nn) -> FAIL [instructions] ($(grep -m1 '^FAIL: student' "$OUT/$name.log" | cut -c7-90))"
    else
        bad "grade $name.cu -> FAIL [instructions]" "exit $rc, $(verdict "$name"); $(grep '^  - ' "$OUT/$name.log" | tr '\n' ' ') (log: $OUT/$name.log)"
    fi
done

gpu=0
if make -s build/allstages "${MAKE_ARGS[@]}" >/dev/null 2>&1 && build/allstages --gpu-slug >/dev/null 2>&1; then gpu=1; fi

if [ "$gpu" = 0 ]; then
    # The CPU part: build + instruction checks run; without a GPU a correct file is NOT GRADED (2).
    grade real kernel05_swizzle/kernel.cu
    if [ "$rc" -ne 0 ] && grep -q '^GRADE: NOT GRADED' "$OUT/real.log"; then
        ok "real kernel05 without a GPU: NOT GRADED, build and instruction checks passed"
    else
        bad "real kernel05 without a GPU" "exit $rc, $(verdict real)"
    fi
    grade previous_stage build/grader_fixtures/previous_stage.cu
    if [ "$rc" -ne 0 ] && grep -q '^GRADE: FAIL' "$OUT/previous_stage.log" && has_reason previous_stage instructions; then
        ok "previous_stage.cu without a GPU: FAIL [instructions] (no swizzle xor)"
    else
        bad "previous_stage.cu without a GPU" "exit $rc, $(verdict previous_stage)"
    fi
    for f in wrong_causal missing_barrier; do
        grade "$f" "build/grader_fixtures/$f.cu"
        if [ "$rc" -ne 0 ] && grep -q '^GRADE: NOT GRADED' "$OUT/$f.log"; then
            ok "$f.cu without a GPU: builds, passes the instruction checks, NOT GRADED"
        else
            bad "$f.cu without a GPU" "exit $rc, $(verdict "$f")"
        fi
    done
    skip "grade real kernel05 -> PASS" "no CUDA device here"
    skip "grade wrong_causal.cu -> FAIL [matrix]" "no CUDA device here"
    skip "grade missing_barrier.cu -> FAIL [racecheck]" "no CUDA device here"
    skip "grade previous_stage.cu -> FAIL [instructions] / [timing]" "no CUDA device here"
    skip "grade without compute-sanitizer -> NOT GRADED" "no CUDA device here"
    finish; exit
fi

# -- on a GPU ------------------------------------------------------------------------------------
grade real kernel05_swizzle/kernel.cu
if [ "$rc" -eq 0 ] && grep -q '^GRADE: PASS' "$OUT/real.log"; then
    ok "grade real kernel05 -> PASS ($(grep -m1 '^PASS: faster than' "$OUT/real.log" | sed 's/^PASS: //'))"
else
    bad "grade real kernel05 -> PASS" "exit $rc, $(verdict real); $(grep '^  - ' "$OUT/real.log" | tr '\n' ' ') (log: $OUT/real.log)"
fi

grade wrong_causal build/grader_fixtures/wrong_causal.cu
if [ "$rc" -ne 0 ] && is_fail wrong_causal && has_reason wrong_causal matrix && ! has_reason wrong_causal instructions && ! has_reason wrong_causal build; then
    ok "grade wrong_causal.cu -> FAIL [matrix] ($(grep -m1 '^  - \[matrix\]' "$OUT/wrong_causal.log" | cut -c1-100))"
else
    bad "grade wrong_causal.cu -> FAIL [matrix]" "exit $rc, $(verdict wrong_causal); $(grep '^  - ' "$OUT/wrong_causal.log" | tr '\n' ' ') (log: $OUT/wrong_causal.log)"
fi

grade missing_barrier build/grader_fixtures/missing_barrier.cu
if [ "$rc" -ne 0 ] && is_fail missing_barrier && has_reason missing_barrier racecheck; then
    ok "grade missing_barrier.cu -> FAIL [racecheck] ($(grep '^  - ' "$OUT/missing_barrier.log" | cut -d' ' -f4 | sort -u | tr '\n' ' '))"
elif ! command -v compute-sanitizer >/dev/null 2>&1; then
    skip "grade missing_barrier.cu -> FAIL [racecheck]" "compute-sanitizer not found (exit $rc, $(verdict missing_barrier))"
else
    bad "grade missing_barrier.cu -> FAIL [racecheck]" "exit $rc, $(verdict missing_barrier); $(grep '^  - ' "$OUT/missing_barrier.log" | tr '\n' ' ') (log: $OUT/missing_barrier.log)"
fi

grade previous_stage build/grader_fixtures/previous_stage.cu
if [ "$rc" -ne 0 ] && is_fail previous_stage && has_reason previous_stage instructions && ! has_reason previous_stage matrix; then
    if has_reason previous_stage timing; then t="and [timing]: not faster than stage 04"; else t="the timing alone did not catch it: $(grep -m1 'faster than stage 04' "$OUT/previous_stage.log")"; fi
    ok "grade previous_stage.cu -> FAIL [instructions] ($t)"
else
    bad "grade previous_stage.cu -> FAIL [instructions]" "exit $rc, $(verdict previous_stage); $(grep '^  - ' "$OUT/previous_stage.log" | tr '\n' ' ') (log: $OUT/previous_stage.log)"
fi

# A gate that cannot run never passes: without compute-sanitizer the real stage is NOT GRADED.
COMPUTE_SANITIZER=/nonexistent/compute-sanitizer grade no_sanitizer kernel05_swizzle/kernel.cu
if [ "$rc" -ne 0 ] && grep -q '^GRADE: NOT GRADED' "$OUT/no_sanitizer.log" && grep -q 'racecheck: .*not found' "$OUT/no_sanitizer.log"; then
    ok "grade without compute-sanitizer -> NOT GRADED (racecheck could not run)"
else
    bad "grade without compute-sanitizer -> NOT GRADED" "exit $rc, $(verdict no_sanitizer) (log: $OUT/no_sanitizer.log)"
fi
finish
