/*
 * checks.h: the pass rule and the numbers reported with it. Pure C (the CPU tests link it).
 *
 * The rule is FlashAttention-2's own test rule: an fp32-accumulating kernel with 16-bit I/O
 * cannot beat the error that the 16-bit roundings themselves cause, so the tolerance is measured,
 * not guessed: compute the reference twice, once all in fp32 (O_ref) and once rounding P and O
 * to the I/O dtype like a real kernel must (O_lowp), and allow twice that gap plus a little slack:
 *
 *     max|O - O_ref| <= 2 * max|O_lowp - O_ref| + 1e-4
 *
 * plus the log-sum-exp: max|LSE - LSE_ref| <= 1e-3 over rows that see a key, and exactly +inf on
 * the rows that see none. Any NaN or infinity in O fails, whatever the maxima say.
 */
#ifndef HARNESS_CHECKS_H
#define HARNESS_CHECKS_H

#include <stddef.h>

#include "errstat.h"

#define CHECK_ABS_SLACK 1e-4   /* the "+ 1e-4" of the rule */
#define CHECK_LSE_TOL 1e-3     /* LSE, natural log, absolute */
#define CHECK_FP8_QK_BITS 9    /* e4m3: the scores' error, 2^-9 of sum |q_d k_d| (check_lse_tolerance) */
#define SPOT_TOL 1e-4          /* fp32 GPU reference vs float64 CPU reference, O and LSE */

typedef struct {
    double max_abs_err;              /* over rows where the reference is finite and so is LSE */
    unsigned long long n;            /* rows seen */
    unsigned long long nonfinite;    /* reference finite, LSE NaN or +-inf */
    unsigned long long inf_mismatch; /* reference +inf (row sees no key), LSE anything else */
} lse_stats;

typedef struct {
    int pass;
    double max_abs_err;   /* max|O - O_ref| */
    double rel_l2_err;    /* ||O - O_ref|| / ||O_ref|| */
    double tol;           /* 2 * max|O_lowp - O_ref| + 1e-4 */
    double lse_max_err;   /* max|LSE - LSE_ref| over finite rows */
    double lse_tol;       /* what it may be: check_lse_tolerance */
    char reason[192];     /* why it failed; "" when it passed */
} check_verdict;

/* lse[n], lse_ref[n]: one value per (batch, head, query row). */
lse_stats lse_compare(const float *lse, const float *lse_ref, size_t n);

/* 2 * max|O_lowp - O_ref| + 1e-4, or NaN when the low-precision reference itself is broken. */
double check_tolerance(const err_stats *lowp);

/* ||O - O_ref|| / ||O_ref||; 0 when both are 0, +inf when only O_ref is. */
double rel_l2(const err_stats *o);

/* The LSE tolerance. 16-bit inputs: CHECK_LSE_TOL. e4m3 inputs: the fp8 tensor cores add the k32
 * products of Q K^T in fewer bits than f32 (about 14, as the DeepSeek-V3 report measured on the
 * H800), and the products of one k32 step are aligned to the largest of them before they are added,
 * so where one product dominates a step (an attention sink: tests/inputs' INPUTS_SINKS) the 31
 * others each lose up to an ulp of it. A score then carries an error up to about
 * 2^-CHECK_FP8_QK_BITS of sum_d |q_d k_d| (the matrix's sinks cases measure up to 2^-9.8 of it on
 * the H200), and the LSE of a row, a softmax-weighted mean of its scores (for a row that sees one
 * key, that key's score), as much. The reference cannot reproduce the hardware's rounding, so the
 * rule allows it: CHECK_LSE_TOL plus 2^-9 * scale * max_i |q_i| * max_j |k_j| (Euclidean norms of the
 * dequantized rows, which bound sum_d |q_d k_d| by Cauchy-Schwarz). About 2e-2 at head_dim 128 on
 * unit-normal inputs: a wrong LSE (the 2^8 of P not taken back, 5.5; a missed descale; another
 * row's) is wrong by far more. */
double check_lse_tolerance(int e4m3, double scale, double max_q_norm, double max_k_norm);

/* The verdict on one checked launch: o = stats of O vs O_ref, lowp = stats of O_lowp vs O_ref,
 * lse = the LSE comparison, lse_tol its tolerance (check_lse_tolerance). */
check_verdict check_decide(const err_stats *o, const err_stats *lowp, const lse_stats *lse, double lse_tol);

/* Spot check helpers (GPU fp32 reference vs CPU float64 reference), NaN-proof: anything
 * non-finite where it should not be reads as +inf, which is never <= SPOT_TOL. */
double row_max_abs_diff(const float *gpu, const double *cpu, int n);  /* gpu[n], cpu[n] */
double lse_abs_diff(float gpu, double cpu);                          /* +inf == +inf counts as 0 */

#endif /* HARNESS_CHECKS_H */
