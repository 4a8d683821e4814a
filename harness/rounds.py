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
             and right after each, the same problem in e4m3 (q, k, v in e4m3, O in bf16): the
             stages that take fp8 inputs and FA3, so that an fp8 stage and the bf16 stages meet the
             same clocks seconds apart;
  sweep      the sweep: the last stage of each track (stages 01-08 on mma.sync, the Hopper track),
             any stage named by --sweep-also, and the references; where a stage takes e4m3, also
             the last Hopper stage without fp8 (the bf16 bar of the e4m3 figures), and then the
             sweep in e4m3: the last stage that takes it (and any named by --sweep-also) and FA3;
  fp8        the e4m3 problems of the two above alone; not part of "all", which has them already;
  shapes     the shapes off the sweep (contract.py's SHAPES_BASE: a tail, grouped-query attention,
             seqlen_q != seqlen_k, 32k), the same kernels as the bf16 sweep; not part of "all", and
             written to a CSV of its own (make rounds-shapes). A reference that cannot run a shape
             (SDPA's causal mask is top-left aligned, ours bottom-right) sits it out.
FA2 and cuDNN (PyTorch's SDPA) take no e4m3 inputs, and the stages without fp8 refuse them: none of
them is timed in e4m3. The stages run through build/libflash.so (common/flash.h, by ctypes) on the
same PyTorch tensors the references read, e4m3 ones through flash_forward_fp8 with descales of 1
(the e4m3 numbers as they are, as FA3 is given them). Before its first timing in a run each
kernel's output is compared with FA2's on the same inputs (FA3's where FA2 cannot run the problem);
in e4m3 with FA3's, or where FA3 is missing with FA2's on the same values widened to bf16, within
the looser reference.AGREEMENT_TOL_FP8. One that disagrees stops the run (exit 1), since its timing
would be meaningless. Correctness against the independent reference is ./run's job (make bench,
make test); harness/fp8_error.py measures the e4m3 error against float64.

Rows: the benchmark CSV's columns (check "skipped"), appended to --csv as they are measured;
round r's row of a (kernel, problem) is the r-th in file order. The problem includes the dtype, so
a kernel's e4m3 rows are a series of their own beside its bf16 ones.

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
from contract import FP8_DTYPE, HEADLINE, ROUNDS_ITERS, TIMED_REFERENCES, shape_problems, sweep_problems  # noqa: E402
from plot import HOPPER_ARCH, last_bf16_stage, round_ratio, stage_archs, stage_fp8  # noqa: E402


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
    """Stage n through flash_forward, on the tensors of one problem, on PyTorch's current stream;
    e4m3 inputs through flash_forward_fp8 with the inputs' descales (reference.Inputs: 1, the e4m3
    numbers as they are; harness/fp8_error.py's quantized inputs carry their own), O in bf16."""

    def __init__(self, torch, lib, number):
        self.torch, self.lib, self.number = torch, lib, number

    def make_call(self, x):
        torch, lib = self.torch, self.lib
        fp8 = x.dtype == FP8_DTYPE
        o = torch.empty_like(x.q, dtype=torch.bfloat16)
        lse = torch.empty((x.batch, x.heads, x.seqlen), dtype=torch.float32, device="cuda")
        p = libflash.Problem(x.q.data_ptr(), x.k.data_ptr(), x.v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                             x.batch, x.seqlen, x.seqlen_k, x.heads, x.heads_kv, x.head_dim,
                             libflash.FLASH_E4M3 if fp8 else libflash.FLASH_BF16, x.causal, 0.0)
        descale = libflash.Descale(*x.descale)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

        def call():
            if fp8:
                rc = lib.flash_forward_fp8(self.number, ctypes.byref(p), ctypes.byref(descale), stream)
            else:
                rc = lib.flash_forward(self.number, ctypes.byref(p), stream)
            if rc != libflash.FLASH_OK:
                raise RuntimeError(lib.flash_strerror(rc).decode())
            return o
        return call


def problem_sets(which, stages, also=(), fp8=()):
    """[(contract problem tuple, kernel columns)] in the order a round visits them; `also`: stage
    columns timed over the sweep (and the shapes) besides the last of each track; `fp8`: the stage
    columns that take e4m3 inputs (plot.stage_fp8), timed at the e4m3 problems with FA3, the only
    reference that takes them."""
    columns = [k for _, k, _ in stages]
    everything = columns + list(TIMED_REFERENCES)
    last = last_of_each_track(stages)

    def swept(named):
        return [k for k in columns if k in named and k not in last] + last + list(TIMED_REFERENCES)
    tracks = swept(also)
    fp8_stages = [k for k in columns if k in fp8]
    fp8_everything = fp8_stages + ["fa3"]
    fp8_tracks = [k for k in fp8_stages[:-1] if k in also] + fp8_stages[-1:] + ["fa3"]
    bf16_tracks = tracks
    if fp8_stages:
        # The e4m3 figures set the fp8 stages beside the last Hopper stage without fp8 in bf16 over
        # the sweep too (plots/plot.py's fp8 figure): it is swept as if named by --sweep-also.
        archs = {k: arch for k, arch in stage_archs(ROOT).items() if k in columns}
        bf16_tracks = swept(set(also) | {last_bf16_stage(archs, set(fp8_stages))})
    sets = []
    if which in ("headline", "all", "fp8"):
        for c in (0, 1):
            if which != "fp8":
                sets.append((HEADLINE[:-1] + (c,), everything))
            if fp8_stages:
                sets.append(((FP8_DTYPE,) + HEADLINE[1:-1] + (c,), fp8_everything))
    if which in ("sweep", "all", "fp8"):
        headline = [p for p, _ in sets]
        if which != "fp8":
            sets += [(p, bf16_tracks) for p in sweep_problems() if p not in headline]
        if fp8_stages:
            sets += [(p, fp8_tracks) for p in sweep_problems(FP8_DTYPE) if p not in headline]
    if which == "shapes":
        sets += [(p, tracks) for p in shape_problems()]
    return sets


def agreement_reference(kernels, x):
    """(kernel, its output, tolerance): what every kernel's first output at problem `x` is compared
    with. In bf16 FA2's output on these inputs (FA3's where FA2 cannot run the problem); in e4m3
    FA3's, the one reference that takes e4m3, or where it is missing FA2's on the same values
    widened to bf16. (None, None, None) when no reference can run the problem."""
    if x.dtype == FP8_DTYPE:
        order, tol = (("fa3", lambda: x), ("fa2", x.as_bf16)), ref.AGREEMENT_TOL_FP8
    else:
        order, tol = (("fa2", lambda: x), ("fa3", lambda: x)), ref.AGREEMENT_TOL
    for kernel, inputs in order:
        call = kernels.available[kernel][1](inputs()) if kernel in kernels.available else None
        if call is not None:
            return kernel, call(), tol
    return None, None, None


def table_label(problem):
    """problem_label, with the dtype in front where it is not bf16."""
    return ("" if problem[0] == HEADLINE[0] else f"{problem[0]} ") + problem_label(problem)


problem_label = ref.problem_label


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", metavar="FILE", help="append the rows to FILE (created with a header if new)")
    ap.add_argument("--rounds", type=int, default=4,
                    help="rounds, an even number: pairs of one forward and one reversed round (default 4)")
    ap.add_argument("--set", choices=["headline", "sweep", "all", "fp8", "shapes"], default="all",
                    help="headline: every stage and reference at the headline problem, and in e4m3 the "
                         "stages that take it and FA3; sweep: the last stage of each track and the "
                         "references over the sweep, and the same in e4m3; all: both (default); fp8: the "
                         "e4m3 problems of both alone; shapes: the sweep's kernels on the shapes off the sweep")
    ap.add_argument("--sweep-also", nargs="*", default=[], metavar="KERNEL",
                    help="stages timed over the sweep besides the last of each track (kernel13 ...): "
                         "a stage and the one before it point by point")
    ap.add_argument("--lib", default=os.path.join(os.environ.get("BUILD", "build"), "libflash.so"),
                    help="the library with the stages (default build/libflash.so: make lib)")
    ap.add_argument("--iters", type=int, default=ROUNDS_ITERS,
                    help=f"timed calls per kernel and problem at most (default {ROUNDS_ITERS})")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up calls per kernel and problem (default 2)")
    ap.add_argument("--settle-ms", type=float, default=ref.WARMUP_MS,
                    help=f"each kernel's own untimed work right before its timed calls (default {ref.WARMUP_MS:g} ms; "
                         "0: none, so that a kernel meets the clock the one before it left)")
    ap.add_argument("--budget-ms", type=float, default=500.0,
                    help="timed work per kernel and problem in a round, about (default 500 ms: a round "
                         "needs fewer calls than a single run, since the rounds repeat it)")
    args = ap.parse_args()
    if args.rounds < 2 or args.rounds % 2 or args.iters < ref.MIN_ITERS or args.warmup < 0 or args.settle_ms < 0:
        ap.error(f"--rounds must be an even number >= 2 (pairs of a forward and a reversed round), "
                 f"--iters >= {ref.MIN_ITERS}, --warmup >= 0, --settle-ms >= 0")
    torch, rc = ref.torch_on_gpu(args.lib, "the rounds time the references through it")
    if torch is None:
        return rc
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
    fp8 = stage_fp8(ROOT) & {k for _, k, _ in stages}
    if args.set == "fp8" and not fp8:
        ap.error(f"--set fp8: no stage in {args.lib} takes e4m3 inputs")
    sets = problem_sets(args.set, stages, args.sweep_also, fp8)
    print(f"GPU: {gpu}   PyTorch {torch.__version__}   commit {commit}   {args.rounds} rounds of "
          f"{len(sets)} problems; {args.warmup} warm-up + up to {args.iters} timed calls per kernel")

    # (kernel, dtype) -> why; (problem, kernel); -> TFLOP/s by round
    skipped, checked, results = {}, set(), {}
    for r in range(args.rounds):
        for problem, names in sets:
            x = ref.inputs_for(torch, problem)
            order = names if r % 2 == 0 else names[::-1]
            # The output every kernel's first one here is compared with (agreement_reference):
            # computed in every round, outside any timing, so that each round holds the same memory.
            agree_with, reference_out, tol = agreement_reference(kernels, x)
            rows = []
            for kernel in order:
                if kernel not in kernels.available or (kernel, x.dtype) in skipped:
                    continue
                name, make_call = kernels.available[kernel]
                # Every kernel starts from the same memory: the inputs, the reference's output, the flush
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
                    if reference_out is not None and kernel != agree_with and (problem, kernel) not in checked:
                        diff = ref.max_diff(out, reference_out)
                        if not diff < tol:
                            print(f"error: {kernel} disagrees with {agree_with} at {x.label()}: max|diff| {diff:.4f} "
                                  f"(tolerance {tol}); its timings would be meaningless",
                                  file=sys.stderr)
                            return 1
                    checked.add((problem, kernel))
                    out = None
                    times = ref.time_calls(torch, call, flush, args.warmup, args.iters, args.budget_ms, args.settle_ms)
                except RuntimeError as e:
                    why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    print(f"note: {kernel} skipped from here on in {x.dtype} ({problem_label(problem)}): {why}")
                    skipped[(kernel, x.dtype)] = why
                    continue
                row = ref.result_row(gpu, kernel, name, x, times, commit)
                rows.append(row)
                results.setdefault((problem, kernel), []).append(float(row["tflops"]))
            print(f"round {r + 1}: {x.label()}: " + ", ".join(f"{row['kernel']} {row['tflops']}" for row in rows))
            if args.csv and rows:
                ref.append_rows(args.csv, rows)
            del x, reference_out
            torch.cuda.empty_cache()

    # The table: per problem and kernel, the median TFLOP/s and its ratio to each reference (the
    # median over the pairs of rounds, as README and docs state them).
    # FA2 and cuDNN have no e4m3 rows: "-" in their columns there.
    references = [k for k in TIMED_REFERENCES if any(kernel == k for _, kernel in results)]
    print(f"\n{'problem':<46} {'kernel':<9} {'TFLOP/s':>8} " + " ".join(f"{'/' + k:>7}" for k in references))
    for problem, names in sets:
        label = table_label(problem)
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
