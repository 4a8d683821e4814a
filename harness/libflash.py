"""The C API of common/flash.h for Python, through build/libflash.so and ctypes: the one definition of
the problem struct and the codes that harness/rounds.py and tests/test_api.py use."""
import ctypes
import os

FLASH_BF16, FLASH_FP16 = 0, 1
FLASH_OK, FLASH_E_INVALID, FLASH_E_UNSUPPORTED, FLASH_E_CUDA = 0, 1, 2, 3


class Problem(ctypes.Structure):
    """flash_problem, field for field."""
    _fields_ = [("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int),
                ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("dtype", ctypes.c_int), ("causal", ctypes.c_int), ("softmax_scale", ctypes.c_float)]


def load(path):
    """build/libflash.so with its functions typed."""
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.flash_strerror.restype = ctypes.c_char_p
    lib.flash_stage_name.restype = ctypes.c_char_p
    lib.flash_forward.argtypes = [ctypes.c_int, ctypes.POINTER(Problem), ctypes.c_void_p]
    return lib
