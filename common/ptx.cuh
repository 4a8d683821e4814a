/*
 * ptx.cuh: the chapter-2 building blocks as thin inline-PTX wrappers.
 *
 * Each wrapper is one instruction (or one instruction per register pair) so that what a stage
 * calls is what shows in its PTX and SASS. Fragment layouts for m16n8k16, with g = lane / 4 and
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

#endif /* FLASH_PTX_CUH */
