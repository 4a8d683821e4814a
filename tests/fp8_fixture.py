"""The e4m3 fixture that tests/test_plot.sh and tests/test_docs.sh share: a stage tree, a benchmark
CSV and the rounds that `make rounds` writes for it, written into a directory of the test's, so that
the e4m3 figures, tables and plot are seen on rows whose every value is known.

  stages/    kernel08_final (sm_80), kernel13_overlap and kernel14_cluster (sm_90a, no fp8), and
             kernel15_fp8 (sm_90a, naming its fp8 entry point): stage 15 takes e4m3, stage 14 is
             the last Hopper stage without it; each header's technique is "the fixture's stage NN,
             a header only";
  fp8_sample.csv                 the benchmark run: the stages at the headline in bf16 (checks
             passed), stage 14 and FA3 over the sweep in bf16 and stage 15 and FA3 in e4m3, the
             two ceilings;
  rounds/fp8_sample_fp8c0de.csv  ROUNDS rounds of harness/rounds.py's problem_sets("all") for those
             stages: the rows are what rounds.py would append, in its order (forward, then
             reversed), at TFLOP/s that tflops() below gives.

tflops() moves the kernels by factors of their own from round to round, as a power-limited card
does.

Usage (from the repository root): python3 tests/fp8_fixture.py DIR
"""
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "harness"))
sys.path.insert(0, os.path.join(ROOT, "plots"))
import plot  # noqa: E402
import rounds  # noqa: E402
from contract import CSV_COLUMNS, FP8_DTYPE, HEADLINE, MMA_PEAK, WGMMA_PEAK, sweep_problems  # noqa: E402

STAGES = [(8, "kernel08", "kernel08_final", "sm_80"), (13, "kernel13", "kernel13_overlap", "sm_90a"),
          (14, "kernel14", "kernel14_cluster", "sm_90a"), (15, "kernel15", "kernel15_fp8", "sm_90a")]
FP8_STAGE = "kernel15"
COMMIT = "fp8c0de"
ROUNDS = 4
NAMES = {"fa2": "FlashAttention-2 (torch sdpa flash)", "cudnn": "cuDNN fused attention (torch sdpa cudnn)",
         "fa3": "FlashAttention-3 (fa3_fwd_interface.flash_attn_func)"}
# TFLOP/s at the headline shape, non-causal, per kernel and dtype.
BASE = {("kernel08", "bf16"): 300.0, ("kernel13", "bf16"): 580.0, ("kernel14", "bf16"): 600.0,
        ("kernel15", "bf16"): 610.0, ("kernel15", FP8_DTYPE): 900.0, ("fa2", "bf16"): 330.0,
        ("cudnn", "bf16"): 580.0, ("fa3", "bf16"): 640.0, ("fa3", FP8_DTYPE): 1000.0}
# A kernel's factor in each round: those of the e4m3 comparisons move apart from each other, so that
# the median over pairs of rounds of stage 15 / FA3 (0.88x at the headline) and of stage 15 in e4m3 /
# stage 14 in bf16 (1.44x) differ from the ratios of the medians (0.86x, 1.42x).
ROUND_FACTORS = {("kernel15", FP8_DTYPE): (1.00, 0.90, 1.00, 0.90), ("fa3", FP8_DTYPE): (0.90, 1.00, 1.00, 1.00),
                 ("kernel14", "bf16"): (0.95, 1.00, 1.00, 1.00)}
OTHER_FACTORS = (1.00, 0.97, 1.02, 0.99)


def tflops(kernel, problem, r):
    dtype, _, _, _, seqlen, _, head_dim, causal = problem
    shape = (1 - 256 / seqlen) * (0.9 if causal else 1.0) * (0.85 if head_dim == 64 else 1.0)
    factors = ROUND_FACTORS.get((kernel, dtype), OTHER_FACTORS)
    return round(BASE[(kernel, dtype)] * shape * factors[r % len(factors)], 2)


def row(kernel, name, problem, tf, check, commit, date, dtype=None):
    fields = dict(gpu="FIXTURE GPU", kernel=kernel, name=name, iters=15, ms_median=1.0, ms_min=1.0, tflops=f"{tf:.2f}",
                  max_abs_err="", rel_l2_err="", check=check, commit=commit, date=date)
    fields.update(zip(("dtype", "batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal"), problem))
    return [fields[c] for c in CSV_COLUMNS]


def write(directory):
    for nn, _, dirname, arch in STAGES:
        os.makedirs(os.path.join(directory, "stages", dirname), exist_ok=True)
        entry = f"\nextern \"C\" int {plot.FP8_ENTRY.format(nn=nn)}(void);\n" if dirname.startswith(FP8_STAGE) else ""
        with open(os.path.join(directory, "stages", dirname, "kernel.cu"), "w") as f:
            f.write(f"/*\n * Stage {nn:02d} - {dirname[len('kernelNN_'):]}: the fixture's stage {nn:02d}, a header only.\n"
                    f" * Needs:     {arch}: fixture.\n */\n{entry}")
    names = {k: name for _, k, name, _ in STAGES}
    names.update(NAMES)

    # The one run: at round 2's speeds (where stage 15 and FA3 in e4m3 do not tie), a twentieth faster.
    bench = [row(k, names[k], HEADLINE[:-1] + (c,), tflops(k, HEADLINE[:-1] + (c,), 2) * 1.05, "pass", "abc1234",
                 "2026-12-01T09:00:00Z") for _, k, _, _ in STAGES if k != "kernel14" for c in (0, 1)]
    bench += [row(k, names[k], p, tflops(k, p, 2) * 1.05, "pass" if k != "fa3" else "skipped", "abc1234",
                  "2026-12-01T09:00:00Z") for k, dtype in (("kernel14", "bf16"), ("fa3", "bf16"), (FP8_STAGE, FP8_DTYPE),
                                                          ("fa3", FP8_DTYPE)) for p in sweep_problems(dtype)]
    peaks = [["FIXTURE GPU", MMA_PEAK, "mma.sync m16n8k16 bf16 ceiling", "bf16"] + [""] * 7
             + [20, "", "", "646.00", "", "", "skipped", "abc1234", "2026-12-01T09:00:00Z"],
             ["FIXTURE GPU", WGMMA_PEAK, "wgmma.m64n128k16 bf16 f32-acc"] + [""] * 8
             + [10, 4.88, 4.83, "929.03", "", "", "skipped", "abc1234", "2026-12-01T09:00:00Z"]]
    with open(os.path.join(directory, "fp8_sample.csv"), "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([CSV_COLUMNS] + bench + peaks)

    rounds.stage_archs = lambda root: plot.stage_archs(os.path.join(directory, "stages"))
    stages = [(nn, k, name) for nn, k, name, _ in STAGES]
    sets = rounds.problem_sets("all", stages, (), {FP8_STAGE})
    rows = [CSV_COLUMNS]
    for r in range(ROUNDS):
        for problem, kernels in sets:
            for kernel in kernels if r % 2 == 0 else kernels[::-1]:
                rows.append(row(kernel, names[kernel], problem, tflops(kernel, problem, r), "skipped", COMMIT,
                                f"2026-12-02T10:0{r}:00Z"))
    os.makedirs(os.path.join(directory, "rounds"), exist_ok=True)
    with open(os.path.join(directory, "rounds", f"fp8_sample_{COMMIT}.csv"), "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


if __name__ == "__main__":
    write(sys.argv[1])
