/*
 * problems.h: the problems the benchmarks run, defined once for the C side. harness/contract.py
 * holds the same definitions for the Python scripts (reference timings, plots, docs tables), and
 * tests/test_contract.sh checks that the two agree.
 */
#ifndef HARNESS_PROBLEMS_H
#define HARNESS_PROBLEMS_H

#include "flash.h"

/* The chapters' problem, ./run's default: batch 16, seqlen 4096, 16 heads, head_dim 128, bf16,
 * non-causal; heads_kv = heads, softmax_scale 0 (1/sqrt(head_dim)); pointers NULL. */
flash_problem headline_problem(void);

/* The sweep of --sweep / --bench / make bench: seqlen 512 .. 16k with batch * seqlen = 65536 and
 * heads * head_dim = 2048 (every problem moves the same 134M-element tensors), head_dim 64 and
 * 128, causal 0 and 1, in `dtype`, heads_kv = heads. In the order head_dim, causal, seqlen. */
#define SWEEP_PROBLEMS 24
flash_problem sweep_problem(int i, flash_dtype dtype);  /* i in [0, SWEEP_PROBLEMS) */

/* The dtypes the benchmark runs the sweep in (--sweep / --bench without --dtype, make bench), in
 * this order: bf16 on every stage, then e4m3 on the stages that take fp8 inputs. */
#define BENCH_DTYPES 2
flash_dtype bench_dtype(int i);  /* i in [0, BENCH_DTYPES) */

#endif /* HARNESS_PROBLEMS_H */
