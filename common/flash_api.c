/*
 * flash_api.c: the dispatcher behind flash.h. Validates a problem against the contract before any
 * device work, checks that the GPU can run the stage, resolves the default softmax scale, and
 * calls the stage's entry point.
 *
 * The stages are not listed here: the Makefile writes build/gen/stages.h from the kernelNN_name
 * directories, one FLASH_STAGE(number, name, arch, fp8) line each. Their entry points are weak
 * references, so that build/kernel05 can link stage 05 alone while build/libflash.so links them
 * all: a stage that is not linked in reads as NULL.
 */
#include "flash_internal.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "stages.h"

#define FLASH_STAGE(nn, name, arch, fp8)                                                            \
    int flash_forward_kernel##nn(const flash_problem *p, cudaStream_t stream) __attribute__((weak)); \
    int flash_forward_fp8_kernel##nn(const flash_problem *p, const flash_descale *d, cudaStream_t stream) __attribute__((weak));
FLASH_STAGE_LIST
#undef FLASH_STAGE

typedef struct {
    int number;               /* 5 */
    const char *name;         /* "kernel05_swizzle" */
    const char *arch;         /* "sm_80" */
    int fp8;                  /* takes e4m3 inputs */
    flash_stage_fn fn;        /* NULL when not linked in */
    flash_stage_fp8_fn fp8_fn;  /* NULL when not linked in or without fp8 */
} stage_entry;

#define FLASH_STAGE(nn, name, arch, fp8) {1##nn - 100, name, arch, fp8, flash_forward_kernel##nn, flash_forward_fp8_kernel##nn},
static const stage_entry stages[] = {FLASH_STAGE_LIST};
#undef FLASH_STAGE
enum { N_STAGES = sizeof stages / sizeof stages[0] };

/* The entry of stage `stage`, or NULL. Stages are numbered 1..N without gaps (the Makefile refuses
 * a tree with a gap), so the number is the index plus one. */
static const stage_entry *stage_at(int stage) {
    return (stage >= 1 && stage <= N_STAGES) ? &stages[stage - 1] : NULL;
}

static _Thread_local int last_code;
static _Thread_local char last_msg[512];  /* room for a stage's name and flash_device_error's text */

int flash_set_error(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    last_code = code;
    return code;
}

const char *flash_strerror(int code) {
    if (code != FLASH_OK && code == last_code && last_msg[0]) return last_msg;
    switch (code) {
    case FLASH_OK: return "success";
    case FLASH_E_INVALID: return "invalid argument";
    case FLASH_E_UNSUPPORTED: return "unsupported problem";
    case FLASH_E_CUDA: return "CUDA error";
    default: return "unknown error code";
    }
}

int flash_stage_count(void) { return N_STAGES; }

const char *flash_stage_name(int stage) { return stage_at(stage) ? stage_at(stage)->name : NULL; }

const char *flash_stage_arch(int stage) { return stage_at(stage) ? stage_at(stage)->arch : NULL; }

int flash_stage_available(int stage) { return stage_at(stage) && stage_at(stage)->fn; }

int flash_stage_takes_fp8(int stage) { return stage_at(stage) && stage_at(stage)->fp8; }

int flash_first_fp8_stage(void) {
    for (int i = 0; i < N_STAGES; i++)
        if (stages[i].fp8) return stages[i].number;
    return 0;
}

int flash_stage_supports_dtype(int stage, flash_dtype dtype) {
    const stage_entry *e = stage_at(stage);
    if (!e) return flash_set_error(FLASH_E_INVALID, "invalid stage = %d (must be 1..%d)", stage, N_STAGES);
    if (dtype != FLASH_E4M3 || e->fp8) return FLASH_OK;
    const int first = flash_first_fp8_stage();
    if (first)
        return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported dtype e4m3 for stage %02d (%s): fp8 inputs need stage %02d (%s) or later",
                               stage, e->name, first, stage_at(first)->name);
    return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported dtype e4m3 for stage %02d (%s): no stage takes fp8 inputs", stage, e->name);
}

/* The compute capability of each device (major * 10 + minor), 0 until asked. Atomic, because the
 * library may be called from several host threads: a thread that reads 0 asks the driver itself
 * (the answer is the same for everybody) and publishes it. */
#define MAX_DEVICES 64
static atomic_int device_cc[MAX_DEVICES];

void flash_device_error(cudaError_t err, char *msg, size_t n) {
    /* cudaDriverGetVersion reports 0 when no driver (libcuda) can be loaded, else the CUDA version
     * the driver supports, which is compared with the runtime this binary was built with. */
    int driver = 0, runtime = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
    char dv[24], rv[24];  /* "12.4" from CUDA's 12040 */
    snprintf(dv, sizeof dv, "%d.%d", driver / 1000, (driver % 1000) / 10);
    snprintf(rv, sizeof rv, "%d.%d", runtime / 1000, (runtime % 1000) / 10);
    char what[192];
    if (err == cudaErrorStubLibrary)
        /* The toolkit's stub libcuda.so (lib64/stubs, for linking) found first on the library path. */
        snprintf(what, sizeof what, "no NVIDIA driver was found on this machine, only the CUDA toolkit's stub "
                 "libcuda.so (no GPU, or its driver is not installed)");
    else if (driver == 0)
        snprintf(what, sizeof what, "no NVIDIA driver was found on this machine (no GPU, or its driver is not installed)");
    else if (err == cudaErrorInsufficientDriver && driver < runtime)
        snprintf(what, sizeof what,
                 "the installed NVIDIA driver supports CUDA %s, older than the CUDA %s runtime this was built with: "
                 "update the driver", dv, rv);
    else if (err == cudaErrorNoDevice)
        snprintf(what, sizeof what, "the driver found no NVIDIA GPU (driver for CUDA %s)", dv);
    else
        snprintf(what, sizeof what, "the NVIDIA GPU could not be used (driver for CUDA %s, CUDA %s runtime)", dv, rv);
    snprintf(msg, n, "%s; CUDA says: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

int flash_stage_supported(int stage) {
    const stage_entry *e = stage_at(stage);
    if (!e || !e->fn) return FLASH_OK;
    int device = 0, cc = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess && device < MAX_DEVICES) cc = atomic_load_explicit(&device_cc[device], memory_order_relaxed);
    if (err == cudaSuccess && cc == 0) {
        int major = 0, minor = 0;
        err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
        if (err == cudaSuccess) err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
        cc = 10 * major + minor;
        if (err == cudaSuccess && device < MAX_DEVICES) atomic_store_explicit(&device_cc[device], cc, memory_order_relaxed);
    }
    if (err != cudaSuccess) {
        char why[384];
        flash_device_error(err, why, sizeof why);
        return flash_set_error(FLASH_E_CUDA, "stage %02d (%s): cannot query the GPU: %s", stage, e->name, why);
    }
    char msg[192];
    if (!flash_stage_refused(stage, e->name, e->arch, cc, msg, sizeof msg)) return FLASH_OK;
    return flash_set_error(FLASH_E_UNSUPPORTED, "%s", msg);
}

int flash_launch_status(const char *stage) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) return FLASH_OK;
    return flash_set_error(FLASH_E_CUDA, "%s: kernel launch failed: %s (%s)", stage,
                           cudaGetErrorString(err), cudaGetErrorName(err));
}

int flash_validate(const flash_problem *p, int check_pointers) {
    if (!p) return flash_set_error(FLASH_E_INVALID, "invalid problem: NULL pointer");
    if (p->batch < 1) return flash_set_error(FLASH_E_INVALID, "invalid batch = %d (must be >= 1)", p->batch);
    if (p->seqlen_q < 1)
        return flash_set_error(FLASH_E_INVALID, "invalid seqlen_q = %d (must be >= 1)", p->seqlen_q);
    if (p->seqlen_k < 1)
        return flash_set_error(FLASH_E_INVALID, "invalid seqlen_k = %d (must be >= 1)", p->seqlen_k);
    if (p->heads_q < 1) return flash_set_error(FLASH_E_INVALID, "invalid heads_q = %d (must be >= 1)", p->heads_q);
    if (p->heads_kv < 1)
        return flash_set_error(FLASH_E_INVALID, "invalid heads_kv = %d (must be >= 1)", p->heads_kv);
    if (p->heads_q % p->heads_kv != 0)
        return flash_set_error(FLASH_E_INVALID, "invalid heads_kv = %d: it must divide heads_q = %d",
                               p->heads_kv, p->heads_q);
    if (p->head_dim != 64 && p->head_dim != 128)
        return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported head_dim = %d (supported: 64, 128)", p->head_dim);
    if (p->dtype != FLASH_BF16 && p->dtype != FLASH_FP16 && p->dtype != FLASH_E4M3)
        return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported dtype = %d (supported: FLASH_BF16, FLASH_FP16, FLASH_E4M3)",
                               (int)p->dtype);
    if (p->causal != 0 && p->causal != 1)
        return flash_set_error(FLASH_E_INVALID, "invalid causal = %d (must be 0 or 1)", p->causal);
    if (!isfinite(p->softmax_scale) || p->softmax_scale < 0.0f)
        return flash_set_error(FLASH_E_INVALID, "invalid softmax_scale = %g (must be finite and > 0, or 0 for 1/sqrt(head_dim))",
                               (double)p->softmax_scale);
    /* Positive but below FLT_MIN: the kernels flush subnormals to zero (e.g. ex2.approx.ftz in
     * ptx.cuh), so a subnormal scale would silently not be the value given. */
    if (p->softmax_scale > 0.0f && p->softmax_scale < FLT_MIN)
        return flash_set_error(FLASH_E_INVALID,
                               "invalid softmax_scale = %g: subnormal (below the smallest normal float, about "
                               "1.2e-38; the kernels flush it to zero)",
                               (double)p->softmax_scale);
    /* The grid is (q tiles, heads_q, batch): gridDim.y and .z are limited to 65535. */
    if (p->heads_q > 65535)
        return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported heads_q = %d (at most 65535)", p->heads_q);
    if (p->batch > 65535)
        return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported batch = %d (at most 65535)", p->batch);
    /* Element offsets are 64-bit inside the kernels; the element count must still fit in int64. */
    if ((double)p->batch * p->seqlen_q * p->heads_q * p->head_dim > (double)INT64_MAX / 4 ||
        (double)p->batch * p->seqlen_k * p->heads_kv * p->head_dim > (double)INT64_MAX / 4)
        return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported size: the tensors exceed 64-bit offsets");
    if (check_pointers) {
        if (!p->q) return flash_set_error(FLASH_E_INVALID, "invalid q = NULL");
        if (!p->k) return flash_set_error(FLASH_E_INVALID, "invalid k = NULL");
        if (!p->v) return flash_set_error(FLASH_E_INVALID, "invalid v = NULL");
        if (!p->o) return flash_set_error(FLASH_E_INVALID, "invalid o = NULL");
        /* The stages read and write 16-byte vectors along head_dim. */
        if (((uintptr_t)p->q | (uintptr_t)p->k | (uintptr_t)p->v | (uintptr_t)p->o) % 16 != 0)
            return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported alignment: q, k, v and o must be 16-byte aligned");
        if ((uintptr_t)p->lse % 4 != 0)
            return flash_set_error(FLASH_E_INVALID, "invalid lse: not 4-byte aligned");
    }
    return FLASH_OK;
}

/* One descale factor: finite, positive and normal. Subnormal ones are refused for the reason
 * flash_validate refuses a subnormal softmax_scale: the kernels flush subnormals to zero. */
static int check_descale(float d, const char *name) {
    if (!isfinite(d) || d < FLT_MIN)
        return flash_set_error(FLASH_E_INVALID, "invalid descale %s = %g (must be finite, positive and at least FLT_MIN, about 1.2e-38)",
                               name, (double)d);
    return FLASH_OK;
}

/* The common path of flash_forward and flash_forward_fp8: descale is NULL for 16-bit inputs. */
static int forward(int stage, const flash_problem *p, const flash_descale *descale, cudaStream_t stream) {
    const stage_entry *e = stage_at(stage);
    if (!e) return flash_set_error(FLASH_E_INVALID, "invalid stage = %d (must be 1..%d)", stage, N_STAGES);
    if (!e->fn)
        return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported stage = %d (%s is not linked into this binary)",
                               stage, e->name);
    int rc = flash_validate(p, 1);
    if (rc) return rc;
    rc = flash_stage_supports_dtype(stage, p->dtype);
    if (rc) return rc;
    rc = flash_stage_supported(stage);
    if (rc) return rc;
    flash_problem q = *p;
    if (q.softmax_scale == 0.0f) q.softmax_scale = 1.0f / sqrtf((float)q.head_dim);
    if (p->dtype != FLASH_E4M3) return e->fn(&q, stream);
    if (!e->fp8_fn)
        return flash_set_error(FLASH_E_UNSUPPORTED, "unsupported stage = %d (%s was built without its fp8 entry point)", stage, e->name);
    return e->fp8_fn(&q, descale, stream);
}

int flash_forward(int stage, const flash_problem *p, cudaStream_t stream) {
    static const flash_descale ones = {1.0f, 1.0f, 1.0f};
    return forward(stage, p, p && p->dtype == FLASH_E4M3 ? &ones : NULL, stream);
}

int flash_forward_fp8(int stage, const flash_problem *p, const flash_descale *descale, cudaStream_t stream) {
    if (p && p->dtype != FLASH_E4M3)
        return flash_set_error(FLASH_E_INVALID, "invalid dtype = %d for flash_forward_fp8 (it takes FLASH_E4M3 inputs; "
                               "bf16 and fp16 go through flash_forward)", (int)p->dtype);
    if (!descale) return flash_set_error(FLASH_E_INVALID, "invalid descale = NULL");
    int rc = check_descale(descale->q, "q");
    if (!rc) rc = check_descale(descale->k, "k");
    if (!rc) rc = check_descale(descale->v, "v");
    if (rc) return rc;
    return forward(stage, p, descale, stream);
}
