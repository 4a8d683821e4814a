# tests/lib.sh: the few helpers every test script shares. Source it, report with ok / bad / skip,
# and end with `finish`:
#
#   . "$(dirname "$0")/lib.sh"
#   ok "name"                 -> PASS: name
#   bad "name" "why"          -> FAIL: name: why
#   skip "name" "why"         -> SKIP: name: why
#   finish                    -> "<script>: N passed, N failed, N skipped"; status 1 if any failed
#
# tests/run_tests.sh counts the PASS:/FAIL:/SKIP: lines of every suite.

n_pass=0 n_fail=0 n_skip=0
ok()   { echo "PASS: $1"; n_pass=$((n_pass + 1)); }
bad()  { echo "FAIL: $1: $2"; n_fail=$((n_fail + 1)); }
skip() { echo "SKIP: $1: $2"; n_skip=$((n_skip + 1)); }
finish() {
    echo "$(basename "$0"): $n_pass passed, $n_fail failed, $n_skip skipped"
    [ "$n_fail" -eq 0 ]
}

# The scripts run from make (make test, make grade, ...), which hands them its one definition of
# the compiler, the flags and the stages: STAGE_TABLE holds NN:directory:arch per stage.
need_make_env() {
    local v
    for v in NVCC NVFLAGS ARCH ARCH_HERE BUILD LDLIBS STAGE_TABLE; do
        if [ -z "${!v:-}" ]; then
            echo "$(basename "$0"): $v is not set: run this through make (make test, make grade, ...)," \
                 "which defines the compiler, its flags and the stages" >&2
            exit 2
        fi
    done
}

# for_each_stage FUNCTION: FUNCTION NN DIR ARCH for every stage, in order.
for_each_stage() {
    local entry nn dir arch
    for entry in $STAGE_TABLE; do
        IFS=: read -r nn dir arch <<<"$entry"
        "$1" "$nn" "$dir" "$arch"
    done
}

# stage_lookup NN: STAGE_DIR and STAGE_ARCH of stage NN from the Makefile's stage table (both
# empty when there is no such stage), and STAGE_GENCODE_HERE, the -gencode flags to build it for the GPU
# here (ARCH_HERE), or for its one architecture if it has one of its own ("sm_90a").
stage_lookup() {
    local entry nn dir arch
    STAGE_DIR="" STAGE_ARCH=""
    for entry in $STAGE_TABLE; do
        IFS=: read -r nn dir arch <<<"$entry"
        [ "$nn" = "$1" ] && STAGE_DIR=$dir STAGE_ARCH=$arch
    done
    STAGE_GENCODE_HERE=${ARCH_HERE:-}
    case $STAGE_ARCH in *a) STAGE_GENCODE_HERE="-gencode arch=compute_${STAGE_ARCH#sm_},code=$STAGE_ARCH" ;; esac
}

# build_variant SRC HDR OBJ BIN GENCODE: a stage's kernel.cu (or a copy of it) built with the
# macros of HDR forced in (nvcc would split -D values at their commas) and linked with the harness:
# what make tune and make ab time. ptxas's report goes to OBJ.ptxas.txt. Returns 0 with BIN
# built, 1 if it does not compile or link, 2 if ptxas spills (a spilling build is not timed).
build_variant() {
    local src=$1 hdr=$2 obj=$3 bin=$4 gencode=$5
    rm -f "$bin"
    # shellcheck disable=SC2086
    "$NVCC" $NVFLAGS $gencode -Xptxas -v -include "$hdr" -c "$src" -o "$obj" 2>"$obj.ptxas.txt" || return 1
    if grep -E 'bytes spill (stores|loads)' "$obj.ptxas.txt" | grep -vq ' 0 bytes spill stores, 0 bytes spill loads'; then
        return 2
    fi
    # shellcheck disable=SC2086
    "$NVCC" $ARCH_HERE "$obj" "$BUILD"/harness/*.o "$BUILD"/common/*.o -o "$bin" $LDLIBS || return 1
}

# The small problems compute-sanitizer runs on, in tests/test_sanitizer.sh and the grader:
#   tails   seqlen_q 150, seqlen_k 203: a Q tail and a K tail, causal, GQA (2 heads share one);
#   no-key  seqlen_q 400, seqlen_k 40, causal: rows 0..359 see no key, so whole query tiles do,
#           up to 256 rows, more than any stage's kBlockM: blocks with nothing to compute;
#   nomask  seqlen_q 300, seqlen_k 203, no mask, GQA: what stages 14-16 run in clusters at head_dim
#           128 (3 query tiles of 128: a cluster with a block past the end of the sequence);
#   long    seqlen_q 1400, seqlen_k 1100, causal, GQA: past the 1024 up to which stages 15 and 16
#           take shapes of their own for short sequences (192 query rows at head_dim 64, and in
#           e4m3 at both), with tails in both; rows 0..299 see no key, so the first query tile of
#           those shapes has nothing to compute;
#   longkv  seqlen_q 300, seqlen_k 1300, no mask, GQA: the shapes without a mask past those 1024
#           keys (e4m3's 96-key tiles at head_dim 128, 160-key ones at 64), a K tail.
# SANITIZER_PROBLEMS="long" (say) runs some of them only: a whole sanitizer pass over every stage
# takes a long time, and can be split by problem as well as by stage.
SANITIZER_PROBLEMS=${SANITIZER_PROBLEMS:-tails no-key nomask long longkv}
sanitizer_problem() {
    case $1 in
    tails)  echo "--batch 1 --seqlen-q 150 --seqlen-k 203 --heads 2 --kv-heads 1 --causal 1" ;;
    no-key) echo "--batch 1 --seqlen-q 400 --seqlen-k 40 --heads 2 --kv-heads 1 --causal 1" ;;
    nomask) echo "--batch 1 --seqlen-q 300 --seqlen-k 203 --heads 2 --kv-heads 1 --causal 0" ;;
    long)   echo "--batch 1 --seqlen-q 1400 --seqlen-k 1100 --heads 2 --kv-heads 1 --causal 1" ;;
    longkv) echo "--batch 1 --seqlen-q 300 --seqlen-k 1300 --heads 2 --kv-heads 1 --causal 0" ;;
    esac
}

# run_in_parallel JOBS FUNCTION CASE...: FUNCTION (exported with export -f) once per CASE, the
# CASE's words as its arguments, JOBS at a time. The sanitizer's passes use it (tests/test_sanitizer.sh,
# tools/grade.sh): a run's time is mostly the sanitizer's work on the CPU, not the kernel's on the
# GPU, so independent runs on small problems share the GPU without changing what each one checks.
run_in_parallel() {
    local jobs=$1 fn=$2
    shift 2
    [ $# -gt 0 ] || return 0
    printf '%s\n' "$@" | xargs -P "$jobs" -L 1 bash -c "$fn \"\$@\"" _
}
# sanitizer_jobs [N]: N, or the CPU count, at most 8.
sanitizer_jobs() {
    local j=${1:-$(nproc)}
    [ "$j" -gt 8 ] && j=8
    echo "$j"
}
# sanitizer_run LOG SANITIZER BIN STAGE TOOL PROBLEM HEAD_DIM DTYPE [ARG...]: one compute-sanitizer
# run of BIN on a problem of sanitizer_problem (above), one warm-up-free iteration, the ARGs added;
# its output in LOG and its exit status (9: the tool found an error) in LOG.rc, for run_in_parallel's
# callers to report in their own order afterwards.
sanitizer_run() {
    local log=$1 san=$2 bin=$3 stage=$4 tool=$5 problem=$6 d=$7 dtype=$8
    shift 8
    # shellcheck disable=SC2046
    "$san" --tool "$tool" --error-exitcode 9 "$bin" --stage "$stage" $(sanitizer_problem "$problem") \
        --head-dim "$d" --dtype "$dtype" --warmup 0 --iters 1 "$@" >"$log" 2>&1
    echo $? >"$log.rc"
}
