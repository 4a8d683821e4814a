"""The C API of common/flash.h for Python, through build/libflash.so and ctypes: the one definition of
the problem struct and the codes that harness/rounds.py and tests/test_api.py use."""
import ctypes
import os

FLASH_BF16, FLASH_FP16, FLASH_E4M3 = 0, 1, 2
FLASH_OK, FLASH_E_INVALID, FLASH_E_UNSUPPORTED, FLASH_E_CUDA = 0, 1, 2, 3


class Problem(ctypes.Structure):
    """flash_problem, field for field."""
    _fields_ = [("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int),
                ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("dtype", ctypes.c_int), ("causal", ctypes.c_int), ("softmax_scale", ctypes.c_float)]


class Descale(ctypes.Structure):
    """flash_descale: the descale factors of e4m3 q, k and v (an element stands for its e4m3 number
    times its tensor's factor)."""
    _fields_ = [("q", ctypes.c_float), ("k", ctypes.c_float), ("v", ctypes.c_float)]


def load(path):
    """build/libflash.so with its functions typed."""
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.flash_strerror.restype = ctypes.c_char_p
    lib.flash_stage_name.restype = ctypes.c_char_p
    lib.flash_forward.argtypes = [ctypes.c_int, ctypes.POINTER(Problem), ctypes.c_void_p]
    lib.flash_forward_fp8.argtypes = [ctypes.c_int, ctypes.POINTER(Problem), ctypes.POINTER(Descale), ctypes.c_void_p]
    return lib
