#!/usr/bin/env bash
# Proves the grader (make grade, tools/grade.sh) on stage 05: the real kernel05 must PASS, and each
# wrong file of tools/make_grader_fixtures.sh must FAIL for its own reason:
#   wrong_causal.cu     -> [matrix]        (and not for its instructions: the technique is there)
#   missing_barrier.cu  -> [racecheck]     (a shared-memory hazard)
#   previous_stage.cu   -> [instructions]  (no swizzle xor); whether the timing also caught it
#                                          ("not faster than stage 04") is reported
# for each Hopper assignment NN (09 on), stage NN-1 handed in as stage NN must FAIL
# [instructions]: the PTX/SASS checks see the missing technique without a GPU, so these are graded
# with the GPU hidden (CUDA_VISIBLE_DEVICES=) on every machine, which keeps them quick (stage 15 as
# 16 also fails [symbol]: it has no e4m3 entry point);
# and on stage 16, the first that takes e4m3 inputs, where the grader also grades e4m3: the real
# kernel16 must PASS (its e4m3 against stage 15's bf16 in the timing), and
#   fp8_entry_misnamed.cu -> [symbol] alone, GPU or not (its instructions are all there)
#   wrong_key_order.cu    -> [matrix], from e4m3 cases alone (P's key order is not V^T's)
# Prints PASS:/FAIL:/SKIP: lines. Without a GPU, the CPU part still runs (fixtures generate, the
# build, entry point and instruction checks of the grader, the NOT GRADED exit status) and the GPU
# expectations are SKIP lines. Usage: bash tests/test_grader.sh   (ARCH=... is passed to make)
set -u
cd "$(dirname "$0")/.."
OUT=build/test-grader
mkdir -p "$OUT"
MAKE_ARGS=()
[ -n "${ARCH:-}" ] && MAKE_ARGS+=("ARCH=$ARCH")

. tests/lib.sh

if bash tools/make_grader_fixtures.sh build/grader_fixtures >"$OUT/fixtures.log" 2>&1; then
    ok "grader fixtures generate from the real kernels (05 and 04, 16, each Hopper stage's previous one)"
else
    bad "grader fixtures generate" "$(tail -2 "$OUT/fixtures.log")"
    exit 0
fi

# grade NAME FILE [K]: make grade K=K (default 05) SRC=FILE into $OUT/NAME.log; sets rc. make exits 2
# whenever the recipe fails, so tools/grade.sh's own status (1 FAIL, 2 NOT GRADED) is told by its
# GRADE line.
grade() {
    make -s grade K="${3:-05}" SRC="$2" "${MAKE_ARGS[@]}" >"$OUT/$1.log" 2>&1
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
        also=""
        has_reason "$name" symbol && also=" and [symbol]"
        ok "grade $name.cu (stage $(printf '%02d' $((10#$nn - 1))) as $nn) -> FAIL [instructions]$also ($(grep -m1 '^FAIL: student' "$OUT/$name.log" | cut -c7-90))"
    else
        bad "grade $name.cu -> FAIL [instructions]" "exit $rc, $(verdict "$name"); $(grep '^  - ' "$OUT/$name.log" | tr '\n' ' ') (log: $OUT/$name.log)"
    fi
done

# Stage 16's e4m3 entry point under another name: the exports check sees it before anything runs, so
# no GPU is needed, and nothing else fails (the e4m3 path is compiled all the same).
grade fp8_entry_misnamed build/grader_fixtures/fp8_entry_misnamed.cu 16
if [ "$rc" -ne 0 ] && is_fail fp8_entry_misnamed && has_reason fp8_entry_misnamed symbol \
        && [ "$(grep -c '^  - \[' "$OUT/fp8_entry_misnamed.log")" -eq 1 ] && grep -q 'flash_forward_fp8_kernel16' "$OUT/fp8_entry_misnamed.log"; then
    ok "grade fp8_entry_misnamed.cu (K=16) -> FAIL [symbol] alone: no flash_forward_fp8_kernel16"
else
    bad "grade fp8_entry_misnamed.cu (K=16) -> FAIL [symbol] alone" "exit $rc, $(verdict fp8_entry_misnamed); $(grep '^  - ' "$OUT/fp8_entry_misnamed.log" | tr '\n' ' ') (log: $OUT/fp8_entry_misnamed.log)"
fi

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
    # Stage 16: both entry points and every e4m3 instruction are there, in the real stage and in the
    # one that packs P in the wrong key order; only the GPU can tell them apart.
    # Its timing gate, as the grader reads it from docs/assignments.md: e4m3 against stage 15's bf16,
    # with a margin above zero.
    grade real16 kernel16_fp8/kernel.cu 16
    gate=$(grep -m1 -oE 'timing gate: .*' "$OUT/real16.log")
    if [ "$rc" -ne 0 ] && grep -q '^GRADE: NOT GRADED' "$OUT/real16.log" && grep -q '^PASS: exports flash_forward_kernel16 and flash_forward_fp8_kernel16' "$OUT/real16.log" \
            && echo "$gate" | grep -qE '^timing gate: stage 16 in e4m3 against the real stage 15 in bf16, margin [1-9][0-9]*%$'; then
        ok "real kernel16 without a GPU: NOT GRADED, build, entry points and instruction checks passed; $gate"
    else
        bad "real kernel16 without a GPU" "exit $rc, $(verdict real16); ${gate:-no timing gate line}; $(grep -m3 '^FAIL' "$OUT/real16.log" | tr '\n' ' ')"
    fi
    grade wrong_key_order build/grader_fixtures/wrong_key_order.cu 16
    if [ "$rc" -ne 0 ] && grep -q '^GRADE: NOT GRADED' "$OUT/wrong_key_order.log"; then
        ok "wrong_key_order.cu without a GPU: builds, passes the instruction checks, NOT GRADED"
    else
        bad "wrong_key_order.cu without a GPU" "exit $rc, $(verdict wrong_key_order)"
    fi
    skip "grade real kernel05 -> PASS" "no CUDA device here"
    skip "grade wrong_causal.cu -> FAIL [matrix]" "no CUDA device here"
    skip "grade missing_barrier.cu -> FAIL [racecheck]" "no CUDA device here"
    skip "grade previous_stage.cu -> FAIL [instructions] / [timing]" "no CUDA device here"
    skip "grade without compute-sanitizer -> NOT GRADED" "no CUDA device here"
    skip "grade real kernel16 -> PASS (e4m3 against stage 15's bf16)" "no CUDA device here"
    skip "grade wrong_key_order.cu (K=16) -> FAIL [matrix], e4m3 cases alone" "no CUDA device here"
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

# -- stage 16 on a GPU: the e4m3 gates ------------------------------------------------------------
# The real stage passes them all: the e4m3 matrix cases and racecheck in e4m3, and the timing of its
# e4m3 against stage 15's bf16 with the margin of docs/assignments.md.
grade real16 kernel16_fp8/kernel.cu 16
if [ "$rc" -eq 0 ] && grep -q '^GRADE: PASS' "$OUT/real16.log" && grep -q '^PASS: racecheck .* e4m3$' "$OUT/real16.log"; then
    ok "grade real kernel16 -> PASS ($(grep -m1 '^PASS: faster than' "$OUT/real16.log" | sed 's/^PASS: //'), e4m3 against stage 15's bf16)"
else
    bad "grade real kernel16 -> PASS" "exit $rc, $(verdict real16); $(grep '^  - ' "$OUT/real16.log" | tr '\n' ' ') (log: $OUT/real16.log)"
fi

# P packed in another key order than V^T's: wrong in e4m3 alone. The matrix log lies in the grader's
# work directory, which holds it until the next grade of stage 16.
grade wrong_key_order build/grader_fixtures/wrong_key_order.cu 16
mlog=build/grade/k16/matrix.log
n_e4m3=$(grep -E '^FAIL ' "$mlog" 2>/dev/null | grep -c ' e4m3 ')
n_other=$(grep -E '^FAIL ' "$mlog" 2>/dev/null | grep -vc ' e4m3 ')
if [ "$rc" -ne 0 ] && is_fail wrong_key_order && has_reason wrong_key_order matrix && ! has_reason wrong_key_order instructions \
        && ! has_reason wrong_key_order build && ! has_reason wrong_key_order symbol && [ "$n_e4m3" -gt 0 ] && [ "$n_other" -eq 0 ]; then
    ok "grade wrong_key_order.cu (K=16) -> FAIL [matrix] ($n_e4m3 e4m3 cases fail, every bf16 and fp16 case passes)"
else
    bad "grade wrong_key_order.cu (K=16) -> FAIL [matrix], e4m3 cases alone" "exit $rc, $(verdict wrong_key_order); failing cases: $n_e4m3 e4m3, $n_other other; $(grep '^  - ' "$OUT/wrong_key_order.log" | tr '\n' ' ') (log: $OUT/wrong_key_order.log)"
fi
finish
