/*
 * cli.h: ./run's command line. Every argument is parsed and validated here, before the device is
 * touched, so that a typo fails fast (exit 2) even on a machine with no GPU.
 */
#ifndef HARNESS_CLI_H
#define HARNESS_CLI_H

#include <stdint.h>

#include "flash.h"

typedef struct {
    flash_problem problem;  /* shape, dtype, causal, scale (0 = 1/sqrt(d)); pointers NULL */
    int dtype_given;        /* --dtype was on the command line: --sweep / --bench run that dtype alone */
    uint64_t seed;
    int warmup, iters;
    int check;              /* 0 with --no-check */
    const char *csv_path;   /* NULL: no CSV */
    int sweep, bench, peak, matrix, gpu_slug;
    int stage;              /* 1..flash_stage_count(), or 0 for --stage all */
    int stage_given;        /* --stage was on the command line */
} run_options;

#define CLI_OK 0
#define CLI_HELP 1   /* --help was printed: exit 0 */
#define CLI_ERROR 2  /* the message is on stderr: exit 2 */

/* Fills o from argv, prints errors to stderr. Returns CLI_OK, CLI_HELP or CLI_ERROR. Checks the
 * problem with flash_validate, the stage against what is linked into this binary, and e4m3 inputs
 * against the stages that take them (the API's refusal, before any device work). */
int parse_args(int argc, char **argv, run_options *o);


#endif /* HARNESS_CLI_H */
