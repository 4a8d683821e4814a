/*
 * reference.cu: the independent fp32 GPU reference, and the GPU reduction that compares an output
 * with it.
 *
 * Why a GPU reference at all: the headline problem (B16 Sq=Sk=4096 H16 D128) is 2.2e12 useful
 * flops; a CPU would take minutes. Why this one is trustworthy:
 *   - it shares no code with any stage and does not use online softmax: per query row it makes
 *     three passes over the keys, exactly as the formula reads,
 *        pass 1: m = max_j s_j                  (s_j = scale * <q_i, k_j>, visible keys only)
 *        pass 2: l = sum_j exp(s_j - m)
 *        pass 3: O = sum_j (exp(s_j - m) / l) * v_j,   LSE = m + log(l)
 *     recomputing the scores in each pass (same code, same order, so the same numbers);
 *   - all arithmetic is fp32 with accurate expf/logf (no fast-math) on inputs that are exact
 *     copies of the 16-bit values;
 *   - every run spot-checks it against the float64 CPU reference (cpu_ref.c).
 * Pass 3 also computes O_lowp, what a kernel with 16-bit P and O would get at best: P rounded to
 * the I/O dtype before multiplying V, O rounded at the end. max|O_lowp - O_ref| sets the tolerance.
 *
 * How it is made fast enough (~2.5x the useful flops, as passes 1-2 recompute QK^T): a block owns
 * 64 query rows of one (batch, head) and walks the keys in tiles of 64 staged in shared memory as
 * fp32. 256 threads form a 16 x 16 grid; thread (ty, tx) owns the 4 x 4 scores of rows ty + 16a
 * and keys tx + 16c, so every shared-memory value it loads feeds 4 FMAs. That is the whole trick.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "gpu.h"

#define REF_ROWS 64     /* query rows per block */
#define REF_KEYS 64     /* keys per shared-memory tile */
#define REF_THREADS 256 /* a 16 x 16 thread grid */
#define REF_GRID 16     /* threads along each side of that grid */
#define REF_RPT (REF_ROWS / REF_GRID)  /* 4 rows per thread */
#define REF_KPT (REF_KEYS / REF_GRID)  /* 4 keys per thread */

/* 16-bit storage <-> fp32, with CUDA's own round-to-nearest-even conversions. */
template <bool BF16> __device__ __forceinline__ float lowp_to_f32_dev(uint16_t h) {
    return BF16 ? __bfloat162float(__ushort_as_bfloat16(h)) : __half2float(__ushort_as_half(h));
}
template <bool BF16> __device__ __forceinline__ float lowp_load(const uint16_t *p) { return lowp_to_f32_dev<BF16>(*p); }
template <bool BF16> __device__ __forceinline__ uint16_t lowp_from_f32(float x) {
    return BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
}
/* x rounded to the I/O dtype and back: the P a kernel with 16-bit P actually multiplies with. */
template <bool BF16> __device__ __forceinline__ float lowp_round(float x) {
    return lowp_to_f32_dev<BF16>(lowp_from_f32<BF16>(x));
}

/* Shared-memory rows are padded by one float: row r starts at bank (r * (D + 1)) % 32 = r % 32, so
 * the 16 threads reading 16 different rows at the same column hit 16 different banks. */
template <int D> struct RefSmem {
    static constexpr int q_stride = D + 1;
    static constexpr int kv_stride = D + 1;
    static constexpr int p_stride = REF_KEYS + 1;
    static constexpr size_t floats = (size_t)REF_ROWS * q_stride      /* Qs[64][D+1]  the block's query rows */
                                   + (size_t)REF_KEYS * kv_stride     /* KVs[64][D+1] a K tile, then a V tile */
                                   + 2 * (size_t)REF_ROWS * p_stride; /* Ps, Pl [64][65] P in fp32 and lowp */
    static constexpr size_t bytes = floats * sizeof(float);
};

/* Loads rows [row0, row0 + nrows) of a [rows, heads, D] 16-bit tensor slice (head already applied
 * to `base`, consecutive rows `row_stride` elements apart) into dst[nrows][D + 1] as fp32. Rows at
 * or past `rows_valid` read as 0, so tails need no special case. Consecutive threads take
 * consecutive d: coalesced global reads, conflict-free shared writes. */
template <int D, bool BF16>
__device__ __forceinline__ void load_tile(float *dst, const uint16_t *base, int64_t row_stride, int row0, int nrows,
                                          int rows_valid) {
    for (int e = threadIdx.x; e < nrows * D; e += REF_THREADS) {
        const int r = e / D, d = e % D;
        const int row = row0 + r;
        dst[r * (D + 1) + d] = row < rows_valid ? lowp_load<BF16>(base + (int64_t)row * row_stride + d) : 0.0f;
    }
}

/* s[a][c] = scale * <Qs[ty + 16a], KVs[tx + 16c]>: this thread's 4 x 4 scores of the tile. One
 * function for all three passes, so each pass sees bit-identical scores. */
template <int D>
__device__ __forceinline__ void tile_scores(const float *Qs, const float *Ks, int ty, int tx, float scale,
                                            float s[REF_RPT][REF_KPT]) {
#pragma unroll
    for (int a = 0; a < REF_RPT; a++)
#pragma unroll
        for (int c = 0; c < REF_KPT; c++) s[a][c] = 0.0f;
#pragma unroll 8
    for (int d = 0; d < D; d++) {
        float qa[REF_RPT], kc[REF_KPT];
        for (int a = 0; a < REF_RPT; a++) qa[a] = Qs[(ty + REF_GRID * a) * (D + 1) + d];
        for (int c = 0; c < REF_KPT; c++) kc[c] = Ks[(tx + REF_GRID * c) * (D + 1) + d];
        for (int a = 0; a < REF_RPT; a++)
            for (int c = 0; c < REF_KPT; c++) s[a][c] = fmaf(qa[a], kc[c], s[a][c]);
    }
    for (int a = 0; a < REF_RPT; a++)
        for (int c = 0; c < REF_KPT; c++) s[a][c] *= scale;
}

/* Bottom-right aligned causal mask (FlashAttention-2 >= 2.1): row i sees key j iff
 * j <= i + (Sk - Sq). Rows past Sq and keys past Sk (tile tails) are never visible. */
__device__ __forceinline__ bool visible(long long i, long long j, int Sq, int Sk, int causal) {
    return i < Sq && j < Sk && (!causal || j <= i + ((long long)Sk - Sq));
}

/* The 16 threads of one row group (same ty) are 16 consecutive lanes of a warp (tid = ty*16 + tx),
 * so xor-shuffles over offsets 8..1 combine exactly them. */
__device__ __forceinline__ float group_max(float x) {
    for (int off = REF_GRID / 2; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}
__device__ __forceinline__ float group_sum(float x) {
    for (int off = REF_GRID / 2; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

/* grid (ceil(Sq / 64), heads_q, batch), 256 threads, RefSmem<D>::bytes of dynamic shared memory.
 *   q     : [B, Sq, Hq, D] 16-bit        k, v : [B, Sk, Hkv, D] 16-bit
 *   o_ref : [B, Sq, Hq, D] fp32          o_lowp : [B, Sq, Hq, D] 16-bit
 *   lse_ref : [B, Hq, Sq] fp32 */
template <int D, bool BF16>
__global__ void __launch_bounds__(REF_THREADS)
reference_kernel(const uint16_t *q, const uint16_t *k, const uint16_t *v, float *o_ref, uint16_t *o_lowp,
                 float *lse_ref, int Sq, int Sk, int Hq, int Hkv, int causal, float scale) {
    extern __shared__ float smem[];
    float *Qs = smem;                                       /* [64][D+1] */
    float *KVs = Qs + REF_ROWS * RefSmem<D>::q_stride;      /* [64][D+1] */
    float *Ps = KVs + REF_KEYS * RefSmem<D>::kv_stride;     /* [64][65] */
    float *Pl = Ps + REF_ROWS * RefSmem<D>::p_stride;       /* [64][65] */

    const int m0 = blockIdx.x * REF_ROWS;  /* first query row of the block */
    const int h = blockIdx.y, b = blockIdx.z;
    const int hkv = h / (Hq / Hkv);        /* GQA: Hq / Hkv query heads share a K/V head */
    const int ty = threadIdx.x / REF_GRID, tx = threadIdx.x % REF_GRID;

    /* 64-bit offsets everywhere: B * S * H * D exceeds 2^31 for the headline problem. */
    const int64_t q_row_stride = (int64_t)Hq * D;    /* elements from query row i to i + 1 */
    const int64_t kv_row_stride = (int64_t)Hkv * D;  /* elements from key j to j + 1 */
    const uint16_t *q_head = q + ((int64_t)b * Sq * Hq + h) * D;     /* row i at + i * q_row_stride */
    const uint16_t *k_head = k + ((int64_t)b * Sk * Hkv + hkv) * D;  /* key j at + j * kv_row_stride */
    const uint16_t *v_head = v + ((int64_t)b * Sk * Hkv + hkv) * D;

    load_tile<D, BF16>(Qs, q_head, q_row_stride, m0, REF_ROWS, Sq);  /* published by the first barrier below */

    /* Keys past n_end are invisible to every row of the block (causal), so we stop there. */
    int n_end = Sk;
    if (causal) {
        const long long last_row = (long long)min(m0 + REF_ROWS, Sq) - 1;
        const long long lim = last_row + ((long long)Sk - Sq) + 1;
        n_end = (int)(lim < 0 ? 0 : (lim < Sk ? lim : Sk));
    }

    long long row[REF_RPT];  /* this thread's query rows */
    float m[REF_RPT], l[REF_RPT];
    for (int a = 0; a < REF_RPT; a++) {
        row[a] = (long long)m0 + ty + REF_GRID * a;
        m[a] = -INFINITY;
        l[a] = 0.0f;
    }
    float s[REF_RPT][REF_KPT];

    /* Pass 1: the row maxima over visible keys. */
    for (int n0 = 0; n0 < n_end; n0 += REF_KEYS) {
        __syncthreads();  /* everyone is done with the previous tile */
        load_tile<D, BF16>(KVs, k_head, kv_row_stride, n0, REF_KEYS, Sk);
        __syncthreads();
        tile_scores<D>(Qs, KVs, ty, tx, scale, s);
        for (int a = 0; a < REF_RPT; a++)
            for (int c = 0; c < REF_KPT; c++)
                if (visible(row[a], n0 + tx + REF_GRID * c, Sq, Sk, causal)) m[a] = fmaxf(m[a], s[a][c]);
    }
    for (int a = 0; a < REF_RPT; a++) m[a] = group_max(m[a]);

    /* Pass 2: l = sum exp(s - m). A row without visible keys keeps m = -inf and l = 0 and never
     * evaluates exp, so no inf - inf. */
    for (int n0 = 0; n0 < n_end; n0 += REF_KEYS) {
        __syncthreads();
        load_tile<D, BF16>(KVs, k_head, kv_row_stride, n0, REF_KEYS, Sk);
        __syncthreads();
        tile_scores<D>(Qs, KVs, ty, tx, scale, s);
        for (int a = 0; a < REF_RPT; a++)
            for (int c = 0; c < REF_KPT; c++)
                if (visible(row[a], n0 + tx + REF_GRID * c, Sq, Sk, causal)) l[a] += expf(s[a][c] - m[a]);
    }
    for (int a = 0; a < REF_RPT; a++) l[a] = group_sum(l[a]);

    /* Pass 3: P = exp(s - m) / l into shared memory, then O += P V. Thread (ty, tx) accumulates
     * rows ty + 16a and head dims tx + 16e of O. */
    constexpr int EPT = D / REF_GRID;  /* head dims per thread: 8 for D = 128, 4 for D = 64 */
    float acc[REF_RPT][EPT], acc_lowp[REF_RPT][EPT];
    for (int a = 0; a < REF_RPT; a++)
        for (int e = 0; e < EPT; e++) acc[a][e] = acc_lowp[a][e] = 0.0f;

    for (int n0 = 0; n0 < n_end; n0 += REF_KEYS) {
        __syncthreads();  /* the previous P V product is done with KVs, Ps and Pl */
        load_tile<D, BF16>(KVs, k_head, kv_row_stride, n0, REF_KEYS, Sk);
        __syncthreads();
        tile_scores<D>(Qs, KVs, ty, tx, scale, s);
        for (int a = 0; a < REF_RPT; a++) {
            for (int c = 0; c < REF_KPT; c++) {
                const int key = tx + REF_GRID * c;
                const float p = visible(row[a], n0 + key, Sq, Sk, causal) ? expf(s[a][c] - m[a]) / l[a] : 0.0f;
                const int r = ty + REF_GRID * a;
                Ps[r * RefSmem<D>::p_stride + key] = p;
                Pl[r * RefSmem<D>::p_stride + key] = lowp_round<BF16>(p);
            }
        }
        __syncthreads();  /* P written, and everyone is done reading the K tile */
        load_tile<D, BF16>(KVs, v_head, kv_row_stride, n0, REF_KEYS, Sk);
        __syncthreads();
        /* Invisible keys have P = 0 and tail keys have V = 0, so all 64 keys can be summed. */
        for (int j = 0; j < REF_KEYS; j++) {
            float vj[EPT];
            for (int e = 0; e < EPT; e++) vj[e] = KVs[j * RefSmem<D>::kv_stride + tx + REF_GRID * e];
            for (int a = 0; a < REF_RPT; a++) {
                const float p = Ps[(ty + REF_GRID * a) * RefSmem<D>::p_stride + j];
                const float pl = Pl[(ty + REF_GRID * a) * RefSmem<D>::p_stride + j];
                for (int e = 0; e < EPT; e++) {
                    acc[a][e] = fmaf(p, vj[e], acc[a][e]);
                    acc_lowp[a][e] = fmaf(pl, vj[e], acc_lowp[a][e]);
                }
            }
        }
    }

    for (int a = 0; a < REF_RPT; a++) {
        if (row[a] >= Sq) continue;
        /* A row that sees no key: O = 0 (the accumulators never moved) and LSE = +inf. */
        const bool empty = m[a] == -INFINITY;
        const int64_t o_off = (((int64_t)b * Sq + row[a]) * Hq + h) * D;
        for (int e = 0; e < EPT; e++) {
            const int d = tx + REF_GRID * e;
            o_ref[o_off + d] = acc[a][e];
            o_lowp[o_off + d] = lowp_from_f32<BF16>(acc_lowp[a][e]);
        }
        if (tx == 0) lse_ref[((int64_t)b * Hq + h) * Sq + row[a]] = empty ? INFINITY : m[a] + logf(l[a]);
    }
}

template <int D, bool BF16>
static void launch_reference(const flash_problem *p, float *o_ref, uint16_t *o_lowp, float *lse_ref,
                             cudaStream_t stream) {
    /* ~97 KB for D = 128: above the 48 KB default, so opt in (every sm_80+ part has >= 99 KB). */
    CUDA_CHECK(cudaFuncSetAttribute(reference_kernel<D, BF16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)RefSmem<D>::bytes));
    dim3 grid((unsigned)((p->seqlen_q + REF_ROWS - 1) / REF_ROWS), (unsigned)p->heads_q, (unsigned)p->batch);
    reference_kernel<D, BF16><<<grid, REF_THREADS, RefSmem<D>::bytes, stream>>>(
        (const uint16_t *)p->q, (const uint16_t *)p->k, (const uint16_t *)p->v, o_ref, o_lowp, lse_ref, p->seqlen_q,
        p->seqlen_k, p->heads_q, p->heads_kv, p->causal, p->softmax_scale);
    CUDA_CHECK_LAUNCH();
}

extern "C" void reference_forward(const flash_problem *p, float *o_ref, uint16_t *o_lowp, float *lse_ref,
                                  cudaStream_t stream) {
    const bool bf16 = p->dtype == FLASH_BF16;
    if (p->head_dim == 64)
        bf16 ? launch_reference<64, true>(p, o_ref, o_lowp, lse_ref, stream)
             : launch_reference<64, false>(p, o_ref, o_lowp, lse_ref, stream);
    else
        bf16 ? launch_reference<128, true>(p, o_ref, o_lowp, lse_ref, stream)
             : launch_reference<128, false>(p, o_ref, o_lowp, lse_ref, stream);
}

/* ------------------------------------------------------------------------------------------------
 * Error statistics on the GPU: each thread folds a grid-stride slice of the tensor into an
 * err_stats (errstat.h, the same code the host uses), the block reduces them in shared memory, and
 * the host merges the per-block partials in a fixed order (deterministic).
 */
#define ERR_THREADS 256
#define ERR_BLOCKS 1024

/*   o       : [B, Sq, Hq, D] 16-bit, the output under test
 *   o_ref   : [B, Sq, Hq, D] fp32
 *   partial : [ERR_BLOCKS] one err_stats per block */
template <bool BF16>
__global__ void __launch_bounds__(ERR_THREADS)
err_stats_kernel(const uint16_t *o, const float *o_ref, int64_t n, int64_t row_elems, int Sq, int Sk, int causal,
                 err_stats *partial) {
    err_stats s;
    errstat_init(&s);
    for (int64_t e = (int64_t)blockIdx.x * ERR_THREADS + threadIdx.x; e < n; e += (int64_t)gridDim.x * ERR_THREADS) {
        /* Query row of element e: elements are [B, Sq, Hq * D], so row = (e / (Hq * D)) % Sq. It sees
         * no key iff causal and row + (Sk - Sq) < 0. */
        const int64_t i = (e / row_elems) % Sq;
        const int empty = causal && i + ((int64_t)Sk - Sq) < 0;
        errstat_add(&s, lowp_load<BF16>(o + e), o_ref[e], empty);
    }
    __shared__ err_stats red[ERR_THREADS];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int stride = ERR_THREADS / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) errstat_merge(&red[threadIdx.x], &red[threadIdx.x + stride]);
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = red[0];
}

extern "C" err_stats gpu_err_stats(const uint16_t *o, const float *o_ref, const flash_problem *p,
                                   cudaStream_t stream) {
    const int64_t n = (int64_t)p->batch * p->seqlen_q * p->heads_q * p->head_dim;
    const int64_t row_elems = (int64_t)p->heads_q * p->head_dim;
    int blocks = (int)((n + ERR_THREADS - 1) / ERR_THREADS);
    if (blocks > ERR_BLOCKS) blocks = ERR_BLOCKS;

    err_stats *d_partial = NULL;  /* [blocks] */
    CUDA_CHECK(cudaMalloc(&d_partial, (size_t)blocks * sizeof(err_stats)));
    if (p->dtype == FLASH_BF16)
        err_stats_kernel<true><<<blocks, ERR_THREADS, 0, stream>>>(o, o_ref, n, row_elems, p->seqlen_q, p->seqlen_k,
                                                                   p->causal, d_partial);
    else
        err_stats_kernel<false><<<blocks, ERR_THREADS, 0, stream>>>(o, o_ref, n, row_elems, p->seqlen_q, p->seqlen_k,
                                                                    p->causal, d_partial);
    CUDA_CHECK_LAUNCH();

    err_stats h_partial[ERR_BLOCKS];
    CUDA_CHECK(cudaMemcpyAsync(h_partial, d_partial, (size_t)blocks * sizeof(err_stats), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaFree(d_partial));

    err_stats total;
    errstat_init(&total);
    for (int i = 0; i < blocks; i++) errstat_merge(&total, &h_partial[i]);
    return total;
}
