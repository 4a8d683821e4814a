/*
 * Stage 01 - naive: the FlashAttention-2 forward algorithm on CUDA cores.
 *
 * Technique: tiling plus the online softmax, in fp32 on the ordinary FMA units. One thread block
 *            owns one tile Q_i of kBlockM query rows of one (batch, head); it walks the key/value
 *            tiles K_j, V_j through shared memory, keeps a running row max m and row sum l, and
 *            rescales its output accumulator O whenever m grows. The seqlen_q x seqlen_k score
 *            matrix never exists anywhere, not even one row of it per block.
 * Changed:   this is the first stage.
 * Bottleneck: arithmetic. Every multiply-add runs on the FP32 pipe, 16x to 32x slower than the
 *            tensor cores that stage 02 brings in.
 * Measured:  NVIDIA H200, B16 H16 S4096 D128 bf16, median of 4 alternating rounds (make rounds,
 *            commit a13f0f6): 11.1 TFLOP/s, 0.03x FA2; causal 10.7 TFLOP/s, 0.03x FA2.
 * Needs:     sm_80: an Ampere or newer GPU, like every stage of the chapters' path.
 * Run:       make kernel01 && ./run
 * Read:      docs/01_naive.md; in the blog series, https://lubits.ch/flash/Part-1 (scope,
 *            FlashAttention-2 recalled) and https://lubits.ch/flash/Part-3 (its first kernel: the
 *            work split, the online softmax).
 */
#include "flash_internal.h"
#include "ptx.cuh"

#include <math.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------
 * Tile configuration
 * ------------------------------------------------------------------------------------------- */

constexpr int kBlockM = 64;                      // query rows per block (Q_i)
constexpr int kBlockN = 32;                      // keys per tile (K_j, V_j): one key per lane
constexpr int kNWarps = 4;
constexpr int kNThreads = kNWarps * 32;
constexpr int kRowsPerWarp = kBlockM / kNWarps;  // each warp walks its 16 rows one by one

static_assert(kBlockM % kNWarps == 0, "the rows of Q_i split evenly over the warps");
static_assert(kBlockN == 32, "one key per lane: a score row is one register per lane");

/* ---------------------------------------------------------------------------------------------
 * The kernel
 * ------------------------------------------------------------------------------------------- */

/* Loads a [rows, kHeadDim] tile of 16-bit elements from global memory into shared memory, 16 bytes
 * per thread per step; rows at or past `valid_rows` become zeros so that the math on them is
 * harmless (their results are masked or never stored). */
template <typename T, int kHeadDim, int kRows, int kSmemStride>
__device__ __forceinline__ void load_tile(T *smem, const T *gmem, int64_t row_stride, int valid_rows) {
    constexpr int kChunksPerRow = kHeadDim * (int)sizeof(T) / 16;
    for (int c = threadIdx.x; c < kRows * kChunksPerRow; c += kNThreads) {
        const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (row < valid_rows) v = *reinterpret_cast<const uint4 *>(gmem + row * row_stride + col);
        /* The padded smem row is only 4-byte aligned, so the 16 bytes go in as four words. */
        uint32_t *dst = reinterpret_cast<uint32_t *>(smem + row * kSmemStride + col);
        dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
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

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kNThreads, 1)
flash_fwd_kernel(const flash_problem p) {
    static_assert(kHeadDim % 32 == 0, "each lane owns kHeadDim / 32 output columns");
    constexpr int kColsPerLane = kHeadDim / 32;
    /* Rows padded by one 32-bit word: lane j reads K_j[j][d..d+1], and an unpadded 256-byte row
     * stride would put all 32 lanes in the same bank. */
    constexpr int kSmemStride = kHeadDim + 2;

    __shared__ __align__(16) T sQ[kBlockM * kSmemStride];  // Q_i  [kBlockM, kHeadDim]
    __shared__ __align__(16) T sK[kBlockN * kSmemStride];  // K_j  [kBlockN, kHeadDim]
    __shared__ __align__(16) T sV[kBlockN * kSmemStride];  // V_j  [kBlockN, kHeadDim]

    const int m_block = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int head_kv = head / (p.heads_q / p.heads_kv);  // GQA: heads_q / heads_kv query heads share one K/V head
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

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

    load_tile<T, kHeadDim, kBlockM, kSmemStride>(sQ, q + row0 * q_row_stride, q_row_stride, p.seqlen_q - row0);

    /* Per-row state, replicated in every lane of the warp that owns the row. */
    float m[kRowsPerWarp];                  // running max of the scaled scores
    float l[kRowsPerWarp];                  // running sum of exp(score - m)
    float acc_o[kRowsPerWarp][kColsPerLane];  // unnormalised O; lane owns columns lane + 32 * c
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < kColsPerLane; ++c) acc_o[r][c] = 0.0f;
    }

    for (int n_block = 0; n_block < n_blocks; ++n_block) {
        const int col0 = n_block * kBlockN;
        /* Every warp must be done with the previous K_j, V_j before they are overwritten. */
        __syncthreads();
        load_tile<T, kHeadDim, kBlockN, kSmemStride>(sK, k + col0 * kv_row_stride, kv_row_stride, p.seqlen_k - col0);
        load_tile<T, kHeadDim, kBlockN, kSmemStride>(sV, v + col0 * kv_row_stride, kv_row_stride, p.seqlen_k - col0);
        /* ... and the new tiles (and Q_i, on the first pass) must be complete before anyone reads. */
        __syncthreads();

        const int key = col0 + lane;  // the key this lane scores
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const int row_local = warp * kRowsPerWarp + r;
            const int row = row0 + row_local;

            /* S = Q_i K_j^T for one row: lane j computes the dot product with key j. Q is read as a
             * broadcast (all lanes, same address), K as one padded row per lane. */
            float s = 0.0f;
#pragma unroll 8
            for (int d = 0; d < kHeadDim; d += 2) {
                const float2 qd = unpack_float2(*reinterpret_cast<const uint32_t *>(&sQ[row_local * kSmemStride + d]), T());
                const float2 kd = unpack_float2(*reinterpret_cast<const uint32_t *>(&sK[lane * kSmemStride + d]), T());
                s = fmaf(qd.x, kd.x, s);
                s = fmaf(qd.y, kd.y, s);
            }
            s *= p.softmax_scale;
            if (key >= p.seqlen_k || (p.causal && key > row + diag)) s = -INFINITY;

            /* Online softmax: the new max over the row so far, then rescale what was summed under
             * the old max by exp(m_old - m_new). */
            float m_tile = s;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) m_tile = fmaxf(m_tile, __shfl_xor_sync(0xffffffffu, m_tile, off));
            const float m_new = fmaxf(m[r], m_tile);
            /* -inf guard: a row that has seen only masked keys keeps m = -inf, and
             * exp(-inf - (-inf)) would be NaN. Subtracting 0 instead gives exp(-inf) = 0. */
            const float m_safe = (m_new == -INFINITY) ? 0.0f : m_new;
            const float pj = expf(s - m_safe);
            const float alpha = expf(m[r] - m_safe);
            float p_sum = pj;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) p_sum += __shfl_xor_sync(0xffffffffu, p_sum, off);
            l[r] = l[r] * alpha + p_sum;
            m[r] = m_new;

            /* O += P V_j: lane owns columns lane + 32c and takes p_j from lane j by shuffle. */
#pragma unroll
            for (int c = 0; c < kColsPerLane; ++c) acc_o[r][c] *= alpha;
#pragma unroll 4
            for (int j = 0; j < kBlockN; ++j) {
                const float pjj = __shfl_sync(0xffffffffu, pj, j);
#pragma unroll
                for (int c = 0; c < kColsPerLane; ++c) {
                    const float vd = (float)sV[j * kSmemStride + lane + 32 * c];
                    acc_o[r][c] = fmaf(pjj, vd, acc_o[r][c]);
                }
            }
        }
    }

    /* Epilogue: O = acc_o / l. A row that saw no key at all (causal, seqlen_q > seqlen_k) has
     * l = 0: FlashAttention-2 writes O = 0 and LSE = +inf for it. */
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int row = row0 + warp * kRowsPerWarp + r;
        if (row >= p.seqlen_q) continue;
        const float inv_l = (l[r] > 0.0f) ? 1.0f / l[r] : 0.0f;
#pragma unroll
        for (int c = 0; c < kColsPerLane; ++c) o[row * q_row_stride + lane + 32 * c] = (T)(acc_o[r][c] * inv_l);
        if (p.lse && lane == 0) {
            float *lse = p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q;
            lse[row] = (l[r] > 0.0f) ? m[r] + logf(l[r]) : INFINITY;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Launch
 * ------------------------------------------------------------------------------------------- */

template <typename T, int kHeadDim>
static int launch(const flash_problem *p, cudaStream_t stream) {
    const dim3 grid((p->seqlen_q + kBlockM - 1) / kBlockM, p->heads_q, p->batch);
    flash_fwd_kernel<T, kHeadDim><<<grid, kNThreads, 0, stream>>>(*p);
    return flash_launch_status("kernel01_naive");
}

extern "C" int flash_forward_kernel01(const flash_problem *p, cudaStream_t stream) {
    if (p->dtype == FLASH_BF16)
        return p->head_dim == 64 ? launch<__nv_bfloat16, 64>(p, stream) : launch<__nv_bfloat16, 128>(p, stream);
    return p->head_dim == 64 ? launch<__half, 64>(p, stream) : launch<__half, 128>(p, stream);
}
