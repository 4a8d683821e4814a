#!/usr/bin/env bash
# Nsight Compute on every stage at the headline problem (the 4th launch of flash_fwd_kernel, after
# 3 warm-up launches; clocks left alone), its raw metrics appended to a CSV in long form:
#   gpu,kernel,name,problem,metric,unit,value,commit,date
# so that the chapters quote profiles from a file the tool wrote, through tools/results_md.py.
# Usage: tools/ncu_metrics.sh OUT.csv [STAGE...]   (default: every stage build/allstages runs;
# "fa3": FlashAttention-3 on the same problem, through harness/reference.py --profile-fa3, its
# 4th launch likewise, kernel column fa3)
# NCU_PROBLEM=headline/causal, sweep/D/S or sweep/D/S/causal profiles that problem instead (the
# names of tools/results_md.py; the CSV's problem column records it).
# Exits 2 on a problem it does not know, and then without ncu or a usable GPU, naming what is missing.
set -u
cd "$(dirname "$0")/.."
CSV=${1:?usage: tools/ncu_metrics.sh OUT.csv [STAGE...]}
shift
BIN=build/allstages
stages=${*:-$(seq 1 "$(ls -d kernel[0-9][0-9]_*/ | wc -l)")}
PROBLEM=${NCU_PROBLEM:-headline}
# The problem's ./run flags, from the one definition of the benchmark's problems (harness/contract.py).
ARGS=$(python3 - "$PROBLEM" <<'PY'
import sys
sys.path.insert(0, "harness")
from contract import HEADLINE, SWEEP_HEAD_DIMS, SWEEP_SEQLENS, sweep_problem
names = {"headline": HEADLINE, "headline/causal": HEADLINE[:-1] + (1,)}
for d in SWEEP_HEAD_DIMS:
    for s in SWEEP_SEQLENS:
        for c in (0, 1):
            names[f"sweep/{d}/{s}" + ("/causal" if c else "")] = sweep_problem(s, d, c)
if sys.argv[1] not in names:
    sys.exit(f"ncu_metrics: NCU_PROBLEM={sys.argv[1]}: want headline, headline/causal, sweep/D/S or sweep/D/S/causal "
             f"(D in {SWEEP_HEAD_DIMS}, S in {SWEEP_SEQLENS})")
dtype, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal = names[sys.argv[1]]
print(f"--dtype {dtype} --batch {batch} --heads {heads_q} --kv-heads {heads_kv} --seqlen-q {seqlen_q} "
      f"--seqlen-k {seqlen_k} --head-dim {head_dim} --causal {causal}")
if dtype == "bf16" and heads_q == heads_kv and seqlen_q == seqlen_k:
    print(f"{batch},{heads_q},{seqlen_q},{head_dim},{causal}")
PY
) || exit 2
FA3_SHAPE=$(echo "$ARGS" | sed -n 2p)  # the problem as reference.py --profile-fa3 takes it, where it can
ARGS=$(echo "$ARGS" | head -n 1)
command -v ncu >/dev/null 2>&1 || { echo "ncu_metrics: ncu (Nsight Compute) not found on this machine (not on PATH)" >&2; exit 2; }
"$BIN" --gpu-slug >/dev/null || exit 2  # no usable GPU: --gpu-slug says why
# The sections the chapters read (throughput, pipes, scheduler and warp states) plus the shared-memory
# bank conflicts, which no default section reports as one number.
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section Occupancy"
METRICS=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
tmp=$(mktemp -d)
for s in $stages; do
    if [ "$s" = fa3 ]; then
        [ -n "$FA3_SHAPE" ] || { echo "ncu_metrics: FA3 runs only square bf16 problems without GQA, not $PROBLEM" >&2; continue; }
        run=(--kernel-name-base demangled --kernel-name regex:FlashAttnFwd python3 harness/reference.py --profile-fa3 "$FA3_SHAPE")
    else
        # shellcheck disable=SC2206
        run=(--kernel-name regex:flash_fwd_kernel "$BIN" --stage "$s" $ARGS --no-check --warmup 3 --iters 1)
    fi
    # shellcheck disable=SC2086
    if ! ncu --clock-control none --launch-skip 3 --launch-count 1 $SECTIONS --metrics "$METRICS" --page raw --csv \
            "${run[@]}" >"$tmp/ncu_$s.csv" 2>"$tmp/ncu_$s.err"; then
        echo "ncu_metrics: stage $s failed: $(tail -3 "$tmp/ncu_$s.err")" >&2
        continue
    fi
    echo "stage $s profiled"
done
# ncu's raw page is one header row of metric names, one row of units, one row per kernel: turn the
# rows into the long form above.
python3 - "$CSV" "$tmp" "$(build/allstages --gpu-slug >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
        "${COMMIT:-unknown}" "$PROBLEM" $stages <<'PY'
import csv, datetime, os, sys
out, tmp, gpu, commit, problem, stages = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
new = not os.path.exists(out) or os.path.getsize(out) == 0
with open(out, "a", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    if new:
        w.writerow(["gpu", "kernel", "name", "problem", "metric", "unit", "value", "commit", "date"])
    for s in stages:
        path = os.path.join(tmp, f"ncu_{s}.csv")
        if not os.path.exists(path):
            continue
        lines = [l for l in open(path) if l.startswith('"')]  # ncu's own notes are not CSV
        rows = list(csv.reader(lines))
        if len(rows) < 3:
            continue
        names, units, values = rows[0], rows[1], rows[2]
        if s == "fa3":
            kernel, name = "fa3", "FlashAttention-3"
        else:
            kernel = f"kernel{int(s):02d}"
            name = next((d for d in sorted(os.listdir(".")) if d.startswith(kernel + "_")), kernel)
        for n, u, v in zip(names, units, values):
            if "__" in n:  # metrics have double underscores; the ID, process and launch columns do not
                w.writerow([gpu, kernel, name, problem, n, u, v.replace(",", ""), commit, date])
PY
rm -rf "$tmp"
echo "ncu metrics appended to $CSV"
