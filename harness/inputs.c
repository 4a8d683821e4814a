/*
 * inputs.c: the input generator. Counter-based SplitMix64 + Box-Muller, filled by a few pthreads.
 *
 * Why not rand() or a sequential xoshiro stream: a sequential stream forces one thread to walk all
 * 400M values of the headline problem (seconds of Box-Muller); a counter-based one lets each
 * thread start anywhere, and the result stays bit-identical whatever the thread count.
 */
#define _POSIX_C_SOURCE 200809L  /* sysconf */

#include "inputs.h"

#include <math.h>
#include <pthread.h>
#include <unistd.h>

#include "lowp.h"

uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t stream_key(uint64_t seed, uint64_t tensor_id) {
    /* Mixing twice keeps the streams of (seed, tensor) and (seed + 1, tensor - 1) unrelated. */
    return splitmix64(splitmix64(seed) ^ (tensor_id * 0xd1b54a32d192ed03ull));
}

float normal_at(uint64_t key, uint64_t i) {
    /* One 64-bit draw per pair: SplitMix64's j-th output from state `key` is mix(key + j * gamma),
     * which is what splitmix64(key + j * gamma) computes (the gamma add is inside). */
    uint64_t r = splitmix64(key + (i >> 1) * 0x9e3779b97f4a7c15ull);
    /* Two 24-bit uniforms (floats hold 24 bits exactly): u1 in (0, 1] so that log(u1) is finite,
     * u2 in [0, 1). */
    float u1 = (float)((r >> 40) + 1) * 0x1p-24f;
    float u2 = (float)(r & 0xffffffu) * 0x1p-24f;
    float radius = sqrtf(-2.0f * logf(u1));
    float angle = 6.283185307179586f * u2;
    return (i & 1) ? radius * sinf(angle) : radius * cosf(angle);
}

float input_at(uint64_t key, size_t i, const input_layout *layout) {
    const float x = normal_at(key, i);
    if (!layout || layout->kind != INPUTS_SINKS || i % (size_t)layout->head_dim != 0) return x;
    if (layout->tensor == 0) return 8.0f;
    if (layout->tensor != 1) return x;
    const size_t j = (i / ((size_t)layout->head_dim * (size_t)layout->heads)) % (size_t)layout->seqlen;
    return j == 0 ? 32.0f : 6.0f * (float)((size_t)layout->seqlen - j) / (float)layout->seqlen;
}

/* One thread's share of a tensor, and what it hands back. */
typedef struct {
    void *bits;         /* [n] elements of dtype_bytes(dtype) bytes */
    float *vals;        /* [n] */
    size_t begin, end;  /* this thread's element range [begin, end) */
    uint64_t key;
    const input_layout *layout;
    flash_dtype dtype;
    float descale;      /* e4m3, second pass: the tensor's descale */
    float amax;         /* e4m3, first pass: the largest |sample| of the range */
} fill_job;

/* bf16 and fp16, in one pass: each sample rounded to the dtype. */
static void *fill_range_16(void *arg) {
    const fill_job *job = (const fill_job *)arg;
    uint16_t *bits = (uint16_t *)job->bits;
    for (size_t i = job->begin; i < job->end; i++) {
        const uint16_t h = f32_to_lowp(input_at(job->key, i, job->layout), job->dtype);
        bits[i] = h;
        job->vals[i] = lowp_to_f32(h, job->dtype);  /* the value the device will see, exactly */
    }
    return NULL;
}

/* e4m3, first pass: the samples themselves into vals, and the range's amax. */
static void *sample_range(void *arg) {
    fill_job *job = (fill_job *)arg;
    float amax = 0.0f;
    for (size_t i = job->begin; i < job->end; i++) {
        const float x = input_at(job->key, i, job->layout);
        job->vals[i] = x;
        if (fabsf(x) > amax) amax = fabsf(x);
    }
    job->amax = amax;
    return NULL;
}

/* e4m3, second pass: each sample quantized with the tensor's descale, and vals replaced by the
 * number the stored element stands for. */
static void *quantize_range(void *arg) {
    const fill_job *job = (const fill_job *)arg;
    uint8_t *bits = (uint8_t *)job->bits;
    for (size_t i = job->begin; i < job->end; i++) {
        const uint8_t b = f32_to_e4m3(job->vals[i] / job->descale);
        bits[i] = b;
        job->vals[i] = e4m3_to_f32(b) * job->descale;
    }
    return NULL;
}

#define FILL_MAX_THREADS 64

/* Runs fn on every job, jobs[0] on this thread. If a thread cannot be started its share also runs
 * here, so the result never depends on whether pthread_create succeeded. */
static void run_jobs(fill_job *jobs, int threads, void *(*fn)(void *)) {
    pthread_t tids[FILL_MAX_THREADS];
    int started[FILL_MAX_THREADS] = {0};
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&tids[t], NULL, fn, &jobs[t]) == 0;
    fn(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tids[t], NULL);
        else fn(&jobs[t]);
    }
}

float fill_normal(void *bits, float *vals, size_t n, uint64_t key, flash_dtype dtype, int threads, const input_layout *layout) {
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores > 0 ? (int)cores : 1;
    }
    if (threads > FILL_MAX_THREADS) threads = FILL_MAX_THREADS;
    /* Small tensors (the correctness matrix) are not worth a thread start. */
    if (n < ((size_t)1 << 20)) threads = 1;

    fill_job jobs[FILL_MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        jobs[t] = (fill_job){bits, vals, n * (size_t)t / (size_t)threads, n * (size_t)(t + 1) / (size_t)threads,
                             key, layout, dtype, 1.0f, 0.0f};
    }
    if (dtype != FLASH_E4M3) {
        run_jobs(jobs, threads, fill_range_16);
        return 1.0f;
    }
    /* Two passes, because every element's quantization needs the whole tensor's amax. The first
     * keeps the samples in vals, so the second need not draw them again. */
    run_jobs(jobs, threads, sample_range);
    float amax = 0.0f;
    for (int t = 0; t < threads; t++)
        if (jobs[t].amax > amax) amax = jobs[t].amax;
    /* amax / 448 is a normal float for any sample normal_at can draw (|x| < 6) and for the sinks'
     * 32; only a tensor of zeros has none, and any descale stores it exactly: 1 then. */
    const float descale = amax > 0.0f ? amax / E4M3_MAX : 1.0f;
    for (int t = 0; t < threads; t++) jobs[t].descale = descale;
    run_jobs(jobs, threads, quantize_range);
    return descale;
}
