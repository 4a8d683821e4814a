/*
 * test_fp8_cuda.cu: the host's e4m3 conversions (harness/lowp.c, written by hand in C) against
 * CUDA's own (cuda_fp8.h), bit for bit. The GPU reference rounds P with __nv_cvt_float_to_fp8
 * (__NV_SATFINITE, __NV_E4M3), which on sm_89 and newer is the instruction the kernels use,
 * cvt.rn.satfinite.e4m3x2.f32; the harness quantizes the inputs with f32_to_e4m3. Both must give
 * the same bits, or the reference would judge a kernel by other roundings than the inputs'.
 *
 * Runs on the host, no GPU: cuda_fp8.h computes the same conversion in software there (its model of
 * the instruction), which is what this compares with. Every case where two conversions of a float
 * to e4m3 can part: each float's bits are sign, exponent and mantissa, and the result depends on
 * the sign, the exponent, the mantissa bits kept (3, fewer for subnormals), the first bit dropped
 * and whether any bit below it is set. So every combination of the top 20 bits (sign, the 8
 * exponent bits, the top 11 mantissa bits: each rounding position e4m3 has, subnormals included,
 * lies among them or at the implicit bit) is taken with the low 12 bits 0, 1, 0x7FF, 0x800, 0x801
 * and 0xFFF; then every e4m3 value, every midpoint between neighbours and the floats beside it, the
 * specials, and random floats. And e4m3 -> float for all 256 codes.
 *
 * Build (tests/run_tests.sh does this): nvcc -std=c++17 -Icommon -Iharness
 *   tests/test_fp8_cuda.cu build/harness/lowp.o -o build/test_fp8_cuda
 * Output: PASS:/FAIL: lines; exit 0 when none failed.
 */
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lowp.h"
#include "report.h"

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint8_t cuda_e4m3(float f) { return (uint8_t)__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3); }

/* Counts the floats where the two conversions differ; the first one goes into why[n]. */
typedef struct {
    unsigned long long cases, differ;
    char why[160];
} tally;

static void compare(tally *t, float f) {
    t->cases++;
    const uint8_t mine = f32_to_e4m3(f), theirs = cuda_e4m3(f);
    if (mine != theirs && t->differ++ == 0) {
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        snprintf(t->why, sizeof t->why, "float 0x%08x (%.9g): host 0x%02x, CUDA 0x%02x", u, (double)f, mine, theirs);
    }
}

static void report_tally(const char *name, const tally *t) {
    char full[192], why[240];
    snprintf(full, sizeof full, "%s (%llu floats)", name, t->cases);
    snprintf(why, sizeof why, "%llu differ; the first: %s", t->differ, t->why);
    report(full, t->differ == 0, why);
}

int main(void) {
    /* Every rounding position with the bits below it empty, just set, half and all set. */
    tally t = {0, 0, ""};
    static const uint32_t low[] = {0x000, 0x001, 0x7ff, 0x800, 0x801, 0xfff};
    for (uint32_t top = 0; top < (1u << 20); top++)
        for (size_t k = 0; k < sizeof low / sizeof low[0]; k++) compare(&t, bits_f32((top << 12) | low[k]));
    report_tally("f32_to_e4m3 == __nv_cvt_float_to_fp8(satfinite, e4m3): every sign, exponent and top 11 mantissa bits", &t);

    /* Every e4m3 value, the midpoints between neighbours and the floats on either side of them, and
     * the specials: zeros, infinities, NaNs of both signs, the largest and smallest floats. */
    tally s = {0, 0, ""};
    for (uint32_t b = 0; b < 256; b++) {
        const float v = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3)));
        if (isnan(v)) continue;
        compare(&s, v);
        compare(&s, nextafterf(v, INFINITY));
        compare(&s, nextafterf(v, -INFINITY));
        const uint32_t next = (b & 0x7f) == 0x7e ? b : b + 1;  /* +-448 has no finite neighbour above */
        const float w = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)next, __NV_E4M3)));
        const float mid = v + 0.5f * (w - v);
        compare(&s, mid);
        compare(&s, nextafterf(mid, INFINITY));
        compare(&s, nextafterf(mid, -INFINITY));
    }
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 464.0f, -464.0f, 480.0f, 1e30f,
                                     3.4028235e38f, 1.17549435e-38f, 1.4e-45f, -1.4e-45f, 0x1p-10f, -0x1p-10f};
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) compare(&s, specials[k]);
    compare(&s, bits_f32(0x7fc00000u));  /* quiet NaN */
    compare(&s, bits_f32(0xffc00000u));  /* negative quiet NaN */
    compare(&s, bits_f32(0x7f800001u));  /* signalling NaN */
    report_tally("f32_to_e4m3 == CUDA's: every e4m3 value, every midpoint and its neighbours, the specials", &s);

    /* Random floats, every bit pattern alike (a fixed xorshift: the same floats every run). */
    tally r = {0, 0, ""};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < (1 << 24); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        compare(&r, bits_f32((uint32_t)(x >> 32)));
    }
    report_tally("f32_to_e4m3 == CUDA's: random bit patterns", &r);

    /* e4m3 -> float: every code, NaNs as NaNs. */
    int ok = 1;
    char why[160] = "";
    for (uint32_t b = 0; b < 256; b++) {
        const float mine = e4m3_to_f32((uint8_t)b);
        const float theirs = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3)));
        const int same = isnan(mine) ? isnan(theirs) : (mine == theirs && signbit(mine) == signbit(theirs));
        if (!same && ok) ok = 0, snprintf(why, sizeof why, "0x%02x: host %g, CUDA %g", b, (double)mine, (double)theirs);
    }
    report("e4m3_to_f32 == __nv_cvt_fp8_to_halfraw, all 256 codes", ok, why);

    printf("test_fp8_cuda: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
