/* Which pipe do the e4m3 conversions of stage 15 use? (docs/15, "What is left")
 *
 * make xu-pipe (sm_90a; prints cycles, writes nothing else). One block of 512 threads per SM, so
 * four warps on each of the SM's four schedulers; every warp issues eight independent operations of
 * the first kind per iteration, with a fresh input each time (an FADD per value) so that none can be
 * hoisted out of the loop. Modes: ex2.approx alone (MUFU.EX2), the e4m3x2 conversion alone (F2FP
 * ... E4M3), both in the ratio stage 15's softmax issues them (an exponential per value, a
 * conversion per two), the bf16x2 conversion and an FFMA for scale. If the conversions shared the
 * MUFU unit, the mixed mode would take the two single modes' cycles added; if they run elsewhere it
 * takes the exponentials' alone. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "flash_internal.h"

template <int kMode>
__global__ void bench(float seed, uint32_t *out, long long *cycles, int iters) {
  float x[8], facc[8];
  uint32_t acc[8];
  for (int i = 0; i < 8; ++i) x[i] = seed * (threadIdx.x + i), facc[i] = 0.f, acc[i] = 0;
  __syncthreads();
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[i] += 1e-7f;  // a new input every iteration: nothing can be hoisted
      if (kMode == 0 || kMode == 2) {
        float y;
        asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x[i]));
        facc[i] += y;
      }
      if (kMode == 1 || (kMode == 2 && (i % 2 == 0))) {
        unsigned short e;
        asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(e) : "f"(x[i]), "f"(x[(i + 1) % 8]));
        acc[i] ^= e;
      }
      if (kMode == 3) {
        uint32_t e;
        asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(e) : "f"(x[i]), "f"(x[(i + 1) % 8]));
        acc[i] ^= e;
      }
      if (kMode == 4) {  // the FMA pipe alone, for scale: one FFMA per op
        facc[i] = fmaf(x[i], 1.0001f, facc[i]);
      }
    }
  }
  __syncthreads();
  long long t1 = clock64();
  uint32_t r = 0;
  for (int i = 0; i < 8; ++i) r += acc[i] + __float_as_uint(facc[i]);
  out[blockIdx.x * blockDim.x + threadIdx.x] = r;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}
static void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "xu_pipe: %s: %s (it needs an sm_90 GPU)\n", what, cudaGetErrorString(e));
    exit(1);
  }
}
int main() {
  // No driver, no GPU or not a Hopper one: said first in plain words, as ./run says it (CUDA's own
  // text for a machine without a driver blames the driver's version), with exit 2, the tools'
  // status for a missing GPU.
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    char why[384] = "the driver found no NVIDIA GPU";
    if (e != cudaSuccess) flash_device_error(e, why, sizeof why);
    fprintf(stderr, "xu_pipe: no CUDA device: %s\n", why);
    return 2;
  }
  int device = 0, major = 0, minor = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
  char need[96];
  if (!flash_arch_runs_on("sm_90a", 10 * major + minor, need, sizeof need)) {
    fprintf(stderr, "xu_pipe: it needs %s, this one is sm_%d%d\n", need, major, minor);
    return 2;
  }
  // One block of 512 threads per SM: 16 warps, 4 on each of its 4 schedulers (SMSPs).
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  uint32_t *out;
  long long *cyc;
  check(cudaMalloc(&out, (size_t)sms * 512 * 4), "cudaMalloc");
  check(cudaMalloc(&cyc, (size_t)sms * 8), "cudaMalloc");
  const int iters = 4096;
  const char *names[] = {"ex2 x8", "e4m3x2 cvt x8", "ex2 x8 + e4m3x2 cvt x4", "bf16x2 cvt x8", "ffma x8"};
  void (*kernels[])(float, uint32_t *, long long *, int) = {bench<0>, bench<1>, bench<2>, bench<3>, bench<4>};
  for (int mode = 0; mode < 5; ++mode) {
    for (int rep = 0; rep < 2; ++rep) kernels[mode]<<<sms, 512>>>(1e-3f, out, cyc, iters);  // the second one counts
    check(cudaGetLastError(), "launch");
    long long c;
    check(cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
    // 4 warps per SMSP, 8 ops of the first kind per warp-iteration: 32 per SMSP per iteration.
    printf("%-26s %10lld cycles, %.2f SMSP cycles per warp instruction of the first kind\n", names[mode], c, (double)c / (iters * 32.0));
  }
  printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
}
