/*
 * flash_internal.h: what the stages, the dispatcher and the harness share beyond the public API.
 * Not installed, not part of the contract.
 */
#ifndef FLASH_INTERNAL_H
#define FLASH_INTERNAL_H

#include "flash.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLASH_STAGES 8

/* Every stage exports one entry point with this signature, named flash_forward_kernelNN. It is
 * called only after flash_validate() accepted the problem, with softmax_scale already resolved. */
typedef int (*flash_stage_fn)(const flash_problem *p, cudaStream_t stream);

/* Checks the shape, dtype and scale (and, when check_pointers is set, the pointers) against the
 * contract without touching the device. Returns 0 or FLASH_E_INVALID / FLASH_E_UNSUPPORTED and
 * records a message naming the parameter (read it with flash_strerror). */
int flash_validate(const flash_problem *p, int check_pointers);

/* Records the calling thread's error message for `code` and returns `code`. */
int flash_set_error(int code, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Returns 0 after a successful launch, or records the CUDA error and returns FLASH_E_CUDA. */
int flash_launch_status(const char *stage);

/* The stage entry points; a binary that links only some stages sees NULL for the others. */
#define FLASH_DECLARE_STAGE(nn) int flash_forward_kernel##nn(const flash_problem *p, cudaStream_t stream)
FLASH_DECLARE_STAGE(01); FLASH_DECLARE_STAGE(02); FLASH_DECLARE_STAGE(03); FLASH_DECLARE_STAGE(04);
FLASH_DECLARE_STAGE(05); FLASH_DECLARE_STAGE(06); FLASH_DECLARE_STAGE(07); FLASH_DECLARE_STAGE(08);

/* Non-zero when stage `stage` is linked into this binary. */
int flash_stage_available(int stage);

#ifdef __cplusplus
}
#endif
#endif /* FLASH_INTERNAL_H */
