#!/usr/bin/env bash
# The grader of docs/assignments.md: `make grade K=05 SRC=path/to/student.cu` runs
#   tools/grade.sh 05 path/to/student.cu
# with the compiler, flags and stages of the Makefile (NVCC, NVFLAGS, STAGE_GENCODE: the stage's
# -gencode flags, LDLIBS, BUILD, STAGE_TABLE), LINK_OBJS (harness + API objects), PREV_NN (the
# previous stage, whose real object $BUILD/kernel$PREV_NN.o the student must beat), and STAGE_FP8 and
# PREV_FP8 (1 where the real stage NN, or the previous one, takes e4m3 inputs: the stage table's fp8
# column). It builds the student's file in place of stage NN under build/grade/kNN/ (the stage's own
# files and objects are never touched), then:
#   1. build      the file compiles with the stages' flags and exports flash_forward_kernelNN (and,
#                 for a stage that takes e4m3, flash_forward_fp8_kernelNN), no other entry point
#   2. instructions  the PTX/SASS checks of tests/stage_checks.sh for stage NN (the same ones as
#                 tests/test_instructions.sh), ptxas reports no spills, and for a Hopper stage
#                 (sm_90a) no wgmma serialised and no setmaxnreg ignored
#   3. matrix     the GPU correctness matrix (build/allstages --matrix) on the student's kernel, which
#                 for a stage that takes e4m3 runs the e4m3 cases too
#   4. racecheck  compute-sanitizer racecheck on the small problems of tests/test_sanitizer.sh
#                 (tails; whole query tiles that see no key; no mask), d64 and d128, in bf16 and,
#                 for a stage that takes e4m3, in e4m3 as well
#   5. timing     the headline problem (B16 H16 S4096 D128, checked), student vs the real previous
#                 stage, GRADE_ROUNDS alternating rounds, best median of each: the student must be
#                 faster. Each side runs in its stage's benchmark dtype: e4m3 for a stage that takes
#                 it, bf16 otherwise (stage 16 in e4m3 against stage 15 in bf16: what fp8 is for)
# and ends with "GRADE: PASS" (exit 0) or "GRADE: FAIL" and one "  - [reason] ..." line per failure
# (exit 1). A gate that could not run (no GPU, no compute-sanitizer) never counts as passed: a
# failure of the gates that did run is still a FAIL (exit 1); otherwise "GRADE: NOT GRADED" (exit
# 2), naming what was not checked.
# Environment: GRADE_ROUNDS (default 2), GRADE_MARGIN_PCT (the student's median must be below the
# previous stage's by this many percent; default the assignment's Timing line, else 0), GRADE_TOOLS
# (sanitizer tools; default racecheck), COMPUTE_SANITIZER (the sanitizer's path; default
# compute-sanitizer from PATH), GRADE_SANITIZER_JOBS (sanitizer runs at once; default the CPU count,
# at most 8).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
NN=${1:-}
SRC=${2:-}
STAGE_GENCODE=${STAGE_GENCODE:-$ARCH}
LINK_OBJS=${LINK_OBJS:-}
PREV=${PREV_NN:-}
ROUNDS=${GRADE_ROUNDS:-2}
# An assignment whose timing is not "merely faster" says so in its section of docs/assignments.md,
# on its "**Timing:**" line: "within M %" where the real stage measures level with the one before
# (14: its clusters, docs/14), so the student's kernel may be up to M % slower (a margin of -M);
# "at least M % faster" where the real stage is well ahead (16: e4m3 against bf16), so the
# student's median must be M % below the previous stage's (a margin of M). GRADE_MARGIN_PCT overrides.
doc_margin=$(awk -v nn="${NN:-}" '/^## Assignment /{ on = ($3 == nn) }
    on && /^\*\*Timing:\*\*/ && match($0, /within [0-9]+ %/) { print "-" substr($0, RSTART + 7, RLENGTH - 9) }
    on && /^\*\*Timing:\*\*/ && match($0, /at least [0-9]+ % faster/) { print substr($0, RSTART + 9, RLENGTH - 18) }' docs/assignments.md)
MARGIN=${GRADE_MARGIN_PCT:-$doc_margin}
MARGIN=${MARGIN:-0}
STAGE_FP8=${STAGE_FP8:-0}
PREV_FP8=${PREV_FP8:-0}
# The timing runs each stage in its benchmark dtype: e4m3 where it takes it (the reason such a stage
# exists is to be faster in e4m3 than the stage before in bf16), bf16 otherwise. The FLOPs of the
# problem do not depend on the dtype, so the times compare directly.
s_dtype=bf16 p_dtype=bf16
[ "$STAGE_FP8" = 1 ] && s_dtype=e4m3
[ "$PREV_FP8" = 1 ] && p_dtype=e4m3
TOOLS=${GRADE_TOOLS:-racecheck}
SANITIZER=${COMPUTE_SANITIZER:-compute-sanitizer}

# The assignments are the "## Assignment NN" sections of docs/assignments.md.
assignments=$(sed -n 's/^## Assignment \([0-9][0-9]\) .*/\1/p' docs/assignments.md | tr '\n' ' ')
stage_lookup "$NN"
STAGE_NAME=$STAGE_DIR
if [ -z "$STAGE_NAME" ] || ! echo " $assignments" | grep -q " $NN "; then
    echo "grade: there is no assignment ${NN:-(none given)}; docs/assignments.md has assignments $assignments" >&2
    exit 2
fi
[ -f "$SRC" ] || { echo "grade: student file '$SRC' not found" >&2; exit 2; }
N=${NN#0}
OUT=$BUILD/grade/k$NN
rm -rf "$OUT"
mkdir -p "$OUT"

. tests/stage_checks.sh
reasons=()
not_run=()
nfail=0
# The stage checks report through ok/bad; the grader also counts the failures.
bad() { echo "FAIL: $1: $2"; nfail=$((nfail + 1)); }
reason() { reasons+=("$1"); }
section() { echo; echo "== $*"; }

echo "grade: stage $NN ($STAGE_NAME), student file $SRC"
echo "       work dir $OUT (the stage's own kernel.cu and build/kernel$NN.o are not used)"
[ -n "$PREV" ] && echo "       timing gate: stage $NN in $s_dtype against the real stage $PREV in $p_dtype, margin ${MARGIN}%"

# -- 1. build -----------------------------------------------------------------------------------
section "build: $NVCC \$NVFLAGS $STAGE_GENCODE -Xptxas -v -c $SRC"
built=0
# shellcheck disable=SC2086
if "$NVCC" $NVFLAGS $STAGE_GENCODE -Xptxas -v -c "$SRC" -o "$OUT/kernel.o" 2>"$OUT/ptxas.txt"; then
    echo "PASS: compiles"
    built=1
    grep -E 'warning|error' "$OUT/ptxas.txt" | head -5
else
    grep -vE '^ptxas info|^ +[0-9]+ bytes stack' "$OUT/ptxas.txt" | head -20
    echo "FAIL: compiles: nvcc failed (log: $OUT/ptxas.txt)"
    reason "[build] the file does not compile (see $OUT/ptxas.txt)"
fi

linked=0
if [ "$built" = 1 ]; then
    # The entry points the stage must export: flash_forward_kernelNN, and for a stage that takes e4m3
    # inputs flash_forward_fp8_kernelNN too, which the dispatcher calls for FLASH_E4M3 (without it
    # every e4m3 call is refused, so the e4m3 half of the assignment would go ungraded).
    want_syms="flash_forward_kernel$NN"
    [ "$STAGE_FP8" = 1 ] && want_syms="$want_syms flash_forward_fp8_kernel$NN"
    syms=$(nm -g --defined-only "$OUT/kernel.o" 2>/dev/null | awk '{ print $3 }' | grep -E '^flash_forward_(fp8_)?kernel[0-9]+$' | sort | paste -sd' ')
    # Every exported flash_forward... name, for the message: a near miss (flash_forward_kernel16_fp8)
    # is easier to see beside the name it should have had.
    named=$(nm -g --defined-only "$OUT/kernel.o" 2>/dev/null | awk '{ print $3 }' | grep -E '^flash_forward' | sort | paste -sd' ')
    missing="" extra=""
    for sym in $want_syms; do echo " $syms " | grep -q " $sym " || missing="$missing $sym"; done
    for sym in $syms; do echo " $want_syms " | grep -q " $sym " || extra="$extra $sym"; done
    if [ "${missing# flash_forward_kernel"$NN"}" != "$missing" ]; then
        echo "FAIL: exports flash_forward_kernel$NN: it exports: ${named:-no flash_forward_kernelNN at all}"
        reason "[symbol] the file must define extern \"C\" int flash_forward_kernel$NN(const flash_problem *, cudaStream_t) (found: ${named:-none})"
    elif [ -n "$missing" ]; then
        echo "FAIL: exports flash_forward_fp8_kernel$NN: it exports: $named"
        reason "[symbol] stage $NN takes e4m3 inputs: the file must also define extern \"C\" int flash_forward_fp8_kernel$NN(const flash_problem *, const flash_descale *, cudaStream_t), which flash_forward_fp8 calls for FLASH_E4M3 (found: $named)"
    elif [ -n "$extra" ]; then
        echo "FAIL: exports only ${want_syms/ / and }: it exports: $syms"
        reason "[symbol] the file must define ${want_syms/ / and } and no other entry point (extra:$extra)"
    else
        echo "PASS: exports ${want_syms/ / and }"
        # The grading binary: the student's stage NN plus the real previous stage, for the timing.
        # shellcheck disable=SC2086
        if "$NVCC" $ARCH "$OUT/kernel.o" ${PREV:+$BUILD/kernel$PREV.o} $LINK_OBJS -o "$OUT/grade" $LDLIBS 2>"$OUT/link.txt"; then
            echo "PASS: links ($OUT/grade: student stage $NN${PREV:+ + real stage $PREV})"
            linked=1
        else
            head -5 "$OUT/link.txt"
            echo "FAIL: links: see $OUT/link.txt"
            reason "[build] linking with the harness failed (see $OUT/link.txt)"
        fi
    fi
fi

# -- 2. instruction checks (shared with tests/test_instructions.sh) ------------------------------
section "instructions: what stage $NN must have and must not have yet (tests/stage_checks.sh)"
before=$nfail
if "$NVCC" -std=c++17 -Icommon -arch="compute_${STAGE_ARCH#sm_}" -ptx "$SRC" -o "$OUT/kernel.ptx" 2>"$OUT/ptx.err"; then
    stage_ptx_checks "$NN" "student kernel$NN" "$OUT/kernel.ptx"
else
    bad "student kernel$NN PTX" "$(head -3 "$OUT/ptx.err")"
fi
[ "$built" = 1 ] && stage_spill_check "student kernel$NN" "$OUT/ptxas.txt"
# A Hopper stage: ptxas must keep every wgmma asynchronous and honour setmaxnreg (C7508-C7519).
case $STAGE_ARCH in *a) [ "$built" = 1 ] && stage_async_check "student kernel$NN ($STAGE_ARCH)" "$OUT/ptxas.txt" ;; esac
if [ "$built" = 1 ] && command -v cuobjdump >/dev/null 2>&1; then
    arch=$(cuobjdump --list-elf "$OUT/kernel.o" 2>/dev/null | grep -o 'sm_[0-9a-z]*' | sort -u | grep -x sm_90 ||
           cuobjdump --list-elf "$OUT/kernel.o" 2>/dev/null | grep -o 'sm_[0-9a-z]*' | head -1)
    cuobjdump -sass -arch "$arch" "$OUT/kernel.o" >"$OUT/kernel.sass" 2>/dev/null
    stage_sass_checks "$NN" "student kernel$NN SASS ($arch)" "$OUT/kernel.sass"
else
    echo "SKIP: SASS checks: cuobjdump not found (the PTX checks above still ran)"
fi
if [ "$nfail" -gt "$before" ]; then
    reason "[instructions] $((nfail - before)) instruction check(s) failed: stage $NN's technique is missing, a later stage's is present, ptxas spills, or (Hopper) it serialises a wgmma (see the FAIL lines above)"
fi

# -- 3-5. the GPU part ----------------------------------------------------------------------------
# A gate that cannot run is recorded in not_run: it never counts as passed.
gpu=0
if [ "$linked" = 0 ]; then
    not_run+=("correctness matrix, racecheck and timing: there is no grading binary (see the FAIL lines above)")
elif ! "$OUT/grade" --gpu-slug >/dev/null 2>&1; then
    not_run+=("correctness matrix, racecheck and timing: no CUDA device answers here")
elif ! "$OUT/grade" --stage "$N" --batch 1 --seqlen 16 --heads 1 --head-dim 64 --iters 1 --warmup 0 \
        >"$OUT/gpu_check.log" 2>&1 && grep -q "needs" "$OUT/gpu_check.log"; then
    not_run+=("correctness matrix, racecheck and timing: $(grep -m1 needs "$OUT/gpu_check.log" | sed 's/^error: //')")
else
    gpu=1
fi
if [ "$gpu" = 0 ]; then
    section "GPU: not run"
    echo "SKIP: ${not_run[-1]}"
else
    section "matrix: $OUT/grade --stage $N --matrix"
    "$OUT/grade" --stage "$N" --matrix >"$OUT/matrix.log" 2>&1
    rc=$?
    grep -m 10 '^FAIL' "$OUT/matrix.log"
    summary=$(grep -m1 '^matrix ' "$OUT/matrix.log")
    echo "${summary:-(no summary line; exit status $rc)}"
    if [ "$rc" -eq 0 ] && [ -n "$summary" ]; then
        echo "PASS: correctness matrix"
    else
        echo "FAIL: correctness matrix (log: $OUT/matrix.log)"
        reason "[matrix] correctness matrix failed: ${summary:-exit status $rc, $(tail -1 "$OUT/matrix.log")} (first failing cases in $OUT/matrix.log)"
    fi

    # bf16, and e4m3 too for a stage that takes it, as tests/test_sanitizer.sh runs the real stages.
    san_dtypes=bf16
    [ "$STAGE_FP8" = 1 ] && san_dtypes="bf16 e4m3"
    section "sanitizer: compute-sanitizer --tool $TOOLS on the problems: $SANITIZER_PROBLEMS ($san_dtypes)"
    if ! command -v "$SANITIZER" >/dev/null 2>&1; then
        echo "SKIP: $TOOLS: $SANITIZER not found"
        not_run+=("$TOOLS: $SANITIZER not found on this machine")
    else
        # The runs go GRADE_SANITIZER_JOBS at a time (run_in_parallel, tests/lib.sh), each writing
        # its log and its exit status (.rc); they are reported afterwards, in this order.
        san_cases=()
        for tool in $TOOLS; do
            for dtype in $san_dtypes; do
                for name in $SANITIZER_PROBLEMS; do
                    for d in 64 128; do san_cases+=("$tool $name $d $dtype"); done
                done
            done
        done
        grade_sanitize() {  # grade_sanitize TOOL PROBLEM HEAD_DIM DTYPE: sanitizer_run (tests/lib.sh)
            sanitizer_run "$OUT/$1.$2.d$3.$4.log" "$SANITIZER" "$OUT/grade" "$N" "$@" --no-check
        }
        export -f grade_sanitize sanitizer_run sanitizer_problem
        export SANITIZER OUT N
        rm -f "$OUT"/*.log.rc
        run_in_parallel "$(sanitizer_jobs "${GRADE_SANITIZER_JOBS:-}")" grade_sanitize "${san_cases[@]}"
        for c in "${san_cases[@]}"; do
            read -r tool name d dtype <<<"$c"
            log=$OUT/$tool.$name.d$d.$dtype.log
            rc=$(cat "$log.rc" 2>/dev/null || echo "none (the run did not finish)")
            if [ "$rc" = 0 ]; then
                echo "PASS: $tool $name d$d $dtype"
            else
                what=$(grep -m1 -E 'SUMMARY' "$log" 2>/dev/null)
                [ -n "$what" ] || what="exit status $rc: $(grep -m1 -E 'Error|error|hazard' "$log" 2>/dev/null)"
                grep -m3 -E '^========= (Error|Warning)' "$log" 2>/dev/null
                echo "FAIL: $tool $name d$d $dtype: $what (log: $log)"
                if [ "$tool" = racecheck ]; then
                    reason "[racecheck] compute-sanitizer racecheck, $name problem, head_dim $d, $dtype: $what: a shared-memory hazard, most likely a missing barrier or mbarrier wait (log: $log)"
                else
                    reason "[$tool] compute-sanitizer $tool, $name problem, head_dim $d, $dtype: $what (log: $log)"
                fi
            fi
        done
    fi

    if [ -z "$PREV" ]; then
        section "timing: skipped (stage 01 has no previous stage to beat)"
    else
        section "timing: headline problem, student stage $NN in $s_dtype vs real stage $PREV in $p_dtype, $ROUNDS round(s), best median of each"
        csv=$OUT/timing.csv
        rm -f "$csv"
        timing_ok=1
        for r in $(seq 1 "$ROUNDS"); do
            for s in $((N - 1)) "$N"; do
                dtype=$p_dtype
                [ "$s" = "$N" ] && dtype=$s_dtype
                "$OUT/grade" --stage "$s" --dtype "$dtype" --csv "$csv" >"$OUT/timing.s$s.r$r.log" 2>&1
                rc=$?
                tail -1 "$OUT/timing.s$s.r$r.log"
                if [ "$rc" -ne 0 ]; then
                    timing_ok=0
                    if [ "$s" = "$N" ]; then
                        reason "[timing] the student's kernel failed on the headline problem in $dtype (exit $rc; log: $OUT/timing.s$s.r$r.log)"
                    else
                        reason "[timing] the reference stage $PREV failed on the headline problem (exit $rc): the grading setup is broken, not the student's file"
                    fi
                fi
            done
            [ "$timing_ok" = 1 ] || break
        done
        if [ "$timing_ok" = 1 ]; then
            # CSV columns: 2 kernel, 4 dtype, 13 ms_median, 15 tflops, 18 check; keep each stage's best median.
            best() { awk -F, -v k="kernel$1" -v d="$2" 'NR > 1 && $2 == k && $4 == d && (m == "" || $13 < m) { m = $13; t = $15; c = $18 }
                                                        END { if (m != "") print m, t, c }' "$csv"; }
            read -r s_ms s_tf s_check <<<"$(best "$NN" "$s_dtype")"
            read -r p_ms p_tf p_check <<<"$(best "$PREV" "$p_dtype")"
            if [ -z "${s_ms:-}" ] || [ -z "${p_ms:-}" ]; then
                echo "FAIL: timing: no CSV rows in $csv"
                reason "[timing] no timing rows were written ($csv)"
            else
                echo "student stage $NN ($s_dtype): ${s_ms} ms median, ${s_tf} TFLOP/s (check: ${s_check})"
                echo "real    stage $PREV ($p_dtype): ${p_ms} ms median, ${p_tf} TFLOP/s (check: ${p_check})"
                verdict=$(awk -v s="$s_ms" -v p="$p_ms" -v m="$MARGIN" \
                    'BEGIN { printf "%s %.3f", (s < p * (1 - m / 100)) ? "faster" : "slower", p / s }')
                speedup=${verdict#* }
                if [ "${verdict%% *}" = faster ]; then
                    echo "PASS: faster than stage $PREV (${speedup}x; ${s_tf} vs ${p_tf} TFLOP/s; margin ${MARGIN}%)"
                else
                    echo "FAIL: faster than stage $PREV (${speedup}x; ${s_tf} vs ${p_tf} TFLOP/s; margin ${MARGIN}%)"
                    reason "[timing] not faster than stage $PREV on the headline problem (margin ${MARGIN}%): $s_dtype ${s_tf} TFLOP/s (${s_ms} ms) vs stage $PREV's $p_dtype ${p_tf} TFLOP/s (${p_ms} ms), ${speedup}x"
                fi
            fi
        fi
    fi
fi

# -- verdict --------------------------------------------------------------------------------------
echo
if [ "${#reasons[@]}" -gt 0 ]; then
    echo "GRADE: FAIL: stage $NN, $SRC"
    for r in "${reasons[@]}"; do echo "  - $r"; done
    for r in "${not_run[@]}"; do echo "  (not run: $r)"; done
    exit 1
fi
if [ "${#not_run[@]}" -gt 0 ]; then
    echo "GRADE: NOT GRADED: stage $NN, $SRC: the checks that ran passed, but these could not run:"
    for r in "${not_run[@]}"; do echo "  - $r"; done
    echo "  Run make grade on a machine with a CUDA GPU and the CUDA toolkit's compute-sanitizer."
    exit 2
fi
echo "GRADE: PASS: stage $NN, $SRC"
exit 0
