#!/usr/bin/env python3
"""Alternating rounds: the stages and the references timed in turn, problem by problem, in one
process, so that every ratio between two of them compares kernels that met the same clocks.

Why: on a power-limited card one run's figures move by up to a tenth from minute to minute (the
clock settles into one of two groups), so a stage timed in one run and FlashAttention-2 in
another can differ by that much for reasons that are not theirs. Here each round visits every
problem once and, at each, times every kernel back to back (in the opposite order in every other
round, so that no kernel always goes first); a ratio is the median over the pairs of rounds (one
forward, one reversed) of the geometric mean of the pair's two ratios within a round, which
cancels what the order alone does (plots/plot.py's round_ratio says why). tools/results_md.py
writes every ratio of README.md and docs/ from these rows, and plots/plot.py the ladder.

What is timed, with one timing function for all (harness/reference.py's time_calls: CUDA events,
warm-up, each kernel's own settling work right before its timed calls, the L2 flushed before every
call, no synchronisation inside the timed loop):
  headline   the chapters' problem, causal and not: every stage this GPU runs, FA2, cuDNN, FA3;
  sweep      the sweep: the last stage of each track (stages 01-08 on mma.sync, the Hopper track),
             any stage named by --sweep-also, and the references;
  shapes     the shapes off the sweep (contract.py's SHAPES_BASE: a tail, grouped-query attention,
             seqlen_q != seqlen_k, 32k), the same kernels as the sweep; not part of "all", and
             written to a CSV of its own (make rounds-shapes). A reference that cannot run a shape
             (SDPA's causal mask is top-left aligned, ours bottom-right) sits it out.
The stages run through build/libflash.so (common/flash.h, by ctypes) on the same PyTorch tensors
the references read. Before its first timing in a run each kernel's output is compared with FA2's
on the same inputs; one that disagrees stops the run (exit 1), since its timing would be
meaningless. Correctness against the independent reference is ./run's job (make bench, make test).

Rows: the benchmark CSV's columns (check "skipped"), appended to --csv as they are measured;
round r's row of a (kernel, problem) is the r-th in file order.

Usage: python3 harness/rounds.py --csv plots/rounds/<gpu>_<commit>.csv [--rounds 4] [--set all]
       (make rounds; tools/gpu_session.sh rounds)
"""
import argparse
import ctypes
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "plots"))
import libflash  # noqa: E402
import reference as ref  # noqa: E402
from contract import HEADLINE, TIMED_REFERENCES, shape_problems, sweep_problems  # noqa: E402
from plot import HOPPER_ARCH, round_ratio, stage_archs  # noqa: E402


def stage_kernels(lib):
    """[(number, kernel column, name column)] of every stage linked into the library."""
    return [(n, f"kernel{n:02d}", lib.flash_stage_name(n).decode()) for n in range(1, lib.flash_stage_count() + 1)]


def last_of_each_track(stages):
    """The kernel columns of the last mma.sync stage and the last Hopper stage (the kernelNN_name
    headers say which track a stage is on)."""
    archs = stage_archs(ROOT)
    kernels = [k for _, k, _ in stages]
    tracks = [[k for k in kernels if archs.get(k) != HOPPER_ARCH], [k for k in kernels if archs.get(k) == HOPPER_ARCH]]
    return [track[-1] for track in tracks if track]


class StageCall:
    """Stage n through flash_forward, on the tensors of one problem, on PyTorch's current stream."""

    def __init__(self, torch, lib, number):
        self.torch, self.lib, self.number = torch, lib, number

    def make_call(self, x):
        torch, lib = self.torch, self.lib
        o = torch.empty_like(x.q)
        lse = torch.empty((x.batch, x.heads, x.seqlen), dtype=torch.float32, device="cuda")
        p = libflash.Problem(x.q.data_ptr(), x.k.data_ptr(), x.v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                             x.batch, x.seqlen, x.seqlen_k, x.heads, x.heads_kv, x.head_dim, libflash.FLASH_BF16,
                             x.causal, 0.0)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

        def call():
            rc = lib.flash_forward(self.number, ctypes.byref(p), stream)
            if rc != libflash.FLASH_OK:
                raise RuntimeError(lib.flash_strerror(rc).decode())
            return o
        return call


def problem_sets(which, stages, also=()):
    """[(contract problem tuple, kernel columns)] in the order a round visits them; `also`: stage
    columns timed over the sweep (and the shapes) besides the last of each track."""
    everything = [k for _, k, _ in stages] + list(TIMED_REFERENCES)
    last = last_of_each_track(stages)
    tracks = [k for _, k, _ in stages if k in also and k not in last] + last + list(TIMED_REFERENCES)
    sets = []
    if which in ("headline", "all"):
        sets += [(HEADLINE[:-1] + (c,), everything) for c in (0, 1)]
    if which in ("sweep", "all"):
        headline = [p for p, _ in sets]
        sets += [(p, tracks) for p in sweep_problems() if p not in headline]
    if which == "shapes":
        sets += [(p, tracks) for p in shape_problems()]
    return sets


problem_label = ref.problem_label


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", metavar="FILE", help="append the rows to FILE (created with a header if new)")
    ap.add_argument("--rounds", type=int, default=4,
                    help="rounds, an even number: pairs of one forward and one reversed round (default 4)")
    ap.add_argument("--set", choices=["headline", "sweep", "all", "shapes"], default="all",
                    help="headline: every stage and reference at the headline problem; sweep: the last "
                         "stage of each track and the references over the sweep; all: both (default); "
                         "shapes: the sweep's kernels on the shapes off the sweep")
    ap.add_argument("--sweep-also", nargs="*", default=[], metavar="KERNEL",
                    help="stages timed over the sweep besides the last of each track (kernel13 ...): "
                         "a stage and the one before it point by point")
    ap.add_argument("--lib", default=os.path.join(os.environ.get("BUILD", "build"), "libflash.so"),
                    help="the library with the stages (default build/libflash.so: make lib)")
    ap.add_argument("--iters", type=int, default=15, help="timed calls per kernel and problem at most (default 15)")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up calls per kernel and problem (default 2)")
    ap.add_argument("--budget-ms", type=float, default=500.0,
                    help="timed work per kernel and problem in a round, about (default 500 ms: a round "
                         "needs fewer calls than a single run, since the rounds repeat it)")
    args = ap.parse_args()
    if args.rounds < 2 or args.rounds % 2 or args.iters < ref.MIN_ITERS or args.warmup < 0:
        ap.error(f"--rounds must be an even number >= 2 (pairs of a forward and a reversed round), "
                 f"--iters >= {ref.MIN_ITERS}, --warmup >= 0")
    if not os.path.exists(args.lib):
        print(f"error: --lib {args.lib}: no such file (make lib builds it)", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("error: PyTorch is not available: the rounds time the references through it", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: no CUDA device visible to PyTorch", file=sys.stderr)
        return 3
    if args.csv:
        ref.check_csv_header(args.csv)

    lib = libflash.load(args.lib)
    stages = stage_kernels(lib)
    kernels = ref.Kernels(torch)
    for n, kernel, name in stages:
        kernels.available[kernel] = (name, StageCall(torch, lib, n).make_call)
    if kernels.fa3_missing:
        print(f"FlashAttention-3 not available ({kernels.fa3_missing}): its rows are skipped")
    gpu, commit, flush = torch.cuda.get_device_name(), ref.git_commit(), ref.make_flush_buffer(torch)
    unknown = sorted(set(args.sweep_also) - {k for _, k, _ in stages})
    if unknown:
        ap.error(f"--sweep-also: no stage {', '.join(unknown)} in {args.lib}")
    sets = problem_sets(args.set, stages, args.sweep_also)
    print(f"GPU: {gpu}   PyTorch {torch.__version__}   commit {commit}   {args.rounds} rounds of "
          f"{len(sets)} problems; {args.warmup} warm-up + up to {args.iters} timed calls per kernel")

    skipped, checked, results = {}, set(), {}  # kernel -> why; (problem, kernel); -> TFLOP/s by round
    for r in range(args.rounds):
        for problem, names in sets:
            x = ref.inputs_for(torch, problem)
            order = names if r % 2 == 0 else names[::-1]
            # FA2's output on these inputs (FA3's where FA2 cannot run the problem), which every
            # kernel's first output here is compared with: computed in every round, outside any
            # timing, so that each round holds the same memory.
            fa2_out, agree_with = None, None
            for k in ("fa2", "fa3"):
                reference_call = kernels.available[k][1](x) if k in kernels.available else None
                if reference_call is not None:
                    fa2_out, agree_with = reference_call(), k
                    break
            reference_call = None
            rows = []
            for kernel in order:
                if kernel not in kernels.available or kernel in skipped:
                    continue
                name, make_call = kernels.available[kernel]
                # Every kernel starts from the same memory: the inputs, FA2's output, the flush
                # buffer and nothing cached. Otherwise where its output lands would depend on which
                # kernels ran before it at this problem, and so on the order of the round, and its
                # speed can depend on that address (the rounds showed stages alternating between
                # two speeds with the order, in both measurements alike).
                call = out = None
                torch.cuda.empty_cache()
                try:
                    call = make_call(x)
                    if call is None:
                        continue
                    out = call()
                    if fa2_out is not None and kernel != agree_with and (problem, kernel) not in checked:
                        diff = ref.max_diff(out, fa2_out)
                        if not diff < ref.AGREEMENT_TOL:
                            print(f"error: {kernel} disagrees with {agree_with} at {x.label()}: max|diff| {diff:.4f} "
                                  f"(tolerance {ref.AGREEMENT_TOL}); its timings would be meaningless",
                                  file=sys.stderr)
                            return 1
                    checked.add((problem, kernel))
                    out = None
                    times = ref.time_calls(torch, call, flush, args.warmup, args.iters, args.budget_ms)
                except RuntimeError as e:
                    why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    print(f"note: {kernel} skipped from here on ({x.label()}): {why}")
                    skipped[kernel] = why
                    continue
                row = ref.result_row(gpu, kernel, name, x, times, commit)
                rows.append(row)
                results.setdefault((problem, kernel), []).append(float(row["tflops"]))
            print(f"round {r + 1}: {x.label()}: " + ", ".join(f"{row['kernel']} {row['tflops']}" for row in rows))
            if args.csv and rows:
                ref.append_rows(args.csv, rows)
            del x, fa2_out
            torch.cuda.empty_cache()

    # The table: per problem and kernel, the median TFLOP/s and its ratio to each reference (the
    # median over the pairs of rounds, as README and docs state them).
    references = [k for k in TIMED_REFERENCES if k in kernels.available and k not in skipped]
    print(f"\n{'problem':<46} {'kernel':<9} {'TFLOP/s':>8} " + " ".join(f"{'/' + k:>7}" for k in references))
    for problem, names in sets:
        label = problem_label(problem)
        for kernel in names:
            ours = results.get((problem, kernel))
            if not ours:
                continue
            cells = []
            for k in references:
                theirs = results.get((problem, k))
                cells.append(f"{round_ratio(ours, theirs):>7.3f}" if theirs else f"{'-':>7}")
            print(f"{label:<46} {kernel:<9} {statistics.median(ours):>8.1f} " + " ".join(cells))
    if args.csv:
        print(f"\nrows appended to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
