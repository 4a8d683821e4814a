/*
 * csv.h: the results file. One row per (stage or reference, problem), appended, never rewritten.
 *
 * The committed plots/<gpu>.csv files accumulate rows from many runs (stages, the FA2/cuDNN script,
 * the two ceilings), so the harness only ever appends: it writes the header when the file is
 * new or empty, and refuses (touching nothing) a file whose first line is some other header.
 */
#ifndef HARNESS_CSV_H
#define HARNESS_CSV_H

#include <stddef.h>

#define CSV_HEADER                                                                                      \
    "gpu,kernel,name,dtype,batch,heads_q,heads_kv,seqlen_q,seqlen_k,head_dim,causal,iters,ms_median,ms_min," \
    "tflops,max_abs_err,rel_l2_err,check,commit,date"

/* The kernel column of the two ceilings that ./run --peak measures (harness/contract.py names the
 * same, for the scripts that read the rows; tests/test_contract.sh checks that the two agree).
 * Stages are "kernelNN"; harness/reference.py writes "fa2" and "cudnn". */
#define CSV_KERNEL_MMA_PEAK "mma_peak"     /* mma.sync: the limit of stages 01-08 */
#define CSV_KERNEL_WGMMA_PEAK "wgmma_peak" /* wgmma, Hopper only: the limit of the sm_90a stages */

typedef struct {
    const char *gpu;      /* device name, e.g. "NVIDIA H200" (quoted if it holds a comma) */
    const char *kernel;   /* "kernel05", CSV_KERNEL_MMA_PEAK or CSV_KERNEL_WGMMA_PEAK */
    const char *name;     /* "kernel05_swizzle" or "mma.sync.m16n8k16 bf16 f32-acc" */
    const char *dtype;    /* "bf16" / "fp16" / "e4m3" (lowp.h's dtype_name); "" leaves the column empty */
    int has_problem;      /* 0: batch .. causal are left empty (the ceilings' rows) */
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal;
    int iters;
    double ms_median, ms_min, tflops;
    int has_errors;       /* 0: max_abs_err and rel_l2_err are left empty (check skipped) */
    double max_abs_err, rel_l2_err;
    const char *check;    /* "pass", "fail" or "skipped" */
    const char *commit;   /* git commit of the build, or "unknown" */
    const char *date;     /* UTC, ISO 8601: 2026-11-29T20:15:00Z */
} csv_row;

/* Can rows be appended to `path`? 0 when the file is absent but can be created (its directory
 * exists and is writable), or exists, can be opened for append, and is empty or starts with
 * CSV_HEADER; -1 otherwise, with a message naming the file and why (a directory, no such
 * directory, permission denied, a foreign header) in err[errlen]. Creates and changes nothing. */
int csv_preflight(const char *path, char *err, size_t errlen);

/* One row as CSV text, without the newline. Returns the length, or -1 if buf[buflen] is too small. */
int csv_format_row(const csv_row *row, char *buf, size_t buflen);

/* Appends `row` to `path` (the header first if the file is new or empty). 0, or -1 with err. */
int csv_append(const char *path, const csv_row *row, char *err, size_t errlen);

/* The current time, UTC, ISO 8601 ("2026-11-29T20:15:00Z"), into buf[21]. */
void utc_now_iso8601(char buf[21]);

#endif /* HARNESS_CSV_H */
