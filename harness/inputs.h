/*
 * inputs.h: seeded normal(0, 1) inputs, generated on the host in the I/O dtype.
 *
 * The generator is counter-based: element i of a tensor is a pure function of (seed, tensor, i).
 * So the values do not depend on how many threads fill the tensor, a single element can be
 * recomputed in isolation (the tests do), and filling 3 x 134M elements splits across all cores.
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
 * and sine halves of the same pair), in float, not yet rounded to the I/O dtype. */
float normal_at(uint64_t key, uint64_t i);

/* Fills n elements with normal_at(key, 0..n-1) rounded to `dtype`:
 *   bits[n] : the 16-bit values, for the device
 *   vals[n] : the same values as float (exactly representable), for the CPU reference
 * Uses up to `threads` threads (0: one per online core). */
void fill_normal(uint16_t *bits, float *vals, size_t n, uint64_t key, flash_dtype dtype, int threads);

#endif /* HARNESS_INPUTS_H */
