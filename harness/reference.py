#!/usr/bin/env python3
"""Reference timings: the official FlashAttention-2 and cuDNN's fused attention, through PyTorch.

The stages are measured against two production kernels that PyTorch ships behind
scaled_dot_product_attention (SDPA): its FLASH_ATTENTION backend (FlashAttention-2) and its
CUDNN_ATTENTION backend (cuDNN fused attention). This script times both by the same method as the
C harness (./run), so the rows it appends to the CSV sit on the same plot as the stages:

  * q, k, v: random normal bf16, allocated as [batch, seqlen, heads, head_dim] (the layout of
    common/flash.h) and handed to SDPA as .transpose(1, 2) views, which is how FlashAttention-2
    reads them natively, so no copy happens inside the timed call;
  * warm-up calls first, then --iters timed calls, each bracketed by CUDA events;
  * the L2 cache is flushed before every timed call, outside the timed region, so that no call
    finds its inputs still cached from the previous one;
  * median and min over the timed calls; TFLOP/s = 4*B*H*Sq*Sk*D / t_median, halved for causal.

PyTorch is optional for the project: without it (or without a GPU) the script says so and exits 0.

Usage:
  python3 harness/reference.py --csv plots/<gpu-slug>.csv          (what `make reference` runs)
  python3 harness/reference.py --problems headline --iters 10       (print only, no CSV)
"""

import argparse
import csv
import datetime
import math
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contract import CSV_COLUMNS, HEADLINE, sweep_problems  # noqa: E402


# (kernel column, name column, SDPBackend member name)
BACKENDS = [
    ("fa2", "FlashAttention-2 (torch sdpa flash)", "FLASH_ATTENTION"),
    ("cudnn", "cuDNN fused attention (torch sdpa cudnn)", "CUDNN_ATTENTION"),
]

# fa2 and cudnn both round to bf16 but accumulate in different orders; outputs of softmax-weighted
# averages of N(0,1) values differ by a few bf16 ulps at most. Anything beyond this is a real bug.
AGREEMENT_TOL = 0.05

# Used when this PyTorch does not report the L2 size; larger than the L2 of any current GPU.
FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def as_reference_problem(problem):
    """A contract problem tuple -> (batch, heads, seqlen, head_dim, causal): the references run
    square problems with heads_kv = heads."""
    dtype, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal = problem
    assert dtype == "bf16" and heads_q == heads_kv and seqlen_q == seqlen_k, problem
    return (batch, heads_q, seqlen_q, head_dim, causal)


def select_problems(which):
    headline = [as_reference_problem(HEADLINE)]
    sweep = [as_reference_problem(p) for p in sweep_problems()]
    if which == "headline":
        return headline
    if which == "sweep":
        return sweep
    # "all": the headline is also a sweep point; keep each problem once, headline first.
    return headline + [p for p in sweep if p not in headline]


def git_commit():
    # A copy of the tree without .git (a remote GPU machine) gets the hash from the Makefile.
    if os.environ.get("FLASH_COMMIT"):
        return os.environ["FLASH_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_csv_header(path):
    """Appending to a CSV whose columns differ would silently corrupt it: refuse instead.
    Returns True when the file is new or empty (the header must be written)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return True
    with open(path, newline="") as f:
        header = next(csv.reader(f), [])
    if header != CSV_COLUMNS:
        print(f"error: {path}: line 1 is not the expected CSV header; refusing to append.\n"
              f"  expected: {','.join(CSV_COLUMNS)}\n  found:    {','.join(header)}",
              file=sys.stderr)
        sys.exit(2)
    return False


def append_rows(path, rows):
    """Append (never truncate): the CSV accumulates re-runs, and readers take the last row."""
    needs_header = check_csv_header(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    # A file cut short without a final newline would glue our first row onto its last one.
    needs_newline = False
    if not needs_header:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            needs_newline = f.read(1) != b"\n"
    with open(path, "a", newline="") as f:
        if needs_newline:
            f.write("\n")
        writer = csv.writer(f, lineterminator="\n")
        if needs_header:
            writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow([row[c] for c in CSV_COLUMNS])


def tflops(batch, heads, seqlen_q, seqlen_k, head_dim, causal, ms):
    # Two matmuls (QK^T and PV) of 2*Sq*Sk*D flops each; the causal mask skips about half.
    flops = 4.0 * batch * heads * seqlen_q * seqlen_k * head_dim
    if causal:
        flops /= 2
    return flops / (ms * 1e-3) / 1e12


def time_backend(torch, sdpa, q, k, v, causal, backend, flush, warmup, iters):
    """Returns (output of one call, list of per-call milliseconds) for one SDPA backend.
    Raises RuntimeError when the backend cannot run this problem."""
    from torch.nn.attention import sdpa_kernel

    # Only this backend may run: SDPA would otherwise fall back silently to another one.
    with sdpa_kernel(backend):
        out = sdpa(q, k, v, is_causal=bool(causal))
        for _ in range(warmup):
            sdpa(q, k, v, is_causal=bool(causal))
        events = []
        for _ in range(iters):
            flush.zero_()  # evicts q, k, v from L2; outside the timed region
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            sdpa(q, k, v, is_causal=bool(causal))
            end.record()
            events.append((start, end))
        # One synchronisation at the end: a sync inside the loop would add host latency between
        # calls but not to the timed region, so it is simply unnecessary.
        torch.cuda.synchronize()
    return out, [s.elapsed_time(e) for s, e in events]


def make_flush_buffer(torch):
    props = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(props, "L2_cache_size", 0) or 0
    nbytes = 2 * l2_bytes if l2_bytes > 0 else FALLBACK_FLUSH_BYTES
    return torch.empty(nbytes, dtype=torch.uint8, device="cuda")


def print_table(results):
    header = f"{'kernel':<7} {'B':>3} {'H':>3} {'S':>6} {'D':>4} {'causal':>6} " \
             f"{'ms median':>10} {'ms min':>9} {'TFLOP/s':>8}  fa2 vs cudnn"
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['kernel']:<7} {r['batch']:>3} {r['heads']:>3} {r['seqlen']:>6} "
              f"{r['head_dim']:>4} {r['causal']:>6} {r['ms_median']:>10} {r['ms_min']:>9} "
              f"{r['tflops']:>8}  {r['agreement']}")


def main():
    parser = argparse.ArgumentParser(
        description="Time FlashAttention-2 and cuDNN attention through PyTorch SDPA and append "
                    "the rows to the project's CSV (optional: needs PyTorch and a CUDA GPU).")
    parser.add_argument("--csv", metavar="FILE",
                        help="append rows to FILE (created with a header if new); "
                             "without it, only the table is printed")
    parser.add_argument("--problems", choices=["headline", "sweep", "all"], default="all",
                        help="which problems to time (default: all = headline + sweep)")
    parser.add_argument("--iters", type=int, default=30, help="timed calls per backend (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up calls per backend (default 5)")
    args = parser.parse_args()
    if args.iters < 1 or args.warmup < 0:
        parser.error("--iters must be >= 1 and --warmup >= 0")

    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend
    except ImportError:
        print("PyTorch not available: reference timings skipped")
        return 0
    if not torch.cuda.is_available():
        print("No CUDA device visible to PyTorch: reference timings skipped")
        return 0

    if args.csv:
        check_csv_header(args.csv)  # fail before spending minutes on timings

    gpu = torch.cuda.get_device_name()
    commit = git_commit()
    flush = make_flush_buffer(torch)
    generator = torch.Generator(device="cuda")
    print(f"GPU: {gpu}   PyTorch {torch.__version__}   commit {commit}   "
          f"{args.warmup} warm-up + {args.iters} timed calls per backend, L2 flushed "
          f"({flush.numel() >> 20} MiB buffer)")

    results = []
    for batch, heads, seqlen, head_dim, causal in select_problems(args.problems):
        label = f"B={batch} H={heads} S={seqlen} D={head_dim} causal={causal}"
        generator.manual_seed(0)
        shape = (batch, seqlen, heads, head_dim)
        q, k, v = (torch.randn(shape, dtype=torch.bfloat16, device="cuda", generator=generator)
                   .transpose(1, 2) for _ in range(3))
        # SDPA's is_causal is top-left aligned, the project's mask bottom-right aligned; they are
        # the same mask here because every problem has seqlen_q == seqlen_k.

        outputs, rows = {}, []
        for kernel, name, backend_name in BACKENDS:
            try:
                out, times = time_backend(torch, F.scaled_dot_product_attention, q, k, v, causal,
                                          getattr(SDPBackend, backend_name), flush,
                                          args.warmup, args.iters)
            except RuntimeError as e:
                first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                print(f"note: {kernel} unavailable for {label}: {first_line}; skipped")
                continue
            outputs[kernel] = out
            ms_median, ms_min = statistics.median(times), min(times)
            tf = tflops(batch, heads, seqlen, seqlen, head_dim, causal, ms_median)
            rows.append({
                "gpu": gpu, "kernel": kernel, "name": name, "dtype": "bf16", "batch": batch,
                "heads_q": heads, "heads_kv": heads, "seqlen_q": seqlen, "seqlen_k": seqlen,
                "head_dim": head_dim, "causal": causal, "iters": len(times),
                "ms_median": f"{ms_median:.4f}", "ms_min": f"{ms_min:.4f}", "tflops": f"{tf:.2f}",
                # No fp32 reference is computed here, so there is no error to report.
                "max_abs_err": "", "rel_l2_err": "", "check": "skipped",
                "commit": commit, "date": utc_now(),
            })

        # A sanity check on the references themselves (informational: they are not under test).
        if len(outputs) == 2:
            diff = (outputs["fa2"].float() - outputs["cudnn"].float()).abs().max().item()
            verdict = "ok" if diff < AGREEMENT_TOL and math.isfinite(diff) else "MISMATCH"
            agreement = f"max|diff| {diff:.4f} {verdict}"
        else:
            agreement = "n/a (one backend missing)"
        print(f"{label}: " + ", ".join(f"{r['kernel']} {r['tflops']} TFLOP/s" for r in rows)
              + f"; fa2 vs cudnn {agreement}")

        if args.csv and rows:
            append_rows(args.csv, rows)  # per problem, so an interrupted run keeps what it measured
        for r in rows:
            results.append({"kernel": r["kernel"], "batch": batch, "heads": heads, "seqlen": seqlen,
                            "head_dim": head_dim, "causal": causal, "ms_median": r["ms_median"],
                            "ms_min": r["ms_min"], "tflops": r["tflops"], "agreement": agreement})
        del q, k, v, outputs
        torch.cuda.empty_cache()  # the largest problems need the memory of the previous ones

    print_table(results)
    if args.csv:
        print(f"\n{len(results)} rows appended to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
