/*
 * test_cpu.c: unit tests of the harness's pure-C parts, no GPU needed:
 *   the float64 reference (cpu_ref.c) on hand-checkable cases, the pass rule and its NaN/Inf
 *   handling (checks.c, errstat.h), bf16/fp16/e4m3 conversion (lowp.c), the input generator and
 *   its e4m3 quantization (inputs.c), the e4m3 pass rule against simulated kernels that round
 *   right and wrong, and CSV appending (csv.c).
 *
 * Build (tests/run_tests.sh does this):
 *   gcc -std=c11 -O1 -Icommon -Iharness -I<cuda>/include tests/test_cpu.c harness/lowp.c \
 *       harness/inputs.c harness/cpu_ref.c harness/checks.c harness/csv.c -lm -lpthread
 * Output: one line per test, "PASS: name", "FAIL: name: why" or "SKIP: name: why"; exit 0 when
 * none failed.
 */
#define _POSIX_C_SOURCE 200809L  /* mkstemp-free temp names via getpid */

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "checks.h"
#include "cpu_ref.h"
#include "csv.h"
#include "errstat.h"
#include "flash_internal.h"
#include "inputs.h"
#include "lowp.h"
#include "report.h"

static int close_to(double a, double b, double tol) { return fabs(a - b) <= tol; }

/* A host problem description: only the shape fields are read by cpu_attention_row. */
static flash_problem shape(int batch, int sq, int sk, int hq, int hkv, int d, int causal) {
    flash_problem p;
    memset(&p, 0, sizeof p);
    p.batch = batch, p.seqlen_q = sq, p.seqlen_k = sk, p.heads_q = hq, p.heads_kv = hkv, p.head_dim = d;
    p.causal = causal;
    return p;
}

/* ------------------------------------------------------------------------------------------------
 * The float64 reference */

static void test_uniform_scores(void) {
    /* q = 0: every score is 0, the softmax is uniform, O = the mean of the V rows, LSE = log(Sk). */
    enum { SK = 5, D = 4 };
    flash_problem p = shape(1, 1, SK, 1, 1, D, 0);
    float q[D] = {0}, k[SK * D], v[SK * D];  /* q [1,1,1,D], k/v [1,SK,1,D] */
    for (int i = 0; i < SK * D; i++) k[i] = (float)(i % 7) - 3.0f, v[i] = (float)i;
    double o[D], lse;
    cpu_attention_row(&p, 0.5f, q, k, v, 0, 0, 0, o, &lse);
    int ok = close_to(lse, log((double)SK), 1e-12);
    for (int d = 0; d < D; d++) {
        double mean = 0;
        for (int j = 0; j < SK; j++) mean += (double)v[j * D + d] / SK;
        ok &= close_to(o[d], mean, 1e-12);
    }
    report("cpu_ref uniform scores: O = mean(V), LSE = log(Sk)", ok, "wrong O or LSE");
}

static void test_single_key(void) {
    /* One key: P = 1, O = v, LSE = the only score = scale * <q, k>. */
    enum { D = 4 };
    flash_problem p = shape(1, 1, 1, 1, 1, D, 0);
    float q[D] = {1, 2, 3, 4}, k[D] = {0.5f, -1, 2, 0.25f}, v[D] = {7, -8, 9, 10};
    double o[D], lse;
    cpu_attention_row(&p, 0.25f, q, k, v, 0, 0, 0, o, &lse);
    const double expect = 0.25 * (0.5 - 2 + 6 + 1);
    int ok = close_to(lse, expect, 1e-12);
    for (int d = 0; d < D; d++) ok &= o[d] == v[d];
    report("cpu_ref single key: O = v, LSE = scale*q.k", ok, "wrong O or LSE");
}

/* With q = 0 (uniform over the visible keys) and v_j = j, O[0] is the mean index of the visible
 * keys: a direct readout of the mask. Returns 1 if row i sees exactly keys 0..last (last = -1:
 * none, with O = 0 and LSE = +inf). */
static int row_sees(int sq, int sk, int i, int last) {
    enum { D = 1, MAXK = 8 };
    flash_problem p = shape(1, sq, sk, 1, 1, D, 1);
    float q[MAXK] = {0}, k[MAXK] = {0}, v[MAXK];
    for (int j = 0; j < MAXK; j++) v[j] = (float)j;
    double o[D], lse;
    cpu_attention_row(&p, 1.0f, q, k, v, 0, 0, i, o, &lse);
    if (last < 0) return o[0] == 0.0 && isinf(lse) && lse > 0;
    return close_to(o[0], last / 2.0, 1e-12) && close_to(lse, log(last + 1.0), 1e-12);
}

static void test_causal_masks(void) {
    /* Bottom-right aligned: row i sees keys j <= i + (Sk - Sq). */
    report("cpu_ref causal Sq=Sk=4: row 0 sees key 0, row 3 sees 0..3",
           row_sees(4, 4, 0, 0) && row_sees(4, 4, 3, 3), "mask wrong");
    report("cpu_ref causal Sq=3 Sk=5: row 0 sees 0..2, row 2 sees 0..4",
           row_sees(3, 5, 0, 2) && row_sees(3, 5, 1, 3) && row_sees(3, 5, 2, 4), "mask wrong");
    report("cpu_ref causal Sq=5 Sk=3: rows 0,1 see nothing (O=0, LSE=+inf), row 2 sees key 0, row 4 sees 0..2",
           row_sees(5, 3, 0, -1) && row_sees(5, 3, 1, -1) && row_sees(5, 3, 2, 0) && row_sees(5, 3, 4, 2),
           "mask or empty-row handling wrong");
    flash_problem p = shape(1, 5, 3, 1, 1, 1, 1);
    report("attn_key_allowed matches the rule",
           !attn_key_allowed(&p, 1, 0) && attn_key_allowed(&p, 2, 0) && !attn_key_allowed(&p, 2, 1) &&
               !attn_key_allowed(&p, 4, 3),
           "wrong visibility");
}

static void test_gqa_mapping(void) {
    /* heads_q = 4, heads_kv = 2: query heads 0,1 use kv head 0, heads 2,3 use kv head 1. One key,
     * so O is exactly the V row of the kv head used. k, v: [1, 1, 2, D]. */
    enum { D = 2 };
    flash_problem p = shape(1, 1, 1, 4, 2, D, 0);
    float q[4 * D] = {0}, k[2 * D] = {0}, v[2 * D] = {10, 11, 20, 21};
    int ok = 1;
    for (int h = 0; h < 4; h++) {
        double o[D], lse;
        cpu_attention_row(&p, 1.0f, q, k, v, 0, h, 0, o, &lse);
        ok &= o[0] == (h < 2 ? 10 : 20) && o[1] == (h < 2 ? 11 : 21);
    }
    report("cpu_ref GQA: query head h reads kv head h / (Hq/Hkv)", ok, "wrong kv head");
}

static void test_batch_offsets(void) {
    /* Batch 1 must read batch 1's rows: put a different single-key V in each batch. */
    enum { D = 2 };
    flash_problem p = shape(2, 1, 1, 1, 1, D, 0);
    float q[2 * D] = {0}, k[2 * D] = {0}, v[2 * D] = {1, 2, 3, 4};
    double o[D], lse;
    cpu_attention_row(&p, 1.0f, q, k, v, 1, 0, 0, o, &lse);
    report("cpu_ref batch offset", o[0] == 3 && o[1] == 4, "read the wrong batch");
}

/* ------------------------------------------------------------------------------------------------
 * The pass rule */

/* Stats of out[n] against ref[n] through the same errstat_add the GPU kernel uses. */
static err_stats stats_of(const float *out, const float *ref, int n) {
    err_stats s;
    errstat_init(&s);
    for (int i = 0; i < n; i++) errstat_add(&s, out[i], ref[i], 0);
    return s;
}

static void test_pass_rule(void) {
    enum { N = 8 };
    float ref[N], lowp[N], good[N], bad[N];
    for (int i = 0; i < N; i++) {
        ref[i] = 0.1f * (float)i - 0.3f;
        lowp[i] = ref[i] + (i == 3 ? 2e-3f : 0.0f);  /* the low-precision gap: 2e-3 */
        good[i] = ref[i] + (i == 5 ? -3e-3f : 0.0f); /* within 2 * 2e-3 + 1e-4 */
        bad[i] = ref[i] + (i == 5 ? 5e-3f : 0.0f);   /* beyond */
    }
    float lse_ref[2] = {1.5f, INFINITY}, lse_ok[2] = {1.5005f, INFINITY};
    const lse_stats l_ok = lse_compare(lse_ok, lse_ref, 2);
    const err_stats s_lowp = stats_of(lowp, ref, N);

    err_stats s = stats_of(good, ref, N);
    check_verdict v = check_decide(&s, &s_lowp, &l_ok, CHECK_LSE_TOL);
    report("pass rule: correct output passes", v.pass && close_to(v.tol, 2 * 2e-3 + 1e-4, 1e-7), v.reason);

    s = stats_of(bad, ref, N);
    v = check_decide(&s, &s_lowp, &l_ok, CHECK_LSE_TOL);
    report("pass rule: wrong output fails", !v.pass, "a 5e-3 error passed a 4.1e-3 tolerance");

    float nan_out[N], inf_out[N];
    memcpy(nan_out, good, sizeof good);
    memcpy(inf_out, good, sizeof good);
    nan_out[2] = NAN;
    inf_out[6] = -INFINITY;
    s = stats_of(nan_out, ref, N);
    v = check_decide(&s, &s_lowp, &l_ok, CHECK_LSE_TOL);
    report("pass rule: a NaN in O fails", !v.pass && s.nonfinite == 1 && isinf(v.max_abs_err), "NaN passed");
    s = stats_of(inf_out, ref, N);
    v = check_decide(&s, &s_lowp, &l_ok, CHECK_LSE_TOL);
    report("pass rule: an Inf in O fails", !v.pass, "Inf passed");

    /* All-NaN output (an unwritten, poisoned buffer): the max stays 0, only the count sees it. */
    float all_nan[N];
    for (int i = 0; i < N; i++) all_nan[i] = NAN;
    s = stats_of(all_nan, ref, N);
    v = check_decide(&s, &s_lowp, &l_ok, CHECK_LSE_TOL);
    report("pass rule: an all-NaN (unwritten) O fails", !v.pass, "unwritten output passed");

    /* A broken low-precision reference makes the tolerance NaN, which must fail, not pass. */
    err_stats broken = stats_of(nan_out, ref, N);
    s = stats_of(good, ref, N);
    v = check_decide(&s, &broken, &l_ok, CHECK_LSE_TOL);
    report("pass rule: NaN tolerance fails", !v.pass && isnan(v.tol), "passed with a NaN tolerance");

    /* Rows that see no key must be exactly 0. */
    err_stats e;
    errstat_init(&e);
    errstat_add(&e, 1e-6f, 0.0f, 1);
    v = check_decide(&e, &s_lowp, &l_ok, CHECK_LSE_TOL);
    report("pass rule: non-zero O on a row that sees no key fails", !v.pass && e.empty_nonzero == 1, v.reason);

    /* LSE: within 1e-3 passes; beyond, NaN, or a finite value where +inf is due fails. */
    s = stats_of(good, ref, N);
    float lse_far[2] = {1.502f, INFINITY}, lse_nan[2] = {NAN, INFINITY}, lse_noinf[2] = {1.5f, 3.0f},
          lse_inf[2] = {INFINITY, INFINITY};
    lse_stats l = lse_compare(lse_far, lse_ref, 2);
    report("pass rule: LSE error 2e-3 fails", !check_decide(&s, &s_lowp, &l, CHECK_LSE_TOL).pass, "passed");
    l = lse_compare(lse_nan, lse_ref, 2);
    report("pass rule: NaN LSE fails", !check_decide(&s, &s_lowp, &l, CHECK_LSE_TOL).pass && l.nonfinite == 1, "passed");
    l = lse_compare(lse_noinf, lse_ref, 2);
    report("pass rule: finite LSE on a row that sees no key fails",
           !check_decide(&s, &s_lowp, &l, CHECK_LSE_TOL).pass && l.inf_mismatch == 1, "passed");
    l = lse_compare(lse_inf, lse_ref, 2);
    report("pass rule: +inf LSE on a row that sees keys fails", !check_decide(&s, &s_lowp, &l, CHECK_LSE_TOL).pass, "passed");

    /* e4m3's LSE tolerance: 1e-3 plus 2^-9 scale |q| |k| (here 1e-3 + 2^-9 * 0.5 * 8 * 16 = 1e-3 +
     * 1/8), 1e-3 for 16-bit inputs. The 2e-3 error above passes under it; an LSE that keeps P's
     * 2^8 (off by 8 ln 2) does not. */
    report("pass rule: LSE tolerance of 16-bit inputs is CHECK_LSE_TOL", check_lse_tolerance(0, 0.5, 8, 16) == CHECK_LSE_TOL, "");
    report("pass rule: LSE tolerance of e4m3 inputs adds 2^-9 scale |q| |k|",
           fabs(check_lse_tolerance(1, 0.5, 8, 16) - (1e-3 + 1.0 / 8)) < 1e-12, "");
    l = lse_compare(lse_far, lse_ref, 2);
    report("pass rule: LSE error 2e-3 passes under e4m3's tolerance", check_decide(&s, &s_lowp, &l, check_lse_tolerance(1, 0.5, 8, 16)).pass,
           "failed");
    float lse_shift[2] = {1.5f + 8 * 0.6931472f, INFINITY};
    l = lse_compare(lse_shift, lse_ref, 2);
    report("pass rule: an LSE off by 8 ln 2 fails under e4m3's tolerance",
           !check_decide(&s, &s_lowp, &l, check_lse_tolerance(1, 0.5, 8, 16)).pass, "passed");

    /* Relative L2 error: ||(3,4)|| / ||(6,8)|| = 0.5. */
    float r2[2] = {6, 8}, o2[2] = {9, 12};
    err_stats s2 = stats_of(o2, r2, 2);
    report("rel_l2 = ||O - ref|| / ||ref||", close_to(rel_l2(&s2), 0.5, 1e-12), "wrong value");

    /* Spot-check helpers are NaN-proof. */
    float g[2] = {1.0f, NAN};
    double c[2] = {1.0, 1.0};
    report("spot check: NaN row reads as +inf", isinf(row_max_abs_diff(g, c, 2)), "NaN slipped through");
    report("spot check: +inf LSE matches +inf, not a finite value",
           lse_abs_diff(INFINITY, INFINITY) == 0.0 && isinf(lse_abs_diff(3.0f, INFINITY)) &&
               isinf(lse_abs_diff(NAN, 1.0)),
           "wrong");
}

/* ------------------------------------------------------------------------------------------------
 * bf16 / fp16 conversion */

static void test_bf16(void) {
    int ok = 1;
    char why[160] = "";
    /* Exhaustive round trip: every non-NaN bf16 survives float and back. */
    for (uint32_t h = 0; h < 65536 && ok; h++) {
        const float f = bf16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        if (f32_to_bf16(f) != h) ok = 0, snprintf(why, sizeof why, "0x%04x does not round-trip", h);
    }
    report("bf16 round trip, all 65536 values", ok, why);

    /* Ties to even, exhaustively: the float halfway between two neighbours goes to the even one. */
    ok = 1;
    for (uint32_t h = 0; h < 0x7f7f && ok; h++) {
        const float lo = bf16_to_f32((uint16_t)h), hi = bf16_to_f32((uint16_t)(h + 1));
        /* Exact: bf16 neighbours differ in float's bit 16, the midpoint sets bit 15. (lo + hi) / 2 would
         * overflow at the top of the range. */
        const float mid = lo + 0.5f * (hi - lo);
        const uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (f32_to_bf16(mid) != even) ok = 0, snprintf(why, sizeof why, "tie after 0x%04x went the wrong way", h);
        if (f32_to_bf16(nextafterf(mid, 0)) != h || f32_to_bf16(nextafterf(mid, INFINITY)) != h + 1)
            ok = 0, snprintf(why, sizeof why, "near-tie after 0x%04x went the wrong way", h);
    }
    report("bf16 rounding to nearest even (every tie)", ok, why);

    report("bf16 specials: 1.0, -2.0, inf, NaN stays NaN, overflow -> inf",
           f32_to_bf16(1.0f) == 0x3f80 && f32_to_bf16(-2.0f) == 0xc000 && f32_to_bf16(INFINITY) == 0x7f80 &&
               isnan(bf16_to_f32(f32_to_bf16(NAN))) && f32_to_bf16(3.4e38f) == 0x7f80 &&
               bf16_to_f32(0xffff) != bf16_to_f32(0xffff),
           "wrong bits");
}

static void test_fp16(void) {
    int ok = 1;
    char why[160] = "";
    for (uint32_t h = 0; h < 65536 && ok; h++) {
        const float f = f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        if (f32_to_f16(f) != h) ok = 0, snprintf(why, sizeof why, "0x%04x does not round-trip", h);
    }
    report("fp16 round trip, all 65536 values (subnormals included)", ok, why);

    ok = 1;
    for (uint32_t h = 0; h < 0x7bff && ok; h++) {  /* every pair of finite positive neighbours */
        const float lo = f16_to_f32((uint16_t)h), hi = f16_to_f32((uint16_t)(h + 1));
        const float mid = lo + 0.5f * (hi - lo);  /* exact in float */
        const uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (f32_to_f16(mid) != even) ok = 0, snprintf(why, sizeof why, "tie after 0x%04x went the wrong way", h);
        if (f32_to_f16(nextafterf(mid, 0)) != h || f32_to_f16(nextafterf(mid, INFINITY)) != h + 1)
            ok = 0, snprintf(why, sizeof why, "near-tie after 0x%04x went the wrong way", h);
    }
    report("fp16 rounding to nearest even (every tie, subnormals included)", ok, why);

    report("fp16 specials: 1.0, 65504, 65520 -> inf, 2^-25 -> 0, 2^-24, NaN, 0xFFFF is NaN",
           f32_to_f16(1.0f) == 0x3c00 && f32_to_f16(65504.0f) == 0x7bff && f32_to_f16(65519.0f) == 0x7bff &&
               f32_to_f16(65520.0f) == 0x7c00 && f32_to_f16(0x1p-25f) == 0 && f32_to_f16(0x1p-24f) == 1 &&
               f32_to_f16(-0x1.8p-25f) == 0x8001 && isnan(f16_to_f32(f32_to_f16(NAN))) && isnan(f16_to_f32(0xffff)) &&
               f32_to_f16(-INFINITY) == 0xfc00,
           "wrong bits");
}

/* ------------------------------------------------------------------------------------------------
 * e4m3 conversion */

static void test_e4m3(void) {
    int ok = 1;
    char why[160] = "";
    /* Every code: the two NaNs decode to NaN, every other one survives float and back. */
    for (uint32_t b = 0; b < 256 && ok; b++) {
        const float f = e4m3_to_f32((uint8_t)b);
        if ((b & 0x7f) == 0x7f) {
            if (!isnan(f)) ok = 0, snprintf(why, sizeof why, "0x%02x decodes to %g, not NaN", b, (double)f);
        } else if (f32_to_e4m3(f) != b) {
            ok = 0, snprintf(why, sizeof why, "0x%02x (%g) does not round-trip", b, (double)f);
        }
    }
    report("e4m3 round trip, all 256 codes (0x7F and 0xFF are NaN)", ok, why);

    /* The layout: 1 sign, 4 exponent bits of bias 7, 3 mantissa bits; subnormals in steps of 2^-9;
     * the codes of each sign in increasing order of magnitude. */
    ok = e4m3_to_f32(0x00) == 0.0f && !signbit(e4m3_to_f32(0x00)) && e4m3_to_f32(0x80) == 0.0f &&
         signbit(e4m3_to_f32(0x80)) && e4m3_to_f32(0x01) == 0x1p-9f && e4m3_to_f32(0x07) == 7 * 0x1p-9f &&
         e4m3_to_f32(0x08) == 0x1p-6f && e4m3_to_f32(0x38) == 1.0f && e4m3_to_f32(0x3b) == 1.375f &&
         e4m3_to_f32(0x7e) == 448.0f && e4m3_to_f32(0xc0) == -2.0f && e4m3_to_f32(0xfe) == -448.0f;
    for (uint32_t b = 0; b < 0x7e && ok; b++)
        if (!(e4m3_to_f32((uint8_t)b) < e4m3_to_f32((uint8_t)(b + 1))) ||
            e4m3_to_f32((uint8_t)(b | 0x80)) != -e4m3_to_f32((uint8_t)b))
            ok = 0;
    report("e4m3 values: 2^-9 subnormal steps, 2^-6, 1.0, 448, signs, increasing codes", ok, "wrong value");

    /* Ties to even, at every pair of neighbours of either sign, subnormals included, 0 and the
     * smallest subnormal too; and just off each tie, to the nearer one. */
    ok = 1;
    for (uint32_t h = 0; h < 0x7e && ok; h++)
        for (uint32_t sign = 0; sign <= 0x80 && ok; sign += 0x80) {
            const float lo = e4m3_to_f32((uint8_t)(h | sign)), hi = e4m3_to_f32((uint8_t)((h + 1) | sign));
            const float mid = lo + 0.5f * (hi - lo);  /* exact in float */
            const uint32_t even = ((h & 1) ? h + 1 : h) | sign;
            const float toward_lo = nextafterf(mid, lo), toward_hi = nextafterf(mid, hi);
            if (f32_to_e4m3(mid) != even) ok = 0, snprintf(why, sizeof why, "tie after 0x%02x went the wrong way", h | sign);
            if (f32_to_e4m3(toward_lo) != (h | sign) || f32_to_e4m3(toward_hi) != ((h + 1) | sign))
                ok = 0, snprintf(why, sizeof why, "near-tie after 0x%02x went the wrong way", h | sign);
        }
    report("e4m3 rounding to nearest even (every tie, both signs, subnormals included)", ok, why);

    /* satfinite: 464 is the tie between 448 and the 480 that 0x7F would be, and goes to 448; all
     * beyond, infinity too, saturates to +-448. Below half the smallest subnormal: +-0. */
    report("e4m3 saturates beyond 448: 448, 464, just above 464, 480, 1e6, FLT_MAX, inf -> 0x7E; negatives -> 0xFE",
           f32_to_e4m3(448.0f) == 0x7e && f32_to_e4m3(464.0f) == 0x7e && f32_to_e4m3(nextafterf(464.0f, 1e9f)) == 0x7e &&
               f32_to_e4m3(480.0f) == 0x7e && f32_to_e4m3(1e6f) == 0x7e && f32_to_e4m3(FLT_MAX) == 0x7e &&
               f32_to_e4m3(INFINITY) == 0x7e && f32_to_e4m3(-464.0f) == 0xfe && f32_to_e4m3(-INFINITY) == 0xfe &&
               f32_to_e4m3(nextafterf(448.0f, 0.0f)) == 0x7e && f32_to_e4m3(432.0f) == 0x7e &&
               f32_to_e4m3(nextafterf(432.0f, 0.0f)) == 0x7d,
           "wrong bits");
    report("e4m3 underflow and subnormal ties: 2^-10 -> 0, just above -> 2^-9, 1.5, 2.5, 3.5 x 2^-9 -> 2, 2, 4 x 2^-9, "
           "1e-30 -> 0, -1e-30 -> -0",
           f32_to_e4m3(0x1p-10f) == 0x00 && f32_to_e4m3(nextafterf(0x1p-10f, 1.0f)) == 0x01 &&
               f32_to_e4m3(-0x1p-10f) == 0x80 && f32_to_e4m3(1e-30f) == 0x00 && f32_to_e4m3(-1e-30f) == 0x80 &&
               f32_to_e4m3(0x1.8p-9f) == 0x02 && f32_to_e4m3(0x1.4p-8f) == 0x02 && f32_to_e4m3(0x1.cp-8f) == 0x04,
           "wrong bits");
    report("e4m3 NaN: any NaN -> 0x7F (the canonical NaN, as CUDA converts)",
           f32_to_e4m3(NAN) == 0x7f && f32_to_e4m3(-NAN) == 0x7f, "wrong bits");
    report("dtype_name / dtype_bytes: bf16 2, fp16 2, e4m3 1",
           strcmp(dtype_name(FLASH_E4M3), "e4m3") == 0 && strcmp(dtype_name(FLASH_BF16), "bf16") == 0 &&
               strcmp(dtype_name(FLASH_FP16), "fp16") == 0 && dtype_bytes(FLASH_E4M3) == 1 &&
               dtype_bytes(FLASH_BF16) == 2 && dtype_bytes(FLASH_FP16) == 2,
           "wrong name or size");
}

/* The sinks inputs (INPUTS_SINKS): head-dim element 0 of every query is 8, of every key a ramp that
 * rises toward key 0, key 0 itself 32; every other element, and all of v, the normal sample. */
static void test_inputs_sinks(void) {
    enum { S = 5, H = 2, D = 4 };  /* [1, S, H, D] */
    const input_layout lq = {INPUTS_SINKS, 0, S, H, D}, lk = {INPUTS_SINKS, 1, S, H, D}, lv = {INPUTS_SINKS, 2, S, H, D};
    const uint64_t key = stream_key(9, 1);
    int ok = 1;
    for (size_t i = 0; i < S * H * D; i++) {
        const size_t d = i % D, j = i / (H * D);
        const float x = normal_at(key, i);
        ok &= input_at(key, i, &lq) == (d == 0 ? 8.0f : x);
        ok &= input_at(key, i, &lk) == (d != 0 ? x : j == 0 ? 32.0f : 6.0f * (float)(S - j) / (float)S);
        ok &= input_at(key, i, &lv) == x && input_at(key, i, NULL) == x;
    }
    /* Key 1 .. S-1 falling toward the end of the sequence, which a kernel visits first: each row's
     * max rises from tile to tile, and key 0 is above them all. */
    for (size_t j = 1; j + 1 < S; j++) ok &= input_at(key, j * H * D, &lk) > input_at(key, (j + 1) * H * D, &lk);
    ok &= input_at(key, 0, &lk) > input_at(key, H * D, &lk);
    report("sinks inputs: q's element 0 is 8, k's a ramp rising to key 0 at 32, the rest the normal samples", ok,
           "wrong value");
}

/* e4m3 inputs: the samples of the bf16 streams, quantized with the tensor's amax / 448. */
static void test_inputs_e4m3(void) {
    enum { N = 1 << 21 };  /* above the threading threshold of fill_normal */
    uint8_t *b1 = malloc(N), *b4 = malloc(N);
    float *v1 = malloc(N * 4), *v4 = malloc(N * 4);
    if (!b1 || !b4 || !v1 || !v4) {
        report("e4m3 inputs", 0, "out of memory");
        return;
    }
    /* Several thread counts, so that the tensor's largest sample (at 12.8 % of this one) lies past
     * the first thread's share for some: a descale taken from one share would show. */
    const uint64_t key = stream_key(42, 2);
    const float d1 = fill_normal(b1, v1, N, key, FLASH_E4M3, 1, NULL);
    int same = 1;
    static const int thread_counts[] = {3, 8, 16};
    for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
        const float dt = fill_normal(b4, v4, N, key, FLASH_E4M3, thread_counts[t], NULL);
        same &= dt == d1 && memcmp(b1, b4, N) == 0 && memcmp(v1, v4, N * 4) == 0;
    }
    report("e4m3 inputs: bits, values and descale identical for 1, 3, 8 and 16 threads", same,
           "depends on the thread count");

    float amax = 0.0f;
    size_t at = 0;
    for (size_t i = 0; i < N; i++)
        if (fabsf(normal_at(key, i)) > amax) amax = fabsf(normal_at(key, i)), at = i;
    char why[160];
    snprintf(why, sizeof why, "descale %.9g, amax / 448 = %.9g", (double)d1, (double)(amax / 448.0f));
    report("e4m3 inputs: descale = amax / 448 over the whole tensor", d1 == amax / 448.0f, why);

    int ok = 1;
    for (size_t i = 0; i < N && ok; i++) {
        const uint8_t want = f32_to_e4m3(normal_at(key, i) / d1);
        ok = b1[i] == want && v1[i] == e4m3_to_f32(b1[i]) * d1 && (b1[i] & 0x7f) != 0x7f;
        if (!ok) snprintf(why, sizeof why, "element %zu: 0x%02x, %g", i, b1[i], (double)v1[i]);
    }
    report("e4m3 inputs: every element is e4m3(x / descale), its value e4m3 * descale, none NaN", ok, why);
    report("e4m3 inputs: the amax element is +-448, and stands for amax", (b1[at] & 0x7f) == 0x7e &&
               fabsf(fabsf(v1[at]) - amax) <= amax * 0x1p-23f,
           "not the largest code");
    double sum = 0, sq = 0;
    for (size_t i = 0; i < N; i++) sum += v1[i], sq += (double)v1[i] * v1[i];
    const double mean = sum / N, var = sq / N - mean * mean;
    snprintf(why, sizeof why, "mean %.4f, variance %.4f", mean, var);
    report("e4m3 inputs: still normal(0, 1) moments after quantization", fabs(mean) < 0.01 && fabs(var - 1.0) < 0.01, why);
    free(b1), free(b4), free(v1), free(v4);
}

/* ------------------------------------------------------------------------------------------------
 * The e4m3 pass rule can fail. On a small problem in e4m3 (E8_ROWS query rows, E8_KEYS keys,
 * head_dim E8_D, inputs from the harness's generator with their descales), O_ref and O_lowp are
 * computed the reference's way (reference.cu: fp32, three passes, on the dequantized values), and
 * three kernels are simulated in plain C the way an e4m3 kernel computes: Q K^T on the e4m3 numbers
 * with the descales and the softmax scale folded into one factor, exp2, P relative to the running
 * max of tiles of E8_TILE keys with the online-softmax rescaling, l from the unrounded values, P V on
 * the e4m3 numbers of V, and O = acc * descale_v / l rounded to bf16:
 *   (a) P scaled by 2^8 and rounded to e4m3: what a correct kernel does; it must pass;
 *   (b) the same, with V's rows permuted within each group of 16 keys (reversed) while P is not:
 *       a P V whose V permutation does not match P's; it must fail;
 *   (c) the same as (a), P rounded to e4m3 without the 2^8 scale: small P falls into e4m3's
 *       subnormals (below 2^-6) or to 0 (below 2^-10).
 * The check is the harness's own (check_decide), O and LSE. */
enum { E8_ROWS = 8, E8_KEYS = 512, E8_D = 128, E8_TILE = 128, E8_GROUP = 16 };

typedef struct {
    uint8_t q8[E8_ROWS * E8_D], k8[E8_KEYS * E8_D], v8[E8_KEYS * E8_D];  /* the e4m3 elements */
    float q[E8_ROWS * E8_D], k[E8_KEYS * E8_D], v[E8_KEYS * E8_D];       /* the values they stand for */
    flash_descale d;
    float scale;
} e8_problem;

static float round_e4m3(float x) { return e4m3_to_f32(f32_to_e4m3(x)); }
static float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

/* O_ref, O_lowp [E8_ROWS * E8_D] and LSE_ref [E8_ROWS], as reference.cu computes them. */
static void e8_reference(const e8_problem *pr, float *o_ref, float *o_lowp, float *lse_ref) {
    for (int r = 0; r < E8_ROWS; r++) {
        float s[E8_KEYS], m = -INFINITY, l = 0.0f;
        for (int j = 0; j < E8_KEYS; j++) {
            float acc = 0.0f;
            for (int d = 0; d < E8_D; d++) acc = fmaf(pr->q[r * E8_D + d], pr->k[j * E8_D + d], acc);
            s[j] = acc * pr->scale;
            m = fmaxf(m, s[j]);
        }
        for (int j = 0; j < E8_KEYS; j++) l += expf(s[j] - m);
        float acc[E8_D] = {0}, acc_lowp[E8_D] = {0};
        for (int j = 0; j < E8_KEYS; j++) {
            const float e = expf(s[j] - m), p = e / l, p8 = round_e4m3(256.0f * e);
            for (int d = 0; d < E8_D; d++) {
                acc[d] = fmaf(p, pr->v[j * E8_D + d], acc[d]);
                acc_lowp[d] = fmaf(p8, pr->v[j * E8_D + d], acc_lowp[d]);
            }
        }
        for (int d = 0; d < E8_D; d++) {
            o_ref[r * E8_D + d] = acc[d];
            o_lowp[r * E8_D + d] = round_bf16(acc_lowp[d] / (256.0f * l));
        }
        lse_ref[r] = m + logf(l);
    }
}

enum { E8_GOOD, E8_V_PERMUTED, E8_P_UNSCALED };

/* One simulated kernel: O [E8_ROWS * E8_D] (bf16 values) and LSE [E8_ROWS]. */
static void e8_kernel(const e8_problem *pr, int variant, float *o, float *lse) {
    const float log2e = 1.4426950408889634f;
    const float s_to_log2 = pr->d.q * pr->d.k * pr->scale * log2e;  /* one factor for the raw Q K^T */
    const float p_scale = variant == E8_P_UNSCALED ? 1.0f : 256.0f;
    for (int r = 0; r < E8_ROWS; r++) {
        float m = -INFINITY, l = 0.0f, acc[E8_D] = {0};
        for (int t = 0; t < E8_KEYS; t += E8_TILE) {
            const int end = t + E8_TILE < E8_KEYS ? t + E8_TILE : E8_KEYS;
            float s[E8_TILE], m_new = m;
            for (int j = t; j < end; j++) {
                float raw = 0.0f;
                for (int d = 0; d < E8_D; d++)
                    raw = fmaf(e4m3_to_f32(pr->q8[r * E8_D + d]), e4m3_to_f32(pr->k8[j * E8_D + d]), raw);
                s[j - t] = raw * s_to_log2;
                m_new = fmaxf(m_new, s[j - t]);
            }
            const float corr = exp2f(m - m_new);  /* 0 for the first tile: m = -inf */
            l *= corr;
            for (int d = 0; d < E8_D; d++) acc[d] *= corr;
            m = m_new;
            for (int j = t; j < end; j++) {
                const float p = p_scale * exp2f(s[j - t] - m);
                l += p;
                const float p8 = round_e4m3(p);
                const int jv = variant == E8_V_PERMUTED ? (j & ~(E8_GROUP - 1)) | (E8_GROUP - 1 - (j & (E8_GROUP - 1))) : j;
                for (int d = 0; d < E8_D; d++) acc[d] = fmaf(p8, e4m3_to_f32(pr->v8[jv * E8_D + d]), acc[d]);
            }
        }
        for (int d = 0; d < E8_D; d++) o[r * E8_D + d] = round_bf16(acc[d] * (pr->d.v / l));
        lse[r] = (m + log2f(l / p_scale)) / log2e;
    }
}

/* The verdict of the harness's rule on one simulated kernel. */
static check_verdict e8_verdict(const e8_problem *pr, int variant, const float *o_ref, const float *o_lowp,
                                const float *lse_ref) {
    static float o[E8_ROWS * E8_D];
    float lse[E8_ROWS];
    e8_kernel(pr, variant, o, lse);
    const err_stats s_o = stats_of(o, o_ref, E8_ROWS * E8_D), s_lowp = stats_of(o_lowp, o_ref, E8_ROWS * E8_D);
    const lse_stats s_lse = lse_compare(lse, lse_ref, E8_ROWS);
    return check_decide(&s_o, &s_lowp, &s_lse, CHECK_LSE_TOL);
}

/* One test line: the rule's verdict on a simulated kernel must be `want_pass`; and one line beside
 * it (not counted) with how far inside or beyond the tolerance it was. */
static void e8_report(const char *name, const check_verdict *v, int want_pass) {
    char full[192], why[320];
    snprintf(full, sizeof full, "%s: %s the rule", name, want_pass ? "passes" : "fails");
    snprintf(why, sizeof why, "%s: max|O - O_ref| %.3e, tol %.3e, LSE err %.1e%s%s", v->pass ? "passed" : "failed",
             v->max_abs_err, v->tol, v->lse_max_err, v->pass ? "" : ": ", v->reason);
    report(full, v->pass == want_pass, why);
    printf("    max|O - O_ref| %.3e = %.2fx the tolerance %.3e\n", v->max_abs_err, v->max_abs_err / v->tol, v->tol);
}

static void test_e4m3_rule(void) {
    static e8_problem pr;
    static float o_ref[E8_ROWS * E8_D], o_lowp[E8_ROWS * E8_D];
    float lse_ref[E8_ROWS];
    pr.d.q = fill_normal(pr.q8, pr.q, E8_ROWS * E8_D, stream_key(7, 0), FLASH_E4M3, 1, NULL);
    pr.d.k = fill_normal(pr.k8, pr.k, E8_KEYS * E8_D, stream_key(7, 1), FLASH_E4M3, 1, NULL);
    pr.d.v = fill_normal(pr.v8, pr.v, E8_KEYS * E8_D, stream_key(7, 2), FLASH_E4M3, 1, NULL);
    pr.scale = 1.0f / sqrtf((float)E8_D);

    /* The harness's own inputs: independent normal q and k, scores of standard deviation about 1. */
    e8_reference(&pr, o_ref, o_lowp, lse_ref);
    check_verdict v = e8_verdict(&pr, E8_GOOD, o_ref, o_lowp, lse_ref);
    e8_report("e4m3 rule, normal inputs: (a) P scaled by 2^8, online softmax in tiles of 128", &v, 1);
    v = e8_verdict(&pr, E8_V_PERMUTED, o_ref, o_lowp, lse_ref);
    e8_report("e4m3 rule, normal inputs: (b) V permuted within groups of 16 keys, P not", &v, 0);
    /* (c) on these inputs is reported, not judged: it passes, and rightly so. P is relative to the
     * row max and these scores spread by about 1, so few P fall below 2^-6, where an unscaled e4m3
     * P loses precision; there its absolute error (up to 2^-10 a key) is no larger than the
     * relative 2^-4 of the large P that both kernels make alike and that sets the tolerance. The
     * unscaled kernel is as accurate as the scaled one on these inputs, within the same rule. */
    v = e8_verdict(&pr, E8_P_UNSCALED, o_ref, o_lowp, lse_ref);
    printf("e4m3 rule, normal inputs: (c) P rounded to e4m3 without the 2^8 scale, not judged (few P below 2^-6 "
           "here):\n    max|O - O_ref| %.3e = %.2fx the tolerance %.3e\n", v.max_abs_err, v.max_abs_err / v.tol, v.tol);

    /* Where the 2^8 matters: most of P's mass below 2^-6 of the row max. An attention sink, key 0
     * with a score about 6 above the others' (its K row along the sum of the query rows, quantized
     * with K's descale), puts the other keys' P near e^-6 ~ 2^-8.7, in e4m3's subnormals unscaled
     * and well inside its normal range scaled by 2^8, while together they weigh about as much as
     * the sink. */
    for (int d = 0; d < E8_D; d++) {
        float x = 0.0f;
        for (int r = 0; r < E8_ROWS; r++) x += pr.q[r * E8_D + d];
        pr.k8[d] = f32_to_e4m3(6.0f / sqrtf((float)E8_D) * x / pr.d.k);
        pr.k[d] = e4m3_to_f32(pr.k8[d]) * pr.d.k;
    }
    e8_reference(&pr, o_ref, o_lowp, lse_ref);
    v = e8_verdict(&pr, E8_GOOD, o_ref, o_lowp, lse_ref);
    e8_report("e4m3 rule, attention sink: (a) P scaled by 2^8, online softmax in tiles of 128", &v, 1);
    v = e8_verdict(&pr, E8_V_PERMUTED, o_ref, o_lowp, lse_ref);
    e8_report("e4m3 rule, attention sink: (b) V permuted within groups of 16 keys, P not", &v, 0);
    v = e8_verdict(&pr, E8_P_UNSCALED, o_ref, o_lowp, lse_ref);
    e8_report("e4m3 rule, attention sink: (c) P rounded to e4m3 without the 2^8 scale", &v, 0);
}

/* ------------------------------------------------------------------------------------------------
 * The input generator */

static void test_inputs(void) {
    enum { N = 1 << 21 };  /* above the threading threshold of fill_normal */
    uint16_t *b1 = malloc(N * 2), *b4 = malloc(N * 2);
    float *v1 = malloc(N * 4), *v4 = malloc(N * 4);
    if (!b1 || !b4 || !v1 || !v4) {
        report("inputs", 0, "out of memory");
        return;
    }
    const uint64_t key = stream_key(42, 1);
    fill_normal(b1, v1, N, key, FLASH_BF16, 1, NULL);
    fill_normal(b4, v4, N, key, FLASH_BF16, 4, NULL);
    report("inputs: identical for 1 and 4 threads", memcmp(b1, b4, N * 2) == 0 && memcmp(v1, v4, N * 4) == 0,
           "depends on the thread count");
    int ok = 1;
    double sum = 0, sq = 0;
    for (int i = 0; i < N; i++) {
        ok &= v1[i] == bf16_to_f32(b1[i]) && isfinite(v1[i]);
        sum += v1[i];
        sq += (double)v1[i] * v1[i];
    }
    report("inputs: float copy equals the 16-bit values", ok, "mismatch");
    const double mean = sum / N, var = sq / N - mean * mean;
    char why[96];
    snprintf(why, sizeof why, "mean %.4f, variance %.4f", mean, var);
    report("inputs: normal(0, 1) moments", fabs(mean) < 0.01 && fabs(var - 1.0) < 0.01, why);
    report("inputs: element 12345 recomputes alone", b1[12345] == f32_to_bf16(normal_at(key, 12345)), "mismatch");
    fill_normal(b4, v4, N, stream_key(43, 1), FLASH_BF16, 2, NULL);
    report("inputs: another seed gives other values", memcmp(b1, b4, N * 2) != 0, "same values");
    fill_normal(b4, v4, N, stream_key(42, 2), FLASH_BF16, 2, NULL);
    report("inputs: another tensor gives other values", memcmp(b1, b4, N * 2) != 0, "same values");
    free(b1), free(b4), free(v1), free(v4);
}

/* ------------------------------------------------------------------------------------------------
 * CSV */

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static void spit(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void test_csv(void) {
    char path[128], err[512];
    snprintf(path, sizeof path, "/tmp/flash_test_cpu_%d.csv", (int)getpid());
    remove(path);
    csv_row row = {"NVIDIA H200", "kernel05", "kernel05_swizzle", "bf16", 1, 16, 16, 16, 4096, 4096, 128, 0,
                   20, 1.2345, 1.2, 456.78, 1, 1.5e-3, 2.5e-3, "pass", "abc1234", "2026-11-29T20:15:00Z"};

    int ok = csv_preflight(path, err, sizeof err) == 0 && csv_append(path, &row, err, sizeof err) == 0;
    char *s1 = slurp(path);
    const char *expect_row =
        "NVIDIA H200,kernel05,kernel05_swizzle,bf16,16,16,16,4096,4096,128,0,20,1.2345,1.2000,456.78,1.500e-03,"
        "2.500e-03,pass,abc1234,2026-11-29T20:15:00Z\n";
    char expect[1024];
    snprintf(expect, sizeof expect, "%s\n%s", CSV_HEADER, expect_row);
    report("csv: a new file gets the header, then the row", ok && s1 && strcmp(s1, expect) == 0,
           s1 ? s1 : err);

    ok = csv_append(path, &row, err, sizeof err) == 0;
    char *s2 = slurp(path);
    report("csv: a second append adds one row, keeps the rest byte for byte",
           ok && s1 && s2 && strncmp(s2, s1, strlen(s1)) == 0 && count_lines(s2) == 3 &&
               strcmp(s2 + strlen(s1), expect_row) == 0,
           "file content wrong");
    free(s1), free(s2);

    /* Commas in the GPU name are quoted; a peak row leaves the problem columns empty. */
    csv_row peak = {"Odd, GPU \"X\"", "mma_peak", "mma.sync.m16n8k16 bf16 f32-acc", "", 0, 0, 0, 0, 0, 0, 0, 0,
                    10, 7.0, 6.9, 646.0, 0, 0, 0, "skipped", "abc1234", "2026-11-29T20:15:00Z"};
    char line[1024];
    csv_format_row(&peak, line, sizeof line);
    report("csv: quoting and empty problem columns",
           strcmp(line, "\"Odd, GPU \"\"X\"\"\",mma_peak,mma.sync.m16n8k16 bf16 f32-acc,,,,,,,,,10,7.0000,6.9000,"
                        "646.00,,,skipped,abc1234,2026-11-29T20:15:00Z") == 0,
           line);

    /* An empty file counts as new. */
    spit(path, "");
    ok = csv_append(path, &row, err, sizeof err) == 0;
    char *s3 = slurp(path);
    report("csv: an empty file gets the header", ok && s3 && strcmp(s3, expect) == 0, "wrong content");
    free(s3);

    /* A foreign header is refused, and the file is left untouched. */
    const char *foreign = "when,what,how_fast\n2026-01-01,x,3\n";
    spit(path, foreign);
    int refused = csv_preflight(path, err, sizeof err) != 0 && strstr(err, path) != NULL;
    refused &= csv_append(path, &row, err, sizeof err) != 0;
    char *s4 = slurp(path);
    report("csv: a foreign header is refused (naming the file) and left untouched",
           refused && s4 && strcmp(s4, foreign) == 0, "appended or changed");
    free(s4);

    /* A last line without its newline gets one before our row, so rows never glue together. */
    char partial[1024];
    snprintf(partial, sizeof partial, "%s\nsome,row", CSV_HEADER);
    spit(path, partial);
    ok = csv_append(path, &row, err, sizeof err) == 0;
    char *s5 = slurp(path);
    char expect5[2048];
    snprintf(expect5, sizeof expect5, "%s\n%s", partial, expect_row);
    report("csv: a missing final newline is repaired, not glued", ok && s5 && strcmp(s5, expect5) == 0, "glued");
    free(s5);

    char date[21];
    utc_now_iso8601(date);
    report("csv: UTC ISO 8601 date", strlen(date) == 20 && date[4] == '-' && date[10] == 'T' && date[19] == 'Z', date);
    remove(path);
}

/* csv_preflight refuses, before any GPU work, every path the first append would fail on, and
 * creates or changes nothing while checking. */
static void test_csv_preflight(void) {
    char dir[128], path[192], err[512];
    snprintf(dir, sizeof dir, "/tmp/flash_test_cpu_%d.d", (int)getpid());
    rmdir(dir);
    int ok = mkdir(dir, 0755) == 0;

    ok &= csv_preflight(dir, err, sizeof err) != 0 && strstr(err, dir) && strstr(err, "is a directory");
    report("csv preflight: a directory is refused, named", ok, err);

    snprintf(path, sizeof path, "%s/missing/x.csv", dir);
    ok = csv_preflight(path, err, sizeof err) != 0 && strstr(err, path) && strstr(err, "no such directory");
    report("csv preflight: a file under a missing directory is refused", ok, err);

    snprintf(path, sizeof path, "%s/new.csv", dir);
    struct stat st;
    ok = csv_preflight(path, err, sizeof err) == 0 && stat(path, &st) != 0;
    report("csv preflight: a new file in a writable directory is fine, and not created", ok, err);

    /* An existing empty file: accepted, still empty, its time unchanged. */
    spit(path, "");
    struct utimbuf old = {1000000000, 1000000000};
    utime(path, &old);
    ok = csv_preflight(path, err, sizeof err) == 0 && stat(path, &st) == 0 && st.st_size == 0 &&
         st.st_mtime == old.modtime;
    report("csv preflight: an existing file is opened for append but left alone", ok, err);

    /* A regular file where a directory should be. */
    char under[256];
    snprintf(under, sizeof under, "%s/x.csv", path);
    ok = csv_preflight(under, err, sizeof err) != 0 && strstr(err, under);
    report("csv preflight: a path through a file is refused", ok, err);

    if (geteuid() == 0) {
        printf("SKIP: csv preflight: an unwritable file / directory is refused: running as root, which may write "
               "anything\n");
    } else {
        chmod(path, 0444);
        ok = csv_preflight(path, err, sizeof err) != 0 && strstr(err, path) && strstr(err, "ermission denied");
        report("csv preflight: an unwritable file is refused", ok, err);
        chmod(dir, 0555);
        snprintf(under, sizeof under, "%s/other.csv", dir);
        ok = csv_preflight(under, err, sizeof err) != 0 && strstr(err, under) && strstr(err, "ermission denied");
        report("csv preflight: a new file in an unwritable directory is refused", ok, err);
        chmod(dir, 0755);
        chmod(path, 0644);
    }
    remove(path);
    rmdir(dir);
}

/* ------------------------------------------------------------------------------------------------
 * Which GPUs a stage runs on (common/flash_arch.c): the rule behind FLASH_E_UNSUPPORTED, tested
 * without the GPU it would refuse. */

static void test_stage_arch(void) {
    char need[96], msg[192];
    /* "sm_80": that architecture or any newer one. */
    report("sm_80 code runs on sm_80, sm_86, sm_89, sm_90, sm_100",
           flash_arch_runs_on("sm_80", 80, need, sizeof need) && flash_arch_runs_on("sm_80", 86, need, sizeof need) &&
               flash_arch_runs_on("sm_80", 89, need, sizeof need) && flash_arch_runs_on("sm_80", 90, need, sizeof need) &&
               flash_arch_runs_on("sm_80", 100, need, sizeof need),
           "refused a newer GPU");
    int ok = !flash_arch_runs_on("sm_80", 75, need, sizeof need) && strcmp(need, "an Ampere or newer GPU (sm_80 or newer)") == 0;
    report("sm_80 code is refused on sm_75, naming what it needs", ok, need);
    /* "sm_90a": that architecture only (wgmma, TMA). */
    report("sm_90a code runs on sm_90", flash_arch_runs_on("sm_90a", 90, need, sizeof need), "refused sm_90");
    ok = !flash_arch_runs_on("sm_90a", 86, need, sizeof need) && strcmp(need, "a Hopper GPU (sm_90)") == 0 &&
         !flash_arch_runs_on("sm_90a", 100, need, sizeof need) && !flash_arch_runs_on("sm_90a", 89, need, sizeof need);
    report("sm_90a code is refused on sm_86, sm_89 and sm_100 (arch-specific code runs on one arch only)", ok, need);
    ok = !flash_arch_runs_on("sm_x", 90, need, sizeof need) && !flash_arch_runs_on(NULL, 90, need, sizeof need) &&
         !flash_arch_runs_on("sm_90b", 90, need, sizeof need) && !flash_arch_runs_on("", 90, need, sizeof need);
    report("a malformed arch declaration runs nowhere", ok, need);
    /* The message ./run and flash_strerror show for a Hopper stage on an Ampere card. */
    ok = flash_stage_refused(9, "kernel09_wgmma", "sm_90a", 86, msg, sizeof msg) &&
         strcmp(msg, "stage 09 (kernel09_wgmma) needs a Hopper GPU (sm_90), this one is sm_86") == 0 &&
         !flash_stage_refused(5, "kernel05_swizzle", "sm_80", 90, msg, sizeof msg);
    report("the refusal names the stage, what it needs and the GPU's arch", ok, msg);
}

int main(void) {
    test_uniform_scores();
    test_single_key();
    test_causal_masks();
    test_gqa_mapping();
    test_batch_offsets();
    test_pass_rule();
    test_bf16();
    test_fp16();
    test_e4m3();
    test_inputs();
    test_inputs_e4m3();
    test_inputs_sinks();
    test_e4m3_rule();
    test_csv();
    test_csv_preflight();
    test_stage_arch();
    printf("test_cpu: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
