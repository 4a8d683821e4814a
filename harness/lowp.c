/*
 * lowp.c: float <-> bf16 / fp16 / e4m3 conversions, round to nearest, ties to even.
 *
 * bf16 is the top half of a float (1 sign, 8 exponent, 7 mantissa bits), so converting is
 * "round the low 16 bits away". fp16 has 5 exponent and 10 mantissa bits, so the exponent must be
 * re-biased and the small values become subnormals: that is the longer function below. e4m3 is the
 * same walk again with 4 exponent and 3 mantissa bits, except at the top: it has no infinity, and
 * what would overflow saturates to its largest value instead.
 */
#include "lowp.h"

#include <string.h>

/* Type punning through memcpy: well-defined C, and compilers turn it into a register move. */
static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    /* A NaN must stay a NaN: the rounding add below could carry its payload into the exponent
     * or clear it to an infinity. Keep the sign, force a quiet-NaN mantissa bit. */
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
    /* Ties to even: add 0x7fff, plus 1 when the bit that survives (bit 16) is odd. A carry out of
     * the mantissa correctly bumps the exponent, and the largest finite values round to inf. */
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;  /* |f| as bits: ordering of bits == ordering of values */

    if (ax > 0x7f800000u) return sign | 0x7e00u;   /* NaN -> quiet NaN */
    /* 65520 = halfway between 65504 (largest fp16, odd mantissa) and 65536 (not representable):
     * ties to even goes up, so everything from 65520 on, inf included, becomes inf. */
    if (ax >= 0x477ff000u) return sign | 0x7c00u;

    if (ax >= 0x38800000u) {
        /* Normal fp16 (|f| >= 2^-14): re-bias the exponent (127 -> 15), keep 10 of the 23 mantissa
         * bits and round on the 13 dropped ones. A carry out of the mantissa bumps the exponent,
         * which is exactly right (1.1111111111b rounds up to 10.0b). */
        uint32_t h = (((ax >> 23) - 127u + 15u) << 10) | ((ax & 0x7fffffu) >> 13);
        uint32_t rest = ax & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h += 1u;
        return sign | (uint16_t)h;
    }

    /* |f| <= 2^-25 (0x33000000): at or below half the smallest subnormal 2^-24; the tie rounds to
     * the even neighbour, which is 0. */
    if (ax <= 0x33000000u) return sign;

    /* Subnormal fp16: the value in units of 2^-24 is m * 2^(e - 126), with m the 24-bit mantissa
     * including the implicit 1 and e the biased float exponent (102..112 here), so we shift m
     * right by 126 - e (14..24 bits) and round on what falls off. Rounding up from 0x3ff to 0x400
     * yields the smallest normal, again exactly right. */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t h = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (h & 1u))) h += 1u;
    return sign | (uint16_t)h;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        /* Zero or subnormal: mant * 2^-24, exact in float (mant < 2^10, a power-of-two scale). */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));  /* inf or NaN */
    return bits_f32(sign | ((exp - 15u + 127u) << 23) | (mant << 13));
}

uint8_t f32_to_e4m3(float f) {
    const uint32_t x = f32_bits(f);
    const uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
    const uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) return 0x7f;  /* NaN -> the canonical NaN, sign dropped as CUDA does */
    /* 464 = halfway between 448 (0x7E, the largest finite value, even mantissa) and 480, which
     * would be 0x7F if that code were not NaN: the tie goes to the even 448, and everything above,
     * inf included, saturates to 448 (the "satfinite" of cvt.rn.satfinite). */
    if (ax > 0x43e80000u) return sign | 0x7e;

    if (ax >= 0x3c800000u) {
        /* Normal e4m3 (|f| >= 2^-6): re-bias the exponent (127 -> 7), keep 3 of the 23 mantissa
         * bits and round on the 20 dropped ones. A carry out of the mantissa bumps the exponent,
         * which is exactly right (1.111b rounds up to 10.0b). */
        uint32_t h = (((ax >> 23) - 127u + 7u) << 3) | ((ax & 0x7fffffu) >> 20);
        const uint32_t rest = ax & 0xfffffu;
        if (rest > 0x80000u || (rest == 0x80000u && (h & 1u))) h += 1u;
        return sign | (uint8_t)h;
    }

    /* |f| <= 2^-10 (0x3A800000): at or below half the smallest subnormal 2^-9; the tie rounds to
     * the even neighbour, which is 0 (keeping the sign: -0 is 0x80). */
    if (ax <= 0x3a800000u) return sign;

    /* Subnormal e4m3: the value in units of 2^-9 is m * 2^(e - 141), with m the 24-bit mantissa
     * including the implicit 1 and e the biased float exponent (117..122 here), so we shift m right
     * by 141 - e (19..24 bits) and round on what falls off. Rounding up from 7 to 8 yields the
     * smallest normal (exponent field 1, mantissa 0), again exactly right. */
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 141u - e;
    uint32_t h = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (h & 1u))) h += 1u;
    return sign | (uint8_t)h;
}

float e4m3_to_f32(uint8_t b) {
    const uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    const uint32_t exp = (b >> 3) & 0xfu;
    const uint32_t mant = b & 0x7u;
    if (exp == 15 && mant == 7) return bits_f32(sign | 0x7fc00000u);  /* NaN, the one code of each sign */
    if (exp == 0) {
        /* Zero or subnormal: mant * 2^-9, exact in float. */
        const float v = (float)mant * 0x1p-9f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp - 7u + 127u) << 23) | (mant << 20));
}

size_t dtype_bytes(flash_dtype dtype) { return dtype == FLASH_E4M3 ? 1 : 2; }

uint16_t f32_to_lowp(float f, flash_dtype dtype) {
    return dtype == FLASH_FP16 ? f32_to_f16(f) : f32_to_bf16(f);
}

float lowp_to_f32(uint16_t h, flash_dtype dtype) {
    return dtype == FLASH_FP16 ? f16_to_f32(h) : bf16_to_f32(h);
}

const char *dtype_name(flash_dtype dtype) {
    return dtype == FLASH_E4M3 ? "e4m3" : dtype == FLASH_FP16 ? "fp16" : "bf16";
}
