/*
 * Stage 09 - wgmma: stage 08's algorithm on Hopper's warpgroup matrix multiply-accumulate.
 *
 * Technique: S = Q_i K_j^T and O += P V with wgmma.mma_async (m64nNk16, f32 accumulators) instead
 *            of mma.sync (docs/09_wgmma.md). A warpgroup (4 warps, 128 threads) owns 64 query rows
 *            and issues one instruction per k16 step for a whole 64 x N tile, where stage 08 issued
 *            N / 8 mma.sync per warp plus the ldmatrix that fed them. The operands come straight
 *            from shared memory through 64-bit matrix descriptors:
 *            - Q_i and K_j K-major (head_dim along each 128-byte row), V_j MN-major ("transposed":
 *              the product wants V [keys, head_dim] with the keys as the reduction dimension, and
 *              only a descriptor change tells wgmma so, no ldmatrix.trans);
 *            - P from registers: S's accumulator fragment, packed to 16 bits, is exactly the A
 *              fragment of the next wgmma, so P never touches shared memory;
 *            - tiles in the 128-byte-swizzled layout wgmma reads (8-row x 128-byte atoms, the
 *              16-byte chunk c of row r at c ^ (r % 8)), filled by cp.async as before.
 *            The instruction is asynchronous: the warpgroup issues the P V of tile j + 1, runs the
 *            softmax of tile j while the tensor cores work, and waits only when it needs O again.
 * Changed:   qk_tile and pv_tile issue wgmma (common/hopper.cuh) instead of ldmatrix + mma.sync; the
 *            shared-memory layout is the 128-byte swizzle of common/hopper.cuh (column blocks of 64)
 *            instead of stage 05's XOR over whole rows; each warp holds 16 rows (one m-tile), so the
 *            m-tile index of stage 08 is gone; 128 query rows in two warpgroups, 128 keys per
 *            tile at head_dim 128 and 64 (two blocks per SM) at head_dim 64 (make tune K=09); one
 *            tile per copy (two K/V slots); the ldmatrix bases are gone.
 * Bottleneck: K_j and V_j still arrive by cp.async, issued by every thread between its GEMMs, and
 *            one __syncthreads per tile keeps the two warpgroups in step; stage 10 hands the copies
 *            to the TMA unit.
 * Measured:  NVIDIA H200, B16 H16 S4096 D128 bf16, median of 4 alternating rounds (make rounds,
 *            commit a13f0f6): 473.6 TFLOP/s, 0.74x FA3, 1.42x stage 08; causal 434.5 TFLOP/s, 0.74x
 *            FA3, 1.44x stage 08.
 * Needs:     sm_90a: a Hopper GPU (H100, H200); wgmma exists nowhere else.
 * Run:       make kernel09 && ./run
 * Read:      docs/09_wgmma.md; the PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate".
 */
#include "flash_internal.h"
#include "hopper.cuh"
#include "ptx.cuh"

#include <math.h>
#include <stdint.h>

#include <atomic>

/* ---------------------------------------------------------------------------------------------
 * Tile configuration
 * ------------------------------------------------------------------------------------------- */

/* kBlockM query rows (64 per warpgroup), kBlockN keys per tile, kNWarpgroups warpgroups, at least
 * kMinBlocks blocks per SM (the register cap). The macros let a build try other shapes. */
template <int M, int N, int W, int B>
struct TileShape {
    static constexpr int kBlockM = M, kBlockN = N, kNWarpgroups = W, kMinBlocks = B;
};
#ifndef FLASH_TILE_D64
#define FLASH_TILE_D64 128, 64, 2, 2
#endif
#ifndef FLASH_TILE_D128
#define FLASH_TILE_D128 128, 128, 2, 1
#endif
template <int kHeadDim> struct Tile;
template <> struct Tile<64> : TileShape<FLASH_TILE_D64> {};
template <> struct Tile<128> : TileShape<FLASH_TILE_D128> {};

/* Element offset of (row, col) in a [kRows, kHeadDim] shared-memory tile: the 128-byte swizzle
 * that wgmma reads (common/hopper.cuh), kHeadDim / 64 column blocks of [kRows, 64]. */
template <int kRows>
__device__ __forceinline__ int smem_idx(int row, int col) {
    static_assert(kRows % 8 == 0, "whole 8-row atoms");
    return sw128_idx(kRows, row, col);
}

/* ---------------------------------------------------------------------------------------------
 * The kernel
 * ------------------------------------------------------------------------------------------- */

/* The copy plan of a [kRows, kHeadDim] tile. Thread tid copies chunk tid % kChunksPerRow of rows
 * tid / kChunksPerRow + i * kRowStep. kRowStep is a multiple of 8, so all of a thread's rows share
 * one swizzle XOR and one column block: its shared-memory offsets are one base plus steps of
 * kRowStep rows of 128 bytes, its global offsets one base plus multiples of one stride. */
template <int kHeadDim, int kRows, int kNThreads>
struct CopyPlan {
    static constexpr int kChunksPerRow = kHeadDim / 8;
    static constexpr int kRowStep = kNThreads / kChunksPerRow;
    static constexpr int kPerThread = kRows / kRowStep;
    static constexpr int kRowStepBytes = kRowStep * 128;  // rows of a column block are 128 bytes apart
    static_assert(kNThreads % kChunksPerRow == 0 && kRowStep % 8 == 0, "a thread's rows share one swizzle XOR");
    static_assert(kRows % kRowStep == 0, "every thread copies the same number of chunks");
    int row;            // first row of this thread
    uint32_t smem_off;  // bytes from the tile's base, for that row
    int64_t gmem_off;   // elements from the tile's first row, for that row
};

template <int kHeadDim, int kRows, int kNThreads>
__device__ __forceinline__ CopyPlan<kHeadDim, kRows, kNThreads> make_copy_plan(int64_t row_stride, int elem_bytes) {
    CopyPlan<kHeadDim, kRows, kNThreads> plan;
    const int row = threadIdx.x / plan.kChunksPerRow, col = (threadIdx.x % plan.kChunksPerRow) * 8;
    plan.row = row;
    plan.smem_off = smem_idx<kRows>(row, col) * elem_bytes;
    plan.gmem_off = row * row_stride + col;
    return plan;
}

/* Issues the asynchronous copy of one tile; rows at or past `valid_rows` are zero-filled from a
 * clamped (row 0) source address, as in the earlier stages. */
template <typename T, int kHeadDim, int kRows, int kNThreads>
__device__ __forceinline__ void load_tile(uint32_t smem_base, const T *gmem, const CopyPlan<kHeadDim, kRows, kNThreads> &plan,
                                          int64_t row_stride, int valid_rows) {
    const T *src = gmem + plan.gmem_off;
#pragma unroll
    for (int i = 0; i < plan.kPerThread; ++i) {
        const bool valid = plan.row + i * plan.kRowStep < valid_rows;
        cp_async_16(smem_base + plan.smem_off + i * plan.kRowStepBytes,
                    valid ? src + i * plan.kRowStep * row_stride : gmem + plan.gmem_off % kHeadDim, valid ? 16 : 0);
    }
}

/* Issues the copy of one whole tile (no row past the sequence) from this thread's first source
 * chunk src: the other chunks are compile-time steps of row_stride away. */
template <typename T, int kHeadDim, int kRows, int kNThreads>
__device__ __forceinline__ void load_full_tile(uint32_t smem_base, const T *src, const CopyPlan<kHeadDim, kRows, kNThreads> &plan,
                                               int64_t row_stride) {
    /* Keep the compiler from precomputing every chunk's address outside the main loop: that
     * costs two registers per chunk for the whole loop. */
    asm("" : "+l"(src));
#pragma unroll
    for (int i = 0; i < plan.kPerThread; ++i) {
        cp_async_16(smem_base + plan.smem_off + i * plan.kRowStepBytes, src, 16);
        src += plan.kRowStep * row_stride;
    }
}

/* S = Q_i K_j^T for this warpgroup's 64 rows: kHeadDim / 16 wgmma m64n{kBlockN}k16, one per k16
 * step of the head dimension. q_tile is the first byte of the warpgroup's rows of Q_i (column block
 * 0), k_tile that of K_j's slot. Step kk reads column block kk / 4 (kRows * 128 bytes further) at
 * byte 32 (kk % 4) of each 128-byte row: the descriptor's start address moves, nothing else.
 * Returns with the product in flight; the caller waits. */
template <typename T, int kHeadDim, int kBlockM, int kBlockN>
__device__ __forceinline__ void qk_tile(float (&acc_s)[kBlockN / 8][4], uint32_t q_tile, uint32_t k_tile) {
    wgmma_hold(acc_s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk)
        wgmma_ss(acc_s, wgmma_desc_k_major(q_tile + (kk / 4) * kBlockM * 128 + (kk % 4) * 32),
                 wgmma_desc_k_major(k_tile + (kk / 4) * kBlockN * 128 + (kk % 4) * 32), kk > 0, T());
    wgmma_commit();
}

/* Masks the keys of a tile starting at key col0 that lie past the end of the sequence or (causal)
 * past the diagonal of the thread's rows. Only boundary tiles come here, so the thread's row and
 * column are recomputed from threadIdx rather than kept in registers through the whole loop. */
template <int kNTilesS>
__device__ __forceinline__ void mask_tile(float (&acc_s)[kNTilesS][4], int row0, int col0, const flash_problem &p, int diag) {
    const int lane = threadIdx.x % 32, t = lane % 4;
    const int row_g = row0 + (threadIdx.x / 32) * 16 + lane / 4;
#pragma unroll
    for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int col = col0 + nt * 8 + 2 * t + (e & 1);
            if (col >= p.seqlen_k || (p.causal && col > row_g + 8 * (e >> 1) + diag)) acc_s[nt][e] = -INFINITY;
        }
}

/* Online softmax of one S tile, FlashAttention-2 form: updates the running max m and sum l of
 * each row, returns the rescale factor alpha of the O rows and P = exp2(scale_log2 (S - m)) packed
 * into A fragments: the accumulators of S tiles 2kk and 2kk+1 hold keys 16kk .. 16kk+15 of rows g
 * and g+8 in exactly the places the A fragment of k16 step kk wants them (the wgmma accumulator
 * fragment is mma.sync's, warp by warp). A row's scores are spread over the 4 lanes of a quad; the
 * max must agree across the quad every tile (all four lanes subtract the same m), the sum need not
 * until the end. */
template <typename T, int kNTilesS>
__device__ __forceinline__ void softmax_tile(float (&acc_s)[kNTilesS][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             uint32_t (&p_frag)[kNTilesS / 2][4], float scale_log2) {
    /* Two partial maxima per row (even and odd key columns): chains half as long. */
    float m_part[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
#pragma unroll
    for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) m_part[e >> 1][e & 1] = fmaxf(m_part[e >> 1][e & 1], acc_s[nt][e]);
    float m_tile[2] = {fmaxf(m_part[0][0], m_part[0][1]), fmaxf(m_part[1][0], m_part[1][1])};
    float m_scaled[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 1));
        m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 2));
        const float m_new = fmaxf(m[h], m_tile[h]);
        /* -inf guard: a row that has seen only masked keys keeps m = -inf, and
         * 2^(-inf - (-inf)) would be NaN. Subtracting 0 instead gives 2^(-inf) = 0, which
         * is also alpha on the first tile (m = -inf): O and l start from zero. */
        m_scaled[h] = (m_new == -INFINITY) ? 0.0f : m_new * scale_log2;
        alpha[h] = fast_exp2(fmaf(m[h], scale_log2, -m_scaled[h]));
        m[h] = m_new;
    }
    float p_sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};  // likewise two partial sums per row
    /* fmaf, not s * scale_log2 - m: one rounding on every path. Written apart, the compiler
     * may fuse the two for some elements and not others (where a mask's select sits
     * between them), and a row's P would then depend on whether its key tile took the mask. */
#pragma unroll
    for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            acc_s[nt][e] = fast_exp2(fmaf(acc_s[nt][e], scale_log2, -m_scaled[e >> 1]));
            p_sum[e >> 1][e & 1] += acc_s[nt][e];
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + (p_sum[h][0] + p_sum[h][1]);
#pragma unroll
    for (int kk = 0; kk < kNTilesS / 2; ++kk) {
        p_frag[kk][0] = pack_float2(acc_s[2 * kk][0], acc_s[2 * kk][1], T());
        p_frag[kk][1] = pack_float2(acc_s[2 * kk][2], acc_s[2 * kk][3], T());
        p_frag[kk][2] = pack_float2(acc_s[2 * kk + 1][0], acc_s[2 * kk + 1][1], T());
        p_frag[kk][3] = pack_float2(acc_s[2 * kk + 1][2], acc_s[2 * kk + 1][3], T());
    }
}

/* O *= alpha, row by row. */
template <int kHeadDim>
__device__ __forceinline__ void rescale_o(float (&acc_o)[kHeadDim / 8][4], const float (&alpha)[2]) {
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[nt][e] *= alpha[e >> 1];
}

/* O += P V_j for this warpgroup's 64 rows: kBlockN / 16 wgmma m64n{kHeadDim}k16 with A = P from
 * registers and B = V_j MN-major from its slot v_tile. Step kk reads keys 16 kk .. 16 kk + 15: two
 * 8-row atoms, 2048 bytes further; the descriptor's LBO steps from head-dim columns 0..63 to
 * 64..127 (kBlockN * 128 bytes), its SBO from the first 8 keys of the step to the next 8. Returns
 * with the product in flight: the caller must not touch acc_o or p_frag before wgmma_wait. */
template <typename T, int kHeadDim, int kBlockN>
__device__ __forceinline__ void pv_tile(float (&acc_o)[kHeadDim / 8][4], const uint32_t (&p_frag)[kBlockN / 16][4], uint32_t v_tile) {
    wgmma_hold(acc_o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) wgmma_rs(acc_o, p_frag[kk], wgmma_desc_mn_major(v_tile + kk * 2048, kBlockN), 1, T());
    wgmma_commit();
}

/* A query tile whose rows all see no key (causal, seqlen_q - seqlen_k >= kBlockM) has nothing to
 * compute: FlashAttention-2 writes its O rows as zeros and its LSE as +inf, and loads nothing. The
 * block returns right after this, before its first copy or barrier, so it never touches shared
 * memory (a block that staged O over a Q tile still in flight would race with its own copies). */
template <typename T, int kHeadDim, int kRows, int kNThreads>
__device__ __forceinline__ void store_empty_tile(const flash_problem &p, int batch, int head, int row0) {
    const int64_t row_stride = (int64_t)p.heads_q * kHeadDim;
    T *o = (T *)p.o + (((int64_t)batch * p.seqlen_q + row0) * p.heads_q + head) * kHeadDim;
    const int valid_rows = p.seqlen_q - row0;
    constexpr int kChunksPerRow = kHeadDim * (int)sizeof(T) / 16;
    for (int c = threadIdx.x; c < kRows * kChunksPerRow; c += kNThreads) {
        const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
        if (row < valid_rows) *reinterpret_cast<uint4 *>(o + row * row_stride + col) = make_uint4(0, 0, 0, 0);
    }
    if (p.lse) {
        float *lse = p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q + row0;
        for (int row = threadIdx.x; row < min(kRows, valid_rows); row += kNThreads) lse[row] = INFINITY;
    }
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(Tile<kHeadDim>::kNWarpgroups * 128, Tile<kHeadDim>::kMinBlocks)
flash_fwd_kernel(const flash_problem p) {
    constexpr int kBlockM = Tile<kHeadDim>::kBlockM;  // query rows per block (Q_i)
    constexpr int kBlockN = Tile<kHeadDim>::kBlockN;  // keys per tile (K_j, V_j)
    constexpr int kNThreads = Tile<kHeadDim>::kNWarpgroups * 128;
    static_assert(kBlockM == 64 * Tile<kHeadDim>::kNWarpgroups, "each warpgroup owns 64 query rows (wgmma's M)");
    static_assert(kBlockN % 64 == 0 && kBlockN <= 256, "a wgmma N of the tile's keys; whole column blocks of V");
    static_assert(kHeadDim % 64 == 0, "whole 128-byte column blocks");
    constexpr int kNTilesS = kBlockN / 8;    // n8 tiles of S across the keys of K_j
    constexpr int kKStepsPV = kBlockN / 16;  // k16 steps of the keys in P V
    constexpr int kNTilesO = kHeadDim / 8;   // n8 tiles of O across the head dimension

    /* Q_i, then two K/V slots: K_j and V_j live in slot j % 2. Every tile starts on a 1024-byte
     * boundary (tile sizes are multiples of 8 rows x 128 bytes), because the swizzle wgmma applies
     * is a function of the address bits; the base is rounded up to one (the launch adds 1 KiB). */
    extern __shared__ unsigned char smem_raw[];
    const uint32_t sQ_u32 = (smem_u32(smem_raw) + 1023) & ~1023u;
    unsigned char *smem = smem_raw + (sQ_u32 - smem_u32(smem_raw));
    T *sQ = reinterpret_cast<T *>(smem);  // Q_i [kBlockM, kHeadDim], read every tile; later O
    constexpr uint32_t kTileBytes = kBlockN * kHeadDim * sizeof(T);
    constexpr uint32_t kSlotBytes = 2 * kTileBytes;  // a slot: K_j then V_j
    const uint32_t sK_u32 = sQ_u32 + kBlockM * kHeadDim * sizeof(T), sV_u32 = sK_u32 + kTileBytes;

    /* Causal query tiles further down have more keys to visit: launch those first so that the
     * last wave is made of short blocks. */
    const int m_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int head = blockIdx.y, batch = blockIdx.z;
    const int head_kv = head / (p.heads_q / p.heads_kv);  // GQA: heads_q / heads_kv query heads share one K/V head
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warpgroup = warp / 4;
    const int g = lane / 4, t = lane % 4;  // fragment coordinates: row group and thread in quad

    const int row0 = m_block * kBlockM;  // first query row of Q_i
    /* Bottom-right causal: query row i sees key j iff j <= i + (seqlen_k - seqlen_q). The last
     * row of this tile therefore needs keys up to row0 + kBlockM - 1 + diag; tiles past that are
     * wholly masked and never loaded. */
    const int diag = p.seqlen_k - p.seqlen_q;
    int n_end = p.seqlen_k;
    if (p.causal) n_end = min(n_end, max(0, row0 + kBlockM + diag));
    const int n_blocks = (n_end + kBlockN - 1) / kBlockN;
    if (n_blocks == 0) {
        store_empty_tile<T, kHeadDim, kBlockM, kNThreads>(p, batch, head, row0);
        return;
    }

    /* Row i of Q for this (batch, head) is at q + i * q_row_stride; likewise for K, V, O. */
    const int64_t q_row_stride = (int64_t)p.heads_q * kHeadDim;
    const int64_t kv_row_stride = (int64_t)p.heads_kv * kHeadDim;
    const T *q = (const T *)p.q + ((int64_t)batch * p.seqlen_q * p.heads_q + head) * kHeadDim;
    const T *k = (const T *)p.k + ((int64_t)batch * p.seqlen_k * p.heads_kv + head_kv) * kHeadDim;
    const T *v = (const T *)p.v + ((int64_t)batch * p.seqlen_k * p.heads_kv + head_kv) * kHeadDim;
    T *o = (T *)p.o + ((int64_t)batch * p.seqlen_q * p.heads_q + head) * kHeadDim;

    /* Tiles from n_masked on hold a key past the end of the sequence, or (causal) a key past the
     * diagonal of this tile's first row; the tiles below it need no mask at all. */
    int n_masked = p.seqlen_k / kBlockN;
    if (p.causal) n_masked = min(n_masked, max(0, (row0 + diag + 1) / kBlockN));

    /* Warp w holds rows 16 w .. 16 w + 15 of Q_i, S and O (warpgroup w / 4, its warp w % 4):
     * in every accumulator, c[0..1] of row g, c[2..3] of row g + 8. */
    const int warp_row0 = warp * 16;
    const int row_g = row0 + warp_row0 + g;  // rows row_g + 8 h
    /* The warpgroup's 64 rows of Q_i start 64 rows (8 atoms) into each column block. */
    const uint32_t q_tile = sQ_u32 + warpgroup * 64 * 128;

    const CopyPlan<kHeadDim, kBlockM, kNThreads> q_plan = make_copy_plan<kHeadDim, kBlockM, kNThreads>(q_row_stride, sizeof(T));
    CopyPlan<kHeadDim, kBlockN, kNThreads> kv_plan = make_copy_plan<kHeadDim, kBlockN, kNThreads>(kv_row_stride, sizeof(T));
    asm("" : "+r"(kv_plan.smem_off));

    /* Software pipeline, as in stage 08: the P V product of tile j + 1 runs during the softmax of
     * tile j (here literally: wgmma is asynchronous), so V trails K by one tile. Iteration j
     * reads K_j and V_{j+1}; the prologue copies Q_i and K_{n-1}, the loop the rest. Only tile n - 1
     * may end past the sequence. */
    load_tile<T, kHeadDim, kBlockM, kNThreads>(sQ_u32, q + row0 * q_row_stride, q_plan, q_row_stride, p.seqlen_q - row0);
    const int64_t tile_step = (int64_t)kBlockN * kv_row_stride;
    const int col_last = (n_blocks - 1) * kBlockN;
    load_tile<T, kHeadDim, kBlockN, kNThreads>(sK_u32 + ((n_blocks - 1) % 2) * kSlotBytes, k + col_last * kv_row_stride, kv_plan,
                                               kv_row_stride, p.seqlen_k - col_last);
    cp_async_commit();
    /* This thread's first chunk of K_{n-2}, the next K tile to copy, in elements from k. */
    int64_t kv_off = kv_plan.gmem_off + (int64_t)(n_blocks - 2) * tile_step;

    /* log2(e) folded into the scale: exp(scale * x) = 2^(scale_log2 * x). */
    const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
    float m[2] = {-INFINITY, -INFINITY};  // running max of the raw (unscaled) scores of rows g, g + 8
    float l[2] = {0.0f, 0.0f};            // this thread's part of the running sum of exp(scale * (s - m))
    float acc_o[kNTilesO][4];             // O, unnormalised: [head-dim n8 tile][fragment register]
#pragma unroll
    for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[nt][e] = 0.0f;
    /* P (as A fragments) and alpha of the tile whose P V is still to come. */
    uint32_t p_frag[kKStepsPV][4];
    float alpha[2] = {1.0f, 1.0f};

    for (int n_block = n_blocks - 1; n_block >= 0; --n_block) {
        const int col0 = n_block * kBlockN;
        const uint32_t slot = (n_block % 2) * kSlotBytes;
        /* K_j and V_{j+1} (and Q_i, the first time) must have landed. cp.async writes through the
         * generic proxy and wgmma reads through the async proxy: each thread fences its own copies
         * over to the async proxy before the barrier publishes them. The barrier also means every
         * warpgroup is done with K_{j+1} and V_{j+2} (each waited for its wgmma), whose places now
         * take K_{j-1} and V_j. */
        cp_async_wait<0>();
        fence_proxy_async();
        __syncthreads();
        if (n_block > 0) load_full_tile<T, kHeadDim, kBlockN, kNThreads>(sK_u32 + (kSlotBytes - slot), k + kv_off, kv_plan, kv_row_stride);
        if (n_block == n_blocks - 1)  // the last V tile may end past the sequence
            load_tile<T, kHeadDim, kBlockN, kNThreads>(sV_u32 + slot, v + col0 * kv_row_stride, kv_plan, kv_row_stride,
                                                       p.seqlen_k - col0);
        else
            load_full_tile<T, kHeadDim, kBlockN, kNThreads>(sV_u32 + slot, v + kv_off + tile_step, kv_plan, kv_row_stride);
        kv_off -= tile_step;
        cp_async_commit();

        float acc_s[kNTilesS][4];
        qk_tile<T, kHeadDim, kBlockM, kBlockN>(acc_s, q_tile, sK_u32 + slot);
        wgmma_wait<0>();
        wgmma_hold(acc_s);
        if (n_block >= n_masked) mask_tile(acc_s, row0, col0, p, diag);

        if (n_block == n_blocks - 1) {
            softmax_tile<T>(acc_s, m, l, alpha, p_frag, scale_log2);
        } else {
            /* O *= alpha of tile j + 1, then its P V starts on the tensor cores while this
             * warpgroup computes the softmax of tile j. */
            rescale_o<kHeadDim>(acc_o, alpha);
            pv_tile<T, kHeadDim, kBlockN>(acc_o, p_frag, sV_u32 + (kSlotBytes - slot));
            uint32_t p_next[kKStepsPV][4];
            softmax_tile<T>(acc_s, m, l, alpha, p_next, scale_log2);
            wgmma_wait<0>();
            wgmma_hold(acc_o);
            /* Until the wait, p_frag was the tensor core's operand: only now may it change. */
#pragma unroll
            for (int kk = 0; kk < kKStepsPV; ++kk)
#pragma unroll
                for (int r = 0; r < 4; ++r) p_frag[kk][r] = p_next[kk][r];
        }
    }
    /* The last P V: V_0 was in the last copy, which no barrier has waited for yet. */
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    rescale_o<kHeadDim>(acc_o, alpha);
    pv_tile<T, kHeadDim, kBlockN>(acc_o, p_frag, sV_u32);
    wgmma_wait<0>();
    wgmma_hold(acc_o);

    /* Epilogue: O = acc_o / l, after the one quad reduction of l. A row that saw no key at all
     * (causal, seqlen_q > seqlen_k) has l = 0: FlashAttention-2 writes O = 0 and LSE = +inf. */
    float inv_l[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        inv_l[h] = (l[h] > 0.0f) ? 1.0f / l[h] : 0.0f;
    }
    /* Stage this warp's rows of O in sQ: the warp's wgmma only ever read its warpgroup's rows of
     * Q_i, the last of them (the last Q K^T) has completed, and the warp writes and reads back only
     * its own 16 rows. */
    T *sO = sQ;
#pragma unroll
    for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            *reinterpret_cast<uint32_t *>(&sO[smem_idx<kBlockM>(warp_row0 + g + 8 * h, nt * 8 + 2 * t)]) =
                pack_float2(acc_o[nt][2 * h] * inv_l[h], acc_o[nt][2 * h + 1] * inv_l[h], T());
    /* The copy-out below reads rows other lanes of this warp wrote. */
    __syncwarp();
    constexpr int kChunksPerRow = kHeadDim * (int)sizeof(T) / 16;
#pragma unroll
    for (int i = 0; i < 16 * kChunksPerRow / 32; ++i) {
        const int c = lane + i * 32;
        const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
        if (row0 + warp_row0 + r < p.seqlen_q)
            *reinterpret_cast<uint4 *>(&o[(row0 + warp_row0 + r) * q_row_stride + col]) =
                *reinterpret_cast<const uint4 *>(&sO[smem_idx<kBlockM>(warp_row0 + r, col)]);
    }
    if (p.lse && t == 0) {
        float *lse = p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q;
#pragma unroll
        for (int h = 0; h < 2; ++h)
            if (row_g + 8 * h < p.seqlen_q) lse[row_g + 8 * h] = (l[h] > 0.0f) ? m[h] * p.softmax_scale + logf(l[h]) : INFINITY;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Launch
 * ------------------------------------------------------------------------------------------- */

/* Shared memory of one block: Q_i and two K/V slots, plus 1 KiB to align the tiles. */
template <typename T, int kHeadDim>
constexpr int smem_bytes() {
    return (Tile<kHeadDim>::kBlockM + 4 * Tile<kHeadDim>::kBlockN) * kHeadDim * (int)sizeof(T) + 1024;
}

/* Above 48 KiB a block must opt in to dynamic shared memory, once per instantiation and device:
 * an atomic flag per device, as in stage 08, so that no host API call lands between the caller's
 * start event and the kernel after the first call. */
constexpr int kMaxDevices = 64;

template <typename T, int kHeadDim>
static int launch(const flash_problem *p, cudaStream_t stream) {
    constexpr int kBlockM = Tile<kHeadDim>::kBlockM;
    constexpr int kSmemBytes = smem_bytes<T, kHeadDim>();
    static std::atomic<bool> opted_in[kMaxDevices];
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return flash_set_error(FLASH_E_CUDA, "kernel09_wgmma: no current device: %s", cudaGetErrorString(err));
    const bool cached = device < kMaxDevices;
    if (!(cached && opted_in[device].load(std::memory_order_acquire))) {
        err = cudaFuncSetAttribute(flash_fwd_kernel<T, kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (err != cudaSuccess)
            return flash_set_error(FLASH_E_CUDA, "kernel09_wgmma: %d bytes of shared memory refused: %s", kSmemBytes,
                                   cudaGetErrorString(err));
        if (cached) opted_in[device].store(true, std::memory_order_release);
    }
    const dim3 grid((p->seqlen_q + kBlockM - 1) / kBlockM, p->heads_q, p->batch);
    flash_fwd_kernel<T, kHeadDim><<<grid, Tile<kHeadDim>::kNWarpgroups * 128, kSmemBytes, stream>>>(*p);
    return flash_launch_status("kernel09_wgmma");
}

extern "C" int flash_forward_kernel09(const flash_problem *p, cudaStream_t stream) {
    if (p->dtype == FLASH_BF16)
        return p->head_dim == 64 ? launch<__nv_bfloat16, 64>(p, stream) : launch<__nv_bfloat16, 128>(p, stream);
    return p->head_dim == 64 ? launch<__half, 64>(p, stream) : launch<__half, 128>(p, stream);
}
