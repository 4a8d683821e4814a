/*
 * checks.c: the pass rule (see checks.h for the why). Every comparison below is written so that
 * a NaN makes it fail: "!(err <= tol)" rather than "err > tol", since NaN > tol is false.
 */
#include "checks.h"

#include <math.h>
#include <stdio.h>

lse_stats lse_compare(const float *lse, const float *lse_ref, size_t n) {
    lse_stats s = {0.0, 0, 0, 0};
    for (size_t r = 0; r < n; r++) {
        s.n += 1;
        const float ref = lse_ref[r];
        if (isinf(ref) && ref > 0) {
            /* A row that sees no key: exactly +inf, by definition. */
            if (!(isinf(lse[r]) && lse[r] > 0)) s.inf_mismatch += 1;
            continue;
        }
        if (!isfinite(lse[r]) || !isfinite(ref)) {
            s.nonfinite += 1;
            continue;
        }
        const double e = fabs((double)lse[r] - (double)ref);
        if (e > s.max_abs_err) s.max_abs_err = e;
    }
    return s;
}

double check_tolerance(const err_stats *lowp) {
    if (lowp->nonfinite || lowp->n == 0) return NAN;
    return 2.0 * lowp->max_abs_err + CHECK_ABS_SLACK;
}

double rel_l2(const err_stats *o) {
    if (o->sum_sq_ref > 0.0) return sqrt(o->sum_sq_err / o->sum_sq_ref);
    return o->sum_sq_err > 0.0 ? INFINITY : 0.0;
}

double check_lse_tolerance(int e4m3, double scale, double max_q_norm, double max_k_norm) {
    return CHECK_LSE_TOL + (e4m3 ? ldexp(scale * max_q_norm * max_k_norm, -CHECK_FP8_QK_BITS) : 0.0);
}

check_verdict check_decide(const err_stats *o, const err_stats *lowp, const lse_stats *lse, double lse_tol) {
    check_verdict v;
    v.max_abs_err = o->nonfinite ? INFINITY : o->max_abs_err;  /* a NaN is as wrong as can be */
    v.rel_l2_err = o->nonfinite ? INFINITY : rel_l2(o);
    v.tol = check_tolerance(lowp);
    v.lse_max_err = lse->nonfinite ? INFINITY : lse->max_abs_err;
    v.lse_tol = lse_tol;
    v.reason[0] = '\0';
    v.pass = 0;

    if (o->n == 0)
        snprintf(v.reason, sizeof v.reason, "no O element was compared");
    else if (isnan(v.tol))
        snprintf(v.reason, sizeof v.reason, "the low-precision reference is not finite (reference broken)");
    else if (o->nonfinite)
        snprintf(v.reason, sizeof v.reason, "%llu of %llu O elements are NaN or inf (unwritten or overflowed)",
                 o->nonfinite, o->n);
    else if (o->empty_nonzero)
        snprintf(v.reason, sizeof v.reason, "%llu O elements of rows that see no key are not 0",
                 o->empty_nonzero);
    else if (!(o->max_abs_err <= v.tol))
        snprintf(v.reason, sizeof v.reason, "max_abs_err %.3e > tol %.3e", o->max_abs_err, v.tol);
    else if (lse->n == 0)
        snprintf(v.reason, sizeof v.reason, "no LSE value was compared");
    else if (lse->nonfinite)
        snprintf(v.reason, sizeof v.reason, "%llu of %llu LSE values are NaN or inf where a key is visible",
                 lse->nonfinite, lse->n);
    else if (lse->inf_mismatch)
        snprintf(v.reason, sizeof v.reason, "%llu LSE values of rows that see no key are not +inf",
                 lse->inf_mismatch);
    else if (!(lse->max_abs_err <= lse_tol))
        snprintf(v.reason, sizeof v.reason, "LSE max err %.3e > %.1e", lse->max_abs_err, lse_tol);
    else
        v.pass = 1;
    return v;
}

double row_max_abs_diff(const float *gpu, const double *cpu, int n) {
    double worst = 0.0;
    for (int d = 0; d < n; d++) {
        if (!isfinite(gpu[d]) || !isfinite(cpu[d])) return INFINITY;
        const double e = fabs((double)gpu[d] - cpu[d]);
        if (e > worst) worst = e;
    }
    return worst;
}

double lse_abs_diff(float gpu, double cpu) {
    if (isinf(cpu) && cpu > 0) return (isinf(gpu) && gpu > 0) ? 0.0 : INFINITY;
    if (!isfinite(gpu) || !isfinite(cpu)) return INFINITY;
    return fabs((double)gpu - cpu);
}
