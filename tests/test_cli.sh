#!/usr/bin/env bash
# test_cli.sh BINARY: the command-line contract of ./run (build/kernelNN or build/allstages).
#
#   - every class of bad argument exits 2, before touching the device, with a message on stderr
#     that names the parameter at fault; so does a flag given twice, or one that the chosen mode
#     would ignore (naming the flag and the mode), or a --csv file that cannot be written, or e4m3
#     inputs for a stage that does not take them (the API's refusal);
#   - --help exits 0 and prints the usage;
#   - a valid command either runs (GPU) or, with no usable GPU, exits 3 saying "no CUDA device",
#     and says what it found before CUDA's own text; so does --gpu-slug, and so does any command
#     with only the CUDA toolkit's stub libcuda.so to load (a machine without a driver, made here).
#
# One line per test: "PASS: name", "FAIL: name: why" or "SKIP: name: why" (tests/lib.sh); exit 0
# when none failed.
set -u
. "$(dirname "$0")/lib.sh"

BIN=${1:?usage: tests/test_cli.sh BINARY (e.g. build/kernel01)}
if [ ! -x "$BIN" ]; then
    bad "binary" "$BIN is not an executable file"
    finish
    exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_cli.XXXXXX")
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT

# Runs the binary with the given arguments; leaves the exit status in $rc and the streams in
# $TMP/out and $TMP/err.
run() {
    "$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
}

# expect_usage_error PATTERN ARGS...: exit 2, and stderr mentions PATTERN (the parameter's name).
expect_usage_error() {
    local pattern=$1
    shift
    expect_refused "bad argument: $*" "$pattern" "" "$@"
}

# expect_refused NAME PATTERN1 PATTERN2 ARGS...: exit 2, stderr mentions both patterns (the second
# may be empty), and the device was not touched. PATTERN2 is matched case-insensitively.
expect_refused() {
    local name=$1 p1=$2 p2=$3
    shift 3
    run "$@"
    if [ "$rc" -ne 2 ]; then
        bad "$name" "exit $rc, expected 2 (stderr: $(head -c 300 "$TMP/err"))"
    elif ! grep -qF -- "$p1" "$TMP/err"; then
        bad "$name" "stderr does not name '$p1': $(head -c 300 "$TMP/err")"
    elif [ -n "$p2" ] && ! grep -qiF -- "$p2" "$TMP/err"; then
        bad "$name" "stderr does not mention '$p2': $(head -c 300 "$TMP/err")"
    elif grep -qi "no CUDA device" "$TMP/err"; then
        bad "$name" "touched the device before rejecting the argument"
    else
        ok "$name"
    fi
}

# expect_ignored_refused FLAG MODE ARGS...: a flag that the mode would ignore is refused, naming both.
expect_ignored_refused() {
    local flag=$1 mode=$2
    shift 2
    expect_refused "ignored flag refused: $*" "$flag" "$mode" "$@"
}

# --- every class of bad argument -------------------------------------------------------------
expect_usage_error "--frob"        --frob                       # unknown flag
expect_usage_error "stray"         stray                        # positional argument
expect_usage_error "--batch"       --batch                      # missing value
expect_usage_error "--batch"       --batch abc                  # not a number
expect_usage_error "--batch"       --batch 12x                  # trailing junk
expect_usage_error "--batch"       --batch 0                    # out of range
expect_usage_error "--batch"       --batch -3                   # negative
expect_usage_error "--batch"       --batch 99999999999          # overflows int
expect_usage_error "--batch"       --batch 70000                # beyond the grid limit
expect_usage_error "--seqlen"      --seqlen 0
expect_usage_error "--seqlen"      --seqlen 3.5
expect_usage_error "--seqlen-q"    --seqlen-q 0
expect_usage_error "--seqlen-k"    --seqlen-k -1
expect_usage_error "--seqlen-k"    --seqlen-k 99999999999999999999999   # beyond long long
expect_usage_error "--heads"       --heads 0
expect_usage_error "--kv-heads"    --kv-heads 3                 # does not divide 16
expect_usage_error "--kv-heads"    --heads 8 --kv-heads 16      # more kv heads than heads
expect_usage_error "--kv-heads"    --kv-heads 0
expect_usage_error "--head-dim"    --head-dim 96                # unsupported
expect_usage_error "--head-dim"    --head-dim 0
expect_usage_error "--head-dim"    --head-dim x
expect_usage_error "--dtype"       --dtype fp8
expect_usage_error "--dtype"       --dtype
expect_usage_error "--causal"      --causal 2
expect_usage_error "--scale"       --scale -1
expect_usage_error "--scale"       --scale nan
expect_usage_error "--scale"       --scale inf
expect_usage_error "--scale"       --scale abc
expect_usage_error "--seed"        --seed -1
expect_usage_error "--seed"        --seed 1e3
expect_usage_error "--warmup"      --warmup -1
expect_usage_error "--iters"       --iters 0
expect_usage_error "--iters"       --iters 1000000000
expect_usage_error "--stage"       --stage 0
expect_usage_error "--stage"       --stage 99
expect_usage_error "--stage"       --stage fast
expect_usage_error "--csv"         --csv
expect_usage_error "--seqlen"      --sweep --seqlen 512         # the sweep brings its own problems
expect_usage_error "--head-dim"    --matrix --head-dim 64
expect_usage_error "--no-check"    --bench --no-check
expect_usage_error "size"          --batch 65535 --heads 65535 --seqlen 2000000000   # beyond 64-bit offsets

# --scale beyond float: overflow is not "must be > 0"; underflow would silently mean the default.
expect_refused "--scale 1e40 overflows a float"   "--scale" "overflows a float"  --scale 1e40
expect_refused "--scale 1e400 overflows a float"  "--scale" "overflows a float"  --scale 1e400
expect_refused "--scale 1e-50 underflows a float" "--scale" "underflows a float" --scale 1e-50
expect_refused "--scale 1e-400 underflows a float" "--scale" "underflows a float" --scale 1e-400
expect_refused "--scale 1e40 says float's largest" "--scale" "3.4e38" --scale 1e40
# A subnormal float (positive, below FLT_MIN ~ 1.18e-38) is representable, but the kernels flush it
# to zero: refused, saying why. Below the smallest subnormal it still underflows, with that message.
expect_refused "--scale 1e-40 is subnormal"       "--scale 1e-40"   "subnormal" --scale 1e-40
expect_refused "--scale 1.1e-38 is subnormal"     "--scale 1.1e-38" "smallest normal float" --scale 1.1e-38
expect_refused "--scale 1.4e-45 is subnormal"     "--scale 1.4e-45" "flush" --scale 1.4e-45
expect_refused "--scale=1e-40 is subnormal"       "--scale 1e-40"   "subnormal" --scale=1e-40
expect_refused "--scale 1e-46 underflows a float" "--scale 1e-46"   "underflows a float" --scale 1e-46
if grep -qi "subnormal" "$TMP/err"; then
    bad "--scale 1e-46 has its own message" "it says subnormal: $(head -c 300 "$TMP/err")"
else
    ok "--scale 1e-46 has its own message"
fi

# --- e4m3 inputs: only the stages that take fp8 inputs (build/gen/stages.h, the library's stage
# table: fp8 1) run them; the others are refused before the device with the API's own message,
# which names the first stage that takes them, or says that none does. Written to hold before and
# after the first fp8 stage exists.
STAGES_H=${BUILD:-build}/gen/stages.h
fp8_stages=$(sed -n 's/.*FLASH_STAGE(\([0-9]*\), "[^"]*", "[^"]*", 1).*/\1/p' "$STAGES_H" 2>/dev/null)
first_fp8=$(echo "$fp8_stages" | head -n 1)
if [ -n "$first_fp8" ]; then
    e4m3_tail="fp8 inputs need stage $first_fp8 ($(sed -n "s/.*FLASH_STAGE($first_fp8, \"\([^\"]*\)\".*/\1/p" "$STAGES_H")) or later"
else
    e4m3_tail="no stage takes fp8 inputs"
fi
case $(basename "$BIN") in  # the stages linked into this binary: build/kernelNN has NN alone
    kernel[0-9][0-9]) linked=${BIN##*kernel} ;;
    *) linked=$(sed -n 's/.*FLASH_STAGE(\([0-9]*\),.*/\1/p' "$STAGES_H" 2>/dev/null) ;;
esac
linked_fp8=$(for s in $linked; do echo "$fp8_stages" | grep -qx "$s" && echo "$s"; done)
if [ ! -f "$STAGES_H" ]; then
    bad "e4m3: the stage table" "$STAGES_H is missing (make all writes it)"
fi
expect_refused "--stage 1 --dtype e4m3: the API's refusal" "unsupported dtype e4m3 for stage 01 (kernel01_naive)" \
    "$e4m3_tail" --stage 1 --dtype e4m3
expect_refused "--dtype=e4m3 --stage=1: the API's refusal" "unsupported dtype e4m3 for stage 01" "$e4m3_tail" \
    --dtype=e4m3 --stage=1
expect_refused "--sweep --dtype e4m3 --stage 1: the API's refusal" "unsupported dtype e4m3 for stage 01" "$e4m3_tail" \
    --sweep --dtype e4m3 --stage 1
expect_refused "--bench --dtype e4m3 --stage 1: the API's refusal" "unsupported dtype e4m3 for stage 01" "$e4m3_tail" \
    --bench --dtype e4m3 --stage 1
expect_ignored_refused "--dtype" "--matrix" --matrix --dtype e4m3
expect_ignored_refused "--dtype" "--peak"   --peak --dtype bf16
expect_usage_error "supported: bf16, fp16, e4m3" --dtype e5m2
if [ -z "$linked_fp8" ]; then
    expect_refused "--dtype e4m3, no fp8 stage linked in: refused" "no stage linked into this binary takes e4m3 inputs" \
        "$e4m3_tail" --dtype e4m3
    expect_refused "--stage all --dtype e4m3, no fp8 stage linked in: refused" "takes e4m3 inputs" "$e4m3_tail" \
        --stage all --dtype e4m3 --seqlen 128
else
    skip "--dtype e4m3, no fp8 stage linked in: refused" "$(basename "$BIN") has fp8 stages: $(echo $linked_fp8)"
fi
run --help
if grep -q "e4m3" "$TMP/out"; then ok "--help names e4m3"; else bad "--help names e4m3" "no e4m3 in the usage"; fi

# --- a flag that takes no value, given one: say so (not "unknown argument '1'") ------------------
# Whatever follows that is not a flag is a value, negative-looking ones too.
expect_refused "no value: --no-check 1"      "--no-check takes no value, got '1'"  "" --no-check 1
expect_refused "no value: --no-check -1"     "--no-check takes no value, got '-1'" "" --no-check -1
expect_refused "no value: --sweep x"         "--sweep takes no value, got 'x'"     "" --sweep x
expect_refused "no value: --bench 0"         "--bench takes no value, got '0'"     "" --bench 0
expect_refused "no value: --matrix 1"        "--matrix takes no value, got '1'"    "" --matrix 1
expect_refused "no value: --peak -2"         "--peak takes no value, got '-2'"     "" --peak -2
expect_refused "no value: --gpu-slug 1"      "--gpu-slug takes no value, got '1'"  "" --gpu-slug 1
expect_refused "no value: --help 1"          "--help takes no value, got '1'"      "" --help 1
expect_refused "no value: --no-check=1"      "--no-check takes no value, got '1'"  "" --no-check=1
expect_refused "no value: --peak=0"          "--peak takes no value, got '0'"      "" --peak=0
expect_refused "no value: --iters 3 --sweep 1" "--sweep takes no value, got '1'"   "" --iters 3 --sweep 1

# --- --key=value: the same flags, the same checks, split at the first '=' ------------------------
expect_usage_error "--seqlen"      --seqlen=0
expect_usage_error "--seqlen"      --seqlen=abc
expect_usage_error "--batch"       --batch=-3
expect_usage_error "--head-dim"    --head-dim=96
expect_usage_error "--dtype"       --dtype=fp8
expect_usage_error "--stage"       --stage=99
expect_usage_error "--scale"       --scale=-1
expect_usage_error "--frob=3"      --frob=3                     # unknown, named as written
expect_refused "--seqlen= is an empty value"  "--seqlen"  "empty value"  --seqlen=
expect_refused "--csv= is an empty value"     "--csv"     "empty value"  --csv=
expect_refused "--causal= is an empty value"  "--causal"  "empty value"  --causal=
expect_refused "--causal=2 refused"           "--causal"  "expects 0 or 1, got '2'" --causal=2
expect_refused "--causal 2 refused"           "--causal"  "expects 0 or 1, got '2'" --causal 2
expect_refused "repeated: --seqlen 5 --seqlen=6" "--seqlen" "twice" --seqlen 5 --seqlen=6
expect_refused "repeated: --seqlen=5 --seqlen 6" "--seqlen" "twice" --seqlen=5 --seqlen 6
expect_refused "repeated: --causal=1 --causal"   "--causal" "twice" --causal=1 --causal
expect_ignored_refused "--seqlen"   "--sweep"  --sweep --seqlen=512

# --- a flag given twice: the last would silently win ------------------------------------------
expect_refused "repeated: --batch 8 --batch 4"    "--batch"    "twice" --batch 8 --batch 4
expect_refused "repeated: --causal --causal 0"    "--causal"   "twice" --causal --causal 0
expect_refused "repeated: --peak --peak"          "--peak"     "twice" --peak --peak
expect_refused "repeated: --no-check --no-check"  "--no-check" "twice" --no-check --no-check
expect_refused "repeated: --scale 0.1 --scale 0.2" "--scale"   "twice" --scale 0.1 --scale 0.2
expect_refused "repeated: --stage 1 --stage all"  "--stage"    "twice" --stage 1 --stage all
expect_refused "repeated: --csv a --csv b"        "--csv"      "twice" --csv "$TMP/a.csv" --csv "$TMP/b.csv"
expect_refused "repeated: --sweep ... --sweep"    "--sweep"    "twice" --sweep --iters 3 --sweep

# --- a flag that the mode would ignore: refused, naming the flag and the mode --------------------
# --peak alone measures the mma.sync ceiling: no problem, seed, timing, check or stage.
expect_ignored_refused "--batch"    "--peak"   --peak --batch 2
expect_ignored_refused "--causal"   "--peak"   --peak --causal
expect_ignored_refused "--scale"    "--peak"   --peak --scale 0.1
expect_ignored_refused "--head-dim" "--peak"   --head-dim 64 --peak
expect_ignored_refused "--seed"     "--peak"   --peak --seed 1
expect_ignored_refused "--warmup"   "--peak"   --peak --warmup 1
expect_ignored_refused "--iters"    "--peak"   --peak --iters 5
expect_ignored_refused "--no-check" "--peak"   --peak --no-check
expect_ignored_refused "--stage"    "--peak"   --peak --stage 1
# --matrix: fixed small cases, no timing, no CSV.
expect_ignored_refused "--warmup"   "--matrix" --matrix --warmup 1
expect_ignored_refused "--iters"    "--matrix" --matrix --iters 5
expect_ignored_refused "--csv"      "--matrix" --matrix --csv "$TMP/matrix.csv"
expect_ignored_refused "--no-check" "--matrix" --matrix --no-check
expect_ignored_refused "--batch"    "--matrix" --matrix --batch 2
expect_ignored_refused "--iters"    "--matrix" --peak --matrix --iters 5     # --peak does not time either
expect_ignored_refused "--seqlen"   "--matrix" --peak --matrix --seed 1 --seqlen 64  # --seed is fine
# --sweep / --bench: their own problems; --bench always checks.
expect_ignored_refused "--causal"   "--sweep"  --sweep --causal
expect_ignored_refused "--scale"    "--bench"  --bench --scale 0.1
expect_ignored_refused "--kv-heads" "--sweep"  --peak --sweep --kv-heads 4
expect_ignored_refused "--no-check" "--bench"  --peak --bench --no-check
if [ ! -e "$TMP/matrix.csv" ]; then ok "a refused --csv file is not created"; else bad "a refused --csv file is not created" "$TMP/matrix.csv exists"; fi

# --- other combinations that would silently drop something --------------------------------------
expect_refused "--gpu-slug with another flag"         "--gpu-slug" "--batch" --gpu-slug --batch 2
expect_refused "--gpu-slug after another flag"        "--gpu-slug" "--peak"  --peak --gpu-slug
expect_refused "--gpu-slug with --csv"                "--gpu-slug" "--csv"   --gpu-slug --csv "$TMP/slug.csv"
expect_refused "--sweep with --bench"                 "--sweep"    "--bench" --sweep --bench
expect_refused "--seqlen with --seqlen-q and -k"      "--seqlen"   "--seqlen-q" --seqlen 128 --seqlen-q 64 --seqlen-k 64

# A CSV file with another header is refused before any device work, and left untouched.
printf 'when,what,how_fast\n2026-01-01,x,3\n' >"$TMP/foreign.csv"
cp "$TMP/foreign.csv" "$TMP/foreign.orig"
expect_usage_error "$TMP/foreign.csv" --csv "$TMP/foreign.csv"
if cmp -s "$TMP/foreign.csv" "$TMP/foreign.orig"; then ok "foreign CSV left untouched"; else bad "foreign CSV left untouched" "the file changed"; fi

# A --csv path that cannot be written is refused with the other arguments, not after the first
# problem ran: a directory, a file under a directory that does not exist, a file we may not write.
mkdir -p "$TMP/adir"
expect_refused "--csv with a directory"               "--csv" "$TMP/adir is a directory" --csv "$TMP/adir"
expect_refused "--csv with a directory (trailing /)"  "--csv" "directory" --csv "$TMP/nodir/"
expect_refused "--csv under a missing directory"      "--csv" "no such directory $TMP/nodir" --csv "$TMP/nodir/x.csv"
expect_refused "--csv under a file"                   "--csv" "$TMP/foreign.csv/x.csv" --csv "$TMP/foreign.csv/x.csv"
if [ ! -e "$TMP/nodir" ]; then ok "--csv refusal creates no directory"; else bad "--csv refusal creates no directory" "$TMP/nodir exists"; fi
if [ "$(id -u)" -eq 0 ]; then
    skip "--csv with an unwritable file" "running as root, which may write any file"
    skip "--csv in an unwritable directory" "running as root, which may write any directory"
else
    : >"$TMP/readonly.csv"  # empty: fine but for the permission
    chmod a-w "$TMP/readonly.csv"
    expect_refused "--csv with an unwritable file"    "--csv" "$TMP/readonly.csv: permission denied" --csv "$TMP/readonly.csv"
    mkdir -p "$TMP/rodir" && chmod a-w "$TMP/rodir"
    expect_refused "--csv in an unwritable directory" "--csv" "permission denied" --csv "$TMP/rodir/new.csv"
fi

# expect_accepted ARGS...: (no usable GPU) the arguments pass every check: exit 3, "no CUDA device".
expect_accepted() {
    run "$@"
    if [ "$rc" -eq 3 ] && grep -q "no CUDA device" "$TMP/err"; then
        ok "accepted: $*"
    else
        bad "accepted: $*" "exit $rc, expected 3 at the device: $(head -c 300 "$TMP/err")"
    fi
}

# driver_state: "absent" when the dynamic loader cannot find libcuda.so.1 (what the CUDA runtime
# loads; without it cudaDriverGetVersion reports 0), "present" when it can, "unknown" without ldconfig.
driver_state() {
    local ldconfig d
    ldconfig=$(command -v ldconfig || { [ -x /sbin/ldconfig ] && echo /sbin/ldconfig; })
    local IFS=:
    for d in ${LD_LIBRARY_PATH:-}; do
        [ -n "$d" ] && [ -e "$d/libcuda.so.1" ] && { echo present; return; }
    done
    if [ -z "$ldconfig" ]; then echo unknown
    elif "$ldconfig" -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then echo present
    else echo absent
    fi
}

# no_gpu_message NAME DRIVER: the run just made found no usable GPU: exit 3, and the first line of
# stderr says "no CUDA device: ", then what was found in plain words, and CUDA's own text only after
# "; CUDA says: ". Without a driver CUDA says "CUDA driver version is insufficient for CUDA runtime
# version", which sends the reader to update a driver that is not there: it must never lead. DRIVER
# is driver_state's answer, or "stub": without a driver (absent, stub) the lead says so.
no_gpu_message() {
    local name=$1 driver=$2 msg lead
    msg=$(head -n 1 "$TMP/err")
    lead=${msg#no CUDA device: }
    lead=${lead%%; CUDA says: *}
    if [ "$rc" -eq 3 ] && [ "${msg#no CUDA device: }" != "$msg" ]; then
        ok "$name without a usable GPU: exit 3, 'no CUDA device: ' first"
    else
        bad "$name without a usable GPU: exit 3, 'no CUDA device: ' first" "exit $rc: $msg"
    fi
    case $lead in
        ""|*"CUDA driver version"*|*insufficient*|*cudaError*)
            bad "$name without a usable GPU: what was found leads, CUDA's own text after" "$msg" ;;
        *) ok "$name without a usable GPU: what was found leads, CUDA's own text after" ;;
    esac
    case $driver in
        absent|stub)
            case $lead in
                "no NVIDIA driver was found"*) ok "$name without a driver: 'no NVIDIA driver was found' leads" ;;
                *) bad "$name without a driver: 'no NVIDIA driver was found' leads" "$msg" ;;
            esac ;;
        present) skip "$name without a driver: 'no NVIDIA driver was found' leads" "libcuda.so.1 is installed here" ;;
        *) skip "$name without a driver: 'no NVIDIA driver was found' leads" "cannot tell whether libcuda.so.1 is installed (no ldconfig)" ;;
    esac
}

# --- help ---------------------------------------------------------------------------------------
run --help
if [ "$rc" -eq 0 ] && grep -q -- "--head-dim" "$TMP/out" && grep -q "default" "$TMP/out"; then
    ok "--help exits 0 and prints the usage with defaults"
else
    bad "--help" "exit $rc; stdout: $(head -c 200 "$TMP/out")"
fi
if grep -q -- "--key=value" "$TMP/out"; then ok "--help says --key=value works"; else bad "--help says --key=value works" "no '--key=value' in the usage"; fi
run --no-check --help
if [ "$rc" -eq 0 ] && grep -q -- "--head-dim" "$TMP/out"; then ok "--no-check --help: a flag after --no-check is no value"; else bad "--no-check --help" "exit $rc: $(head -c 200 "$TMP/err")"; fi

# --- only the toolkit's stub libcuda.so: a driver-less machine, also where a GPU is ----------------
# The CUDA toolkit ships a stub libcuda.so to link against; put first on the library path as
# libcuda.so.1, it is what the runtime loads, and it answers every call with "CUDA driver is a stub
# library": the message must still say first that no driver was found.
stub=""
for d in "${CUDA_HOME:-/usr/local/cuda}"/lib64/stubs "${CUDA_HOME:-/usr/local/cuda}"/targets/*/lib/stubs; do
    [ -e "$d/libcuda.so" ] && { stub=$d/libcuda.so; break; }
done
if [ -z "$stub" ]; then
    for what in "without a usable GPU: exit 3, 'no CUDA device: ' first" \
                "without a usable GPU: what was found leads, CUDA's own text after" \
                "without a driver: 'no NVIDIA driver was found' leads"; do
        skip "stub libcuda.so $what" "no stub libcuda.so under ${CUDA_HOME:-/usr/local/cuda}"
    done
else
    mkdir -p "$TMP/stub"
    ln -sf "$stub" "$TMP/stub/libcuda.so.1"
    LD_LIBRARY_PATH=$TMP/stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} run --batch 1 --seqlen 128 --heads 2 --head-dim 64
    no_gpu_message "stub libcuda.so" stub
fi

# --- a valid command ----------------------------------------------------------------------------
SMALL=(--batch 1 --seqlen 128 --heads 2 --head-dim 64 --warmup 1 --iters 3)
run "${SMALL[@]}"
if [ "$rc" -eq 3 ]; then
    no_gpu_message "valid command" "$(driver_state)"
    run --gpu-slug
    no_gpu_message "--gpu-slug" "$(driver_state)"
    # Combinations every mode uses in full pass the argument checks: exit 3 at the device. The
    # CSV check creates and changes nothing.
    : >"$TMP/empty.csv"
    touch -d '2001-01-01 00:00:00' "$TMP/empty.csv"
    expect_accepted --peak --matrix --csv "$TMP/accepted.csv"
    expect_accepted --peak --csv "$TMP/accepted.csv"
    expect_accepted --sweep --stage 1 --seed 2 --warmup 0 --iters 3 --no-check --csv "$TMP/accepted.csv"
    expect_accepted --bench --stage all --seed 2 --warmup 0 --iters 3 --csv "$TMP/empty.csv"
    expect_accepted --matrix --stage 1 --seed 3
    expect_accepted --peak --sweep --no-check
    expect_accepted --matrix --sweep --iters 3 --csv "$TMP/accepted.csv"
    expect_accepted --peak --bench --iters 3
    expect_accepted --seqlen 128 --seqlen-q 64 --causal 0
    expect_accepted --scale 0
    expect_accepted --scale 3e38
    expect_accepted --scale 1.2e-38                   # just above FLT_MIN: a normal float
    expect_accepted --seqlen=128 --causal=1 --scale=0.1 --stage=1 --seed=2 --warmup=0 --iters=3
    expect_accepted --causal=0 --dtype=fp16 --head-dim=64 --no-check --csv="$TMP/accepted.csv"
    expect_accepted --sweep --dtype fp16 --stage 1 --iters 3    # the sweep in one dtype
    expect_accepted --bench --dtype bf16 --stage all --iters 3
    for s in $linked_fp8; do
        expect_accepted --stage "$s" --dtype e4m3 --seqlen 128
        expect_accepted --bench --dtype e4m3 --stage "$s" --iters 3
    done
    if [ -n "$linked_fp8" ]; then
        expect_accepted --dtype=e4m3 --head-dim 64 --causal --kv-heads 4
        expect_accepted --stage all --dtype e4m3 --seqlen 128
    fi
    expect_accepted --causal --no-check              # --causal's optional value is not a no-value flag's
    expect_accepted --sweep --iters=3 --stage=all
    expect_accepted --csv "$TMP/empty.csv" --seed 1 --stage 1 --no-check
    if [ ! -e "$TMP/accepted.csv" ]; then ok "--csv check creates no file"; else bad "--csv check creates no file" "$TMP/accepted.csv exists"; fi
    if [ ! -s "$TMP/empty.csv" ] && [ "$(date -r "$TMP/empty.csv" +%Y)" = 2001 ]; then
        ok "--csv check leaves an existing file alone (content and time)"
    else
        bad "--csv check leaves an existing file alone (content and time)" "$(ls -l --full-time "$TMP/empty.csv")"
    fi
    skip "valid small problem passes its check" "no usable CUDA device"
    skip "--csv writes the header and one row" "no usable CUDA device"
    skip "--gpu-slug prints a slug" "no usable CUDA device"
elif [ "$rc" -eq 0 ]; then
    if grep -q "PASS" "$TMP/out"; then ok "valid small problem passes its check"; else bad "valid small problem" "no PASS in: $(tail -c 300 "$TMP/out")"; fi
    run "${SMALL[@]}" --causal --csv "$TMP/new.csv"
    # The header as harness/contract.py defines it (tests/test_contract.sh checks the C side agrees).
    header=$("${PYTHON:-python3}" "$(dirname "$0")/../harness/contract.py" | head -n 1)
    if [ "$rc" -eq 0 ] && [ "$(head -n 1 "$TMP/new.csv")" = "$header" ] \
        && [ "$(wc -l <"$TMP/new.csv")" -eq 2 ] && grep -q ",pass," "$TMP/new.csv"; then
        ok "--csv writes the header and one row"
    else
        bad "--csv writes the header and one row" "exit $rc; file: $(head -c 400 "$TMP/new.csv" 2>/dev/null)"
    fi
    run --gpu-slug
    if [ "$rc" -eq 0 ] && grep -Eq '^[a-z0-9_]+$' "$TMP/out"; then ok "--gpu-slug prints a slug"; else bad "--gpu-slug" "exit $rc: $(head -c 100 "$TMP/out")"; fi
    skip "the no-GPU message" "a CUDA device answers here"
    skip "combinations each mode uses in full pass the argument checks" "with a GPU they would run (checked where none answers)"
else
    bad "valid command" "exit $rc (expected 0 with a GPU, 3 without): $(tail -c 300 "$TMP/err")"
fi

finish
