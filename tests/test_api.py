"""The C API of common/flash.h through build/libflash.so, from Python with ctypes.

Without a GPU (and with one): the stage table matches the kernelNN_name directories, the library
exports exactly the functions flash.h declares, and every contract violation is rejected with a
message that names the parameter, before any device work.

With a GPU, through the CUDA runtime the library itself loaded:
  - rows that see no key: causal, seqlen_q - seqlen_k spanning whole query tiles of every stage,
    at a batch x heads that fills the GPU, launched repeatedly: those rows get O = 0 and LSE = +inf
    on every launch, and the last row, which sees every key, matches a float64 computation here;
  - streams: causal calls on more streams than the last stage keeps tile counters for, launched
    together so that they run at once, give the bits of the same calls one after another;
  - overlap: where the last stage's causal tiles overlap (the first, clamped to row 0, and the
    second), the rows both write get the same bits from each;
  - --threads: eight host threads make their first calls into a fresh process at the same moment
    (the one-time per-device set-up of the stages races there) and must all get the answer a single
    thread gets.
Prints PASS:/FAIL:/SKIP: lines; exits 1 if any failed."""
import array
import ctypes
import glob
import math
import os
import random
import re
import struct
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", "build")
sys.path.insert(0, os.path.join(ROOT, "harness"))
from libflash import FLASH_BF16, FLASH_E_INVALID, FLASH_E_UNSUPPORTED, FLASH_OK, Problem  # noqa: E402
import libflash  # noqa: E402


failures = 0


def check(name, ok, why=""):
    global failures
    print(f"PASS: {name}" if ok else f"FAIL: {name}: {why}")
    failures += 0 if ok else 1


def skip(name, why):
    print(f"SKIP: {name}: {why}")


LIB_PATH = os.path.join(ROOT, BUILD, "libflash.so")
lib = libflash.load(LIB_PATH)

THREADS = "--threads" in sys.argv  # the child process of the threads check: GPU part only
dirs = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "kernel[0-9][0-9]_*/kernel.cu")))
count = lib.flash_stage_count()


def cpu_checks():
    # -- the stage table is the stage directories -----------------------------------------------------
    check(f"flash_stage_count() == {len(dirs)}, the number of stage directories", count == len(dirs), str(count))
    names = [(lib.flash_stage_name(i) or b"").decode() for i in range(1, count + 1)]
    check("flash_stage_name(1..n) are the stage directories, in order", names == dirs, f"{names} vs {dirs}")
    check("flash_stage_name(0) and (n + 1) are NULL", lib.flash_stage_name(0) is None and lib.flash_stage_name(count + 1) is None)

    # -- exports: exactly what flash.h declares --------------------------------------------------------
    declared = sorted(re.findall(r"^[a-z ]*[ *](flash_[a-z_]+)\(", open(os.path.join(ROOT, "common", "flash.h")).read(), re.M))
    try:
        nm = subprocess.run(["nm", "-D", "--defined-only", LIB_PATH], capture_output=True, text=True, check=True).stdout
        exported = sorted(line.split()[-1] for line in nm.splitlines() if line.split() and line.split()[1] in "TtDdBbRrWwVv")
        check("libflash.so exports exactly the functions of flash.h", exported == declared,
              f"exported {exported}, declared {declared}")
    except (OSError, subprocess.CalledProcessError) as e:
        skip("libflash.so exports exactly the functions of flash.h", f"nm failed: {e}")

    # -- contract violations, before any device work ---------------------------------------------------
    def good():
        # Fake but 16-byte aligned device pointers: every case below must fail before any use.
        return Problem(0x1000, 0x2000, 0x3000, 0x4000, None, 2, 100, 120, 8, 2, 128, FLASH_BF16, 1, 0.0)


    cases = [
        (f"stage {count + 1}", count + 1, {}, FLASH_E_INVALID, b"stage"),
        ("stage 0", 0, {}, FLASH_E_INVALID, b"stage"),
        ("head_dim 96", 5, {"head_dim": 96}, FLASH_E_UNSUPPORTED, b"head_dim"),
        ("batch 0", 5, {"batch": 0}, FLASH_E_INVALID, b"batch"),
        ("seqlen_q 0", 5, {"seqlen_q": 0}, FLASH_E_INVALID, b"seqlen_q"),
        ("seqlen_k -1", 5, {"seqlen_k": -1}, FLASH_E_INVALID, b"seqlen_k"),
        ("heads_kv 3 does not divide heads_q 8", 5, {"heads_kv": 3}, FLASH_E_INVALID, b"heads_kv"),
        ("dtype 7", 5, {"dtype": 7}, FLASH_E_UNSUPPORTED, b"dtype"),
        ("causal 2", 5, {"causal": 2}, FLASH_E_INVALID, b"causal"),
        ("softmax_scale nan", 5, {"softmax_scale": float("nan")}, FLASH_E_INVALID, b"softmax_scale"),
        ("softmax_scale -1", 5, {"softmax_scale": -1.0}, FLASH_E_INVALID, b"softmax_scale"),
        ("softmax_scale 1e-40 (subnormal)", 5, {"softmax_scale": 1e-40}, FLASH_E_INVALID, b"softmax_scale"),
        ("softmax_scale 1.1e-38 (subnormal)", 5, {"softmax_scale": 1.1e-38}, FLASH_E_INVALID, b"subnormal"),
        ("softmax_scale 1.4e-45 (the smallest subnormal)", 5, {"softmax_scale": 1.4e-45}, FLASH_E_INVALID, b"subnormal"),
        ("q NULL", 5, {"q": None}, FLASH_E_INVALID, b"q"),
        ("o misaligned", 5, {"o": 0x4002}, FLASH_E_UNSUPPORTED, b"align"),
    ]
    for name, stage, change, want_rc, want_word in cases:
        p = good()
        for key, value in change.items():
            setattr(p, key, value)
        rc = lib.flash_forward(stage, ctypes.byref(p), None)
        msg = lib.flash_strerror(rc) or b""
        check(f"rejects {name}", rc == want_rc and want_word in msg, f"rc={rc} message={msg!r}")
    check("NULL problem rejected", lib.flash_forward(5, None, None) == FLASH_E_INVALID)




if not THREADS:
    cpu_checks()


# -- the GPU part ---------------------------------------------------------------------------------
def load_cudart():
    """The CUDA runtime libflash.so is linked against (ldd names it), so that the buffers below
    live in the same context as the library's launches; None without a usable GPU."""
    try:
        ldd = subprocess.run(["ldd", LIB_PATH], capture_output=True, text=True).stdout
    except OSError:
        return None
    match = re.search(r"libcudart\.so\S*\s+=>\s+(\S+)", ldd)
    if not match:
        return None
    rt = ctypes.CDLL(match.group(1))
    n = ctypes.c_int(0)
    if rt.cudaGetDeviceCount(ctypes.byref(n)) != 0 or n.value == 0:
        return None
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rt.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    rt.cudaFree.argtypes = [ctypes.c_void_p]
    rt.cudaStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    rt.cudaStreamDestroy.argtypes = [ctypes.c_void_p]
    return rt


H2D, D2H = 1, 2


def bf16_bits(x):
    """float -> bf16 bits, round to nearest even."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def fetch_bits(rt, ptr, count, code):
    """count elements of array type `code` ("H": bf16 bits, "f": fp32) at device address ptr."""
    buf = ctypes.create_string_buffer(count * array.array(code).itemsize)
    assert rt.cudaMemcpy(buf, ptr, len(buf), D2H) == 0
    return array.array(code, buf.raw)


class Buffers:
    """q, k, v (bf16), o (bf16), lse (fp32) of one problem on the device. The inputs repeat one
    random pattern of PATTERN (a prime) values: random enough for attention, and quick to build
    here at sizes that fill a GPU."""
    PATTERN = 4099

    def __init__(self, rt, batch, sq, sk, heads, d, seed):
        self.rt, self.shape = rt, (batch, sq, sk, heads, d)
        rng = random.Random(seed)
        self.pattern = {}
        self.dev = {}
        for name, rows in (("q", sq), ("k", sk), ("v", sk)):
            n = batch * rows * heads * d
            bits = [bf16_bits(rng.gauss(0.0, 1.0)) for _ in range(self.PATTERN)]
            self.pattern[name] = bits
            data = (struct.pack(f"<{self.PATTERN}H", *bits) * (n // self.PATTERN + 1))[:2 * n]
            self.dev[name] = self.alloc(2 * n)
            assert rt.cudaMemcpy(self.dev[name], data, 2 * n, H2D) == 0
        self.n_o = batch * sq * heads * d
        self.n_lse = batch * heads * sq
        self.dev["o"] = self.alloc(2 * self.n_o)
        self.dev["lse"] = self.alloc(4 * self.n_lse)

    def value(self, name, index):
        return bf16_value(self.pattern[name][index % self.PATTERN])

    def alloc(self, nbytes):
        ptr = ctypes.c_void_p()
        assert self.rt.cudaMalloc(ctypes.byref(ptr), nbytes) == 0
        return ptr.value

    def problem(self, causal):
        batch, sq, sk, heads, d = self.shape
        return Problem(self.dev["q"], self.dev["k"], self.dev["v"], self.dev["o"], self.dev["lse"],
                       batch, sq, sk, heads, heads, d, FLASH_BF16, causal, 0.0)

    def poison(self):
        # 0xFF..: NaN in bf16 and in fp32, so whatever a stage does not write shows.
        self.rt.cudaMemset(self.dev["o"], 0xFF, 2 * self.n_o)
        self.rt.cudaMemset(self.dev["lse"], 0xFF, 4 * self.n_lse)

    def fetch(self):
        """(O as an array of bf16 bits, LSE as an array of floats), copied back."""
        return fetch_bits(self.rt, self.dev["o"], self.n_o, "H"), fetch_bits(self.rt, self.dev["lse"], self.n_lse, "f")

    def free(self):
        for ptr in self.dev.values():
            self.rt.cudaFree(ptr)

    def reference_row(self, b, h, i):
        """O and LSE of query row i of (b, h), causal, in float64 (the bf16 inputs exactly)."""
        batch, sq, sk, heads, d = self.shape
        scale = 1.0 / math.sqrt(d)
        q = [self.value("q", ((b * sq + i) * heads + h) * d + c) for c in range(d)]
        visible = [j for j in range(sk) if j <= i + sk - sq]
        scores = [scale * sum(q[c] * self.value("k", ((b * sk + j) * heads + h) * d + c) for c in range(d))
                  for j in visible]
        m = max(scores)
        w = [math.exp(s - m) for s in scores]
        total = sum(w)
        o = [sum(w[n] * self.value("v", ((b * sk + j) * heads + h) * d + c) for n, j in enumerate(visible)) / total
             for c in range(d)]
        return o, m + math.log(total)


def no_key_check(rt):
    """Whole query tiles that see no key, filling the GPU, launched repeatedly, every stage. Row i
    sees keys j <= i + sk - sq: rows i < sq - sk see none (995 rows: 7 whole tiles of 128 rows)."""
    batch, sq, sk, heads, runs = 8, 1000, 5, 16, 5
    empty = sq - sk
    for d in (64, 128):
        bufs = Buffers(rt, batch, sq, sk, heads, d, seed=d)
        ref_o, ref_lse = bufs.reference_row(batch - 1, heads - 1, sq - 1)
        for stage in range(1, count + 1):
            name = (f"stage {stage:02d} d{d}: rows that see no key get O = 0, LSE = +inf "
                    f"({runs} launches, B{batch} H{heads} Sq{sq} Sk{sk} causal)")
            errors = []
            rc = FLASH_OK
            for run in range(runs):
                bufs.poison()
                rc = lib.flash_forward(stage, ctypes.byref(bufs.problem(1)), None)
                if rc == FLASH_E_UNSUPPORTED:
                    break
                if rc != FLASH_OK or rt.cudaDeviceSynchronize() != 0:
                    errors.append(f"launch {run}: rc {rc}: {lib.flash_strerror(rc)}")
                    break
                o, lse = bufs.fetch()
                # O is [b, i, h, d]: a batch's no-key rows of every head are one contiguous run.
                # LSE is [b, h, i]: a (batch, head)'s no-key rows are one run. 0x8000 is -0.
                bad_o = bad_lse = 0
                for b in range(batch):
                    run_o = o[b * sq * heads * d:(b * sq + empty) * heads * d]
                    bad_o += len(run_o) - run_o.count(0) - run_o.count(0x8000)
                    for h in range(heads):
                        run_lse = lse[(b * heads + h) * sq:(b * heads + h) * sq + empty]
                        bad_lse += len(run_lse) - run_lse.count(math.inf)
                last = ((((batch - 1) * sq + sq - 1) * heads) + heads - 1) * d
                err = max(abs(bf16_value(o[last + c]) - ref_o[c]) for c in range(d))
                lse_err = abs(lse[((batch - 1) * heads + heads - 1) * sq + sq - 1] - ref_lse)
                if bad_o or bad_lse or not err < 2e-2 or not lse_err < 1e-3:
                    errors.append(f"launch {run}: {bad_o} O elements of no-key rows not 0, {bad_lse} LSEs not +inf, "
                                  f"last row |dO| {err:.2e} |dLSE| {lse_err:.2e}")
            if rc == FLASH_E_UNSUPPORTED:
                skip(name, lib.flash_strerror(rc).decode())
            else:
                check(name, not errors, "; ".join(errors[:2]))
        bufs.free()


def streams_check(rt):
    """The last stage's causal grids take query tiles from a counter, which two calls running at
    once must never share (they would each compute only some of their tiles). STREAMS streams,
    more than the counters the stage keeps per device, each a call of its own on buffers of its
    own, launched back to back from this thread, ROUNDS times; every output must have the bits of
    the same call made alone on the default stream (the stages are deterministic)."""
    stage, streams, rounds = count, 10, 3
    shape = (4, 4096, 4096, 16, 128)  # about half a millisecond a call on an H200: they overlap
    bufs = [Buffers(rt, *shape, seed=100 + i) for i in range(streams)]
    name = (f"stage {stage:02d}: causal calls on {streams} streams at once get the bits of the same calls "
            f"one at a time ({rounds} rounds, B{shape[0]} H{shape[3]} S{shape[1]} D{shape[4]})")
    alone = []
    for b in bufs:
        b.poison()
        rc = lib.flash_forward(stage, ctypes.byref(b.problem(1)), None)
        if rc == FLASH_E_UNSUPPORTED:
            skip(name, lib.flash_strerror(rc).decode())
            for x in bufs:
                x.free()
            return
        if rc != FLASH_OK:
            check(name, False, f"alone: rc {rc}: {lib.flash_strerror(rc).decode()}")
            return
        rt.cudaDeviceSynchronize()
        alone.append(b.fetch()[0])
    handles = []
    for _ in range(streams):
        h = ctypes.c_void_p()
        assert rt.cudaStreamCreate(ctypes.byref(h)) == 0
        handles.append(h)
    errors = []
    for r in range(rounds):
        for b in bufs:
            b.poison()
        rt.cudaDeviceSynchronize()
        problems = [b.problem(1) for b in bufs]
        codes = [lib.flash_forward(stage, ctypes.byref(pr), h) for pr, h in zip(problems, handles)]
        if rt.cudaDeviceSynchronize() != 0 or any(c != FLASH_OK for c in codes):
            errors.append(f"round {r}: return codes {codes}")
            break
        bad = [i for i, b in enumerate(bufs) if b.fetch()[0] != alone[i]]
        if bad:
            errors.append(f"round {r}: streams {bad} differ")
    for h in handles:
        rt.cudaStreamDestroy(h)
    check(name, not errors, "; ".join(errors[:2]))
    for b in bufs:
        b.free()


def overlap_check(rt):
    """The last stage's causal tiles end at the end of the sequence. At head_dim 64 above 1024 query
    rows they are 192 rows, and where those do not divide the sequence the first tile starts at
    row 0 and overlaps the second: at Sq = Sk = 2100 the second starts at 2100 - 10 * 192 = 180,
    the first ends at 191, and rows 180..191 are written by both, in whichever order the two
    blocks finish. Both must write the same bits. Each tile's own bits are computed alone, on the
    same buffers, in a problem where no other tile holds those rows:
      - Q from row 180 on, against every key (1920 query rows: ten whole tiles, the first of
        which covers rows 180..371 and visits the key tiles 2, 1, 0, as the second tile does);
      - the first 1152 rows of Q against the first 1152 keys (six whole tiles, the first of which
        covers rows 0..191 and visits the key tiles 1, 0, as the first tile does; keys 192..255
        lie past the diagonal of these rows in both, and are masked).
    Both views stay above 1024 rows, so they run the same kernel as the whole problem. The whole
    problem's rows 180..191 must have the bits of both, in O and in LSE."""
    stage = count
    heads, d, seq, second, first_end, prefix = 4, 64, 2100, 180, 192, 1152
    bufs = Buffers(rt, 1, seq, seq, heads, d, seed=11)
    name = (f"stage {stage:02d}: causal rows {second}..{first_end - 1} at Sq = Sk = {seq} d{d}, written by two "
            f"overlapping tiles, get the same bits from each")
    row_bytes = heads * d * 2
    views = {  # name: (q, seqlen_q, seqlen_k, first row of rows 180..191 in this view's O and LSE)
        "whole": (bufs.dev["q"], seq, seq, second),
        "second tile": (bufs.dev["q"] + second * row_bytes, seq - second, seq, 0),
        "first tile": (bufs.dev["q"], prefix, prefix, second),
    }
    shared = first_end - second
    got = {}
    for view, (q, sq, sk, row) in views.items():
        o, lse = bufs.alloc(sq * row_bytes), bufs.alloc(4 * heads * sq)
        rt.cudaMemset(o, 0xFF, sq * row_bytes)
        rt.cudaMemset(lse, 0xFF, 4 * heads * sq)
        problem = Problem(q, bufs.dev["k"], bufs.dev["v"], o, lse, 1, sq, sk, heads, heads, d, FLASH_BF16, 1, 0.0)
        rc = lib.flash_forward(stage, ctypes.byref(problem), None)
        if rc != FLASH_OK or rt.cudaDeviceSynchronize() != 0:
            if rc == FLASH_E_UNSUPPORTED:
                skip(name, lib.flash_strerror(rc).decode())
            else:
                check(name, False, f"{view}: rc {rc}: {lib.flash_strerror(rc).decode()}")
            for ptr in (o, lse):
                rt.cudaFree(ptr)
            bufs.free()
            return
        # O is [row, head, d]; LSE is [head, row].
        o_rows = fetch_bits(rt, o + row * row_bytes, shared * heads * d, "H")
        lse_all = fetch_bits(rt, lse, heads * sq, "f")
        lse_rows = [lse_all[h * sq + row + i] for h in range(heads) for i in range(shared)]
        got[view] = (o_rows, lse_rows)
        for ptr in (o, lse):
            rt.cudaFree(ptr)
    errors = []
    # 0xFFFF is the poison (a NaN): a view that wrote nothing there would match another that did not.
    for view, (o_rows, lse_rows) in got.items():
        if 0xFFFF in o_rows or not all(math.isfinite(x) for x in lse_rows):
            errors.append(f"{view}: rows {second}..{first_end - 1} not all written")
    for view in ("second tile", "first tile"):
        for what, i in (("O", 0), ("LSE", 1)):
            diff = sum(a != b for a, b in zip(got["whole"][i], got[view][i]))
            if diff:
                errors.append(f"{diff} {what} elements differ from the {view}'s")
    check(name, not errors, "; ".join(errors[:3]))
    bufs.free()


def threads_check(rt):
    """Eight threads, first calls of the process, released together; each must match one thread."""
    stage = count  # the most advanced stage: it has the one-time set-up (tile choice, shared-memory opt-in)
    shapes = [(2, 300, 300, 4, 128), (2, 300, 300, 4, 64)]
    bufs = [Buffers(rt, *shape, seed=7) for shape in shapes for _ in range(4)]
    start = threading.Barrier(len(bufs))
    results = [None] * len(bufs)
    messages = [""] * len(bufs)  # flash_strerror is per thread: read it in the thread that failed

    def work(idx):
        start.wait()
        results[idx] = lib.flash_forward(stage, ctypes.byref(bufs[idx].problem(0)), None)
        if results[idx] != FLASH_OK:
            messages[idx] = lib.flash_strerror(results[idx]).decode()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(bufs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rt.cudaDeviceSynchronize()
    name = f"stage {stage:02d}: {len(bufs)} host threads make the process's first calls at once"
    if all(rc == FLASH_E_UNSUPPORTED for rc in results):
        skip(name, lib.flash_strerror(FLASH_E_UNSUPPORTED).decode())
        return
    outputs = [b.fetch()[0] for b in bufs]
    # Then one thread alone, on the same inputs: the same bits (the stages are deterministic).
    for b in bufs:
        lib.flash_forward(stage, ctypes.byref(b.problem(0)), None)
    rt.cudaDeviceSynchronize()
    again = [b.fetch()[0] for b in bufs]
    bad = [i for i in range(len(bufs)) if results[i] != FLASH_OK or outputs[i] != again[i]]
    check(name, not bad, f"threads {bad}: return codes {results}; " + "; ".join(m for m in messages if m))
    for b in bufs:
        b.free()


rt = load_cudart()
if THREADS:
    if rt is None:
        skip("concurrent first calls from host threads", "no CUDA device here")
    else:
        threads_check(rt)
elif rt is None:
    skip("rows that see no key, on the GPU", "no CUDA device here")
else:
    no_key_check(rt)
    streams_check(rt)
    overlap_check(rt)
    # The threads check needs a process whose first calls it makes: a fresh interpreter.
    sub = subprocess.run([sys.executable, os.path.abspath(__file__), "--threads"], capture_output=True, text=True)
    print(sub.stdout, end="")
    failures += sub.returncode != 0
sys.exit(1 if failures else 0)
