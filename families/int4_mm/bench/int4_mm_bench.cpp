// Prints cuda.int4_gemv's effective bandwidth at M = 1 on the Llama-3-8B projections as a fraction of a
// device-to-device copy, and cuda.int4_mm's TFLOP/s at M = 2048 against a cuBLAS bf16 GEMM of the same dequantized
// weights, both measured in the same run.
//
// Effective bandwidth = the packed weight's bytes plus its scales and zero points, divided by
// the kernel's time; the copy's bandwidth counts what it reads and writes (2 × its size), so
// the ratio compares DRAM traffic with DRAM traffic. L2 (50 MiB on H200) would hold the smaller
// weights between launches, so every timed gemv launch follows a read of a 256 MiB scratch
// buffer (cuBLAS's isamax: it leaves L2 full of clean lines, as the previous layer's weights
// would; a memset would leave it dirty and bill the gemv for writing it back) and is timed on
// its own, while the flush still keeps the GPU busy, so the host's launch time is hidden as it
// is in a model's stream. Target (issue 12): >= 0.6.
//
// Each gemv row prints the default split (what the impls run; us, GB/s, fraction of the copy)
// and the fraction of the copy of the other settings of cuda::Int4GemvTuning, measured in the
// same run: "generic", the generic kernel where the default runs the fast tinygemm path
// (innerKTiles 8; the same kernel elsewhere), so one run shows both, and its unbatched variant
// (one item in flight per lane); for the fast path (tinygemm, innerKTiles 8; elsewhere these
// columns repeat the default) "fast fma" (fp32 FMA instead of tensor cores), "8-warp" (the
// mma kernel in blocks of 8 warps, wk 1, 2, 4 or 8, as before the planner's blocks of any
// size), "ring 3" and "ring 4" (a warp's ring of items in shared memory 3 or 4 deep instead of
// 2: 2 or 3 items in flight), "wk 4" (4 warps per pair of n-tiles, whatever the grid's fill);
// then the grid's fill target at 12 warps per SM instead of 24 (split-K in the generic kernel;
// the blocks, then split-K, in the fast one); then two probes of the fast path that compute no
// product (cuda::Int4GemvProbe): "loads" streams the weight and scales through the
// ring and multiplies nothing, "math" multiplies what the first loads brought and loads nothing
// more — what the memory side and the arithmetic reach alone. The "chained" column times the
// default back to back as a decode loop runs it: kChain launches, each on its own copy of the
// weight (enough copies to exceed L2 twice over, so none is read from L2), between two events,
// so a launch's fixed cost overlaps the previous one's tail. "copy same" is a device-to-device
// copy of the packed weight alone, timed as the gemv is (after the flush), as a fraction of the
// big copy: what the size alone leaves a memory-bound launch. "read same" is a kernel that only
// reads the packed weight (bench/read_bandwidth.cu: 16-byte streaming loads, four in flight per
// thread, the best of 2, 4, 8 and 16 blocks of 256 threads per SM), timed the same way, its
// bytes over its time as a fraction of the big copy: the ceiling of any kernel that must read
// the weight once in one launch, which the gemv's figure is held against. The tunings sum in other orders,
// so their outputs may differ from the default's in the last bits; the last column prints the
// largest such difference relative to max |y| over the tunings that compute a product (the
// suite's cases judge the default; a larger figure means a tuning computes something else).
//
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "bench/read_bandwidth.hpp"
#include "core/family.hpp"
#include "families/int4_mm/cuda/int4_mm_prepared.hpp"
#include "families/int4_mm/int4_pack.hpp"

using namespace opcts;

namespace {

constexpr int kWarmup = 3;
constexpr int kIters = 20;
constexpr size_t kFlushBytes = size_t{256} << 20;
constexpr int kChain = 64;
constexpr size_t kL2Bytes = size_t{50} << 20;  // H200; twice this many bytes of weight copies are cycled

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    cudaEventCreate(&a);
    cudaEventCreate(&b);
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  // Milliseconds of one call of `f` between two events.
  template <class F>
  float once(F f) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms;
  }
};

// Reads the flush buffer (one isamax over 256 MiB as fp32) on its own handle, whose result
// stays on the device, so nothing waits for it.
struct Flush {
  cublasHandle_t h = nullptr;
  float* buf = nullptr;
  int* result = nullptr;
  Flush() {
    cublasCreate(&h);
    cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE);
    cudaMalloc(reinterpret_cast<void**>(&buf), kFlushBytes);
    cudaMalloc(reinterpret_cast<void**>(&result), sizeof(int));
    cudaMemset(buf, 0, kFlushBytes);
  }
  ~Flush() {
    cudaFree(buf);
    cudaFree(result);
    cublasDestroy(h);
  }
  void operator()() const { cublasIsamax(h, static_cast<int>(kFlushBytes / sizeof(float)), buf, 1, result); }
};

// Mean milliseconds of `f` over kIters calls after kWarmup; with `flush`, L2 is overwritten
// before each call and only the call is timed.
template <class F>
double mean_ms(F f, const Flush* flush) {
  Timer t;
  for (int i = 0; i < kWarmup; ++i) f();
  double total = 0;
  for (int i = 0; i < kIters; ++i) {
    if (flush) (*flush)();
    total += t.once(f);
  }
  return total / kIters;
}

// Ŵ = RN_bf16((q − 8)·scale + zero) of a tinygemm problem, [N, K] row-major bf16 bits.
std::vector<uint16_t> dequantized_tinygemm(const int4_mm::Problem& p, const TensorMap& in) {
  const int4::Codes q = int4::unpack_tinygemm(in.at("weight"), p.n, p.k, p.inner_k_tiles);
  const HostTensor& sz = in.at("scale_and_zero");
  std::vector<uint16_t> w(static_cast<size_t>(p.n * p.k));
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.k; ++k) {
      const int64_t g = k / p.group;
      const double v =
          (q[static_cast<size_t>(n * p.k + k)] - 8) * sz.get(2 * (g * p.n + n)) + sz.get(2 * (g * p.n + n) + 1);
      w[static_cast<size_t>(n * p.k + k)] = static_cast<uint16_t>(encode(DType::bf16, v));
    }
  return w;
}

struct Shape {
  const char* what;
  int64_t n, k;
};
constexpr Shape kShapes[] = {
    {"o_proj", 4096, 4096}, {"qkv_proj", 6144, 4096}, {"gate/up_proj", 14336, 4096}, {"down_proj", 4096, 14336}};

}  // namespace

int main(int argc, char** argv) {
  const int64_t M = argc > 1 ? std::atoll(argv[1]) : 2048;
  const Family& fam = *builtin_registry().family("int4_mm");
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "no CUDA device / cuBLAS\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as soon as it is measured
  const Flush flush;

  // Device-to-device copy of 512 MiB (beyond L2): the bandwidth reference.
  const size_t copy_bytes = size_t{512} << 20;
  void *src = nullptr, *dst = nullptr;
  cudaMalloc(&src, copy_bytes);
  cudaMalloc(&dst, copy_bytes);
  cudaMemset(src, 1, copy_bytes);
  const double copy_ms = mean_ms([&] { cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); }, nullptr);
  const double copy_gbs = 2.0 * static_cast<double>(copy_bytes) / copy_ms / 1e6;
  cudaFree(src);
  cudaFree(dst);
  std::printf("device-to-device copy (512 MiB, read + write): %.0f GB/s\n\n", copy_gbs);

  // Input generation in the code domain (issue 12: a 14336 x 4096 weight in milliseconds): the
  // host's make_inputs of each shape's tinygemm problem at M = 1, timed once.
  std::printf("inputs (random codes, scales and zeros; make_inputs on the host, OMP_NUM_THREADS as set)\n");
  for (const Shape& s : kShapes) {
    const int4_mm::Problem ip{.m = 1, .n = s.n, .k = s.k};
    const auto t0 = std::chrono::steady_clock::now();
    const TensorMap in = fam.make_inputs(ip, case_seed(fam, ip));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-14s %6lldx%-6lld %8.1f ms for %lld codes (%zu bytes packed)\n", s.what, static_cast<long long>(s.n),
                static_cast<long long>(s.k), ms, static_cast<long long>(s.n * s.k), in.at("weight").nbytes());
  }
  std::printf("\n");

  // The tunings compared: the default first (what the impls run).
  const struct {
    const char* name;
    cuda::Int4GemvTuning t;
  } tunings[] = {{"default", {}},
                 {"generic", {.fast = false}},
                 {"gen nobat", {.batch = false, .fast = false}},
                 {"fast fma", {.mma = false}},
                 {"8-warp", {.fixed_blocks = true}},
                 {"ring 3", {.stages = 3}},
                 {"ring 4", {.stages = 4}},
                 {"wk 4", {.tiny_wk = 4}},
                 {"fill 12", {.warps_per_sm = 12}},
                 {"loads", {.probe = cuda::Int4GemvProbe::loads_only}},
                 {"math", {.probe = cuda::Int4GemvProbe::math_only}}};
  std::printf("cuda.int4_gemv, M = 1, Llama-3-8B projections (weights, scales and zeros per second)\n");
  std::printf("%-14s %-13s %-44s %8s %8s %8s", "shape", "NxK", "problem", "us", "GB/s", "of copy");
  for (size_t v = 1; v < std::size(tunings); ++v) std::printf(" %9s", tunings[v].name);
  std::printf(" %9s %9s %9s %10s\n", "chained", "copy same", "read same", "max rel Δ");
  int sm_count = 0;
  cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0);
  unsigned* sink = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&sink),
             static_cast<size_t>(bench::read_all_blocks(sm_count, 16)) * sizeof(unsigned));
  for (const Shape& s : kShapes)
    for (const int4_mm::Format f : int4_mm::all_formats()) {
      // The dtypes the checkpoints ship in: tinygemm bf16, AWQ / GPTQ / Q4_0 fp16.
      const int4_mm::Problem ip{.format = f,
                                .dtype = f == int4_mm::Format::tinygemm || f == int4_mm::Format::tinygemm_unpacked
                                             ? DType::bf16
                                             : DType::fp16,
                                .m = 1,
                                .n = s.n,
                                .k = s.k,
                                .group = f == int4_mm::Format::q4_0 ? 32 : 128};
      const std::string id = fam.problem_id(ip);
      const TensorMap in = fam.make_inputs(ip, case_seed(fam, ip));
      PreparedInt4Mm prep = prepare_int4_mm(ip, in, true, cuda::Int4Plant::none);
      // One workspace large enough for every tuning's split.
      int64_t ws_bytes = 0;
      for (const auto& v : tunings) ws_bytes = std::max(ws_bytes, cuda::int4_gemv_workspace_bytes(prep.params, v.t));
      cuda::DeviceBuffer ws(static_cast<size_t>(ws_bytes));
      prep.params.workspace = ws.get();
      prep.params.workspace_bytes = ws_bytes;
      double bytes = static_cast<double>(in.at("weight").nbytes());
      for (const char* t : {"scale_and_zero", "scales", "qzeros"})
        if (in.count(t)) bytes += static_cast<double>(in.at(t).nbytes());
      std::vector<uint16_t> first(static_cast<size_t>(s.n)), y(first.size());
      double most = 0, apart = 0;
      for (size_t v = 0; v < std::size(tunings); ++v) {
        const double ms = mean_ms([&] { cuda::int4_gemv(prep.params, nullptr, tunings[v].t); }, &flush);
        const double gbs = bytes / ms / 1e6;
        cudaMemcpy(y.data(), prep.y.get(), y.size() * 2, cudaMemcpyDeviceToHost);
        if (v == 0) {
          first = y;
          for (uint16_t b : y) most = std::max(most, std::abs(decode(ip.dtype, b)));
          std::printf("%-14s %5lldx%-7lld %-44s %8.1f %8.0f %8.3f", s.what, static_cast<long long>(s.n),
                      static_cast<long long>(s.k), id.c_str(), ms * 1e3, gbs, gbs / copy_gbs);
        } else {
          if (tunings[v].t.probe == cuda::Int4GemvProbe::none)  // a probe's y is not a product
            for (size_t i = 0; i < y.size(); ++i)
              apart = std::max(apart, std::abs(decode(ip.dtype, y[i]) - decode(ip.dtype, first[i])));
          std::printf(" %9.3f", gbs / copy_gbs);
        }
      }
      // Chained: copies of the weight, its scales and zero points, the default run on each in turn.
      std::vector<cuda::DeviceBuffer> copies;
      const auto copy_of = [&](const cuda::DeviceBuffer& b) {
        copies.emplace_back(b.bytes());
        cudaMemcpy(copies.back().get(), b.get(), b.bytes(), cudaMemcpyDeviceToDevice);
        return copies.back().get();
      };
      std::vector<cuda::Int4MmParams> chain;
      for (double total = 0; total < 2.0 * kL2Bytes; total += bytes) {
        cuda::Int4MmParams c = prep.params;
        c.weight = copy_of(prep.weight);
        if (prep.scales) c.scales = copy_of(*prep.scales);
        if (prep.zeros) c.zeros = copy_of(*prep.zeros);
        chain.push_back(c);
      }
      const double chained_ms = mean_ms(
                                    [&] {
                                      for (int i = 0; i < kChain; ++i)
                                        cuda::int4_gemv(chain[i % chain.size()], nullptr);
                                    },
                                    &flush) /
                                kChain;
      // A device-to-device copy of the packed weight, timed as the gemv is: what the size alone
      // leaves a memory-bound launch of the big copy's bandwidth.
      const size_t wbytes = prep.weight.bytes();
      cuda::DeviceBuffer same(wbytes);
      const double same_ms =
          mean_ms([&] { cudaMemcpyAsync(same.get(), prep.weight.get(), wbytes, cudaMemcpyDeviceToDevice); }, &flush);
      double read_ms = 0;
      for (int per_sm : {2, 4, 8, 16}) {
        const double ms =
            mean_ms([&] { bench::read_all(prep.weight.get(), wbytes, sink, sm_count, per_sm, nullptr); }, &flush);
        read_ms = read_ms == 0 ? ms : std::min(read_ms, ms);
      }
      std::printf(" %9.3f %9.3f %9.3f %10.2g\n", bytes / chained_ms / 1e6 / copy_gbs,
                  2.0 * static_cast<double>(wbytes) / same_ms / 1e6 / copy_gbs,
                  static_cast<double>(wbytes) / read_ms / 1e6 / copy_gbs, most > 0 ? apart / most : apart);
    }

  std::printf(
      "\ncuda.int4_mm, M = %lld (tinygemm bf16 g128) against cublasGemmEx bf16 (fp32 compute) of the dequantized "
      "weight\n",
      static_cast<long long>(M));
  std::printf("%-14s %-13s %12s %12s %9s\n", "shape", "NxK", "int4_mm TF/s", "cuBLAS TF/s", "ratio");
  for (const Shape& s : kShapes) {
    const int4_mm::Problem ip{.m = M, .n = s.n, .k = s.k};  // tinygemm, bf16, g 128, innerKTiles 8
    const TensorMap in = fam.make_inputs(ip, case_seed(fam, ip));
    const PreparedInt4Mm prep = prepare_int4_mm(ip, in, false, cuda::Int4Plant::none);
    const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(s.n) * static_cast<double>(s.k);
    const double mm = flops / mean_ms([&] { launch_int4_mm(prep, false, nullptr); }, nullptr) / 1e9;
    const std::vector<uint16_t> w = dequantized_tinygemm(ip, in);
    void *wd = nullptr, *yd = nullptr;
    cudaMalloc(&wd, w.size() * 2);
    cudaMalloc(&yd, static_cast<size_t>(M * s.n * 2));
    cudaMemcpy(wd, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
    const float alpha = 1, beta = 0;
    // Row-major y[M, N] = x[M, K]·Ŵᵀ, Ŵ [N, K] row-major: column-major yᵀ = Ŵ·xᵀ.
    const double lt = flops /
                      mean_ms(
                          [&] {
                            cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.n), static_cast<int>(M),
                                         static_cast<int>(s.k), &alpha, wd, CUDA_R_16BF, static_cast<int>(s.k),
                                         prep.params.x, CUDA_R_16BF, static_cast<int>(s.k), &beta, yd, CUDA_R_16BF,
                                         static_cast<int>(s.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                          },
                          nullptr) /
                      1e9;
    cudaFree(wd);
    cudaFree(yd);
    std::printf("%-14s %5lldx%-7lld %12.1f %12.1f %9.3f\n", s.what, static_cast<long long>(s.n),
                static_cast<long long>(s.k), mm, lt, mm / lt);
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
  cudaFree(sink);
  cublasDestroy(h);
  return e == cudaSuccess ? 0 : 1;
}
