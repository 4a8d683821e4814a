/*
 * report.h: the PASS:/FAIL: lines of the C test programs (tests/run_tests.sh counts them), one
 * definition for all of them. Header-only: each program is one file, built by gcc or nvcc.
 */
#ifndef TESTS_REPORT_H
#define TESTS_REPORT_H

#include <stdio.h>

static int n_pass = 0, n_fail = 0;

/* Records one test: ok != 0 passes; otherwise prints why. */
static void report(const char *name, int ok, const char *why) {
    if (ok) {
        printf("PASS: %s\n", name);
        n_pass++;
    } else {
        printf("FAIL: %s: %s\n", name, why);
        n_fail++;
    }
}

#endif /* TESTS_REPORT_H */
