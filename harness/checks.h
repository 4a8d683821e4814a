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
    char reason[192];     /* why it failed; "" when it passed */
} check_verdict;

/* lse[n], lse_ref[n]: one value per (batch, head, query row). */
lse_stats lse_compare(const float *lse, const float *lse_ref, size_t n);

/* 2 * max|O_lowp - O_ref| + 1e-4, or NaN when the low-precision reference itself is broken. */
double check_tolerance(const err_stats *lowp);

/* ||O - O_ref|| / ||O_ref||; 0 when both are 0, +inf when only O_ref is. */
double rel_l2(const err_stats *o);

/* The verdict on one checked launch: o = stats of O vs O_ref, lowp = stats of O_lowp vs O_ref,
 * lse = the LSE comparison. */
check_verdict check_decide(const err_stats *o, const err_stats *lowp, const lse_stats *lse);

/* Spot check helpers (GPU fp32 reference vs CPU float64 reference), NaN-proof: anything
 * non-finite where it should not be reads as +inf, which is never <= SPOT_TOL. */
double row_max_abs_diff(const float *gpu, const double *cpu, int n);  /* gpu[n], cpu[n] */
double lse_abs_diff(float gpu, double cpu);                          /* +inf == +inf counts as 0 */

#endif /* HARNESS_CHECKS_H */
