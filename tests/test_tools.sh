#!/usr/bin/env bash
# The tools' own refusals and their CPU parts, no GPU needed (tests/test_grader.sh proves the
# grader's verdicts on a GPU):
#   make tune without a GPU stops at once with the reason, before compiling anything;
#   make grade refuses a stage without an assignment, and a file with the wrong entry point fails
#   for that reason ([symbol]), never as "did not build";
#   make sass and make diff work from the sources alone;
#   make kernelNN_name (a stage's directory name) builds what make kernelNN builds;
#   make ab asks for a stage and a GPU, and refuses bad variant names and missing source files;
#   make fp8-error writes its rows where tools/results_md.py reads them;
#   tools/ncu_metrics.sh refuses a problem it does not know;
#   tools/ncu_source_diff.py finds the instruction one build stalls on and the other lacks;
#   a target or tool asked for directly without the program it needs (compute-sanitizer, ncu,
#   cuobjdump) or without a GPU exits 2 naming it, before building anything where it builds, while
#   make test's own sanitizer suite reports SKIP (each program hidden here, also where installed).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
T=$BUILD/test-tools
mkdir -p "$T"

if nvidia-smi -L >/dev/null 2>&1; then
    skip "make tune without a GPU fails fast" "a GPU answers here"
else
    start=$SECONDS
    make -s tune >"$T/tune.out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q "no NVIDIA GPU" "$T/tune.out" && [ $((SECONDS - start)) -lt 10 ]; then
        ok "make tune without a GPU: exit $rc in $((SECONDS - start)) s, '$(head -c 60 "$T/tune.out")...'"
    else
        bad "make tune without a GPU fails fast" "exit $rc after $((SECONDS - start)) s: $(head -c 200 "$T/tune.out")"
    fi
fi

# make ab needs a stage before anything else, and a GPU before it compiles; tools/ab.sh refuses a
# variant named base or with characters outside a file name's, after building only the base.
if make -s ab >"$T/ab.out" 2>&1 || ! grep -q "name the stage, K=NN" "$T/ab.out"; then
    bad "make ab without K names what is missing" "$(head -c 200 "$T/ab.out")"
else
    ok "make ab without K: '$(head -c 60 "$T/ab.out")'"
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
    if make -s ab K=13 AB="x=FLASH_CAUSAL_HEAD_GROUP=4" >"$T/ab.out" 2>&1 || ! grep -q "no NVIDIA GPU" "$T/ab.out"; then
        bad "make ab without a GPU stops before compiling" "$(head -c 200 "$T/ab.out")"
    else
        ok "make ab without a GPU: '$(head -c 60 "$T/ab.out")...'"
    fi
fi
for spec in "base=FOO=1" "a-b=FOO=1" "=FOO=1"; do
    if AB_STAGE=13 AB="$spec" bash tools/ab.sh >"$T/ab.out" 2>&1 || ! grep -q "a variant's name is" "$T/ab.out"; then
        bad "tools/ab.sh refuses the variant name in '$spec'" "$(head -c 200 "$T/ab.out")"
    else
        ok "tools/ab.sh refuses the variant name in '$spec' before building"
    fi
done
if AB_STAGE=13 AB="x:/nonexistent.cu=FOO=1" bash tools/ab.sh >"$T/ab.out" 2>&1 || ! grep -q "variant x: no file" "$T/ab.out"; then
    bad "tools/ab.sh refuses a variant whose source file is missing" "$(head -c 200 "$T/ab.out")"
else
    ok "tools/ab.sh refuses a variant whose source file is missing"
fi
if AB_STAGE=13 AB="x=FOO=1" AB_BASE_SRC=/nonexistent bash tools/ab.sh >"$T/ab.out" 2>&1 ||
   ! grep -q "AB_BASE_SRC: no file" "$T/ab.out"; then
    bad "tools/ab.sh refuses a missing AB_BASE_SRC" "$(head -c 200 "$T/ab.out")"
else
    ok "tools/ab.sh refuses a missing AB_BASE_SRC"
fi

# tools/sass_loop.py on a listing written here: a loop of 12 instructions whose forward branch skips
# 3 (the masking code), 2 between the turn barrier and the first wgmma, 2 between the two waits;
# an out-of-line retry of a wait, whose unconditional branch back is no loop.
cat >"$T/loop.sass" <<'SASS'
        Function : toy_kernel
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   BAR.SYNC.DEFER_BLOCKING R0, 0x100 ;
        /*0020*/                   FMUL R2, R2, R3 ;
        /*0030*/                   WARPGROUP.ARRIVE ;
        /*0040*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT, gsb0 ;
        /*0050*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*0060*/              @!P1 BRA 0xa0 ;
        /*0070*/                   FSEL R24, R24, -INF , P2 ;
        /*0080*/                   FSEL R25, R25, -INF , P3 ;
        /*0090*/                   FSEL R26, R26, -INF , P4 ;
        /*00a0*/                   FMNMX R9, R24, -INF , !PT ;
        /*00b0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*00c0*/               @P0 BRA 0x10 ;
        /*00d0*/                   EXIT ;
        /*00e0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR10], R9 ;
        /*00f0*/              @!P1 BRA 0xe0 ;
        /*0100*/                   BRA 0x20 ;
SASS
python3 tools/sass_loop.py "$T/loop.sass" >"$T/loop.out" 2>&1
want="loop 0x10-0xc0: 12 instructions, 9 on the path past forward branches; HGMMA 1 x 64x128x16; turn barrier to first wgmma: 2; S wait to P V wait: 6"
if [ "$(grep -c '^  loop' "$T/loop.out")" -eq 1 ] && grep -qF "$want" "$T/loop.out"; then
    ok "tools/sass_loop.py counts a listed loop"
else
    bad "tools/sass_loop.py counts a listed loop" "$(head -c 300 "$T/loop.out")"
fi

# tools/ncu_loop.py on a source page written here: a loop run 10 times by a warp (its turn barrier's
# count), an S wgmma of 128 keys (a descriptor as A) and a P V (P from registers), two FMUL per
# iteration: 0.016 FMUL per key, 2.0 per iteration, 7 instructions per iteration in all; then the
# stored table of docs/15 is what the tool makes of the stored pages.
cat >"$T/page.csv" <<'CSV'
"Kernel Name","toy_kernel"
"Address","Source","Instructions Executed"
"0x10","BAR.SYNC.DEFER_BLOCKING R0, 0x100","10"
"0x20","WARPGROUP.ARRIVE","10"
"0x30","HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT","10"
"0x40","HGMMA.64x64x16.F32.BF16 R40, R4, gdesc[UR9], R40, gsb0","10"
"0x50","FMUL R2, R2, R3","20"
"0x60","@P0 BRA 0x10","10"
"0x70","EXIT","1"
CSV
python3 tools/ncu_loop.py "$T/page.csv" >"$T/page.out" 2>&1
if grep -q "10 warp-iterations of 128 keys" "$T/page.out" && grep -qE '^FMUL +0\.016 \(   2\.0\)' "$T/page.out" \
        && grep -qE '^total +0\.055 \(   7\.0\)' "$T/page.out"; then
    ok "tools/ncu_loop.py counts a loop's instructions per key"
else
    bad "tools/ncu_loop.py counts a loop's instructions per key" "$(head -c 300 "$T/page.out")"
fi
if python3 tools/ncu_loop.py plots/ncu/source/nvidia_h200_kernel15_headline_e4m3.csv plots/ncu/source/nvidia_h200_fa3_headline_e4m3.csv \
        | cmp -s - plots/ncu/source/loop_per_key_e4m3.txt; then
    ok "plots/ncu/source/loop_per_key_e4m3.txt is tools/ncu_loop.py's table of the stored pages"
else
    bad "plots/ncu/source/loop_per_key_e4m3.txt is tools/ncu_loop.py's table of the stored pages" "rerun the tool into it"
fi

# tools/ncu_metrics.sh refuses a problem it cannot name before it looks for ncu or a GPU.
for pr in sweep/96/1024 sweep/128/1000 headline/bogus; do
    NCU_PROBLEM=$pr bash tools/ncu_metrics.sh "$T/ncu.csv" 13 >"$T/ncu.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q "NCU_PROBLEM=$pr" "$T/ncu.out" && [ ! -s "$T/ncu.csv" ]; then
        ok "ncu_metrics refuses NCU_PROBLEM=$pr: $(head -n 1 "$T/ncu.out" | cut -c1-90)"
    else
        bad "ncu_metrics refuses NCU_PROBLEM=$pr" "exit $rc: $(head -c 200 "$T/ncu.out")"
    fi
done

# make fp8-error writes its rows where the FP8ERR block of tools/results_md.py reads them (dry run: no
# build, no GPU; without build/allstages the GPU's slug is "unknown").
make -s -n fp8-error BUILD="$T/nobuild" COMMIT=abc1234 >"$T/fp8err.out" 2>&1
want=$("$PYTHON" -c 'import os, sys; sys.path.insert(0, "tools"); import results_md
data = results_md.Data.__new__(results_md.Data); data.slug = "unknown"
try:
    results_md.fp8_error_block(data, "abc1234")
except results_md.GenError as e:
    print(str(e).split()[1].rstrip(":"))' 2>&1)
if [ "$want" = "plots/fp8_error/unknown_abc1234.csv" ] && tr '\n' ' ' <"$T/fp8err.out" | grep -q "harness/fp8_error.py .*--csv $want"; then
    ok "make fp8-error writes $want, which the FP8ERR block reads"
else
    bad "make fp8-error writes where the FP8ERR block reads" "block reads '$want'; make: $(grep fp8_error "$T/fp8err.out" | head -c 200)"
fi

for k in 01 99 x; do
    make -s grade K="$k" SRC=kernel05_swizzle/kernel.cu >"$T/grade_$k.out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -qE "no assignment|usage" "$T/grade_$k.out" && ! grep -q "GRADE:" "$T/grade_$k.out"; then
        ok "make grade K=$k is refused: $(head -n 1 "$T/grade_$k.out" | cut -c1-90)"
    else
        bad "make grade K=$k is refused" "exit $rc: $(head -c 200 "$T/grade_$k.out")"
    fi
done

# A file that compiles but exports stage 04's entry point, handed in as stage 05.
cat >"$T/wrong_entry.cu" <<'CU'
#include "flash_internal.h"
extern "C" int flash_forward_kernel04(const flash_problem *p, cudaStream_t stream) { return p && stream ? 0 : 0; }
CU
make -s grade K=05 SRC="$T/wrong_entry.cu" >"$T/grade_wrong.out" 2>&1
rc=$?
# make exits 2 whenever the recipe fails; the grader's own verdict is its GRADE line.
if [ "$rc" -ne 0 ] && grep -q '^GRADE: FAIL' "$T/grade_wrong.out" && grep -q '^  - \[symbol\]' "$T/grade_wrong.out" \
        && ! grep -qi "did not build" "$T/grade_wrong.out"; then
    ok "make grade: a file with the wrong entry point fails for it ([symbol])"
else
    bad "make grade: a file with the wrong entry point fails for it" "exit $rc: $(grep -E '^(GRADE|  -|FAIL|PASS)' "$T/grade_wrong.out" | head -6 | tr '\n' ' ')"
fi

# make kernelNN_name (and kernelNN_name/, as a shell completes it) runs make kernelNN's commands, for
# every stage directory: a dry run of each into an empty build directory, where both must compile
# the stage's kernel.cu, link it and point ./run at it. Then the first stage for real, ./run put
# back as it was afterwards.
dir_target_bad=()
dir_target_check() {  # dir_target_check NN DIR ARCH
    local target first
    make -n BUILD="$T/nobuild" "kernel$1" >"$T/nn_target.out" 2>&1
    for target in "$2" "$2/"; do
        make -n BUILD="$T/nobuild" "$target" >"$T/dir_target.out" 2>&1
        if ! grep -qF -- "-c $2/kernel.cu -o $T/nobuild/kernel$1.o" "$T/dir_target.out" ||
           ! grep -qF "ln -sf $T/nobuild/kernel$1 run" "$T/dir_target.out" || ! cmp -s "$T/dir_target.out" "$T/nn_target.out"; then
            first=$(grep -v '^mkdir' "$T/dir_target.out" | head -n 1 | cut -c1-80)
            dir_target_bad+=("make $target: ${first:-nothing to be done}")
        fi
    done
}
for_each_stage dir_target_check
n_dirs=$(wc -w <<<"$STAGE_TABLE")
if [ ${#dir_target_bad[@]} -eq 0 ]; then
    ok "make kernelNN_name and kernelNN_name/ run the commands of make kernelNN, for all $n_dirs stage directories"
else
    bad "make kernelNN_name and kernelNN_name/ run the commands of make kernelNN" "${dir_target_bad[*]:0:3}"
fi
IFS=: read -r nn dir _ <<<"${STAGE_TABLE%% *}"
run_before=$(readlink run)
make -s "$dir" >"$T/dir_real.out" 2>&1
rc=$?
run_after=$(readlink run)
if [ -n "$run_before" ]; then ln -sfn "$run_before" run; else rm -f run; fi
if [ "$rc" -eq 0 ] && [ "$run_after" = "$BUILD/kernel$nn" ] && [ -x "$BUILD/kernel$nn" ] \
        && grep -q "runs stage $nn ($dir)" "$T/dir_real.out"; then
    ok "make $dir builds $BUILD/kernel$nn and points ./run at it"
else
    bad "make $dir builds $BUILD/kernel$nn and points ./run at it" "exit $rc, ./run -> '$run_after': $(head -c 200 "$T/dir_real.out")"
fi

make -s sass K=5 >"$T/sass.out" 2>&1
rc=$?
if grep -q "PTX instruction histogram" "$T/sass.out" && grep -qE "^ +mma.sync +[1-9]" "$T/sass.out"; then
    ok "make sass K=5 prints the ptxas table and the PTX histogram"
else
    bad "make sass K=5" "$(tail -3 "$T/sass.out" | tr '\n' ' ')"
fi
# The SASS part needs cuobjdump (without it, exit 2: the rule for what is missing, below).
if ! command -v cuobjdump >/dev/null 2>&1; then
    skip "make sass K=5 prints the SASS histogram, exit 0" "cuobjdump not found here"
elif [ "$rc" -eq 0 ] && grep -qE "^ +HMMA +[1-9]" "$T/sass.out"; then
    ok "make sass K=5 prints the SASS histogram, exit 0"
else
    bad "make sass K=5 prints the SASS histogram, exit 0" "exit $rc: $(tail -3 "$T/sass.out" | tr '\n' ' ')"
fi

make -s diff A=4 B=05 >"$T/diff.out" 2>&1
if grep -q 'kernel05_swizzle/kernel.cu' "$T/diff.out" && grep -q '^[-+].*(col / 8) ^ (row % 8)' "$T/diff.out"; then
    ok "make diff A=4 B=05 shows the swizzle"
else
    bad "make diff A=4 B=05" "$(head -3 "$T/diff.out" | tr '\n' ' ')"
fi
make -s diff A=4 B=77 >"$T/diff_bad.out" 2>&1 && bad "make diff B=77 is refused" "exit 0" || ok "make diff B=77 is refused"

# -- one rule for what is missing -------------------------------------------------------------------
# link_all_but FROM TO NAME: TO holds a link to each entry of FROM but NAME.
link_all_but() {
    mkdir -p "$2" && find "$1"/ -mindepth 1 -maxdepth 1 ! -name "$3" -exec ln -s -t "$2" {} +
}
# hide PROGRAM: HIDDEN_PATH, this PATH without PROGRAM, and HIDDEN_CUDA, the toolkit without it (the
# Makefile puts the toolkit's bin/ first on its recipes' PATH): each directory that holds PROGRAM is
# replaced by one of links to all its other entries. Returns 1 if PROGRAM could still be found.
hide() {
    local prog=$1 dir=$T/hide-$1 d n=0 dirs
    rm -rf "$dir"
    link_all_but "$CUDA_HOME" "$dir/cuda" bin
    link_all_but "$CUDA_HOME/bin" "$dir/cuda/bin" "$prog"
    HIDDEN_CUDA=$dir/cuda HIDDEN_PATH=""
    IFS=: read -ra dirs <<<"$PATH"
    for d in "${dirs[@]}"; do
        if [ -e "$d/$prog" ]; then
            n=$((n + 1)); link_all_but "$d" "$dir/path$n" "$prog"; d=$dir/path$n
        fi
        HIDDEN_PATH=${HIDDEN_PATH:+$HIDDEN_PATH:}$d
    done
    ! PATH=$HIDDEN_CUDA/bin:$HIDDEN_PATH command -v "$prog" >/dev/null 2>&1
}
# hidden_make ARGS...: make with the program of the last hide out of sight.
hidden_make() { env PATH="$HIDDEN_PATH" make -s NVCC="$HIDDEN_CUDA/bin/nvcc" CUDA_HOME="$HIDDEN_CUDA" "$@"; }

# expect_missing NAME TEXT COMMAND...: COMMAND exits 2 and its output holds TEXT (the tool's own
# message naming the program, or the GPU); nothing appears under $T/nobuild (where a target that
# stops before building is pointed).
expect_missing() {
    local name=$1 text=$2 rc
    shift 2
    rm -rf "$T/nobuild"
    "$@" >"$T/missing.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -qF -- "$text" "$T/missing.out" && [ ! -e "$T/nobuild" ]; then
        ok "$name: exit 2, '$(grep -m1 -F -- "$text" "$T/missing.out" | cut -c1-70)...'"
    else
        bad "$name: exit 2 naming $text" "exit $rc$([ -e "$T/nobuild" ] && echo ", built into $T/nobuild"): $(head -c 240 "$T/missing.out")"
    fi
}

# skip_all WHY NAME...: one SKIP line per test not run.
skip_all() { local why=$1 name; shift; for name in "$@"; do skip "$name" "$why"; done; }

if ! hide compute-sanitizer; then
    skip_all "compute-sanitizer could not be hidden here" "make sanitize without compute-sanitizer, before building" \
        "tools/nokey_check.sh without compute-sanitizer" "make test's sanitizer suite without compute-sanitizer: SKIP, exit 0"
else
    expect_missing "make sanitize without compute-sanitizer, before building" "make sanitize: compute-sanitizer not found" \
        hidden_make sanitize BUILD="$T/nobuild"
    expect_missing "tools/nokey_check.sh without compute-sanitizer" "nokey_check: compute-sanitizer not found" \
        env PATH="$HIDDEN_PATH" bash tools/nokey_check.sh
    env PATH="$HIDDEN_PATH" bash tests/test_sanitizer.sh "$BUILD/allstages" >"$T/san_suite.out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q '^SKIP: compute-sanitizer: not found' "$T/san_suite.out" && ! grep -q '^FAIL' "$T/san_suite.out"; then
        ok "make test's sanitizer suite without compute-sanitizer: SKIP, exit 0"
    else
        bad "make test's sanitizer suite without compute-sanitizer: SKIP, exit 0" "exit $rc: $(head -c 200 "$T/san_suite.out")"
    fi
fi
if ! hide ncu; then
    skip_all "ncu could not be hidden here" "make profile K=5 without ncu, before building" "tools/ncu_metrics.sh without ncu"
else
    expect_missing "make profile K=5 without ncu, before building" "make profile: ncu (Nsight Compute) not found" hidden_make profile K=5 BUILD="$T/nobuild"
    expect_missing "tools/ncu_metrics.sh without ncu" "ncu_metrics: ncu (Nsight Compute) not found" env PATH="$HIDDEN_PATH" bash tools/ncu_metrics.sh "$T/ncu.csv" 5
fi
if ! hide cuobjdump; then
    skip_all "cuobjdump could not be hidden here" "make sass K=5 without cuobjdump" \
        "make sass K=5 without cuobjdump still prints the ptxas table and the PTX histogram"
else
    expect_missing "make sass K=5 without cuobjdump" "make sass: cuobjdump not found" hidden_make sass K=5
    if grep -q "PTX instruction histogram" "$T/missing.out" && grep -qE "^ +mma.sync +[1-9]" "$T/missing.out"; then
        ok "make sass K=5 without cuobjdump still prints the ptxas table and the PTX histogram"
    else
        bad "make sass K=5 without cuobjdump still prints the ptxas table and the PTX histogram" "$(head -c 200 "$T/missing.out")"
    fi
fi
if ! hide nvidia-smi; then
    skip_all "nvidia-smi could not be hidden here" "make xu-pipe without a GPU, before building" \
        "tools/gpu_session.sh without a GPU, before writing anything"
else
    expect_missing "make xu-pipe without a GPU, before building" "make xu-pipe: no NVIDIA GPU" hidden_make xu-pipe BUILD="$T/nobuild"
    expect_missing "tools/gpu_session.sh without a GPU, before writing anything" "gpu_session: no NVIDIA GPU" \
        env PATH="$HIDDEN_PATH" OUT="$T/nobuild" bash tools/gpu_session.sh build
fi
# tools/ncu_source_diff.py on two source pages cut to the columns it reads: B's loop (executed 100
# times) has an S2R that A's lacks, and the stall samples behind it; the loop's row and that
# instruction must come out, and the totals by reason.
"$PYTHON" - "$T" <<'PY'
import csv, os, sys
head = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed", "stall_wait", "stall_mio",
        "stall_mio (Not Issued)"]
def page(path, loop):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "k"])
        w.writerow(head)
        w.writerow(["0x0", "S2R R0, SR_TID.X", "3", "1", "3", "0", "0"])
        for i, (src, samples, mio) in enumerate(loop):
            w.writerow([hex(16 * (i + 1)), src, str(samples), "100", str(samples - mio), str(mio), "0"])
a = [("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24", 40, 0), ("BAR.ARV R11, 0x100", 5, 0)]
b = [a[0], ("S2R R8, SR_TID.X", 30, 30), a[1]]
page(os.path.join(sys.argv[1], "src_a.csv"), a)
page(os.path.join(sys.argv[1], "src_b.csv"), b)
PY
"$PYTHON" tools/ncu_source_diff.py "$T/src_a.csv" "$T/src_b.csv" >"$T/ncu_diff.out" 2>&1
if grep -q "B only: S2R R8, SR_TID.X" "$T/ncu_diff.out" && grep -Eq "^ +100 +2 +45 +3 +75 +\+30$" "$T/ncu_diff.out" &&
   grep -Eq "^stall_mio +0 +30 +\+30$" "$T/ncu_diff.out"; then
    ok "tools/ncu_source_diff.py: the loop's extra stall and the S2R behind it"
else
    bad "tools/ncu_source_diff.py: the loop's extra stall and the S2R behind it" "$(tr '\n' '|' <"$T/ncu_diff.out" | head -c 400)"
fi
finish
