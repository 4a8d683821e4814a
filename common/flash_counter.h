/*
 * flash_counter.h: the tile counter of the persistent causal grids (stages 15 on), host side.
 *
 * A causal grid's query tiles are unequal, so its blocks take them from a counter in global memory
 * (atomicAdd hands out the next tile), zeroed on the stream right before each launch. A counter
 * belongs to one call at a time: two calls running at once on two streams would share out each
 * other's tiles. Allocating one per call in stream order (cudaMallocAsync, cudaFreeAsync) gives
 * that, but measured slower at every causal point of the sweep: the allocation and the free sit
 * between the kernels of consecutive calls. So each device keeps a small pool of counters, each
 * with the stream of its last call and an event recorded after that call; a call takes the counter
 * its stream used last (stream order puts its zeroing after that call's kernel), or one whose last
 * call has completed, or a new one. A stream being captured into a graph, a device past the pool's
 * table, or a call that finds every counter busy on other streams gets a counter of its own in
 * stream order, as before.
 */
#ifndef FLASH_COUNTER_H
#define FLASH_COUNTER_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One launch's counter. Fields are the implementation's, except `counter`. */
typedef struct {
    int *counter;                 /* the device int the kernel takes its tiles from, zeroed on the stream */
    int device, slot;             /* the pool's entry, or slot -1 for a counter of the call's own */
    unsigned long long stream_id; /* cudaStreamGetId of the call's stream */
} flash_tile_counter;

/* Takes a counter for one launch on `stream` of the current `device` and zeroes it there. Returns 0,
 * or FLASH_E_CUDA with a message naming `stage`. After a 0 the caller launches its kernel and then
 * calls flash_tile_counter_done, whatever the launch's outcome: between the two a lock is held, so
 * that no other host thread takes the same counter before this call's event is recorded. */
int flash_tile_counter_take(flash_tile_counter *c, int device, cudaStream_t stream, const char *stage);

/* Gives the counter back after the launch whose status (FLASH_OK or an error) is `status`: the
 * pool's entry remembers this stream and records its event, a counter of the call's own is freed
 * in stream order. Returns `status`, or FLASH_E_CUDA where that fails after a successful launch. */
int flash_tile_counter_done(flash_tile_counter *c, cudaStream_t stream, int status, const char *stage);

#ifdef __cplusplus
}
#endif
#endif /* FLASH_COUNTER_H */
