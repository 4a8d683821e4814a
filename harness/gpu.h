/*
 * gpu.h: the harness's device code (reference.cu, peak.cu), callable from C.
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
 *   o_ref  : [batch, seqlen_q, heads_q, head_dim] fp32, the exact-as-fp32-allows output
 *   o_lowp : [batch, seqlen_q, heads_q, head_dim] in p->dtype: P and O rounded to the I/O dtype
 *   lse_ref: [batch, heads_q, seqlen_q] fp32, +inf for rows that see no key
 * Asynchronous on `stream`; launch errors go through CUDA_CHECK (exit 3). */
void reference_forward(const flash_problem *p, float *o_ref, uint16_t *o_lowp, float *lse_ref, cudaStream_t stream);

/* Error statistics of o (device, [batch, seqlen_q, heads_q, head_dim] in p->dtype) against o_ref
 * (device, fp32, same shape), reduced on the GPU. Synchronises `stream`. */
err_stats gpu_err_stats(const uint16_t *o, const float *o_ref, const flash_problem *p, cudaStream_t stream);

/* The mma.sync m16n8k16 bf16 -> f32 ceiling of the current device, from registers only. */
typedef struct {
    double tflops;    /* at the median time */
    float ms_median, ms_min;
    int runs;         /* timed launches */
} peak_result;
peak_result mma_peak(int sm_count, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* HARNESS_GPU_H */
