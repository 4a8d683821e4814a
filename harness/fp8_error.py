#!/usr/bin/env python3
"""The error of e4m3 attention against float64: the last stage that takes fp8 inputs and
FlashAttention-3's fp8 forward, on the same inputs, in one call.

Why: ./run checks a stage's e4m3 output against its fp32 reference within a tolerance measured for
each problem (docs/measuring.md): that says the stage is right, not how close it comes to the
kernel it is measured against. Here the stage and FlashAttention-3 read the same bytes with the same
descale factors, and their errors against one float64 reference are set side by side.

  inputs     seeded N(0, 1) samples (harness/reference.py's Inputs), quantized per tensor the way
             fp8 tensors are made for FlashAttention-3, and the way ./run makes them (harness/lowp.c):
             descale = amax / 448 in fp32, element = e4m3(x / descale), rounded to nearest even and
             saturating; an element stands for its e4m3 value times the descale;
  our stage  flash_forward_fp8 with the three descales (harness/rounds.py's StageCall), O in bf16;
  FA3        flash_attn_func with q_descale, k_descale and v_descale of [batch, heads_kv], each
             filled with its tensor's factor (harness/reference.py's Kernels), O in bf16;
  reference  attention in float64 on the GPU, on the dequantized values (each element in float64
             times its descale): scores, softmax and P V all in float64, the causal mask bottom-right
             aligned, K and V heads repeated for grouped-query attention, rows that see no key 0.

For scale, and cheap beside the rest, the same problems in bf16 (rows with dtype bf16): the last
Hopper stage without fp8 (plots/plot.py's last_bf16_stage) and FlashAttention-3, given the
dequantized values rounded to bf16, against float64 on those bf16 values. What an e4m3 kernel adds
beyond a bf16 one is mostly P rounded to e4m3 for the P V product.

PROBLEMS covers head_dim 64 and 128, causal and not, a tail (seqlen 1000), grouped-query attention,
seqlen_q != seqlen_k both ways and one longer sequence, all small enough for a float64 reference that
holds every score at once (the largest score matrix, of the 4096 problem, is 2 GiB).

Rows (COLUMNS), one per kernel, dtype and problem, appended to --csv (make fp8-error: to
plots/fp8_error/<gpu-slug>_<commit>.csv); a re-run appends, and readers take the last row:
  gpu, kernel, name, dtype                the benchmark CSV's columns (dtype e4m3, or bf16 for scale)
  batch ... causal                        the problem, as in the benchmark CSV
  descale_q, descale_k, descale_v         the factors the e4m3 inputs were quantized with (the bf16
                                          rows carry the same: their inputs are those numbers, rounded)
  max_abs_err                             max |O - O_ref| over every element of O
  rel_l2_err                              ||O - O_ref|| / ||O_ref|| over the whole of O
  commit, date
tools/results_md.py renders a file as the FP8ERR:COMMIT block, through read_rows and comparison.

Usage: python3 harness/fp8_error.py --csv FILE [--stage N] [--lib build/libflash.so]
       (make fp8-error; tools/gpu_session.sh fp8err)
Exit codes: 0 every kernel measured on every problem; 1 a kernel failed on one (the others' rows
are written all the same); 2 bad usage, a --csv of other columns, or no library, PyTorch or stage
that takes e4m3; 3 no CUDA device.
"""
import argparse
import copy
import csv
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "plots"))
import libflash  # noqa: E402
import reference as ref  # noqa: E402
from contract import FP8_DTYPE, HEADLINE, PROBLEM_FIELDS  # noqa: E402
from plot import last_bf16_stage, stage_archs, stage_fp8  # noqa: E402
from rounds import StageCall, problem_label, stage_kernels  # noqa: E402

COLUMNS = ["gpu", "kernel", "name", "dtype", "batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim",
           "causal", "descale_q", "descale_k", "descale_v", "max_abs_err", "rel_l2_err", "commit", "date"]
INT_COLUMNS = ("batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal")
FLOAT_COLUMNS = ("descale_q", "descale_k", "descale_v", "max_abs_err", "rel_l2_err")

# e4m3's largest finite value: the tensor's amax is mapped onto it.
E4M3_MAX = 448.0

# Contract problem tuples (contract.PROBLEM_FIELDS), in e4m3.
PROBLEMS = [
    (FP8_DTYPE, 2, 8, 8, 1024, 1024, 128, 0),
    (FP8_DTYPE, 2, 8, 8, 1024, 1024, 128, 1),
    (FP8_DTYPE, 2, 16, 16, 1024, 1024, 64, 0),
    (FP8_DTYPE, 2, 16, 16, 1024, 1024, 64, 1),
    (FP8_DTYPE, 2, 16, 4, 1000, 1000, 64, 0),     # a tail (1000 = 7 * 128 + 104), GQA 4
    (FP8_DTYPE, 2, 16, 4, 1000, 1000, 64, 1),
    (FP8_DTYPE, 1, 8, 8, 300, 1000, 128, 1),      # seqlen_q < seqlen_k with the mask: chunked prefill
    (FP8_DTYPE, 1, 8, 2, 1000, 300, 128, 0),      # seqlen_q > seqlen_k, GQA 4
    (FP8_DTYPE, 1, 16, 16, 4096, 4096, 128, 1),   # a longer sequence: P V sums over more keys
]


def problem_of(row):
    """A row's problem tuple, as contract.PROBLEM_FIELDS orders it."""
    return tuple(row[f] for f in PROBLEM_FIELDS)


def read_rows(path):
    """The rows of a file written by this script, typed, in file order. Raises ValueError naming the
    file and line when it does not hold COLUMNS."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != COLUMNS:
            raise ValueError(f"{path}:1: not the header of harness/fp8_error.py's rows ({','.join(COLUMNS)})")
        rows = []
        for fields in reader:
            if not fields:
                continue
            if len(fields) != len(COLUMNS):
                raise ValueError(f"{path}:{reader.line_num}: expected {len(COLUMNS)} fields, found {len(fields)}")
            row = dict(zip(COLUMNS, fields))
            try:
                row.update({c: int(row[c]) for c in INT_COLUMNS})
                row.update({c: float(row[c]) for c in FLOAT_COLUMNS})
            except ValueError as e:
                raise ValueError(f"{path}:{reader.line_num}: {e}")
            rows.append(row)
    return rows


def no_larger(ours, theirs):
    """Whether our row's error is no larger than theirs, by both measures."""
    return ours["max_abs_err"] <= theirs["max_abs_err"] and ours["rel_l2_err"] <= theirs["rel_l2_err"]


def comparison(rows, dtype=FP8_DTYPE):
    """[(problem, {kernel: row})] for `dtype`, problems in the order they first appear, the last row
    of each kernel and problem."""
    by_problem = {}
    for row in rows:
        if row["dtype"] == dtype:
            by_problem.setdefault(problem_of(row), {})[row["kernel"]] = row
    return list(by_problem.items())


# ------------------------------------------------------------------------------------------------
# On the GPU (PyTorch is imported by main alone: tools/results_md.py reads the rows without it)

def quantize(torch, x):
    """(e4m3 tensor, descale) of tensor x: one factor for the whole tensor, amax / 448 in fp32,
    and each element e4m3(x / descale), rounded to nearest even. The descale stays a tensor on the
    device for the division: PyTorch multiplies by the reciprocal of a Python number instead, which
    rounds otherwise than x / descale. The clamp makes the cast saturate as cvt.rn.satfinite does
    (PyTorch's cast gives NaN past 448; only rounding error could get there)."""
    x = x.float()
    descale = x.abs().max() / E4M3_MAX
    return (x / descale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), descale.item()


def attention_f64(torch, q, k, v, causal):
    """O in float64, [batch, seqlen_q, heads_q, head_dim], of q [batch, seqlen_q, heads_q, head_dim]
    and k, v [batch, seqlen_k, heads_kv, head_dim] (any dtype, taken as float64), with the softmax
    scale 1/sqrt(head_dim) the stages use by default; the mask bottom-right aligned (query i sees key
    j <= i + seqlen_k - seqlen_q); a row that sees no key is 0."""
    seqlen_q, heads_q, head_dim = q.shape[1:]
    seqlen_k, heads_kv = k.shape[1:3]
    q, k, v = (t.to(torch.float64).transpose(1, 2) for t in (q, k, v))
    k, v = (t.repeat_interleave(heads_q // heads_kv, dim=1) for t in (k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
    if causal:
        i = torch.arange(seqlen_q, device=s.device)[:, None]
        j = torch.arange(seqlen_k, device=s.device)[None, :]
        s = s.masked_fill(j > i + seqlen_k - seqlen_q, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isfinite(m), m, 0))
    l = p.sum(dim=-1, keepdim=True)
    o = torch.where(l > 0, (p @ v) / torch.where(l > 0, l, 1), 0)
    return o.transpose(1, 2)


def errors(torch, out, ref):
    """(max |out - ref|, ||out - ref|| / ||ref||), in float64."""
    diff = out.to(torch.float64) - ref
    return diff.abs().max().item(), (diff.norm() / ref.norm()).item()


def problem_inputs(torch, problem, seed):
    """The inputs of one problem: (e4m3 inputs, their dequantized values in float64, the bf16 inputs
    of the scale rows), the first and last as reference.Inputs objects that StageCall and FA3's call
    take."""
    base = ref.inputs_for(torch, (HEADLINE[0],) + problem[1:], seed)
    quantized = [quantize(torch, t) for t in (base.q, base.k, base.v)]
    e4m3 = copy.copy(base)
    e4m3.dtype = FP8_DTYPE
    e4m3.q, e4m3.k, e4m3.v = (t for t, _ in quantized)
    e4m3.descale = tuple(d for _, d in quantized)
    dequantized = [t.float().double() * d for t, d in quantized]  # e4m3 -> fp32 -> float64: exact
    bf16 = copy.copy(base)
    bf16.q, bf16.k, bf16.v = (t.to(torch.bfloat16) for t in dequantized)
    return e4m3, dequantized, bf16


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", metavar="FILE", help="append the rows to FILE (created with a header if new)")
    ap.add_argument("--stage", type=int, metavar="N",
                    help="the stage that takes e4m3 to measure (default: the last one in the library)")
    ap.add_argument("--lib", default=os.path.join(os.environ.get("BUILD", "build"), "libflash.so"),
                    help="the library with the stages (default build/libflash.so: make lib)")
    ap.add_argument("--seed", type=int, default=0, help="the inputs' seed (default 0)")
    args = ap.parse_args()
    torch, rc = ref.torch_on_gpu(args.lib, "the float64 reference and FA3 run through it")
    if torch is None:
        return rc
    if args.csv and os.path.exists(args.csv) and os.path.getsize(args.csv) > 0:
        try:
            read_rows(args.csv)  # appending to a file of other columns would corrupt it
        except ValueError as e:
            print(f"error: {e}; refusing to append", file=sys.stderr)
            return 2

    lib = libflash.load(args.lib)
    stages = {k: (n, name) for n, k, name in stage_kernels(lib)}
    fp8 = sorted(stage_fp8(ROOT) & set(stages))
    if not fp8:
        print(f"error: no stage in {args.lib} takes e4m3 inputs", file=sys.stderr)
        return 2
    ours = fp8[-1] if args.stage is None else f"kernel{args.stage:02d}"
    if ours not in fp8:
        ap.error(f"--stage {args.stage}: not a stage that takes e4m3 (those are {', '.join(fp8)})")
    bar = last_bf16_stage({k: a for k, a in stage_archs(ROOT).items() if k in stages}, set(fp8))
    kernels = ref.Kernels(torch)
    if kernels.fa3_missing:
        print(f"FlashAttention-3 not available ({kernels.fa3_missing}): its rows are skipped")
    # (kernel column, name column, make_call) per dtype: ours and FA3 in e4m3, the bf16 bar and FA3 in bf16.
    named = {k: (k, stages[k][1], StageCall(torch, lib, stages[k][0]).make_call) for k in (ours, bar) if k}
    if "fa3" in kernels.available:
        named["fa3"] = ("fa3",) + kernels.available["fa3"]
    runs = {FP8_DTYPE: [named[k] for k in (ours, "fa3") if k in named],
            HEADLINE[0]: [named[k] for k in (bar, "fa3") if k in named]}
    gpu, commit = torch.cuda.get_device_name(), ref.git_commit()
    print(f"GPU: {gpu}   PyTorch {torch.__version__}   commit {commit}   {ours} and FA3 in e4m3, "
          f"{bar or 'no stage'} and FA3 in bf16 for scale, against float64")

    rows, failed = [], False
    for problem in PROBLEMS:
        e4m3, dequantized, bf16 = problem_inputs(torch, problem, args.seed)
        for dtype, x, reference in ((FP8_DTYPE, e4m3, attention_f64(torch, *dequantized, problem[-1])),
                                    (HEADLINE[0], bf16, attention_f64(torch, bf16.q, bf16.k, bf16.v, problem[-1]))):
            for kernel, name, make_call in runs[dtype]:
                try:
                    max_abs, rel_l2 = errors(torch, make_call(x)(), reference)
                except RuntimeError as e:
                    print(f"note: {kernel} failed in {dtype} at {problem_label(problem)}: {str(e).strip()}")
                    failed = True
                    continue
                rows.append(dict(zip(COLUMNS, (
                    gpu, kernel, name, dtype, *problem[1:],
                    *(f"{d:.9g}" for d in e4m3.descale), f"{max_abs:.6g}", f"{rel_l2:.6g}", commit, ref.utc_now()))))
        del e4m3, dequantized, bf16, reference
        torch.cuda.empty_cache()

    print_table(rows, ours)
    if args.csv:
        write_rows(args.csv, rows)
        print(f"\n{len(rows)} rows appended to {args.csv}")
    return 1 if failed else 0


def write_rows(path, rows):
    """Append (with the header if the file is new): a re-run keeps the rows before it."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "a", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        if new:
            writer.writerow(COLUMNS)
        writer.writerows([row[c] for c in COLUMNS] for row in rows)


def print_table(rows, ours):
    """Per problem and dtype, each kernel's errors, and whether ours is no larger than FA3's."""
    typed = [dict(r, **{c: float(r[c]) for c in FLOAT_COLUMNS}) for r in rows]
    print(f"\n{'problem':<44} {'dtype':<5} {'kernel':<9} {'max|O-O_ref|':>12} {'rel L2':>10}")
    for dtype in (FP8_DTYPE, HEADLINE[0]):
        for problem, by_kernel in comparison(typed, dtype):
            for kernel, row in by_kernel.items():
                verdict = ""
                if kernel == ours and "fa3" in by_kernel:
                    verdict = "  no larger than FA3's" if no_larger(row, by_kernel["fa3"]) else "  LARGER than FA3's"
                print(f"{problem_label(problem):<44} {dtype:<5} {kernel:<9} {row['max_abs_err']:>12.4g} "
                      f"{row['rel_l2_err']:>10.4g}{verdict}")


if __name__ == "__main__":
    sys.exit(main())
