/*
 * cpu_ref.c: the float64 CPU reference, written as the textbook formula:
 *
 *   s_j = scale * <q_i, k_j>            for every visible key j
 *   m   = max_j s_j
 *   l   = sum_j exp(s_j - m)
 *   o_i = sum_j exp(s_j - m) / l * v_j
 *   lse = m + log(l)
 *
 * No tiling, no online softmax, nothing clever: double precision everywhere so that its own
 * rounding error (~1e-16 relative) is invisible next to the fp32 reference's (~1e-6).
 */
#include "cpu_ref.h"

#include <math.h>
#include <stdlib.h>

int attn_key_allowed(const flash_problem *p, long long i, long long j) {
    if (j < 0 || j >= p->seqlen_k) return 0;
    if (!p->causal) return 1;
    return j <= i + ((long long)p->seqlen_k - (long long)p->seqlen_q);
}

void cpu_attention_row(const flash_problem *p, float scale, const float *q, const float *k, const float *v,
                       int b, int h, int i, double *o_row, double *lse) {
    const int D = p->head_dim;
    const int Sk = p->seqlen_k;
    /* GQA/MQA: heads_q / heads_kv consecutive query heads share one K/V head. */
    const int hkv = h / (p->heads_q / p->heads_kv);
    /* 64-bit offsets: the headline tensors hold 134M elements, their products overflow int. */
    const float *q_row = q + (((size_t)b * p->seqlen_q + (size_t)i) * p->heads_q + (size_t)h) * D;   /* [D] */
    const size_t kv_row_stride = (size_t)p->heads_kv * D;  /* elements from key j to key j+1 */
    const float *k_head = k + ((size_t)b * Sk * p->heads_kv + (size_t)hkv) * D;  /* key j at + j*stride */
    const float *v_head = v + ((size_t)b * Sk * p->heads_kv + (size_t)hkv) * D;

    for (int d = 0; d < D; d++) o_row[d] = 0.0;

    /* s[Sk]: the scores of this row, kept so the three passes below read the same numbers. */
    double *s = (double *)malloc((size_t)Sk * sizeof(double));
    if (!s) abort();  /* a few hundred KB at most; failing here means the host is out of memory */

    double m = -INFINITY;
    int any = 0;
    for (int j = 0; j < Sk; j++) {
        if (!attn_key_allowed(p, i, j)) continue;
        const float *k_row = k_head + (size_t)j * kv_row_stride;
        double dot = 0.0;
        for (int d = 0; d < D; d++) dot += (double)q_row[d] * (double)k_row[d];
        s[j] = (double)scale * dot;
        if (s[j] > m) m = s[j];
        any = 1;
    }
    if (!any) {
        /* No visible key: FlashAttention-2 returns O = 0 and LSE = +inf for such a row. */
        *lse = INFINITY;
        free(s);
        return;
    }

    double l = 0.0;
    for (int j = 0; j < Sk; j++)
        if (attn_key_allowed(p, i, j)) l += exp(s[j] - m);

    for (int j = 0; j < Sk; j++) {
        if (!attn_key_allowed(p, i, j)) continue;
        const double pj = exp(s[j] - m) / l;
        const float *v_row = v_head + (size_t)j * kv_row_stride;
        for (int d = 0; d < D; d++) o_row[d] += pj * (double)v_row[d];
    }
    *lse = m + log(l);
    free(s);
}
