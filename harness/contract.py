"""The benchmark contract as the Python scripts see it: the CSV columns, the kernel names of the
rows that are not stages, and the problems every benchmark runs (the chapters' headline problem and
the sweep).

The C side defines the same in harness/csv.h (CSV_HEADER, CSV_KERNEL_*_PEAK) and harness/problems.c; tests/test_contract.sh
checks that the two agree. harness/reference.py, plots/plot.py and tools/results_md.py import this.
"""

CSV_COLUMNS = [
    "gpu", "kernel", "name", "dtype", "batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k",
    "head_dim", "causal", "iters", "ms_median", "ms_min", "tflops", "max_abs_err", "rel_l2_err",
    "check", "commit", "date",
]

# The kernel column of the rows that are not stages (stages are "kernelNN"): the references that
# harness/reference.py times (FlashAttention-2 and cuDNN through PyTorch, FlashAttention-3 where its
# own Python interface imports), and the two ceilings of ./run --peak, mma.sync (the limit of stages
# 01-08) and wgmma (Hopper only: the limit of the stages built for sm_90a). harness/csv.h names the
# ceilings for the C side that writes them.
MMA_PEAK = "mma_peak"
WGMMA_PEAK = "wgmma_peak"
TIMED_REFERENCES = ("fa2", "cudnn", "fa3")
REFERENCE_KERNELS = TIMED_REFERENCES + (MMA_PEAK, WGMMA_PEAK)

# Timed calls per kernel and problem in a round of harness/rounds.py (its --iters default): few
# enough that a batch fits in the tens of milliseconds over which the card sets its clock.
ROUNDS_ITERS = 15

# The dtype column of fp8 rows: q, k and v in e4m3 (FlashAttention-3's fp8 forward, timed by
# harness/reference.py), O in bf16.
FP8_DTYPE = "e4m3"

# A problem is the tuple of its CSV columns, in this order.
PROBLEM_FIELDS = ("dtype", "batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal")

# The chapters' problem, ./run's default: B 16, H 16, S 4096, D 128, bf16, non-causal.
HEADLINE = ("bf16", 16, 16, 16, 4096, 4096, 128, 0)

# The sweep: batch * seqlen = 65536 and heads * head_dim = 2048 keep the tensors the same size at
# every point, so throughput differences come from the kernel, not the size.
SWEEP_TOKENS = 65536
SWEEP_WIDTH = 2048
SWEEP_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
SWEEP_HEAD_DIMS = [64, 128]


# The dtypes make bench runs the sweep in, in this order: bf16 on every stage, then e4m3 on the
# stages that take fp8 inputs (the C side's bench_dtype).
BENCH_DTYPES = ("bf16", FP8_DTYPE)


def sweep_problem(seqlen, head_dim, causal, dtype="bf16"):
    heads = SWEEP_WIDTH // head_dim
    return (dtype, SWEEP_TOKENS // seqlen, heads, heads, seqlen, seqlen, head_dim, causal)


def sweep_problems(dtype="bf16"):
    """Every sweep problem in `dtype`, in the order of the C side: head_dim, then causal, then seqlen."""
    return [sweep_problem(s, d, c, dtype) for d in SWEEP_HEAD_DIMS for c in (0, 1) for s in SWEEP_SEQLENS]


# Shapes off the sweep, timed only in alternating rounds (harness/rounds.py --set shapes), to see
# whether a lead on the sweep holds where the sweep does not look: a sequence that is no multiple of
# any tile (the last tile of every query and key range partly empty), grouped-query attention (8
# key/value heads for 32 query heads), a short query range over a long key range (chunked prefill:
# with the mask bottom-right aligned, every query sees most of the keys) and 32k keys. Each shape
# runs with and without the mask. They touch the same memory as the headline, or less, and the kernels
# see them only through the C API; the references too, where they can run them (see reference.py).
SHAPES_BASE = [
    ("bf16", 16, 16, 16, 4000, 4000, 128),
    ("bf16", 8, 32, 8, 4096, 4096, 128),
    ("bf16", 16, 32, 8, 4096, 4096, 64),
    ("bf16", 16, 16, 16, 1024, 8192, 128),
    ("bf16", 2, 16, 16, 32768, 32768, 128),
]


def shape_problems():
    """Every off-sweep shape, without and with the mask."""
    return [base + (c,) for base in SHAPES_BASE for c in (0, 1)]


def seqlen_label(seqlen):
    """512 -> '512', 4096 -> '4k'."""
    return f"{seqlen // 1024}k" if seqlen >= 1024 else str(seqlen)


if __name__ == "__main__":
    # What tests/test_contract.sh compares with the C side's dump.
    print(",".join(CSV_COLUMNS))
    print(",".join((MMA_PEAK, WGMMA_PEAK)))
    print(",".join(map(str, HEADLINE)))
    for dtype in BENCH_DTYPES:
        for p in sweep_problems(dtype):
            print(",".join(map(str, p)))
