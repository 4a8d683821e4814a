#!/usr/bin/env bash
# One definition per language: the C side (harness/csv.h, harness/problems.c) and the Python side
# (harness/contract.py) must describe the same CSV columns, ceilings' kernel names (mma_peak,
# wgmma_peak), headline problem and sweep, in the same benchmark dtypes (bf16, e4m3) with the same
# names for them.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env
if ! "$CC" -std=c11 -Wall -Icommon -Iharness -I"$CUDA_HOME/include" tests/contract_dump.c harness/problems.c harness/lowp.c \
        -o "$BUILD/contract_dump" 2>"$BUILD/contract_dump.err"; then
    bad "contract_dump builds" "$(head -3 "$BUILD/contract_dump.err")"; finish; exit
fi
"$BUILD/contract_dump" >"$BUILD/contract.c.txt"
"$PYTHON" harness/contract.py >"$BUILD/contract.py.txt"
if cmp -s "$BUILD/contract.c.txt" "$BUILD/contract.py.txt"; then
    ok "C and Python agree on the CSV columns, the ceilings' kernel names, the headline problem and the $(($(wc -l <"$BUILD/contract.c.txt") - 3)) sweep problems ($(cut -d, -f1 "$BUILD/contract.c.txt" | tail -n +3 | sort -u | tr '\n' ' ')dtypes)"
else
    bad "C and Python agree on the contract" "$(diff "$BUILD/contract.c.txt" "$BUILD/contract.py.txt" | head -4 | tr '\n' ' ')"
fi
# Which architecture each stage is built for: the Makefile reads it from the "Needs:" line of the
# stage headers (STAGE_TABLE), and so does plots/plot.py (stage_archs), which draws and tabulates the
# Hopper track from it. Both must read the same.
mk_archs=$(for entry in $STAGE_TABLE; do IFS=: read -r nn _ arch <<<"$entry"; printf '%s:%s\n' "$nn" "$arch"; done)
py_archs=$("$PYTHON" -c 'import sys; sys.path.insert(0, "plots"); from plot import stage_archs
for kernel, arch in stage_archs().items(): print(f"{kernel[6:]}:{arch}")' 2>&1)
if [ "$mk_archs" = "$py_archs" ]; then
    ok "the Makefile and plots/plot.py read the same architecture from the $(echo "$mk_archs" | wc -l) stage headers"
else
    bad "the Makefile and plots/plot.py read the same stage architectures" \
        "make: $(echo $mk_archs) / plot.py: $(echo $py_archs)"
fi
# ./run's default problem is the headline problem (cli.c takes it from problems.c).
if grep -q 'headline_problem()' harness/cli.c; then ok "./run's defaults come from headline_problem()"
else bad "./run's defaults come from headline_problem()" "harness/cli.c does not call it"; fi
finish
