/*
 * problem.c: inputs -> reference -> checked launch -> timed launches, for one problem.
 *
 * Host C against the CUDA runtime API (no kernels here: those are in reference.cu, peak.cu and the
 * stages). Every CUDA call goes through CUDA_CHECK, which exits with status 3 naming the call.
 */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime, nanosleep: -std=c11 hides POSIX otherwise */
#include "problem.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "cpu_ref.h"
#include "flash_internal.h"
#include "gpu.h"
#include "inputs.h"
#include "lowp.h"

#define TIME_BUDGET_MS 2000.0f  /* a slow stage may stop timing after this much timed work ... */
#define TIME_MIN_ITERS 5        /* ... but never with fewer launches than this */
#define HOLD_MIN_MS 1.0         /* the stream is held at least this long before the timed launches ... */
#define HOLD_MAX_MS 200.0       /* ... and at most this long (see problem_time) */

int gpu_open(gpu_ctx *g) {
    memset(g, 0, sizeof *g);
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        /* What was found comes first, CUDA's own text after (flash_device_error): "no CUDA device:
         * no NVIDIA driver was found on this machine ...; CUDA says: ...". The "no CUDA device:"
         * prefix is what scripts and tests grep. */
        char why[384];
        flash_device_error(err, why, sizeof why);
        fprintf(stderr, "no CUDA device: %s\n", why);
        return FLASH_EXIT_CUDA;
    }
    if (count == 0) {
        fprintf(stderr, "no CUDA device: the driver found no NVIDIA GPU (cudaGetDeviceCount found none)\n");
        return FLASH_EXIT_CUDA;
    }
    /* A device can be listed and still be unusable (busy, exclusive mode, ...): cudaFree(0) creates
     * the context now, so that failure also reads as "no CUDA device". */
    err = cudaSetDevice(0);
    if (err == cudaSuccess) err = cudaFree(0);
    if (err != cudaSuccess) {
        fprintf(stderr, "no CUDA device: device 0 is not usable: %s (%s)\n", cudaGetErrorString(err),
                cudaGetErrorName(err));
        return FLASH_EXIT_CUDA;
    }
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    snprintf(g->name, sizeof g->name, "%s", prop.name);
    g->sm_count = prop.multiProcessorCount;
    g->l2_bytes = prop.l2CacheSize;
    /* Twice the L2: whatever the replacement policy, nothing of the previous launch survives. */
    g->flush_bytes = g->l2_bytes > 0 ? 2 * (size_t)g->l2_bytes : ((size_t)64 << 20);
    CUDA_CHECK(cudaMalloc(&g->flush, g->flush_bytes));
    CUDA_CHECK(cudaStreamCreate(&g->stream));
    CUDA_CHECK(cudaEventCreate(&g->start));
    CUDA_CHECK(cudaEventCreate(&g->stop));
    return 0;
}

void gpu_close(gpu_ctx *g) {
    CUDA_CHECK(cudaEventDestroy(g->start));
    CUDA_CHECK(cudaEventDestroy(g->stop));
    CUDA_CHECK(cudaStreamDestroy(g->stream));
    CUDA_CHECK(cudaFree(g->flush));
}

double attention_flops(const flash_problem *p) {
    const double f = 4.0 * p->batch * p->heads_q * (double)p->seqlen_q * p->seqlen_k * p->head_dim;
    return p->causal ? 0.5 * f : f;
}

/* malloc that exits 2 ("unsupported": the problem is too big for this host) with a message. */
static void *host_alloc(size_t bytes, const char *what) {
    void *ptr = malloc(bytes);
    if (!ptr) {
        fprintf(stderr, "error: out of host memory: %s needs %.2f GiB\n", what, (double)bytes / (1 << 30));
        exit(2);
    }
    return ptr;
}

/* The spot-check rows: the very last row (it sees every key, also when causal), the very first
 * (with causal and Sq > Sk it sees none: the +inf path), then rows drawn from the seed. */
/* The largest Euclidean norm of the rows of head_dim values of a tensor of n values. */
static double max_row_norm(const float *x, size_t n, int head_dim) {
    double worst = 0.0;
    for (size_t r = 0; r < n; r += (size_t)head_dim) {
        double sq = 0.0;
        for (int d = 0; d < head_dim; d++) sq += (double)x[r + d] * x[r + d];
        if (sq > worst) worst = sq;
    }
    return sqrt(worst);
}

static void spot_row(const flash_problem *p, uint64_t seed, int r, int *b, int *h, int *i) {
    if (r == 0) {
        *b = p->batch - 1, *h = p->heads_q - 1, *i = p->seqlen_q - 1;
    } else if (r == 1) {
        *b = 0, *h = 0, *i = 0;
    } else {
        const uint64_t u = splitmix64(seed ^ (0x5eedull << 32) ^ (uint64_t)r);
        *b = (int)(u % (uint64_t)p->batch);
        *h = (int)((u >> 20) % (uint64_t)p->heads_q);
        *i = (int)((u >> 40) % (uint64_t)p->seqlen_q);
    }
}

int problem_setup(problem_state *ps, const flash_problem *shape, uint64_t seed, input_kind inputs, int check, int spot_rows,
                  gpu_ctx *g) {
    memset(ps, 0, sizeof *ps);
    flash_problem *p = &ps->p;
    *p = *shape;
    if (p->softmax_scale == 0.0f) p->softmax_scale = 1.0f / sqrtf((float)p->head_dim);
    ps->q_elems = (size_t)p->batch * p->seqlen_q * p->heads_q * p->head_dim;
    ps->kv_elems = (size_t)p->batch * p->seqlen_k * p->heads_kv * p->head_dim;
    ps->lse_elems = (size_t)p->batch * p->heads_q * p->seqlen_q;

    /* Refuse up front what cannot fit, rather than failing halfway with a CUDA error. Per q
     * element: q (2 B, or 1 for e4m3), o (2 B), and for the check o_lowp (2 B) + o_ref (4 B); per
     * kv element: k, v; per row: the LSE, and for the check the reference's. */
    const size_t in_bytes = dtype_bytes(p->dtype);
    const size_t dev_bytes = ps->q_elems * (in_bytes + 2) + ps->kv_elems * 2 * in_bytes + ps->lse_elems * 4 +
                             (check ? ps->q_elems * 6 + ps->lse_elems * 4 : 0);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (dev_bytes > free_b) {
        fprintf(stderr, "error: the problem needs %.2f GiB of device memory, %.2f GiB are free\n",
                (double)dev_bytes / (1 << 30), (double)free_b / (1 << 30));
        exit(2);
    }

    ps->h_q = host_alloc(ps->q_elems * sizeof(float), "q");
    ps->h_k = host_alloc(ps->kv_elems * sizeof(float), "k");
    ps->h_v = host_alloc(ps->kv_elems * sizeof(float), "v");
    if (check) {
        ps->h_lse = host_alloc(ps->lse_elems * sizeof(float), "lse");
        ps->h_lse_ref = host_alloc(ps->lse_elems * sizeof(float), "lse_ref");
    }
    CUDA_CHECK(cudaMalloc(&ps->d_q, ps->q_elems * in_bytes));
    CUDA_CHECK(cudaMalloc(&ps->d_k, ps->kv_elems * in_bytes));
    CUDA_CHECK(cudaMalloc(&ps->d_v, ps->kv_elems * in_bytes));
    CUDA_CHECK(cudaMalloc((void **)&ps->d_o, ps->q_elems * 2));
    CUDA_CHECK(cudaMalloc((void **)&ps->d_lse, ps->lse_elems * sizeof(float)));
    if (check) {
        CUDA_CHECK(cudaMalloc((void **)&ps->d_o_ref, ps->q_elems * sizeof(float)));
        CUDA_CHECK(cudaMalloc((void **)&ps->d_o_lowp, ps->q_elems * 2));
        CUDA_CHECK(cudaMalloc((void **)&ps->d_lse_ref, ps->lse_elems * sizeof(float)));
    }
    p->q = ps->d_q;
    p->k = ps->d_k;
    p->v = ps->d_v;
    p->o = ps->d_o;
    p->lse = ps->d_lse;

    /* Inputs: q, k, v are streams 0, 1, 2 of the seed. One staging buffer of input elements serves
     * all three uploads. */
    const size_t max_elems = ps->q_elems > ps->kv_elems ? ps->q_elems : ps->kv_elems;
    void *h_bits = host_alloc(max_elems * in_bytes, "input staging");  /* [max(q, kv) elements] */
    const input_layout lq = {inputs, 0, p->seqlen_q, p->heads_q, p->head_dim};
    const input_layout lk = {inputs, 1, p->seqlen_k, p->heads_kv, p->head_dim};
    const input_layout lv = {inputs, 2, p->seqlen_k, p->heads_kv, p->head_dim};
    ps->descale.q = fill_normal(h_bits, ps->h_q, ps->q_elems, stream_key(seed, 0), p->dtype, 0, &lq);
    CUDA_CHECK(cudaMemcpy(ps->d_q, h_bits, ps->q_elems * in_bytes, cudaMemcpyHostToDevice));
    ps->descale.k = fill_normal(h_bits, ps->h_k, ps->kv_elems, stream_key(seed, 1), p->dtype, 0, &lk);
    CUDA_CHECK(cudaMemcpy(ps->d_k, h_bits, ps->kv_elems * in_bytes, cudaMemcpyHostToDevice));
    ps->descale.v = fill_normal(h_bits, ps->h_v, ps->kv_elems, stream_key(seed, 2), p->dtype, 0, &lv);
    CUDA_CHECK(cudaMemcpy(ps->d_v, h_bits, ps->kv_elems * in_bytes, cudaMemcpyHostToDevice));
    free(h_bits);
    /* A run that only times (--no-check) needs nothing more: what follows, the reference on the GPU,
     * its CPU spot check and the statistics of O_lowp, serves problem_check alone. (The host's float
     * copies of the inputs stay: fill_normal writes them, and e4m3's quantization works in them.) */
    if (!check) return 0;

    /* The reference, once per problem. */
    CUDA_CHECK(cudaEventRecord(g->start, g->stream));
    reference_forward(p, &ps->descale, ps->d_o_ref, ps->d_o_lowp, ps->d_lse_ref, g->stream);
    CUDA_CHECK(cudaEventRecord(g->stop, g->stream));
    CUDA_CHECK(cudaEventSynchronize(g->stop));
    CUDA_CHECK(cudaEventElapsedTime(&ps->ref_ms, g->start, g->stop));
    CUDA_CHECK(cudaMemcpy(ps->h_lse_ref, ps->d_lse_ref, ps->lse_elems * sizeof(float), cudaMemcpyDeviceToHost));
    ps->lowp = gpu_err_stats(ps->d_o_lowp, ps->d_o_ref, p, g->stream);
    ps->lse_tol = check_lse_tolerance(p->dtype == FLASH_E4M3, p->softmax_scale,
                                      p->dtype == FLASH_E4M3 ? max_row_norm(ps->h_q, ps->q_elems, p->head_dim) : 0.0,
                                      p->dtype == FLASH_E4M3 ? max_row_norm(ps->h_k, ps->kv_elems, p->head_dim) : 0.0);

    /* The referee's referee: recompute a few rows in float64 on the CPU, from the same values (for
     * e4m3 the dequantized ones the GPU reference computes from too). */
    const int D = p->head_dim;
    float *gpu_row = host_alloc((size_t)D * sizeof(float), "spot row");   /* [D] */
    double *cpu_row = host_alloc((size_t)D * sizeof(double), "spot row"); /* [D] */
    ps->spot_rows = spot_rows;
    for (int r = 0; r < spot_rows; r++) {
        int b, h, i;
        spot_row(p, seed, r, &b, &h, &i);
        double cpu_lse;
        cpu_attention_row(p, p->softmax_scale, ps->h_q, ps->h_k, ps->h_v, b, h, i, cpu_row, &cpu_lse);
        const size_t off = (((size_t)b * p->seqlen_q + (size_t)i) * p->heads_q + (size_t)h) * D;
        CUDA_CHECK(cudaMemcpy(gpu_row, ps->d_o_ref + off, (size_t)D * sizeof(float), cudaMemcpyDeviceToHost));
        const double e_o = row_max_abs_diff(gpu_row, cpu_row, D);
        const double e_lse = lse_abs_diff(ps->h_lse_ref[((size_t)b * p->heads_q + h) * p->seqlen_q + i], cpu_lse);
        /* NaN-proof maxima: the helpers return +inf, never NaN. */
        if (e_o > ps->spot_o_err) ps->spot_o_err = e_o;
        if (e_lse > ps->spot_lse_err) ps->spot_lse_err = e_lse;
    }
    free(gpu_row);
    free(cpu_row);
    const int ok = ps->spot_o_err <= SPOT_TOL && ps->spot_lse_err <= SPOT_TOL && ps->lowp.nonfinite == 0;
    return ok ? 0 : 1;
}

void problem_free(problem_state *ps) {
    CUDA_CHECK(cudaFree(ps->d_q));
    CUDA_CHECK(cudaFree(ps->d_k));
    CUDA_CHECK(cudaFree(ps->d_v));
    CUDA_CHECK(cudaFree(ps->d_o));
    CUDA_CHECK(cudaFree(ps->d_lse));
    CUDA_CHECK(cudaFree(ps->d_o_ref));
    CUDA_CHECK(cudaFree(ps->d_o_lowp));
    CUDA_CHECK(cudaFree(ps->d_lse_ref));
    free(ps->h_q);
    free(ps->h_k);
    free(ps->h_v);
    free(ps->h_lse);
    free(ps->h_lse_ref);
    memset(ps, 0, sizeof *ps);
}

int problem_launch(const problem_state *ps, int stage, cudaStream_t stream) {
    if (ps->p.dtype == FLASH_E4M3) return flash_forward_fp8(stage, &ps->p, &ps->descale, stream);
    return flash_forward(stage, &ps->p, stream);
}

check_verdict problem_check(problem_state *ps, int stage, gpu_ctx *g, int *launch_rc) {
    /* Poison: 0xFFFF is a NaN in bf16 and in fp16 (O is bf16 for e4m3 inputs), 0xFFFFFFFF a NaN in
     * fp32. Whatever the stage fails to write stays NaN and fails the check. */
    CUDA_CHECK(cudaMemsetAsync(ps->d_o, 0xFF, ps->q_elems * 2, g->stream));
    CUDA_CHECK(cudaMemsetAsync(ps->d_lse, 0xFF, ps->lse_elems * sizeof(float), g->stream));
    *launch_rc = problem_launch(ps, stage, g->stream);
    if (*launch_rc != FLASH_OK) {
        check_verdict v;
        memset(&v, 0, sizeof v);
        v.max_abs_err = v.rel_l2_err = v.lse_max_err = INFINITY;
        v.tol = check_tolerance(&ps->lowp);
        snprintf(v.reason, sizeof v.reason, "%s: %s", ps->p.dtype == FLASH_E4M3 ? "flash_forward_fp8" : "flash_forward",
                 flash_strerror(*launch_rc));
        return v;
    }
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(g->stream));  /* a fault inside the stage surfaces here: exit 3 */

    const err_stats o = gpu_err_stats(ps->d_o, ps->d_o_ref, &ps->p, g->stream);
    CUDA_CHECK(cudaMemcpy(ps->h_lse, ps->d_lse, ps->lse_elems * sizeof(float), cudaMemcpyDeviceToHost));
    const lse_stats lse = lse_compare(ps->h_lse, ps->h_lse_ref, ps->lse_elems);
    return check_decide(&o, &ps->lowp, &lse, ps->lse_tol);
}

/* Every timed launch goes through here: a refused problem is a usage error (2), a CUDA failure 3. */
static void launch_or_exit(const problem_state *ps, int stage, cudaStream_t stream) {
    const int rc = problem_launch(ps, stage, stream);
    if (rc != FLASH_OK) {
        fprintf(stderr, "error: %s: %s\n", flash_stage_name(stage), flash_strerror(rc));
        exit(rc == FLASH_E_CUDA ? FLASH_EXIT_CUDA : 2);
    }
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Milliseconds on the host's monotonic clock. */
static double host_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* A host function for the stream (cudaLaunchHostFunc): sleeps *(double *)arg milliseconds. The
 * stream runs nothing queued after it until it returns. It makes no CUDA call, as the runtime
 * requires of host functions. */
static void CUDART_CB hold_stream(void *arg) {
    const double ms = *(const double *)arg;
    struct timespec left = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

/* One timed launch, enqueued and not waited for: the L2 flush before the start event (not timed),
 * then start, the stage, stop. `k` varies the flush's byte. */
static void enqueue_timed(problem_state *ps, int stage, gpu_ctx *g, cudaEvent_t start, cudaEvent_t stop, int k) {
    /* Evict q, k, v, o from the L2 so every launch starts cold, as in a real model where the
     * previous layer's work has long replaced them. Queued before the start event: not timed. */
    CUDA_CHECK(cudaMemsetAsync(g->flush, k & 0xff, g->flush_bytes, g->stream));
    CUDA_CHECK(cudaEventRecord(start, g->stream));
    launch_or_exit(ps, stage, g->stream);
    CUDA_CHECK(cudaEventRecord(stop, g->stream));
    CUDA_CHECK_LAUNCH();
}

/* Creates events ev[*created .. want-1] (timing enabled), so that ev[0 .. want-1] exist. */
static void create_events(cudaEvent_t *ev, int *created, int want) {
    for (; *created < want; (*created)++) CUDA_CHECK(cudaEventCreate(&ev[*created]));
}

/* How a stage is timed:
 *
 *   1. Warm-up: max(warmup, 1) launches (with warmup 0, one launch all the same: the estimate
 *      below needs one). The last min(that, iters) of them are enqueued exactly as the timed ones
 *      are (flush, start, launch, stop); one stream synchronisation after them. The shortest of
 *      their GPU times is the estimate of one launch, the shortest host time to enqueue one of
 *      them the estimate of the host's cost per launch. (The shortest: the first launch of a
 *      stage can carry one-time costs, a module load or a first allocation.)
 *   2. The number of timed launches, fixed before any is made: n = ceil(TIME_BUDGET_MS / estimate)
 *      clamped to [TIME_MIN_ITERS, iters], and n = iters when iters < TIME_MIN_ITERS. That is the
 *      stop rule of the usage text: a slow stage stops after about 2 s of timed work, never under
 *      5 launches; the CSV's iters column says how many ran.
 *   3. A hold on the stream: a host function that sleeps 1 ms + 2 x n x the host's cost per
 *      launch (at most HOLD_MAX_MS), enqueued before the timed launches.
 *   4. The timed launches, all enqueued with no synchronisation in between, each between its own
 *      pair of events; one stream synchronisation after the loop; then the n elapsed times.
 *
 * Why no synchronisation in the loop: the host work of a launch happens after its start event is
 * enqueued (flash_forward validates the problem, the TMA stages encode their tensor maps, some
 * memset a tile counter). When the GPU has drained the queue, as it has after every
 * synchronisation, the start event fires as soon as it is enqueued, and that host work lands
 * inside the timed window. With the GPU behind the host, the start event and the kernel are both
 * queued before the GPU reaches either, and the window holds the GPU's work alone.
 *
 * Why the hold: even without a synchronisation, the GPU would start on the first timed launch at
 * once and could catch up with the host whenever a launch is shorter than its enqueueing. Held
 * back for about twice the time the host needs to enqueue all n launches, it finds them all
 * queued. A stage longer than its enqueueing keeps the host ahead by itself after the first
 * launch (1 ms covers that one); the cap bounds the wall time lost when n is large, where the
 * launch queue's finite depth would block the host before it enqueued all n anyway. The hold is
 * before the first start event, so it is never timed. It is a host function rather than a spin
 * kernel because this C file has no device code of its own (a kernel would need a new entry point
 * in harness/gpu.h); the price is that the GPU idles during the hold, typically a few ms, as it
 * idled after every synchronised launch before. */
timing_result problem_time(problem_state *ps, int stage, gpu_ctx *g, int warmup, int iters) {
    /* ev[2j], ev[2j + 1]: the start and stop of timed launch j, and first of timed warm-up launch j. */
    cudaEvent_t *ev = host_alloc((size_t)2 * (size_t)iters * sizeof *ev, "timing events");  /* [2 * iters] */
    int created = 0;

    /* 1. Warm-up, the last `timed_w` of it timed for the estimates. */
    const int launches = warmup > 0 ? warmup : 1;
    const int timed_w = launches < iters ? launches : iters;
    create_events(ev, &created, 2 * timed_w);
    double host_ms = INFINITY;  /* the shortest time to enqueue one timed warm-up launch */
    for (int w = 0; w < launches; w++) {
        const int j = w - (launches - timed_w);
        if (j < 0) {
            launch_or_exit(ps, stage, g->stream);
            continue;
        }
        const double t0 = host_now_ms();
        enqueue_timed(ps, stage, g, ev[2 * j], ev[2 * j + 1], j);
        const double dt = host_now_ms() - t0;
        if (dt < host_ms) host_ms = dt;
    }
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    float est_ms = INFINITY;  /* the shortest GPU time of one timed warm-up launch */
    for (int j = 0; j < timed_w; j++) {
        float t;
        CUDA_CHECK(cudaEventElapsedTime(&t, ev[2 * j], ev[2 * j + 1]));
        if (t < est_ms) est_ms = t;
    }

    /* 2. How many timed launches: the stop rule, decided up front. */
    double want = est_ms > 0.0f ? ceil((double)TIME_BUDGET_MS / (double)est_ms) : (double)iters;
    if (want < TIME_MIN_ITERS) want = TIME_MIN_ITERS;
    const int n = want < (double)iters ? (int)want : iters;
    create_events(ev, &created, 2 * n);

    /* 3. Hold the stream while the host enqueues (hold_ms lives until the synchronisation below,
     * after the host function has run). */
    double hold_ms = HOLD_MIN_MS + 2.0 * n * host_ms;
    if (!(hold_ms <= HOLD_MAX_MS)) hold_ms = HOLD_MAX_MS;
    CUDA_CHECK(cudaLaunchHostFunc(g->stream, hold_stream, &hold_ms));

    /* 4. The timed launches: no synchronisation until all are enqueued. */
    for (int j = 0; j < n; j++) enqueue_timed(ps, stage, g, ev[2 * j], ev[2 * j + 1], j);
    CUDA_CHECK(cudaStreamSynchronize(g->stream));  /* a fault inside the stage surfaces here: exit 3 */
    CUDA_CHECK_LAUNCH();

    float *ms = host_alloc((size_t)n * sizeof(float), "timings");  /* [n] */
    for (int j = 0; j < n; j++) CUDA_CHECK(cudaEventElapsedTime(&ms[j], ev[2 * j], ev[2 * j + 1]));
    for (int j = 0; j < created; j++) CUDA_CHECK(cudaEventDestroy(ev[j]));
    free(ev);

    qsort(ms, (size_t)n, sizeof ms[0], cmp_float);
    timing_result t;
    t.iters = n;
    t.ms_min = ms[0];
    t.ms_median = 0.5f * (ms[(n - 1) / 2] + ms[n / 2]);
    t.tflops = attention_flops(&ps->p) / (t.ms_median * 1e-3) / 1e12;
    free(ms);
    return t;
}
