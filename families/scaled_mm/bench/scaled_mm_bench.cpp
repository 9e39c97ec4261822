// Prints TFLOP/s of cuda.cublaslt and cuda.mx_kernel on the Llama-3-8B projections at M = 8192, each
// as a fraction of a cuBLASLt-backed bf16 GEMM (cublasGemmEx, fp32 compute) timed in the same run,
// and the CPU fp64 reference's GFLOP/s.
//
// Usage: opcts_bench_scaled_mm [M]   (default 8192). Needs a CUDA GPU.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "core/family.hpp"
#include "families/scaled_mm/cuda/scaled_mm_prepared.hpp"
#include "numerics/rng.hpp"

using namespace opcts;

namespace {

constexpr int kWarmup = 3;
constexpr int kIters = 20;

// Mean milliseconds of `launch` over kIters launches after kWarmup, timed with CUDA events.
template <typename F>
double time_ms(F launch) {
  for (int i = 0; i < kWarmup; ++i) launch();
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  cudaEventRecord(t0);
  for (int i = 0; i < kIters; ++i) launch();
  cudaEventRecord(t1);
  cudaEventSynchronize(t1);
  float ms = 0;
  cudaEventElapsedTime(&ms, t0, t1);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return ms / kIters;
}

double bf16_gemm_ms(cublasHandle_t h, int64_t m, int64_t n, int64_t k) {
  // Row-major D[M,N] = A[M,K]·B[K,N] as column-major Dᵀ = Bᵀ·Aᵀ, the layout the FP8 path uses.
  cuda::DeviceBuffer a(m * k * 2), b(k * n * 2), d(m * n * 2);
  cudaMemset(a.get(), 0x3c, a.bytes());  // bf16 ~1.17: finite, non-zero operands
  cudaMemset(b.get(), 0x3c, b.bytes());
  const float alpha = 1, beta = 0;
  return time_ms([&] {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
                 b.get(), CUDA_R_16BF, static_cast<int>(k), a.get(), CUDA_R_16BF, static_cast<int>(k), &beta, d.get(),
                 CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t M = argc > 1 ? std::atoll(argv[1]) : 8192;
  const Registry& reg = builtin_registry();
  const Family& fam = *reg.family("scaled_mm");
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "no CUDA device / cuBLAS\n");
    return 2;
  }
  struct Shape {
    const char* what;
    int64_t n, k;
  };
  const Shape shapes[] = {{"attn out / o_proj", 4096, 4096},
                          {"qkv_proj", 6144, 4096},
                          {"gate/up_proj", 14336, 4096},
                          {"down_proj", 4096, 14336}};
  const char* recipes[] = {"tensorwise", "rowwise", "blockwise_1x128_128x128"};
  std::printf("Llama-3-8B projections, M = %lld, bf16 output; baseline: cublasGemmEx bf16 (fp32 compute)\n",
              static_cast<long long>(M));
  std::printf("%-18s %-24s %12s %12s %9s %12s %9s\n", "shape (NxK)", "recipe", "bf16 TF/s", "cublaslt", "ratio",
              "mx_kernel", "ratio");
  for (const Shape& s : shapes) {
    const double flops = 2.0 * M * s.n * s.k;
    const double base = flops / bf16_gemm_ms(h, M, s.n, s.k) / 1e9;
    for (const char* r : recipes) {
      const std::string id = std::string(r) + "_e4m3fn_e4m3fn_tn_m" + std::to_string(M) + "_n" + std::to_string(s.n) +
                             "_k" + std::to_string(s.k) + "_out_bf16_random";
      const auto p = fam.parse_id(id);
      const TensorMap in = fam.make_inputs(*p, case_seed(fam, *p));
      const auto prepared = prepare_scaled_mm((*p).as<scaled_mm::Problem>(), in);
      double lt = -1, mx = -1;
      try {
        lt = flops / time_ms([&] { launch_scaled_mm(prepared, true, nullptr); }) / 1e9;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "cublaslt %s: %s\n", id.c_str(), e.what());
      }
      mx = flops / time_ms([&] { launch_scaled_mm(prepared, false, nullptr); }) / 1e9;
      std::printf("%5lldx%-12lld %-24s %12.1f %12.1f %9.3f %12.1f %9.3f\n", static_cast<long long>(s.n),
                  static_cast<long long>(s.k), r, base, lt, lt / base, mx, mx / base);
    }
  }
  // The CPU reference: fp64 Eigen + OpenMP over the dequantized operands.
  const auto p = fam.parse_id("tensorwise_e4m3fn_e4m3fn_tn_m128_n4096_k4096_out_bf16_random");
  const TensorMap in = fam.make_inputs(*p, case_seed(fam, *p));
  const auto t0 = std::chrono::steady_clock::now();
  fam.reference(*p, in);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("CPU fp64 reference, M=128 N=4096 K=4096: %.2f s, %.1f GFLOP/s\n", s, 2.0 * 128 * 4096 * 4096 / s / 1e9);
  cublasDestroy(h);
  return 0;
}
