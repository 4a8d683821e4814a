/*
 * flash_tma.h: tensor maps for the TMA stages (10 on), encoded on the host.
 *
 * A tensor map is a 128-byte descriptor of a global tensor (its address, sizes, strides) and of
 * the box one TMA copy moves, with the shared-memory swizzle. The driver encodes it
 * (cuTensorMapEncodeTiled); we reach that function through the runtime's driver entry point, so
 * nothing links libcuda directly and a binary without Hopper stages needs nothing new.
 */
#ifndef FLASH_TMA_H
#define FLASH_TMA_H

#include <cuda.h>

#include "flash.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Encodes the map of a [batch, seqlen, heads, head_dim] bf16/fp16/e4m3 tensor at `base` (the layout
 * of q, k, v and o in flash.h) as a 4-d tensor, innermost first: (head_dim, heads, seqlen, batch).
 * One box is 128 bytes of one head (64 16-bit elements, or 128 e4m3 ones: the widest the 128-byte
 * swizzle allows) by box_rows sequence positions of one batch, landing in shared memory as box_rows
 * rows of 128 bytes, 128-byte swizzled: the layout of common/hopper.cuh's sw128_idx. An e4m3 head
 * of 64 is one box of 64-byte rows in the 64-byte swizzle instead (sw64_byte). Rows past seqlen are
 * zero-filled on load and skipped on store, inside each batch. Returns 0, or FLASH_E_CUDA with a message naming
 * `stage` and the tensor `what` ("q", "k", ...). */
int flash_tma_map(CUtensorMap *map, const void *base, flash_dtype dtype, int batch, int seqlen, int heads, int head_dim,
                  int box_rows, const char *stage, const char *what);

#ifdef __cplusplus
}
#endif
#endif /* FLASH_TMA_H */
