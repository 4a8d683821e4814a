/*
 * flash_tma.c: see flash_tma.h.
 */
#include "flash_tma.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

#include "flash_internal.h"

/* The typedef is cuTensorMapEncodeTiled's signature in cuda.h (stable since CUDA 12.0). */
typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The driver function, looked up once per process. The lookup runs under pthread_once: the first
 * calls of a process may come from several host threads at once (tests/test_api.py --threads does
 * exactly that), and the runtime's entry-point query is not documented as safe to race with itself.
 * It asks for the function as of CUDA 12.0, the version whose signature is above (the runtime's
 * cudaGetDriverEntryPoint without a version is deprecated since CUDA 12.5, and the versioned one
 * does not exist before it). */
static pthread_once_t lookup_once = PTHREAD_ONCE_INIT;
static encode_tiled_fn encode_tiled;
static cudaError_t lookup_err;
static enum cudaDriverEntryPointQueryResult lookup_found;

static void lookup_encode_tiled(void) {
    void *ptr = NULL;
    lookup_found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    lookup_err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &lookup_found);
#else
    /* Toolkits before 12.5 have only the unversioned lookup, which returns the same function. */
    lookup_err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &ptr, cudaEnableDefault, &lookup_found);
#endif
    if (lookup_err == cudaSuccess && lookup_found == cudaDriverEntryPointSuccess) encode_tiled = (encode_tiled_fn)ptr;
}

static encode_tiled_fn get_encode_tiled(const char *stage) {
    pthread_once(&lookup_once, lookup_encode_tiled);
    if (!encode_tiled)
        flash_set_error(FLASH_E_CUDA,
                        "%s: the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or newer driver needed): %s, query result %d",
                        stage, cudaGetErrorString(lookup_err), (int)lookup_found);
    return encode_tiled;
}

/* cuTensorMapEncodeTiled is a driver call, and answers CUDA_ERROR_INVALID_CONTEXT (201) on a host
 * thread that has no current context. The runtime makes the device's primary context current on a
 * thread only at its first call there that needs one, and a stage's first runtime calls on a new
 * thread (cudaGetDevice, attribute queries) need none: tests/test_api.py --threads met the error
 * on one of eight fresh threads. cudaSetDevice makes the primary context current (CUDA 12.0 on),
 * once per thread. */
static _Thread_local int context_current;

static int make_context_current(const char *stage) {
    if (context_current) return 0;
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaSetDevice(device);
    if (err != cudaSuccess)
        return flash_set_error(FLASH_E_CUDA, "%s: making the device's context current: %s", stage, cudaGetErrorString(err));
    context_current = 1;
    return 0;
}

int flash_tma_map(CUtensorMap *map, const void *base, flash_dtype dtype, int batch, int seqlen, int heads, int head_dim,
                  int box_rows, const char *stage, const char *what) {
    const encode_tiled_fn encode = get_encode_tiled(stage);
    if (!encode) return FLASH_E_CUDA;
    if (make_context_current(stage)) return FLASH_E_CUDA;
    const cuuint64_t elem = dtype == FLASH_E4M3 ? 1 : 2;
    /* Sizes innermost first, and the byte strides of dimensions 1.. (dimension 0 is contiguous). */
    const cuuint64_t dims[4] = {(cuuint64_t)head_dim, (cuuint64_t)heads, (cuuint64_t)seqlen, (cuuint64_t)batch};
    const cuuint64_t strides[3] = {(cuuint64_t)head_dim * elem, (cuuint64_t)heads * head_dim * elem,
                                   (cuuint64_t)seqlen * heads * head_dim * elem};
    /* A box row is 128 bytes where the head has them (64 16-bit elements, or a whole e4m3 head of
     * 128), else the whole head (an e4m3 head of 64: 64 bytes, in the 64-byte swizzle). */
    const cuuint64_t row_bytes = (cuuint64_t)head_dim * elem < 128 ? (cuuint64_t)head_dim * elem : 128;
    const cuuint32_t box[4] = {(cuuint32_t)(row_bytes / elem), 1, (cuuint32_t)box_rows, 1};
    const cuuint32_t unit_steps[4] = {1, 1, 1, 1};
    const CUtensorMapDataType type = dtype == FLASH_E4M3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                     : dtype == FLASH_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    const CUresult r = encode(map, type, 4, (void *)base, dims, strides, box, unit_steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              row_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return flash_set_error(FLASH_E_CUDA,
                               "%s: cuTensorMapEncodeTiled refused the map of %s (CUresult %d; batch %d, seqlen %d, heads %d, "
                               "head_dim %d, box rows %d)",
                               stage, what, (int)r, batch, seqlen, heads, head_dim, box_rows);
    return 0;
}
