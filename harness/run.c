/*
 * run.c: main() of ./run (build/kernelNN with one stage linked in, build/allstages with all).
 *
 * The modes:
 *   (default)   one problem: check, then time, the selected stage(s); a table, optionally CSV
 *   --sweep     the benchmark problems (problems.h) in each benchmark dtype (bf16, then e4m3 on
 *               the stages that take it) or in --dtype's, same per problem; --bench: checks forced on
 *   --matrix    the correctness matrix: small cases over the whole contract, then whole query tiles
 *               that see no key at a size that fills the GPU, launched repeatedly; the same in e4m3
 *               on the stages that take it, and a case past 32-bit offsets; no timing
 *   --peak      the ceilings of this GPU: mma.sync, and on Hopper wgmma
 *   --gpu-slug  the device name as a file-name slug ("nvidia_h200")
 * Loops run problem-outer, stage-inner, so inputs and the reference are built once per problem.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checks.h"
#include "cli.h"
#include "csv.h"
#include "flash_internal.h"
#include "gpu.h"
#include "lowp.h"
#include "problem.h"
#include "problems.h"

#ifndef FLASH_COMMIT
#define FLASH_COMMIT "unknown"
#endif

#define SPOT_ROWS 8         /* CPU float64 rows per problem in the default and sweep modes */
#define MATRIX_SPOT_ROWS 2  /* and per matrix case (the last and the first row) */

/* ------------------------------------------------------------------------------------------------
 * CSV rows */

static void csv_or_exit(const char *path, const csv_row *row) {
    char err[512];
    if (csv_append(path, row, err, sizeof err) != 0) {
        fprintf(stderr, "error: --csv: %s\n", err);
        exit(2);
    }
}

static void csv_stage_row(const run_options *o, const gpu_ctx *g, int stage, const flash_problem *p,
                          const timing_result *t, const check_verdict *v, int checked) {
    if (!o->csv_path) return;
    char kernel[16], date[21];
    snprintf(kernel, sizeof kernel, "kernel%02d", stage);
    utc_now_iso8601(date);
    csv_row r = {g->name, kernel, flash_stage_name(stage), dtype_name(p->dtype),
                 1, p->batch, p->heads_q, p->heads_kv, p->seqlen_q, p->seqlen_k, p->head_dim, p->causal,
                 t->iters, t->ms_median, t->ms_min, t->tflops,
                 checked, checked ? v->max_abs_err : 0.0, checked ? v->rel_l2_err : 0.0,
                 checked ? (v->pass ? "pass" : "fail") : "skipped", FLASH_COMMIT, date};
    csv_or_exit(o->csv_path, &r);
}

/* ------------------------------------------------------------------------------------------------
 * The table printed by the default and sweep modes */

static void print_table_header(void) {
    printf("%-24s %-38s %5s %9s %9s %8s %11s %9s %9s  %s\n", "stage", "problem", "iters", "ms_median",
           "ms_min", "TFLOP/s", "max_abs_err", "rel_l2", "tol", "check");
}

static void problem_label(const flash_problem *p, char *buf, size_t n) {
    snprintf(buf, n, "B%d H%d/%d Sq%d Sk%d D%d %s%s", p->batch, p->heads_q, p->heads_kv, p->seqlen_q, p->seqlen_k,
             p->head_dim, dtype_name(p->dtype), p->causal ? " causal" : "");
}

static void print_table_row(int stage, const flash_problem *p, const timing_result *t, const check_verdict *v,
                            int checked) {
    char label[96];
    problem_label(p, label, sizeof label);
    if (checked)
        printf("%-24s %-38s %5d %9.3f %9.3f %8.1f %11.3e %9.3e %9.3e  %s%s%s\n", flash_stage_name(stage), label,
               t->iters, t->ms_median, t->ms_min, t->tflops, v->max_abs_err, v->rel_l2_err, v->tol,
               v->pass ? "PASS" : "FAIL", v->pass ? "" : ": ", v->reason);
    else
        printf("%-24s %-38s %5d %9.3f %9.3f %8.1f %11s %9s %9s  %s\n", flash_stage_name(stage), label, t->iters,
               t->ms_median, t->ms_min, t->tflops, "-", "-", "-", "skipped");
    fflush(stdout);
}

/* Builds the problem and, with `check`, its reference; a wrong reference ends the run (exit 1):
 * nothing it would judge could be trusted. `verbose` reports the reference, when there is one. */
static void setup_or_exit(problem_state *ps, const flash_problem *shape, uint64_t seed, input_kind inputs, int check,
                          int spot_rows, gpu_ctx *g, int verbose) {
    const int broken = problem_setup(ps, shape, seed, inputs, check, spot_rows, g);
    if ((verbose && check) || broken) {
        char label[96];
        problem_label(shape, label, sizeof label);
        printf("reference %s: %.1f ms on the GPU; spot check of %d rows vs float64 CPU: max|dO| %.2e, max|dLSE| "
               "%.2e (tol %.0e) %s\n",
               label, ps->ref_ms, ps->spot_rows, ps->spot_o_err, ps->spot_lse_err, SPOT_TOL, broken ? "FAIL" : "OK");
        fflush(stdout);
    }
    if (broken) {
        fprintf(stderr, "error: the fp32 GPU reference disagrees with the float64 CPU reference%s; "
                        "no stage can be judged\n", ps->lowp.nonfinite ? " (and O_lowp is not finite)" : "");
        exit(1);
    }
}

/* Check (unless disabled) and time every selected stage on one problem. Returns failed checks. */
static int run_problem(const run_options *o, gpu_ctx *g, const flash_problem *shape, const int *stages,
                       int nstages) {
    problem_state ps;
    setup_or_exit(&ps, shape, o->seed, INPUTS_NORMAL, o->check, SPOT_ROWS, g, 1);
    static int header_printed = 0;  /* one table header per run, under the first reference line if any */
    if (!header_printed) print_table_header();
    header_printed = 1;
    int failed = 0;
    for (int s = 0; s < nstages; s++) {
        check_verdict v;
        memset(&v, 0, sizeof v);
        if (o->check) {
            int rc;
            v = problem_check(&ps, stages[s], g, &rc);
            if (rc != FLASH_OK) {
                fprintf(stderr, "error: %s: %s\n", flash_stage_name(stages[s]), flash_strerror(rc));
                exit(rc == FLASH_E_CUDA ? FLASH_EXIT_CUDA : 2);
            }
            failed += !v.pass;
        }
        const timing_result t = problem_time(&ps, stages[s], g, o->warmup, o->iters);
        print_table_row(stages[s], &ps.p, &t, &v, o->check);
        csv_stage_row(o, g, stages[s], &ps.p, &t, &v, o->check);
    }
    problem_free(&ps);
    return failed;
}

/* ------------------------------------------------------------------------------------------------
 * Modes */

/* The stages of stages[n] that take inputs of `dtype` (every stage takes bf16 and fp16, e4m3 the
 * stages that take fp8), into out[]; returns how many. When some do not, one line says so, with the
 * API's refusal of the last of them: `what` names what they skip ("e4m3 sweep"). */
static int stages_for_dtype(flash_dtype dtype, const int *stages, int n, int *out, const char *what) {
    int kept = 0, skipped = 0, last = 0;
    for (int s = 0; s < n; s++) {
        if (flash_stage_supports_dtype(stages[s], dtype) == FLASH_OK) out[kept++] = stages[s];
        else skipped++, last = stages[s];
    }
    if (skipped)
        printf("note: %s: skipped on %d stage%s without %s inputs (%s)\n", what, skipped, skipped > 1 ? "s" : "",
               dtype_name(dtype), flash_strerror(flash_stage_supports_dtype(last, dtype)));
    fflush(stdout);
    return kept;
}

/* A run of e4m3 problems alone (--dtype e4m3) where none of the run's stages takes them: the CLI
 * checked that a stage linked in does, but this GPU may run none of those. Exits 2 with the refusal. */
static void refuse_dtype(flash_dtype dtype, const int *stages, int nstages) {
    fprintf(stderr, "error: no stage of this run takes %s inputs: %s\n", dtype_name(dtype),
            flash_strerror(flash_stage_supports_dtype(stages[nstages - 1], dtype)));
    exit(2);
}

/* The sweep in each benchmark dtype (bf16 on every stage, e4m3 on those that take it), or in
 * --dtype's alone. */
static int run_sweep(const run_options *o, gpu_ctx *g, const int *stages, int nstages) {
    int failed = 0;
    const int ndtypes = o->dtype_given ? 1 : BENCH_DTYPES;
    for (int t = 0; t < ndtypes; t++) {
        const flash_dtype dtype = o->dtype_given ? o->problem.dtype : bench_dtype(t);
        char what[32];
        snprintf(what, sizeof what, "%s sweep", dtype_name(dtype));
        int run[FLASH_MAX_STAGES];
        const int n = stages_for_dtype(dtype, stages, nstages, run, what);
        if (n == 0 && o->dtype_given) refuse_dtype(dtype, stages, nstages);
        for (int i = 0; i < SWEEP_PROBLEMS && n > 0; i++) {
            const flash_problem p = sweep_problem(i, dtype);
            failed += run_problem(o, g, &p, run, n);
        }
    }
    return failed;
}

/* One checked launch of every stage that takes the problem's dtype on a matrix problem; prints a
 * PASS/FAIL line per stage, counts the cases each stage ran into ran[stage] and its passes into
 * passed[stage]. A refused problem is a failed case (every stage must accept the whole contract,
 * and the e4m3 part of it from the first stage that takes fp8 inputs on); a CUDA failure leaves the
 * context unusable: exit 3. */
static void matrix_case(problem_state *ps, const char *what, gpu_ctx *g, const int *stages, int nstages, int *passed,
                        int *ran) {
    const flash_problem *p = &ps->p;
    for (int s = 0; s < nstages; s++) {
        if (flash_stage_supports_dtype(stages[s], p->dtype) != FLASH_OK) continue;
        int rc;
        const check_verdict v = problem_check(ps, stages[s], g, &rc);
        if (rc == FLASH_E_CUDA) {
            fprintf(stderr, "error: %s: %s\n", flash_stage_name(stages[s]), flash_strerror(rc));
            exit(FLASH_EXIT_CUDA);
        }
        ran[stages[s]] += 1;
        passed[stages[s]] += v.pass;
        printf("%s %s %s%s d%d causal=%d sq=%d sk=%d hq=%d hkv=%d b=%d max_err=%.3e tol=%.3e%s%s\n",
               v.pass ? "PASS" : "FAIL", flash_stage_name(stages[s]), what, dtype_name(p->dtype), p->head_dim,
               p->causal, p->seqlen_q, p->seqlen_k, p->heads_q, p->heads_kv, p->batch, v.max_abs_err, v.tol,
               v.pass ? "" : " ", v.reason);
    }
    fflush(stdout);
}

/* What the matrix carries from case to case: its options, device and stages, the case number
 * (each case's seed moves with it: fresh inputs per case), and per stage the cases it ran and the
 * ones it passed. */
typedef struct {
    const run_options *o;
    gpu_ctx *g;
    const int *stages;
    int nstages;
    int cases;
    int passed[FLASH_MAX_STAGES + 1], ran[FLASH_MAX_STAGES + 1];
} matrix_state;

/* One problem of the matrix, checked `runs` times in a row on every stage that takes its dtype. */
static void matrix_problem(matrix_state *m, const flash_problem *p, input_kind inputs, const char *what, int runs) {
    problem_state ps;
    setup_or_exit(&ps, p, m->o->seed + 1000003ull * (uint64_t)m->cases, inputs, 1, MATRIX_SPOT_ROWS, m->g, 0);
    for (int run = 0; run < runs; run++, m->cases++)
        matrix_case(&ps, what, m->g, m->stages, m->nstages, m->passed, m->ran);
    problem_free(&ps);
}

/* The small problems over the whole contract, in one dtype: head_dim 64 and 128, causal and not,
 * sequence lengths (odd sizes such as 17, 113, 203, 217, 1023 hit tile tails; Sq != Sk with causal
 * hits the bottom-right alignment, Sq > Sk the rows that see no key: with (300, 17) and causal,
 * rows 0..282 see none, so whole query tiles do, up to 256 rows, more than any stage's kBlockM;
 * (1500, 2100) is past the 1024 up to which stages 15 and 16 pick shapes of their own for short
 * sequences, with tails in every tile size, and (2100, 1500) the same with rows 0..599 seeing no
 * key under the mask: whole query tiles with nothing to compute in the long shapes; (1500, 2016)
 * has odd counts of key tiles, 21 whole ones of 96 keys and 13 of 160 with a tail, where the two
 * pairs before have even ones: a kernel that takes its turns over two K/V slots in pairs meets a
 * lone turn at either end of a query tile's loop, and with GQA and batch 3 there are more query
 * tiles than SMs, so a persistent block's second tile starts in the other slot), heads ((8, 2) is
 * GQA) and batch 1 and 3: 192 cases. */
static void matrix_grid(matrix_state *m, flash_dtype dtype) {
    static const int seqs[][2] = {{1, 1},     {17, 17},   {64, 64},     {113, 203},   {203, 113},
                                  {128, 217}, {300, 17},  {1000, 1000}, {1023, 1024}, {1500, 2100},
                                  {2100, 1500}, {1500, 2016}};
    static const int heads[2][2] = {{4, 4}, {8, 2}};
    static const int batches[2] = {1, 3};
    static const int head_dims[2] = {64, 128};
    enum { N_SEQS = sizeof seqs / sizeof seqs[0] };
    for (int hd = 0; hd < 2; hd++)
        for (int causal = 0; causal <= 1; causal++)
            for (int si = 0; si < N_SEQS; si++)
                for (int hi = 0; hi < 2; hi++)
                    for (int bi = 0; bi < 2; bi++) {
                        flash_problem p;
                        memset(&p, 0, sizeof p);
                        p.dtype = dtype;
                        p.head_dim = head_dims[hd];
                        p.causal = causal;
                        p.seqlen_q = seqs[si][0];
                        p.seqlen_k = seqs[si][1];
                        p.heads_q = heads[hi][0];
                        p.heads_kv = heads[hi][1];
                        p.batch = batches[bi];
                        matrix_problem(m, &p, INPUTS_NORMAL, "", 1);
                    }
}

/* The no-key stress, in one dtype: a causal problem with Sq far above Sk at a size that fills the
 * GPU, NOKEY_RUNS checked launches in a row per head_dim. A block with nothing to compute that
 * still copied Q and staged O in shared memory raced with its own copies, wrong only now and then
 * and only under load: one small launch does not show it. */
#define NOKEY_RUNS 10
static void matrix_nokey(matrix_state *m, flash_dtype dtype) {
    for (int d = 64; d <= 128; d += 64) {
        flash_problem p;
        memset(&p, 0, sizeof p);
        p.dtype = dtype;
        p.head_dim = d;
        p.causal = 1;
        p.batch = 64;
        p.heads_q = p.heads_kv = 16;
        p.seqlen_q = 1000;
        p.seqlen_k = 5;
        matrix_problem(m, &p, INPUTS_NORMAL, "no-key stress ", NOKEY_RUNS);
    }
}

/* Past 32-bit offsets with little to compute: K and V of batch 65535 (the most a grid's z takes),
 * 272 keys and one head of 128 are 65535 * 272 * 128 = 2,281,635,840 elements each, one byte each
 * in e4m3. Batches 61681 on start past 2^31 (61681 * 272 * 128 = 2,147,485,696), so a K/V offset
 * held in a 32-bit int goes negative there, while 16 queries a batch keep the work at 0.3 TFLOP.
 * 272 keys are 2 tiles of 128 and a tail of 16. The host draws and quantizes the 2 x 2.3e9
 * elements (about 90 core-seconds each, some 12 s in all on 16 cores) and keeps them as float for
 * the CPU spot check, whose last row (batch 65534) reads K and V from past 2^31: about 21 GB of
 * host memory, 6 GB on the device. */
static void matrix_wide(matrix_state *m, flash_dtype dtype) {
    flash_problem p;
    memset(&p, 0, sizeof p);
    p.dtype = dtype;
    p.head_dim = 128;
    p.batch = 65535;
    p.heads_q = p.heads_kv = 1;
    p.seqlen_q = 16;
    p.seqlen_k = 272;
    matrix_problem(m, &p, INPUTS_NORMAL, "64-bit offsets ", 1);
}

/* Rising row maxima, large logits and an attention sink (inputs.h, INPUTS_SINKS), in one dtype:
 * every row's max grows from key tile to key tile, a little at a time and then, at key 0, by tens
 * of log2 units, which is where a kernel that keeps a stale max (or rescales O only now and then)
 * must still get O and the LSE right. Sequences long enough for many tiles of every stage's
 * shapes, a tail, seqlen_q != seqlen_k, causal and not, GQA: 16 cases. */
static void matrix_sinks(matrix_state *m, flash_dtype dtype) {
    static const int seqs[][2] = {{1000, 1000}, {300, 1300}, {1500, 2016}, {2100, 1500}};
    for (int d = 64; d <= 128; d += 64)
        for (int causal = 0; causal <= 1; causal++)
            for (size_t si = 0; si < sizeof seqs / sizeof seqs[0]; si++) {
                flash_problem p;
                memset(&p, 0, sizeof p);
                p.dtype = dtype;
                p.head_dim = d;
                p.causal = causal;
                p.batch = 2;
                p.heads_q = 4;
                p.heads_kv = 2;
                p.seqlen_q = seqs[si][0];
                p.seqlen_k = seqs[si][1];
                matrix_problem(m, &p, INPUTS_SINKS, "sinks ", 1);
            }
}

/* The correctness matrix: every corner of the contract at sizes small enough to run hundreds of
 * cases per stage in seconds; bf16 and fp16 on every stage (the grid in each, then the no-key
 * stress in bf16), then the same in e4m3 on the stages that take it, and the case past 32-bit
 * offsets. A stage is judged on the cases it ran. */
static int run_matrix(const run_options *o, gpu_ctx *g, const int *stages, int nstages) {
    matrix_state m = {.o = o, .g = g, .stages = stages, .nstages = nstages};
    matrix_grid(&m, FLASH_BF16);
    matrix_grid(&m, FLASH_FP16);
    matrix_nokey(&m, FLASH_BF16);
    matrix_sinks(&m, FLASH_BF16);
    matrix_sinks(&m, FLASH_FP16);

    int fp8[FLASH_MAX_STAGES];
    if (stages_for_dtype(FLASH_E4M3, stages, nstages, fp8, "e4m3 matrix cases") > 0) {
        matrix_grid(&m, FLASH_E4M3);
        matrix_nokey(&m, FLASH_E4M3);
        matrix_sinks(&m, FLASH_E4M3);
        matrix_wide(&m, FLASH_E4M3);
    }

    int failed = 0;
    for (int s = 0; s < nstages; s++) {
        const int ran = m.ran[stages[s]], passed = m.passed[stages[s]];
        printf("matrix %s: %d/%d passed%s\n", flash_stage_name(stages[s]), passed, ran,
               passed == ran ? "" : "  <-- FAILED");
        failed += ran - passed;
    }
    return failed;
}

/* One ceiling: printed, and with --csv written as a row of its own, without a problem. */
static void peak_report(const run_options *o, const gpu_ctx *g, const char *kernel, const peak_result *r) {
    printf("%s peak on %s: %.1f TFLOP/s (median of %d launches: %.3f ms, min %.3f ms)\n", r->what, g->name,
           r->tflops, r->runs, r->ms_median, r->ms_min);
    fflush(stdout);
    if (o->csv_path) {
        char date[21];
        utc_now_iso8601(date);
        csv_row row = {g->name, kernel, r->what, "",
                       0, 0, 0, 0, 0, 0, 0, 0,
                       r->runs, r->ms_median, r->ms_min, r->tflops,
                       0, 0.0, 0.0, "skipped", FLASH_COMMIT, date};
        csv_or_exit(o->csv_path, &row);
    }
}

/* Both ceilings: mma.sync on every GPU, wgmma where the GPU has it (Hopper). Elsewhere the wgmma
 * one is reported as not measured and writes no row: a row with no number would only be noise
 * on the plot, and the stages it bounds do not run there either. */
static void run_peak(const run_options *o, gpu_ctx *g) {
    const peak_result mma = mma_peak(g->sm_count, g->stream);
    peak_report(o, g, CSV_KERNEL_MMA_PEAK, &mma);
    peak_result wgmma;
    char why[160];
    if (wgmma_peak(g->sm_count, g->stream, &wgmma, why, sizeof why))
        peak_report(o, g, CSV_KERNEL_WGMMA_PEAK, &wgmma);
    else
        printf("wgmma peak: not measured: %s\n", why);
}

/* "NVIDIA H200" -> "nvidia_h200": lower-case letters and digits, runs of anything else -> '_'. */
static void gpu_slug(const char *name, char *out, size_t n) {
    size_t j = 0;
    for (const char *c = name; *c && j + 1 < n; c++) {
        if (isalnum((unsigned char)*c)) out[j++] = (char)tolower((unsigned char)*c);
        else if (j > 0 && out[j - 1] != '_') out[j++] = '_';
    }
    while (j > 0 && out[j - 1] == '_') j--;
    out[j] = '\0';
}

/* The stages this run covers, on this GPU: an explicit --stage N that the GPU cannot run is refused
 * (exit 2, with the architecture it needs); --stage all skips such stages, saying so; without
 * --stage, the most advanced stage that is linked in and runs here, and with --dtype e4m3 the most
 * advanced of those that take e4m3 inputs. Exits 2 when none is left. */
static int runnable_stages(const run_options *o, int *stages) {
    int n = 0, last_refused = 0;
    const int fp8_only = !o->stage_given && o->problem.dtype == FLASH_E4M3;
    for (int s = 1; s <= flash_stage_count(); s++) {
        if (!flash_stage_available(s) || (o->stage > 0 && s != o->stage)) continue;
        if (fp8_only && !flash_stage_takes_fp8(s)) continue;
        const int rc = flash_stage_supported(s);
        if (rc == FLASH_E_CUDA) {
            fprintf(stderr, "error: %s\n", flash_strerror(rc));
            exit(FLASH_EXIT_CUDA);
        }
        if (rc != FLASH_OK) {
            if (o->stage > 0) {
                fprintf(stderr, "error: --stage %d: %s\n", s, flash_strerror(rc));
                exit(2);
            }
            if (o->stage_given) printf("SKIP: %s: %s\n", flash_stage_name(s), flash_strerror(rc));
            last_refused = s;
            continue;
        }
        stages[n++] = s;
    }
    if (n == 0) {
        fprintf(stderr, "error: no stage linked into this binary%s runs on this GPU%s%s\n",
                fp8_only ? " that takes e4m3 inputs" : "", last_refused ? ": " : "",
                last_refused ? flash_strerror(flash_stage_supported(last_refused)) : "");
        exit(2);
    }
    if (!o->stage_given) {
        if (last_refused > stages[n - 1])
            printf("note: %s is the most advanced stage this GPU runs (%s)\n", flash_stage_name(stages[n - 1]),
                   flash_strerror(flash_stage_supported(last_refused)));
        stages[0] = stages[n - 1];
        n = 1;
    }
    return n;
}

int main(int argc, char **argv) {
    run_options o;
    const int cli = parse_args(argc, argv, &o);
    if (cli == CLI_HELP) return 0;
    if (cli != CLI_OK) return 2;
    if (o.csv_path) {
        char err[512];
        if (csv_preflight(o.csv_path, err, sizeof err) != 0) {
            fprintf(stderr, "error: --csv: %s\n", err);
            return 2;
        }
    }

    /* Only now, with every argument accepted, do we touch the device. */
    gpu_ctx g;
    const int dev = gpu_open(&g);
    if (dev != 0) return dev;
    if (o.gpu_slug) {
        char slug[256];
        gpu_slug(g.name, slug, sizeof slug);
        printf("%s\n", slug);
        return 0;
    }
    int stages[FLASH_MAX_STAGES];
    const int nstages = runnable_stages(&o, stages);
    printf("device: %s, %d SMs, L2 %d MB; stage%s:", g.name, g.sm_count, g.l2_bytes >> 20, nstages > 1 ? "s" : "");
    for (int s = 0; s < nstages; s++) printf(" %s", flash_stage_name(stages[s]));
    printf("\n");

    int failed = 0;
    if (o.peak) run_peak(&o, &g);
    if (o.matrix) failed += run_matrix(&o, &g, stages, nstages);
    if (o.sweep || o.bench) failed += run_sweep(&o, &g, stages, nstages);
    if (!o.peak && !o.matrix && !o.sweep && !o.bench) {
        int run[FLASH_MAX_STAGES];
        char what[32];
        snprintf(what, sizeof what, "%s problem", dtype_name(o.problem.dtype));
        const int n = stages_for_dtype(o.problem.dtype, stages, nstages, run, what);
        if (n == 0) refuse_dtype(o.problem.dtype, stages, nstages);
        failed += run_problem(&o, &g, &o.problem, run, n);
    }
    gpu_close(&g);
    if (failed) printf("%d check%s FAILED\n", failed, failed > 1 ? "s" : "");
    return failed ? 1 : 0;
}
