"""The C API of common/flash.h through build/libflash.so, from Python with ctypes: the stage
table, and every contract violation rejected with a message that names the parameter, before any
device work (so it runs on a machine without a GPU). Prints PASS:/FAIL: lines."""
import ctypes
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLASH_BF16, FLASH_FP16 = 0, 1
FLASH_E_INVALID, FLASH_E_UNSUPPORTED = 1, 2


class Problem(ctypes.Structure):
    _fields_ = [("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int),
                ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("dtype", ctypes.c_int), ("causal", ctypes.c_int), ("softmax_scale", ctypes.c_float)]


failures = 0


def check(name, ok, why=""):
    global failures
    print(f"PASS: {name}" if ok else f"FAIL: {name}: {why}")
    failures += 0 if ok else 1


lib = ctypes.CDLL(os.path.join(ROOT, "build", "libflash.so"))
lib.flash_strerror.restype = ctypes.c_char_p
lib.flash_stage_name.restype = ctypes.c_char_p
lib.flash_forward.argtypes = [ctypes.c_int, ctypes.POINTER(Problem), ctypes.c_void_p]

check("flash_stage_count() == 8", lib.flash_stage_count() == 8, str(lib.flash_stage_count()))
names = [lib.flash_stage_name(i) for i in range(1, 9)]
check("stage names", names[0] == b"kernel01_naive" and names[4] == b"kernel05_swizzle"
      and names[7] == b"kernel08_final", str(names))
check("flash_stage_name(0) is NULL", lib.flash_stage_name(0) is None)


def good():
    # Fake but 16-byte aligned device pointers: every case below must fail before any use.
    return Problem(0x1000, 0x2000, 0x3000, 0x4000, None, 2, 100, 120, 8, 2, 128, FLASH_BF16, 1, 0.0)


cases = [
    ("stage 9", 9, {}, FLASH_E_INVALID, b"stage"),
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
sys.exit(1 if failures else 0)
