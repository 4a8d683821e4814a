/*
 * flash_internal.h: what the stages, the dispatcher and the harness share beyond the public API.
 * Not installed, not part of the contract, not exported from build/libflash.so.
 */
#ifndef FLASH_INTERNAL_H
#define FLASH_INTERNAL_H

#include <stddef.h>

#include "flash.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stage numbers are the two digits of their directory names (kernel05_swizzle is stage 5), so
 * there are at most 99. Which stages exist is known only to the dispatcher: the Makefile lists the
 * kernelNN_name directories into build/gen/stages.h, and flash_stage_count() reports how many. */
#define FLASH_MAX_STAGES 99

/* Every stage exports one entry point with this signature, named flash_forward_kernelNN. It is
 * called only after flash_validate() accepted the problem and flash_stage_supported() the GPU,
 * with softmax_scale already resolved. */
typedef int (*flash_stage_fn)(const flash_problem *p, cudaStream_t stream);

/* A stage that takes e4m3 inputs also exports flash_forward_fp8_kernelNN, called for dtype
 * FLASH_E4M3 only, with the descale factors already checked (flash_forward passes 1, 1, 1). Its
 * presence in kernel.cu is what the Makefile's stage table records as the stage's fp8 column. */
typedef int (*flash_stage_fp8_fn)(const flash_problem *p, const flash_descale *descale, cudaStream_t stream);

/* Does stage `stage` take e4m3 inputs (whether or not it is linked in)? And the first stage that
 * does, 0 if none: what a refusal of e4m3 names. */
int flash_stage_takes_fp8(int stage);
int flash_first_fp8_stage(void);

/* The refusal of a dtype, without the device: 0 if stage `stage` takes inputs of `dtype` (every
 * stage takes bf16 and fp16; e4m3 the stages that take fp8), otherwise FLASH_E_UNSUPPORTED with the
 * message flash_forward gives, recorded for flash_strerror: "unsupported dtype e4m3 for stage 15
 * (kernel15_final): fp8 inputs need stage 16 (kernel16_fp8) or later". FLASH_E_INVALID for a
 * stage that does not exist. ./run refuses with it before it builds a problem. */
int flash_stage_supports_dtype(int stage, flash_dtype dtype);

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

/* Non-zero when stage `stage` is linked into this binary. */
int flash_stage_available(int stage);

/* The GPU architecture stage `stage` is built for, from the "Needs:" line of its kernel.cu:
 * "sm_80" (that architecture or any newer one) or "sm_90a" (exactly that one: Hopper's wgmma and
 * TMA exist on sm_90 alone). NULL for a stage that does not exist. */
const char *flash_stage_arch(int stage);

/* Can the current device run stage `stage`? 0 if it can (or the stage is not linked in: the
 * caller finds that out from flash_stage_available). Otherwise FLASH_E_UNSUPPORTED, or
 * FLASH_E_CUDA when the device cannot be queried, with the reason recorded for flash_strerror:
 * "stage 09 (kernel09_wgmma) needs a Hopper GPU (sm_90), this one is sm_86". The device's
 * compute capability is looked up once per device. */
int flash_stage_supported(int stage);

/* Why a device query failed with `err`, in msg[n]: what was found, in plain words, then CUDA's own
 * text: "no NVIDIA driver was found on this machine (no GPU, or its driver is not installed);
 * CUDA says: CUDA driver version is insufficient for CUDA runtime version
 * (cudaErrorInsufficientDriver)". CUDA's text alone would send a reader without a GPU to update a
 * driver that is not there; it follows, for searching. ./run's "no CUDA device" message and
 * flash_stage_supported's FLASH_E_CUDA both say it. */
void flash_device_error(cudaError_t err, char *msg, size_t n);

/* The rule behind flash_stage_supported, without the device: can a GPU of compute capability
 * `cc` (major * 10 + minor: 86 for sm_86) run code built for `arch` ("sm_80", "sm_90a")? Returns 1
 * if it can; otherwise 0, with what it needs in need[n] ("a Hopper GPU (sm_90)", "an Ampere or
 * newer GPU (sm_80 or newer)"). A malformed arch string can run nowhere. */
int flash_arch_runs_on(const char *arch, int cc, char *need, size_t n);

/* The refusal of flash_stage_supported, without the device: 0 if a GPU of compute capability `cc`
 * runs stage `stage` (named `name`, built for `arch`); otherwise 1, with the message in msg[n]:
 * "stage 09 (kernel09_wgmma) needs a Hopper GPU (sm_90), this one is sm_86". */
int flash_stage_refused(int stage, const char *name, const char *arch, int cc, char *msg, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* FLASH_INTERNAL_H */
