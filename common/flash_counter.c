/*
 * flash_counter.c: see flash_counter.h.
 */
#include "flash_counter.h"

#include <pthread.h>
#include <stddef.h>

#include "flash_internal.h"

/* Devices with a pool (a device past them gets counters of the call's own), and counters a device
 * keeps: more streams at once than that share out the pool, the rest allocate their own. */
enum { kMaxDevices = 64, kSlots = 8 };

typedef struct {
    int *counter;                 /* NULL: not allocated yet */
    cudaEvent_t done;             /* recorded after the last call that used it */
    unsigned long long stream_id; /* that call's stream */
} pool_entry;

static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static pool_entry pool[kMaxDevices][kSlots];

/* An entry of `device` free for a call on stream `stream_id`, or -1 (all busy elsewhere, or no
 * memory for another). The caller holds pool_mutex. */
static int entry_for(int device, unsigned long long stream_id) {
    pool_entry *e = pool[device];
    for (int i = 0; i < kSlots; ++i)
        if (e[i].counter && e[i].stream_id == stream_id) return i;
    /* cudaErrorNotReady, the answer for a call still running, is not recorded as an error. */
    for (int i = 0; i < kSlots; ++i)
        if (e[i].counter && cudaEventQuery(e[i].done) == cudaSuccess) return i;
    for (int i = 0; i < kSlots; ++i) {
        if (e[i].counter) continue;
        if (cudaMalloc((void **)&e[i].counter, sizeof(int)) != cudaSuccess) {
            e[i].counter = NULL;
            cudaGetLastError(); /* the call's own counter is allocated in stream order instead, and reports a failure there */
            return -1;
        }
        if (cudaEventCreateWithFlags(&e[i].done, cudaEventDisableTiming) != cudaSuccess) {
            cudaFree(e[i].counter);
            e[i].counter = NULL;
            cudaGetLastError();
            return -1;
        }
        return i;
    }
    return -1;
}

int flash_tile_counter_take(flash_tile_counter *c, int device, cudaStream_t stream, const char *stage) {
    c->counter = NULL;
    c->device = device;
    c->slot = -1;
    c->stream_id = 0;
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamIsCapturing(stream, &capture);
    if (err == cudaSuccess) err = cudaStreamGetId(stream, &c->stream_id);
    if (err != cudaSuccess) return flash_set_error(FLASH_E_CUDA, "%s: the stream: %s", stage, cudaGetErrorString(err));
    pthread_mutex_lock(&pool_mutex);
    if (capture == cudaStreamCaptureStatusNone && device >= 0 && device < kMaxDevices) c->slot = entry_for(device, c->stream_id);
    if (c->slot >= 0) {
        c->counter = pool[device][c->slot].counter;
    } else {
        /* Stream-ordered: this call's own counter, freed after its kernel. */
        err = cudaMallocAsync((void **)&c->counter, sizeof(int), stream);
        if (err != cudaSuccess) {
            c->counter = NULL;
            cudaGetLastError(); /* the failure is reported here, not again by the next launch's check */
            pthread_mutex_unlock(&pool_mutex);
            return flash_set_error(FLASH_E_CUDA, "%s: the tile counter: %s", stage, cudaGetErrorString(err));
        }
    }
    err = cudaMemsetAsync(c->counter, 0, sizeof(int), stream);
    if (err != cudaSuccess) {
        if (c->slot < 0) cudaFreeAsync(c->counter, stream);
        cudaGetLastError();
        pthread_mutex_unlock(&pool_mutex);
        return flash_set_error(FLASH_E_CUDA, "%s: zeroing the tile counter: %s", stage, cudaGetErrorString(err));
    }
    return 0;
}

int flash_tile_counter_done(flash_tile_counter *c, cudaStream_t stream, int status, const char *stage) {
    cudaError_t err;
    const char *what;
    if (c->slot >= 0) {
        /* The counter is this stream's until the call completes. */
        pool_entry *e = &pool[c->device][c->slot];
        e->stream_id = c->stream_id;
        err = cudaEventRecord(e->done, stream);
        what = "recording the tile counter's event";
    } else {
        err = cudaFreeAsync(c->counter, stream);
        what = "freeing the tile counter";
    }
    pthread_mutex_unlock(&pool_mutex);
    if (err != cudaSuccess && status == FLASH_OK) return flash_set_error(FLASH_E_CUDA, "%s: %s: %s", stage, what, cudaGetErrorString(err));
    return status;
}
