#!/usr/bin/env python3
"""Reference timings: FlashAttention-2, cuDNN's fused attention and FlashAttention-3, through PyTorch.

The stages are measured against production kernels. PyTorch ships two behind
scaled_dot_product_attention (SDPA): its FLASH_ATTENTION backend (FlashAttention-2) and its
CUDNN_ATTENTION backend (cuDNN fused attention). FlashAttention-3, the Hopper kernels of the
FlashAttention paper, comes as a Python package of its own: `flash_attn_interface` when built from
its repository (hopper/), or `fa3_fwd_interface` from the `fa3-fwd` wheel on PyPI (FA3's forward
kernels alone, bf16 and e4m3). The project never needs it; where it imports, its rows join the
others, in bf16 and, since FA3 has an fp8 forward, in e4m3 too (dtype column "e4m3"). SDPA's
backends take no fp8 inputs: FA2 and cuDNN sit the e4m3 problems out.

Every kernel is timed by time_calls() below, which harness/rounds.py uses as well:

  * q, k, v: random normal, allocated as [batch, seqlen, heads, head_dim] (the layout of
    common/flash.h and of FlashAttention-3) and handed to SDPA as .transpose(1, 2) views, which is
    how FlashAttention-2 reads them natively, so no copy happens inside the timed call;
  * warm-up calls first, then timed calls, each bracketed by CUDA events;
  * the L2 cache is flushed before every timed call, outside the timed region, so that no call
    finds its inputs still cached from the previous one;
  * right before the timed calls, WARMUP_MS of the kernel's own work, so that each kernel is timed
    at the clock it settles to on a power-limited card, whatever ran before it;
  * no synchronisation inside the timed loop: a Python wrapper spends tens to hundreds of
    microseconds of host time per call (FA3's about 90-185), and with a sync per call that host time
    would land between the start event and the kernel. Instead the timed calls are queued behind
    the settling ones (and a short spin kernel), so the events time the kernels alone;
  * median and min over the timed calls; TFLOP/s = 4*B*H*Sq*Sk*D / t_median, halved for causal.

PyTorch is optional for the project: without it (or without a GPU) the script says so and exits 0.

Usage:
  python3 harness/reference.py --csv plots/<gpu-slug>.csv          (what `make reference` runs)
  python3 harness/reference.py --problems headline --iters 10       (print only, no CSV)
"""

import argparse
import copy
import csv
import datetime
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contract import CSV_COLUMNS, FP8_DTYPE, HEADLINE, sweep_problems  # noqa: E402


# (kernel column, name column, SDPBackend member name)
SDPA_BACKENDS = [
    ("fa2", "FlashAttention-2 (torch sdpa flash)", "FLASH_ATTENTION"),
    ("cudnn", "cuDNN fused attention (torch sdpa cudnn)", "CUDNN_ATTENTION"),
]
# FlashAttention-3's Python modules, in the order they are tried: its own build, then the wheel.
FA3_MODULES = ("flash_attn_interface", "fa3_fwd_interface")

# Two bf16 attentions that accumulate in different orders differ by a few bf16 ulps at most on
# softmax-weighted averages of N(0,1) values. Anything beyond this is a real bug.
AGREEMENT_TOL = 0.05
# e4m3 keeps 3 mantissa bits: FA3's fp8 output against FA2 on the same (quantized) inputs differs by
# P's rounding to e4m3, about a tenth of |O| at worst on these inputs.
AGREEMENT_TOL_FP8 = 0.25

# Used when this PyTorch does not report the L2 size; larger than the L2 of any current GPU.
FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024

# Timed calls stop after about this much timed work (but never under MIN_ITERS), as ./run does.
TIME_BUDGET_MS = 2000.0
MIN_ITERS = 5
# Each kernel runs this long, untimed, right before its timed calls (see time_calls).
WARMUP_MS = 150.0
# The GPU spins this long before the settling calls, while the host queues the first of them.
HOST_AHEAD_MS = 2.0

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def as_reference_problem(problem):
    """A contract problem tuple -> (batch, heads, seqlen, head_dim, causal): the references run
    square problems with heads_kv = heads."""
    dtype, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal = problem
    assert dtype == "bf16" and heads_q == heads_kv and seqlen_q == seqlen_k, problem
    return (batch, heads_q, seqlen_q, head_dim, causal)


def problem_label(problem):
    """B=16 H=16 S=4096 D=128 causal=0, with Hq/Hkv and Sq/Sk where they differ."""
    _, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal = problem
    heads = f"H={heads_q}" if heads_q == heads_kv else f"Hq={heads_q} Hkv={heads_kv}"
    seqlen = f"S={seqlen_q}" if seqlen_q == seqlen_k else f"Sq={seqlen_q} Sk={seqlen_k}"
    return f"B={batch} {heads} {seqlen} D={head_dim} causal={causal}"


def inputs_for(torch, problem, seed=0):
    """The inputs of any contract problem tuple, square or not, grouped-query or not."""
    dtype, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal = problem
    return Inputs(torch, batch, heads_q, seqlen_q, head_dim, causal, dtype, seed, heads_kv=heads_kv, seqlen_k=seqlen_k)


def select_problems(which):
    headline = [as_reference_problem(HEADLINE), as_reference_problem(HEADLINE[:-1] + (1,))]
    sweep = [as_reference_problem(p) for p in sweep_problems()]
    if which == "headline":
        return headline
    if which == "sweep":
        return sweep
    # "all": the headline is also a sweep point; keep each problem once, headline first.
    return headline + [p for p in sweep if p not in headline]


def git_commit():
    # A copy of the tree without .git (a copy sent to another machine) gets the hash from the Makefile.
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


def make_flush_buffer(torch):
    props = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(props, "L2_cache_size", 0) or 0
    nbytes = 2 * l2_bytes if l2_bytes > 0 else FALLBACK_FLUSH_BYTES
    return torch.empty(nbytes, dtype=torch.uint8, device="cuda")


def spin_cycles(torch, ms):
    """Clock cycles of the GPU's SM clock in `ms` milliseconds (for torch.cuda._sleep)."""
    rate_khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 0) or 2_000_000
    return int(ms * rate_khz)


def time_calls(torch, call, flush, warmup, iters, budget_ms=TIME_BUDGET_MS, settle_ms=WARMUP_MS, host_starts=False):
    """Times call() (which launches one kernel's work on the current stream) as every reference and
    harness/rounds.py time it. Returns the list of per-call milliseconds. settle_ms 0 leaves out the
    settling work below (harness/rounds.py --settle-ms 0: the method that times a kernel at whatever
    clock the one before it left). host_starts: (start, ms) per call instead, the start on the
    host's clock in seconds (tools/settle_trace.py sets the calls beside nvidia-smi's samples)."""
    for _ in range(max(warmup, 1)):
        call()
    # One call timed alone sizes what follows: the timed calls, about budget_ms of work (at least
    # MIN_ITERS, at most `iters`), and the settling calls before them.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end), 1e-3)
    n = max(MIN_ITERS, min(iters, int(budget_ms / estimate)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    # Everything from here on is queued without a synchronisation, behind a short spin of the GPU
    # (torch.cuda._sleep, a helper of PyTorch's own tests) that lets the host get ahead: no start
    # event can fire before its call has been queued, so a wrapper's host time never lands in the
    # window. First, WARMUP_MS of this kernel's own work, untimed: on a power-limited card the clock
    # a kernel gets depends on the power drawn in the last tens of milliseconds, so timed right
    # after a kernel that draws less it would run at a clock it cannot hold, right after one that
    # draws more at a clock lowered for that one. Settled, every kernel is timed at its own clock.
    origin = torch.cuda.Event(enable_timing=True) if host_starts else None
    if origin is not None:
        origin.record()
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(spin_cycles(torch, HOST_AHEAD_MS))
    for _ in range(int(settle_ms / estimate)):
        call()
    for start, end in events:
        flush.zero_()  # evicts q, k, v from L2; outside the timed region
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    if not host_starts:
        return [s.elapsed_time(e) for s, e in events]
    # The last event fired about when the synchronisation returned: that places the origin, and
    # every start, on the host's clock.
    t_origin = time.time() - origin.elapsed_time(events[-1][1]) / 1000
    return [(t_origin + origin.elapsed_time(s) / 1000, s.elapsed_time(e)) for s, e in events]


def torch_on_gpu(lib, why):
    """PyTorch with a CUDA device, for a script that also needs the library `lib` (rounds.py,
    fp8_error.py): (torch, None), or (None, exit code) after saying what is missing, 2 for the
    library or PyTorch (`why` says what PyTorch is needed for), 3 for the device."""
    if not os.path.exists(lib):
        print(f"error: --lib {lib}: no such file (make lib builds it)", file=sys.stderr)
        return None, 2
    try:
        import torch
    except ImportError:
        print(f"error: PyTorch is not available: {why}", file=sys.stderr)
        return None, 2
    if not torch.cuda.is_available():
        print("error: no CUDA device visible to PyTorch", file=sys.stderr)
        return None, 3
    return torch, None


def import_fa3():
    """FlashAttention-3's flash_attn_func, and the module's name; (None, why) if none imports."""
    import importlib
    reasons = []
    for name in FA3_MODULES:
        try:
            module = importlib.import_module(name)
            return module.flash_attn_func, name
        except Exception as e:  # a missing module, or one built for another PyTorch or CUDA
            reasons.append(f"{name}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
    return None, "; ".join(reasons)


class Kernels:
    """The reference kernels this machine has, each as kernel -> (name column, make_call), where
    make_call(inputs) returns a function that runs it once and returns its output as
    [batch, seqlen, heads, head_dim]."""

    def __init__(self, torch):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.torch = torch
        self.available = {}
        for kernel, name, backend in SDPA_BACKENDS:
            self.available[kernel] = (name, self._sdpa(F.scaled_dot_product_attention, sdpa_kernel,
                                                       getattr(SDPBackend, backend)))
        fa3, self.fa3_module = import_fa3()
        self.fa3_missing = None
        if fa3 is None:
            self.fa3_missing, self.fa3_module = self.fa3_module, None
        else:
            self.available["fa3"] = (f"FlashAttention-3 ({self.fa3_module}.flash_attn_func)", self._fa3(fa3))

    def _sdpa(self, sdpa, sdpa_kernel, backend):
        def make_call(x):
            # None: this backend cannot run the problem. SDPA's backends take no e4m3 inputs (they
            # would raise, and harness/rounds.py would skip the kernel for the rest of its run).
            # SDPA's is_causal is top-left aligned, the project's mask bottom-right aligned: the same
            # mask only where seqlen_q == seqlen_k, so SDPA sits out the causal problems of other
            # shapes too.
            if x.dtype == FP8_DTYPE or (x.causal and x.seqlen != x.seqlen_k):
                return None
            q, k, v = (t.transpose(1, 2) for t in (x.q, x.k, x.v))
            if x.heads_kv != x.heads:
                # Grouped-query attention: these backends take as many K/V heads as query heads, so
                # each K/V head is repeated for its group, before and outside the timed calls.
                group = x.heads // x.heads_kv
                k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))

            def call():
                # Only this backend may run: SDPA would otherwise fall back silently to another one.
                with sdpa_kernel(backend):
                    return sdpa(q, k, v, is_causal=bool(x.causal)).transpose(1, 2)
            return call
        return make_call

    def _fa3(self, flash_attn_func):
        torch = self.torch

        def make_call(x):
            extra = {}
            if x.dtype == FP8_DTYPE:
                # Per (batch, kv-head) descale factors, as FA3 takes them, each filled with its
                # tensor's one factor: 1 for the timed inputs, e4m3 values as they are;
                # harness/fp8_error.py's quantized inputs carry their own.
                extra = {f"{t}_descale": torch.full((x.batch, x.heads_kv), d, dtype=torch.float32, device="cuda")
                         for t, d in zip("qkv", x.descale)}

            def call():
                with torch.inference_mode():
                    out = flash_attn_func(x.q, x.k, x.v, causal=bool(x.causal), **extra)
                return out[0] if isinstance(out, tuple) else out
            return call
        return make_call


class Inputs:
    """Seeded N(0, 1) inputs of one problem, Q as [batch, seqlen, heads, head_dim] and K, V as
    [batch, seqlen_k, heads_kv, head_dim] (by default seqlen and heads), in bf16 or (dtype "e4m3")
    rounded to e4m3. `descale`: the factors (q, k, v) that e4m3 elements stand multiplied by, all 1
    here (harness/fp8_error.py quantizes with others)."""

    def __init__(self, torch, batch, heads, seqlen, head_dim, causal, dtype="bf16", seed=0, heads_kv=None,
                 seqlen_k=None):
        self.torch = torch
        self.batch, self.heads, self.seqlen, self.head_dim, self.causal, self.dtype = \
            batch, heads, seqlen, head_dim, causal, dtype
        self.heads_kv = heads if heads_kv is None else heads_kv
        self.seqlen_k = seqlen if seqlen_k is None else seqlen_k
        generator = torch.Generator(device="cuda")
        generator.manual_seed(seed)
        shapes = [(batch, seqlen, heads, head_dim)] + [(batch, self.seqlen_k, self.heads_kv, head_dim)] * 2
        q, k, v = (torch.randn(shape, dtype=torch.bfloat16, device="cuda", generator=generator) for shape in shapes)
        if dtype == FP8_DTYPE:
            q, k, v = (t.to(torch.float8_e4m3fn) for t in (q, k, v))
        self.q, self.k, self.v = q, k, v
        self.descale = (1.0, 1.0, 1.0)

    def label(self):
        return f"{self.dtype} " + problem_label((self.dtype, self.batch, self.heads, self.heads_kv, self.seqlen,
                                                  self.seqlen_k, self.head_dim, self.causal))

    def as_bf16(self):
        """The same values in bf16 (every e4m3 value is exact in bf16; with descales of 1 the
        elements are the numbers they stand for): what FA2 is compared on."""
        widened = copy.copy(self)
        widened.dtype = "bf16"
        widened.q, widened.k, widened.v = (t.to(self.torch.bfloat16) for t in (self.q, self.k, self.v))
        return widened


def result_row(gpu, kernel, name, x, times, commit):
    ms_median, ms_min = statistics.median(times), min(times)
    tf = tflops(x.batch, x.heads, x.seqlen, x.seqlen_k, x.head_dim, x.causal, ms_median)
    return {
        "gpu": gpu, "kernel": kernel, "name": name, "dtype": x.dtype, "batch": x.batch,
        "heads_q": x.heads, "heads_kv": x.heads_kv, "seqlen_q": x.seqlen, "seqlen_k": x.seqlen_k,
        "head_dim": x.head_dim, "causal": x.causal, "iters": len(times),
        "ms_median": f"{ms_median:.4f}", "ms_min": f"{ms_min:.4f}", "tflops": f"{tf:.2f}",
        # No fp32 reference is computed here, so there is no error to report.
        "max_abs_err": "", "rel_l2_err": "", "check": "skipped",
        "commit": commit, "date": utc_now(),
    }


def max_diff(a, b):
    return (a.float() - b.float()).abs().max().item()


def print_table(rows):
    header = f"{'kernel':<8} {'dtype':<5} {'B':>3} {'H':>3} {'S':>6} {'D':>4} {'causal':>6} " \
             f"{'ms median':>10} {'ms min':>9} {'TFLOP/s':>8}"
    print()
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['kernel']:<8} {r['dtype']:<5} {r['batch']:>3} {r['heads_q']:>3} {r['seqlen_q']:>6} "
              f"{r['head_dim']:>4} {r['causal']:>6} {r['ms_median']:>10} {r['ms_min']:>9} {r['tflops']:>8}")


def profile_fa3(parser, spec):
    """Four calls of FA3 on one problem (three warm-up, the fourth the one Nsight Compute records),
    each in its own launch, the way tools/ncu_metrics.sh runs a stage."""
    try:
        batch, heads, seqlen, head_dim, causal = (int(v) for v in spec.split(","))
    except ValueError:
        parser.error(f"--profile-fa3 {spec}: want five integers B,H,S,D,CAUSAL")
    import torch
    kernels = Kernels(torch)
    if "fa3" not in kernels.available:
        print(f"FlashAttention-3 not available ({kernels.fa3_missing})", file=sys.stderr)
        return 2
    call = kernels.available["fa3"][1](Inputs(torch, batch, heads, seqlen, head_dim, causal))
    for _ in range(4):
        call()
    torch.cuda.synchronize()
    return 0


def main():
    parser = argparse.ArgumentParser(
        description="Time FlashAttention-2 and cuDNN attention through PyTorch SDPA, and "
                    "FlashAttention-3 where it imports, and append the rows to the project's CSV "
                    "(optional: needs PyTorch and a CUDA GPU).")
    parser.add_argument("--csv", metavar="FILE",
                        help="append rows to FILE (created with a header if new); "
                             "without it, only the table is printed")
    parser.add_argument("--problems", choices=["headline", "sweep", "all"], default="all",
                        help="which problems to time (default: all = headline + sweep)")
    parser.add_argument("--iters", type=int, default=30, help="timed calls per kernel at most (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up calls per kernel (default 5)")
    parser.add_argument("--profile-fa3", metavar="B,H,S,D,CAUSAL",
                        help="only call FlashAttention-3 four times on this bf16 problem, untimed, "
                             "nothing printed or written: the launches tools/ncu_metrics.sh profiles")
    args = parser.parse_args()
    if args.profile_fa3:
        return profile_fa3(parser, args.profile_fa3)
    if args.iters < MIN_ITERS or args.warmup < 0:
        parser.error(f"--iters must be >= {MIN_ITERS} and --warmup >= 0")

    try:
        import torch
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
    kernels = Kernels(torch)
    print(f"GPU: {gpu}   PyTorch {torch.__version__}   commit {commit}   "
          f"{args.warmup} warm-up + up to {args.iters} timed calls per kernel, L2 flushed "
          f"({flush.numel() >> 20} MiB buffer)")
    if kernels.fa3_module:
        print(f"FlashAttention-3: {kernels.fa3_module}")
    else:
        print(f"FlashAttention-3 not available ({kernels.fa3_missing}): its rows are skipped")

    problems = [p + ("bf16",) for p in select_problems(args.problems)]
    if "fa3" in kernels.available:
        problems += [p + (FP8_DTYPE,) for p in select_problems(args.problems)]
    results = []
    for batch, heads, seqlen, head_dim, causal, dtype in problems:
        x = Inputs(torch, batch, heads, seqlen, head_dim, causal, dtype)
        outputs, rows = {}, []
        for kernel, (name, make_call) in kernels.available.items():
            try:
                call = make_call(x)
                if call is None:  # FA2 and cuDNN in e4m3
                    continue
                outputs[kernel] = call()
                times = time_calls(torch, call, flush, args.warmup, args.iters)
            except RuntimeError as e:
                first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                print(f"note: {kernel} unavailable for {x.label()}: {first_line}; skipped")
                continue
            rows.append(result_row(gpu, kernel, name, x, times, commit))

        # A sanity check on the references themselves (informational: they are not under test):
        # each against FA2 on the same values (the e4m3 inputs widened to bf16 for FA2).
        if dtype != "bf16" and outputs:
            outputs["fa2"] = kernels.available["fa2"][1](x.as_bf16())()
        tol = AGREEMENT_TOL if dtype == "bf16" else AGREEMENT_TOL_FP8
        agreement = []
        for kernel, out in outputs.items():
            if kernel != "fa2" and "fa2" in outputs:
                diff = max_diff(out, outputs["fa2"])
                verdict = "ok" if diff < tol and math.isfinite(diff) else "MISMATCH"
                agreement.append(f"{kernel} vs fa2 max|diff| {diff:.4f} {verdict}")
        print(f"{x.label()}: " + ", ".join(f"{r['kernel']} {r['tflops']} TFLOP/s" for r in rows)
              + ("; " + ", ".join(agreement) if agreement else ""))

        if args.csv and rows:
            append_rows(args.csv, rows)  # per problem, so an interrupted run keeps what it measured
        results += rows
        del x, outputs
        torch.cuda.empty_cache()  # the largest problems need the memory of the previous ones

    print_table(results)
    if args.csv:
        print(f"\n{len(results)} rows appended to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
