/*
 * peak_wgmma.cu: the wgmma ceiling of a Hopper GPU, the "speed of light" of stages 09 onwards.
 *
 * peak.cu measures mma.sync, the instruction of stages 02-08. On Hopper that is not the fastest
 * way into the tensor cores: the datasheet's dense bf16 rate (about 990 TFLOP/s on an H100 or
 * H200) is the rate of wgmma, the asynchronous warpgroup MMA that stages 09-13 are built on. So the
 * Hopper stages get a ceiling of their own, measured the same way: the one instruction alone, as
 * fast as the card retires it, with nothing else in the loop.
 *
 * What is measured: wgmma.mma_async.m64n128k16 bf16 x bf16 -> f32, both operands read from shared
 * memory through matrix descriptors (the form of S = Q K^T in the stages). The tiles are written
 * once before the loop and never change; the loop touches no global memory. Each warpgroup keeps
 * up to two commit groups of 4 wgmma in flight (the pattern of a real main loop: issue the next
 * group, then wait for the one before), and every SM runs several warpgroups, so that one of them
 * is always ready to issue while another waits. (On the H200, 2, 3 and 4 warpgroups per SM measure
 * the same: what holds the rate down is the clock, which the card lowers to stay in its power
 * budget under a long matrix load, not the issue of the instructions.)
 *
 * wgmma exists only in the sm_90a target, so the Makefile builds this one harness file for exactly
 * that architecture, whatever ARCH says. On any other GPU the kernel has no machine code at all:
 * wgmma_peak checks the compute capability first and reports "not measured" instead of launching.
 */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "flash_internal.h"
#include "gpu.h"
#include "hopper.cuh"

#define WGMMA_PEAK_ARCH "sm_90a"       /* what the Makefile builds this file for */
#define WGMMA_PEAK_WARPGROUPS 2        /* per block: 256 threads, 90 registers each */
#define WGMMA_PEAK_BLOCKS_PER_SM 2     /* 4 warpgroups per SM (2 already saturate an H200) */
#define WGMMA_PEAK_M 64                /* the wgmma shape: m64n128k16, 64 accumulators per thread */
#define WGMMA_PEAK_N 128
#define WGMMA_PEAK_K 64                /* one 128-byte swizzle row of bf16: 4 k16 steps per group */
#define WGMMA_PEAK_ITERS 8192          /* groups per warpgroup and launch: ~5 ms on an H200 */
#define WGMMA_PEAK_FLOPS_PER_WGMMA (2.0 * WGMMA_PEAK_M * WGMMA_PEAK_N * 16)  /* 64*128 outputs, 16 FMA each */
/* wgmma_desc_k_major describes 128-byte rows: a narrower tile would send wgmma past its end. */
static_assert(WGMMA_PEAK_K * sizeof(__nv_bfloat16) == 128, "the tiles are one 128-byte swizzle row wide");

/* A [64, 64] and B [128, 64], K-major, in the 128-byte swizzled layout of hopper.cuh: 24 KB. One
 * copy per block, read by all its warpgroups. The values are pseudo-random bf16 in [-1, 1): the
 * tensor cores draw more power on real data than on zeros, and on an H200 power is what sets the
 * clock under a long matrix load, so zeros would report a ceiling no kernel can reach. */
__global__ void __launch_bounds__(WGMMA_PEAK_WARPGROUPS * 128) wgmma_peak_kernel(int iters, int sink, float *out) {
    __shared__ __align__(1024) __nv_bfloat16 a[WGMMA_PEAK_M * WGMMA_PEAK_K];
    __shared__ __align__(1024) __nv_bfloat16 b[WGMMA_PEAK_N * WGMMA_PEAK_K];
    /* Where each value lands in the swizzled tile does not matter to a throughput measurement, so
     * the tiles are filled in address order. A multiplicative hash gives each element its value. */
    for (int i = threadIdx.x; i < (WGMMA_PEAK_M + WGMMA_PEAK_N) * WGMMA_PEAK_K; i += blockDim.x) {
        const uint32_t h = (uint32_t)i * 2654435761u;
        const __nv_bfloat16 x = __float2bfloat16((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
        if (i < WGMMA_PEAK_M * WGMMA_PEAK_K) a[i] = x;
        else b[i - WGMMA_PEAK_M * WGMMA_PEAK_K] = x;
    }
    /* Written by ordinary stores (the generic proxy), read by wgmma (the async proxy). */
    fence_proxy_async();
    __syncthreads();

    /* k16 step s reads 32 bytes further along the 128-byte rows; the descriptors are computed once,
     * outside the loop, as a real kernel's would be for a fixed tile. */
    const uint32_t a_addr = (uint32_t)__cvta_generic_to_shared(a), b_addr = (uint32_t)__cvta_generic_to_shared(b);
    uint64_t desc_a[WGMMA_PEAK_K / 16], desc_b[WGMMA_PEAK_K / 16];
#pragma unroll
    for (int s = 0; s < WGMMA_PEAK_K / 16; s++) {
        desc_a[s] = wgmma_desc_k_major(a_addr + 32 * s);
        desc_b[s] = wgmma_desc_k_major(b_addr + 32 * s);
    }

    float acc[WGMMA_PEAK_N / 8][4];
#pragma unroll
    for (int j = 0; j < WGMMA_PEAK_N / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (int it = 0; it < iters; it++) {
        /* Orders earlier ordinary register writes (the zeros, on the first trip) before the wgmma
         * that read them. Every trip, as in a real main loop: ptxas counts each wait below as
         * handing the accumulators back to ordinary code, and without this fence it inserts one of
         * its own (info C7519, which tests/test_instructions.sh refuses). wgmma_hold keeps the
         * compiler from sinking the zeroing below the fence: it moves register writes freely
         * across asm otherwise. */
        wgmma_hold(acc);
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < WGMMA_PEAK_K / 16; s++) wgmma_ss(acc, desc_a[s], desc_b[s], 1, __nv_bfloat16());
        wgmma_commit();
        /* The group before this one must be done; this one runs on while the next is issued. */
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    wgmma_hold(acc);  /* only now may ordinary code read the accumulators */
    if (sink) {
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < WGMMA_PEAK_N / 8; j++) sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
        out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
    }
}

typedef struct {
    int blocks;
    float *out;
} wgmma_peak_launch_args;

static void wgmma_peak_launch(void *arg, cudaStream_t stream) {
    const wgmma_peak_launch_args *l = (const wgmma_peak_launch_args *)arg;
    /* `iters` and `sink` from the host, as in peak.cu: the loop cannot be counted down at compile
     * time, and the accumulators are not provably unused. */
    wgmma_peak_kernel<<<l->blocks, WGMMA_PEAK_WARPGROUPS * 128, 0, stream>>>(WGMMA_PEAK_ITERS, 0, l->out);
}

extern "C" int wgmma_peak(int sm_count, cudaStream_t stream, peak_result *res, char *why, size_t whylen) {
    /* The same rule as a Hopper stage's (flash_arch.c): code built for sm_90a runs on compute
     * capability 9.0 and nowhere else, not on a newer GPU either. */
    int dev = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    char need[96];
    if (!flash_arch_runs_on(WGMMA_PEAK_ARCH, 10 * major + minor, need, sizeof need)) {
        snprintf(why, whylen, "wgmma needs %s, this one is sm_%d", need, 10 * major + minor);
        return 0;
    }

    wgmma_peak_launch_args l = {sm_count * WGMMA_PEAK_BLOCKS_PER_SM, NULL};
    /* [blocks * threads], written only if sink != 0 (never, here) */
    CUDA_CHECK(cudaMalloc(&l.out, (size_t)l.blocks * WGMMA_PEAK_WARPGROUPS * 128 * sizeof(float)));
    const double flops = (double)l.blocks * WGMMA_PEAK_WARPGROUPS * WGMMA_PEAK_ITERS * (WGMMA_PEAK_K / 16) *
                         WGMMA_PEAK_FLOPS_PER_WGMMA;
    *res = peak_time("wgmma.m64n128k16 bf16 f32-acc", wgmma_peak_launch, &l, flops, stream);
    CUDA_CHECK(cudaFree(l.out));
    return 1;
}
