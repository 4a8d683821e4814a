/*
 * peak.cu: the mma.sync ceiling of the present GPU, the "speed of light" line on the plots.
 *
 * Every stage from kernel02 on computes with mma.sync.m16n8k16 (bf16 in, fp32 accumulate), so the
 * fastest any of them can possibly go is the rate at which the tensor cores retire that one
 * instruction. We measure it directly: operands live in registers (no memory traffic at all in
 * the loop), each warp keeps PEAK_CHAINS independent accumulators so that the next mma never waits
 * for the previous one's result, and the grid fills every SM with several blocks. On Hopper this
 * is well below the wgmma rate (the headline "990 TFLOP/s"): mma.sync is the Ampere-style path,
 * and peak_wgmma.cu measures the Hopper one, timed by peak_time below like this one.
 */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "gpu.h"

#define PEAK_THREADS 128      /* 4 warps: one per SM sub-partition */
#define PEAK_BLOCKS_PER_SM 8  /* 32 warps per SM: plenty to hide the mma latency */
#define PEAK_CHAINS 8         /* independent accumulator chains per warp */
#define PEAK_ITERS 32768      /* loop trips per launch: ~7 ms on an H200 */
#define PEAK_RUNS 10          /* timed launches, for both ceilings; we report the median */
#define PEAK_FLOPS_PER_MMA (2.0 * 16 * 8 * 16)  /* m16n8k16: 16*8 outputs, 16 multiply-adds each */

/* `iters` and `sink` come from the host so the compiler can neither count the loop down nor prove
 * the results unused; the asm is volatile so it cannot be moved into the (never taken) store
 * branch either. out[gridDim.x * PEAK_THREADS] is written only when sink != 0. */
__global__ void __launch_bounds__(PEAK_THREADS) mma_peak_kernel(int iters, int sink, float *out) {
    /* A fragment: 4 registers of 2 bf16 each; B fragment: 2 registers. Values near 1.0 (0x3f80),
     * varied per lane so they are not compile-time constants. */
    const uint32_t x = 0x3f803f80u ^ (threadIdx.x & 7u);
    const uint32_t a0 = x, a1 = x ^ 1u, a2 = x ^ 2u, a3 = x ^ 3u, b0 = x ^ 4u, b1 = x ^ 5u;
    float acc[PEAK_CHAINS][4];
#pragma unroll
    for (int c = 0; c < PEAK_CHAINS; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;

    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int c = 0; c < PEAK_CHAINS; c++) {
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
    if (sink) {
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < PEAK_CHAINS; c++) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
        out[blockIdx.x * PEAK_THREADS + threadIdx.x] = sum;
    }
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Both ceilings are timed here, the same way (wgmma_peak in peak_wgmma.cu calls it too): one
 * untimed launch for the module load and the clocks to ramp up, then PEAK_RUNS launches timed
 * one by one with CUDA events; the rate is taken at the median. */
extern "C" peak_result peak_time(const char *what, void (*launch)(void *arg, cudaStream_t stream), void *arg,
                                 double flops, cudaStream_t stream) {
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));

    launch(arg, stream);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(stream));

    float ms[PEAK_RUNS];
    for (int r = 0; r < PEAK_RUNS; r++) {
        CUDA_CHECK(cudaEventRecord(start, stream));
        launch(arg, stream);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaEventRecord(stop, stream));
        CUDA_CHECK(cudaEventSynchronize(stop));
        CUDA_CHECK(cudaEventElapsedTime(&ms[r], start, stop));
    }
    qsort(ms, PEAK_RUNS, sizeof ms[0], cmp_float);

    peak_result res;
    res.what = what;
    res.runs = PEAK_RUNS;
    res.ms_min = ms[0];
    res.ms_median = 0.5f * (ms[(PEAK_RUNS - 1) / 2] + ms[PEAK_RUNS / 2]);
    res.tflops = flops / (res.ms_median * 1e-3) / 1e12;

    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return res;
}

typedef struct {
    int blocks;
    float *out;
} mma_peak_launch_args;

static void mma_peak_launch(void *arg, cudaStream_t stream) {
    const mma_peak_launch_args *l = (const mma_peak_launch_args *)arg;
    mma_peak_kernel<<<l->blocks, PEAK_THREADS, 0, stream>>>(PEAK_ITERS, 0, l->out);
}

extern "C" peak_result mma_peak(int sm_count, cudaStream_t stream) {
    mma_peak_launch_args l = {sm_count * PEAK_BLOCKS_PER_SM, NULL};
    /* [blocks * PEAK_THREADS], written only if sink != 0 (never, here) */
    CUDA_CHECK(cudaMalloc(&l.out, (size_t)l.blocks * PEAK_THREADS * sizeof(float)));
    const double flops = (double)l.blocks * (PEAK_THREADS / 32) * PEAK_ITERS * PEAK_CHAINS * PEAK_FLOPS_PER_MMA;
    const peak_result res = peak_time("mma.sync.m16n8k16 bf16 f32-acc", mma_peak_launch, &l, flops, stream);
    CUDA_CHECK(cudaFree(l.out));
    return res;
}
