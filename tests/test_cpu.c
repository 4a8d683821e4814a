/*
 * test_cpu.c: unit tests of the harness's pure-C parts, no GPU needed:
 *   the float64 reference (cpu_ref.c) on hand-checkable cases, the pass rule and its NaN/Inf
 *   handling (checks.c, errstat.h), bf16/fp16 conversion (lowp.c), the input generator
 *   (inputs.c) and CSV appending (csv.c).
 *
 * Build (tests/run_tests.sh does this):
 *   gcc -std=c11 -O1 -Icommon -Iharness -I<cuda>/include tests/test_cpu.c harness/lowp.c \
 *       harness/inputs.c harness/cpu_ref.c harness/checks.c harness/csv.c -lm -lpthread
 * Output: one line per test, "PASS: name", "FAIL: name: why" or "SKIP: name: why"; exit 0 when
 * none failed.
 */
#define _POSIX_C_SOURCE 200809L  /* mkstemp-free temp names via getpid */

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

static int n_pass = 0, n_fail = 0;

/* Records one test: ok != 0 passes; otherwise prints why (printf-style). */
static void report(const char *name, int ok, const char *why) {
    if (ok) {
        printf("PASS: %s\n", name);
        n_pass++;
    } else {
        printf("FAIL: %s: %s\n", name, why);
        n_fail++;
    }
}

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
    check_verdict v = check_decide(&s, &s_lowp, &l_ok);
    report("pass rule: correct output passes", v.pass && close_to(v.tol, 2 * 2e-3 + 1e-4, 1e-7), v.reason);

    s = stats_of(bad, ref, N);
    v = check_decide(&s, &s_lowp, &l_ok);
    report("pass rule: wrong output fails", !v.pass, "a 5e-3 error passed a 4.1e-3 tolerance");

    float nan_out[N], inf_out[N];
    memcpy(nan_out, good, sizeof good);
    memcpy(inf_out, good, sizeof good);
    nan_out[2] = NAN;
    inf_out[6] = -INFINITY;
    s = stats_of(nan_out, ref, N);
    v = check_decide(&s, &s_lowp, &l_ok);
    report("pass rule: a NaN in O fails", !v.pass && s.nonfinite == 1 && isinf(v.max_abs_err), "NaN passed");
    s = stats_of(inf_out, ref, N);
    v = check_decide(&s, &s_lowp, &l_ok);
    report("pass rule: an Inf in O fails", !v.pass, "Inf passed");

    /* All-NaN output (an unwritten, poisoned buffer): the max stays 0, only the count sees it. */
    float all_nan[N];
    for (int i = 0; i < N; i++) all_nan[i] = NAN;
    s = stats_of(all_nan, ref, N);
    v = check_decide(&s, &s_lowp, &l_ok);
    report("pass rule: an all-NaN (unwritten) O fails", !v.pass, "unwritten output passed");

    /* A broken low-precision reference makes the tolerance NaN, which must fail, not pass. */
    err_stats broken = stats_of(nan_out, ref, N);
    s = stats_of(good, ref, N);
    v = check_decide(&s, &broken, &l_ok);
    report("pass rule: NaN tolerance fails", !v.pass && isnan(v.tol), "passed with a NaN tolerance");

    /* Rows that see no key must be exactly 0. */
    err_stats e;
    errstat_init(&e);
    errstat_add(&e, 1e-6f, 0.0f, 1);
    v = check_decide(&e, &s_lowp, &l_ok);
    report("pass rule: non-zero O on a row that sees no key fails", !v.pass && e.empty_nonzero == 1, v.reason);

    /* LSE: within 1e-3 passes; beyond, NaN, or a finite value where +inf is due fails. */
    s = stats_of(good, ref, N);
    float lse_far[2] = {1.502f, INFINITY}, lse_nan[2] = {NAN, INFINITY}, lse_noinf[2] = {1.5f, 3.0f},
          lse_inf[2] = {INFINITY, INFINITY};
    lse_stats l = lse_compare(lse_far, lse_ref, 2);
    report("pass rule: LSE error 2e-3 fails", !check_decide(&s, &s_lowp, &l).pass, "passed");
    l = lse_compare(lse_nan, lse_ref, 2);
    report("pass rule: NaN LSE fails", !check_decide(&s, &s_lowp, &l).pass && l.nonfinite == 1, "passed");
    l = lse_compare(lse_noinf, lse_ref, 2);
    report("pass rule: finite LSE on a row that sees no key fails",
           !check_decide(&s, &s_lowp, &l).pass && l.inf_mismatch == 1, "passed");
    l = lse_compare(lse_inf, lse_ref, 2);
    report("pass rule: +inf LSE on a row that sees keys fails", !check_decide(&s, &s_lowp, &l).pass, "passed");

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
    fill_normal(b1, v1, N, key, FLASH_BF16, 1);
    fill_normal(b4, v4, N, key, FLASH_BF16, 4);
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
    fill_normal(b4, v4, N, stream_key(43, 1), FLASH_BF16, 2);
    report("inputs: another seed gives other values", memcmp(b1, b4, N * 2) != 0, "same values");
    fill_normal(b4, v4, N, stream_key(42, 2), FLASH_BF16, 2);
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
    test_inputs();
    test_csv();
    test_csv_preflight();
    test_stage_arch();
    printf("test_cpu: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
