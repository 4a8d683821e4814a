/*
 * hopper_units.cu: every wrapper of common/hopper.cuh alone on the GPU, against a CPU result,
 * before any attention kernel trusts it. A wrong descriptor field or fragment layout shows up here
 * by name ("MN-major descriptor: LBO and SBO swapped"), not as a wrong attention output.
 *
 *   wgmma SS  S[64, N] = Q[64, D] K[N, D]^T, both K-major in the 128-byte swizzled layout, for
 *             each D (head_dim 64, 128: one or two column blocks, k16 steps inside the atom)
 *             and each N the stages use as a tile of keys (64, 96, 128, 160, 176);
 *   wgmma RS  O[64, D] = P[64, N] V[N, D] with P = the S accumulators above packed to 16 bits in
 *             registers (the accumulator fragment fed back as A) and V MN-major from shared memory;
 *   TMA       one 64-row box of each 64-column half of a [batch, seqlen, heads, 128] tensor, at a
 *             sequence tail (rows past seqlen zero-filled), through an mbarrier used for two
 *             phases, compared byte for byte with the swizzled layout; then a TMA store of a box
 *             at the tail, which must write the rows inside the tensor and none past it;
 *   cluster   two blocks of a cluster each load half of a 64-row box by multicast into both, each
 *             block's mbarrier expecting the whole box; each releases the tile with an arrival on
 *             the empty mbarrier of both blocks (mapa, remote arrive), and the next phase's loads
 *             wait for both: both blocks must hold the whole box, in both phases.
 *   e4m3      stage 16's fp8 path as one piece: Q, K and V e4m3 tiles brought in by TMA (one box
 *             of 128-byte rows in the 128-byte swizzle at head_dim 128, of 64-byte rows in the
 *             64-byte swizzle at 64, K and V with a zero-filled tail), S = Q K^T by wgmma
 *             m64n{96,128,160}k32, the stage's tiles of keys (K-major descriptors of either
 *             swizzle), P = S scaled and packed to e4m3 in the A fragment's key order
 *             (pack_p_e4m3), V transposed in shared memory in the same order (transpose_v_e4m3,
 *             a column block per 128 keys), O = P V by wgmma m64n{64,128}k32 with A from registers.
 * bf16 and fp16 throughout, and e4m3 where stage 16 uses it. Prints PASS:/FAIL:/SKIP: lines (tests/run_tests.sh counts them); on a
 * GPU other than sm_90 everything is skipped with the reason.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flash_tma.h"
#include "hopper.cuh"

static int n_fail = 0, n_pass = 0;

#define CUDA_OK(call)                                                                            \
    do {                                                                                         \
        cudaError_t err_ = (call);                                                               \
        if (err_ != cudaSuccess) {                                                               \
            printf("FAIL: %s: %s (%s:%d)\n", #call, cudaGetErrorString(err_), __FILE__, __LINE__); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

/* ---- wgmma ------------------------------------------------------------------------------------- */

/* How the test builds V's descriptor: as the stages do, or with LBO and SBO exchanged (only to
 * name the mistake when the first fails). */
enum { kMnAsStages = 0, kMnSwapped = 1 };

/* The whole-warpgroup element (row, col) of accumulator register d[j][e] of this thread. */
__device__ __forceinline__ void acc_coord(int j, int e, int *row, int *col) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    *row = 16 * warp + lane / 4 + 8 * (e / 2);
    *col = 8 * j + 2 * (lane % 4) + e % 2;
}

template <int kTiles>
__device__ void store_acc(float *out, int ld, const float (&d)[kTiles][4]) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            int row, col;
            acc_coord(j, e, &row, &col);
            out[row * ld + col] = d[j][e];
        }
}

/* One warpgroup: S = Q K^T with wgmma_ss, then O = P V with wgmma_rs, P the packed S. q [64, D],
 * k and v [N, D] row-major in global memory; s_out [64, N], o_out [64, D] f32. */
template <typename T, int D, int N>
__global__ void __launch_bounds__(128) wgmma_kernel(const T *q, const T *k, const T *v, float *s_out, float *o_out, int mn_mode) {
    /* 80 KiB at D = N = 128: dynamic shared memory, aligned by hand to the 1024-byte atoms. */
    extern __shared__ uint8_t smem_raw[];
    T *sQ = reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~(uintptr_t)1023);
    T *sK = sQ + 64 * D, *sV = sK + N * D;
    for (int i = threadIdx.x; i < 64 * D; i += 128) sQ[sw128_idx(64, i / D, i % D)] = q[i];
    for (int i = threadIdx.x; i < N * D; i += 128) {
        sK[sw128_idx(N, i / D, i % D)] = k[i];
        sV[sw128_idx(N, i / D, i % D)] = v[i];
    }
    /* Ordinary stores, read next by wgmma (the async proxy). */
    fence_proxy_async();
    __syncthreads();

    float acc_s[N / 8][4];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        /* k16 step kk: column block kk / 4, 32 bytes per step inside the 128-byte rows. */
        const uint32_t a = smem_u32(sQ) + (kk / 4) * 64 * 128 + (kk % 4) * 32;
        const uint32_t b = smem_u32(sK) + (kk / 4) * N * 128 + (kk % 4) * 32;
        wgmma_ss(acc_s, wgmma_desc_k_major(a), wgmma_desc_k_major(b), kk > 0, T());
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(acc_s);
    store_acc(s_out, N, acc_s);

    /* Two n8 tiles of S (keys 16 kk .. 16 kk + 15) are one k16 step of A. */
    uint32_t p[N / 16][4];
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk) {
        p[kk][0] = pack_float2(acc_s[2 * kk][0], acc_s[2 * kk][1], T());
        p[kk][1] = pack_float2(acc_s[2 * kk][2], acc_s[2 * kk][3], T());
        p[kk][2] = pack_float2(acc_s[2 * kk + 1][0], acc_s[2 * kk + 1][1], T());
        p[kk][3] = pack_float2(acc_s[2 * kk + 1][2], acc_s[2 * kk + 1][3], T());
    }
    float acc_o[D / 8][4];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk) {
        /* k16 step kk: keys 16 kk .. 16 kk + 15, two atoms of 8 rows, 2048 bytes per step. */
        const uint32_t b = smem_u32(sV) + kk * 16 * 128;
        const uint64_t desc = mn_mode == kMnAsStages ? wgmma_desc_mn_major(b, N) : wgmma_desc(b, 1024, N * 128);
        wgmma_rs(acc_o, p[kk], desc, kk > 0, T());
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(acc_o);
    store_acc(o_out, D, acc_o);
}

template <typename T>
static float to_f(T x);
template <>
float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
float to_f(__half x) { return __half2float(x); }

template <typename T>
static T from_f(float x);
template <>
__nv_bfloat16 from_f(float x) { return __float2bfloat16(x); }
template <>
__half from_f(float x) { return __float2half(x); }

/* Largest |got - want| relative to max(1, |want|), and where. */
static double max_err(const float *got, const double *want, int rows, int cols, int *at_r, int *at_c) {
    double worst = 0;
    *at_r = *at_c = -1;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
            const double w = want[r * cols + c], e = fabs(got[r * cols + c] - w) / fmax(1.0, fabs(w));
            if (!(e <= worst)) {  // NaN counts as the worst
                worst = isnan(e) ? INFINITY : e;
                *at_r = r, *at_c = c;
            }
        }
    return worst;
}

template <typename T, int D, int N>
static void test_wgmma(const char *tname) {
    T *hq = (T *)malloc(64 * D * sizeof(T)), *hk = (T *)malloc(N * D * sizeof(T)), *hv = (T *)malloc(N * D * sizeof(T));
    /* Small integers times 1/8 keep every product exact in 16 bits and f32: any error is a layout
     * error, not rounding. */
    srand(1234 + D + N);
    for (int i = 0; i < 64 * D; ++i) hq[i] = from_f<T>((rand() % 9 - 4) / 8.0f);
    for (int i = 0; i < N * D; ++i) hk[i] = from_f<T>((rand() % 9 - 4) / 8.0f);
    for (int i = 0; i < N * D; ++i) hv[i] = from_f<T>((rand() % 9 - 4) / 8.0f);
    double *s_ref = (double *)malloc(64 * N * sizeof(double)), *o_ref = (double *)malloc(64 * D * sizeof(double));
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < N; ++c) {
            double acc = 0;
            for (int x = 0; x < D; ++x) acc += (double)to_f(hq[r * D + x]) * to_f(hk[c * D + x]);
            s_ref[r * N + c] = acc;
        }
    /* P is S rounded to T, as the kernel packs it. */
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < D; ++c) {
            double acc = 0;
            for (int x = 0; x < N; ++x) acc += (double)to_f(from_f<T>((float)s_ref[r * N + x])) * to_f(hv[x * D + c]);
            o_ref[r * D + c] = acc;
        }
    T *dq, *dk, *dv;
    float *ds, *dout;
    CUDA_OK(cudaMalloc(&dq, 64 * D * sizeof(T)));
    CUDA_OK(cudaMalloc(&dk, N * D * sizeof(T)));
    CUDA_OK(cudaMalloc(&dv, N * D * sizeof(T)));
    CUDA_OK(cudaMalloc(&ds, 64 * N * sizeof(float)));
    CUDA_OK(cudaMalloc(&dout, 64 * D * sizeof(float)));
    CUDA_OK(cudaMemcpy(dq, hq, 64 * D * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dk, hk, N * D * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dv, hv, N * D * sizeof(T), cudaMemcpyHostToDevice));
    float *hs = (float *)malloc(64 * N * sizeof(float)), *ho = (float *)malloc(64 * D * sizeof(float));
    const int kSmem = (64 + 2 * N) * D * (int)sizeof(T) + 1024;
    CUDA_OK(cudaFuncSetAttribute(wgmma_kernel<T, D, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));

    const auto run = [&](int mode) {
        CUDA_OK(cudaMemset(ds, 0xff, 64 * N * sizeof(float)));  // NaN: a value never written fails
        CUDA_OK(cudaMemset(dout, 0xff, 64 * D * sizeof(float)));
        wgmma_kernel<T, D, N><<<1, 128, kSmem>>>(dq, dk, dv, ds, dout, mode);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(hs, ds, 64 * N * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(ho, dout, 64 * D * sizeof(float), cudaMemcpyDeviceToHost));
    };
    run(kMnAsStages);
    /* Exact inputs: S is exact; O differs from the double product only by f32 accumulation. */
    int r, c;
    const double e_s = max_err(hs, s_ref, 64, N, &r, &c);
    if (e_s == 0)
        printf("PASS: wgmma SS m64n%dk16 %s, Q[64,%d] K[%d,%d]^T, K-major 128B-swizzled descriptors\n", N, tname, D, N, D), n_pass++;
    else {
        /* The two usual ways to get the K-major case wrong, told apart by what the result is. */
        printf("FAIL: wgmma SS m64n%dk16 %s, Q[64,%d] K[%d,%d]^T: S[%d][%d] = %g, want %g (K-major descriptor: check SBO = "
               "1024 between 8-row atoms, +32 B per k16 step, the next 64 columns at rows * 128 B, 1024-byte aligned "
               "atoms, swizzle mode 1)\n",
               N, tname, D, N, D, r, c, hs[r * N + c], s_ref[r * N + c]);
        n_fail++;
    }
    const double e_o = max_err(ho, o_ref, 64, D, &r, &c);
    if (e_s == 0 && e_o < 1e-5) {
        printf("PASS: wgmma RS m64n%dk16 %s, P[64,%d] (S accumulators as A) V[%d,%d], V MN-major\n", D, tname, N, N, D);
        n_pass++;
    } else if (e_s == 0) {
        const float bad = ho[r * D + c];
        const double want = o_ref[r * D + c];
        run(kMnSwapped);
        const double e_swap = max_err(ho, o_ref, 64, D, &r, &c);
        if (e_swap < 1e-5)
            printf("FAIL: wgmma RS m64n%dk16 %s: MN-major descriptor: LBO and SBO swapped (passes with LBO = 1024, SBO = "
                   "rows * 128): fix wgmma_desc_mn_major\n", D, tname);
        else
            printf("FAIL: wgmma RS m64n%dk16 %s, P[64,%d] V[%d,%d]: O = %g, want %g; not an LBO/SBO swap either: check the "
                   "A fragment packing (two n8 S tiles per k16 step), trans-b = 1, 2048 B per k16 step of V\n",
                   D, tname, N, N, D, bad, want);
        n_fail++;
    } else {
        printf("SKIP: wgmma RS m64n%dk16 %s: its A operand is the S above, which is wrong\n", D, tname);
    }
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(ds), cudaFree(dout);
    free(hq), free(hk), free(hv), free(s_ref), free(o_ref), free(hs), free(ho);
}

/* ---- TMA + mbarrier ---------------------------------------------------------------------------- */

constexpr int kBoxRows = 64;
constexpr int kBoxBytes = kBoxRows * 128;

/* Loads the box at (column c0 = 0, then 64; head, row0, batch) twice through one mbarrier (phase
 * 0 with parity 0, phase 1 with parity 1), copies both boxes' raw bytes out, then writes the second
 * box back through the store map at (0, head, row0, batch). */
__global__ void __launch_bounds__(128) tma_kernel(const __grid_constant__ CUtensorMap load_map,
                                                 const __grid_constant__ CUtensorMap store_map, int head, int row0, int batch,
                                                 uint8_t *raw_out) {
    __shared__ __align__(1024) uint8_t box[2][kBoxBytes];
    __shared__ __align__(8) uint64_t bar;
    const uint32_t bar_addr = smem_u32(&bar);
    if (threadIdx.x == 0) {
        tma_prefetch_map(&load_map);
        mbarrier_init(bar_addr, 1);
        fence_mbarrier_init();
    }
    __syncthreads();
    for (int phase = 0; phase < 2; ++phase) {
        if (threadIdx.x == 0) {
            mbarrier_arrive_expect_tx(bar_addr, kBoxBytes);
            tma_load_4d(smem_u32(box[phase]), &load_map, bar_addr, 64 * phase, head, row0, batch);
        }
        mbarrier_wait(bar_addr, phase & 1);
    }
    for (int i = threadIdx.x; i < 2 * kBoxBytes; i += 128) raw_out[i] = (&box[0][0])[i];
    /* The store reads box[1] through the async proxy; the loads wrote it through the same proxy
     * and the wait above made it visible to every thread, so one thread may issue it. */
    if (threadIdx.x == 0) {
        tma_store_4d(&store_map, smem_u32(box[1]), 0, head, row0, batch);
        tma_store_commit();
        tma_store_wait_read();
    }
}

template <typename T>
static void test_tma(const char *tname, flash_dtype dtype) {
    /* [batch 2, seqlen 100, heads 3, 128]: the box at batch 1, head 2, rows 64..127 has 36 rows
     * inside the tensor and 28 past its end, which must arrive as zeros (not batch 2's rows). */
    const int B = 2, S = 100, H = 3, D = 128, head = 2, row0 = 64, batch = 1;
    const size_t n = (size_t)B * S * H * D;
    uint16_t *h = (uint16_t *)malloc(n * 2);
    for (size_t i = 0; i < n; ++i) h[i] = (uint16_t)(0x3c00 + (i * 7919) % 1021);  // distinct, nonzero
    void *src, *dst;
    uint8_t *raw;
    CUDA_OK(cudaMalloc(&src, n * 2));
    CUDA_OK(cudaMalloc(&dst, n * 2));
    CUDA_OK(cudaMalloc(&raw, 2 * kBoxBytes));
    CUDA_OK(cudaMemcpy(src, h, n * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dst, 0x5a, n * 2));
    CUtensorMap load_map, store_map;
    if (flash_tma_map(&load_map, src, dtype, B, S, H, D, kBoxRows, "hopper_units", "src") ||
        flash_tma_map(&store_map, dst, dtype, B, S, H, D, kBoxRows, "hopper_units", "dst")) {
        printf("FAIL: TMA %s: %s\n", tname, flash_strerror(FLASH_E_CUDA));
        n_fail++;
        return;
    }
    tma_kernel<<<1, 128>>>(load_map, store_map, head, row0, batch, raw);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    uint16_t *got = (uint16_t *)malloc(2 * kBoxBytes), *back = (uint16_t *)malloc(n * 2);
    CUDA_OK(cudaMemcpy(got, raw, 2 * kBoxBytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(back, dst, n * 2, cudaMemcpyDeviceToHost));

    /* Box half c0 / 64, row r, column c lands at sw128_idx(64, r, c) of its 8 KiB. */
    int bad = 0;
    for (int half = 0; half < 2 && !bad; ++half)
        for (int r = 0; r < kBoxRows && !bad; ++r)
            for (int c = 0; c < 64 && !bad; ++c) {
                const int row = row0 + r;
                const uint16_t want = row < S ? h[(((size_t)batch * S + row) * H + head) * D + 64 * half + c] : 0;
                const uint16_t g = got[half * kBoxBytes / 2 + sw128_idx(64, r, c)];
                if (g != want) {
                    printf("FAIL: TMA load %s: box %d row %d col %d = 0x%04x, want 0x%04x (%s)\n", tname, half, r, c, g, want,
                           row >= S ? "rows past seqlen must be zero-filled" : "swizzle: chunk c of row r at c ^ (r % 8)");
                    bad = 1;
                }
            }
    if (!bad) printf("PASS: TMA load %s: two 64-column boxes, 128B swizzle, 28-row zero-filled tail, mbarrier phases 0 and 1\n", tname);
    n_pass += !bad, n_fail += bad;

    /* The store wrote box 1 (columns 64..127 of the source) to columns 0..63 of dst, rows 64..99
     * of batch 1 head 2, and nothing else. */
    bad = 0;
    for (size_t i = 0; i < n && !bad; ++i) {
        const int c = i % D, hh = (i / D) % H, row = (i / D / H) % S, b = i / D / H / S;
        const bool written = b == batch && hh == head && row >= row0 && c < 64;
        const uint16_t want = written ? h[(((size_t)batch * S + row) * H + head) * D + 64 + c] : 0x5a5a;
        if (back[i] != want) {
            printf("FAIL: TMA store %s: dst[%d][%d][%d][%d] = 0x%04x, want 0x%04x (%s)\n", tname, b, row, hh, c, back[i], want,
                   written ? "the box's rows inside the tensor must be written" : "nothing outside the box or past seqlen may be");
            bad = 1;
        }
    }
    if (!bad) printf("PASS: TMA store %s: a box at the tail writes its 36 rows inside the tensor and nothing past them\n", tname);
    n_pass += !bad, n_fail += bad;
    cudaFree(src), cudaFree(dst), cudaFree(raw);
    free(h), free(got), free(back);
}

/* ---- e4m3: TMA, wgmma k32, P's fragments, V's transpose --------------------------------------- */

constexpr int kF8Rows = 64;  // query rows (one warpgroup)

/* One warpgroup, the fp8 path of stage 16 on one tile of Keys keys (each N of S the stage runs:
 * 96, 128, 160). TMA brings Q [64, D], K and V [Keys, D] (seqlen_k rows inside the tensor, the
 * rest zero-filled); S = Q K^T; P = e4m3(S * p_scale) packed as the A fragment; V^T ([D, Keys], a
 * column block per 128 keys) written by the four warps; O = P V. Out: S [64, Keys] f32, P's bytes
 * at their (row, key) places [64, Keys] (through the key order of pack_p_e4m3, so a wrong packing
 * shows as P in the wrong place), O [64, D] f32, and V's tile as TMA wrote it, byte for byte
 * [Keys * D]. */
template <int D, int Keys>
__global__ void __launch_bounds__(128) wgmma_e4m3_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                                                        const __grid_constant__ CUtensorMap map_v, float p_scale, float *s_out,
                                                        uint8_t *p_out, float *o_out, uint8_t *v_raw_out) {
    constexpr int kQBytes = kF8Rows * D, kTileBytes = Keys * D;
    /* Up to 58 KiB (D = 128, 128 keys): dynamic shared memory, aligned by hand to the 1024-byte
     * atoms. */
    extern __shared__ uint8_t smem_raw[];
    uint8_t *sQ = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~(uintptr_t)1023);
    uint8_t *sK = sQ + kQBytes, *sV = sK + kTileBytes, *sVt = sV + kTileBytes;
    __shared__ __align__(8) uint64_t bar;
    const uint32_t bar_addr = smem_u32(&bar);
    if (threadIdx.x == 0) {
        mbarrier_init(bar_addr, 1);
        fence_mbarrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(bar_addr, kQBytes + 2 * kTileBytes);
        tma_load_4d(smem_u32(sQ), &map_q, bar_addr, 0, 0, 0, 0);
        tma_load_4d(smem_u32(sK), &map_k, bar_addr, 0, 0, 0, 0);
        tma_load_4d(smem_u32(sV), &map_v, bar_addr, 0, 0, 0, 0);
    }
    mbarrier_wait(bar_addr, 0);
    for (int i = threadIdx.x; i < kTileBytes; i += 128) v_raw_out[i] = sV[i];

    /* V^T, [D, Keys], while S runs: 16 keys by 32 bytes of head per warp and call. */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int u = warp; u < (Keys / 16) * (D / 32); u += 4)
        transpose_v_e4m3<D, D>(smem_u32(sV), smem_u32(sVt), u % (Keys / 16), u / (Keys / 16));
    fence_proxy_async();
    __syncthreads();

    float acc_s[Keys / 8][4];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk) {
        /* k32 step kk: 32 bytes into each row, in either swizzle. */
        const uint64_t a = D == 128 ? wgmma_desc_k_major(smem_u32(sQ) + 32 * kk) : wgmma_desc_k_major_sw64(smem_u32(sQ) + 32 * kk);
        const uint64_t b = D == 128 ? wgmma_desc_k_major(smem_u32(sK) + 32 * kk) : wgmma_desc_k_major_sw64(smem_u32(sK) + 32 * kk);
        wgmma_ss(acc_s, a, b, kk > 0, __nv_fp8_e4m3());
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(acc_s);
    store_acc(s_out, Keys, acc_s);

#pragma unroll
    for (int j = 0; j < Keys / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[j][e] *= p_scale;
    uint32_t p[Keys / 32][4];
#pragma unroll
    for (int kk = 0; kk < Keys / 32; ++kk) pack_p_e4m3(acc_s, kk, p[kk]);
    /* Register a[i] of step kk holds row g + 8 (i % 2), keys 32 kk + 16 (i / 2) + key(4t + byte). */
    const int g = lane / 4, t = lane % 4, row_g = 16 * warp + g;
    for (int kk = 0; kk < Keys / 32; ++kk)
        for (int i = 0; i < 4; ++i)
            for (int byte = 0; byte < 4; ++byte) {
                const int L = 4 * t + byte, key = 32 * kk + 16 * (i / 2) + 8 * ((L % 4) / 2) + 2 * (L / 4) + L % 2;
                p_out[(row_g + 8 * (i % 2)) * Keys + key] = (uint8_t)(p[kk][i] >> (8 * byte));
            }

    float acc_o[D / 8][4];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Keys / 32; ++kk)
        wgmma_rs(acc_o, p[kk], wgmma_desc_k_major(smem_u32(sVt) + (32 * kk / 128) * D * 128 + 32 * kk % 128), kk > 0,
                 __nv_fp8_e4m3());
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(acc_o);
    store_acc(o_out, D, acc_o);
}

/* e4m3 on the host, written out for this test: the value of a code, and the nearest code to a
 * float (ties to the even code, which for e4m3 is the even mantissa), found by search over the
 * finite codes so that nothing clever can be wrong. */
static float e4m3_value(uint8_t c) {
    const int sign = c >> 7, exp = (c >> 3) & 15, man = c & 7;
    const float mag = exp ? ldexpf(1.0f + man / 8.0f, exp - 7) : ldexpf(man / 8.0f, -6);
    return sign ? -mag : mag;
}
static uint8_t e4m3_nearest(float x) {
    uint8_t best = 0;
    for (int c = 0; c < 256; ++c) {
        if ((c & 0x7f) == 0x7f) continue;  // NaN
        const double d = fabs((double)e4m3_value((uint8_t)c) - x), b = fabs((double)e4m3_value(best) - x);
        if (d < b || (d == b && (c & 1) == 0 && (best & 1) == 1 && (c >> 7) == (best >> 7))) best = (uint8_t)c;
    }
    return best;
}

template <int D, int Keys>
static void test_e4m3(int seqlen_k) {
    /* Codes of small values (|x| <= 2, every product and k-sum of Q K^T exact in f32). */
    uint8_t *hq = (uint8_t *)malloc(kF8Rows * D), *hk = (uint8_t *)calloc(Keys * D, 1), *hv = (uint8_t *)calloc(Keys * D, 1);
    srand(4321 + D);
    for (int i = 0; i < kF8Rows * D; ++i) hq[i] = e4m3_nearest((rand() % 17 - 8) / 4.0f);
    for (int i = 0; i < seqlen_k * D; ++i) hk[i] = e4m3_nearest((rand() % 17 - 8) / 4.0f);
    for (int i = 0; i < seqlen_k * D; ++i) hv[i] = e4m3_nearest((rand() % 17 - 8) / 4.0f);
    const float p_scale = 1.0f / 16;
    double *s_ref = (double *)malloc(kF8Rows * Keys * sizeof(double)), *o_ref = (double *)malloc(kF8Rows * D * sizeof(double));
    for (int r = 0; r < kF8Rows; ++r)
        for (int c = 0; c < Keys; ++c) {
            double acc = 0;
            for (int x = 0; x < D; ++x) acc += (double)e4m3_value(hq[r * D + x]) * e4m3_value(hk[c * D + x]);
            s_ref[r * Keys + c] = acc;
        }
    uint8_t *dq, *dk, *dv, *dp, *draw;
    float *ds, *dout;
    CUDA_OK(cudaMalloc(&dq, kF8Rows * D));
    CUDA_OK(cudaMalloc(&dk, seqlen_k * D));
    CUDA_OK(cudaMalloc(&dv, seqlen_k * D));
    CUDA_OK(cudaMalloc(&dp, kF8Rows * Keys));
    CUDA_OK(cudaMalloc(&draw, Keys * D));
    CUDA_OK(cudaMalloc(&ds, kF8Rows * Keys * sizeof(float)));
    CUDA_OK(cudaMalloc(&dout, kF8Rows * D * sizeof(float)));
    CUDA_OK(cudaMemcpy(dq, hq, kF8Rows * D, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dk, hk, seqlen_k * D, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dv, hv, seqlen_k * D, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(ds, 0xff, kF8Rows * Keys * sizeof(float)));
    CUDA_OK(cudaMemset(dout, 0xff, kF8Rows * D * sizeof(float)));
    CUDA_OK(cudaMemset(dp, 0x7f, kF8Rows * Keys));  // e4m3 NaN: a byte never written fails
    CUtensorMap map_q, map_k, map_v;
    if (flash_tma_map(&map_q, dq, FLASH_E4M3, 1, kF8Rows, 1, D, kF8Rows, "hopper_units", "q") ||
        flash_tma_map(&map_k, dk, FLASH_E4M3, 1, seqlen_k, 1, D, Keys, "hopper_units", "k") ||
        flash_tma_map(&map_v, dv, FLASH_E4M3, 1, seqlen_k, 1, D, Keys, "hopper_units", "v")) {
        printf("FAIL: e4m3 d%d n%d: %s\n", D, Keys, flash_strerror(FLASH_E_CUDA));
        n_fail++;
        return;
    }
    const int kSmem = (kF8Rows + 2 * Keys) * D + D * ((Keys + 127) / 128) * 128 + 1024;  // Q, K, V, V^T
    CUDA_OK(cudaFuncSetAttribute(wgmma_e4m3_kernel<D, Keys>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    wgmma_e4m3_kernel<D, Keys><<<1, 128, kSmem>>>(map_q, map_k, map_v, p_scale, ds, dp, dout, draw);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    float *hs = (float *)malloc(kF8Rows * Keys * sizeof(float)), *ho = (float *)malloc(kF8Rows * D * sizeof(float));
    uint8_t *hp = (uint8_t *)malloc(kF8Rows * Keys), *hraw = (uint8_t *)malloc(Keys * D);
    CUDA_OK(cudaMemcpy(hraw, draw, Keys * D, cudaMemcpyDeviceToHost));
    /* V's box as TMA laid it out: key k, head byte c at sw128_byte (128-byte rows) or sw64_byte
     * (64-byte rows), the layouts the transpose reads; keys past seqlen_k zero. */
    int bad_raw = -1;
    for (int k = 0; k < Keys && bad_raw < 0; ++k)
        for (int cc = 0; cc < D && bad_raw < 0; ++cc) {
            const uint8_t want = k < seqlen_k ? hv[k * D + cc] : 0;
            if (hraw[D == 128 ? sw128_byte(Keys, k, cc) : sw64_byte(k, cc)] != want) bad_raw = k * D + cc;
        }
    if (bad_raw < 0)
        printf("PASS: e4m3 d%d n%d: TMA's box of V is the layout of %s\n", D, Keys, D == 128 ? "sw128_byte" : "sw64_byte"), n_pass++;
    else
        printf("FAIL: e4m3 d%d n%d: V key %d byte %d is not where %s puts it\n", D, Keys, bad_raw / D, bad_raw % D,
               D == 128 ? "sw128_byte" : "sw64_byte"), n_fail++;
    CUDA_OK(cudaMemcpy(hs, ds, kF8Rows * Keys * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hp, dp, kF8Rows * Keys, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(ho, dout, kF8Rows * D * sizeof(float), cudaMemcpyDeviceToHost));

    int r, c;
    const double e_s = max_err(hs, s_ref, kF8Rows, Keys, &r, &c);
    if (e_s == 0)
        printf("PASS: e4m3 d%d n%d: TMA boxes of %d-byte rows (%s swizzle, keys %d..%d zero-filled), wgmma SS m64n%dk32, "
               "K-major descriptors\n", D, Keys, D, D == 128 ? "128B" : "64B", seqlen_k, Keys - 1, Keys), n_pass++;
    else
        printf("FAIL: e4m3 d%d n%d: S[%d][%d] = %g, want %g (TMA map of uint8 with a %d-byte box, its swizzle, the "
               "descriptor's swizzle mode and SBO %d, +32 B per k32 step)\n", D, Keys, r, c, hs[r * Keys + c], s_ref[r * Keys + c], D,
               D == 128 ? 1024 : 512), n_fail++;
    /* P: every byte the nearest e4m3 to S * p_scale, at its own (row, key). */
    int bad_p = -1;
    for (int i = 0; i < kF8Rows * Keys && bad_p < 0; ++i)
        if (hp[i] != e4m3_nearest((float)(s_ref[i] * p_scale))) bad_p = i;
    if (e_s == 0 && bad_p < 0)
        printf("PASS: e4m3 d%d n%d: pack_p_e4m3 rounds P to nearest even e4m3 and places it in the A fragment's key order\n", D,
               Keys), n_pass++;
    else if (e_s == 0)
        printf("FAIL: e4m3 d%d n%d: P[%d][%d] = 0x%02x, want 0x%02x (cvt e4m3x2's operand order, or the byte order of "
               "pack_p_e4m3)\n", D, Keys, bad_p / Keys, bad_p % Keys, hp[bad_p], e4m3_nearest((float)(s_ref[bad_p] * p_scale))), n_fail++;
    /* O = P V with the P the kernel packed (decoded from its bytes) and the V given. The tensor
     * cores add 8-bit products with fewer bits than f32 keeps (about 14 of mantissa, as the
     * DeepSeek-V3 report measured on the H800), so the bound is relative to the sum of the
     * magnitudes, sum |p v|, not to the result: a layout error is wrong by the size of the terms. */
    double worst = 0;
    for (int rr = 0; rr < kF8Rows; ++rr)
        for (int cc = 0; cc < D; ++cc) {
            double acc = 0, mag = 0;
            for (int x = 0; x < Keys; ++x) {
                const double term = (double)e4m3_value(hp[rr * Keys + x]) * e4m3_value(hv[x * D + cc]);
                acc += term, mag += fabs(term);
            }
            o_ref[rr * D + cc] = acc;
            const double e = fabs(ho[rr * D + cc] - acc) / fmax(1.0, mag);
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e, r = rr, c = cc;
        }
    const double e_o = worst;
    if (e_s == 0 && bad_p < 0 && e_o < 1.0 / 4096)
        printf("PASS: e4m3 d%d n%d: V transposed in shared memory in P's key order, wgmma RS m64n%dk32 over %d k32 steps (A "
               "from registers, V^T K-major); worst error %.1e of sum |p v|\n", D, Keys, D, Keys / 32, e_o), n_pass++;
    else if (e_s == 0 && bad_p < 0)
        printf("FAIL: e4m3 d%d n%d: O[%d][%d] = %g, want %g (transpose_v_e4m3: ldmatrix.trans blocks, the byte permutes, "
               "V^T's key order against pack_p_e4m3's, its column blocks of 128 keys)\n", D, Keys, r, c, ho[r * D + c], o_ref[r * D + c]), n_fail++;
    else
        printf("SKIP: e4m3 d%d n%d: P V: its A operand is the S or P above, which is wrong\n", D, Keys);
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dp), cudaFree(draw), cudaFree(ds), cudaFree(dout);
    free(hq), free(hk), free(hv), free(hp), free(hraw), free(s_ref), free(o_ref), free(hs), free(ho);
}

/* ---- clusters: multicast and remote arrivals ----------------------------------------------- */

constexpr int kHalfRows = kBoxRows / 2;

/* A cluster of two blocks, two phases of one 64-row tile slot, as stages 14-16 use their K/V slots: in
 * phase ph block r loads rows 64 ph + 32 r .. + 31 by multicast into the slot of both blocks, at
 * 32 r rows into it; each block's full barrier expects the whole box. Each block copies its slot
 * out (raw_out: [block][phase][box bytes]), then its thread 0 arrives on the empty barrier of both
 * blocks; a block loads the next phase only once both blocks have released the slot. */
__global__ void __launch_bounds__(128) multicast_kernel(const __grid_constant__ CUtensorMap map, int head, int batch, uint8_t *raw_out,
                                                       int *rank_out) {
    __shared__ __align__(1024) uint8_t slot[kBoxBytes];
    __shared__ __align__(8) uint64_t full, empty;
    const uint32_t full_addr = smem_u32(&full), empty_addr = smem_u32(&empty), rank = cluster_ctarank();
    if (threadIdx.x == 0) {
        mbarrier_init(full_addr, 1);
        mbarrier_init(empty_addr, 2);  // one arrival from each block of the cluster
        fence_mbarrier_init();
    }
    /* The partner's copies and arrivals may reach this block's barriers as soon as it passes here. */
    cluster_arrive();
    cluster_wait();
    for (int phase = 0; phase < 2; ++phase) {
        if (threadIdx.x == 0) {
            if (phase > 0) mbarrier_wait(empty_addr, (phase - 1) & 1);
            mbarrier_arrive_expect_tx(full_addr, kBoxBytes);
            tma_load_4d_multicast(smem_u32(slot) + rank * kHalfRows * 128, &map, full_addr, 0x3, 0, head,
                                  kBoxRows * phase + kHalfRows * (int)rank, batch);
        }
        mbarrier_wait(full_addr, phase & 1);
        for (int i = threadIdx.x; i < kBoxBytes; i += 128) raw_out[(blockIdx.x * 2 + phase) * kBoxBytes + i] = slot[i];
        __syncthreads();  // every thread has read the slot before it is released
        if (threadIdx.x == 0)
            for (uint32_t r = 0; r < 2; ++r) mbarrier_arrive_cluster(cluster_map(empty_addr, r));
    }
    /* No block exits while the other may still arrive on its barriers. */
    cluster_arrive();
    cluster_wait();
    if (threadIdx.x == 0) rank_out[blockIdx.x] = (int)rank;
}

template <typename T>
static void test_multicast(const char *tname, flash_dtype dtype) {
    /* [batch 2, seqlen 100, heads 3, 64]: phase 0 loads rows 0..63 of batch 1, head 2; phase 1 rows
     * 64..127, of which 36 lie inside the tensor (the rest zero-filled). */
    const int B = 2, S = 100, H = 3, D = 64, head = 2, batch = 1;
    const size_t n = (size_t)B * S * H * D;
    uint16_t *h = (uint16_t *)malloc(n * 2);
    for (size_t i = 0; i < n; ++i) h[i] = (uint16_t)(0x3c00 + (i * 7919) % 1021);
    void *src;
    uint8_t *raw;
    int *ranks;
    CUDA_OK(cudaMalloc(&src, n * 2));
    CUDA_OK(cudaMalloc(&raw, 4 * kBoxBytes));
    CUDA_OK(cudaMalloc(&ranks, 2 * sizeof(int)));
    CUDA_OK(cudaMemcpy(src, h, n * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(raw, 0x5a, 4 * kBoxBytes));
    CUDA_OK(cudaMemset(ranks, 0xff, 2 * sizeof(int)));
    CUtensorMap map;
    if (flash_tma_map(&map, src, dtype, B, S, H, D, kHalfRows, "hopper_units", "src")) {
        printf("FAIL: multicast %s: %s\n", tname, flash_strerror(FLASH_E_CUDA));
        n_fail++;
        return;
    }
    cudaLaunchConfig_t config = {};
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 2, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    config.gridDim = dim3(2), config.blockDim = dim3(128), config.attrs = &cluster, config.numAttrs = 1;
    CUDA_OK(cudaLaunchKernelEx(&config, multicast_kernel, map, head, batch, raw, ranks));
    CUDA_OK(cudaDeviceSynchronize());
    uint16_t *got = (uint16_t *)malloc(4 * kBoxBytes);
    int got_ranks[2];
    CUDA_OK(cudaMemcpy(got, raw, 4 * kBoxBytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_ranks, ranks, sizeof got_ranks, cudaMemcpyDeviceToHost));
    int bad = 0;
    if (got_ranks[0] != 0 || got_ranks[1] != 1) {
        printf("FAIL: cluster_ctarank %s: blocks 0 and 1 report ranks %d and %d\n", tname, got_ranks[0], got_ranks[1]);
        bad = 1;
    }
    for (int b = 0; b < 2 && !bad; ++b)
        for (int phase = 0; phase < 2 && !bad; ++phase)
            for (int r = 0; r < kBoxRows && !bad; ++r)
                for (int c = 0; c < D && !bad; ++c) {
                    const int row = kBoxRows * phase + r;
                    const uint16_t want = row < S ? h[(((size_t)batch * S + row) * H + head) * D + c] : 0;
                    const uint16_t g = got[(b * 2 + phase) * kBoxBytes / 2 + sw128_idx(kBoxRows, r, c)];
                    if (g != want) {
                        printf("FAIL: multicast %s: block %d phase %d row %d col %d = 0x%04x, want 0x%04x (%s)\n", tname, b, phase, r,
                               c, g, want, (r / kHalfRows) != b ? "the other block's half did not arrive here" : "this block's own half");
                        bad = 1;
                    }
                }
    if (!bad)
        printf("PASS: cluster %s: each block's half multicast into both, whole-box expect-tx, remote empty arrivals, "
               "phases 0 and 1 in both blocks\n", tname);
    n_pass += !bad, n_fail += bad;
    cudaFree(src), cudaFree(raw), cudaFree(ranks);
    free(h), free(got);
}

int main(void) {
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device)) {
        printf("SKIP: Hopper wrapper tests: no CUDA device\n");
        return 0;
    }
    if (major != 9 || minor != 0) {
        printf("SKIP: Hopper wrapper tests: they need a Hopper GPU (sm_90), this one is sm_%d%d\n", major, minor);
        return 0;
    }
    test_wgmma<__nv_bfloat16, 64, 64>("bf16");
    test_wgmma<__nv_bfloat16, 64, 96>("bf16");
    test_wgmma<__nv_bfloat16, 64, 128>("bf16");
    test_wgmma<__nv_bfloat16, 128, 64>("bf16");
    test_wgmma<__nv_bfloat16, 128, 96>("bf16");
    test_wgmma<__nv_bfloat16, 128, 128>("bf16");
    test_wgmma<__nv_bfloat16, 64, 160>("bf16");
    test_wgmma<__nv_bfloat16, 128, 160>("bf16");
    test_wgmma<__nv_bfloat16, 128, 176>("bf16");
    test_wgmma<__half, 64, 64>("fp16");
    test_wgmma<__half, 64, 96>("fp16");
    test_wgmma<__half, 64, 128>("fp16");
    test_wgmma<__half, 128, 64>("fp16");
    test_wgmma<__half, 128, 96>("fp16");
    test_wgmma<__half, 128, 128>("fp16");
    test_wgmma<__half, 64, 160>("fp16");
    test_wgmma<__half, 128, 160>("fp16");
    test_wgmma<__half, 128, 176>("fp16");
    test_tma<__nv_bfloat16>("bf16", FLASH_BF16);
    test_tma<__half>("fp16", FLASH_FP16);
    test_multicast<__nv_bfloat16>("bf16", FLASH_BF16);
    test_multicast<__half>("fp16", FLASH_FP16);
    /* The S tiles stage 16 runs: 128 keys (short sequences, and head_dim 64 with the mask), 96 at
     * head_dim 128 and 160 at 64 (long ones); a tail in the last column block of V^T each time. */
    test_e4m3<128, 128>(100);
    test_e4m3<64, 128>(100);
    test_e4m3<128, 96>(70);
    test_e4m3<64, 160>(140);
    printf("hopper_units: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
