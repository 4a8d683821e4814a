/*
 * problem.h: one attention problem on the device: its inputs, its reference, and the checked and
 * timed launches of the stages on it. Built once per problem and shared by every stage tested on
 * it (the benchmark runs every stage on each problem; the reference is the expensive part).
 */
#ifndef HARNESS_PROBLEM_H
#define HARNESS_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "checks.h"
#include "errstat.h"
#include "flash.h"
#include "inputs.h"

/* The device and what every measurement needs on it. */
typedef struct {
    char name[256];       /* "NVIDIA H200" */
    int sm_count;
    int l2_bytes;
    void *flush;          /* [flush_bytes] written before every timed launch to evict the L2 */
    size_t flush_bytes;   /* 2 x the L2 size */
    cudaStream_t stream;  /* every launch of the harness goes here */
    cudaEvent_t start, stop;
} gpu_ctx;

/* Opens device 0. Returns 0, or prints "no CUDA device: ..." and returns 3. */
int gpu_open(gpu_ctx *g);
void gpu_close(gpu_ctx *g);

typedef struct {
    flash_problem p;              /* device pointers q, k, v, o, lse; softmax_scale resolved */
    flash_descale descale;        /* e4m3: each input's amax / 448; bf16 and fp16: 1, 1, 1 (unused) */
    size_t q_elems, kv_elems, lse_elems;
    /* device */
    void *d_q;                    /* [B, Sq, Hq, D]  in p.dtype: 2 bytes an element, 1 for e4m3 */
    void *d_k, *d_v;              /* [B, Sk, Hkv, D] in p.dtype */
    uint16_t *d_o;                /* [B, Sq, Hq, D]  16-bit (bf16 for e4m3), the stage under test writes it */
    float *d_lse;                 /* [B, Hq, Sq]     fp32, the stage under test writes it */
    /* the check's alone (problem_setup's `check`; NULL without it) */
    float *d_o_ref;               /* [B, Sq, Hq, D]  fp32 reference */
    uint16_t *d_o_lowp;           /* [B, Sq, Hq, D]  16-bit reference (P and O rounded as O's dtype and P's demand) */
    float *d_lse_ref;             /* [B, Hq, Sq]     fp32 reference, +inf on rows that see no key */
    /* host */
    float *h_q;                   /* [B, Sq, Hq, D]  the inputs as float: exactly the 16-bit values, or the */
    float *h_k, *h_v;             /* [B, Sk, Hkv, D] dequantized e4m3 ones (e4m3 value * descale) */
    /* the check's alone (NULL and 0 without it) */
    float *h_lse;                 /* [B, Hq, Sq]     a stage's LSE, copied back for the check */
    float *h_lse_ref;             /* [B, Hq, Sq] */
    err_stats lowp;               /* O_lowp vs O_ref: sets the tolerance */
    double lse_tol;               /* the LSE's tolerance (check_lse_tolerance) */
    float ref_ms;                 /* how long the GPU reference took */
    int spot_rows;                /* rows the CPU float64 reference recomputed */
    double spot_o_err, spot_lse_err;  /* worst |GPU ref - CPU ref| over them */
} problem_state;

/* Allocates and fills everything for `shape` (dims, dtype, causal, scale; pointers ignored):
 * seeded inputs of kind `inputs` (e4m3 ones quantized per tensor, their descales kept; inputs.h), the output
 * buffers, and with `check` what problem_check needs: the GPU reference, its spot check on
 * `spot_rows` rows against the CPU, and the O_lowp statistics. Without `check` the problem can be
 * launched and timed, not checked. Exits 2 when the problem does not fit in memory, 3 on CUDA
 * errors. Returns 0, or 1 when the spot check found the GPU reference wrong (the caller reports
 * and exits 1). */
int problem_setup(problem_state *ps, const flash_problem *shape, uint64_t seed, input_kind inputs, int check, int spot_rows,
                  gpu_ctx *g);
void problem_free(problem_state *ps);

/* Launches `stage` on the problem, asynchronously on `stream`: flash_forward for bf16 and fp16,
 * flash_forward_fp8 with the problem's descales for e4m3. Returns what that returns. */
int problem_launch(const problem_state *ps, int stage, cudaStream_t stream);

/* One checked launch of `stage` on a problem set up with `check`: poison O (0xFFFF, NaN in bf16
 * and fp16) and LSE (NaN), launch, compare. *launch_rc receives problem_launch's return code; when
 * it is non-zero nothing ran and the verdict fails with flash_strerror's message. CUDA faults
 * exit 3. */
check_verdict problem_check(problem_state *ps, int stage, gpu_ctx *g, int *launch_rc);

typedef struct {
    int iters;             /* timed launches actually made */
    float ms_median, ms_min;
    double tflops;         /* at the median */
} timing_result;

/* `warmup` untimed launches (at least one: the last ones estimate a launch's time), then timed
 * ones (L2 flushed before each, outside the events), all enqueued behind a short hold of the
 * stream with one synchronisation after them: `iters` of them, except that a slow stage is given
 * only as many as make ~2 s of timed work by the estimate, never under 5 (problem.c says why and
 * how). A non-zero problem_launch exits (2 for invalid/unsupported, 3 for CUDA). */
timing_result problem_time(problem_state *ps, int stage, gpu_ctx *g, int warmup, int iters);

/* 4 * B * Hq * Sq * Sk * D, halved for causal (FlashAttention-2's convention). */
double attention_flops(const flash_problem *p);

#endif /* HARNESS_PROBLEM_H */
