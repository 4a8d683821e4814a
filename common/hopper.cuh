/*
 * hopper.cuh: the Hopper (sm_90a) instructions of stages 09-14 as thin inline-PTX wrappers.
 *
 * Like ptx.cuh, one wrapper is one instruction, so that what a stage calls is what its PTX and
 * SASS show (HGMMA, UTMALDG, SYNCS, USETMAXREG, UTMALDG.MULTICAST). Each says what it guarantees and what it does
 * not: on Hopper the tensor cores and the copy engine run beside the threads, and most bugs are a
 * missing fence or a wait in the wrong place. tests/hopper_units.cu checks every wrapper alone on
 * the GPU against a CPU result before any attention kernel uses it.
 *
 * Needs -gencode arch=compute_90a,code=sm_90a: wgmma and setmaxnreg exist only in the "a" target.
 */
#ifndef FLASH_HOPPER_CUH
#define FLASH_HOPPER_CUH

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "ptx.cuh"

/* ---- the 128-byte swizzled shared-memory layout ------------------------------------------------
 *
 * wgmma reads its shared-memory operands, and TMA writes them, in units of "atoms": 8 rows of
 * 128 bytes (64 16-bit elements), 1024 bytes, 1024-byte aligned. Inside an atom the 16-byte chunk
 * c of row r sits at chunk c ^ r: the XOR spreads any column of 8 rows over all 32 banks, and it
 * is a function of the address bits (bits 4-6 ^= bits 7-9), which is why atoms must be aligned.
 *
 * A [rows, cols] tile of 16-bit elements (rows a multiple of 8, cols of 64) is stored as cols / 64
 * column blocks of [rows, 64], one after the other; inside a block, row r is 128 bytes after row
 * r - 1, so 8 consecutive rows make one atom:
 *
 *     block 0 (cols 0..63)          block 1 (cols 64..127)
 *     rows 0-7    atom 0            rows 0-7    atom rows/8
 *     rows 8-15   atom 1            ...
 *     ...
 *
 * Q, K and V tiles all use it, whatever the operand's major-ness: K-major (Q, K: the reduction
 * dimension, head_dim, runs along the 128-byte rows) and MN-major (V in P V: the N dimension,
 * head_dim again, runs along the rows while the reduction, the keys, goes down them) differ only in
 * the descriptor that describes the same bytes. */

/* Element offset of (row, col) in such a tile of `rows` rows. */
__host__ __device__ __forceinline__ int sw128_idx(int rows, int row, int col) {
    return (col / 64) * rows * 64 + row * 64 + (((col % 64) / 8) ^ (row % 8)) * 8 + col % 8;
}

/* The same layout counted in bytes, for 8-bit tiles: a [rows, cols] tile of bytes is cols / 128
 * column blocks of [rows, 128], 128-byte swizzled as above. An e4m3 head of 128 is one block; V^T
 * in stage 16 ([head_dim, keys]) has one per 128 keys. */
__host__ __device__ __forceinline__ int sw128_byte(int rows, int row, int col) {
    return (col / 128) * rows * 128 + row * 128 + (((col % 128) / 16) ^ (row % 8)) * 16 + col % 16;
}

/* Rows of 64 bytes (an e4m3 head of 64) in the 64-byte swizzle, what TMA writes for a 64-byte box
 * with CU_TENSOR_MAP_SWIZZLE_64B: atoms of 8 rows x 64 bytes (512 bytes); two rows share a 128-byte
 * line, and chunk c of row r sits at chunk c ^ ((r / 2) % 4) (bits 4-5 ^= bits 7-8 of the address),
 * which again spreads a column of 8 rows over all 32 banks. */
__host__ __device__ __forceinline__ int sw64_byte(int row, int col) {
    return row * 64 + ((col / 16) ^ ((row / 2) % 4)) * 16 + col % 16;
}

/* ---- wgmma matrix descriptors ---------------------------------------------------------------
 *
 * A 64-bit word that tells wgmma where an operand lives in shared memory and how it is laid out:
 *   bits  0-13  start address >> 4      (the operand's first byte; in an atom, +32 B per k16 step)
 *   bits 16-29  leading byte offset >> 4 (LBO)
 *   bits 32-45  stride byte offset >> 4  (SBO)
 *   bits 49-51  base offset              (0: our atoms are 1024-byte aligned)
 *   bits 62-63  swizzle mode             (1: 128-byte swizzle)
 * What LBO and SBO mean depends on the operand's major-ness (PTX ISA, "Matrix Descriptor Format"):
 *   K-major, 128 B swizzle: SBO = bytes from one 8-row group (atom) to the next along M or N; LBO
 *     is unused, because one k16 step (32 bytes) never leaves the 128-byte row. We set it to 1.
 *   MN-major, 128 B swizzle: LBO = bytes from one 64-element block of the MN dimension to the next
 *     (our column blocks: rows * 128 bytes); SBO = bytes from one 8-row group along K to the next
 *     (1024). Swapping these two is the classic mistake; tests/hopper_units.cu names it. */
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
    return (uint64_t)((smem_addr & 0x3FFFF) >> 4) | (uint64_t)((lbo_bytes >> 4) & 0x3FFF) << 16 |
           (uint64_t)((sbo_bytes >> 4) & 0x3FFF) << 32 | (uint64_t)1 << 62;
}

/* The operand at smem_addr read K-major (Q or K, reduction along the rows). */
__device__ __forceinline__ uint64_t wgmma_desc_k_major(uint32_t smem_addr) { return wgmma_desc(smem_addr, 16, 1024); }

/* The same for a tile of 64-byte rows in the 64-byte swizzle (sw64_byte, below: e4m3 Q and K at
 * head_dim 64): swizzle mode 2, and 8 rows of 64 bytes, 512 bytes, from one 8-row group to the next. */
__device__ __forceinline__ uint64_t wgmma_desc_k_major_sw64(uint32_t smem_addr) {
    return (wgmma_desc(smem_addr, 16, 512) & ~((uint64_t)3 << 62)) | (uint64_t)2 << 62;
}

/* The operand at smem_addr read MN-major (V: N along the rows, the reduction down them), in a
 * tile of `rows` rows: the next 64 columns of N are rows * 128 bytes further. */
__device__ __forceinline__ uint64_t wgmma_desc_mn_major(uint32_t smem_addr, int rows) {
    return wgmma_desc(smem_addr, (uint32_t)rows * 128, 1024);
}

/* The descriptor of the operand `bytes` further on: only the start address moves, so a loop builds
 * a tile's descriptor once and adds each k16 step's offset to its low word, one integer add per
 * wgmma instead of the mask, shift and or of wgmma_desc. The start field cannot overflow into LBO:
 * shared-memory addresses stay below 2^18, so start + offset stays below 2^14 units of 16 bytes. */
__device__ __forceinline__ uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes) {
    const uint32_t lo = (uint32_t)desc + (bytes >> 4), hi = (uint32_t)(desc >> 32);
    return (uint64_t)hi << 32 | lo;
}

/* A value that every lane of the warp holds alike (the warp's index, a tile number read from
 * shared memory), as one the compiler knows is: it cannot tell from threadIdx.x / 32 or from a
 * shared-memory load, and keeps what it derives from them (addresses, hence wgmma descriptors) in
 * per-thread registers, each moved to a uniform register (R2UR) before every wgmma. Lane 0's copy,
 * through a shuffle, is uniform by construction. */
__device__ __forceinline__ int warp_uniform(int value) { return __shfl_sync(0xffffffffu, value, 0); }

/* ---- wgmma: warpgroup matrix multiply-accumulate -------------------------------------------
 *
 * D[64, N] (+)= A[64, 16] B[16, N] over one warpgroup: 4 consecutive warps, the first one's index a
 * multiple of 4, all 128 threads executing the same wrapper. f32 accumulators, 16-bit inputs.
 *
 * The accumulator fragment: d[j][e] of thread (warp w of the group, lane l) is element
 *     row 16 w + l / 4 + 8 (e / 2),   column 8 j + 2 (l % 4) + e % 2
 * which is the m16n8 C fragment of mma.sync (ptx.cuh), one n8 tile per j, warp w owning rows
 * 16 w .. 16 w + 15. The A-register fragment (wgmma_rs) is likewise mma.sync's m16k16 A fragment
 * of the warp's 16 rows: so two n8 tiles of an S accumulator, packed to 16 bits, are one k16 step
 * of A for P V, with no data movement.
 *
 * Asynchrony: wgmma only starts the product. The accumulator registers (and A registers) belong
 * to the tensor core until wgmma_wait says the group that contains it is complete: reading or
 * writing them before that is undefined. Before the first wgmma after the registers were touched
 * by ordinary code, wgmma_fence must run. accumulate = 0 overwrites D (the first k step). */

/* One wrapper per shape and dtype, generated by the macros (the operand lists are long, the rest
 * is the same). N = 96 and N = 176 exist for S only, whose P V still has N = head_dim: tiles of 96
 * keys (stage 13 holds two S tiles at once) and of 176 (FlashAttention-3's choice at head_dim 128).
 * wgmma_ss: A and B from shared memory, both K-major (S = Q K^T). wgmma_rs: A from registers, B
 * MN-major ("transposed") from shared memory (O += P V), or K-major for e4m3 (below). Overloaded on
 * the accumulator's size, so N = 8 x its first dimension, and on the dtype tag. */
#define FLASH_WGMMA_SS_N64(T, KIND, IMM) \
    __device__ __forceinline__ void wgmma_ss(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, int accumulate, T) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n64" KIND " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
                     "%32, %33, p, " IMM ";\n}\n" \
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]) \
          : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
    }
#define FLASH_WGMMA_RS_N64(T, KIND, IMM) \
    __device__ __forceinline__ void wgmma_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b, int accumulate, T) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n64" KIND " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
                     "{%32, %33, %34, %35}, %36, p, " IMM ";\n}\n" \
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]) \
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
    }
#define FLASH_WGMMA_SS_N128(T, KIND, IMM) \
    __device__ __forceinline__ void wgmma_ss(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b, int accumulate, T) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n128" KIND " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
                     "%64, %65, p, " IMM ";\n}\n" \
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), \
          "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
          "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), \
          "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), \
          "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]) \
          : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
    }
#define FLASH_WGMMA_RS_N128(T, KIND, IMM) \
    __device__ __forceinline__ void wgmma_rs(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b, int accumulate, T) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n128" KIND " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
                     "{%64, %65, %66, %67}, %68, p, " IMM ";\n}\n" \
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), \
          "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
          "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), \
          "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), \
          "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]) \
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
    }

#define FLASH_WGMMA_SS_N96(T, KIND, IMM) \
    __device__ __forceinline__ void wgmma_ss(float (&d)[12][4], uint64_t desc_a, uint64_t desc_b, int accumulate, T) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n96" KIND " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, " \
                     "%48, %49, p, " IMM ";\n}\n" \
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), \
          "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
          "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]) \
          : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
    }

#define FLASH_WGMMA_SS_N160(T, KIND, IMM) \
    __device__ __forceinline__ void wgmma_ss(float (&d)[20][4], uint64_t desc_a, uint64_t desc_b, int accumulate, T) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n160" KIND " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, " \
                     "%80, %81, p, " IMM ";\n}\n" \
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), \
          "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
          "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), \
          "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), \
          "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]), \
          "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]), \
          "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]) \
          : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
    }

#define FLASH_WGMMA_SS_N176(T, KIND, IMM) \
    __device__ __forceinline__ void wgmma_ss(float (&d)[22][4], uint64_t desc_a, uint64_t desc_b, int accumulate, T) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n176" KIND " " \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, " \
                     "%88, %89, p, " IMM ";\n}\n" \
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), \
          "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
          "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), \
          "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), \
          "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]), \
          "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]), \
          "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]), \
          "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), "+f"(d[20][3]), "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]) \
          : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
    }

/* The instruction's k and types, and its immediate operands after the scale-d predicate: scale-a
 * and scale-b (1: no negation), then for 16-bit inputs one transpose flag per shared-memory
 * operand (0: K-major; 1: MN-major, V in P V). 8-bit inputs have no transpose flags: both operands
 * must be K-major, which is why stage 16 transposes V itself. */
#define FLASH_KIND_BF16_SS "k16.f32.bf16.bf16", "1, 1, 0, 0"
#define FLASH_KIND_F16_SS "k16.f32.f16.f16", "1, 1, 0, 0"
#define FLASH_KIND_BF16_RS "k16.f32.bf16.bf16", "1, 1, 1"
#define FLASH_KIND_F16_RS "k16.f32.f16.f16", "1, 1, 1"
#define FLASH_KIND_E4M3 "k32.f32.e4m3.e4m3", "1, 1"
/* Expands the kind's two strings into the shape macro's arguments. */
#define FLASH_WGMMA(SHAPE, T, KIND) SHAPE(T, KIND)

FLASH_WGMMA(FLASH_WGMMA_SS_N64, __nv_bfloat16, FLASH_KIND_BF16_SS)
FLASH_WGMMA(FLASH_WGMMA_SS_N64, __half, FLASH_KIND_F16_SS)
FLASH_WGMMA(FLASH_WGMMA_RS_N64, __nv_bfloat16, FLASH_KIND_BF16_RS)
FLASH_WGMMA(FLASH_WGMMA_RS_N64, __half, FLASH_KIND_F16_RS)
FLASH_WGMMA(FLASH_WGMMA_SS_N128, __nv_bfloat16, FLASH_KIND_BF16_SS)
FLASH_WGMMA(FLASH_WGMMA_SS_N128, __half, FLASH_KIND_F16_SS)
FLASH_WGMMA(FLASH_WGMMA_RS_N128, __nv_bfloat16, FLASH_KIND_BF16_RS)
FLASH_WGMMA(FLASH_WGMMA_RS_N128, __half, FLASH_KIND_F16_RS)
FLASH_WGMMA(FLASH_WGMMA_SS_N96, __nv_bfloat16, FLASH_KIND_BF16_SS)
FLASH_WGMMA(FLASH_WGMMA_SS_N96, __half, FLASH_KIND_F16_SS)
FLASH_WGMMA(FLASH_WGMMA_SS_N160, __nv_bfloat16, FLASH_KIND_BF16_SS)
FLASH_WGMMA(FLASH_WGMMA_SS_N160, __half, FLASH_KIND_F16_SS)
FLASH_WGMMA(FLASH_WGMMA_SS_N176, __nv_bfloat16, FLASH_KIND_BF16_SS)
FLASH_WGMMA(FLASH_WGMMA_SS_N176, __half, FLASH_KIND_F16_SS)
/* e4m3 (stage 16): S = Q K^T with 96, 128 or 160 keys, O += P V with head_dim 64 and 128; k32 per instruction,
 * twice the elements of a k16 step in the same 32 bytes of each row. */
FLASH_WGMMA(FLASH_WGMMA_SS_N96, __nv_fp8_e4m3, FLASH_KIND_E4M3)
FLASH_WGMMA(FLASH_WGMMA_SS_N128, __nv_fp8_e4m3, FLASH_KIND_E4M3)
FLASH_WGMMA(FLASH_WGMMA_SS_N160, __nv_fp8_e4m3, FLASH_KIND_E4M3)
FLASH_WGMMA(FLASH_WGMMA_RS_N64, __nv_fp8_e4m3, FLASH_KIND_E4M3)
FLASH_WGMMA(FLASH_WGMMA_RS_N128, __nv_fp8_e4m3, FLASH_KIND_E4M3)

/* Orders this thread's earlier register and shared-memory accesses before the wgmma that follow:
 * needed before the first wgmma of a batch whenever the accumulators or A registers were written
 * by ordinary instructions (zeroed, rescaled, packed from S). */
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

/* Closes the wgmma issued since the last commit into one group, for wgmma_wait to count. */
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

/* Blocks until at most n committed groups are unfinished: their accumulators are then final and
 * their shared-memory operands no longer read. */
template <int n>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(n) : "memory");
}

/* Keeps the compiler from moving reads or writes of an accumulator across a wgmma wrapper or a
 * wait (it sees the asm as reading and writing the register): without it, it may copy a live
 * accumulator while the tensor core still owns it, and ptxas then serialises every wgmma. */
template <int kTiles>
__device__ __forceinline__ void wgmma_hold(float (&d)[kTiles][4]) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[j][e])::"memory");
}

/* ---- e4m3: P's fragments and V's transpose ---------------------------------------------------
 *
 * With 8-bit inputs wgmma reads both shared-memory operands K-major only, and P V needs V's keys
 * along the rows: V^T, [head_dim, keys], which stage 16 writes from the V tile TMA brought in
 * ([keys, head_dim]). And P comes from registers as the A fragment of m64nNk32, which is not S's
 * accumulator layout. The A fragment of a k32 step (keys 32 kk .. 32 kk + 31), per warp as for
 * mma.sync m16n8k32 with 8-bit A, is four 32-bit registers of four e4m3 each, lowest byte first:
 *     a0: row g,     k 4t .. 4t + 3        a2: row g,     k 16 + 4t .. 16 + 4t + 3
 *     a1: row g + 8, k 4t .. 4t + 3        a3: row g + 8, k 16 + 4t .. 16 + 4t + 3
 * while S's accumulators give thread (g, t) keys 2t, 2t + 1 of each n8 tile (rows g and g + 8).
 * Rather than move values between threads, P's k index is allowed to differ from the key index:
 * register a0 takes the thread's own keys 2t, 2t + 1 of n8 tile 4 kk and of tile 4 kk + 1 (keys
 * 8 + 2t, 9 + 2t), a2 the same of tiles 4 kk + 2 and 4 kk + 3. So inside each group of 16 keys, k
 * position L holds key
 *     key(L) = 8 ((L % 4) / 2) + 2 (L / 4) + L % 2        (L = 0 .. 15)
 * and P V is right if V^T's k position L holds V's key(L) too: a sum over keys does not care in
 * which order it adds them. The transpose below writes V^T in exactly that order, so the
 * permutation costs nothing: no shuffle in the consumers, nothing to undo in O. */

/* stmatrix: ldmatrix's inverse (sm_90). Four 8 x 8 blocks of 16-bit elements; lane l gives the
 * shared address of row l % 8 of block l / 8 (16 bytes, 16-byte aligned), and r[j] of thread
 * (g = lane / 4, t = lane % 4) is elements 2t, 2t + 1 of row g of block j. */
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]),
                 "r"(r[3])
                 : "memory");
}

/* Four floats rounded to e4m3 (round to nearest even, saturating at +-448: the values are P scaled
 * into e4m3's range, never beyond it) in one register, a lowest. cvt's e4m3x2 puts its first
 * operand in the upper byte. */
__device__ __forceinline__ uint32_t pack_e4m3x4(float a, float b, float c, float d) {
    uint32_t r;
    asm("{\n.reg .b16 lo, hi;\n"
        "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
        "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
        "mov.b32 %0, {lo, hi};\n}\n"
        : "=r"(r)
        : "f"(a), "f"(b), "f"(c), "f"(d));
    return r;
}

/* The A fragment of k32 step kk from S's accumulators (already P, scaled): the key order above. */
template <int kNTilesS>
__device__ __forceinline__ void pack_p_e4m3(const float (&acc_s)[kNTilesS][4], int kk, uint32_t (&a)[4]) {
    const int n = 4 * kk;
    a[0] = pack_e4m3x4(acc_s[n][0], acc_s[n][1], acc_s[n + 1][0], acc_s[n + 1][1]);
    a[1] = pack_e4m3x4(acc_s[n][2], acc_s[n][3], acc_s[n + 1][2], acc_s[n + 1][3]);
    a[2] = pack_e4m3x4(acc_s[n + 2][0], acc_s[n + 2][1], acc_s[n + 3][0], acc_s[n + 3][1]);
    a[3] = pack_e4m3x4(acc_s[n + 2][2], acc_s[n + 2][3], acc_s[n + 3][2], acc_s[n + 3][3]);
}

/* One warp's share of V^T: 16 keys (16 group .. + 15) by 32 head-dim bytes (32 span .. + 31) of the
 * V tile at v_tile (TMA's layout: row = key, kRowBytes = head_dim bytes per row, swizzled as
 * sw128_byte for 128 and sw64_byte for 64), written to the V^T tile at vt_tile ([head_dim, kKeys]
 * bytes, sw128_byte) in P's key order. ldmatrix.trans, reading 16-bit elements, hands thread
 * (g = lane / 4, t = lane % 4) of an 8 x 8 block head-dim pair g (bytes 2g, 2g + 1) of keys 2t and
 * 2t + 1; its four blocks are keys 0-7 and 8-15 by the two 16-byte halves of the 32 bytes. Two byte
 * permutes of the keys-0-7 and keys-8-15 registers then make, for head-dim byte 2g and for 2g + 1,
 * the word of keys 2t, 2t + 1, 8 + 2t, 9 + 2t: V^T's k positions 4t .. 4t + 3 above. That is word t
 * of V^T rows d0 + 2g and d0 + 2g + 1 (and 16 rows on): row g, word t of four 8 x 8 blocks whose
 * rows are every other V^T row, which is the layout stmatrix stores from, its rows at any
 * addresses. One stmatrix of four blocks; its lanes g and g + 4 meet in one bank (rows 8 apart), a
 * two-way conflict. */
template <int kRowBytes, int kHeadDim>
__device__ __forceinline__ void transpose_v_e4m3(uint32_t v_tile, uint32_t vt_tile, uint32_t group, uint32_t span) {
    static_assert(kRowBytes == 128 || kRowBytes == 64, "a V row is an e4m3 head of 128 or 64 bytes");
    /* Unsigned arithmetic throughout: the swizzles are shifts, masks and XORs of it, which the
     * compiler hoists out of the caller's loop where they depend on the lane alone. */
    const uint32_t lane = threadIdx.x % 32, blk = lane / 8, i = lane % 8;
    /* ldmatrix: lane l gives row i of block l / 8, V's key 16 group + 8 (block & 1) + i (its row % 8
     * is i), 16-byte chunk 2 span + (block >> 1) of the row. */
    const uint32_t key = 16 * group + 8 * (blk & 1) + i, chunk = 2 * span + (blk >> 1);
    const uint32_t ld = kRowBytes == 128 ? key * 128 + ((chunk ^ i) << 4) : key * 64 + ((chunk ^ (i / 2)) << 4);
    uint32_t r[4];
    ldmatrix_x4_trans(r, v_tile + ld);
    const uint32_t w[4] = {__byte_perm(r[0], r[1], 0x6420), __byte_perm(r[0], r[1], 0x7531), __byte_perm(r[2], r[3], 0x6420),
                           __byte_perm(r[2], r[3], 0x7531)};
    /* stmatrix: lane l gives V^T row 32 span + 16 (block >> 1) + 2i + (block & 1), at key byte
     * 16 group: column block group / 8 of 128 keys, chunk group % 8 of the row (sw128_byte). */
    const uint32_t row = 32 * span + 16 * (blk >> 1) + 2 * i + (blk & 1);
    stmatrix_x4(vt_tile + (group / 8) * kHeadDim * 128 + row * 128 + (((group % 8) ^ (row % 8)) << 4), w);
}

/* ---- proxies ------------------------------------------------------------------------------
 *
 * wgmma operand reads and TMA copies go through the "async proxy"; ordinary loads, stores and
 * cp.async through the generic proxy. Shared memory written through one and read through the other
 * needs this fence in the writing threads, before the barrier that publishes the data. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* ---- mbarrier: a shared-memory barrier with a transaction count ----------------------------
 *
 * An mbarrier (8 bytes, 8-byte aligned, in shared memory) completes a phase when its pending
 * arrivals reach zero and its expected transaction bytes have all landed; then it flips its phase
 * bit and re-arms with the same arrival count. Waiters wait for a phase by its parity (0, 1, 0, ...
 * for phases 0, 1, 2, ...): a consumer that has used slot s k times waits for parity k & 1. */

/* Sets the arrival count. One thread, before any use; then fence_mbarrier_init and a barrier. */
__device__ __forceinline__ void mbarrier_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* Makes initialised mbarriers visible to the async proxy (the TMA unit that will signal them). */
__device__ __forceinline__ void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* One arrival, and `bytes` more expected transaction bytes for the current phase: the thread that
 * issues a TMA copy calls it with the copy's size. The phase cannot complete before those bytes
 * land, whatever order the arrival and the bytes come in. */
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/* One plain arrival (release: this thread's earlier shared-memory accesses happen before the
 * phase completes). */
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* Waits until the phase with parity `parity` has completed (acquire: what the arrivals and the
 * TMA bytes wrote is visible afterwards). try_wait suspends the thread for a while in hardware;
 * the loop only retries when that time limit ran out. */
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

/* ---- TMA: tensor copies by the copy engine -------------------------------------------------
 *
 * A CUtensorMap (encoded on the host by flash_tma_map, common/flash_tma.h; passed as a
 * const __grid_constant__ kernel parameter) describes a global tensor and a box. One thread issues
 * a copy of the box at integer coordinates (innermost first); the engine writes it into shared
 * memory in the map's swizzled layout, zero-filling elements outside the tensor, and adds the bytes
 * to the mbarrier's transaction count. The box's byte size counts in full, zeros included. */
__device__ __forceinline__ void tma_load_4d(uint32_t smem_dst, const CUtensorMap *map, uint32_t bar, int c0, int c1, int c2,
                                            int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::
            "r"(smem_dst),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
}

/* Shared -> global through the map: elements outside the tensor are not written. The source
 * must have been written before a fence_proxy_async (by every writing thread) and a barrier. */
__device__ __forceinline__ void tma_store_4d(const CUtensorMap *map, uint32_t smem_src, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(map),
                 "r"(smem_src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

/* Closes the issuing thread's TMA stores into a group. */
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

/* Waits until the thread's committed TMA stores have finished reading shared memory (not until
 * they reach global memory: the end of the kernel guarantees that). */
__device__ __forceinline__ void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }

/* Fetches the map's 128-byte descriptor into the constant cache ahead of the first copy. */
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap *map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

/* ---- clusters: blocks that reach into each other's shared memory --------------------------
 *
 * A launch with a cluster dimension (cudaLaunchAttributeClusterDimension) groups consecutive blocks
 * into clusters that run at the same time on neighbouring SMs. A block of a cluster may write the
 * shared memory of another (here: only the copy engine does, by multicast) and arrive on its
 * mbarriers; an address in the "shared::cluster" window names a location in any block of the
 * cluster, and a block's own shared::cta addresses are valid shared::cluster addresses of itself. */

/* This block's rank in its cluster, 0 .. cluster size - 1. */
__device__ __forceinline__ uint32_t cluster_ctarank() {
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

/* The cluster-wide barrier, in two halves: every thread of every block of the cluster arrives
 * (release: its earlier memory operations, remote arrivals included, happen before) and waits
 * (acquire) for all the others; threads that have exited count as arrived. Needed once after the
 * mbarriers are initialised, before another block may signal them, and once before a block exits
 * while another may still arrive on its mbarriers. */
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory"); }

/* The shared::cluster address of the location at shared::cta address `addr` in block `rank`. */
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
    uint32_t mapped;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(mapped) : "r"(addr), "r"(rank));
    return mapped;
}

/* One arrival on an mbarrier of any block of the cluster (`bar` from cluster_map). Release at CTA
 * scope, the instruction's default, as for mbarrier_arrive: what a stage signals this way is that
 * its wgmma reads of a slot, which the arriving thread has waited for, are done, and the other
 * block only writes the slot again through the copy engine after waiting for the phase. A release
 * at cluster scope (.release.cluster) puts a memory barrier (MEMBAR) in front of every arrival,
 * which stalls the arriving warp and, through the turns, its warpgroup (docs/14 measured it). */
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* tma_load_4d to every block of the cluster in cta_mask (bit r: block r): the engine reads the box
 * from global memory once and writes it to the same shared-memory offset `smem_dst` of each of those
 * blocks, adding its bytes to the transaction count of the mbarrier at offset `bar` of each. */
__device__ __forceinline__ void tma_load_4d_multicast(uint32_t smem_dst, const CUtensorMap *map, uint32_t bar, uint16_t cta_mask,
                                                      int c0, int c1, int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(smem_dst),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "h"(cta_mask)
        : "memory");
}

/* ---- registers and named barriers (warp specialisation) ----------------------------------
 *
 * setmaxnreg moves a warpgroup's per-thread register allocation up or down (a multiple of 8 in
 * 24..256); every warp of the warpgroup executes it. It takes effect only when the kernel was
 * compiled with a fixed register count (__launch_bounds__(threads, 1)). */
template <int n>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(n));
}
template <int n>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(n));
}

/* Named barrier `id` (1..15; 0 is __syncthreads) among `threads` threads (a multiple of 32): sync
 * waits for all of them, arrive signals without waiting. */
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#endif /* FLASH_HOPPER_CUH */
