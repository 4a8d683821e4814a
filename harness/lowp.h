/*
 * lowp.h: the low-precision dtypes on the host, written out by hand in C: the two 16-bit I/O dtypes
 * (bf16, fp16) and the fp8 input dtype e4m3.
 *
 * Why by hand: the harness generates inputs and reads outputs on the host, and the CPU tests must
 * run with gcc alone (no cuda_bf16.h or cuda_fp8.h, which are C++). The device side uses CUDA's own
 * conversions; both round to nearest, ties to even, so a value converted on either side has the
 * same bits (for e4m3, tests/test_fp8_cuda.cu compares the two on every case that can differ).
 */
#ifndef HARNESS_LOWP_H
#define HARNESS_LOWP_H

#include <stddef.h>
#include <stdint.h>

#include "flash.h"

#ifdef __cplusplus
extern "C" {
#endif

uint16_t f32_to_bf16(float f);   /* round to nearest even; NaN stays NaN (quiet), overflow -> inf */
float bf16_to_f32(uint16_t h);   /* exact */
uint16_t f32_to_f16(float f);    /* round to nearest even, subnormals included; NaN stays NaN */
float f16_to_f32(uint16_t h);    /* exact */

/* The 16-bit two, picked by the problem's dtype (bf16 or fp16). */
uint16_t f32_to_lowp(float f, flash_dtype dtype);
float lowp_to_f32(uint16_t h, flash_dtype dtype);

/* e4m3 (the OCP fp8 format FLASH_E4M3 stores): 1 sign, 4 exponent bits with bias 7, 3 mantissa
 * bits; no infinities, and S.1111.111 (0x7F, 0xFF) is NaN, so the largest finite value is
 * 1.75 * 2^8 = 448. Normal from 2^-6, subnormals down to 2^-9.
 *
 * f32_to_e4m3 is what the PTX instruction cvt.rn.satfinite.e4m3x2.f32 (and CUDA's
 * __nv_cvt_float_to_fp8 with __NV_SATFINITE, __NV_E4M3) computes: round to nearest even, subnormals
 * included; a magnitude beyond 448, infinities included, saturates to +-448 rather than becoming
 * NaN; a NaN becomes the canonical NaN 0x7F, whatever its sign (CUDA drops the sign of a NaN before
 * it converts). e4m3_to_f32 is exact: every e4m3 value is a float. */
uint8_t f32_to_e4m3(float f);
float e4m3_to_f32(uint8_t b);

#define E4M3_MAX 448.0f  /* the largest finite e4m3 value: what a tensor's amax is scaled to */

/* The bytes of one element of q, k and v in `dtype`: 2, or 1 for e4m3. */
size_t dtype_bytes(flash_dtype dtype);

const char *dtype_name(flash_dtype dtype);  /* "bf16", "fp16" or "e4m3" */

#ifdef __cplusplus
}
#endif

#endif /* HARNESS_LOWP_H */
