/*
 * ptx.cuh: the chapter-2 building blocks as thin inline-PTX wrappers.
 *
 * Each wrapper is one instruction (or one instruction per register pair) so that what a stage
 * calls is what shows in its PTX and SASS; the one exception, exp2_fma at the end, emulates one
 * instruction (ex2) in ten others. Fragment layouts for m16n8k16, with g = lane / 4 and
 * t = lane % 4 (rows of A and C, columns of B):
 *
 *   A (16x16, row-major)  a[0]: (g,   2t..2t+1)   a[1]: (g+8, 2t..2t+1)
 *                         a[2]: (g,   2t+8..+9)   a[3]: (g+8, 2t+8..+9)
 *   B (16x8, k x n)       b[0]: (k = 2t..2t+1,   n = g)
 *                         b[1]: (k = 2t+8..+9,   n = g)
 *   C (16x8, f32)         c[0], c[1]: (g, 2t..2t+1)   c[2], c[3]: (g+8, 2t..2t+1)
 *
 * Two 16-bit values share one 32-bit register, the lower column in the low half.
 */
#ifndef FLASH_PTX_CUH
#define FLASH_PTX_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

/* ---- tensor cores: D = A * B + D, 16-bit inputs, f32 accumulate ---------------------------- */

__device__ __forceinline__ void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                             __nv_bfloat16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                             __half) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* ---- shared memory -> registers ------------------------------------------------------------ */

/* The 32-bit shared-window address that ldmatrix and cp.async take. */
__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Four 8x8 b16 matrices; lane l gives the row address for matrix l / 8, and receives in r[i] its
 * two elements of matrix i, laid out like one register of an mma fragment. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* The same with each 8x8 matrix transposed on the way: a row-major [k][n] tile in shared memory
 * arrives as the column-major B fragment, which is what V needs in O += P V. */
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* ---- global -> shared without registers ----------------------------------------------------- */

/* 16 bytes, cached in L2 only (.cg). src_bytes < 16 zero-fills the rest: 0 reads nothing and
 * writes 16 zero bytes, which is how rows past the end of a sequence become zeros. */
__device__ __forceinline__ void cp_async_16(uint32_t smem_addr, const void *gmem, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem),
                 "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/* Waits until at most n committed groups are still in flight. */
template <int n>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(n));
}

/* ---- conversions --------------------------------------------------------------------------- */

/* Two f32 -> one register of two 16-bit values (lo in the low half), one cvt instruction. */
__device__ __forceinline__ uint32_t pack_float2(float lo, float hi, __nv_bfloat16) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ uint32_t pack_float2(float lo, float hi, __half) {
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* The other way: one register of two 16-bit values -> two f32. */
__device__ __forceinline__ float2 unpack_float2(uint32_t r, __nv_bfloat16) {
    __nv_bfloat162 v = *reinterpret_cast<__nv_bfloat162 *>(&r);
    return __bfloat1622float2(v);
}

__device__ __forceinline__ float2 unpack_float2(uint32_t r, __half) {
    __half2 v = *reinterpret_cast<__half2 *>(&r);
    return __half22float2(v);
}

/* 2^x on the special-function unit (MUFU.EX2); ex2(-inf) = 0. */
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* 2^x for x <= 0 on the FMA and integer pipes, none of it on the MUFU unit, whose 16 results per
 * clock per SM bound the softmax at head_dim 64 (docs/12_pingpong.md; stage 13 computes a share
 * of its exponentials here). x = i + f with i the nearest integer: adding 1.5 * 2^23 pushes the
 * fraction out of the float, and the integer lands in the low mantissa bits, from where it goes
 * straight into the exponent field of 2^f. 2^f on [-1/2, 1/2] is a cubic fitted for relative
 * error (at most 7.5e-5, under fp16's rounding step of P and far under bf16's); below 2^-126 the
 * result is 0, as ex2 gives 0 for a masked -inf. Tested alone in build/hopper_units. */
__device__ __forceinline__ float exp2_fma(float x) {
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
    const float shifted = __fadd_rn(x, kRound);
    const float f = __fsub_rn(x, __fsub_rn(shifted, kRound));  // x - i, in [-1/2, 1/2]
    const float p = fmaf(fmaf(fmaf(0.05517103523f, f, 0.24260984361f), f, 0.69326096773f), f, 0.99992817640f);
    const unsigned i = __float_as_uint(shifted) - __float_as_uint(kRound);  // i, two's complement
    const float r = __uint_as_float(__float_as_uint(p) + (i << 23));
    return x < -126.0f ? 0.0f : r;
}

#endif /* FLASH_PTX_CUH */
