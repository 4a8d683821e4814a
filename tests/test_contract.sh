#!/usr/bin/env bash
# One definition per language: the C side (harness/csv.h, harness/problems.c) and the Python side
# (harness/contract.py) must describe the same CSV columns, headline problem and sweep.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
if ! "$CC" -std=c11 -Wall -Icommon -Iharness -I"$CUDA_HOME/include" tests/contract_dump.c harness/problems.c \
        -o "$BUILD/contract_dump" 2>"$BUILD/contract_dump.err"; then
    bad "contract_dump builds" "$(head -3 "$BUILD/contract_dump.err")"; finish; exit
fi
"$BUILD/contract_dump" >"$BUILD/contract.c.txt"
"$PYTHON" harness/contract.py >"$BUILD/contract.py.txt"
if cmp -s "$BUILD/contract.c.txt" "$BUILD/contract.py.txt"; then
    ok "C and Python agree on the CSV columns, the headline problem and the $(($(wc -l <"$BUILD/contract.c.txt") - 2)) sweep problems"
else
    bad "C and Python agree on the contract" "$(diff "$BUILD/contract.c.txt" "$BUILD/contract.py.txt" | head -4 | tr '\n' ' ')"
fi
# ./run's default problem is the headline problem (cli.c takes it from problems.c).
if grep -q 'headline_problem()' harness/cli.c; then ok "./run's defaults come from headline_problem()"
else bad "./run's defaults come from headline_problem()" "harness/cli.c does not call it"; fi
finish
