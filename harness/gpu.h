/*
 * gpu.h: the harness's device code (reference.cu, peak.cu, peak_wgmma.cu), callable from C.
 */
#ifndef HARNESS_GPU_H
#define HARNESS_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "errstat.h"
#include "flash.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The independent fp32 reference (three passes, no online softmax; see reference.cu).
 * p->q, p->k, p->v are device pointers in p->dtype; p->softmax_scale must be resolved (non-zero).
 * For e4m3 inputs the reference computes on each element times its tensor's descale (`descale`;
 * NULL reads as 1, 1, 1, and bf16 and fp16 inputs ignore it).
 *   o_ref  : [batch, seqlen_q, heads_q, head_dim] fp32, the exact-as-fp32-allows output
 *   o_lowp : [batch, seqlen_q, heads_q, head_dim] in O's dtype (p->dtype; bf16 for e4m3): P and O
 *            rounded as a kernel must round them (to the I/O dtype; for e4m3, 2^8 P to e4m3 and
 *            O to bf16)
 *   lse_ref: [batch, heads_q, seqlen_q] fp32, +inf for rows that see no key
 * Asynchronous on `stream`; launch errors go through CUDA_CHECK (exit 3). */
void reference_forward(const flash_problem *p, const flash_descale *descale, float *o_ref, uint16_t *o_lowp,
                       float *lse_ref, cudaStream_t stream);

/* Error statistics of o (device, [batch, seqlen_q, heads_q, head_dim] in O's dtype: p->dtype, bf16
 * for e4m3 inputs) against o_ref (device, fp32, same shape), reduced on the GPU. Synchronises
 * `stream`. */
err_stats gpu_err_stats(const uint16_t *o, const float *o_ref, const flash_problem *p, cudaStream_t stream);

/* A ceiling: one tensor-core instruction alone, as fast as the device retires it. */
typedef struct {
    const char *what; /* the instruction, as the CSV's name column gives it */
    double tflops;    /* at the median time */
    float ms_median, ms_min;
    int runs;         /* timed launches */
} peak_result;

/* The mma.sync m16n8k16 bf16 -> f32 ceiling of the current device, from registers only (peak.cu):
 * the limit of stages 01-08. */
peak_result mma_peak(int sm_count, cudaStream_t stream);

/* The wgmma m64n128k16 bf16 -> f32 ceiling, both operands from shared memory (peak_wgmma.cu): the
 * limit of the Hopper stages. Returns 1 with *res filled in; or 0, launching nothing, on a GPU that
 * cannot run sm_90a code, with why in why[whylen] ("wgmma needs a Hopper GPU (sm_90), this one is
 * sm_86"). */
int wgmma_peak(int sm_count, cudaStream_t stream, peak_result *res, char *why, size_t whylen);

/* How both are timed (peak.cu): launch(arg, stream) once untimed, then a fixed number of times
 * with CUDA events; tflops = flops per launch at the median time. `what` (a string literal: the
 * result keeps the pointer) becomes the result's name. */
peak_result peak_time(const char *what, void (*launch)(void *arg, cudaStream_t stream), void *arg, double flops,
                      cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* HARNESS_GPU_H */
