/*
 * problem.c: inputs -> reference -> checked launch -> timed launches, for one problem.
 *
 * Host C against the CUDA runtime API (no kernels here: those are in reference.cu, peak.cu and the
 * stages). Every CUDA call goes through CUDA_CHECK, which exits with status 3 naming the call.
 */
#include "problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_ref.h"
#include "flash_internal.h"
#include "gpu.h"
#include "inputs.h"

#define TIME_BUDGET_MS 2000.0f  /* a slow stage may stop timing after this much timed work ... */
#define TIME_MIN_ITERS 5        /* ... but never with fewer launches than this */

int gpu_open(gpu_ctx *g) {
    memset(g, 0, sizeof *g);
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        /* CUDA's own text for a machine without a driver is "CUDA driver version is insufficient
         * for CUDA runtime version" (cudaErrorInsufficientDriver), which sends the reader to update
         * a driver that is not there. So say first what was actually found: cudaDriverGetVersion
         * reports 0 when no driver (libcuda) can be loaded, else the CUDA version the driver
         * supports, which we compare with the runtime this binary was built with. CUDA's text
         * follows, for searching. The "no CUDA device:" prefix is what scripts and tests grep. */
        int driver = 0, runtime = 0;
        if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
        if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
        char dv[24], rv[24];  /* "12.4" from CUDA's 12040 */
        snprintf(dv, sizeof dv, "%d.%d", driver / 1000, (driver % 1000) / 10);
        snprintf(rv, sizeof rv, "%d.%d", runtime / 1000, (runtime % 1000) / 10);
        char what[256];
        if (driver == 0)
            snprintf(what, sizeof what,
                     "no NVIDIA driver was found on this machine (no GPU, or its driver is not installed)");
        else if (err == cudaErrorInsufficientDriver)
            snprintf(what, sizeof what,
                     "the installed NVIDIA driver supports CUDA %s, older than the CUDA %s runtime this was built with: "
                     "update the driver", dv, rv);
        else if (err == cudaErrorNoDevice)
            snprintf(what, sizeof what, "the driver found no NVIDIA GPU (driver for CUDA %s)", dv);
        else
            snprintf(what, sizeof what, "cudaGetDeviceCount failed (driver for CUDA %s, CUDA %s runtime)", dv, rv);
        fprintf(stderr, "no CUDA device: %s; CUDA says: %s (%s)\n", what, cudaGetErrorString(err),
                cudaGetErrorName(err));
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

int problem_setup(problem_state *ps, const flash_problem *shape, uint64_t seed, int spot_rows, gpu_ctx *g) {
    memset(ps, 0, sizeof *ps);
    flash_problem *p = &ps->p;
    *p = *shape;
    if (p->softmax_scale == 0.0f) p->softmax_scale = 1.0f / sqrtf((float)p->head_dim);
    ps->q_elems = (size_t)p->batch * p->seqlen_q * p->heads_q * p->head_dim;
    ps->kv_elems = (size_t)p->batch * p->seqlen_k * p->heads_kv * p->head_dim;
    ps->lse_elems = (size_t)p->batch * p->heads_q * p->seqlen_q;

    /* Refuse up front what cannot fit, rather than failing halfway with a CUDA error.
     * Per q element: q, o, o_lowp (2 B each) + o_ref (4 B); per kv element: k, v; per row: 2 LSEs. */
    const size_t dev_bytes = ps->q_elems * 10 + ps->kv_elems * 4 + ps->lse_elems * 8;
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
    ps->h_lse = host_alloc(ps->lse_elems * sizeof(float), "lse");
    ps->h_lse_ref = host_alloc(ps->lse_elems * sizeof(float), "lse_ref");
    CUDA_CHECK(cudaMalloc((void **)&ps->d_q, ps->q_elems * 2));
    CUDA_CHECK(cudaMalloc((void **)&ps->d_k, ps->kv_elems * 2));
    CUDA_CHECK(cudaMalloc((void **)&ps->d_v, ps->kv_elems * 2));
    CUDA_CHECK(cudaMalloc((void **)&ps->d_o, ps->q_elems * 2));
    CUDA_CHECK(cudaMalloc((void **)&ps->d_lse, ps->lse_elems * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&ps->d_o_ref, ps->q_elems * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&ps->d_o_lowp, ps->q_elems * 2));
    CUDA_CHECK(cudaMalloc((void **)&ps->d_lse_ref, ps->lse_elems * sizeof(float)));
    p->q = ps->d_q;
    p->k = ps->d_k;
    p->v = ps->d_v;
    p->o = ps->d_o;
    p->lse = ps->d_lse;

    /* Inputs: q, k, v are streams 0, 1, 2 of the seed. One staging buffer of 16-bit values serves
     * all three uploads. */
    const size_t max_elems = ps->q_elems > ps->kv_elems ? ps->q_elems : ps->kv_elems;
    uint16_t *h_bits = host_alloc(max_elems * 2, "input staging");  /* [max(q, kv) elements] */
    fill_normal(h_bits, ps->h_q, ps->q_elems, stream_key(seed, 0), p->dtype, 0);
    CUDA_CHECK(cudaMemcpy(ps->d_q, h_bits, ps->q_elems * 2, cudaMemcpyHostToDevice));
    fill_normal(h_bits, ps->h_k, ps->kv_elems, stream_key(seed, 1), p->dtype, 0);
    CUDA_CHECK(cudaMemcpy(ps->d_k, h_bits, ps->kv_elems * 2, cudaMemcpyHostToDevice));
    fill_normal(h_bits, ps->h_v, ps->kv_elems, stream_key(seed, 2), p->dtype, 0);
    CUDA_CHECK(cudaMemcpy(ps->d_v, h_bits, ps->kv_elems * 2, cudaMemcpyHostToDevice));
    free(h_bits);

    /* The reference, once per problem. */
    CUDA_CHECK(cudaEventRecord(g->start, g->stream));
    reference_forward(p, ps->d_o_ref, ps->d_o_lowp, ps->d_lse_ref, g->stream);
    CUDA_CHECK(cudaEventRecord(g->stop, g->stream));
    CUDA_CHECK(cudaEventSynchronize(g->stop));
    CUDA_CHECK(cudaEventElapsedTime(&ps->ref_ms, g->start, g->stop));
    CUDA_CHECK(cudaMemcpy(ps->h_lse_ref, ps->d_lse_ref, ps->lse_elems * sizeof(float), cudaMemcpyDeviceToHost));
    ps->lowp = gpu_err_stats(ps->d_o_lowp, ps->d_o_ref, p, g->stream);

    /* The referee's referee: recompute a few rows in float64 on the CPU. */
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

check_verdict problem_check(problem_state *ps, int stage, gpu_ctx *g, int *launch_rc) {
    /* Poison: 0xFFFF is a NaN in bf16 and in fp16, 0xFFFFFFFF a NaN in fp32. Whatever the stage
     * fails to write stays NaN and fails the check. */
    CUDA_CHECK(cudaMemsetAsync(ps->d_o, 0xFF, ps->q_elems * 2, g->stream));
    CUDA_CHECK(cudaMemsetAsync(ps->d_lse, 0xFF, ps->lse_elems * sizeof(float), g->stream));
    *launch_rc = flash_forward(stage, &ps->p, g->stream);
    if (*launch_rc != FLASH_OK) {
        check_verdict v;
        memset(&v, 0, sizeof v);
        v.max_abs_err = v.rel_l2_err = v.lse_max_err = INFINITY;
        v.tol = check_tolerance(&ps->lowp);
        snprintf(v.reason, sizeof v.reason, "flash_forward: %s", flash_strerror(*launch_rc));
        return v;
    }
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(g->stream));  /* a fault inside the stage surfaces here: exit 3 */

    const err_stats o = gpu_err_stats(ps->d_o, ps->d_o_ref, &ps->p, g->stream);
    CUDA_CHECK(cudaMemcpy(ps->h_lse, ps->d_lse, ps->lse_elems * sizeof(float), cudaMemcpyDeviceToHost));
    const lse_stats lse = lse_compare(ps->h_lse, ps->h_lse_ref, ps->lse_elems);
    return check_decide(&o, &ps->lowp, &lse);
}

/* Every timed launch goes through here: a refused problem is a usage error (2), a CUDA failure 3. */
static void launch_or_exit(int stage, const flash_problem *p, cudaStream_t stream) {
    const int rc = flash_forward(stage, p, stream);
    if (rc != FLASH_OK) {
        fprintf(stderr, "error: %s: %s\n", flash_stage_name(stage), flash_strerror(rc));
        exit(rc == FLASH_E_CUDA ? FLASH_EXIT_CUDA : 2);
    }
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

timing_result problem_time(problem_state *ps, int stage, gpu_ctx *g, int warmup, int iters) {
    for (int w = 0; w < warmup; w++) launch_or_exit(stage, &ps->p, g->stream);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(g->stream));

    float *ms = host_alloc((size_t)iters * sizeof(float), "timings");  /* [iters] */
    float total = 0.0f;
    int n = 0;
    while (n < iters) {
        /* Evict q, k, v, o from the L2 so every launch starts cold, as in a real model where the
         * previous layer's work has long replaced them. Queued before the start event: not timed. */
        CUDA_CHECK(cudaMemsetAsync(g->flush, n & 0xff, g->flush_bytes, g->stream));
        CUDA_CHECK(cudaEventRecord(g->start, g->stream));
        launch_or_exit(stage, &ps->p, g->stream);
        CUDA_CHECK(cudaEventRecord(g->stop, g->stream));
        CUDA_CHECK(cudaEventSynchronize(g->stop));
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaEventElapsedTime(&ms[n], g->start, g->stop));
        total += ms[n];
        n++;
        if (n >= TIME_MIN_ITERS && total >= TIME_BUDGET_MS) break;
    }
    qsort(ms, (size_t)n, sizeof ms[0], cmp_float);
    timing_result t;
    t.iters = n;
    t.ms_min = ms[0];
    t.ms_median = 0.5f * (ms[(n - 1) / 2] + ms[n / 2]);
    t.tflops = attention_flops(&ps->p) / (t.ms_median * 1e-3) / 1e12;
    free(ms);
    return t;
}
