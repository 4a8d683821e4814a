#!/usr/bin/env python3
"""Per-call times of pairs of kernels at the headline problem under the harness's two timing
methods, with the SM clock and the power nvidia-smi reads beside them: what makes a kernel's figure
depend on the method (docs/16_fp8.md, "Two ways to time it"; docs/measuring.md).

Each pair is timed in alternating rounds (the first kernel first in even rounds, second in odd
ones), each kernel by harness/reference.py's time_calls logic in three modes:
  nosettle  three warm-up calls, then the timed calls (make rounds-nosettle);
  settle    two warm-up calls and WARMUP_MS of the kernel's own work untimed (make rounds);
  warm50    fifty warm-up calls and a synchronisation, then the timed calls: if this agrees with
            settle, what settling buys survives an idle gap, so it is not the clock alone.
The pairs: the last stage that takes e4m3 and FlashAttention-3, both in e4m3; the last Hopper stage
without fp8 and FlashAttention-3 in bf16; stages 13 and 14 with the causal mask (the same kernel,
settled only).

A kernel's figure in a mode is the median of its first ROUNDS_ITERS timed calls, the batch that
make rounds times; the trace goes on past them (--budget-ms) to show where the clock goes next.
Rows: round, mode, problem, kernel, call index, the call's start (host clock, seconds) and its
milliseconds, to --csv; nvidia-smi's samples (every 20 ms) to the same name with _smi before .csv.
Usage: python3 tools/settle_trace.py --csv plots/settle/<gpu>_<commit>.csv [--rounds 2]
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "harness"))
sys.path.insert(0, os.path.join(ROOT, "plots"))
import libflash  # noqa: E402
import reference as ref  # noqa: E402
import rounds  # noqa: E402
from contract import FP8_DTYPE, HEADLINE, ROUNDS_ITERS  # noqa: E402
from plot import last_bf16_stage, stage_archs, stage_fp8  # noqa: E402

MODES = (("nosettle", 3, 0.0), ("settle", 2, ref.WARMUP_MS), ("warm50", 50, 0.0))


def batch_ms(calls):
    """A kernel's figure as make rounds would time it: the median of its first ROUNDS_ITERS calls.
    The trace runs on for --budget-ms so that it shows the clock past that batch too."""
    return statistics.median(ms for _, ms in calls[:ROUNDS_ITERS])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", required=True, metavar="FILE", help="the per-call rows (a new file)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, an even number (default 2)")
    ap.add_argument("--lib", default=os.path.join(os.environ.get("BUILD", "build"), "libflash.so"))
    ap.add_argument("--budget-ms", type=float, default=500.0,
                    help="timed work per kernel and mode, traced past the batch the figures take (default 500 ms)")
    args = ap.parse_args()
    if args.rounds < 2 or args.rounds % 2:
        ap.error("--rounds must be an even number >= 2")
    torch, rc = ref.torch_on_gpu(args.lib, "it times FlashAttention-3 beside the stages")
    if torch is None:
        return rc
    lib = libflash.load(args.lib)
    kernels = ref.Kernels(torch)
    if kernels.fa3_missing:
        print(f"error: FlashAttention-3 is needed: {kernels.fa3_missing}", file=sys.stderr)
        return 2
    stages = rounds.stage_kernels(lib)
    for n, kernel, name in stages:
        kernels.available[kernel] = (name, rounds.StageCall(torch, lib, n).make_call)
    columns = {k for _, k, _ in stages}
    fp8 = sorted(stage_fp8(ROOT) & columns)
    archs = {k: a for k, a in stage_archs(ROOT).items() if k in columns}
    if not fp8 or not {"kernel13", "kernel14"} <= columns:
        print(f"error: {args.lib} lacks a stage that takes e4m3, or stages 13 and 14", file=sys.stderr)
        return 2
    fp8_problem = (FP8_DTYPE,) + HEADLINE[1:-1] + (0,)
    pairs = [(fp8_problem, (fp8[-1], "fa3"), MODES),
             (HEADLINE[:-1] + (0,), (last_bf16_stage(archs, set(fp8)), "fa3"), MODES),
             (HEADLINE[:-1] + (1,), ("kernel13", "kernel14"), MODES[1:2])]
    flush = ref.make_flush_buffer(torch)
    base, ext = os.path.splitext(args.csv)
    os.makedirs(os.path.dirname(args.csv) or ".", exist_ok=True)
    smi_out = open(f"{base}_smi{ext}", "w")
    smi_out.write("timestamp,clocks_sm_mhz,power_w,temperature_c,clocks_event_reasons\n")
    smi_out.flush()
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active",
                            "--format=csv,noheader,nounits", "-lms", "20"], stdout=smi_out, stderr=subprocess.DEVNULL)
    rows, medians = [], {}
    try:
        for r in range(args.rounds):
            for problem, pair, modes in pairs:
                x = ref.inputs_for(torch, problem)
                label = rounds.table_label(problem)
                for mode, warmup, settle_ms in modes:
                    for kernel in (pair if r % 2 == 0 else pair[::-1]):
                        torch.cuda.empty_cache()
                        call = kernels.available[kernel][1](x)
                        call()  # harness/rounds.py's first call, its agreement check, before the warm-ups
                        calls = ref.time_calls(torch, call, flush, warmup, 1 << 30, args.budget_ms, settle_ms, host_starts=True)
                        ms = batch_ms(calls)
                        medians.setdefault((label, mode, kernel), []).append(ms)
                        print(f"round {r + 1}: {label} {mode:<8} {kernel:<9} {ms:.4f} ms (first {ROUNDS_ITERS} of {len(calls)} calls)", flush=True)
                        rows += [(r + 1, mode, label, kernel, i, f"{t:.6f}", f"{dt:.5f}") for i, (t, dt) in enumerate(calls)]
                del x
    finally:
        smi.terminate()
        smi_out.close()
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["round", "mode", "problem", "kernel", "call", "host_start_s", "ms"])
        w.writerows(rows)
    # Per pair and mode: the first kernel's time over the second's, the median over the rounds.
    print(f"\n{'problem':<46} {'mode':<9} {'pair':<20} first/second (ms)")
    for problem, pair, modes in pairs:
        label = rounds.table_label(problem)
        for mode, _, _ in modes:
            a, b = medians[(label, mode, pair[0])], medians[(label, mode, pair[1])]
            print(f"{label:<46} {mode:<9} {pair[0] + '/' + pair[1]:<20} {statistics.median(x / y for x, y in zip(a, b)):.3f}")
    print(f"\nrows in {args.csv}, nvidia-smi's samples in {base}_smi{ext}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
