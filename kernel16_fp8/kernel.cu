/*
 * Stage 16 - fp8: q, k and v in e4m3, through the tensor cores' 8-bit instructions.
 *
 * Technique: FlashAttention-3's third idea, low precision (docs/16_fp8.md), on top of stage 15: q, k
 *            and v in e4m3 with a descale factor each, O in bf16. wgmma m64nNk32 multiplies 8-bit
 *            operands at twice the bf16 rate, but reads both of them K-major only, so P V needs V
 *            with its keys along the rows: the producer warpgroup's warps 1-3 transpose every V
 *            tile in shared memory (ldmatrix.trans, byte permutes, stmatrix) into V^T, in the key
 *            order in which P, packed from S's accumulators to e4m3, lands in the 8-bit A fragment,
 *            so that neither side moves a value between threads. P is 2^8 times P (e4m3's normal
 *            range), the descales join the softmax scale (q, k) and 1/l (v).
 * Changed:   the kernel takes its dtype's path (Path16, stage 15's, or PathE4m3) and its tile
 *            shape as template parameters, and asks the path for everything that differs: row
 *            bytes, the k32 steps of qk_tile and pv_tile, P's packing (pack_p_e4m3), the shift of P,
 *            the descales, O in bf16, and for e4m3 a V^T tile per K/V slot with barriers of its own
 *            and the transposing warps (transpose_v_tiles), which read the producer's messages.
 *            e4m3 has tile shapes of its own: three consumers (192 query rows) past 1024 keys, with
 *            96-key tiles at head_dim 128 and 160 at 64 (128 causal), no cluster; and since e4m3
 *            tiles leave the warps' instructions the limit, O's rescale is skipped where no row's
 *            max grew. The entry point flash_forward_fp8_kernel16 takes the descales.
 * Bottleneck: the consumers' softmax per key tile, now against half the tensor-core time per tile,
 *            in more instructions per key than FlashAttention-3's loop (P's packing, the slots'
 *            arithmetic; docs/16: the profile beside FlashAttention-3's).
 * Measured:  NVIDIA H200, B16 H16 S4096 D128 bf16, median of 4 alternating rounds (make rounds,
 *            commit 264183d): 604.5 TFLOP/s, 0.96x FA3, 1.00x stage 15; causal 541.2 TFLOP/s, 0.93x
 *            FA3, 0.98x stage 15. In e4m3: 824.9 TFLOP/s, 0.97x FA3 e4m3, 1.35x stage 15 bf16;
 *            causal 728.7 TFLOP/s, 0.96x FA3 e4m3, 1.33x stage 15 bf16.
 * Needs:     sm_90a: a Hopper GPU (H100, H200); wgmma, setmaxnreg and multicast exist nowhere else.
 * Run:       make kernel16 && ./run --dtype e4m3
 * Read:      docs/16_fp8.md; the PTX ISA, "wgmma.mma_async" (the .e4m3 shapes and their register
 *            fragments), "cvt" (.e4m3x2) and "stmatrix"; §3.3 of the FlashAttention-3 paper.
 */
#include "flash_counter.h"
#include "flash_internal.h"
#include "flash_tma.h"
#include "hopper.cuh"
#include "ptx.cuh"

#include <limits.h>
#include <math.h>
#include <stdint.h>

#include <atomic>

/* ---------------------------------------------------------------------------------------------
 * Tile configuration
 * ------------------------------------------------------------------------------------------- */

/* kBlockM query rows (64 per consumer warpgroup), kBlockN keys per tile, kNConsumers consumer
 * warpgroups (plus the producer's), kConsumerRegs registers per consumer thread after setmaxnreg,
 * kStages K/V slots in the ring, kMinBlocks blocks per SM (the register split shares the SM's
 * file among them), kCluster blocks per cluster sharing each K/V tile (1: no cluster). The macros
 * let a build try other shapes (make tune K=15). */
template <int M, int N, int C, int R, int S, int B, int K>
struct TileShape {
    static constexpr int kBlockM = M, kBlockN = N, kNConsumers = C, kConsumerRegs = R, kStages = S, kMinBlocks = B, kCluster = K;
};
/* Clusters of two at head_dim 128 without a mask, as in stage 14. At head_dim 64, three consumers
 * of 160 registers each. */
#ifndef FLASH_TILE_D64
#define FLASH_TILE_D64 192, 128, 3, 160, 2, 1, 1
#endif
#ifndef FLASH_TILE_D128
#define FLASH_TILE_D128 128, 128, 2, 232, 2, 1, 2
#endif
/* The causal kernels are instantiations of their own (the mask and the tile order are compile-time
 * there), so they can take tiles of their own; and no cluster: neighbouring causal query tiles
 * visit different numbers of key tiles, and the tile counter hands tiles to one block at a time. */
#ifndef FLASH_TILE_D64_CAUSAL
#define FLASH_TILE_D64_CAUSAL 192, 128, 3, 160, 2, 1, 1
#endif
#ifndef FLASH_TILE_D128_CAUSAL
#define FLASH_TILE_D128_CAUSAL 128, 128, 2, 232, 2, 1, 1
#endif
/* Short causal sequences at head_dim 64 (seqlen_q up to kShortCausal) take 128 query rows and
 * two consumers instead of 192 and three. Rows that do not divide the sequence (1k is 5.3 tiles of
 * 192) are paid for in the grid's shortest tile (tile_work), but at 512 and 1k three consumers
 * measure slower than two: the spare rows are a larger share of fewer, shorter tiles. From 2k on a
 * third consumer is faster (docs/15). */
#ifndef FLASH_TILE_D64_CAUSAL_SHORT
#define FLASH_TILE_D64_CAUSAL_SHORT 128, 128, 2, 232, 2, 1, 1
#endif
constexpr int kShortCausal = 1024;
template <int kHeadDim, bool kCausal, bool kShort> struct Tile;
template <> struct Tile<64, false, false> : TileShape<FLASH_TILE_D64> {};
template <> struct Tile<128, false, false> : TileShape<FLASH_TILE_D128> {};
template <> struct Tile<64, true, false> : TileShape<FLASH_TILE_D64_CAUSAL> {};
template <> struct Tile<128, true, false> : TileShape<FLASH_TILE_D128_CAUSAL> {};
template <> struct Tile<64, true, true> : TileShape<FLASH_TILE_D64_CAUSAL_SHORT> {};
/* e4m3 inputs: no cluster, causal or not, the producer warpgroup's other three warps transposing
 * V, and past kFewKeysFp8 keys 192 query rows for three consumers of 160 registers, as in bf16
 * at head_dim 64. With e4m3 a tile's GEMMs take half the tensor cores' time of bf16's, and the
 * softmax, whose instructions wait on each other's results, is what each consumer warpgroup's
 * turn waits for: a third warpgroup gives each scheduler a third consumer warp to issue from while
 * the other two wait. At head_dim 128 its registers hold an S of 96 keys beside O's 64 by 128; at
 * head_dim 64 an S of 160 keys without a mask (FlashAttention-3's e4m3 shape there), and of 128
 * with one (at 160 ptxas spills the causal loop). Where the keys are few (seqlen_k up to
 * kFewKeysFp8) 128 rows by 128 keys: the spare rows and keys of the last tiles cost more than the
 * larger tiles save (docs/16 measures the shapes). */
#ifndef FLASH_TILE_FP8_D128
#define FLASH_TILE_FP8_D128 192, 96, 3, 160, 2, 1, 1
#endif
#ifndef FLASH_TILE_FP8_D64
#define FLASH_TILE_FP8_D64 192, 160, 3, 160, 2, 1, 1
#endif
#ifndef FLASH_TILE_FP8_D64_CAUSAL
#define FLASH_TILE_FP8_D64_CAUSAL 192, 128, 3, 160, 2, 1, 1
#endif
#ifndef FLASH_TILE_FP8_FEW_KEYS
#define FLASH_TILE_FP8_FEW_KEYS 128, 128, 2, 232, 2, 1, 1
#endif
constexpr int kFewKeysFp8 = 1024;
template <int kHeadDim, bool kCausal, bool kFewKeys> struct TileE4m3;
template <bool kCausal> struct TileE4m3<128, kCausal, false> : TileShape<FLASH_TILE_FP8_D128> {};
template <> struct TileE4m3<64, false, false> : TileShape<FLASH_TILE_FP8_D64> {};
template <> struct TileE4m3<64, true, false> : TileShape<FLASH_TILE_FP8_D64_CAUSAL> {};
template <int kHeadDim, bool kCausal> struct TileE4m3<kHeadDim, kCausal, true> : TileShape<FLASH_TILE_FP8_FEW_KEYS> {};

/* Two Q_i buffers, so that the next query tile's Q_i lands while the consumers still issue their
 * S with this one, and the joint turn never waits for it. */
constexpr int kQBuffers = 2;
/* A block may have 227 KiB of shared memory on sm_90; the kernel's own __shared__ barriers and
 * messages take well under the 1 KiB kept back for them here. */
constexpr int kSmemLimit = 227 * 1024, kStaticSmemBound = 1024;

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

/* Issues the TMA copy of one [kRows, kHeadDim] tile whose first row is sequence position `row` of
 * (head, batch): one box of kRows rows of kRowBytes per column block, each landing kRows * kRowBytes
 * bytes after the one before, which is the layout of smem_idx (16-bit) and of sw128_byte and
 * sw64_byte (e4m3: a single block). Rows past the sequence arrive as zeros. The mbarrier `bar` is
 * told to expect the whole tile's bytes (zeros included) with the one arrival it waits for, so its
 * phase completes when the last box has landed. Called by one thread. */
template <typename T, int kHeadDim, int kRows, int kRowBytes>
__device__ __forceinline__ void load_tile(uint32_t smem_base, const CUtensorMap *map, uint32_t bar, int head, int row, int batch) {
    mbarrier_arrive_expect_tx(bar, kRows * kHeadDim * (int)sizeof(T));
#pragma unroll
    for (int c = 0; c < kHeadDim * (int)sizeof(T) / kRowBytes; ++c)
        tma_load_4d(smem_base + c * kRows * kRowBytes, map, bar, c * kRowBytes / (int)sizeof(T), head, row, batch);
}

/* The K or V tile of kRows keys from sequence position `row`, into the slot at smem_base of every
 * block of the cluster: each of the kCluster blocks loads kRows / kCluster of its rows and multicasts
 * them to all, so the tile crosses from L2 once per cluster instead of once per block. Block `rank`'s
 * part lands rank * kRows / kCluster rows into each column block of the slot (a multiple of the
 * 8-row swizzle atom, so each part keeps the slot's layout). Each block's barrier expects the whole
 * tile, its own part and the others' alike, in whatever order they land: the phase completes only
 * once the producer's arrival and all the bytes are in. With kCluster 1 this is load_tile. */
template <typename T, int kHeadDim, int kRows, int kRowBytes, int kCluster>
__device__ __forceinline__ void load_kv_tile(uint32_t smem_base, const CUtensorMap *map, uint32_t bar, int head, int row, int batch,
                                             uint32_t rank) {
    static_assert(kRows % (8 * kCluster) == 0, "each block's part of a K/V tile is whole 8-row atoms");
    static_assert(kCluster == 1 || sizeof(T) == 2, "clusters share 16-bit tiles (e4m3 runs without)");
    constexpr int kPart = kRows / kCluster;
    if constexpr (kCluster == 1) {
        load_tile<T, kHeadDim, kRows, kRowBytes>(smem_base, map, bar, head, row, batch);
    } else {
        mbarrier_arrive_expect_tx(bar, kRows * kHeadDim * 2);
#pragma unroll
        for (int c = 0; c < kHeadDim / 64; ++c)
            tma_load_4d_multicast(smem_base + c * kRows * 128 + rank * kPart * 128, map, bar, (1u << kCluster) - 1, 64 * c, head,
                                  row + (int)rank * kPart, batch);
    }
}

/* A K/V slot released by this warpgroup (one thread): with a cluster, on the empty barrier of every
 * block, since each block's producer fills the slot in all of them. */
template <int kCluster>
__device__ __forceinline__ void release_slot(uint32_t bar) {
    if constexpr (kCluster == 1) {
        mbarrier_arrive(bar);
    } else {
#pragma unroll
        for (int r = 0; r < kCluster; ++r) mbarrier_arrive_cluster(cluster_map(bar, r));
    }
}

/* S = Q_i K_j^T for this warpgroup's 64 rows: one wgmma m64n{kBlockN} per 32 bytes of the head
 * (k16 for 16-bit inputs, k32 for e4m3). q_desc describes the first byte of the warpgroup's rows of
 * Q_i (column block 0), k_desc that of K_j's slot. Step kk reads bytes 32 kk .. 32 kk + 31 of each
 * row: column block 32 kk / kRowBytes (kRows * kRowBytes bytes further), 32 kk % kRowBytes into the
 * row: the descriptor's start address moves, nothing else, so each step's descriptors are the
 * tile's plus a constant (wgmma_desc_advance).
 * Returns with the product in flight; the caller waits. Unlike stage 11 the caller fences
 * (gemm_fence), once for both GEMMs of a turn: a register definition between the two issues (the
 * fence's hold on O) would make ptxas serialise the wgmma. */
template <typename T, int kHeadDim, int kBlockM, int kBlockN, int kRowBytes>
__device__ __forceinline__ void qk_tile(float (&acc_s)[kBlockN / 8][4], uint64_t q_desc, uint64_t k_desc) {
#pragma unroll
    for (int kk = 0; kk < kHeadDim * (int)sizeof(T) / 32; ++kk)
        wgmma_ss(acc_s, wgmma_desc_advance(q_desc, (32 * kk / kRowBytes) * kBlockM * kRowBytes + 32 * kk % kRowBytes),
                 wgmma_desc_advance(k_desc, (32 * kk / kRowBytes) * kBlockN * kRowBytes + 32 * kk % kRowBytes), kk > 0, T());
    wgmma_commit();
}

/* Masks the keys of a tile starting at key col0 that lie past the end of the sequence or (causal)
 * past the diagonal of the thread's rows row_g and row_g + 8. Only boundary tiles come here. A key
 * is masked when it lies past the last key its row sees; counted from the thread's first column,
 * col0 + 2t, that bound is one number per row, so that each element is one comparison of it with a
 * constant (8 nt + (e & 1)) and one select: two instructions an element, where comparing each
 * column with both bounds took three, on the diagonal tile every causal query tile starts with.
 * The causal offset seqlen_k - seqlen_q is read from p here, not held in a register from the
 * kernel's start, which e4m3's consumers (160 registers) cannot spare. */
template <bool kCausal, int kNTilesS>
__device__ __forceinline__ void mask_tile(float (&acc_s)[kNTilesS][4], int row_g, int col0, const flash_problem &p) {
    const int t = threadIdx.x % 4;
    const int diag = p.seqlen_k - p.seqlen_q;
    int last[2];  // the last key rows row_g and row_g + 8 see, counted from col0 + 2t
#pragma unroll
    for (int h = 0; h < 2; ++h) last[h] = (kCausal ? min(p.seqlen_k - 1, row_g + 8 * h + diag) : p.seqlen_k - 1) - col0 - 2 * t;
#pragma unroll
    for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (nt * 8 + (e & 1) > last[e >> 1]) acc_s[nt][e] = -INFINITY;
}

/* Online softmax of one S tile, FlashAttention-2 form: updates the running max m and sum l of
 * each row, returns the rescale factor alpha of the O rows and leaves P = exp2(scale_log2 (S - m)
 * + kPShift) in S's own registers, still in fp32 (the path's shift: 2^8 P for e4m3): pack_p turns
 * it into A fragments later, once the P V that reads the previous tile's fragments has completed,
 * so that one set of fragments is ever live. A row's scores are spread over the 4 lanes of a quad;
 * the max must agree across the quad every tile (all four lanes subtract the same m), the sum need
 * not until the end. */
template <int kPShift, int kNTilesS>
__device__ __forceinline__ void softmax_tile(float (&acc_s)[kNTilesS][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float scale_log2) {
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
        m_scaled[h] = (m_new == -INFINITY) ? 0.0f : m_new * scale_log2 - (float)kPShift;
        /* e4m3: exactly 1 where the max stayed, so that its path can skip rescaling O. */
        alpha[h] = (kPShift != 0 && m_new == m[h]) ? 1.0f : fast_exp2(fmaf(m[h], scale_log2, -(float)kPShift - m_scaled[h]));
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
}

/* P, from S's registers, packed into the A fragments of P V: the accumulators of S tiles 2kk and
 * 2kk+1 hold keys 16kk .. 16kk+15 of rows g and g+8 in exactly the places the A fragment of k16
 * step kk wants them (the wgmma accumulator fragment is mma.sync's, warp by warp). */
template <typename T, int kNTilesS>
__device__ __forceinline__ void pack_p(const float (&acc_s)[kNTilesS][4], uint32_t (&p_frag)[kNTilesS / 2][4]) {
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

/* O += P V_j for this warpgroup's 64 rows: Path::kKStepsPV wgmma m64n{kHeadDim} with A = P from
 * registers and B = the path's operand of V_j, described by v_desc; step kk's descriptor is
 * Path::pv_step(kk) bytes further. Returns with the product in flight: the caller must not touch
 * acc_o or p_frag before wgmma_wait. */
template <typename Path, int kHeadDim>
__device__ __forceinline__ void pv_tile(float (&acc_o)[kHeadDim / 8][4], const uint32_t (&p_frag)[Path::kKStepsPV][4], uint64_t v_desc) {
#pragma unroll
    for (int kk = 0; kk < Path::kKStepsPV; ++kk)
        wgmma_rs(acc_o, p_frag[kk], wgmma_desc_advance(v_desc, Path::pv_step(kk)), 1, typename Path::T());
    wgmma_commit();
}

/* Before a turn's wgmma: the accumulators' and P's last ordinary writes (zeroing, rescaling,
 * packing) are ordered before the tensor core reads them. */
template <int kNTilesS, int kNTilesO>
__device__ __forceinline__ void gemm_fence(float (&acc_s)[kNTilesS][4], float (&acc_o)[kNTilesO][4]) {
    wgmma_hold(acc_s);
    wgmma_hold(acc_o);
    wgmma_fence();
}

/* A query tile whose rows all see no key (causal, seqlen_q - seqlen_k >= kBlockM) has nothing to
 * compute: FlashAttention-2 writes its O rows as zeros and its LSE as +inf, and loads nothing. The
 * consumers write them straight to global memory (thread `thread` of `nthreads`), without the
 * shared-memory staging of O and without a turn. */
template <typename TO, int kHeadDim, int kRows>
__device__ __forceinline__ void store_empty_tile(const flash_problem &p, int batch, int head, int row0, int thread, int nthreads) {
    const int64_t row_stride = (int64_t)p.heads_q * kHeadDim;
    TO *o = (TO *)p.o + (((int64_t)batch * p.seqlen_q + row0) * p.heads_q + head) * kHeadDim;
    const int valid_rows = p.seqlen_q - row0;
    constexpr int kChunksPerRow = kHeadDim * (int)sizeof(TO) / 16;
    for (int c = thread; c < kRows * kChunksPerRow; c += nthreads) {
        const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
        if (row < valid_rows) *reinterpret_cast<uint4 *>(o + row * row_stride + col) = make_uint4(0, 0, 0, 0);
    }
    if (p.lse) {
        float *lse = p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q + row0;
        for (int row = thread; row < min(kRows, valid_rows); row += nthreads) lse[row] = INFINITY;
    }
}

/* Causal tiles are numbered longest first within a group of kCausalHeadGroup (head, batch) pairs:
 * with groups of one, each head's longest tile comes right after the previous head's shortest, and
 * the last heads' longest tiles are handed out last, when nothing is left to run beside them.
 * Larger groups put the longest tiles of several heads first and keep the grid's K/V working set
 * at a group's heads, for the L2. Groups of four measure faster than one on the causal sweep (most
 * at short sequences) and level with or faster than eight (docs/15). */
constexpr int kCausalHeadGroup = 4;

/* One query tile of the work: tile w of num_m * heads_q * batch, query blocks fastest (consecutive
 * tiles share K and V, which the L2 then serves), causal tiles with more keys to visit first
 * (within a group of heads, above), so that the last tiles of the grid are short ones. n_blocks
 * K/V tiles to visit (0: no key at all); from n_masked on they need the mask. */
struct TileWork {
    int m_block, head, batch, row0, n_blocks, n_masked;
};
template <int kBlockM, int kBlockN, bool kCausal>
__device__ __forceinline__ TileWork tile_work(const flash_problem &p, int w, int num_m) {
    TileWork tw;
    int m_rank = w % num_m, hb = w / num_m;
    if (kCausal) {
        const long long per_group = (long long)num_m * kCausalHeadGroup;  // tiles of a whole group
        const int group = (int)(w / per_group), first_hb = group * kCausalHeadGroup;
        const int r = (int)(w - group * per_group);
        const int group_size = min(kCausalHeadGroup, p.heads_q * p.batch - first_hb);  // the last may be short
        m_rank = r / group_size;
        hb = first_hb + r % group_size;
    }
    tw.m_block = kCausal ? num_m - 1 - m_rank : m_rank;
    tw.head = hb % p.heads_q;
    tw.batch = hb / p.heads_q;
    /* Causal tiles end at the end of the sequence. Where the rows do not divide it, the first tile
     * is the one out of step: it starts at row 0 and overlaps the second, and the rows they share
     * are computed twice, to the same result (the keys the second tile visits beyond the first's
     * are all masked for them), and written twice. A causal grid's first tile visits the fewest
     * keys and its last the most, so a tiling whose rows do not divide the sequence (192-row tiles
     * at 2k keys: 10.7 tiles) pays for its spare rows in the shortest tile instead of past the end
     * of the longest. */
    tw.row0 = kCausal ? max(0, p.seqlen_q - (num_m - tw.m_block) * kBlockM) : tw.m_block * kBlockM;
    /* Bottom-right causal: query row i sees key j iff j <= i + (seqlen_k - seqlen_q). The last
     * row of this tile therefore needs keys up to row0 + kBlockM - 1 + diag; tiles past that are
     * wholly masked and never loaded. */
    const int diag = p.seqlen_k - p.seqlen_q;
    int n_end = p.seqlen_k;
    if (kCausal) n_end = min(n_end, max(0, tw.row0 + kBlockM + diag));
    tw.n_blocks = (n_end + kBlockN - 1) / kBlockN;
    /* Tiles from n_masked on hold a key past the end of the sequence, or (causal) a key past the
     * diagonal of this tile's first row; the tiles below it need no mask at all. */
    tw.n_masked = p.seqlen_k / kBlockN;
    if (kCausal) tw.n_masked = min(tw.n_masked, max(0, (tw.row0 + diag + 1) / kBlockN));
    return tw;
}

/* Transposing warp kW's share of a V tile: units kW, kW + kWarps, ... of the kUnits (16 keys by 32
 * head-dim bytes each, kGroups groups of keys per span of head-dim bytes), unrolled, so that each
 * unit's group and span are constants: its addresses are then the lane's own plus a constant. */
template <int kRowBytes, int kHeadDim, int kGroups, int kUnits, int kWarps, int kW>
__device__ __forceinline__ void transpose_share(uint32_t v_tile, uint32_t vt_tile) {
#pragma unroll
    for (int u = kW; u < kUnits; u += kWarps) transpose_v_e4m3<kRowBytes, kHeadDim>(v_tile, vt_tile, u % kGroups, u / kGroups);
}

/* ---------------------------------------------------------------------------------------------
 * The two paths: 16-bit inputs (stage 15's) and e4m3
 * ------------------------------------------------------------------------------------------- */

/* Everything the kernel does differently for e4m3 inputs is a member of its path: the kernel takes
 * Path16 or PathE4m3 as a template parameter and asks it, never which dtype it has. Path16 is
 * stage 15's kernel, member for member. */
template <typename Elem, int kHeadDim, int kBlockN>
struct Path16 {
    using T = Elem;                                   // q, k and v
    using TO = Elem;                                  // O
    static constexpr int kRowBytes = 128;             // a tile row of a column block: 64 elements
    static constexpr int kKStepsPV = kBlockN / 16;    // k16 steps of the keys in P V
    static constexpr int kPShift = 0;                 // P as it is
    static constexpr int kVtBytes = 0;                // P V reads V_j as TMA brought it
    static constexpr int kTransposeWarps = 0;
    __device__ static uint64_t desc_qk(uint32_t smem_addr) { return wgmma_desc_k_major(smem_addr); }
    /* V_j MN-major. Step kk reads keys 16 kk .. 16 kk + 15: two 8-row atoms, 2048 bytes further;
     * the descriptor's LBO steps from head-dim columns 0..63 to 64..127 (kBlockN * 128 bytes), its
     * SBO from the first 8 keys of the step to the next 8. */
    __device__ static uint64_t desc_pv(uint32_t smem_addr) { return wgmma_desc_mn_major(smem_addr, kBlockN); }
    __device__ static constexpr uint32_t pv_step(int kk) { return kk * 2048; }
    /* P, from S's registers, packed into the A fragments of P V: the accumulators of S tiles 2kk
     * and 2kk+1 hold keys 16kk .. 16kk+15 of rows g and g+8 in exactly the places the A fragment of
     * k16 step kk wants them (the wgmma accumulator fragment is mma.sync's, warp by warp). */
    template <int kNTilesS>
    __device__ static void pack_p(const float (&acc_s)[kNTilesS][4], uint32_t (&p_frag)[kKStepsPV][4]) {
#pragma unroll
        for (int kk = 0; kk < kKStepsPV; ++kk) {
            p_frag[kk][0] = pack_float2(acc_s[2 * kk][0], acc_s[2 * kk][1], T());
            p_frag[kk][1] = pack_float2(acc_s[2 * kk][2], acc_s[2 * kk][3], T());
            p_frag[kk][2] = pack_float2(acc_s[2 * kk + 1][0], acc_s[2 * kk + 1][1], T());
            p_frag[kk][3] = pack_float2(acc_s[2 * kk + 1][2], acc_s[2 * kk + 1][3], T());
        }
    }
    __device__ static void rescale(float (&acc_o)[kHeadDim / 8][4], const float (&alpha)[2]) { rescale_o<kHeadDim>(acc_o, alpha); }
    /* The scale of the scores, and of O at the end: the softmax's alone. */
    __device__ static float score_scale(const flash_problem &p, const flash_descale &) { return p.softmax_scale; }
    __device__ static float o_scale(const flash_descale &) { return 1.0f; }
};

/* e4m3. wgmma reads 8-bit operands K-major only, so P V reads V_j^T, which the producer
 * warpgroup's warps 1-3 write into the slot after V_j (transpose_v_tiles, below). */
template <int kHeadDim, int kBlockN>
struct PathE4m3 {
    using T = __nv_fp8_e4m3;
    using TO = __nv_bfloat16;
    /* An e4m3 head of 128 is one column block of 128-byte rows; of 64, 64-byte rows in the 64-byte
     * swizzle (common/hopper.cuh). */
    static constexpr int kRowBytes = kHeadDim < 128 ? kHeadDim : 128;
    static constexpr int kKStepsPV = kBlockN / 32;    // k32 steps
    /* P is 2^8 times P, so that its values land in e4m3's normal range (up to 256 of 448) rather
     * than among the subnormals below 2^-6, which keep fewer bits: exp2(x + 8) instead of exp2(x).
     * The sum l scales alike, so O = acc / l does not change, and the LSE takes the 8 back. */
    static constexpr int kPShift = 8;
    /* V_j^T: [head_dim, keys], a column block per 128 keys. */
    static constexpr int kVtBytes = kHeadDim * ((kBlockN + 127) / 128) * 128;
    static constexpr int kTransposeWarps = 3;
    __device__ static uint64_t desc_qk(uint32_t smem_addr) {
        return kRowBytes == 128 ? wgmma_desc_k_major(smem_addr) : wgmma_desc_k_major_sw64(smem_addr);
    }
    /* V_j^T K-major: step kk reads bytes 32 kk .. 32 kk + 31 of each head-dim row, in column block
     * 32 kk / 128 (kHeadDim * 128 bytes further). */
    __device__ static uint64_t desc_pv(uint32_t smem_addr) { return wgmma_desc_k_major(smem_addr); }
    __device__ static constexpr uint32_t pv_step(int kk) { return (32 * kk / 128) * kHeadDim * 128 + 32 * kk % 128; }
    /* Four S tiles per k32 step, in the key order of pack_p_e4m3, which V^T shares. */
    template <int kNTilesS>
    __device__ static void pack_p(const float (&acc_s)[kNTilesS][4], uint32_t (&p_frag)[kKStepsPV][4]) {
#pragma unroll
        for (int kk = 0; kk < kKStepsPV; ++kk) pack_p_e4m3(acc_s, kk, p_frag[kk]);
    }
    /* e4m3 tiles go through the tensor cores twice as fast, and the softmax's instructions are what
     * the warps issue; the 64 multiplications of the rescale are one in seven of them. After the
     * first tiles a row's max rarely grows, and where no row of the warp's grew, alpha is 1 and
     * they are skipped (one vote, one branch). */
    __device__ static void rescale(float (&acc_o)[kHeadDim / 8][4], const float (&alpha)[2]) {
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) rescale_o<kHeadDim>(acc_o, alpha);
    }
    /* e4m3 scores are the products of the e4m3 numbers, so q's and k's descales join the scale:
     * the score of the values the inputs stand for is descale.q * descale.k times it; P V summed
     * the e4m3 numbers of V, and v's descale makes them the values. */
    __device__ static float score_scale(const flash_problem &p, const flash_descale &d) { return p.softmax_scale * d.q * d.k; }
    __device__ static float o_scale(const flash_descale &d) { return d.v; }
};

/* Shared memory of one block: the Q_i buffers, O's staging tile (in O's dtype), kStages K/V slots
 * (K_j, V_j, and the path's V_j^T), the path's V^T barriers, plus 1 KiB to align the tiles. */
template <typename Path, typename Shape, int kHeadDim>
__host__ __device__ constexpr int smem_bytes() {
    return (kQBuffers * (int)sizeof(typename Path::T) + (int)sizeof(typename Path::TO)) * Shape::kBlockM * kHeadDim +
           Shape::kStages * (2 * Shape::kBlockN * kHeadDim * (int)sizeof(typename Path::T) + Path::kVtBytes) +
           (Path::kVtBytes ? 2 * Shape::kStages * 8 : 0) + 1024;
}

/* The transposing warps of the e4m3 path, warps 1-3 of the producer warpgroup: each V_j^T, in the
 * order the copy engine brings V_j. The V tiles come in the block's K/V order, tile v in slot
 * v % kStages, the same count as the copying thread's; the transposing warps learn each query
 * tile's number of key tiles from the producer's messages, as the consumers do. A tile is
 * transposed once it has landed and its V^T slot's last reader (the P V of tile v - kStages) is
 * done: then the raw tile is free for the copy engine again, and V^T is published to the tensor
 * cores (the proxy fence: ordinary stores read by wgmma) and to the consumers, by one thread once
 * all three warps are through (the named barrier). */
template <typename Path, int kHeadDim, int kBlockM, int kBlockN, int kStages, bool kCausal>
__device__ __forceinline__ void transpose_v_tiles(const flash_problem &p, int num_m, uint32_t sV_u32, uint32_t slot_bytes,
                                                  uint32_t tile_bytes, uint32_t msg_full_u32, uint32_t msg_empty_u32,
                                                  const int *msg_tile, uint32_t full_v_u32, uint32_t empty_v_u32,
                                                  uint32_t full_vt_u32, uint32_t empty_vt_u32, int barrier) {
    constexpr int kWarps = Path::kTransposeWarps, kRowBytes = Path::kRowBytes;
    static_assert(kWarps == 3, "the transposing loop hands a share to each of warps 1, 2 and 3 by name");
    constexpr int kGroups = kBlockN / 16, kUnits = kGroups * (kHeadDim / 32);  // 16 keys x 32 head bytes each
    const int warp = threadIdx.x / 32;
    for (int msg = 0, v = 0;; ++msg) {
        mbarrier_wait(msg_full_u32 + 8 * (msg & 1), (msg >> 1) & 1);
        const int w = msg_tile[msg & 1];
        mbarrier_arrive(msg_empty_u32 + 8 * (msg & 1));
        if (w < 0) break;
        const int n_blocks = tile_work<kBlockM, kBlockN, kCausal>(p, w, num_m).n_blocks;
#pragma unroll 1
        for (int i = 0; i < n_blocks; ++i, ++v) {
            const int s = v % kStages;
            const uint32_t phase = (v / kStages) & 1;
            mbarrier_wait(full_v_u32 + 8 * s, phase);
            mbarrier_wait(empty_vt_u32 + 8 * s, phase ^ 1);
            const uint32_t v_tile = sV_u32 + s * slot_bytes, vt_tile = v_tile + tile_bytes;
            if (warp == 1)
                transpose_share<kRowBytes, kHeadDim, kGroups, kUnits, kWarps, 0>(v_tile, vt_tile);
            else if (warp == 2)
                transpose_share<kRowBytes, kHeadDim, kGroups, kUnits, kWarps, 1>(v_tile, vt_tile);
            else
                transpose_share<kRowBytes, kHeadDim, kGroups, kUnits, kWarps, 2>(v_tile, vt_tile);
            fence_proxy_async();
            named_barrier_sync(barrier, kWarps * 32);
            if (threadIdx.x == 32) {
                mbarrier_arrive(full_vt_u32 + 8 * s);
                mbarrier_arrive(empty_v_u32 + 8 * s);
            }
        }
    }
}

template <typename Path, typename Shape, int kHeadDim, bool kCausal>
__global__ void __launch_bounds__((Shape::kNConsumers + 1) * 128, Shape::kMinBlocks)
flash_fwd_kernel(const flash_problem p, const flash_descale descale, const __grid_constant__ CUtensorMap map_q,
                 const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                 const __grid_constant__ CUtensorMap map_o, int *tile_counter) {
    using T = typename Path::T;    // q, k and v
    using TO = typename Path::TO;  // O
    constexpr int kRowBytes = Path::kRowBytes;  // bytes per row of a Q, K or V tile's column block
    constexpr int kBlockM = Shape::kBlockM;  // query rows per block (Q_i)
    constexpr int kBlockN = Shape::kBlockN;  // keys per tile (K_j, V_j)
    constexpr int kNConsumers = Shape::kNConsumers;  // consumer warpgroups
    constexpr int kNThreads = (kNConsumers + 1) * 128;        // and the producer's
    constexpr int kStages = Shape::kStages;  // K/V slots in the ring
    constexpr int kCluster = Shape::kCluster;  // blocks sharing each K/V tile
    static_assert(kCluster >= 1 && (kCluster == 1 || !kCausal), "clusters without a mask only (its tiles are all equal)");
    static_assert(kCluster == 1 || Path::kTransposeWarps == 0, "V^T is written in each block: no cluster with transposing warps");
    static_assert(Path::kKStepsPV * 32 == kBlockN * (int)sizeof(T), "the path's P V steps cover the shape's key tile");
    static_assert(kStages >= 2, "V trails K by a tile: two slots at least");
    static_assert(kBlockM == 64 * kNConsumers, "each consumer warpgroup owns 64 query rows (wgmma's M)");
    static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "a wgmma N of the tile's keys (a TMA box of at most 256 rows), whole k16 steps of P V");
    static_assert(kHeadDim % 64 == 0, "whole 128-byte column blocks");
    /* The register split: the producer gives up all but kProducerRegs per thread, the consumers take
     * kConsumerRegs. setmaxnreg trades registers inside the block only: the block starts with
     * kLaunchRegs per thread (what __launch_bounds__ lets ptxas give each of kMinBlocks blocks of
     * the SM's 65536, in multiples of 8), the decrease returns the producer's surplus to the
     * block's pool, and the increase waits until that pool holds what it asks for. Asking for
     * more than the block owns waits forever. The producer keeps 40, as in stage 13; with three
     * consumers 32, which leaves them 160 each of the block's 512 x 128. */
    constexpr int kProducerRegs = kNConsumers == 2 ? 40 : 32, kConsumerRegs = Shape::kConsumerRegs;
    constexpr int kLaunchRegs = (65536 / (Shape::kMinBlocks * kNThreads)) / 8 * 8;
    static_assert(128 * kProducerRegs + kNConsumers * 128 * kConsumerRegs <= kNThreads * kLaunchRegs,
                  "the register split fits the block's own registers (setmaxnreg.inc would wait forever)");
    static_assert(kConsumerRegs % 8 == 0 && kConsumerRegs <= 256, "setmaxnreg counts in multiples of 8, at most 256");
    static_assert(kNConsumers == 2 || kNConsumers == 3, "the turns go round two or three consumer warpgroups");
    /* Named barriers: 0 is __syncthreads, 1 + c the epilogue of consumer c, kTurnBarrier + c the
     * turn of consumer c on the tensor cores, kTransposeBarrier the transposing warps'. */
    constexpr int kTurnBarrier = 1 + kNConsumers, kTransposeBarrier = 1 + 2 * kNConsumers;
    constexpr int kNTilesS = kBlockN / 8;    // n8 tiles of S across the keys of K_j
    constexpr int kKStepsPV = Path::kKStepsPV;  // k16 (k32 for e4m3) steps of the keys in P V
    constexpr int kNTilesO = kHeadDim / 8;   // n8 tiles of O across the head dimension

    /* kQBuffers Q_i buffers (the q-th query tile of the block in buffer q % kQBuffers), O's staging
     * tile, then a ring of kStages K/V slots: the i-th K/V tile the block loads (counted over all
     * its query tiles) lives in slot i % kStages. Every tile starts on a 1024-byte boundary (tile
     * sizes are multiples of 8 rows x 128 bytes), because the swizzle wgmma applies is a function of
     * the address bits; the base is rounded up to one (the launch adds 1 KiB). O has a tile of its
     * own so that the next Q_i can land while O leaves. The e4m3 path's V^T barriers come last. */
    static_assert(smem_bytes<Path, Shape, kHeadDim>() + kStaticSmemBound <= kSmemLimit,
                  "two Q_i buffers, O and the K/V ring fit a block's 227 KiB of shared memory");
    extern __shared__ unsigned char smem_raw[];
    const uint32_t sQ_u32 = (smem_u32(smem_raw) + 1023) & ~1023u;
    unsigned char *smem = smem_raw + (sQ_u32 - smem_u32(smem_raw));
    constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(T);
    TO *sO = reinterpret_cast<TO *>(smem + kQBuffers * kQBytes);  // O [kBlockM, kHeadDim], staged for its TMA store
    const uint32_t sO_u32 = sQ_u32 + kQBuffers * kQBytes;
    constexpr uint32_t kTileBytes = kBlockN * kHeadDim * sizeof(T);
    constexpr uint32_t kSlotBytes = 2 * kTileBytes + Path::kVtBytes;  // a slot: K_j, V_j (and V_j^T)
    const uint32_t sK_u32 = sO_u32 + kBlockM * kHeadDim * sizeof(TO), sV_u32 = sK_u32 + kTileBytes;
    /* The e4m3 path's V^T barriers, a pair per slot after the ring (none for 16-bit inputs). */
    const uint32_t full_vt_u32 = sK_u32 + kStages * kSlotBytes, empty_vt_u32 = full_vt_u32 + 8 * kStages;
    /* The ring's barriers, a pair per slot and tensor. "full" (arrival count 1: the producer's
     * expect-tx) completes when the tile has landed, every block's part of it; "empty" (arrival
     * count kNConsumers * kCluster: one arrival per consumer warpgroup of every block of the
     * cluster) when every consumer that reads the tile is done with it, in this block and the
     * others, since this block's producer writes its part of the next tile into all of them. The u-th use of a slot
     * completes phase u of its full barrier and phase u of its empty barrier, named by parity u & 1.
     * Each Q_i buffer has such a pair too: the q-th query tile of the block completes phase
     * q / kQBuffers of its buffer's pair. e4m3: V_j's pair is between the copy engine and the
     * transposing warps (its empty barrier counts their one arrival), and V_j^T has a pair of its
     * own between them and the consumers (full: their one arrival; empty: one per consumer
     * warpgroup). */
    __shared__ __align__(8) uint64_t bar_q[kQBuffers], empty_q[kQBuffers], full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages];
    /* The producer tells the consumers which query tile comes next (-1: none) through a ring of two
     * messages, with a full/empty pair each: the consumers cannot compute it themselves when the
     * next tile comes from a global counter. "empty" counts every consumer thread, since each
     * reads the message, and every transposing thread, which needs each tile's key count. */
    __shared__ __align__(8) uint64_t msg_full[2], msg_empty[2];
    __shared__ int msg_tile[2];

    /* The block's query tiles. The first is blockIdx.x; the persistent grid gives each block
     * several in turn, and its producer loads the next tile's Q and K/V while the consumers finish
     * the last. The next tile is gridDim.x further, or, with a tile_counter (causal problems,
     * whose tiles are not equal), the next one nobody has taken. A grid of one block per tile
     * (the launch's fallback) stops after the first. */
    /* The blocks of a cluster take neighbouring query tiles of one (head, batch), which visit the
     * same K/V tiles: so a head's tiles are counted in whole clusters, and where kCluster does not
     * divide them the last block of the last cluster takes a tile past the end of the sequence. It
     * computes on zero rows (Q past seqlen_q lands as zeros) and stores nothing (the TMA store and
     * the LSE skip rows past seqlen_q), but loads its part of every K/V tile for its partner. */
    const int num_m = (p.seqlen_q + kBlockM * kCluster - 1) / (kBlockM * kCluster) * kCluster;
    const uint32_t rank = kCluster > 1 ? cluster_ctarank() : 0;  // this block's part of each K/V tile
    const int kv_group = p.heads_q / p.heads_kv;  // GQA: kv_group query heads share one K/V head
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warpgroup = warp / 4;  // 0: the producer; 1 .. kNConsumers: the consumers
    const int g = lane / 4, t = lane % 4;  // fragment coordinates: row group and thread in quad

    /* Thread 0 initialises the barriers and publishes them to the copy engine (the async proxy)
     * and, through the one barrier of all threads of the kernel, to every thread: with a cluster,
     * the cluster's barrier, so that no block's copies or arrivals reach a barrier of another
     * before it is initialised. */
    const uint32_t bar_q_u32 = smem_u32(&bar_q[0]), empty_q_u32 = smem_u32(&empty_q[0]);
    const uint32_t full_k_u32 = smem_u32(&full_k[0]), full_v_u32 = smem_u32(&full_v[0]);
    const uint32_t empty_k_u32 = smem_u32(&empty_k[0]), empty_v_u32 = smem_u32(&empty_v[0]);
    const uint32_t msg_full_u32 = smem_u32(&msg_full[0]), msg_empty_u32 = smem_u32(&msg_empty[0]);
    if (threadIdx.x == 0) {
        for (int b = 0; b < kQBuffers; ++b) {
            mbarrier_init(bar_q_u32 + 8 * b, 1);
            mbarrier_init(empty_q_u32 + 8 * b, kNConsumers);
        }
        for (int s = 0; s < 2; ++s) {
            mbarrier_init(msg_full_u32 + 8 * s, 1);
            mbarrier_init(msg_empty_u32 + 8 * s, kNConsumers * 128 + Path::kTransposeWarps * 32);
        }
        for (int s = 0; s < kStages; ++s) {
            mbarrier_init(full_k_u32 + 8 * s, 1);
            mbarrier_init(full_v_u32 + 8 * s, 1);
            mbarrier_init(empty_k_u32 + 8 * s, kNConsumers * kCluster);
            mbarrier_init(empty_v_u32 + 8 * s, (Path::kTransposeWarps ? 1 : kNConsumers) * kCluster);
            if (Path::kVtBytes) {
                mbarrier_init(full_vt_u32 + 8 * s, 1);
                mbarrier_init(empty_vt_u32 + 8 * s, kNConsumers);
            }
        }
        fence_mbarrier_init();
    }
    if (kCluster > 1) {
        cluster_arrive();
        cluster_wait();
    } else {
        __syncthreads();
    }

    if (warpgroup == 0) {
        /* ---- the producer: one thread issues every copy, as far ahead as the ring allows ---- */
        setmaxnreg_dec<kProducerRegs>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&map_q);
            tma_prefetch_map(&map_k);
            tma_prefetch_map(&map_v);
            tma_prefetch_map(&map_o);
            /* K/V tile i of the block (counted over all its query tiles) goes into slot
             * i % kStages once the consumers have released that slot's previous tile, i - kStages:
             * the (i / kStages)-th use of the slot waits for phase i / kStages - 1 of its empty
             * barrier. The first kStages tiles wait for the phase "before phase 0", parity 1, which
             * a fresh barrier reports complete; a Q_i buffer waits the same way for the consumers'
             * last S of the query tile it held before. Within a query tile the copies go in the
             * order the consumers need them, K_0, K_1, V_0, K_2, V_1, ...: V trails K by a tile, so
             * a wait for a V slot never holds back the K tile needed first. */
            const int num_tiles = num_m * p.heads_q * p.batch;
            int kv = 0, q_use = 0;
            /* The query tile whose last V tile (its key tile 0, the last visited, the block's
             * (kv - 1)-th) is still to be loaded when the next tile is announced; -1: none. A tile's
             * work is computed where each copy needs it, not held across the copies: with three
             * consumers the producer has 32 registers, and holding it made ptxas spill. */
            int w_last = -1;
            for (int w = blockIdx.x, msg = 0;; ++msg) {
                /* The msg-th message (slot msg & 1, its (msg / 2)-th use) names tile w, or -1 past
                 * the last. */
                mbarrier_wait(msg_empty_u32 + 8 * (msg & 1), ((msg >> 1) & 1) ^ 1);
                msg_tile[msg & 1] = w < num_tiles ? w : -1;
                mbarrier_arrive(msg_full_u32 + 8 * (msg & 1));
                if (w < num_tiles) {
                    const TileWork tw = tile_work<kBlockM, kBlockN, kCausal>(p, w, num_m);
                    if (tw.n_blocks > 0) {
                        const int b = q_use % kQBuffers;
                        mbarrier_wait(empty_q_u32 + 8 * b, ((q_use / kQBuffers) & 1) ^ 1);
                        load_tile<T, kHeadDim, kBlockM, kRowBytes>(sQ_u32 + b * kQBytes, &map_q, bar_q_u32 + 8 * b, tw.head, tw.row0, tw.batch);
                        ++q_use;
                    }
                }
                /* The tile before's last V only now, after this tile's Q_i: the consumers issue this
                 * tile's first S in the turn of that V's P V (the joint turn), so Q_i, which comes
                 * from memory no block has read yet, is needed as early as that V, and the wait for
                 * its slot (the P V three tiles back) would hold Q_i up by a turn. */
                if (w_last >= 0) {
                    const TileWork tw_last = tile_work<kBlockM, kBlockN, kCausal>(p, w_last, num_m);
                    const int u = kv - 1, s = u % kStages;
                    mbarrier_wait(empty_v_u32 + 8 * s, ((u / kStages) & 1) ^ 1);
                    load_kv_tile<T, kHeadDim, kBlockN, kRowBytes, kCluster>(sV_u32 + s * kSlotBytes, &map_v, full_v_u32 + 8 * s,
                                                              tw_last.head / kv_group, 0, tw_last.batch, rank);
                }
                if (w >= num_tiles) break;
                const TileWork tw = tile_work<kBlockM, kBlockN, kCausal>(p, w, num_m);
                const int head_kv = tw.head / kv_group;
                /* Not unrolled: two copies of the loop body cost registers the producer lacks. */
#pragma unroll 1
                for (int i = 0; i < tw.n_blocks; ++i) {
                    const int u = kv + i, s = u % kStages;
                    mbarrier_wait(empty_k_u32 + 8 * s, ((u / kStages) & 1) ^ 1);
                    load_kv_tile<T, kHeadDim, kBlockN, kRowBytes, kCluster>(sK_u32 + s * kSlotBytes, &map_k, full_k_u32 + 8 * s, head_kv,
                                                              (tw.n_blocks - 1 - i) * kBlockN, tw.batch, rank);
                    if (i > 0) {
                        const int s_v = (u - 1) % kStages;
                        mbarrier_wait(empty_v_u32 + 8 * s_v, (((u - 1) / kStages) & 1) ^ 1);
                        load_kv_tile<T, kHeadDim, kBlockN, kRowBytes, kCluster>(sV_u32 + s_v * kSlotBytes, &map_v, full_v_u32 + 8 * s_v, head_kv,
                                                                  (tw.n_blocks - i) * kBlockN, tw.batch, rank);
                    }
                }
                w_last = tw.n_blocks > 0 ? w : -1;
                kv += tw.n_blocks;
                /* The next tile is taken once this one's K copies are all issued: late enough that
                 * the counter hands tiles to the blocks about to need one. */
                w = tile_counter ? (int)gridDim.x + atomicAdd(tile_counter, 1) : w + (int)gridDim.x;
            }
        } else if constexpr (Path::kTransposeWarps > 0) {
            if (warp >= 1)
                transpose_v_tiles<Path, kHeadDim, kBlockM, kBlockN, kStages, kCausal>(
                    p, num_m, sV_u32, kSlotBytes, kTileBytes, msg_full_u32, msg_empty_u32, msg_tile, full_v_u32, empty_v_u32,
                    full_vt_u32, empty_vt_u32, kTransposeBarrier);
        }
        return;
    }

    /* ---- the consumers: both GEMMs and the softmax, nothing else ---- */
    setmaxnreg_inc<kConsumerRegs>();
    const int consumer = warpgroup - 1;
    /* Consumer warp w (of all the consumers' warps) holds rows 16 w .. 16 w + 15 of Q_i, S and O:
     * in every accumulator, c[0..1] of row g, c[2..3] of row g + 8. */
    const int warp_row0 = (warp - 4) * 16;
    /* The warpgroup's 64 rows of a Q_i buffer (and of O) start 64 rows (8 atoms) into each column
     * block. */
    const uint32_t q_rows = consumer * 64 * kRowBytes, o_tile = sO_u32 + consumer * 64 * 128;
    /* One thread per warpgroup releases a slot: the wgmma that read it belong to the whole
     * warpgroup, and its wait has seen them complete. */
    const bool releases = threadIdx.x % 128 == 0;
    /* log2(e) folded into the scale: exp(scale * x) = 2^(scale_log2 * x). */
    const float score_scale = Path::score_scale(p, descale);
    const float scale_log2 = score_scale * 1.4426950408889634f;
    /* P V's operand: V_j, or the e4m3 path's V_j^T after it in the slot, and the barriers the
     * consumers wait for and release it on. */
    const uint32_t sPV_u32 = sV_u32 + (Path::kVtBytes ? kTileBytes : 0);
    const uint32_t full_pv_u32 = Path::kVtBytes ? full_vt_u32 : full_v_u32, empty_pv_u32 = Path::kVtBytes ? empty_vt_u32 : empty_v_u32;
    /* The descriptors of slot 0's K tile and P V operand; slot s's are s * kSlotBytes further. */
    const uint64_t k_desc0 = Path::desc_qk(sK_u32), v_desc0 = Path::desc_pv(sPV_u32);

    /* Ping-pong: the consumer warpgroups take turns issuing their GEMMs, in a ring (with three, as
     * FA3 does at head_dim 64: 0, 1, 2, 0, ...). Warpgroup c waits at named barrier
     * kTurnBarrier + c until the one before it has issued its GEMMs and arrived there; then it
     * issues its own and arrives at the next one's. So the tensor cores run one warpgroup's GEMMs
     * while the others compute their softmax. Each barrier counts 256 threads: the 128 that wait
     * and the 128 that arrive. The turns run on from one query tile into the next: the last
     * consumer opens the very first turn for consumer 0, its last turn of a query tile opens
     * consumer 0's first of the next (which may start while the others still write O), and after
     * the block's last turn consumer 0 takes that last arrival with a wait of its own, so that
     * every arrival meets a wait. */
    const int next_turn = kTurnBarrier + (consumer + 1) % kNConsumers;
    /* The LSE of 2^kPShift P: log(l) is kPShift ln 2 too large. */
    constexpr float kPShiftLn = Path::kPShift * 0.6931471805599453f;
    if (consumer == kNConsumers - 1) named_barrier_arrive(kTurnBarrier + 0, 256);

    /* What one query tile leaves to the next: its last P V. The joint turn (below) issues it
     * together with the next tile's first S, and the epilogue of the tile runs under that S; so
     * O, P's fragments, m and l live across the loop, and `prev_w` names the tile they belong
     * to. Before the block's first tile there is no P V to finish, and the turn issues one with
     * P = 0 (whose product is dropped): every turn issues the same wgmma, on one path of the code,
     * and ptxas keeps them asynchronous (a wgmma issued on some paths only makes it serialise
     * every wgmma of the kernel, info C7519). */
    float m[2] = {-INFINITY, -INFINITY};  // running max of the raw (unscaled) scores of rows g, g + 8
    float l[2] = {0.0f, 0.0f};            // this thread's part of the running sum of P
    float acc_o[kNTilesO][4];             // O, unnormalised: [head-dim n8 tile][fragment register]
    uint32_t p_frag[kKStepsPV][4];        // P (as A fragments) of the tile whose P V is still to come
#pragma unroll
    for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKStepsPV; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e) p_frag[kk][e] = 0u;
    /* Its work is recomputed from the tile's number where the epilogue needs it, not held across the
     * loop: a consumer of three has 160 registers. */
    int prev_w = 0;
    bool has_prev = false;
    uint32_t prev_q_tile = 0, prev_v_tile = 0;  // prev's Q_i rows, and the slot of its last V tile (as TMA brought it)
    int prev_v_stage = 0, prev_v_use = 0;       // that slot and the block's count of the K/V tile in it

    /* The epilogue of prev, once its last P V is complete: O = acc_o / l, after the one quad
     * reduction of l. A row that saw no key at all (causal, seqlen_q > seqlen_k) has l = 0:
     * FlashAttention-2 writes O = 0 and LSE = +inf. Then O, m and l start again for the next tile. */
    auto finish_prev = [&]() {
        if (has_prev) {
            /* V of prev's last tile was in the last copy of that query tile; its slot is released
             * like the others, for the copies of the tiles after it. */
            if (releases) release_slot<kCluster>(empty_pv_u32 + 8 * prev_v_stage);
            const TileWork prev = tile_work<kBlockM, kBlockN, kCausal>(p, prev_w, num_m);
            const int row_g = prev.row0 + warp_row0 + g;  // rows row_g + 8 h
            float inv_l[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
                l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
                inv_l[h] = (l[h] > 0.0f) ? Path::o_scale(descale) / l[h] : 0.0f;
            }
            /* Stage this warp's rows of O in sO, once the TMA store of this warpgroup's query tile
             * before has read them out: its issuing thread waits for that here, a whole query tile
             * after the store was issued, so the wait is short, and not right after issuing it,
             * where its whole warpgroup would wait with it at the next turn. */
            if (threadIdx.x % 128 == 0) tma_store_wait_read();
            named_barrier_sync(1 + consumer, 128);
#pragma unroll
            for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    *reinterpret_cast<uint32_t *>(&sO[smem_idx<kBlockM>(warp_row0 + g + 8 * h, nt * 8 + 2 * t)]) =
                        pack_float2(acc_o[nt][2 * h] * inv_l[h], acc_o[nt][2 * h + 1] * inv_l[h], TO());
            /* The warpgroup's 64 rows go out as kHeadDim / 64 TMA boxes, issued by its first thread
             * once all four warps have written their rows: the stores above are generic-proxy
             * writes that the copy engine reads, hence the proxy fence in every writing thread
             * before the barrier. Rows past seqlen_q are clipped by the engine. */
            fence_proxy_async();
            named_barrier_sync(1 + consumer, 128);
            if (threadIdx.x % 128 == 0) {
#pragma unroll
                for (int c = 0; c < kHeadDim / 64; ++c)
                    tma_store_4d(&map_o, o_tile + c * kBlockM * 128, 64 * c, prev.head, prev.row0 + 64 * consumer, prev.batch);
                tma_store_commit();
            }
            if (p.lse && t == 0) {
                float *lse = p.lse + ((int64_t)prev.batch * p.heads_q + prev.head) * p.seqlen_q;
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    if (row_g + 8 * h < p.seqlen_q)
                        lse[row_g + 8 * h] = (l[h] > 0.0f) ? m[h] * score_scale + logf(l[h]) - kPShiftLn : INFINITY;
            }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            m[h] = -INFINITY;
            l[h] = 0.0f;
        }
#pragma unroll
        for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_o[nt][e] = 0.0f;
    };

    int kv = 0, q_use = 0;  // as the producer counts them: K/V tiles and query tiles so far
    for (int msg = 0;; ++msg) {
        mbarrier_wait(msg_full_u32 + 8 * (msg & 1), (msg >> 1) & 1);
        const int w = warp_uniform(msg_tile[msg & 1]);
        mbarrier_arrive(msg_empty_u32 + 8 * (msg & 1));
        /* last: no tile after prev, whose last P V still takes a turn of its own. */
        const bool last = w < 0;
        if (last && !has_prev) break;
        const TileWork tw = tile_work<kBlockM, kBlockN, kCausal>(p, last ? prev_w : w, num_m);
        if (!last) {
            /* Only a causal tile can see no key (seqlen_k >= 1): without a mask the test, and the
             * store it guards, are compiled out of the consumers' code. */
            if (kCausal && tw.n_blocks == 0) {
                store_empty_tile<TO, kHeadDim, kBlockM>(p, tw.batch, tw.head, tw.row0, threadIdx.x - 128, kNConsumers * 128);
                continue;
            }
        }
        const int n_blocks = tw.n_blocks, n_masked = tw.n_masked;
        const int row_g = tw.row0 + warp_row0 + g;  // rows row_g + 8 h
        const int q_buffer = q_use % kQBuffers;
        const uint32_t q_tile = last ? prev_q_tile : sQ_u32 + q_buffer * kQBytes + q_rows;
        const uint64_t q_desc = Path::desc_qk((uint32_t)warp_uniform((int)q_tile));

        /* The joint turn's operands. Its S is this tile's first, S_0 = Q_i K_{n-1}^T; P V is prev's
         * last, or P = 0 times K_{n-1} again before the block's first tile. After the block's last
         * tile (last) it issues prev's P V with an S nobody reads, from prev's Q_i and last V tile
         * as TMA brought it (both [rows, kHeadDim], landed, and with no copy left to come into them:
         * the producer has said it has no more tiles), for the same reason as the P = 0. */
        const int s0 = kv % kStages;
        const uint32_t k_first = last ? prev_v_tile : sK_u32 + s0 * kSlotBytes;
        const uint32_t v_prev = has_prev ? prev_v_tile - sV_u32 + sPV_u32 : k_first;
        if (!last) {
            mbarrier_wait(bar_q_u32 + 8 * q_buffer, (q_use / kQBuffers) & 1);
            mbarrier_wait(full_k_u32 + 8 * s0, (kv / kStages) & 1);
        }
        /* prev's last V tile: its barrier nobody has waited for yet. */
        if (has_prev) mbarrier_wait(full_pv_u32 + 8 * prev_v_stage, (prev_v_use / kStages) & 1);

        /* Software pipeline: V trails K by one tile as in stage 10; the turn of tile t issues S_t
         * and the P V of tile t - 1, and the joint turn that of prev's last tile with S_0. */
        float acc_s[kNTilesS][4];
        /* The joint turn: prev's last P V first, since prev's epilogue waits for it, then S_0,
         * which the first softmax waits for after that epilogue. */
        {
            gemm_fence(acc_s, acc_o);
            named_barrier_sync(kTurnBarrier + consumer, 256);
            pv_tile<Path, kHeadDim>(acc_o, p_frag, Path::desc_pv(v_prev));
            qk_tile<T, kHeadDim, kBlockM, kBlockN, kRowBytes>(acc_s, q_desc, Path::desc_qk(k_first));
            named_barrier_arrive(next_turn, 256);
            wgmma_wait<1>();
            wgmma_hold(acc_o);
            finish_prev();
            wgmma_wait<0>();
            wgmma_hold(acc_s);
            if (last) break;
            if (releases) release_slot<kCluster>(empty_k_u32 + 8 * s0);
            if (n_blocks - 1 >= n_masked) mask_tile<kCausal>(acc_s, row_g, (n_blocks - 1) * kBlockN, p);
            /* The first tile's alpha would rescale an O that finish_prev has just zeroed. */
            float alpha[2];
            softmax_tile<Path::kPShift>(acc_s, m, l, alpha, scale_log2);
            Path::pack_p(acc_s, p_frag);
        }
        /* Stage 12's turns: S_t and the P V of tile t - 1, then the softmax of tile t while the
         * tensor cores finish this warpgroup's P V and run the other warpgroups' GEMMs. O is
         * rescaled by the new alpha as soon as that P V is complete, in the same stretch of code as
         * the softmax, where its multiplications fill the issue slots the exp2 leaves free; before
         * the next turn's fence, as in stage 13, ptxas moves them past the turn's barrier, between
         * the barrier and the first wgmma. */
        auto turn = [&](int tile, bool masked) {
            const int n_block = n_blocks - 1 - tile;
            const int u = kv + tile, stage = u % kStages, stage_prev = (u - 1) % kStages;
            mbarrier_wait(full_k_u32 + 8 * stage, (u / kStages) & 1);
            gemm_fence(acc_s, acc_o);
            named_barrier_sync(kTurnBarrier + consumer, 256);
            qk_tile<T, kHeadDim, kBlockM, kBlockN, kRowBytes>(acc_s, q_desc, wgmma_desc_advance(k_desc0, stage * kSlotBytes));
            /* V_{t-1} only now: the producer copies it after K_t, and with a cluster its halves come
             * from two producers, so it may land after S_t could start; the tensor cores run S_t
             * meanwhile. A wait between two wgmma needs a fence of its own before the second. */
            mbarrier_wait(full_pv_u32 + 8 * stage_prev, ((u - 1) / kStages) & 1);
            wgmma_fence();
            pv_tile<Path, kHeadDim>(acc_o, p_frag, wgmma_desc_advance(v_desc0, stage_prev * kSlotBytes));
            named_barrier_arrive(next_turn, 256);
            /* S_t first: its group was committed first; the P V may run on under the softmax. */
            wgmma_wait<1>();
            wgmma_hold(acc_s);
            if (releases) release_slot<kCluster>(empty_k_u32 + 8 * stage);
            if (masked) mask_tile<kCausal>(acc_s, row_g, n_block * kBlockN, p);
            float alpha[2];
            softmax_tile<Path::kPShift>(acc_s, m, l, alpha, scale_log2);
            wgmma_wait<0>();
            wgmma_hold(acc_o);
            if (releases) release_slot<kCluster>(empty_pv_u32 + 8 * stage_prev);
            Path::rescale(acc_o, alpha);
            Path::pack_p(acc_s, p_frag);
        };
        /* The tiles that need the mask are the last keys, visited first; the loop over the others
         * has no masking code at all, no branch between the wait for S and the softmax, as
         * FlashAttention-3 splits it. */
        int tile = 1;
        for (; tile < n_blocks && n_blocks - 1 - tile >= n_masked; ++tile) turn(tile, true);
        for (; tile < n_blocks; ++tile) turn(tile, false);

        /* Every S of this query tile is complete: its Q_i buffer may take a later one. */
        if (releases) mbarrier_arrive(empty_q_u32 + 8 * q_buffer);
        prev_w = w;
        has_prev = true;
        prev_q_tile = q_tile;
        prev_v_use = kv + n_blocks - 1;
        prev_v_stage = prev_v_use % kStages;
        prev_v_tile = sV_u32 + prev_v_stage * kSlotBytes;
        kv += n_blocks;
        ++q_use;
    }
    /* The block's shared memory must outlive the last TMA store's reads of sO, and the last
     * consumer's last arrival must meet a wait. With a cluster, no block exits before the others'
     * consumers have made their last arrivals on its empty barriers: the cluster's barrier, which
     * the producer's threads, exited, count as having reached. */
    if (threadIdx.x % 128 == 0) tma_store_wait_read();
    if (consumer == 0) named_barrier_sync(kTurnBarrier + 0, 256);
    if (kCluster > 1) {
        cluster_arrive();
        cluster_wait();
    }
}

/* ---------------------------------------------------------------------------------------------
 * Launch
 * ------------------------------------------------------------------------------------------- */

/* The grid: as many blocks as the GPU holds at once, each working through query tiles. Without a
 * mask they are all equal, and block b takes tiles b, b + gridDim.x, ...; causal tiles are not:
 * with that fixed stride (stage 13), 128-row tiles at 1k keys (8 per head) and 132 blocks, block b
 * would only ever get tiles of rank b mod 8 and (b + 4) mod 8, and the unluckiest blocks a third
 * more work than the mean. So a causal grid takes its tiles from a counter in global memory
 * (common/flash_counter.h), zeroed on the stream before each call, in the order the tiles are
 * numbered (longest first). */

/* Above 48 KiB a block must opt in to dynamic shared memory, once per instantiation and device:
 * an atomic flag per device, as in stage 08. */
constexpr int kMaxDevices = 64;

/* The tensor maps are encoded on every call, inside the call the caller times: four calls of
 * cuTensorMapEncodeTiled, a few microseconds of host time each, while the kernel takes milliseconds.
 * A map holds the tensor's address and sizes, so a cache would need all of them (and the device) as
 * its key to never hand a kernel the map of a freed or reshaped tensor; not caching cannot go
 * stale. The maps travel as kernel parameters (__grid_constant__), so each launch owns its copy. */
template <typename Path, typename Shape, int kHeadDim, bool kCausal>
static int launch(const flash_problem *p, const flash_descale *descale, cudaStream_t stream) {
    constexpr int kBlockM = Shape::kBlockM, kBlockN = Shape::kBlockN;
    constexpr int kCluster = Shape::kCluster;
    constexpr int kSmemBytes = smem_bytes<Path, Shape, kHeadDim>();
    constexpr auto kernel = flash_fwd_kernel<Path, Shape, kHeadDim, kCausal>;
    static std::atomic<bool> opted_in[kMaxDevices];
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return flash_set_error(FLASH_E_CUDA, "kernel16_fp8: no current device: %s", cudaGetErrorString(err));
    const bool cached = device < kMaxDevices;
    if (!(cached && opted_in[device].load(std::memory_order_acquire))) {
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (err != cudaSuccess)
            return flash_set_error(FLASH_E_CUDA, "kernel16_fp8: %d bytes of shared memory refused: %s", kSmemBytes,
                                   cudaGetErrorString(err));
        if (cached) opted_in[device].store(true, std::memory_order_release);
    }
    CUtensorMap map_q, map_k, map_v, map_o;
    int rc = flash_tma_map(&map_q, p->q, p->dtype, p->batch, p->seqlen_q, p->heads_q, kHeadDim, kBlockM, "kernel16_fp8", "q");
    /* A K/V box is one block's part of a tile. */
    if (!rc) rc = flash_tma_map(&map_k, p->k, p->dtype, p->batch, p->seqlen_k, p->heads_kv, kHeadDim, kBlockN / kCluster, "kernel16_fp8", "k");
    if (!rc) rc = flash_tma_map(&map_v, p->v, p->dtype, p->batch, p->seqlen_k, p->heads_kv, kHeadDim, kBlockN / kCluster, "kernel16_fp8", "v");
    /* O is bf16 for e4m3 inputs. */
    const flash_dtype o_dtype = sizeof(typename Path::TO) == sizeof(typename Path::T) ? p->dtype : FLASH_BF16;
    if (!rc) rc = flash_tma_map(&map_o, p->o, o_dtype, p->batch, p->seqlen_q, p->heads_q, kHeadDim, 64, "kernel16_fp8", "o");
    if (rc) return rc;
    /* Query tiles in whole clusters per (head, batch), as the kernel counts them. */
    const long long num_tiles = (long long)((p->seqlen_q + kBlockM * kCluster - 1) / (kBlockM * kCluster)) * kCluster * p->heads_q * p->batch;
    /* Tile numbers and the stride past the last one must stay within an int. */
    if (num_tiles > INT_MAX / 2)
        return flash_set_error(FLASH_E_UNSUPPORTED,
                               "kernel16_fp8: unsupported size: %lld query tiles (batch x heads_q x seqlen_q / %d), "
                               "more than 2^30 - 1", num_tiles, kBlockM);
    int sms = 0, pools = 0;
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device);
    if (err != cudaSuccess) return flash_set_error(FLASH_E_CUDA, "kernel16_fp8: device attributes: %s", cudaGetErrorString(err));
    /* The launch: with kCluster > 1, clusters of kCluster consecutive blocks (the grid a multiple of
     * it). A cluster's blocks must run at once on SMs of one GPC, so fewer blocks than SMs may fit:
     * the persistent grid is as many clusters as the device holds at once (the occupancy query),
     * since a block still waiting for an SM would leave its share of the tiles to the end. */
    cudaLaunchAttribute cluster_attr;
    cluster_attr.id = cudaLaunchAttributeClusterDimension;
    cluster_attr.val.clusterDim.x = kCluster, cluster_attr.val.clusterDim.y = 1, cluster_attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t config = {};
    config.blockDim = dim3((Shape::kNConsumers + 1) * 128);
    config.dynamicSmemBytes = kSmemBytes;
    config.stream = stream;
    config.attrs = kCluster > 1 ? &cluster_attr : nullptr;
    config.numAttrs = kCluster > 1 ? 1 : 0;
    long long resident = (long long)sms * Shape::kMinBlocks;
    if (kCluster > 1) {
        int clusters = 0;
        config.gridDim = dim3(kCluster * sms);
        err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
        if (err != cudaSuccess || clusters < 1)
            return flash_set_error(FLASH_E_CUDA, "kernel16_fp8: no cluster of %d blocks fits the device: %s", kCluster,
                                   err != cudaSuccess ? cudaGetErrorString(err) : "occupancy 0");
        resident = (long long)clusters * kCluster;
    }
    /* One block per query tile instead (one trip through the kernel's loops each) where the
     * persistent grid would be wrong, not slow: a block counts the K/V tiles of all its query
     * tiles in an int (slots and phases follow the count), and with the counter one block may in
     * principle take every tile, so a problem whose K/V tiles of all query tiles could overflow
     * that int runs this way; so does a causal call on a device without stream-ordered
     * allocation, which the counter may need (common/flash_counter.c). */
    const long long key_tiles = (p->seqlen_k + kBlockN - 1) / kBlockN;
    const bool persistent = !(num_tiles * key_tiles > INT_MAX / 2 || (kCausal && !pools));
    int grid = (int)num_tiles;
    flash_tile_counter counter = {};
    if (persistent) {
        grid = (int)min(num_tiles, resident);
        if (kCausal) {
            const int rc_counter = flash_tile_counter_take(&counter, device, stream, "kernel16_fp8");
            if (rc_counter) return rc_counter;
        }
    }
    config.gridDim = dim3(grid);
    /* A failed launch is also the runtime's last error, which flash_launch_status reports. */
    (void)cudaLaunchKernelEx(&config, kernel, *p, *descale, map_q, map_k, map_v, map_o, counter.counter);
    const int status = flash_launch_status("kernel16_fp8");
    return counter.counter ? flash_tile_counter_done(&counter, stream, status, "kernel16_fp8") : status;
}

/* The 16-bit path with stage 15's shapes. */
template <typename T, typename Shape, int kHeadDim, bool kCausal>
static int launch_16bit(const flash_problem *p, const flash_descale *descale, cudaStream_t stream) {
    return launch<Path16<T, kHeadDim, Shape::kBlockN>, Shape, kHeadDim, kCausal>(p, descale, stream);
}
template <typename T>
static int launch_dtype(const flash_problem *p, const flash_descale *descale, cudaStream_t stream) {
    if (p->head_dim == 64) {
        if (!p->causal) return launch_16bit<T, Tile<64, false, false>, 64, false>(p, descale, stream);
        return p->seqlen_q <= kShortCausal ? launch_16bit<T, Tile<64, true, true>, 64, true>(p, descale, stream)
                                           : launch_16bit<T, Tile<64, true, false>, 64, true>(p, descale, stream);
    }
    return p->causal ? launch_16bit<T, Tile<128, true, false>, 128, true>(p, descale, stream)
                     : launch_16bit<T, Tile<128, false, false>, 128, false>(p, descale, stream);
}

/* The e4m3 path: 128 x 128 tiles where the keys are few, the shapes above otherwise. */
template <int kHeadDim, bool kCausal, bool kFewKeys>
static int launch_e4m3(const flash_problem *p, const flash_descale *descale, cudaStream_t stream) {
    using Shape = TileE4m3<kHeadDim, kCausal, kFewKeys>;
    return launch<PathE4m3<kHeadDim, Shape::kBlockN>, Shape, kHeadDim, kCausal>(p, descale, stream);
}

/* The entry points (common/flash_internal.h): bf16 and fp16, then e4m3 with its descale factors. */
extern "C" int flash_forward_kernel16(const flash_problem *p, cudaStream_t stream) {
    const flash_descale ones = {1.0f, 1.0f, 1.0f};
    return p->dtype == FLASH_BF16 ? launch_dtype<__nv_bfloat16>(p, &ones, stream) : launch_dtype<__half>(p, &ones, stream);
}

extern "C" int flash_forward_fp8_kernel16(const flash_problem *p, const flash_descale *descale, cudaStream_t stream) {
    const bool few_keys = p->seqlen_k <= kFewKeysFp8;
    if (p->head_dim == 64) {
        if (p->causal) return few_keys ? launch_e4m3<64, true, true>(p, descale, stream) : launch_e4m3<64, true, false>(p, descale, stream);
        return few_keys ? launch_e4m3<64, false, true>(p, descale, stream) : launch_e4m3<64, false, false>(p, descale, stream);
    }
    if (p->causal) return few_keys ? launch_e4m3<128, true, true>(p, descale, stream) : launch_e4m3<128, true, false>(p, descale, stream);
    return few_keys ? launch_e4m3<128, false, true>(p, descale, stream) : launch_e4m3<128, false, false>(p, descale, stream);
}
