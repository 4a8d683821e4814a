/*
 * Stage 12 - pingpong: the two consumer warpgroups take turns on the tensor cores.
 *
 * Technique: ping-pong scheduling of the consumer warpgroups (docs/12_pingpong.md). In stage 11
 *            each consumer warpgroup issues its GEMMs and computes its softmax whenever its data is
 *            there, so the two often want the tensor cores at the same moment and run their
 *            exponentials at the same moment too. Here they alternate through two named barriers:
 *            warpgroup 1 issues S = Q K_j^T and the P V of the tile before back to back, lets
 *            warpgroup 2 go, and computes its softmax while the tensor cores run warpgroup 2's
 *            GEMMs; then the other way round. The softmax (bounded by the 16-per-clock MUFU.EX2
 *            unit) hides under the other warpgroup's matrix work instead of leaving the tensor
 *            cores idle.
 * Changed:   the loop issues both GEMMs of a tile together between a named-barrier wait for its
 *            turn and an arrival that hands the turn over; O is rescaled before the turn; S is
 *            waited for with wgmma_wait<1> (P V may still run); the first tile is peeled off the
 *            loop; qk_tile and pv_tile leave the fence to the caller (gemm_fence, once per turn).
 * Bottleneck: the ends of each query tile, which no turn covers: a block's first S has no P V
 *            under it, its last P V and its store of O no softmax over them, and the next block
 *            starts cold, which weighs most where a tile visits few keys; and the fixed-latency
 *            waits, the largest stall, among them a warpgroup's wait for its S behind the other's
 *            P V (docs/12_pingpong.md). Stage 13 runs one tile's end under the next's.
 * Measured:  NVIDIA H200, B16 H16 S4096 D128 bf16, median of 4 alternating rounds (make rounds,
 *            commit a13f0f6): 573.7 TFLOP/s, 0.89x FA3, 1.07x stage 11; causal 523.0 TFLOP/s, 0.89x
 *            FA3, 1.04x stage 11.
 * Needs:     sm_90a: a Hopper GPU (H100, H200); wgmma and setmaxnreg exist nowhere else.
 * Run:       make kernel12 && ./run
 * Read:      docs/12_pingpong.md; §3.1 of the FlashAttention-3 paper (ping-pong scheduling); the
 *            PTX ISA, "bar.sync / bar.arrive".
 */
#include "flash_internal.h"
#include "flash_tma.h"
#include "hopper.cuh"
#include "ptx.cuh"

#include <math.h>
#include <stdint.h>

#include <atomic>

/* ---------------------------------------------------------------------------------------------
 * Tile configuration
 * ------------------------------------------------------------------------------------------- */

/* kBlockM query rows (64 per consumer warpgroup), kBlockN keys per tile, kNConsumers consumer
 * warpgroups (plus the producer's), kConsumerRegs registers per consumer thread after setmaxnreg,
 * kStages K/V slots in the ring, kMinBlocks blocks per SM (the register split shares the SM's
 * file among them). The macros let a build try other shapes (make tune K=12). */
template <int M, int N, int C, int R, int S, int B>
struct TileShape {
    static constexpr int kBlockM = M, kBlockN = N, kNConsumers = C, kConsumerRegs = R, kStages = S, kMinBlocks = B;
};
#ifndef FLASH_TILE_D64
#define FLASH_TILE_D64 128, 128, 2, 240, 2, 1
#endif
#ifndef FLASH_TILE_D128
#define FLASH_TILE_D128 128, 128, 2, 240, 2, 1
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

/* Issues the TMA copy of one [kRows, kHeadDim] tile whose first row is sequence position `row` of
 * (head, batch): one box of kRows x 64 columns per column block, each landing kRows * 128 bytes after
 * the one before, which is the layout of smem_idx. Rows past the sequence arrive as zeros. The
 * mbarrier `bar` is told to expect the whole tile's bytes (zeros included) with the one arrival it
 * waits for, so its phase completes when the last box has landed. Called by one thread. */
template <int kHeadDim, int kRows>
__device__ __forceinline__ void load_tile(uint32_t smem_base, const CUtensorMap *map, uint32_t bar, int head, int row, int batch) {
    mbarrier_arrive_expect_tx(bar, kRows * kHeadDim * 2);
#pragma unroll
    for (int c = 0; c < kHeadDim / 64; ++c) tma_load_4d(smem_base + c * kRows * 128, map, bar, 64 * c, head, row, batch);
}

/* S = Q_i K_j^T for this warpgroup's 64 rows: kHeadDim / 16 wgmma m64n{kBlockN}k16, one per k16
 * step of the head dimension. q_tile is the first byte of the warpgroup's rows of Q_i (column block
 * 0), k_tile that of K_j's slot. Step kk reads column block kk / 4 (kRows * 128 bytes further) at
 * byte 32 (kk % 4) of each 128-byte row: the descriptor's start address moves, nothing else.
 * Returns with the product in flight; the caller waits. Unlike stage 11 the caller fences
 * (gemm_fence), once for both GEMMs of a turn: a register definition between the two issues (the
 * fence's hold on O) would make ptxas serialise the wgmma. */
template <typename T, int kHeadDim, int kBlockM, int kBlockN>
__device__ __forceinline__ void qk_tile(float (&acc_s)[kBlockN / 8][4], uint32_t q_tile, uint32_t k_tile) {
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk)
        wgmma_ss(acc_s, wgmma_desc_k_major(q_tile + (kk / 4) * kBlockM * 128 + (kk % 4) * 32),
                 wgmma_desc_k_major(k_tile + (kk / 4) * kBlockN * 128 + (kk % 4) * 32), kk > 0, T());
    wgmma_commit();
}

/* Masks the keys of a tile starting at key col0 that lie past the end of the sequence or (causal)
 * past the diagonal of the thread's rows row_g and row_g + 8. Only boundary tiles come here. */
template <int kNTilesS>
__device__ __forceinline__ void mask_tile(float (&acc_s)[kNTilesS][4], int row_g, int col0, const flash_problem &p, int diag) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int col = col0 + nt * 8 + 2 * t + (e & 1);
            if (col >= p.seqlen_k || (p.causal && col > row_g + 8 * (e >> 1) + diag)) acc_s[nt][e] = -INFINITY;
        }
}

/* Online softmax of one S tile, FlashAttention-2 form: updates the running max m and sum l of
 * each row, returns the rescale factor alpha of the O rows and leaves P = exp2(scale_log2 (S - m))
 * in S's own registers, still in fp32: pack_p turns it into A fragments later, once the P V that
 * reads the previous tile's fragments has completed, so that one set of fragments is ever live. A
 * row's scores are spread over the 4 lanes of a quad; the max must agree across the quad every
 * tile (all four lanes subtract the same m), the sum need not until the end. */
template <int kNTilesS>
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

/* O += P V_j for this warpgroup's 64 rows: kBlockN / 16 wgmma m64n{kHeadDim}k16 with A = P from
 * registers and B = V_j MN-major from its slot v_tile. Step kk reads keys 16 kk .. 16 kk + 15: two
 * 8-row atoms, 2048 bytes further; the descriptor's LBO steps from head-dim columns 0..63 to
 * 64..127 (kBlockN * 128 bytes), its SBO from the first 8 keys of the step to the next 8. Returns
 * with the product in flight: the caller must not touch acc_o or p_frag before wgmma_wait. */
template <typename T, int kHeadDim, int kBlockN>
__device__ __forceinline__ void pv_tile(float (&acc_o)[kHeadDim / 8][4], const uint32_t (&p_frag)[kBlockN / 16][4], uint32_t v_tile) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) wgmma_rs(acc_o, p_frag[kk], wgmma_desc_mn_major(v_tile + kk * 2048, kBlockN), 1, T());
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
__global__ void __launch_bounds__((Tile<kHeadDim>::kNConsumers + 1) * 128, Tile<kHeadDim>::kMinBlocks)
flash_fwd_kernel(const flash_problem p, const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                 const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_o) {
    constexpr int kBlockM = Tile<kHeadDim>::kBlockM;  // query rows per block (Q_i)
    constexpr int kBlockN = Tile<kHeadDim>::kBlockN;  // keys per tile (K_j, V_j)
    constexpr int kNConsumers = Tile<kHeadDim>::kNConsumers;  // consumer warpgroups
    constexpr int kNThreads = (kNConsumers + 1) * 128;        // and the producer's
    constexpr int kStages = Tile<kHeadDim>::kStages;  // K/V slots in the ring
    static_assert(kStages >= 2, "V trails K by a tile: two slots at least");
    static_assert(kBlockM == 64 * kNConsumers, "each consumer warpgroup owns 64 query rows (wgmma's M)");
    static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "a wgmma N of the tile's keys (a TMA box of at most 256 rows), whole k16 steps of P V");
    static_assert(kHeadDim % 64 == 0, "whole 128-byte column blocks");
    /* The register split: the producer gives up all but kProducerRegs per thread, the consumers take
     * kConsumerRegs. setmaxnreg trades registers inside the block only: the block starts with
     * kLaunchRegs per thread (what __launch_bounds__ lets ptxas give each of kMinBlocks blocks of
     * the SM's 65536, in multiples of 8), the decrease returns the producer's surplus to the
     * block's pool, and the increase waits until that pool holds what it asks for. Asking for
     * more than the block owns waits forever. */
    constexpr int kProducerRegs = 24, kConsumerRegs = Tile<kHeadDim>::kConsumerRegs;
    constexpr int kLaunchRegs = (65536 / (Tile<kHeadDim>::kMinBlocks * kNThreads)) / 8 * 8;
    static_assert(128 * kProducerRegs + kNConsumers * 128 * kConsumerRegs <= kNThreads * kLaunchRegs,
                  "the register split fits the block's own registers (setmaxnreg.inc would wait forever)");
    static_assert(kConsumerRegs % 8 == 0 && kConsumerRegs <= 256, "setmaxnreg counts in multiples of 8, at most 256");
    static_assert(kNConsumers == 2, "ping-pong takes turns between two consumer warpgroups");
    /* Named barriers: 0 is __syncthreads, 1 + c the epilogue of consumer c, kTurnBarrier + c the
     * turn of consumer c on the tensor cores. */
    constexpr int kTurnBarrier = 1 + kNConsumers;
    constexpr int kNTilesS = kBlockN / 8;    // n8 tiles of S across the keys of K_j
    constexpr int kKStepsPV = kBlockN / 16;  // k16 steps of the keys in P V
    constexpr int kNTilesO = kHeadDim / 8;   // n8 tiles of O across the head dimension

    /* Q_i, then a ring of kStages K/V slots: the i-th K/V tile the block visits (K_{n-1-i}) lives in
     * slot i % kStages. Every tile starts on a 1024-byte boundary (tile sizes are multiples of 8
     * rows x 128 bytes), because the swizzle wgmma applies is a function of the address bits; the
     * base is rounded up to one (the launch adds 1 KiB). */
    extern __shared__ unsigned char smem_raw[];
    const uint32_t sQ_u32 = (smem_u32(smem_raw) + 1023) & ~1023u;
    unsigned char *smem = smem_raw + (sQ_u32 - smem_u32(smem_raw));
    T *sQ = reinterpret_cast<T *>(smem);  // Q_i [kBlockM, kHeadDim], read every tile; later O
    constexpr uint32_t kTileBytes = kBlockN * kHeadDim * sizeof(T);
    constexpr uint32_t kSlotBytes = 2 * kTileBytes;  // a slot: K_j then V_j
    const uint32_t sK_u32 = sQ_u32 + kBlockM * kHeadDim * sizeof(T), sV_u32 = sK_u32 + kTileBytes;
    /* The ring's barriers, a pair per slot and tensor. "full" (arrival count 1: the producer's
     * expect-tx) completes when the tile has landed; "empty" (arrival count kNConsumers: one
     * arrival per consumer warpgroup) when every consumer is done reading it. The u-th use of a slot
     * completes phase u of its full barrier and phase u of its empty barrier, named by parity u & 1. */
    __shared__ __align__(8) uint64_t bar_q, full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages];

    /* Causal query tiles further down have more keys to visit: launch those first so that the
     * last wave is made of short blocks. */
    const int m_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int head = blockIdx.y, batch = blockIdx.z;
    const int head_kv = head / (p.heads_q / p.heads_kv);  // GQA: heads_q / heads_kv query heads share one K/V head
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warpgroup = warp / 4;  // 0: the producer; 1 .. kNConsumers: the consumers
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

    /* Tiles from n_masked on hold a key past the end of the sequence, or (causal) a key past the
     * diagonal of this tile's first row; the tiles below it need no mask at all. */
    int n_masked = p.seqlen_k / kBlockN;
    if (p.causal) n_masked = min(n_masked, max(0, (row0 + diag + 1) / kBlockN));

    /* Thread 0 initialises the barriers and publishes them to the copy engine (the async proxy)
     * and, through the one __syncthreads of the kernel, to every thread. */
    const uint32_t bar_q_u32 = smem_u32(&bar_q);
    const uint32_t full_k_u32 = smem_u32(&full_k[0]), full_v_u32 = smem_u32(&full_v[0]);
    const uint32_t empty_k_u32 = smem_u32(&empty_k[0]), empty_v_u32 = smem_u32(&empty_v[0]);
    if (threadIdx.x == 0) {
        mbarrier_init(bar_q_u32, 1);
        for (int s = 0; s < kStages; ++s) {
            mbarrier_init(full_k_u32 + 8 * s, 1);
            mbarrier_init(full_v_u32 + 8 * s, 1);
            mbarrier_init(empty_k_u32 + 8 * s, kNConsumers);
            mbarrier_init(empty_v_u32 + 8 * s, kNConsumers);
        }
        fence_mbarrier_init();
    }
    __syncthreads();

    if (warpgroup == 0) {
        /* ---- the producer: one thread issues every copy, as far ahead as the ring allows ---- */
        setmaxnreg_dec<kProducerRegs>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&map_q);
            tma_prefetch_map(&map_k);
            tma_prefetch_map(&map_v);
            load_tile<kHeadDim, kBlockM>(sQ_u32, &map_q, bar_q_u32, head, row0, batch);
            /* Tile i goes into slot i % kStages once the consumers have released that slot's
             * previous tile, i - kStages: the (i / kStages)-th use of the slot waits for phase
             * i / kStages - 1 of its empty barrier. The first kStages tiles wait for the phase
             * "before phase 0", parity 1, which a fresh barrier reports complete. The copies go
             * in the order the consumers need them, K_0, K_1, V_0, K_2, V_1, ...: V trails K by a
             * tile, so a wait for a V slot never holds back the K tile needed first. */
            for (int i = 0; i <= n_blocks; ++i) {
                if (i < n_blocks) {
                    const int s = i % kStages;
                    mbarrier_wait(empty_k_u32 + 8 * s, ((i / kStages) & 1) ^ 1);
                    load_tile<kHeadDim, kBlockN>(sK_u32 + s * kSlotBytes, &map_k, full_k_u32 + 8 * s, head_kv,
                                                 (n_blocks - 1 - i) * kBlockN, batch);
                }
                if (i > 0) {
                    const int iv = i - 1, s = iv % kStages;
                    mbarrier_wait(empty_v_u32 + 8 * s, ((iv / kStages) & 1) ^ 1);
                    load_tile<kHeadDim, kBlockN>(sV_u32 + s * kSlotBytes, &map_v, full_v_u32 + 8 * s, head_kv,
                                                 (n_blocks - 1 - iv) * kBlockN, batch);
                }
            }
        }
        return;
    }

    /* ---- the consumers: both GEMMs and the softmax, nothing else ---- */
    setmaxnreg_inc<kConsumerRegs>();
    const int consumer = warpgroup - 1;
    /* Consumer warp w (of all the consumers' warps) holds rows 16 w .. 16 w + 15 of Q_i, S and O:
     * in every accumulator, c[0..1] of row g, c[2..3] of row g + 8. */
    const int warp_row0 = (warp - 4) * 16;
    const int row_g = row0 + warp_row0 + g;  // rows row_g + 8 h
    /* The warpgroup's 64 rows of Q_i start 64 rows (8 atoms) into each column block. */
    const uint32_t q_tile = sQ_u32 + consumer * 64 * 128;
    /* One thread per warpgroup releases a slot: the wgmma that read it belong to the whole
     * warpgroup, and its wait has seen them complete. */
    const bool releases = threadIdx.x % 128 == 0;

    /* Software pipeline, as in stage 10: V trails K by one tile. Iteration j reads K_j and
     * V_{j+1}. */
    mbarrier_wait(bar_q_u32, 0);

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

    /* Ping-pong: the two consumer warpgroups take turns issuing their GEMMs. Warpgroup c waits at
     * named barrier kTurnBarrier + c until the other has issued its GEMMs and arrived there; then
     * it issues its own and arrives at the other's. So the tensor cores run one warpgroup's S and
     * P V while the other computes its softmax. Each barrier counts 256 threads: the 128 that
     * wait and the 128 that arrive. Consumer 1 opens the first turn for consumer 0, and skips its
     * last arrival, so that every arrival meets a wait. */
    if (consumer == 1) named_barrier_arrive(kTurnBarrier + 0, 256);

    /* The first tile (j = n - 1) has no P V before it: S and the softmax alone. */
    {
        const int n_block = n_blocks - 1;
        mbarrier_wait(full_k_u32, 0);
        float acc_s[kNTilesS][4];
        gemm_fence(acc_s, acc_o);
        named_barrier_sync(kTurnBarrier + consumer, 256);
        qk_tile<T, kHeadDim, kBlockM, kBlockN>(acc_s, q_tile, sK_u32);
        if (consumer == 0 || n_block > 0) named_barrier_arrive(kTurnBarrier + 1 - consumer, 256);
        wgmma_wait<0>();
        wgmma_hold(acc_s);
        if (releases) mbarrier_arrive(empty_k_u32);
        if (n_block >= n_masked) mask_tile(acc_s, row_g, n_block * kBlockN, p, diag);
        softmax_tile(acc_s, m, l, alpha, scale_log2);
        pack_p<T>(acc_s, p_frag);
    }

    /* The main loop: the P V of tile j + 1 and S of tile j in one turn, then the softmax of tile j
     * while the tensor cores finish this warpgroup's P V and run the other warpgroup's GEMMs. */
    for (int n_block = n_blocks - 2; n_block >= 0; --n_block) {
        const int col0 = n_block * kBlockN;
        /* Tile j is the i-th of the block: its slot, and the parity of the phase its copy completes;
         * V_{j+1}, whose P V this iteration runs, is the (i - 1)-th. */
        const int i = n_blocks - 1 - n_block;
        const int stage = i % kStages, stage_prev = (i - 1) % kStages;
        mbarrier_wait(full_k_u32 + 8 * stage, (i / kStages) & 1);
        mbarrier_wait(full_v_u32 + 8 * stage_prev, ((i - 1) / kStages) & 1);
        /* O *= alpha of tile j + 1 before its P V is issued below. */
        rescale_o<kHeadDim>(acc_o, alpha);

        /* This warpgroup's turn: both GEMMs go to the tensor cores back to back, then the turn
         * passes to the other warpgroup. */
        float acc_s[kNTilesS][4];
        gemm_fence(acc_s, acc_o);
        named_barrier_sync(kTurnBarrier + consumer, 256);
        qk_tile<T, kHeadDim, kBlockM, kBlockN>(acc_s, q_tile, sK_u32 + stage * kSlotBytes);
        pv_tile<T, kHeadDim, kBlockN>(acc_o, p_frag, sV_u32 + stage_prev * kSlotBytes);
        if (consumer == 0 || n_block > 0) named_barrier_arrive(kTurnBarrier + 1 - consumer, 256);

        /* S first: its group was committed first, the P V group may still run. */
        wgmma_wait<1>();
        wgmma_hold(acc_s);
        if (releases) mbarrier_arrive(empty_k_u32 + 8 * stage);
        if (n_block >= n_masked) mask_tile(acc_s, row_g, col0, p, diag);
        softmax_tile(acc_s, m, l, alpha, scale_log2);
        wgmma_wait<0>();
        wgmma_hold(acc_o);
        if (releases) mbarrier_arrive(empty_v_u32 + 8 * stage_prev);
        /* Until the wait, p_frag was the tensor core's operand: only now may it change. */
        pack_p<T>(acc_s, p_frag);
    }
    /* The last P V: V_0 was in the last copy, whose barrier nobody has waited for yet. Its slot is
     * never refilled, so it is not released. It needs no turn: only P V is left, of this
     * warpgroup and of the other, and the turns exist to interleave softmaxes with GEMMs. */
    const int i_last = n_blocks - 1;
    mbarrier_wait(full_v_u32 + 8 * (i_last % kStages), (i_last / kStages) & 1);
    rescale_o<kHeadDim>(acc_o, alpha);
    wgmma_hold(acc_o);
    wgmma_fence();
    pv_tile<T, kHeadDim, kBlockN>(acc_o, p_frag, sV_u32 + (i_last % kStages) * kSlotBytes);
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
     * Q_i, the last of them (the last Q K^T) has completed, the warp writes only its own 16 rows,
     * and the TMA store below reads only its warpgroup's 64. */
    T *sO = sQ;
#pragma unroll
    for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            *reinterpret_cast<uint32_t *>(&sO[smem_idx<kBlockM>(warp_row0 + g + 8 * h, nt * 8 + 2 * t)]) =
                pack_float2(acc_o[nt][2 * h] * inv_l[h], acc_o[nt][2 * h + 1] * inv_l[h], T());
    /* The warpgroup's 64 rows go out as kHeadDim / 64 TMA boxes, issued by its first thread once
     * all four warps have written their rows: the stores above are generic-proxy writes that the
     * copy engine reads, hence the proxy fence in every writing thread before the barrier. Rows
     * past seqlen_q are clipped by the engine. The issuing thread waits until the engine has read
     * the tile, so that the block's shared memory outlives the copy. */
    fence_proxy_async();
    named_barrier_sync(1 + consumer, 128);
    if (threadIdx.x % 128 == 0) {
#pragma unroll
        for (int c = 0; c < kHeadDim / 64; ++c)
            tma_store_4d(&map_o, q_tile + c * kBlockM * 128, 64 * c, head, row0 + 64 * consumer, batch);
        tma_store_commit();
        tma_store_wait_read();
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

/* Shared memory of one block: Q_i and kStages K/V slots, plus 1 KiB to align the tiles. */
template <typename T, int kHeadDim>
constexpr int smem_bytes() {
    return (Tile<kHeadDim>::kBlockM + 2 * Tile<kHeadDim>::kStages * Tile<kHeadDim>::kBlockN) * kHeadDim * (int)sizeof(T) + 1024;
}

/* Above 48 KiB a block must opt in to dynamic shared memory, once per instantiation and device:
 * an atomic flag per device, as in stage 08. */
constexpr int kMaxDevices = 64;

/* The tensor maps are encoded on every call, inside the call the caller times: four calls of
 * cuTensorMapEncodeTiled, a few microseconds of host time each, while the kernel takes milliseconds.
 * A map holds the tensor's address and sizes, so a cache would need all of them (and the device) as
 * its key to never hand a kernel the map of a freed or reshaped tensor; not caching cannot go
 * stale. The maps travel as kernel parameters (__grid_constant__), so each launch owns its copy. */
template <typename T, int kHeadDim>
static int launch(const flash_problem *p, cudaStream_t stream) {
    constexpr int kBlockM = Tile<kHeadDim>::kBlockM, kBlockN = Tile<kHeadDim>::kBlockN;
    constexpr int kSmemBytes = smem_bytes<T, kHeadDim>();
    static std::atomic<bool> opted_in[kMaxDevices];
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return flash_set_error(FLASH_E_CUDA, "kernel12_pingpong: no current device: %s", cudaGetErrorString(err));
    const bool cached = device < kMaxDevices;
    if (!(cached && opted_in[device].load(std::memory_order_acquire))) {
        err = cudaFuncSetAttribute(flash_fwd_kernel<T, kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (err != cudaSuccess)
            return flash_set_error(FLASH_E_CUDA, "kernel12_pingpong: %d bytes of shared memory refused: %s", kSmemBytes,
                                   cudaGetErrorString(err));
        if (cached) opted_in[device].store(true, std::memory_order_release);
    }
    CUtensorMap map_q, map_k, map_v, map_o;
    int rc = flash_tma_map(&map_q, p->q, p->dtype, p->batch, p->seqlen_q, p->heads_q, kHeadDim, kBlockM, "kernel12_pingpong", "q");
    if (!rc) rc = flash_tma_map(&map_k, p->k, p->dtype, p->batch, p->seqlen_k, p->heads_kv, kHeadDim, kBlockN, "kernel12_pingpong", "k");
    if (!rc) rc = flash_tma_map(&map_v, p->v, p->dtype, p->batch, p->seqlen_k, p->heads_kv, kHeadDim, kBlockN, "kernel12_pingpong", "v");
    if (!rc) rc = flash_tma_map(&map_o, p->o, p->dtype, p->batch, p->seqlen_q, p->heads_q, kHeadDim, 64, "kernel12_pingpong", "o");
    if (rc) return rc;
    const dim3 grid((p->seqlen_q + kBlockM - 1) / kBlockM, p->heads_q, p->batch);
    flash_fwd_kernel<T, kHeadDim><<<grid, (Tile<kHeadDim>::kNConsumers + 1) * 128, kSmemBytes, stream>>>(*p, map_q, map_k, map_v, map_o);
    return flash_launch_status("kernel12_pingpong");
}

extern "C" int flash_forward_kernel12(const flash_problem *p, cudaStream_t stream) {
    if (p->dtype == FLASH_BF16)
        return p->head_dim == 64 ? launch<__nv_bfloat16, 64>(p, stream) : launch<__nv_bfloat16, 128>(p, stream);
    return p->head_dim == 64 ? launch<__half, 64>(p, stream) : launch<__half, 128>(p, stream);
}
