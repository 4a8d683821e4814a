/*
 * lowp.h: the two 16-bit I/O dtypes (bf16, fp16) on the host, written out by hand in C.
 *
 * Why by hand: the harness generates inputs and reads outputs on the host, and the CPU tests must
 * run with gcc alone (no cuda_bf16.h, which is C++). The device side uses CUDA's own intrinsics;
 * both round to nearest, ties to even, so a value converted on either side has the same bits.
 */
#ifndef HARNESS_LOWP_H
#define HARNESS_LOWP_H

#include <stdint.h>

#include "flash.h"

uint16_t f32_to_bf16(float f);   /* round to nearest even; NaN stays NaN (quiet), overflow -> inf */
float bf16_to_f32(uint16_t h);   /* exact */
uint16_t f32_to_f16(float f);    /* round to nearest even, subnormals included; NaN stays NaN */
float f16_to_f32(uint16_t h);    /* exact */

/* The same two, picked by the problem's dtype. */
uint16_t f32_to_lowp(float f, flash_dtype dtype);
float lowp_to_f32(uint16_t h, flash_dtype dtype);

const char *dtype_name(flash_dtype dtype);  /* "bf16" or "fp16" */

#endif /* HARNESS_LOWP_H */
