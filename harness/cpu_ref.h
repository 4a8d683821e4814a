/*
 * cpu_ref.h: attention for single query rows, in float64, on the CPU. Pure C.
 *
 * It is the referee of the referee: every run recomputes a few rows here and compares them with
 * the fp32 GPU reference (reference.cu), which in turn judges the stages. Slow (one row costs
 * seqlen_k * head_dim * 2 multiply-adds) and therefore only used on sampled rows.
 */
#ifndef HARNESS_CPU_REF_H
#define HARNESS_CPU_REF_H

#include "flash.h"

/* Is key j visible to query row i?  Causal masking is bottom-right aligned (FlashAttention-2
 * >= 2.1): the last query row sees every key, so row i sees keys j <= i + (seqlen_k - seqlen_q).
 * With seqlen_q > seqlen_k the first rows see no key at all. */
int attn_key_allowed(const flash_problem *p, long long i, long long j);

/* Query row i of batch b, head h (of heads_q), from host copies in float:
 *   q : [batch, seqlen_q, heads_q,  head_dim]
 *   k : [batch, seqlen_k, heads_kv, head_dim]
 *   v : [batch, seqlen_k, heads_kv, head_dim]
 * Writes o_row[head_dim] and *lse (natural log). `scale` is the resolved softmax scale (never 0).
 * A row with no visible key gets o_row = 0 and *lse = +inf. Only p's shape, causal flag and
 * dtype-independent fields are read; the pointers inside p are not used. */
void cpu_attention_row(const flash_problem *p, float scale, const float *q, const float *k, const float *v,
                       int b, int h, int i, double *o_row, double *lse);

#endif /* HARNESS_CPU_REF_H */
