/*
 * contract_dump.c: prints the C side's CSV header, the ceilings' kernel names and the benchmark
 * problems (the headline, then the sweep in each of the benchmark's dtypes) in the form
 * `python3 harness/contract.py` prints the Python side's, for tests/test_contract.sh to compare.
 */
#include <stdio.h>

#include "csv.h"
#include "lowp.h"
#include "problems.h"

static void print_problem(const flash_problem *p) {
    printf("%s,%d,%d,%d,%d,%d,%d,%d\n", dtype_name(p->dtype), p->batch, p->heads_q, p->heads_kv, p->seqlen_q,
           p->seqlen_k, p->head_dim, p->causal);
}

int main(void) {
    printf("%s\n", CSV_HEADER);
    printf("%s,%s\n", CSV_KERNEL_MMA_PEAK, CSV_KERNEL_WGMMA_PEAK);
    const flash_problem h = headline_problem();
    print_problem(&h);
    for (int t = 0; t < BENCH_DTYPES; t++)
        for (int i = 0; i < SWEEP_PROBLEMS; i++) {
            const flash_problem p = sweep_problem(i, bench_dtype(t));
            print_problem(&p);
        }
    return 0;
}
