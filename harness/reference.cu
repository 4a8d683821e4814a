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
 *     copies of the 16-bit values, or for e4m3 the dequantized values (below);
 *   - every run spot-checks it against the float64 CPU reference (cpu_ref.c).
 * Pass 3 also computes O_lowp, what a kernel with 16-bit P and O would get at best: P rounded to
 * the I/O dtype before multiplying V, O rounded at the end. max|O_lowp - O_ref| sets the tolerance.
 *
 * e4m3 inputs: the reference reads the very e4m3 bytes the stage reads and multiplies each by its
 * tensor's descale as it stages the tile in shared memory, so that it computes on the values the
 * inputs stand for (the host's dequantized copies, bit for bit: the same one fp32 multiply). An
 * fp32 copy of those values would be a second upload that could differ from the bytes the stage
 * gets, and 4 times their memory (the 64-bit case of the matrix has 2.3 GB of K in e4m3). O_lowp
 * then models what an e4m3 kernel must round and nothing else: p = exp(s - m) (m the row max),
 * scaled by 2^8 and rounded to e4m3 (FlashAttention-3's scaled P: without it P's small values fall
 * into e4m3's subnormals), l summed from the unrounded 2^8 p, O = sum round_e4m3(2^8 p) v / l
 * rounded to bf16. The rounding is CUDA's __nv_cvt_float_to_fp8 (on sm_89 and newer, the PTX
 * instruction cvt.rn.satfinite.e4m3x2.f32 a kernel uses), which tests/test_fp8_cuda.cu checks
 * against the host's f32_to_e4m3 (lowp.c).
 *
 * How it is made fast enough (~2.5x the useful flops, as passes 1-2 recompute QK^T): a block owns
 * 64 query rows of one (batch, head) and walks the keys in tiles of 64 staged in shared memory as
 * fp32. 256 threads form a 16 x 16 grid; thread (ty, tx) owns the 4 x 4 scores of rows ty + 16a
 * and keys tx + 16c, so every shared-memory value it loads feeds 4 FMAs. That is the whole trick.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdlib.h>

#include <type_traits>

#include "check.h"
#include "gpu.h"

#define REF_ROWS 64     /* query rows per block */
#define REF_KEYS 64     /* keys per shared-memory tile */
#define REF_THREADS 256 /* a 16 x 16 thread grid */
#define REF_GRID 16     /* threads along each side of that grid */
#define REF_RPT (REF_ROWS / REF_GRID)  /* 4 rows per thread */
#define REF_KPT (REF_KEYS / REF_GRID)  /* 4 keys per thread */
#define REF_P_SCALE 256.0f  /* 2^8: an e4m3 kernel's P is scaled by this before it is rounded */

/* The input dtypes: q, k and v are stored as uint16_t for the 16-bit two, as uint8_t for e4m3.
 * O_lowp is 16-bit in each case: bf16 for e4m3 inputs, whose O is bf16. */
enum RefIn { REF_BF16, REF_FP16, REF_E4M3 };
template <RefIn IN> using ref_elem = typename std::conditional<IN == REF_E4M3, uint8_t, uint16_t>::type;
template <RefIn IN> constexpr bool ref_out_bf16 = IN != REF_FP16;

/* 16-bit storage <-> fp32, with CUDA's own round-to-nearest-even conversions. */
template <bool BF16> __device__ __forceinline__ float lowp_to_f32_dev(uint16_t h) {
    return BF16 ? __bfloat162float(__ushort_as_bfloat16(h)) : __half2float(__ushort_as_half(h));
}
template <bool BF16> __device__ __forceinline__ uint16_t lowp_from_f32(float x) {
    return BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
}
/* x rounded to the I/O dtype and back: the P a kernel with 16-bit P actually multiplies with. */
template <bool BF16> __device__ __forceinline__ float lowp_round(float x) {
    return lowp_to_f32_dev<BF16>(lowp_from_f32<BF16>(x));
}

/* e4m3 <-> fp32: every e4m3 value is exact in fp16, and so in fp32. The rounding is round to
 * nearest even with saturation at +-448, as the kernels' cvt.rn.satfinite. */
__device__ __forceinline__ float e4m3_to_f32_dev(uint8_t b) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3)));
}
__device__ __forceinline__ float e4m3_round(float x) {
    return e4m3_to_f32_dev(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

/* One input element as fp32: a 16-bit one exactly; an e4m3 one times its tensor's descale, one
 * fp32 multiply, as the host computes its dequantized copy for the CPU check (inputs.c). */
template <RefIn IN> __device__ __forceinline__ float input_load(const ref_elem<IN> *p, float descale) {
    if constexpr (IN == REF_E4M3) return e4m3_to_f32_dev(*p) * descale;
    else return lowp_to_f32_dev<IN == REF_BF16>(*p);
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

/* Loads rows [row0, row0 + nrows) of a [rows, heads, D] input tensor slice (head already applied
 * to `base`, consecutive rows `row_stride` elements apart) into dst[nrows][D + 1] as fp32 (e4m3
 * elements times `descale`). Rows at or past `rows_valid` read as 0, so tails need no special case.
 * Consecutive threads take consecutive d: coalesced global reads, conflict-free shared writes. */
template <int D, RefIn IN>
__device__ __forceinline__ void load_tile(float *dst, const ref_elem<IN> *base, int64_t row_stride, int row0,
                                          int nrows, int rows_valid, float descale) {
    for (int e = threadIdx.x; e < nrows * D; e += REF_THREADS) {
        const int r = e / D, d = e % D;
        const int row = row0 + r;
        dst[r * (D + 1) + d] = row < rows_valid ? input_load<IN>(base + (int64_t)row * row_stride + d, descale) : 0.0f;
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
 *   q     : [B, Sq, Hq, D] input dtype   k, v : [B, Sk, Hkv, D] input dtype
 *   o_ref : [B, Sq, Hq, D] fp32          o_lowp : [B, Sq, Hq, D] 16-bit (bf16 for e4m3 inputs)
 *   lse_ref : [B, Hq, Sq] fp32
 * dq, dk, dv: the descales of e4m3 inputs (unused for 16-bit ones). */
template <int D, RefIn IN>
__global__ void __launch_bounds__(REF_THREADS)
reference_kernel(const ref_elem<IN> *q, const ref_elem<IN> *k, const ref_elem<IN> *v, float *o_ref, uint16_t *o_lowp,
                 float *lse_ref, int Sq, int Sk, int Hq, int Hkv, int causal, float scale, float dq, float dk,
                 float dv) {
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
    const ref_elem<IN> *q_head = q + ((int64_t)b * Sq * Hq + h) * D;     /* row i at + i * q_row_stride */
    const ref_elem<IN> *k_head = k + ((int64_t)b * Sk * Hkv + hkv) * D;  /* key j at + j * kv_row_stride */
    const ref_elem<IN> *v_head = v + ((int64_t)b * Sk * Hkv + hkv) * D;

    load_tile<D, IN>(Qs, q_head, q_row_stride, m0, REF_ROWS, Sq, dq);  /* published by the first barrier below */

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
        load_tile<D, IN>(KVs, k_head, kv_row_stride, n0, REF_KEYS, Sk, dk);
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
        load_tile<D, IN>(KVs, k_head, kv_row_stride, n0, REF_KEYS, Sk, dk);
        __syncthreads();
        tile_scores<D>(Qs, KVs, ty, tx, scale, s);
        for (int a = 0; a < REF_RPT; a++)
            for (int c = 0; c < REF_KPT; c++)
                if (visible(row[a], n0 + tx + REF_GRID * c, Sq, Sk, causal)) l[a] += expf(s[a][c] - m[a]);
    }
    for (int a = 0; a < REF_RPT; a++) l[a] = group_sum(l[a]);

    /* Pass 3: P = exp(s - m) / l into shared memory, then O += P V. Thread (ty, tx) accumulates
     * rows ty + 16a and head dims tx + 16e of O. Beside P, the P of O_lowp: p rounded to the I/O
     * dtype, or for e4m3 round_e4m3(2^8 exp(s - m)), divided by 2^8 l only at the end. */
    constexpr int EPT = D / REF_GRID;  /* head dims per thread: 8 for D = 128, 4 for D = 64 */
    float acc[REF_RPT][EPT], acc_lowp[REF_RPT][EPT];
    for (int a = 0; a < REF_RPT; a++)
        for (int e = 0; e < EPT; e++) acc[a][e] = acc_lowp[a][e] = 0.0f;

    for (int n0 = 0; n0 < n_end; n0 += REF_KEYS) {
        __syncthreads();  /* the previous P V product is done with KVs, Ps and Pl */
        load_tile<D, IN>(KVs, k_head, kv_row_stride, n0, REF_KEYS, Sk, dk);
        __syncthreads();
        tile_scores<D>(Qs, KVs, ty, tx, scale, s);
        for (int a = 0; a < REF_RPT; a++) {
            for (int c = 0; c < REF_KPT; c++) {
                const int key = tx + REF_GRID * c;
                const bool vis = visible(row[a], n0 + key, Sq, Sk, causal);
                const float e = vis ? expf(s[a][c] - m[a]) : 0.0f;
                const float p = vis ? e / l[a] : 0.0f;
                const int r = ty + REF_GRID * a;
                Ps[r * RefSmem<D>::p_stride + key] = p;
                if constexpr (IN == REF_E4M3) Pl[r * RefSmem<D>::p_stride + key] = e4m3_round(REF_P_SCALE * e);
                else Pl[r * RefSmem<D>::p_stride + key] = lowp_round<IN == REF_BF16>(p);
            }
        }
        __syncthreads();  /* P written, and everyone is done reading the K tile */
        load_tile<D, IN>(KVs, v_head, kv_row_stride, n0, REF_KEYS, Sk, dv);
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
            float lowp = acc_lowp[a][e];
            if constexpr (IN == REF_E4M3) lowp = empty ? 0.0f : lowp / (REF_P_SCALE * l[a]);  /* l = 0 there */
            o_lowp[o_off + d] = lowp_from_f32<ref_out_bf16<IN>>(lowp);
        }
        if (tx == 0) lse_ref[((int64_t)b * Hq + h) * Sq + row[a]] = empty ? INFINITY : m[a] + logf(l[a]);
    }
}

template <int D, RefIn IN>
static void launch_reference(const flash_problem *p, const flash_descale *descale, float *o_ref, uint16_t *o_lowp,
                             float *lse_ref, cudaStream_t stream) {
    /* ~97 KB for D = 128: above the 48 KB default, so opt in (every sm_80+ part has >= 99 KB). */
    CUDA_CHECK(cudaFuncSetAttribute(reference_kernel<D, IN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)RefSmem<D>::bytes));
    dim3 grid((unsigned)((p->seqlen_q + REF_ROWS - 1) / REF_ROWS), (unsigned)p->heads_q, (unsigned)p->batch);
    reference_kernel<D, IN><<<grid, REF_THREADS, RefSmem<D>::bytes, stream>>>(
        (const ref_elem<IN> *)p->q, (const ref_elem<IN> *)p->k, (const ref_elem<IN> *)p->v, o_ref, o_lowp, lse_ref,
        p->seqlen_q, p->seqlen_k, p->heads_q, p->heads_kv, p->causal, p->softmax_scale, descale->q, descale->k,
        descale->v);
    CUDA_CHECK_LAUNCH();
}

template <RefIn IN>
static void launch_reference_d(const flash_problem *p, const flash_descale *descale, float *o_ref, uint16_t *o_lowp,
                               float *lse_ref, cudaStream_t stream) {
    if (p->head_dim == 64) launch_reference<64, IN>(p, descale, o_ref, o_lowp, lse_ref, stream);
    else launch_reference<128, IN>(p, descale, o_ref, o_lowp, lse_ref, stream);
}

extern "C" void reference_forward(const flash_problem *p, const flash_descale *descale, float *o_ref, uint16_t *o_lowp,
                                  float *lse_ref, cudaStream_t stream) {
    static const flash_descale ones = {1.0f, 1.0f, 1.0f};
    if (!descale) descale = &ones;
    if (p->dtype == FLASH_E4M3) launch_reference_d<REF_E4M3>(p, descale, o_ref, o_lowp, lse_ref, stream);
    else if (p->dtype == FLASH_BF16) launch_reference_d<REF_BF16>(p, descale, o_ref, o_lowp, lse_ref, stream);
    else launch_reference_d<REF_FP16>(p, descale, o_ref, o_lowp, lse_ref, stream);
}

/* ------------------------------------------------------------------------------------------------
 * Error statistics on the GPU: each thread folds a grid-stride slice of the tensor into an
 * err_stats (errstat.h, the same code the host uses), the block reduces them in shared memory, and
 * the host merges the per-block partials in a fixed order (deterministic).
 */
#define ERR_THREADS 256
#define ERR_BLOCKS 1024

/*   o       : [B, Sq, Hq, D] 16-bit, the output under test (bf16 or fp16: BF16)
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
        errstat_add(&s, lowp_to_f32_dev<BF16>(o[e]), o_ref[e], empty);
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
    if (p->dtype != FLASH_FP16)  /* bf16, and bf16 O of e4m3 inputs */
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
