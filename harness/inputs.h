/*
 * inputs.h: seeded normal(0, 1) inputs, generated on the host in the input dtype.
 *
 * The generator is counter-based: element i of a tensor is a pure function of (seed, tensor, i).
 * So the values do not depend on how many threads fill the tensor, a single element can be
 * recomputed in isolation (the tests do), and filling 3 x 134M elements splits across all cores.
 *
 * e4m3 inputs are those samples quantized with one scale per tensor, the way fp8 tensors are made
 * in practice (and FlashAttention-3's fp8 forward takes them): the tensor's largest magnitude amax
 * is mapped to e4m3's largest value 448, so the element stored is e4m3(x / descale) with
 * descale = amax / 448, and the number it stands for is e4m3_to_f32(stored) * descale. The amax is
 * a maximum, which does not depend on the order it is taken in, so this too is the same whatever
 * the thread count, and an element still recomputes alone once the tensor's descale is known.
 */
#ifndef HARNESS_INPUTS_H
#define HARNESS_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "flash.h"

/* The SplitMix64 finaliser: a bijective 64-bit mix with good avalanche. */
uint64_t splitmix64(uint64_t z);

/* The key of one tensor's stream: tensor_id 0, 1, 2 for q, k, v. */
uint64_t stream_key(uint64_t seed, uint64_t tensor_id);

/* Element i of the stream: a normal(0, 1) sample (Box-Muller; elements 2j and 2j+1 are the cosine
 * and sine halves of the same pair), in float, not yet rounded to the input dtype. */
float normal_at(uint64_t key, uint64_t i);

/* What the inputs hold besides their samples. INPUTS_NORMAL: the normal(0, 1) samples alone.
 * INPUTS_SINKS: the samples, but head-dim element 0 of every query is 8 and of every key a ramp,
 * 6 (seqlen_k - j) / seqlen_k for key j, with key 0 of every head at 32: scores that grow toward key
 * 0, which a kernel visits last, so that each row's running max rises from tile to tile, now by
 * little and at the end by a lot (a key every row attends to, an attention sink, and logits tens of
 * natural-log units above the rest). It tests the online softmax's rescaling, where FlashAttention
 * keeps a stale max. `tensor` is 0, 1, 2 for q, k, v, and the layout [batch, seqlen, heads,
 * head_dim] says where element i sits. */
typedef enum { INPUTS_NORMAL = 0, INPUTS_SINKS = 1 } input_kind;
typedef struct {
    input_kind kind;
    int tensor, seqlen, heads, head_dim;
} input_layout;

/* Element i of a tensor as `layout` says (NULL: normal_at(key, i)), in float. */
float input_at(uint64_t key, size_t i, const input_layout *layout);

/* Fills one tensor of n elements from input_at(key, 0..n-1, layout) in `dtype` and returns its descale:
 *   bits : n elements for the device, dtype_bytes(dtype) bytes each: uint16_t for bf16 and fp16
 *          (the samples rounded to the dtype), uint8_t for e4m3 (quantized as above)
 *   vals : [n] the numbers those elements stand for, as float, for the CPU reference: exactly the
 *          16-bit values; for e4m3 e4m3_to_f32(bits[i]) * descale, rounded once to float
 * The descale is 1 for bf16 and fp16 and amax / 448 for e4m3 (1 for a tensor of zeros).
 * Uses up to `threads` threads (0: one per online core). */
float fill_normal(void *bits, float *vals, size_t n, uint64_t key, flash_dtype dtype, int threads, const input_layout *layout);

#endif /* HARNESS_INPUTS_H */
