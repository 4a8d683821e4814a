/*
 * Stage 08 - final: stage 07 fitted to the card (32 rows per warp, a K/V ring, P V under softmax).
 *
 * Technique: no new instruction; the shape and the order of the work are fitted to the GPU, each
 *            decision measured (docs/08_final.md):
 *            - 32 query rows per warp (two m16 tiles) instead of 16: every K and V fragment that
 *              ldmatrix brings in now feeds two mma instead of one. With 16 rows per warp each
 *              warp reads the whole K_j and V_j tile from shared memory for 16 rows, and shared
 *              memory bandwidth (128 B per clock per SM) caps that design near 430 TFLOP/s on an
 *              H200; 32 rows halve the traffic per FLOP. Q no longer fits in registers next to
 *              two m-tiles of accumulators, so its fragments are re-read per k-slice;
 *            - tiles per head_dim (Tile<> below, chosen with `make tune`): 128 query rows and 4
 *              warps, two blocks per SM; 32 keys per tile for d128 and 64 for d64, the widest
 *              that fit 255 registers without a spill on both sm_80 and sm_90;
 *            - a software pipeline: the P V product of tile j + 1 runs during the softmax of
 *              tile j, so each warp has mma to issue while its max, exp2 and sums wait on each
 *              other; V trails K by one tile;
 *            - a ring of K/V slots filled kCopyTiles tiles at a time: the copies of the next
 *              tiles run during the math of as many, and one barrier per kCopyTiles tiles replaces
 *              the two per tile of stage 07; two tiles where two blocks' ring fits the SM's shared
 *              memory (Hopper), one elsewhere (A100, RTX 30xx/40xx), picked at the first launch;
 *            - shared memory above 48 KiB (dynamic, cudaFuncSetAttribute), registers capped with
 *              __launch_bounds__ and no spills;
 *            - K/V tiles visited last to first: the tiles that need a mask (the sequence tail, the
 *              causal diagonal) come first, and every later tile skips the mask test; tiles wholly
 *              above the causal diagonal are never visited; heavy causal query tiles start first;
 *            - instruction count: every ldmatrix address is a per-lane base plus an immediate (the
 *              swizzle XOR of a lane is fixed, so it is folded into four bases), a thread's
 *              cp.async sources are one offset plus constant steps, and the row max and sum are
 *              reduced as trees, not chains.
 * Changed:   Tile<kHeadDim> replaces the fixed 64 x 64 x 4 warps; each per-row quantity gains an
 *            m-tile index; Q fragments are loaded per k-slice; the loop body is split into tile
 *            functions (qk_tile, mask_tile, softmax_tile, rescale_o, pv_tile) so that it can be
 *            pipelined; K/V go through a ring of 2 kCopyTiles slots with one barrier per copy;
 *            shared memory is dynamic; the main loop runs n_block downwards with a masked /
 *            unmasked split.
 * Bottleneck: the mma.sync issue rate against the softmax between the two products, with only two
 *            warps per scheduler to overlap them; what is left needs Hopper's wgmma and TMA
 *            (docs/08_final.md).
 * Measured:  NVIDIA H200, B16 H16 S4096 D128 bf16, median of 4 alternating rounds (make rounds,
 *            commit a13f0f6): 333.7 TFLOP/s, 0.98x FA2, 1.20x stage 07; causal 301.8 TFLOP/s, 0.94x
 *            FA2, 1.15x stage 07.
 * Needs:     sm_80: an Ampere or newer GPU, like every stage of the chapters' path.
 * Run:       make kernel08 && ./run
 * Read:      docs/08_final.md; in the blog series, https://lubits.ch/flash/Part-6 (auto-tuning),
 *            https://lubits.ch/flash/Part-7 (profiling), https://lubits.ch/flash/Part-8
 *            (instruction reduction) and
 *            https://lubits.ch/flash/Appendix-B---Block-Size-Configuration (block sizes).
 */
#include "flash_internal.h"
#include "ptx.cuh"

#include <math.h>
#include <stdint.h>

#include <atomic>

/* ---------------------------------------------------------------------------------------------
 * Tile configuration
 * ------------------------------------------------------------------------------------------- */

/* kBlockM query rows, kBlockN keys per tile, kNWarps warps, at least kMinBlocks blocks per SM
 * (the register cap). `make tune` rebuilds this file with other shapes through the macros. */
template <int M, int N, int W, int B>
struct TileShape {
    static constexpr int kBlockM = M, kBlockN = N, kNWarps = W, kMinBlocks = B;
};
#ifndef FLASH_TILE_D64
#define FLASH_TILE_D64 128, 64, 4, 2
#endif
#ifndef FLASH_TILE_D128
#define FLASH_TILE_D128 128, 32, 4, 2
#endif
template <int kHeadDim> struct Tile;
template <> struct Tile<64> : TileShape<FLASH_TILE_D64> {};
template <> struct Tile<128> : TileShape<FLASH_TILE_D128> {};

/* Element offset of (row, col) in a [rows, kHeadDim] shared-memory tile, swizzled: the 16-byte
 * chunk col / 8 of row `row` is stored at chunk (col / 8) ^ (row % 8). Any 8 consecutive rows
 * then hold a given chunk in 8 different bank groups. Callers only ever access whole 4- or
 * 16-byte pieces inside one chunk, which the XOR keeps contiguous. */
template <int kHeadDim>
__device__ __forceinline__ int smem_idx(int row, int col) {
    static_assert(kHeadDim % 64 == 0, "a row holds a multiple of 8 chunks, so the XOR stays in the row");
    return row * kHeadDim + ((col / 8) ^ (row % 8)) * 8 + col % 8;
}

/* ---------------------------------------------------------------------------------------------
 * The kernel
 * ------------------------------------------------------------------------------------------- */

/* The copy plan of a [kRows, kHeadDim] tile. Thread tid copies chunk tid % kChunksPerRow of rows
 * tid / kChunksPerRow + i * kRowStep. kRowStep is a multiple of 8, so all of a thread's rows share
 * one swizzle XOR: its shared-memory offsets are one base plus compile-time steps, and its global
 * offsets one base plus multiples of one stride. Three registers instead of an array of offsets,
 * and they do not change from one K/V tile to the next. */
template <int kHeadDim, int kRows, int kNThreads>
struct CopyPlan {
    static constexpr int kChunksPerRow = kHeadDim / 8;
    static constexpr int kRowStep = kNThreads / kChunksPerRow;
    static constexpr int kPerThread = kRows / kRowStep;
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
    plan.smem_off = smem_idx<kHeadDim>(row, col) * elem_bytes;
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
        cp_async_16(smem_base + plan.smem_off + i * plan.kRowStep * kHeadDim * (int)sizeof(T),
                    valid ? src + i * plan.kRowStep * row_stride : gmem + plan.gmem_off % kHeadDim, valid ? 16 : 0);
    }
}

/* Per-lane ldmatrix bases. The lane's rows in every 16x16 (or 2 x n8) sub-tile are congruent to
 * lane % 8 modulo 8, so its swizzle XOR is one fixed 3-bit value x; the chunk it reads at logical
 * chunk 2j + (its column half) is then ((2j) ^ x) in the low three bits. Four bases, one for each
 * j % 4, leave only compile-time immediates for the loop: base[j % 4] + (j / 4) * 128 bytes. */
template <int kHeadDim>
struct LdsmBases {
    uint32_t b[4];
};

/* For tiles read as A (Q) or with .trans (V): lane reads row r0 + lane % 16, chunk c + lane / 16. */
template <int kHeadDim>
__device__ __forceinline__ LdsmBases<kHeadDim> ldsm_bases_a(uint32_t tile, int lane) {
    LdsmBases<kHeadDim> bases;
    const int row = lane % 16, x = (lane / 16) ^ (lane % 8);
#pragma unroll
    for (int j = 0; j < 4; ++j) bases.b[j] = tile + (row * kHeadDim + (((2 * j) ^ x) * 8)) * 2;
    return bases;
}

/* For K read as two n8 B fragments: lane reads key row lane % 8 + (lane / 16) * 8, chunk half
 * (lane / 8) % 2. */
template <int kHeadDim>
__device__ __forceinline__ LdsmBases<kHeadDim> ldsm_bases_b(uint32_t tile, int lane) {
    LdsmBases<kHeadDim> bases;
    const int row = lane % 8 + (lane / 16) * 8, x = ((lane / 8) % 2) ^ (lane % 8);
#pragma unroll
    for (int j = 0; j < 4; ++j) bases.b[j] = tile + (row * kHeadDim + (((2 * j) ^ x) * 8)) * 2;
    return bases;
}

/* The address of the sub-tile at (row, 16-bit column col), both multiples of 16: col / 16 = j. */
template <int kHeadDim>
__device__ __forceinline__ uint32_t ldsm_at(const LdsmBases<kHeadDim> &bases, int row, int col) {
    const int j = col / 16;
    return bases.b[j % 4] + (row * kHeadDim + (j / 4) * 64) * 2;
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
        cp_async_16(smem_base + plan.smem_off + i * plan.kRowStep * kHeadDim * (int)sizeof(T), src, 16);
        src += plan.kRowStep * row_stride;
    }
}

/* S = Q_i K^T for one K tile: [kMTiles * 16, kNTilesS * 8] per warp. The Q fragments of a k16 slice
 * are read once per slice, and each ldmatrix.x4 of K (two n8 tiles) feeds the mma of every m-tile.
 * The loops are fully unrolled: the compiler hoists the loads ahead of the mma that need them.
 * k_rows is the K tile's first row in shared memory (its slot). */
template <typename T, int kHeadDim, int kMTiles, int kNTilesS>
__device__ __forceinline__ void qk_tile(float (&acc_s)[kMTiles][kNTilesS][4], const LdsmBases<kHeadDim> &q_bases,
                                        const LdsmBases<kHeadDim> &k_bases, int warp_row0, int k_rows) {
    constexpr int kKSteps = kHeadDim / 16, kPairs = kNTilesS / 2;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_s[mt][nt][e] = 0.0f;
    uint32_t q_frag[kMTiles][4], k_frag[4];
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) ldmatrix_x4(q_frag[mt], ldsm_at<kHeadDim>(q_bases, warp_row0 + 16 * mt, kk * 16));
#pragma unroll
        for (int np = 0; np < kPairs; ++np) {
            ldmatrix_x4(k_frag, ldsm_at<kHeadDim>(k_bases, k_rows + np * 16, kk * 16));
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
                mma_m16n8k16(acc_s[mt][2 * np], q_frag[mt], &k_frag[0], T());
                mma_m16n8k16(acc_s[mt][2 * np + 1], q_frag[mt], &k_frag[2], T());
            }
        }
    }
}

/* Masks the keys of a tile starting at key col0 that lie past the end of the sequence or (causal)
 * past the diagonal of the thread's rows. Only boundary tiles come here, so the thread's row and
 * column are recomputed from threadIdx rather than kept in registers through the whole loop. */
template <int kMTiles, int kNTilesS>
__device__ __forceinline__ void mask_tile(float (&acc_s)[kMTiles][kNTilesS][4], int row0, int col0,
                                          const flash_problem &p, int diag) {
    const int lane = threadIdx.x % 32, t = lane % 4;
    const int row_g = row0 + (threadIdx.x / 32) * kMTiles * 16 + lane / 4;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = col0 + nt * 8 + 2 * t + (e & 1);
                if (col >= p.seqlen_k || (p.causal && col > row_g + 16 * mt + 8 * (e >> 1) + diag)) acc_s[mt][nt][e] = -INFINITY;
            }
}

/* Online softmax of one S tile, FlashAttention-2 form: updates the running max m and sum l of
 * each row, returns the rescale factor alpha of the O rows and P = exp2(scale_log2 (S - m)) packed
 * into A fragments: the accumulators of S tiles 2kk and 2kk+1 hold keys 16kk .. 16kk+15 of rows g
 * and g+8 in exactly the places the A fragment of k16 slice kk wants them. A row's scores are
 * spread over the 4 lanes of a quad; the max must agree across the quad every tile (all four
 * lanes subtract the same m), the sum need not until the end. */
template <typename T, int kMTiles, int kNTilesS>
__device__ __forceinline__ void softmax_tile(float (&acc_s)[kMTiles][kNTilesS][4], float (&m)[kMTiles][2], float (&l)[kMTiles][2],
                                             float (&alpha)[kMTiles][2], uint32_t (&p_frag)[kMTiles][kNTilesS / 2][4],
                                             float scale_log2) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
        /* Two partial maxima per row (even and odd key columns): chains half as long. */
        float m_part[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) m_part[e >> 1][e & 1] = fmaxf(m_part[e >> 1][e & 1], acc_s[mt][nt][e]);
        float m_tile[2] = {fmaxf(m_part[0][0], m_part[0][1]), fmaxf(m_part[1][0], m_part[1][1])};
        float m_scaled[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 1));
            m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 2));
            const float m_new = fmaxf(m[mt][h], m_tile[h]);
            /* -inf guard: a row that has seen only masked keys keeps m = -inf, and
             * 2^(-inf - (-inf)) would be NaN. Subtracting 0 instead gives 2^(-inf) = 0, which
             * is also alpha on the first tile (m = -inf): O and l start from zero. */
            m_scaled[h] = (m_new == -INFINITY) ? 0.0f : m_new * scale_log2;
            alpha[mt][h] = fast_exp2(fmaf(m[mt][h], scale_log2, -m_scaled[h]));
            m[mt][h] = m_new;
        }
        float p_sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};  // likewise two partial sums per row
        /* fmaf, not s * scale_log2 - m: one rounding on every path. Written apart, the compiler
         * may fuse the two for some elements and not others (where a mask's select sits
         * between them), and a row's P would then depend on whether its key tile took the mask. */
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                acc_s[mt][nt][e] = fast_exp2(fmaf(acc_s[mt][nt][e], scale_log2, -m_scaled[e >> 1]));
                p_sum[e >> 1][e & 1] += acc_s[mt][nt][e];
            }
#pragma unroll
        for (int h = 0; h < 2; ++h) l[mt][h] = l[mt][h] * alpha[mt][h] + (p_sum[h][0] + p_sum[h][1]);
#pragma unroll
        for (int kk = 0; kk < kNTilesS / 2; ++kk) {
            p_frag[mt][kk][0] = pack_float2(acc_s[mt][2 * kk][0], acc_s[mt][2 * kk][1], T());
            p_frag[mt][kk][1] = pack_float2(acc_s[mt][2 * kk][2], acc_s[mt][2 * kk][3], T());
            p_frag[mt][kk][2] = pack_float2(acc_s[mt][2 * kk + 1][0], acc_s[mt][2 * kk + 1][1], T());
            p_frag[mt][kk][3] = pack_float2(acc_s[mt][2 * kk + 1][2], acc_s[mt][2 * kk + 1][3], T());
        }
    }
}

/* O *= alpha, row by row. */
template <int kHeadDim, int kMTiles>
__device__ __forceinline__ void rescale_o(float (&acc_o)[kMTiles][kHeadDim / 8][4], const float (&alpha)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kHeadDim / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_o[mt][nt][e] *= alpha[mt][e >> 1];
}

/* O += P V for one V tile whose first row is v_rows (in Q's swizzled row space). V is the B
 * operand read transposed by ldmatrix.trans, two n8 tiles of O per instruction, each feeding
 * every m-tile. */
template <typename T, int kHeadDim, int kMTiles, int kKStepsPV>
__device__ __forceinline__ void pv_tile(float (&acc_o)[kMTiles][kHeadDim / 8][4], const uint32_t (&p_frag)[kMTiles][kKStepsPV][4],
                                        const LdsmBases<kHeadDim> &q_bases, int v_rows) {
    constexpr int kNTilesO = kHeadDim / 8, kPairs = kNTilesO / 2;
    uint32_t v_frag[4];
#pragma unroll
    for (int kk = 0; kk < kKStepsPV; ++kk)
#pragma unroll
        for (int np = 0; np < kPairs; ++np) {
            ldmatrix_x4_trans(v_frag, ldsm_at<kHeadDim>(q_bases, v_rows + kk * 16, np * 16));
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
                mma_m16n8k16(acc_o[mt][2 * np], p_frag[mt][kk], &v_frag[0], T());
                mma_m16n8k16(acc_o[mt][2 * np + 1], p_frag[mt][kk], &v_frag[2], T());
            }
        }
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

/* kCopyTiles K/V tiles are copied per barrier (1 or 2; the launch picks the larger one whose
 * shared memory fits kMinBlocks blocks on the SM). */
template <typename T, int kHeadDim, int kCopyTiles>
__global__ void __launch_bounds__(Tile<kHeadDim>::kNWarps * 32, Tile<kHeadDim>::kMinBlocks)
flash_fwd_kernel(const flash_problem p) {
    constexpr int kBlockM = Tile<kHeadDim>::kBlockM;  // query rows per block (Q_i)
    constexpr int kBlockN = Tile<kHeadDim>::kBlockN;  // keys per tile (K_j, V_j)
    constexpr int kNWarps = Tile<kHeadDim>::kNWarps;
    constexpr int kNThreads = kNWarps * 32;
    constexpr int kRowsPerWarp = kBlockM / kNWarps;
    constexpr int kMTiles = kRowsPerWarp / 16;  // m16 row tiles per warp
    static_assert(kRowsPerWarp % 16 == 0, "each warp owns whole m16 row tiles of Q_i, S and O");
    static_assert(kBlockN % 16 == 0, "K_j splits into n8 tiles for S and k16 slices for P V");
    constexpr int kNTilesS = kBlockN / 8;    // n8 tiles of S across the keys of K_j
    constexpr int kKStepsPV = kBlockN / 16;  // k16 slices of the keys in P V
    constexpr int kNTilesO = kHeadDim / 8;   // n8 tiles of O across the head dimension

    extern __shared__ __align__(128) unsigned char smem[];
    /* A ring of 2 kCopyTiles K/V slots: K_j and V_j live in slot j % kSlots. Copies go kCopyTiles
     * tiles at a time, issued kCopyTiles tiles ahead of their use, so one barrier serves
     * kCopyTiles tiles (see the main loop). */
    static_assert(kCopyTiles == 1 || kCopyTiles == 2, "one or two tiles per copy");
    constexpr int kSlots = 2 * kCopyTiles;
    T *sQ = reinterpret_cast<T *>(smem);  // Q_i  [kBlockM, kHeadDim], read every tile; later O
    T *sK = sQ + kBlockM * kHeadDim;      // K_j  [kSlots][kBlockN, kHeadDim], slot b at + 2 b kBlockN rows
    T *sV = sK + kBlockN * kHeadDim;      // V_j  [kSlots][kBlockN, kHeadDim], interleaved with K
    constexpr uint32_t kSlotBytes = 2 * kBlockN * kHeadDim * sizeof(T);
    const uint32_t sQ_u32 = smem_u32(sQ), sK_u32 = smem_u32(sK), sV_u32 = smem_u32(sV);

    /* Causal query tiles further down have more keys to visit: launch those first so that the
     * last wave is made of short blocks. */
    const int m_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int head = blockIdx.y, batch = blockIdx.z;
    const int head_kv = head / (p.heads_q / p.heads_kv);  // GQA: heads_q / heads_kv query heads share one K/V head
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
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

    /* The two rows this thread holds in every accumulator of m-tile mt: c[0..1] in row g,
     * c[2..3] in g + 8. */
    const int warp_row0 = warp * kRowsPerWarp;
    const int row_g = row0 + warp_row0 + g;  // rows row_g + 16 mt + 8 h

    const CopyPlan<kHeadDim, kBlockM, kNThreads> q_plan = make_copy_plan<kHeadDim, kBlockM, kNThreads>(q_row_stride, sizeof(T));
    CopyPlan<kHeadDim, kBlockN, kNThreads> kv_plan = make_copy_plan<kHeadDim, kBlockN, kNThreads>(kv_row_stride, sizeof(T));
    /* Keep the K/V plan's shared-memory offset in a register for the whole loop. Left to itself,
     * ptxas may recompute it from threadIdx at every copy (an S2R and a dozen integer instructions
     * per tile copied), which costs more issue slots than the register saves. */
    asm("" : "+r"(kv_plan.smem_off));
    /* sQ, sK and sV are one [kBlockM + 2 kSlots kBlockN, kHeadDim] array, and kBlockM, kBlockN are
     * multiples of 8: V's rows continue Q's with the same swizzle, so V is addressed from Q's
     * bases at row offset kVRow0 (+ the slot's rows), which saves four registers. */
    constexpr int kVRow0 = kBlockM + kBlockN;
    const LdsmBases<kHeadDim> q_bases = ldsm_bases_a<kHeadDim>(sQ_u32, lane);
    const LdsmBases<kHeadDim> k_bases = ldsm_bases_b<kHeadDim>(sK_u32, lane);

    /* Software pipeline: the P V product of tile j + 1 runs during the softmax of tile j, so each
     * warp has independent mma to issue while its max, exp2 and sums run. V therefore trails K by
     * one tile: the loop's iteration j reads K_j and V_{j+1}. The prologue copies what the first
     * copy-stage's iterations read besides the copy inside the loop: K_{n-1} .. K_{n-kCopyTiles}
     * and V_{n-1} .. V_{n-kCopyTiles+1}. Only tile n - 1 may end past the sequence. */
    load_tile<T, kHeadDim, kBlockM, kNThreads>(sQ_u32, q + row0 * q_row_stride, q_plan, q_row_stride, p.seqlen_q - row0);
    const int64_t tile_step = (int64_t)kBlockN * kv_row_stride;
    const int col_last = (n_blocks - 1) * kBlockN;
    const uint32_t slot_last = ((n_blocks - 1) % kSlots) * kSlotBytes;
    load_tile<T, kHeadDim, kBlockN, kNThreads>(sK_u32 + slot_last, k + col_last * kv_row_stride, kv_plan, kv_row_stride,
                                               p.seqlen_k - col_last);
    if (kCopyTiles == 2)
        load_tile<T, kHeadDim, kBlockN, kNThreads>(sV_u32 + slot_last, v + col_last * kv_row_stride, kv_plan, kv_row_stride,
                                                   p.seqlen_k - col_last);
    if (kCopyTiles == 2 && n_blocks > 1)
        load_full_tile<T, kHeadDim, kBlockN, kNThreads>(sK_u32 + ((n_blocks - 2) % kSlots) * kSlotBytes,
                                                        k + kv_plan.gmem_off + (int64_t)(n_blocks - 2) * tile_step, kv_plan, kv_row_stride);
    cp_async_commit();
    /* This thread's first chunk of the first K tile of the next copy (tile n_block - kCopyTiles),
     * in elements from k; V's tiles are found from it, one tile_step per tile. */
    int64_t kv_off = kv_plan.gmem_off + (int64_t)(n_blocks - 1 - kCopyTiles) * tile_step;

    /* log2(e) folded into the scale: exp(scale * x) = 2^(scale_log2 * x). */
    const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
    float m[kMTiles][2];             // running max of the raw (unscaled) scores of rows g, g + 8
    float l[kMTiles][2];             // this thread's part of the running sum of exp(scale * (s - m))
    float acc_o[kMTiles][kNTilesO][4];  // O, unnormalised: [m tile][head-dim n8 tile][fragment register]
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            m[mt][h] = -INFINITY;
            l[mt][h] = 0.0f;
        }
#pragma unroll
        for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_o[mt][nt][e] = 0.0f;
    }
    /* P (as A fragments) and alpha of the tile whose P V is still to come. */
    uint32_t p_frag[kMTiles][kKStepsPV][4];
    float alpha[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) alpha[mt][0] = alpha[mt][1] = 1.0f;

    for (int n_block = n_blocks - 1; n_block >= 0; --n_block) {
        const int col0 = n_block * kBlockN;
        /* A copy stage starts every kCopyTiles iterations, from the first. Its tiles K_j ..
         * K_{j-kCopyTiles+1} and V_{j+1} .. V_{j-kCopyTiles+2} (and Q_i, the first time) must have
         * landed; the barrier also means every warp is done with the previous stage's tiles, whose
         * slots now take the next stage's: K_{j-kCopyTiles} .. K_{j-2 kCopyTiles+1} and
         * V_{j-kCopyTiles+1} .. V_{j-2 kCopyTiles+2}. Those have a whole stage to land. */
        if ((n_blocks - 1 - n_block) % kCopyTiles == 0) {
            cp_async_wait<0>();
            __syncthreads();
#pragma unroll
            for (int i = 0; i < kCopyTiles; ++i) {
                const int j = n_block - kCopyTiles - i;
                if (j >= 0)
                    load_full_tile<T, kHeadDim, kBlockN, kNThreads>(sK_u32 + (j % kSlots) * kSlotBytes, k + kv_off - i * tile_step,
                                                                    kv_plan, kv_row_stride);
            }
#pragma unroll
            for (int i = 0; i < kCopyTiles; ++i) {
                const int j = n_block - kCopyTiles + 1 - i;
                const T *src = v + kv_off + (1 - i) * tile_step;
                if (kCopyTiles == 1 && j == n_blocks - 1)  // the last V tile may end past the sequence
                    load_tile<T, kHeadDim, kBlockN, kNThreads>(sV_u32 + (j % kSlots) * kSlotBytes, v + j * kBlockN * kv_row_stride,
                                                               kv_plan, kv_row_stride, p.seqlen_k - j * kBlockN);
                else if (j >= 0)
                    load_full_tile<T, kHeadDim, kBlockN, kNThreads>(sV_u32 + (j % kSlots) * kSlotBytes, src, kv_plan, kv_row_stride);
            }
            kv_off -= kCopyTiles * tile_step;
            cp_async_commit();
        }

        /* O *= alpha of tile j + 1 before its P V is added below (on the first tile, alpha = 1). */
        rescale_o<kHeadDim>(acc_o, alpha);
        float acc_s[kMTiles][kNTilesS][4];
        qk_tile<T, kHeadDim>(acc_s, q_bases, k_bases, warp_row0, (n_block % kSlots) * 2 * kBlockN);
        if (n_block >= n_masked) mask_tile(acc_s, row0, col0, p, diag);

        if (n_block == n_blocks - 1) {
            softmax_tile<T>(acc_s, m, l, alpha, p_frag, scale_log2);
        } else {
            /* P V of tile j + 1 and the softmax of tile j are independent and in one basic block,
             * so the compiler is free to interleave their instructions. */
            uint32_t p_next[kMTiles][kKStepsPV][4];
            softmax_tile<T>(acc_s, m, l, alpha, p_next, scale_log2);
            pv_tile<T, kHeadDim>(acc_o, p_frag, q_bases, kVRow0 + ((n_block + 1) % kSlots) * 2 * kBlockN);
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
                for (int kk = 0; kk < kKStepsPV; ++kk)
#pragma unroll
                    for (int r = 0; r < 4; ++r) p_frag[mt][kk][r] = p_next[mt][kk][r];
        }
    }
    /* The last P V: V_0 was in the last copy, which no barrier has waited for yet. */
    cp_async_wait<0>();
    __syncthreads();
    rescale_o<kHeadDim>(acc_o, alpha);
    pv_tile<T, kHeadDim>(acc_o, p_frag, q_bases, kVRow0);

    /* Epilogue: O = acc_o / l, after the one quad reduction of l. A row that saw no key at all
     * (causal, seqlen_q > seqlen_k) has l = 0: FlashAttention-2 writes O = 0 and LSE = +inf. */
    float inv_l[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            l[mt][h] += __shfl_xor_sync(0xffffffffu, l[mt][h], 1);
            l[mt][h] += __shfl_xor_sync(0xffffffffu, l[mt][h], 2);
            inv_l[mt][h] = (l[mt][h] > 0.0f) ? 1.0f / l[mt][h] : 0.0f;
        }
    /* Stage this warp's rows of O in sQ: the warp only ever read its own rows of Q_i, and its last
     * read of them (the last Q K^T) is behind it, so no other warp can still need them. */
    T *sO = sQ;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<uint32_t *>(&sO[smem_idx<kHeadDim>(warp_row0 + 16 * mt + g + 8 * h, nt * 8 + 2 * t)]) =
                    pack_float2(acc_o[mt][nt][2 * h] * inv_l[mt][h], acc_o[mt][nt][2 * h + 1] * inv_l[mt][h], T());
    /* The copy-out below reads rows other lanes of this warp wrote. */
    __syncwarp();
    constexpr int kChunksPerRow = kHeadDim * (int)sizeof(T) / 16;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp * kChunksPerRow / 32; ++i) {
        const int c = lane + i * 32;
        const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
        if (row0 + warp_row0 + r < p.seqlen_q)
            *reinterpret_cast<uint4 *>(&o[(row0 + warp_row0 + r) * q_row_stride + col]) =
                *reinterpret_cast<const uint4 *>(&sO[smem_idx<kHeadDim>(warp_row0 + r, col)]);
    }
    if (p.lse && t == 0) {
        float *lse = p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q;
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                if (row_g + 16 * mt + 8 * h < p.seqlen_q)
                    lse[row_g + 16 * mt + 8 * h] = (l[mt][h] > 0.0f) ? m[mt][h] * p.softmax_scale + logf(l[mt][h]) : INFINITY;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Launch
 * ------------------------------------------------------------------------------------------- */

/* Shared memory of one block: Q_i and 2 kCopyTiles K/V slots. */
template <typename T, int kHeadDim, int kCopyTiles>
constexpr int smem_bytes() {
    return (Tile<kHeadDim>::kBlockM + 4 * kCopyTiles * Tile<kHeadDim>::kBlockN) * kHeadDim * (int)sizeof(T);
}

/* Two facts a launch needs once per device: how many tiles per copy (below), and that the kernel
 * may use more than 48 KiB of shared memory. The library can be called from several host threads
 * at once, so each is an atomic, 0 until known: a thread that reads 0 does the (idempotent) work
 * itself and publishes the result with a release store; a thread that reads it with an acquire
 * load knows the work is done. After the first call of a device that is two loads per call, so
 * nothing is added to the caller's timed launch. Devices past kMaxDevices ask every time. */
constexpr int kMaxDevices = 64;

template <typename T, int kHeadDim, int kCopyTiles>
static int launch(const flash_problem *p, cudaStream_t stream, int device) {
    constexpr int kBlockM = Tile<kHeadDim>::kBlockM;
    constexpr int kSmemBytes = smem_bytes<T, kHeadDim, kCopyTiles>();
    /* Above 48 KiB a block must opt in to dynamic shared memory, once per instantiation and device.
     * Doing it on every call would put a host API call between the caller's start event and the
     * kernel. */
    static std::atomic<bool> opted_in[kMaxDevices];
    const bool cached = device < kMaxDevices;
    if (kSmemBytes > 48 * 1024 && !(cached && opted_in[device].load(std::memory_order_acquire))) {
        const cudaError_t err = cudaFuncSetAttribute(flash_fwd_kernel<T, kHeadDim, kCopyTiles>,
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (err != cudaSuccess)
            return flash_set_error(FLASH_E_CUDA, "kernel08_final: %d bytes of shared memory refused: %s", kSmemBytes,
                                   cudaGetErrorString(err));
        if (cached) opted_in[device].store(true, std::memory_order_release);
    }
    const dim3 grid((p->seqlen_q + kBlockM - 1) / kBlockM, p->heads_q, p->batch);
    flash_fwd_kernel<T, kHeadDim, kCopyTiles><<<grid, Tile<kHeadDim>::kNWarps * 32, kSmemBytes, stream>>>(*p);
    return flash_launch_status("kernel08_final");
}

/* Two tiles per copy halve the barriers but double the K/V slots: 96 KiB per block at D = 128.
 * Two such blocks fit a Hopper SM (228 KiB of shared memory), not an A100's (164 KiB) or an RTX
 * 30xx/40xx's (100 KiB), where two tiles per copy would cost a block per SM; those get one tile
 * per copy. The choice is made once per device, from its shared memory per SM. FLASH_COPY_TILES
 * forces one (tests run the Ampere path on Hopper). */
template <typename T, int kHeadDim>
static int launch(const flash_problem *p, cudaStream_t stream) {
    static std::atomic<int> copy_tiles[kMaxDevices];  // 0 until known
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return flash_set_error(FLASH_E_CUDA, "kernel08_final: no current device: %s", cudaGetErrorString(err));
    const bool cached = device < kMaxDevices;
    int tiles = cached ? copy_tiles[device].load(std::memory_order_acquire) : 0;
    if (tiles == 0) {
#ifdef FLASH_COPY_TILES
        tiles = FLASH_COPY_TILES;
#else
        int smem_per_sm = 0;
        err = cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
        if (err != cudaSuccess)
            return flash_set_error(FLASH_E_CUDA, "kernel08_final: shared memory per SM unknown: %s", cudaGetErrorString(err));
        /* The driver reserves 1 KiB of shared memory per block. */
        tiles = Tile<kHeadDim>::kMinBlocks * (smem_bytes<T, kHeadDim, 2>() + 1024) <= smem_per_sm ? 2 : 1;
#endif
        if (cached) copy_tiles[device].store(tiles, std::memory_order_release);
    }
    if (tiles == 2) return launch<T, kHeadDim, 2>(p, stream, device);
    return launch<T, kHeadDim, 1>(p, stream, device);
}

extern "C" int flash_forward_kernel08(const flash_problem *p, cudaStream_t stream) {
    if (p->dtype == FLASH_BF16)
        return p->head_dim == 64 ? launch<__nv_bfloat16, 64>(p, stream) : launch<__nv_bfloat16, 128>(p, stream);
    return p->head_dim == 64 ? launch<__half, 64>(p, stream) : launch<__half, 128>(p, stream);
}
