#!/usr/bin/env bash
# test_cli.sh BINARY: the command-line contract of ./run (build/kernelNN or build/allstages).
#
#   - every class of bad argument exits 2, before touching the device, with a message on stderr
#     that names the parameter at fault;
#   - --help exits 0 and prints the usage;
#   - a valid command either runs (GPU) or, with no usable GPU, exits 3 saying "no CUDA device".
#
# One line per test: "PASS: name", "FAIL: name: why" or "SKIP: name: why"; exit 0 when none failed.
set -u

BIN=${1:?usage: tests/test_cli.sh BINARY (e.g. build/kernel01)}
if [ ! -x "$BIN" ]; then
    echo "FAIL: binary: $BIN is not an executable file"
    exit 1
fi

pass=0 fail=0 skip=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

ok()   { echo "PASS: $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL: $1: $2"; fail=$((fail + 1)); }
skip() { echo "SKIP: $1: $2"; skip=$((skip + 1)); }

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
    local name="bad argument: $*"
    run "$@"
    if [ "$rc" -ne 2 ]; then
        bad "$name" "exit $rc, expected 2 (stderr: $(head -c 200 "$TMP/err"))"
    elif ! grep -qF -- "$pattern" "$TMP/err"; then
        bad "$name" "stderr does not name '$pattern': $(head -c 200 "$TMP/err")"
    elif grep -qi "no CUDA device" "$TMP/err"; then
        bad "$name" "touched the device before rejecting the argument"
    else
        ok "$name"
    fi
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
expect_usage_error "--stage"       --stage 9
expect_usage_error "--stage"       --stage fast
expect_usage_error "--csv"         --csv
expect_usage_error "--seqlen"      --sweep --seqlen 512         # the sweep brings its own problems
expect_usage_error "--head-dim"    --matrix --head-dim 64
expect_usage_error "--no-check"    --bench --no-check
expect_usage_error "size"          --batch 65535 --heads 65535 --seqlen 2000000000   # beyond 64-bit offsets

# A CSV file with another header is refused before any device work, and left untouched.
printf 'when,what,how_fast\n2026-01-01,x,3\n' >"$TMP/foreign.csv"
cp "$TMP/foreign.csv" "$TMP/foreign.orig"
expect_usage_error "$TMP/foreign.csv" --csv "$TMP/foreign.csv"
if cmp -s "$TMP/foreign.csv" "$TMP/foreign.orig"; then ok "foreign CSV left untouched"; else bad "foreign CSV left untouched" "the file changed"; fi

# --- help ---------------------------------------------------------------------------------------
run --help
if [ "$rc" -eq 0 ] && grep -q -- "--head-dim" "$TMP/out" && grep -q "default" "$TMP/out"; then
    ok "--help exits 0 and prints the usage with defaults"
else
    bad "--help" "exit $rc; stdout: $(head -c 200 "$TMP/out")"
fi

# --- a valid command ----------------------------------------------------------------------------
SMALL=(--batch 1 --seqlen 128 --heads 2 --head-dim 64 --warmup 1 --iters 3)
run "${SMALL[@]}"
if [ "$rc" -eq 3 ]; then
    if grep -q "no CUDA device" "$TMP/err"; then
        ok "valid command without a usable GPU: exit 3, 'no CUDA device'"
    else
        bad "valid command without a usable GPU" "exit 3 but stderr lacks 'no CUDA device': $(head -c 200 "$TMP/err")"
    fi
    run --gpu-slug
    if [ "$rc" -eq 3 ] && grep -q "no CUDA device" "$TMP/err"; then
        ok "--gpu-slug without a usable GPU: exit 3"
    else
        bad "--gpu-slug without a usable GPU" "exit $rc"
    fi
    skip "valid small problem passes its check" "no usable CUDA device"
    skip "--csv writes the header and one row" "no usable CUDA device"
    skip "--gpu-slug prints a slug" "no usable CUDA device"
elif [ "$rc" -eq 0 ]; then
    if grep -q "PASS" "$TMP/out"; then ok "valid small problem passes its check"; else bad "valid small problem" "no PASS in: $(tail -c 300 "$TMP/out")"; fi
    run "${SMALL[@]}" --causal --csv "$TMP/new.csv"
    if [ "$rc" -eq 0 ] && [ "$(head -n 1 "$TMP/new.csv")" = "gpu,kernel,name,dtype,batch,heads_q,heads_kv,seqlen_q,seqlen_k,head_dim,causal,iters,ms_median,ms_min,tflops,max_abs_err,rel_l2_err,check,commit,date" ] \
        && [ "$(wc -l <"$TMP/new.csv")" -eq 2 ] && grep -q ",pass," "$TMP/new.csv"; then
        ok "--csv writes the header and one row"
    else
        bad "--csv writes the header and one row" "exit $rc; file: $(head -c 400 "$TMP/new.csv" 2>/dev/null)"
    fi
    run --gpu-slug
    if [ "$rc" -eq 0 ] && grep -Eq '^[a-z0-9_]+$' "$TMP/out"; then ok "--gpu-slug prints a slug"; else bad "--gpu-slug" "exit $rc: $(head -c 100 "$TMP/out")"; fi
else
    bad "valid command" "exit $rc (expected 0 with a GPU, 3 without): $(tail -c 300 "$TMP/err")"
fi

echo "test_cli: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
