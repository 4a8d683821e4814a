"""The C API of common/flash.h through build/libflash.so, from Python with ctypes.

Without a GPU (and with one): the stage table matches the kernelNN_name directories, the library
exports exactly the functions flash.h declares, and every contract violation is rejected with a
message that names the parameter, before any device work: e4m3 inputs on a stage without fp8 (the
message names the first stage that takes them, from the stage table), bad descale factors, a 16-bit
problem given to flash_forward_fp8; and neither entry point reads a byte past the end of the
flash_problem or flash_descale it is given (each put at the end of a page before an unreadable one).
Without a GPU, a call the contract accepts fails at the device query saying what was found (no
driver, no GPU) before CUDA's own text.

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
    thread gets;
  - e4m3 descales, on every stage that takes fp8 inputs (skipped while none does): flash_forward is
    flash_forward_fp8 with descales 1, 1, 1; O is linear in the descale of v (doubled, O doubles bit
    for bit; times 0.75, up to the rounding of each to bf16) and the LSE does not move; the descales of q and k
    enter only through their product with the softmax scale (powers of two traded between them give
    the same bits of O and LSE).
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
from libflash import FLASH_BF16, FLASH_E4M3, FLASH_E_CUDA, FLASH_E_INVALID, FLASH_E_UNSUPPORTED, FLASH_OK, Descale, Problem  # noqa: E402
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
GUARD_PAGE = "--guard-page" in sys.argv  # the child process of the guard-page check: that check only
dirs = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "kernel[0-9][0-9]_*/kernel.cu")))
count = lib.flash_stage_count()


def stage_table():
    """{stage number: (name, takes fp8)} from build/gen/stages.h, the table the library was built
    from: one FLASH_STAGE(NN, "name", "arch", fp8) line per stage, fp8 1 where the stage's kernel.cu
    defines flash_forward_fp8_kernelNN (the Makefile's rule)."""
    text = open(os.path.join(ROOT, BUILD, "gen", "stages.h")).read()
    return {int(nn): (name, fp8 == "1")
            for nn, name, fp8 in re.findall(r'FLASH_STAGE\((\d+), "([^"]+)", "[^"]*", ([01])\)', text)}


STAGES = stage_table()
FP8_STAGES = [n for n, (_, fp8) in sorted(STAGES.items()) if fp8]


def fake_problem(**change):
    """A problem the contract accepts, on fake but 16-byte aligned device pointers: every use below
    must fail before any of them is dereferenced."""
    p = Problem(0x1000, 0x2000, 0x3000, 0x4000, None, 2, 100, 120, 8, 2, 128, FLASH_BF16, 1, 0.0)
    for key, value in change.items():
        setattr(p, key, value)
    return p


def e4m3_refusal(stage):
    """What flash_forward says to e4m3 inputs on `stage`, a stage without fp8: it names the dtype, the
    stage and the first stage that takes fp8 inputs, or says that none does."""
    first = f"stage {FP8_STAGES[0]:02d} ({STAGES[FP8_STAGES[0]][0]}) or later" if FP8_STAGES else "no stage takes fp8 inputs"
    return f"unsupported dtype e4m3 for stage {stage:02d} ({STAGES[stage][0]}): ".encode(), first.encode()


def cpu_checks():
    # -- the stage table is the stage directories -----------------------------------------------------
    check(f"flash_stage_count() == {len(dirs)}, the number of stage directories", count == len(dirs), str(count))
    names = [(lib.flash_stage_name(i) or b"").decode() for i in range(1, count + 1)]
    check("flash_stage_name(1..n) are the stage directories, in order", names == dirs, f"{names} vs {dirs}")
    check("flash_stage_name(0) and (n + 1) are NULL", lib.flash_stage_name(0) is None and lib.flash_stage_name(count + 1) is None)

    # -- exports: exactly what flash.h declares --------------------------------------------------------
    declared = sorted(re.findall(r"^[a-z ]*[ *](flash_[a-z0-9_]+)\(", open(os.path.join(ROOT, "common", "flash.h")).read(), re.M))
    try:
        nm = subprocess.run(["nm", "-D", "--defined-only", LIB_PATH], capture_output=True, text=True, check=True).stdout
        exported = sorted(line.split()[-1] for line in nm.splitlines() if line.split() and line.split()[1] in "TtDdBbRrWwVv")
        check("libflash.so exports exactly the functions of flash.h", exported == declared,
              f"exported {exported}, declared {declared}")
    except (OSError, subprocess.CalledProcessError) as e:
        skip("libflash.so exports exactly the functions of flash.h", f"nm failed: {e}")

    # -- contract violations, before any device work ---------------------------------------------------
    good = fake_problem

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

    # -- e4m3: which stages take it, and the refusal of the others -------------------------------------
    names = {n: name for n, (name, _) in STAGES.items()}
    check("build/gen/stages.h lists every stage of the library, in order",
          [names.get(i) for i in range(1, count + 1)] == dirs, f"{names}")
    defines = [n for n, (name, _) in sorted(STAGES.items())
               if f"flash_forward_fp8_kernel{n:02d}" in open(os.path.join(ROOT, name, "kernel.cu")).read()]
    check("the stage table's fp8 stages are those whose kernel.cu defines flash_forward_fp8_kernelNN",
          defines == FP8_STAGES, f"table {FP8_STAGES}, kernel.cu {defines}")
    ones = Descale(1.0, 1.0, 1.0)
    bad = []
    for stage in range(1, count + 1):
        if stage in FP8_STAGES:
            continue  # it would launch on the fake pointers: the GPU part checks these
        head, tail = e4m3_refusal(stage)
        for entry, rc in (("flash_forward", lib.flash_forward(stage, ctypes.byref(fake_problem(dtype=FLASH_E4M3)), None)),
                          ("flash_forward_fp8", lib.flash_forward_fp8(stage, ctypes.byref(fake_problem(dtype=FLASH_E4M3)),
                                                                      ctypes.byref(ones), None))):
            msg = lib.flash_strerror(rc) or b""
            if rc != FLASH_E_UNSUPPORTED or not msg.startswith(head) or not msg.endswith(tail):
                bad.append(f"{entry} stage {stage}: rc {rc}, {msg!r}")
    first = f"stage {FP8_STAGES[0]}" if FP8_STAGES else "no stage takes fp8 inputs"
    check(f"stages without fp8 refuse e4m3 inputs with FLASH_E_UNSUPPORTED, naming e4m3, the stage and the first "
          f"fp8 stage ({first})", not bad, "; ".join(bad[:3]))

    # -- flash_forward_fp8: the descales and the dtype ----------------------------------------------------
    e4m3 = fake_problem(dtype=FLASH_E4M3)
    descale_cases = [
        ("descale q = 0", Descale(0.0, 1.0, 1.0), b"descale q"),
        ("descale k = -1", Descale(1.0, -1.0, 1.0), b"descale k"),
        ("descale v = -0", Descale(1.0, 1.0, -0.0), b"descale v"),
        ("descale q = nan", Descale(float("nan"), 1.0, 1.0), b"descale q"),
        ("descale k = inf", Descale(1.0, float("inf"), 1.0), b"descale k"),
        ("descale v = -inf", Descale(1.0, 1.0, float("-inf")), b"descale v"),
        ("descale v = 1e-40 (subnormal)", Descale(1.0, 1.0, 1e-40), b"descale v"),
        ("descale q = 1.1e-38 (subnormal)", Descale(1.1e-38, 1.0, 1.0), b"descale q"),
    ]
    for name, descale, word in descale_cases:
        rc = lib.flash_forward_fp8(1, ctypes.byref(e4m3), ctypes.byref(descale), None)
        msg = lib.flash_strerror(rc) or b""
        check(f"flash_forward_fp8 rejects {name}", rc == FLASH_E_INVALID and word in msg, f"rc={rc} message={msg!r}")
    rc = lib.flash_forward_fp8(1, ctypes.byref(e4m3), None, None)
    msg = lib.flash_strerror(rc) or b""
    check("flash_forward_fp8 rejects descale NULL", rc == FLASH_E_INVALID and b"descale = NULL" in msg, f"rc={rc} {msg!r}")
    for dtype, dname in ((FLASH_BF16, "bf16"), (1, "fp16")):
        rc = lib.flash_forward_fp8(1, ctypes.byref(fake_problem(dtype=dtype)), ctypes.byref(ones), None)
        msg = lib.flash_strerror(rc) or b""
        check(f"flash_forward_fp8 rejects a {dname} problem, naming the dtype",
              rc == FLASH_E_INVALID and b"dtype" in msg and b"flash_forward_fp8" in msg, f"rc={rc} {msg!r}")
    check("flash_forward_fp8 rejects a NULL problem",
          lib.flash_forward_fp8(1, None, ctypes.byref(ones), None) == FLASH_E_INVALID)

    # -- nothing read past the end of the structs: a child process, so that a crash is a FAIL line --
    sub = subprocess.run([sys.executable, os.path.abspath(__file__), "--guard-page"], capture_output=True, text=True)
    print(sub.stdout, end="")
    if sub.returncode != 0 and "FAIL:" not in sub.stdout:
        check("flash_forward and flash_forward_fp8 read no byte past a flash_problem or flash_descale at a page's end",
              False, f"the child process died (status {sub.returncode}): {sub.stderr.strip()[-300:]}")
    elif sub.returncode != 0:
        check("the guard-page checks", False, "see above")


def guard_page_checks():
    """A flash_problem, and a flash_descale, each put at the very end of a readable page that an
    unreadable (PROT_NONE) page follows: a read of one byte past either faults. Each call below makes
    the library read every field before it fails (the last check of flash_validate is the lse
    pointer's alignment; the e4m3 refusal and the descale of v come after the whole problem), so a
    struct read in full, and nothing beyond, passes; this process crashes otherwise."""
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page, prot_none = mmap.PAGESIZE, 0

    def at_page_end(struct_type):
        base = libc.mmap(None, 2 * page, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        assert base not in (None, ctypes.c_void_p(-1).value), "mmap failed"
        assert libc.mprotect(base + page, page, prot_none) == 0, "mprotect failed"
        return struct_type.from_address(base + page - ctypes.sizeof(struct_type))

    p = at_page_end(Problem)
    d = at_page_end(Descale)
    src = fake_problem(lse=0x5002)
    for field, _ in Problem._fields_:
        setattr(p, field, getattr(src, field))
    d.q, d.k, d.v = 1.0, 1.0, 1.0
    stage = next((n for n in range(1, count + 1) if n not in FP8_STAGES), None)

    def call(name, want, word, entry, *args):
        rc = entry(stage, ctypes.byref(p), *args)
        msg = lib.flash_strerror(rc) or b""  # this thread's last error: read before the next call
        check(f"no read past the end of the structs at a page's end: {name}", rc == want and word in msg,
              f"rc={rc} message={msg!r}")

    call("flash_forward, lse misaligned", FLASH_E_INVALID, b"lse", lib.flash_forward, None)
    p.dtype = FLASH_E4M3
    call("flash_forward_fp8, lse misaligned", FLASH_E_INVALID, b"lse", lib.flash_forward_fp8, ctypes.byref(d), None)
    p.lse = None
    call("flash_forward, e4m3 refused", FLASH_E_UNSUPPORTED, b"e4m3", lib.flash_forward, None)
    call("flash_forward_fp8, e4m3 refused", FLASH_E_UNSUPPORTED, b"e4m3", lib.flash_forward_fp8, ctypes.byref(d), None)
    d.v = 0.0
    call("flash_forward_fp8, descale v refused", FLASH_E_INVALID, b"descale v", lib.flash_forward_fp8,
         ctypes.byref(d), None)


if GUARD_PAGE:
    guard_page_checks()
    sys.exit(1 if failures else 0)
if not THREADS:
    cpu_checks()


# -- the GPU part ---------------------------------------------------------------------------------
def cudart():
    """The CUDA runtime libflash.so is linked against (ldd names it), or None if ldd cannot tell."""
    try:
        ldd = subprocess.run(["ldd", LIB_PATH], capture_output=True, text=True).stdout
    except OSError:
        return None
    match = re.search(r"libcudart\.so\S*\s+=>\s+(\S+)", ldd)
    return ctypes.CDLL(match.group(1)) if match else None


def no_device(rt):
    """Does the runtime list no device (or fail to ask the driver)?"""
    n = ctypes.c_int(0)
    return rt.cudaGetDeviceCount(ctypes.byref(n)) != 0 or n.value == 0


def load_cudart():
    """The CUDA runtime of cudart(), so that the buffers below live in the same context as the
    library's launches; None without a usable GPU."""
    rt = cudart()
    if rt is None or no_device(rt):
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


def fp8_descale_check(rt):
    """On every stage that takes e4m3 inputs, small problems (tails, GQA, causal and not, head_dim 64
    and 128) on random e4m3 inputs, launched with several descales; the bits of O and LSE compared:
      - flash_forward on e4m3 inputs is flash_forward_fp8 with descales 1, 1, 1: the same bits;
      - the descale of v: O = (P V8) * descale_v / l, so doubling it doubles every element of O
        exactly (a power of two commutes with the rounding to bf16; these O are far from bf16's
        overflow and underflow), and 0.75 scales O up to the roundings of acc / l and of
        0.75 acc / l to bf16 (2^-8 of the value each, so 2^-7 between them); the LSE, which V does
        not enter, keeps its bits;
      - the descales of q and k enter the scores only through their product with the softmax scale,
        so trading powers of two between the three ((2, 0.5), (0.5, 2), (4, 0.25), and (1, 1) with
        the scale doubled against (2, 1) and (1, 2)) gives the same bits of O and LSE: a kernel
        multiplying them in any order rounds nothing differently."""
    if not FP8_STAGES:
        skip("e4m3 descales on the GPU", "no stage takes fp8 inputs yet")
        return
    batch, sq, sk, hq, hkv = 2, 300, 203, 4, 2
    rng = random.Random(15)

    # Random bytes made e4m3 codes of magnitude 1/4 .. 3.75 (exponent fields 5..8): never NaN, and
    # scores of a moderate spread. A byte keeps its sign and mantissa bits; two of its exponent bits
    # pick the field.
    to_e4m3 = bytes((b & 0x87) | (5 + ((b >> 3) & 3)) << 3 for b in range(256))

    def e4m3_codes(n):
        return rng.randbytes(n).translate(to_e4m3)

    for stage in FP8_STAGES:
        for d in (64, 128):
            for causal in (0, 1):
                name = f"stage {stage:02d} d{d} causal={causal}: e4m3 descales"
                n_q, n_kv, n_lse = batch * sq * hq * d, batch * sk * hkv * d, batch * hq * sq
                dev = {}
                for key, n in (("q", n_q), ("k", n_kv), ("v", n_kv), ("o", 2 * n_q), ("lse", 4 * n_lse)):
                    ptr = ctypes.c_void_p()
                    assert rt.cudaMalloc(ctypes.byref(ptr), n) == 0
                    dev[key] = ptr.value
                for key, n in (("q", n_q), ("k", n_kv), ("v", n_kv)):
                    assert rt.cudaMemcpy(dev[key], e4m3_codes(n), n, H2D) == 0

                def run(dq, dk, dv, scale=1.0, through_fp8=True):
                    """(rc, O bits, LSE) of one call; the softmax scale is `scale` / sqrt(d)."""
                    rt.cudaMemset(dev["o"], 0xFF, 2 * n_q)
                    rt.cudaMemset(dev["lse"], 0xFF, 4 * n_lse)
                    p = Problem(dev["q"], dev["k"], dev["v"], dev["o"], dev["lse"], batch, sq, sk, hq, hkv, d,
                                FLASH_E4M3, causal, scale / math.sqrt(d))
                    if through_fp8:
                        rc = lib.flash_forward_fp8(stage, ctypes.byref(p), ctypes.byref(Descale(dq, dk, dv)), None)
                    else:
                        rc = lib.flash_forward(stage, ctypes.byref(p), None)
                    if rc != FLASH_OK or rt.cudaDeviceSynchronize() != 0:
                        return rc or FLASH_E_INVALID, None, None
                    return rc, fetch_bits(rt, dev["o"], n_q, "H"), fetch_bits(rt, dev["lse"], n_lse, "f")

                rc, o1, lse1 = run(1.0, 1.0, 1.0)
                if rc == FLASH_E_UNSUPPORTED:
                    skip(name, lib.flash_strerror(rc).decode())
                else:
                    errors = []
                    if rc != FLASH_OK:
                        errors.append(f"rc {rc}: {lib.flash_strerror(rc)}")
                    else:
                        _, o, lse = run(0.0, 0.0, 0.0, through_fp8=False)
                        if o != o1 or lse != lse1:
                            errors.append("flash_forward differs from flash_forward_fp8 with descales 1, 1, 1")
                        _, o, lse = run(1.0, 1.0, 2.0)
                        doubled = sum(bf16_value(a) != 2.0 * bf16_value(b) for a, b in zip(o, o1))
                        if doubled or lse != lse1:
                            errors.append(f"descale v 2: {doubled} elements of O not exactly doubled"
                                          f"{', LSE moved' if lse != lse1 else ''}")
                        _, o, lse = run(1.0, 1.0, 0.75)
                        off = sum(abs(bf16_value(a) - 0.75 * bf16_value(b))
                                  > 2.0 ** -7 * max(abs(bf16_value(a)), abs(0.75 * bf16_value(b)))
                                  for a, b in zip(o, o1))
                        if off or lse != lse1:
                            errors.append(f"descale v 0.75: {off} elements of O beyond the two bf16 roundings of O and 0.75 O"
                                          f"{', LSE moved' if lse != lse1 else ''}")
                        for dq, dk, scale in ((2.0, 0.5, 1.0), (0.5, 2.0, 1.0), (4.0, 0.25, 1.0)):
                            _, o, lse = run(dq, dk, 1.0, scale)
                            if o != o1 or lse != lse1:
                                errors.append(f"descales q {dq}, k {dk}: other bits than 1, 1")
                        _, o2, lse2 = run(1.0, 1.0, 1.0, 2.0)
                        for dq, dk in ((2.0, 1.0), (1.0, 2.0)):
                            _, o, lse = run(dq, dk, 1.0)
                            if o != o2 or lse != lse2:
                                errors.append(f"descales q {dq}, k {dk}: other bits than the softmax scale doubled")
                    check(name + ": O linear in descale v, q and k only through their product with the scale",
                          not errors, "; ".join(errors[:3]))
                for ptr in dev.values():
                    rt.cudaFree(ptr)


def no_device_check():
    """Without a usable GPU, a call the contract accepts fails at the device query, FLASH_E_CUDA, and
    its message says what was found before CUDA's own text: CUDA's for a machine without a driver,
    "CUDA driver version is insufficient for CUDA runtime version", would send the reader to update
    a driver that is not there. The problem's pointers are fake: the call is made only when the
    runtime the library loaded lists no device, so nothing can be launched on them."""
    name = "without a usable GPU, flash_forward fails at the device query saying what was found, CUDA's text after"
    rt = cudart()
    if rt is None or not no_device(rt):
        skip(name, "ldd does not name the library's CUDA runtime" if rt is None else "a device is listed here")
        return
    rc = lib.flash_forward(1, ctypes.byref(fake_problem()), None)
    msg = (lib.flash_strerror(rc) or b"").decode()
    head = f"stage 01 ({STAGES[1][0]}): cannot query the GPU: "
    lead = msg[len(head):].split("; CUDA says: ")[0] if msg.startswith(head) else ""
    check(name, rc == FLASH_E_CUDA and "; CUDA says: " in msg and lead
          and not any(word in lead for word in ("CUDA driver version", "insufficient", "cudaError")), f"rc={rc} message={msg!r}")


rt = load_cudart()
if THREADS:
    if rt is None:
        skip("concurrent first calls from host threads", "no CUDA device here")
    else:
        threads_check(rt)
elif rt is None:
    skip("rows that see no key, on the GPU", "no CUDA device here")
    no_device_check()
else:
    no_key_check(rt)
    streams_check(rt)
    overlap_check(rt)
    fp8_descale_check(rt)
    # The threads check needs a process whose first calls it makes: a fresh interpreter.
    sub = subprocess.run([sys.executable, os.path.abspath(__file__), "--threads"], capture_output=True, text=True)
    print(sub.stdout, end="")
    failures += sub.returncode != 0
sys.exit(1 if failures else 0)
