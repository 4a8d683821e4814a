/*
 * errstat.h: the error statistics of an output against a reference, one element at a time.
 *
 * Shared, word for word, by the GPU reduction kernel (reference.cu: 134M elements per check) and
 * the host (CPU tests, spot checks), so the tests exercise the very code that judges the stages.
 * Header-only, because the same function must compile as __host__ __device__ under nvcc and as
 * plain C under gcc.
 *
 * The trap this file exists to avoid: every comparison with NaN is false, so "if (err > max)"
 * silently skips a NaN, and fmax(NaN, x) returns x. A stage that leaves its output unwritten (NaN
 * poison) would then look perfect. So non-finite values are counted explicitly, never folded
 * into the maximum, and a non-zero count fails the check.
 */
#ifndef HARNESS_ERRSTAT_H
#define HARNESS_ERRSTAT_H

#include <math.h>

#ifdef __CUDACC__
#define ERRSTAT_HD __host__ __device__
#else
#define ERRSTAT_HD
#endif

typedef struct {
    double max_abs_err;              /* max |x - ref| over the elements where both are finite */
    double sum_sq_err;               /* sum (x - ref)^2, same elements */
    double sum_sq_ref;               /* sum ref^2, same elements (for the relative L2 error) */
    unsigned long long n;            /* elements seen */
    unsigned long long nonfinite;    /* elements where x or ref is NaN or +-inf */
    unsigned long long empty_nonzero;/* elements of rows with no visible key that are not exactly 0 */
} err_stats;

static inline ERRSTAT_HD void errstat_init(err_stats *s) {
    s->max_abs_err = 0.0;
    s->sum_sq_err = 0.0;
    s->sum_sq_ref = 0.0;
    s->n = 0;
    s->nonfinite = 0;
    s->empty_nonzero = 0;
}

/* One element: x from the output under test, ref from the reference. `row_empty` says the element
 * belongs to a query row that sees no key; FlashAttention-2 defines its output as exactly 0. */
static inline ERRSTAT_HD void errstat_add(err_stats *s, float x, float ref, int row_empty) {
    s->n += 1;
    if (row_empty && x != 0.0f) s->empty_nonzero += 1;  /* NaN != 0 is true: counted here too */
    if (!isfinite(x) || !isfinite(ref)) {
        s->nonfinite += 1;
        return;
    }
    const double e = fabs((double)x - (double)ref);  /* finite: both operands are finite floats */
    if (e > s->max_abs_err) s->max_abs_err = e;
    s->sum_sq_err += e * e;
    s->sum_sq_ref += (double)ref * (double)ref;
}

/* a += b: for the tree reduction across threads and blocks. */
static inline ERRSTAT_HD void errstat_merge(err_stats *a, const err_stats *b) {
    if (b->max_abs_err > a->max_abs_err) a->max_abs_err = b->max_abs_err;
    a->sum_sq_err += b->sum_sq_err;
    a->sum_sq_ref += b->sum_sq_ref;
    a->n += b->n;
    a->nonfinite += b->nonfinite;
    a->empty_nonzero += b->empty_nonzero;
}

#endif /* HARNESS_ERRSTAT_H */
