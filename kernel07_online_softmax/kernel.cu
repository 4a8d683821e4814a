/*
 * Stage 07 - online_softmax: the FlashAttention-2 softmax (exp2 with the scale folded in, lazy l).
 *
 * Technique: the FlashAttention-2 softmax. Scores stay in raw units and m is their raw max; since
 *            exp(scale * (s - m)) = 2^(s * scale * log2(e) - m * scale * log2(e)), each score costs
 *            one FFMA (s * scale_log2 - m_scaled) and one MUFU.EX2, with no separate scaling pass
 *            and no expf range reduction. The row sum l stays a per-thread partial sum (rescaled
 *            like O) and is reduced across the quad once, after the last tile; 1/l is applied once,
 *            to O, at the end. The first tile has nothing to rescale, so it skips the rescale.
 *            -inf guards: a row whose keys so far are all masked has m = -inf; it subtracts 0
 *            instead of m_scaled, so that 2^(-inf - 0) = 0 rather than 2^(-inf + inf) = NaN.
 * Changed:   the scale-and-mask pass only masks; the softmax block uses fast_exp2 with the scale
 *            folded into its argument; the per-tile quad reduction of the sum moves to the
 *            epilogue; LSE is m * scale + log(l).
 * Bottleneck: the tiles and the launch shape are still the textbook 64 x 64 with 4 warps and 48 KiB
 *            of shared memory, chosen for readability, not for the card; masks are tested on every
 *            tile, and index arithmetic is recomputed inside the loop.
 * Measured:  NVIDIA H200, B16 H16 S4096 D128 bf16, median of 4 alternating rounds (make rounds,
 *            commit a13f0f6): 281.7 TFLOP/s, 0.82x FA2, 1.09x stage 06; causal 263.2 TFLOP/s, 0.82x
 *            FA2, 1.10x stage 06.
 * Needs:     sm_80: an Ampere or newer GPU, like every stage of the chapters' path.
 * Run:       make kernel07 && ./run
 * Read:      docs/07_online_softmax.md; in the blog series, https://lubits.ch/flash/Part-6 (the
 *            softmax in fewer instructions: exp2, one FFMA).
 */
#include "flash_internal.h"
#include "ptx.cuh"

#include <math.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------
 * Tile configuration
 * ------------------------------------------------------------------------------------------- */

constexpr int kBlockM = 64;                      // query rows per block (Q_i)
constexpr int kBlockN = 64;                      // keys per tile (K_j, V_j)
constexpr int kNWarps = 4;
constexpr int kNThreads = kNWarps * 32;
constexpr int kRowsPerWarp = kBlockM / kNWarps;  // one m16 tile per warp

static_assert(kRowsPerWarp == 16, "each warp owns exactly one m16 row tile of Q_i, S and O");
static_assert(kBlockN % 16 == 0, "K_j splits into n8 tiles for S and k16 slices for P V");

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

/* Issues the asynchronous copy of a [kRows, kHeadDim] tile from global to shared memory, 16 bytes
 * per thread per step; the caller commits and waits. Rows at or past `valid_rows` become zeros:
 * their scores are masked and their outputs never stored, but they must not hold NaN from
 * uninitialised memory. Their source address is clamped to row 0, which always exists, although
 * with src-size 0 nothing is read. */
template <typename T, int kHeadDim, int kRows>
__device__ __forceinline__ void load_tile(T *smem, const T *gmem, int64_t row_stride, int valid_rows) {
    constexpr int kChunksPerRow = kHeadDim * (int)sizeof(T) / 16;
    static_assert((kRows * kChunksPerRow) % kNThreads == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int i = 0; i < kRows * kChunksPerRow / kNThreads; ++i) {
        const int c = threadIdx.x + i * kNThreads;
        const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
        const bool valid = row < valid_rows;
        cp_async_16(smem_u32(&smem[smem_idx<kHeadDim>(row, col)]), gmem + (valid ? row : 0) * row_stride + col,
                    valid ? 16 : 0);
    }
}

/* The shared-memory address this lane hands to ldmatrix for the four 8x8 matrices at
 * (row, col), (row + 8, col), (row, col + 8), (row + 8, col + 8) of a 16x16 tile: lanes 0-7 name
 * the rows of matrix 0, lanes 8-15 those of matrix 1, and so on. That order makes r[0..3] the A
 * fragment a[0..3] of the tile, and with .trans the B fragments b[0], b[1] of its two n8 columns. */
template <int kHeadDim, typename T>
__device__ __forceinline__ uint32_t ldsm_addr_a(const T *smem, int row, int col, int lane) {
    return smem_u32(&smem[smem_idx<kHeadDim>(row + lane % 16, col + (lane / 16) * 8)]);
}

/* The same for two n8 B fragments of K (row = key n, col = k): matrices (n, k), (n, k + 8),
 * (n + 8, k), (n + 8, k + 8), so that r[0], r[1] are b[0], b[1] of key tile n and r[2], r[3] those
 * of key tile n + 8. */
template <int kHeadDim, typename T>
__device__ __forceinline__ uint32_t ldsm_addr_b(const T *smem, int row, int col, int lane) {
    return smem_u32(&smem[smem_idx<kHeadDim>(row + lane % 8 + (lane / 16) * 8, col + ((lane / 8) % 2) * 8)]);
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
__global__ void __launch_bounds__(kNThreads, 1)
flash_fwd_kernel(const flash_problem p) {
    constexpr int kKSteps = kHeadDim / 16;   // k16 slices of the head dimension in Q K^T
    constexpr int kNTilesS = kBlockN / 8;    // n8 tiles of S across the keys of K_j
    constexpr int kKStepsPV = kBlockN / 16;  // k16 slices of the keys in P V
    constexpr int kNTilesO = kHeadDim / 8;   // n8 tiles of O across the head dimension

    __shared__ __align__(16) T sQ[kBlockM * kHeadDim];  // Q_i  [kBlockM, kHeadDim]
    __shared__ __align__(16) T sK[kBlockN * kHeadDim];  // K_j  [kBlockN, kHeadDim]
    __shared__ __align__(16) T sV[kBlockN * kHeadDim];  // V_j  [kBlockN, kHeadDim]

    const int m_block = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
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

    /* The two rows this thread holds in every accumulator: c[0..1] in row g, c[2..3] in g + 8. */
    const int warp_row0 = warp * kRowsPerWarp;
    int row[2];
    row[0] = row0 + warp_row0 + g;
    row[1] = row[0] + 8;

    /* Q_i is loaded once; each warp keeps its 16 rows as A fragments for the whole kernel. K_0 is
     * put in flight behind it, as its own group, so that only Q is waited for here. */
    load_tile<T, kHeadDim, kBlockM>(sQ, q + row0 * q_row_stride, q_row_stride, p.seqlen_q - row0);
    cp_async_commit();
    load_tile<T, kHeadDim, kBlockN>(sK, k, kv_row_stride, p.seqlen_k);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    uint32_t q_frag[kKSteps][4];
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) ldmatrix_x4(q_frag[kk], ldsm_addr_a<kHeadDim>(sQ, warp_row0, kk * 16, lane));

    /* log2(e) folded into the scale: exp(scale * x) = 2^(scale_log2 * x). */
    const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
    float m[2] = {-INFINITY, -INFINITY};  // running max of the raw (unscaled) scores of rows g, g + 8
    float l[2] = {0.0f, 0.0f};            // this thread's part of the running sum of exp(scale * (s - m))
    float acc_o[kNTilesO][4];             // O, unnormalised: [head-dim n8 tile][fragment register]
#pragma unroll
    for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[nt][e] = 0.0f;

    for (int n_block = 0; n_block < n_blocks; ++n_block) {
        const int col0 = n_block * kBlockN;
        /* K_j must have landed before any warp reads it: wait_group covers this thread's own
         * copies, the barrier everybody else's. The barrier also means every warp is done with
         * P V_{j-1}, so sV may be overwritten now: V_j starts to load behind Q K_j^T. */
        cp_async_wait<0>();
        __syncthreads();
        load_tile<T, kHeadDim, kBlockN>(sV, v + col0 * kv_row_stride, kv_row_stride, p.seqlen_k - col0);
        cp_async_commit();

        /* S = Q_i K_j^T: [16, kBlockN] per warp, as kNTilesS accumulator tiles. The B operand of
         * an n8 tile is K_j read row-wise, two n8 tiles per ldmatrix.x4. */
        float acc_s[kNTilesS][4];
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_s[nt][e] = 0.0f;
        /* Fragments of k-slice kk + 1 are requested before the mma of slice kk consume theirs. */
        uint32_t k_frag[2][kNTilesS / 2][4];
#pragma unroll
        for (int nt = 0; nt < kNTilesS; nt += 2) ldmatrix_x4(k_frag[0][nt / 2], ldsm_addr_b<kHeadDim>(sK, nt * 8, 0, lane));
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
            if (kk + 1 < kKSteps)
#pragma unroll
                for (int nt = 0; nt < kNTilesS; nt += 2)
                    ldmatrix_x4(k_frag[(kk + 1) % 2][nt / 2], ldsm_addr_b<kHeadDim>(sK, nt * 8, (kk + 1) * 16, lane));
#pragma unroll
            for (int nt = 0; nt < kNTilesS; nt += 2) {
                mma_m16n8k16(acc_s[nt], q_frag[kk], &k_frag[kk % 2][nt / 2][0], T());
                mma_m16n8k16(acc_s[nt + 1], q_frag[kk], &k_frag[kk % 2][nt / 2][2], T());
            }
        }

        /* Mask the keys past the end of the sequence and (causal) past the diagonal. The scale is
         * applied later, inside the exponent. */
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = col0 + nt * 8 + 2 * t + (e & 1);
                if (col >= p.seqlen_k || (p.causal && col > row[e >> 1] + diag)) acc_s[nt][e] = -INFINITY;
            }

        /* Online softmax, FlashAttention-2 form. A row's kBlockN scores are spread over the 4 lanes
         * of a quad (lanes 4g .. 4g+3); the max must agree across the quad every tile (all four
         * lanes subtract the same m), the sum need not until the end. */
        float m_tile[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) m_tile[e >> 1] = fmaxf(m_tile[e >> 1], acc_s[nt][e]);
        float alpha[2], m_scaled[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 1));
            m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 2));
            const float m_new = fmaxf(m[h], m_tile[h]);
            /* -inf guard: a row that has seen only masked keys keeps m = -inf, and
             * 2^(-inf - (-inf)) would be NaN. Subtracting 0 instead gives 2^(-inf) = 0. */
            m_scaled[h] = (m_new == -INFINITY) ? 0.0f : m_new * scale_log2;
            alpha[h] = fast_exp2(fmaf(m[h], scale_log2, -m_scaled[h]));
            m[h] = m_new;
        }
        float p_sum[2] = {0.0f, 0.0f};
        /* fmaf, not s * scale_log2 - m: one rounding on every path. Written apart, the compiler
         * may fuse the two for some elements and not others (where a mask's select sits
         * between them), and a row's P would then depend on whether its key tile took the mask. */
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                acc_s[nt][e] = fast_exp2(fmaf(acc_s[nt][e], scale_log2, -m_scaled[e >> 1]));
                p_sum[e >> 1] += acc_s[nt][e];
            }
        /* On the first tile O and l are still zero: there is nothing to rescale. */
        if (n_block == 0) {
#pragma unroll
            for (int h = 0; h < 2; ++h) l[h] = p_sum[h];
        } else {
#pragma unroll
            for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + p_sum[h];
#pragma unroll
            for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc_o[nt][e] *= alpha[e >> 1];
        }

        /* V_j must have landed. The barrier also means every warp is done reading K_j, so K_{j+1}
         * can start to load behind P V_j. The last iteration commits an empty group, which keeps
         * the wait_group count uniform. */
        cp_async_wait<0>();
        __syncthreads();
        if (n_block + 1 < n_blocks)
            load_tile<T, kHeadDim, kBlockN>(sK, k + (col0 + kBlockN) * kv_row_stride, kv_row_stride,
                                            p.seqlen_k - col0 - kBlockN);
        cp_async_commit();

        /* O += P V_j. The accumulators of S tiles 2kk and 2kk+1 hold keys 16kk .. 16kk+15 of rows
         * g and g+8 in exactly the places the A fragment of a k16 slice wants them, so P is just
         * converted pairwise in registers. V_j is the B operand read transposed by ldmatrix.trans,
         * two n8 tiles of O per instruction. */
        uint32_t v_frag[2][kNTilesO / 2][4];
#pragma unroll
        for (int nt = 0; nt < kNTilesO; nt += 2) ldmatrix_x4_trans(v_frag[0][nt / 2], ldsm_addr_a<kHeadDim>(sV, 0, nt * 8, lane));
#pragma unroll
        for (int kk = 0; kk < kKStepsPV; ++kk) {
            if (kk + 1 < kKStepsPV)
#pragma unroll
                for (int nt = 0; nt < kNTilesO; nt += 2)
                    ldmatrix_x4_trans(v_frag[(kk + 1) % 2][nt / 2], ldsm_addr_a<kHeadDim>(sV, (kk + 1) * 16, nt * 8, lane));
            uint32_t p_frag[4];
            p_frag[0] = pack_float2(acc_s[2 * kk][0], acc_s[2 * kk][1], T());
            p_frag[1] = pack_float2(acc_s[2 * kk][2], acc_s[2 * kk][3], T());
            p_frag[2] = pack_float2(acc_s[2 * kk + 1][0], acc_s[2 * kk + 1][1], T());
            p_frag[3] = pack_float2(acc_s[2 * kk + 1][2], acc_s[2 * kk + 1][3], T());
#pragma unroll
            for (int nt = 0; nt < kNTilesO; nt += 2) {
                mma_m16n8k16(acc_o[nt], p_frag, &v_frag[kk % 2][nt / 2][0], T());
                mma_m16n8k16(acc_o[nt + 1], p_frag, &v_frag[kk % 2][nt / 2][2], T());
            }
        }
    }

    /* Epilogue: O = acc_o / l, after the one quad reduction of l. A row that saw no key at all
     * (causal, seqlen_q > seqlen_k) has l = 0: FlashAttention-2 writes O = 0 and LSE = +inf. */
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    float inv_l[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) inv_l[h] = (l[h] > 0.0f) ? 1.0f / l[h] : 0.0f;
    /* Stage this warp's 16 rows of O in sQ: the warp read only its own rows of Q_i (into
     * q_frag, before the loop), so no other warp can still need them. */
    T *sO = sQ;
#pragma unroll
    for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            *reinterpret_cast<uint32_t *>(&sO[smem_idx<kHeadDim>(warp_row0 + g + 8 * h, nt * 8 + 2 * t)]) =
                pack_float2(acc_o[nt][2 * h] * inv_l[h], acc_o[nt][2 * h + 1] * inv_l[h], T());
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
        for (int h = 0; h < 2; ++h)
            if (row[h] < p.seqlen_q) lse[row[h]] = (l[h] > 0.0f) ? m[h] * p.softmax_scale + logf(l[h]) : INFINITY;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Launch
 * ------------------------------------------------------------------------------------------- */

template <typename T, int kHeadDim>
static int launch(const flash_problem *p, cudaStream_t stream) {
    const dim3 grid((p->seqlen_q + kBlockM - 1) / kBlockM, p->heads_q, p->batch);
    flash_fwd_kernel<T, kHeadDim><<<grid, kNThreads, 0, stream>>>(*p);
    return flash_launch_status("kernel07_online_softmax");
}

extern "C" int flash_forward_kernel07(const flash_problem *p, cudaStream_t stream) {
    if (p->dtype == FLASH_BF16)
        return p->head_dim == 64 ? launch<__nv_bfloat16, 64>(p, stream) : launch<__nv_bfloat16, 128>(p, stream);
    return p->head_dim == 64 ? launch<__half, 64>(p, stream) : launch<__half, 128>(p, stream);
}
