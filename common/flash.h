/*
 * flash.h: the public C API of the series.
 *
 * Every stage (kernelNN_name/kernel.cu) implements the same contract, and flash_forward() picks one
 * by number. Usable from C, C++ and Python (ctypes against build/libflash.so).
 *
 * Tensors are contiguous and row-major, on the device:
 *   q, o : [batch, seqlen_q, heads_q,  head_dim]   (bf16 or fp16; with e4m3 inputs, o is bf16)
 *   k, v : [batch, seqlen_k, heads_kv, head_dim]   (q's dtype)
 *   lse  : [batch, heads_q, seqlen_q]              (fp32, natural log; may be NULL)
 *
 * The contract every stage accepts: bf16 and fp16; head_dim 64 and 128; any seqlen_q, seqlen_k >= 1;
 * causal (bottom-right aligned, as FlashAttention-2 >= 2.1) or not; heads_kv dividing heads_q
 * (GQA/MQA); 64-bit offsets. A row that attends to no key gets O = 0 and LSE = +inf.
 * Anything else returns FLASH_E_INVALID or FLASH_E_UNSUPPORTED; flash_strerror() then names the
 * parameter at fault. A stage asked to run on a GPU it was not built for (stages 01-08 need sm_80
 * or newer) returns FLASH_E_UNSUPPORTED naming the architecture it needs.
 *
 * fp8 (stage 16 on): q, k and v in e4m3 (FLASH_E4M3), each with a per-tensor descale factor: an
 * element stands for its e4m3 number times its tensor's descale. O is written in bf16, the LSE as
 * for every dtype (of the descaled scores). flash_forward_fp8() takes the descales; flash_forward()
 * with FLASH_E4M3 runs with all three at 1. A stage without fp8 refuses e4m3 with
 * FLASH_E_UNSUPPORTED naming the first stage that takes it. flash_problem is the same struct for
 * every dtype: a caller built before fp8 existed passes what it always passed.
 *
 * These five functions are all that build/libflash.so exports.
 */
#ifndef FLASH_H
#define FLASH_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FLASH_BF16 = 0, FLASH_FP16 = 1, FLASH_E4M3 = 2 } flash_dtype;

typedef struct {
    const void *q, *k, *v;
    void *o;
    float *lse;            /* [batch, heads_q, seqlen_q], natural log; may be NULL */
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    flash_dtype dtype;
    int causal;            /* bottom-right aligned, as FlashAttention-2 >= 2.1 */
    float softmax_scale;   /* 0 selects 1/sqrt(head_dim) */
} flash_problem;

enum {
    FLASH_OK = 0,
    FLASH_E_INVALID = 1,      /* a parameter is out of its domain (negative size, NULL pointer, ...) */
    FLASH_E_UNSUPPORTED = 2,  /* valid, but outside what the stage implements (head_dim 96, this GPU, ...) */
    FLASH_E_CUDA = 3          /* a CUDA call or the kernel launch failed */
};

/* Runs stage 1..flash_stage_count() on `stream`. Returns 0 or FLASH_E_*. Asynchronous: the kernel
 * may still be running when it returns. */
int flash_forward(int stage, const flash_problem *p, cudaStream_t stream);

/* The descale factors of e4m3 inputs: element x of q stands for the number x * q, likewise k and v.
 * Each must be finite, positive and normal (at least FLT_MIN), or FLASH_E_INVALID names it. */
typedef struct {
    float q, k, v;
} flash_descale;

/* flash_forward() for e4m3 inputs with their descale factors: p->dtype must be FLASH_E4M3
 * (FLASH_E_INVALID otherwise), o is bf16. */
int flash_forward_fp8(int stage, const flash_problem *p, const flash_descale *descale, cudaStream_t stream);

/* A message for `code`. For the most recent error of the calling thread it names the parameter
 * (or the CUDA error) at fault, e.g. "unsupported head_dim = 96 (supported: 64, 128)". */
const char *flash_strerror(int code);

int flash_stage_count(void);                /* how many stages this library has */
const char *flash_stage_name(int stage);    /* "kernel05_swizzle"; NULL outside 1..flash_stage_count() */

#ifdef __cplusplus
}
#endif
#endif /* FLASH_H */
