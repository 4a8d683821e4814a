/*
 * check.h: error checks for host code. Every CUDA call in the harness goes through CUDA_CHECK, and
 * every launch is followed by CUDA_CHECK_LAUNCH, so that a failure names the expression, the file
 * and the line instead of surfacing later as wrong numbers.
 */
#ifndef FLASH_CHECK_H
#define FLASH_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

/* Exit status 3 is the harness's "CUDA error or no device". */
#define FLASH_EXIT_CUDA 3

#define CUDA_CHECK(expr)                                                                        \
    do {                                                                                        \
        cudaError_t check_err_ = (expr);                                                        \
        if (check_err_ != cudaSuccess) {                                                        \
            fprintf(stderr, "CUDA error: %s failed at %s:%d: %s (%s)\n", #expr, __FILE__,       \
                    __LINE__, cudaGetErrorString(check_err_), cudaGetErrorName(check_err_));    \
            exit(FLASH_EXIT_CUDA);                                                              \
        }                                                                                       \
    } while (0)

/* A launch reports configuration errors through cudaGetLastError and faults at the next sync. */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#endif /* FLASH_CHECK_H */
