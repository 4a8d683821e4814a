/*
 * problems.c: the benchmark problems (see problems.h).
 */
#include "problems.h"

#include <string.h>

#define SWEEP_TOKENS 65536  /* batch * seqlen of every sweep problem */
#define SWEEP_WIDTH 2048    /* heads * head_dim of every sweep problem */

static const int sweep_seqlens[] = {512, 1024, 2048, 4096, 8192, 16384};
static const int sweep_head_dims[] = {64, 128};
static const flash_dtype bench_dtypes[] = {FLASH_BF16, FLASH_E4M3};
enum { N_SEQLENS = sizeof sweep_seqlens / sizeof sweep_seqlens[0], N_HEAD_DIMS = 2 };
_Static_assert(SWEEP_PROBLEMS == N_HEAD_DIMS * 2 * N_SEQLENS, "SWEEP_PROBLEMS counts head_dim x causal x seqlen");
_Static_assert(BENCH_DTYPES == sizeof bench_dtypes / sizeof bench_dtypes[0], "BENCH_DTYPES counts bench_dtypes");

flash_problem headline_problem(void) {
    flash_problem p;
    memset(&p, 0, sizeof p);
    p.batch = 16;
    p.seqlen_q = p.seqlen_k = 4096;
    p.heads_q = p.heads_kv = 16;
    p.head_dim = 128;
    p.dtype = FLASH_BF16;
    return p;
}

flash_problem sweep_problem(int i, flash_dtype dtype) {
    flash_problem p;
    memset(&p, 0, sizeof p);
    const int seqlen = sweep_seqlens[i % N_SEQLENS];
    p.causal = (i / N_SEQLENS) % 2;
    p.head_dim = sweep_head_dims[i / (2 * N_SEQLENS)];
    p.batch = SWEEP_TOKENS / seqlen;
    p.seqlen_q = p.seqlen_k = seqlen;
    p.heads_q = p.heads_kv = SWEEP_WIDTH / p.head_dim;
    p.dtype = dtype;
    return p;
}

flash_dtype bench_dtype(int i) { return bench_dtypes[i]; }
