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

typedef struct {
    uint16_t *bits;
    float *vals;
    size_t begin, end;  /* this thread's element range [begin, end) */
    uint64_t key;
    flash_dtype dtype;
} fill_job;

static void *fill_range(void *arg) {
    const fill_job *job = (const fill_job *)arg;
    for (size_t i = job->begin; i < job->end; i++) {
        uint16_t h = f32_to_lowp(normal_at(job->key, i), job->dtype);
        job->bits[i] = h;
        job->vals[i] = lowp_to_f32(h, job->dtype);  /* the value the device will see, exactly */
    }
    return NULL;
}

#define FILL_MAX_THREADS 64

void fill_normal(uint16_t *bits, float *vals, size_t n, uint64_t key, flash_dtype dtype, int threads) {
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores > 0 ? (int)cores : 1;
    }
    if (threads > FILL_MAX_THREADS) threads = FILL_MAX_THREADS;
    /* Small tensors (the correctness matrix) are not worth a thread start. */
    if (n < ((size_t)1 << 20)) threads = 1;

    fill_job jobs[FILL_MAX_THREADS];
    pthread_t tids[FILL_MAX_THREADS];
    int started[FILL_MAX_THREADS] = {0};
    for (int t = 0; t < threads; t++) {
        jobs[t] = (fill_job){bits, vals, n * (size_t)t / (size_t)threads, n * (size_t)(t + 1) / (size_t)threads,
                             key, dtype};
    }
    /* Thread 0's share runs here; if a thread cannot be started its share also runs here, so the
     * result never depends on whether pthread_create succeeded. */
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&tids[t], NULL, fill_range, &jobs[t]) == 0;
    fill_range(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tids[t], NULL);
        else fill_range(&jobs[t]);
    }
}
