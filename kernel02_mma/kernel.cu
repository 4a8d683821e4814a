/*
 * Stage 02 - mma: S = Q K^T and O += P V on the tensor cores.
 *
 * Technique: mma.sync.m16n8k16 with f32 accumulate. Each warp owns 16 query rows (one m16 tile);
 *            a thread holds its pieces of Q, S, P and O as mma fragments in registers. Fragments
 *            are read from shared memory by hand, with ordinary 32-bit loads that follow the
 *            fragment layout (row = lane / 4, column = 2 * (lane % 4)). The softmax works on the
 *            S accumulators directly: each row lives in the four lanes of a quad, so its max and
 *            sum take two shuffles. P never leaves the registers: two n8 tiles of S, converted
 *            pairwise to 16 bits, are exactly the A fragment of one k16 slice of P V.
 * Changed:   the CUDA-core dot products and the per-row loop of stage 01 are gone; tiles are now
 *            64 x 64 and a block computes all its rows at once. The softmax is still the textbook
 *            one (expf of scaled scores, O and l rescaled every tile) until stage 07.
 * Bottleneck: shared memory. Each fragment costs one 32-bit load per register, V needs two 16-bit
 *            loads per register (it is read transposed), and with 128- or 256-byte rows the eight
 *            rows a warp touches at once sit in the same banks: up to 8-way conflicts.
 * Measured:  NVIDIA H200, B16 H16 S4096 D128 bf16, median of 4 alternating rounds (make rounds,
 *            commit a13f0f6): 55.6 TFLOP/s, 0.16x FA2, 5.03x stage 01; causal 53.8 TFLOP/s, 0.17x
 *            FA2, 5.01x stage 01.
 * Needs:     sm_80: an Ampere or newer GPU, like every stage of the chapters' path.
 * Run:       make kernel02 && ./run
 * Read:      docs/02_mma.md; in the blog series, https://lubits.ch/flash/Part-2 (the building
 *            blocks: mma.sync m16n8k16, its fragment layouts).
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

/* Element offset of (row, col) in a [rows, kHeadDim] shared-memory tile. Every shared-memory
 * access of the kernel goes through here, so that a later stage can change the layout in one
 * place. */
template <int kHeadDim>
__device__ __forceinline__ int smem_idx(int row, int col) {
    return row * kHeadDim + col;
}

/* ---------------------------------------------------------------------------------------------
 * The kernel
 * ------------------------------------------------------------------------------------------- */

/* Loads a [kRows, kHeadDim] tile from global to shared memory through registers, 16 bytes per
 * thread per step. Rows at or past `valid_rows` become zeros: their scores are masked and their
 * outputs never stored, but they must not hold NaN from uninitialised memory. */
template <typename T, int kHeadDim, int kRows>
__device__ __forceinline__ void load_tile(T *smem, const T *gmem, int64_t row_stride, int valid_rows) {
    constexpr int kChunksPerRow = kHeadDim * (int)sizeof(T) / 16;
    static_assert((kRows * kChunksPerRow) % kNThreads == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int i = 0; i < kRows * kChunksPerRow / kNThreads; ++i) {
        const int c = threadIdx.x + i * kNThreads;
        const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (row < valid_rows) v = *reinterpret_cast<const uint4 *>(gmem + row * row_stride + col);
        *reinterpret_cast<uint4 *>(&smem[smem_idx<kHeadDim>(row, col)]) = v;
    }
}

/* One 32-bit register of two adjacent 16-bit elements of a row: the A-fragment and the K-side
 * B-fragment pieces. */
template <int kHeadDim, typename T>
__device__ __forceinline__ uint32_t lds_pair(const T *smem, int row, int col) {
    return *reinterpret_cast<const uint32_t *>(&smem[smem_idx<kHeadDim>(row, col)]);
}

/* Two 16-bit elements of one column, from rows `row` and `row + 1`: V read transposed, as the B
 * fragment of P V wants it (k = key index runs along the register pair). */
template <int kHeadDim, typename T>
__device__ __forceinline__ uint32_t lds_col_pair(const T *smem, int row, int col) {
    const uint16_t lo = *reinterpret_cast<const uint16_t *>(&smem[smem_idx<kHeadDim>(row, col)]);
    const uint16_t hi = *reinterpret_cast<const uint16_t *>(&smem[smem_idx<kHeadDim>(row + 1, col)]);
    return (uint32_t)lo | ((uint32_t)hi << 16);
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

    /* Q_i is loaded once; each warp keeps its 16 rows as A fragments for the whole kernel. */
    load_tile<T, kHeadDim, kBlockM>(sQ, q + row0 * q_row_stride, q_row_stride, p.seqlen_q - row0);
    __syncthreads();
    uint32_t q_frag[kKSteps][4];
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
        q_frag[kk][0] = lds_pair<kHeadDim>(sQ, warp_row0 + g, kk * 16 + 2 * t);
        q_frag[kk][1] = lds_pair<kHeadDim>(sQ, warp_row0 + g + 8, kk * 16 + 2 * t);
        q_frag[kk][2] = lds_pair<kHeadDim>(sQ, warp_row0 + g, kk * 16 + 2 * t + 8);
        q_frag[kk][3] = lds_pair<kHeadDim>(sQ, warp_row0 + g + 8, kk * 16 + 2 * t + 8);
    }

    float m[2] = {-INFINITY, -INFINITY};  // running max of the scaled scores of rows g, g + 8
    float l[2] = {0.0f, 0.0f};            // running sum of exp(score - m)
    float acc_o[kNTilesO][4];             // O, unnormalised: [head-dim n8 tile][fragment register]
#pragma unroll
    for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[nt][e] = 0.0f;

    for (int n_block = 0; n_block < n_blocks; ++n_block) {
        const int col0 = n_block * kBlockN;
        /* Every warp must be done with the previous K_j, V_j before they are overwritten. */
        __syncthreads();
        load_tile<T, kHeadDim, kBlockN>(sK, k + col0 * kv_row_stride, kv_row_stride, p.seqlen_k - col0);
        load_tile<T, kHeadDim, kBlockN>(sV, v + col0 * kv_row_stride, kv_row_stride, p.seqlen_k - col0);
        /* ... and the new tiles must be complete before any warp reads them. */
        __syncthreads();

        /* S = Q_i K_j^T: [16, kBlockN] per warp, as kNTilesS accumulator tiles. The B operand of
         * an n8 tile is K_j read row-wise: b[0] = K[n = g][k = 2t, 2t+1]. */
        float acc_s[kNTilesS][4];
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_s[nt][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
            for (int nt = 0; nt < kNTilesS; ++nt) {
                uint32_t k_frag[2];
                k_frag[0] = lds_pair<kHeadDim>(sK, nt * 8 + g, kk * 16 + 2 * t);
                k_frag[1] = lds_pair<kHeadDim>(sK, nt * 8 + g, kk * 16 + 2 * t + 8);
                mma_m16n8k16(acc_s[nt], q_frag[kk], k_frag, T());
            }
        }

        /* Scale, and mask the keys past the end of the sequence and (causal) past the diagonal. */
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = col0 + nt * 8 + 2 * t + (e & 1);
                float s = acc_s[nt][e] * p.softmax_scale;
                if (col >= p.seqlen_k || (p.causal && col > row[e >> 1] + diag)) s = -INFINITY;
                acc_s[nt][e] = s;
            }

        /* Online softmax, textbook form. A row's kBlockN scores are spread over the 4 lanes of a
         * quad (lanes 4g .. 4g+3), so a row reduction is a local one plus two xor-shuffles. */
        float m_tile[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) m_tile[e >> 1] = fmaxf(m_tile[e >> 1], acc_s[nt][e]);
        float alpha[2], m_safe[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 1));
            m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 2));
            const float m_new = fmaxf(m[h], m_tile[h]);
            /* -inf guard: a row that has seen only masked keys keeps m = -inf, and
             * exp(-inf - (-inf)) would be NaN. Subtracting 0 instead gives exp(-inf) = 0. */
            m_safe[h] = (m_new == -INFINITY) ? 0.0f : m_new;
            alpha[h] = expf(m[h] - m_safe[h]);
            m[h] = m_new;
        }
        float p_sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int nt = 0; nt < kNTilesS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                acc_s[nt][e] = expf(acc_s[nt][e] - m_safe[e >> 1]);
                p_sum[e >> 1] += acc_s[nt][e];
            }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            p_sum[h] += __shfl_xor_sync(0xffffffffu, p_sum[h], 1);
            p_sum[h] += __shfl_xor_sync(0xffffffffu, p_sum[h], 2);
            l[h] = l[h] * alpha[h] + p_sum[h];
        }
#pragma unroll
        for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_o[nt][e] *= alpha[e >> 1];

        /* O += P V_j. The accumulators of S tiles 2kk and 2kk+1 hold keys 16kk .. 16kk+15 of rows
         * g and g+8 in exactly the places the A fragment of a k16 slice wants them, so P is just
         * converted pairwise in registers. V_j is the B operand read transposed:
         * b[0] = V[k = 2t, 2t+1][n = g]. */
#pragma unroll
        for (int kk = 0; kk < kKStepsPV; ++kk) {
            uint32_t p_frag[4];
            p_frag[0] = pack_float2(acc_s[2 * kk][0], acc_s[2 * kk][1], T());
            p_frag[1] = pack_float2(acc_s[2 * kk][2], acc_s[2 * kk][3], T());
            p_frag[2] = pack_float2(acc_s[2 * kk + 1][0], acc_s[2 * kk + 1][1], T());
            p_frag[3] = pack_float2(acc_s[2 * kk + 1][2], acc_s[2 * kk + 1][3], T());
#pragma unroll
            for (int nt = 0; nt < kNTilesO; ++nt) {
                uint32_t v_frag[2];
                v_frag[0] = lds_col_pair<kHeadDim>(sV, kk * 16 + 2 * t, nt * 8 + g);
                v_frag[1] = lds_col_pair<kHeadDim>(sV, kk * 16 + 2 * t + 8, nt * 8 + g);
                mma_m16n8k16(acc_o[nt], p_frag, v_frag, T());
            }
        }
    }

    /* Epilogue: O = acc_o / l. A row that saw no key at all (causal, seqlen_q > seqlen_k) has
     * l = 0: FlashAttention-2 writes O = 0 and LSE = +inf for it. */
    float inv_l[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) inv_l[h] = (l[h] > 0.0f) ? 1.0f / l[h] : 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNTilesO; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            if (row[h] < p.seqlen_q)
                *reinterpret_cast<uint32_t *>(&o[row[h] * q_row_stride + nt * 8 + 2 * t]) =
                    pack_float2(acc_o[nt][2 * h] * inv_l[h], acc_o[nt][2 * h + 1] * inv_l[h], T());
    if (p.lse && t == 0) {
        float *lse = p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q;
#pragma unroll
        for (int h = 0; h < 2; ++h)
            if (row[h] < p.seqlen_q) lse[row[h]] = (l[h] > 0.0f) ? m[h] + logf(l[h]) : INFINITY;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Launch
 * ------------------------------------------------------------------------------------------- */

template <typename T, int kHeadDim>
static int launch(const flash_problem *p, cudaStream_t stream) {
    const dim3 grid((p->seqlen_q + kBlockM - 1) / kBlockM, p->heads_q, p->batch);
    flash_fwd_kernel<T, kHeadDim><<<grid, kNThreads, 0, stream>>>(*p);
    return flash_launch_status("kernel02_mma");
}

extern "C" int flash_forward_kernel02(const flash_problem *p, cudaStream_t stream) {
    if (p->dtype == FLASH_BF16)
        return p->head_dim == 64 ? launch<__nv_bfloat16, 64>(p, stream) : launch<__nv_bfloat16, 128>(p, stream);
    return p->head_dim == 64 ? launch<__half, 64>(p, stream) : launch<__half, 128>(p, stream);
}
