// Prints the effective bandwidth of scatter_add's three CUDA kernels (cuda.atomic, cuda.warp_aggregated, cuda.sorted)
// for uniform indices, every index equal (in a tensor and in a lone element), and the MI300 reproducer's shape, as a
// fraction of a device-to-device copy measured in the same run (issue 13).
//
// Effective bandwidth = the bytes a scatter must move at least (self read, out written, src and
// index read once each) divided by the kernel's time: contention shows as time, not as bytes.
// The copy's bandwidth counts what it reads and writes (2 × its size), so the ratio compares
// DRAM traffic with DRAM traffic. Inputs are the family's own (make_inputs of the problem the
// row prints), so a bench row is a case the suite checks. Each launch is timed on its own after
// one untimed one; out is rewritten by every launch (out = self + the sums).
//
// Every line is flushed as soon as it is measured, with the seconds since the start, so a slow
// row shows where the time goes (an earlier version buffered its whole table in stdout and a
// 40-s limit cut it before it printed anything). Each row stops timing once it has spent
// kRowBudgetMs of device time (a warm-up call that alone exceeds it is the figure), and the host-side input generation
// of each shape is printed with its own time.
//
// Usage: opcts_bench_atomics. Needs a CUDA GPU. About 20 s on an H200.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "app/builtins.hpp"
#include "core/family.hpp"
#include "families/indexing/cuda/indexing_kernels.hpp"
#include "families/indexing/indexing.hpp"
#include "gpu/cuda/device_buffer.hpp"

using namespace opcts;

namespace {

constexpr int kMaxIters = 20;
constexpr double kRowBudgetMs = 1000;

const auto kStart = std::chrono::steady_clock::now();

double elapsed_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - kStart).count(); }

// Mean milliseconds of `f` (which enqueues on `s`) over up to kMaxIters calls after a timed
// warm-up call, while the calls add up to less than kRowBudgetMs; a warm-up that alone exceeds
// the budget (16M contended 16-bit adds to one element) is the figure. Throws on a CUDA error.
template <class F>
double mean_ms(F f, cudaStream_t s) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const auto timed = [&] {
    cudaEventRecord(a, s);
    f();
    cudaEventRecord(b, s);
    const cudaError_t e = cudaEventSynchronize(b);
    if (e != cudaSuccess) throw std::runtime_error(std::string("timed call: ") + cudaGetErrorString(e));
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return static_cast<double>(ms);
  };
  const double first = timed();
  double total = 0;
  int iters = 0;
  while (iters < kMaxIters && first + total < kRowBudgetMs) {
    total += timed();
    ++iters;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return iters ? total / iters : first;
}

cuda::IdxValue value_of(DType t) {
  switch (t) {
    case DType::fp64: return cuda::IdxValue::fp64;
    case DType::fp16: return cuda::IdxValue::fp16;
    case DType::bf16: return cuda::IdxValue::bf16;
    case DType::int32: return cuda::IdxValue::int32;
    case DType::int64: return cuda::IdxValue::int64;
    default: return cuda::IdxValue::fp32;
  }
}

struct Shape {
  const char* what;
  int64_t n, m;
  indexing::Dist dist;
};
// "all one index" sends every add to element 0 of a 1024-element tensor, so a 16-bit add there is
// the paired 32-bit atomic PyTorch's fastSpecializedAtomicAdd uses (atom.add.noftz.bf16x2). A
// tensor of one element has no pair: its 16-bit adds take the scalar atomic (atom.add.noftz.bf16
// / .f16), whose cost under full contention is printed at two sizes (the 2^24 of the other rows
// did not finish in 60 s, twice: a finding, see docs/status/sm90.md), so the ns-per-add column
// shows how it scales.
constexpr Shape kShapes[] = {
    {"uniform", int64_t{1} << 20, int64_t{1} << 24, indexing::Dist::uniform},
    {"all one index", 1024, int64_t{1} << 24, indexing::Dist::all_first},
    {"lone element", 1, int64_t{1} << 12, indexing::Dist::all_first},
    {"lone element", 1, int64_t{1} << 16, indexing::Dist::all_first},
    {"MI300 reproducer", 100, 1305301, indexing::Dist::uniform},
};

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line as soon as it is printed, through a pipe too
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  // cuda.sorted's scratch comes from cudaMallocAsync; with the default pool's release threshold
  // of 0 every synchronisation hands it back to the driver and the next call maps it again,
  // inside the timed interval. Kept mapped here (as a caching allocator would), so the rows
  // time the kernels.
  cudaMemPool_t pool = nullptr;
  int dev = 0;
  cudaGetDevice(&dev);
  if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess) {
    uint64_t keep = UINT64_MAX;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  }
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const Family& fam = *builtin_registry().family("scatter_add");

  // Device-to-device copy of 512 MiB (beyond L2): the bandwidth reference.
  const size_t copy_bytes = size_t{512} << 20;
  double copy_gbs = 0;
  {
    cuda::DeviceBuffer src(copy_bytes), dst(copy_bytes);
    cudaMemset(src.get(), 1, copy_bytes);
    const double ms =
        mean_ms([&] { cudaMemcpyAsync(dst.get(), src.get(), copy_bytes, cudaMemcpyDeviceToDevice, stream); }, stream);
    copy_gbs = 2.0 * static_cast<double>(copy_bytes) / ms / 1e6;
    std::printf("device-to-device copy (512 MiB, read + write): %.0f GB/s   [%.1f s]\n\n", copy_gbs, elapsed_s());
  }

  std::printf("%-17s %-44s %-22s %10s %9s %8s %9s %7s\n", "shape", "problem", "impl", "us", "GB/s", "of copy", "ns/add",
              "at s");
  try {
    for (const Shape& s : kShapes)
      for (const DType dt : {DType::fp32, DType::bf16}) {
        const indexing::Problem p{.dtype = dt, .index_dtype = DType::int64, .n = s.n, .m = s.m, .dist = s.dist};
        const double t0 = elapsed_s();
        const TensorMap in = fam.make_inputs(p, case_seed(fam, p));
        const cuda::DeviceBuffer self = cuda::DeviceBuffer::upload(in.at("self"));
        const cuda::DeviceBuffer terms = cuda::DeviceBuffer::upload(in.at("src"));
        const cuda::DeviceBuffer index = cuda::DeviceBuffer::upload(in.at("index"));
        cuda::DeviceBuffer out(in.at("self").nbytes());
        std::printf("%-17s %-44s (inputs generated and uploaded in %.2f s)\n", s.what, fam.problem_id(p).c_str(),
                    elapsed_s() - t0);
        const cuda::IndexingArgs a{.value = value_of(dt),
                                   .index_type = cuda::IdxIndex::int64,
                                   .per_element_index = true,
                                   .outer = 1,
                                   .n = s.n,
                                   .m = s.m,
                                   .inner = 1,
                                   .self = self.get(),
                                   .terms = terms.get(),
                                   .index = index.get(),
                                   .out = out.get()};
        const double bytes = 2.0 * static_cast<double>(in.at("self").nbytes()) +
                             static_cast<double>(in.at("src").nbytes()) + static_cast<double>(in.at("index").nbytes());
        const auto row = [&](const char* impl, auto launch) {
          const double ms = mean_ms(launch, stream);
          const double gbs = bytes / ms / 1e6;
          std::printf("%-17s %-44s %-22s %10.1f %9.0f %8.3f %9.3f %7.1f\n", s.what, fam.problem_id(p).c_str(), impl,
                      ms * 1e3, gbs, gbs / copy_gbs, ms * 1e6 / static_cast<double>(s.m), elapsed_s());
        };
        row("cuda.atomic", [&] { cuda::scatter_atomic(a, cuda::AtomicPlant::none, stream); });
        row("cuda.warp_aggregated", [&] { cuda::scatter_warp_aggregated(a, false, stream); });
        row("cuda.sorted", [&] { cuda::scatter_sorted(a, cuda::SortedPlant::none, stream); });
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "failed: %s\n", e.what());
    return 1;
  }
  const cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
  cudaStreamDestroy(stream);
  return e == cudaSuccess ? 0 : 1;
}
