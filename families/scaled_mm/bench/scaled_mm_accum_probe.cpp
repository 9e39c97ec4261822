// Measures how a scaled-GEMM path accumulates: which small products survive next to a large one,
// by position along K (the promotion interval), by size (the accumulator's bits) and by count
// (whether the products of one MMA are summed exactly before they meet the accumulator).
//
// Every row of A is an experiment over one K = 1024 reduction; B is all ones, so D[r, n] is the
// sum of row r's values. All values are e4m3fn codes and every exact sum is an fp32 value, so a
// path that accumulated in IEEE fp32 would return each sum exactly: what it loses is what its
// accumulator drops. Printed per path (cuBLASLt tensorwise, tensorwise fast_accum, rowwise,
// 1x128/128x128 blockwise, opcts's mx kernel) so the models in cases/tolerances.yaml can be
// read off, not fitted.
//
// Usage: opcts_probe_scaled_mm_accum. Needs a CUDA GPU (sm_89+ for the cuBLASLt rows).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "families/scaled_mm/cuda/scaled_mm_kernels.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "numerics/dtype.hpp"

using namespace opcts;

namespace {

constexpr int64_t K = 1024, N = 16;

struct Row {
  std::string what;
  std::vector<std::pair<int64_t, double>> values;  // (k, value)
  double exact() const {
    double s = 0;
    for (const auto& [k, v] : values) s += v;
    return s;
  }
};

struct Path {
  const char* name;
  bool cublaslt;
  cuda::MmScaleMode a_mode, b_mode;
  bool fast_accum;
};

uint8_t code(double v) { return static_cast<uint8_t>(encode(DType::e4m3fn, v)); }

// Runs the rows through one path; returns D[r, 0] per row (NaN when the path refused).
std::vector<double> run(const Path& path, const std::vector<Row>& rows, std::string* refusal) {
  const int64_t M = static_cast<int64_t>(rows.size());
  std::vector<uint8_t> a(static_cast<size_t>(M * K), code(0.0)), b(static_cast<size_t>(N * K), code(1.0));
  for (int64_t r = 0; r < M; ++r)
    for (const auto& [k, v] : rows[r].values) a[r * K + k] = code(v);
  const int64_t kb = (K + 127) / 128;
  auto scales = [&](cuda::MmScaleMode m, int64_t R) -> std::vector<float> {
    switch (m) {
      case cuda::MmScaleMode::scalar_f32: return std::vector<float>(1, 1.0f);
      case cuda::MmScaleMode::outer_vec_f32: return std::vector<float>(R, 1.0f);
      case cuda::MmScaleMode::vec128_f32: return std::vector<float>(R * kb, 1.0f);
      case cuda::MmScaleMode::blk128x128_f32: return std::vector<float>(((R + 127) / 128) * kb, 1.0f);
      default: return {};
    }
  };
  const auto sa = scales(path.a_mode, M), sb = scales(path.b_mode, N);
  cuda::DeviceBuffer da(a.size()), db(b.size()), dsa(sa.size() * 4), dsb(sb.size() * 4), dd(M * N * 4);
  cudaMemcpy(da.get(), a.data(), a.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(db.get(), b.data(), b.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dsa.get(), sa.data(), sa.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dsb.get(), sb.data(), sb.size() * 4, cudaMemcpyHostToDevice);
  cudaMemset(dd.get(), 0xFF, dd.bytes());
  cuda::ScaledMmParams p;
  p.m = M;
  p.n = N;
  p.k = K;
  p.a = da.get();
  p.b = db.get();
  p.lda = p.ldb = K;
  p.a_scale_mode = path.a_mode;
  p.b_scale_mode = path.b_mode;
  p.a_scale = dsa.get();
  p.b_scale = dsb.get();
  p.out = cuda::MmOut::fp32;
  p.d = dd.get();
  p.ldd = N;
  p.fast_accum = path.fast_accum;
  try {
    if (path.cublaslt) cuda::scaled_mm_cublaslt(p, nullptr);
    else cuda::scaled_mm_mx_kernel(p, nullptr);
    cuda::check(cudaDeviceSynchronize(), "probe");
  } catch (const std::exception& e) {
    *refusal = e.what();
    return std::vector<double>(rows.size(), NAN);
  }
  std::vector<float> d(static_cast<size_t>(M * N));
  cudaMemcpy(d.data(), dd.get(), d.size() * 4, cudaMemcpyDeviceToHost);
  std::vector<double> out(rows.size());
  for (int64_t r = 0; r < M; ++r) out[r] = d[r * N];
  return out;
}

}  // namespace

int main() {
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  std::printf("device %s (sm_%d%d); K = %lld, B = 1, fp32 output; big product 256 = 2^8\n", prop.name, prop.major,
              prop.minor, static_cast<long long>(K));

  std::vector<Row> rows;
  // 1. Position: 256 at k = 0 and one 2^-6 (2^-14 of it) at k = j.
  std::vector<int64_t> positions;
  for (int64_t j = 1; j < K; ++j) positions.push_back(j);
  const size_t pos0 = rows.size();
  for (int64_t j : positions) rows.push_back({"pos", {{0, 256.0}, {j, std::ldexp(1.0, -6)}}});
  // 2. Reverse position: 2^-6 at k = 0 and 256 at k = j (a small partial sum met later by a large product).
  const size_t rev0 = rows.size();
  for (int64_t j : positions) rows.push_back({"rev", {{0, std::ldexp(1.0, -6)}, {j, 256.0}}});
  // 3. Bits: 256 at k = 0 and 256·2^-e at k = 1 (the same MMA), k = 40 (the next MMA) and k = 600.
  const size_t bits0 = rows.size();
  for (int e = 0; e <= 17; ++e)
    for (int64_t at : {int64_t{1}, int64_t{40}, int64_t{600}})
      rows.push_back({"bits", {{0, 256.0}, {at, std::ldexp(256.0, -e)}}});
  // 4. Count: 256 at k = 0 and c values 2^-6 at k = 1..c (c <= 31: one MMA; more: several).
  const size_t cnt0 = rows.size();
  const int counts[] = {1, 2, 4, 8, 16, 31, 63, 127, 255, 511, 1023};
  for (int c : counts) {
    Row r{"count", {{0, 256.0}}};
    for (int k = 1; k <= c; ++k) r.values.push_back({k, std::ldexp(1.0, -6)});
    rows.push_back(r);
  }
  // 5. Rounding: 256 at k = 0 and 3·2^-6, 5·2^-6, 7·2^-6 ... at k = 1: truncation or rounding of the kept part.
  const size_t rnd0 = rows.size();
  for (double f : {0.75, 1.5, 2.5, 3.5, 1.25, 0.375})
    rows.push_back({"round", {{0, 256.0}, {1, f * std::ldexp(1.0, -5)}}});

  while (rows.size() % 128) rows.push_back({"pad", {}});  // blockwise scales want M % 4 == 0

  const Path paths[] = {
      {"cublaslt tensorwise", true, cuda::MmScaleMode::scalar_f32, cuda::MmScaleMode::scalar_f32, false},
      {"cublaslt tensorwise fast_accum", true, cuda::MmScaleMode::scalar_f32, cuda::MmScaleMode::scalar_f32, true},
      {"cublaslt rowwise", true, cuda::MmScaleMode::outer_vec_f32, cuda::MmScaleMode::outer_vec_f32, false},
      {"cublaslt rowwise fast_accum", true, cuda::MmScaleMode::outer_vec_f32, cuda::MmScaleMode::outer_vec_f32, true},
      {"cublaslt blockwise 1x128/128x128", true, cuda::MmScaleMode::vec128_f32, cuda::MmScaleMode::blk128x128_f32,
       false},
      {"cublaslt blockwise 1x128/1x128", true, cuda::MmScaleMode::vec128_f32, cuda::MmScaleMode::vec128_f32, false},
      {"opcts mx_kernel tensorwise", false, cuda::MmScaleMode::scalar_f32, cuda::MmScaleMode::scalar_f32, false},
  };
  for (const Path& path : paths) {
    std::string refusal;
    const auto got = run(path, rows, &refusal);
    std::printf("\n== %s\n", path.name);
    if (!refusal.empty()) {
      std::printf("refused: %s\n", refusal.c_str());
      continue;
    }
    auto lost = [&](size_t i) { return got[i] != rows[i].exact(); };
    // Runs of positions with the same verdict.
    auto runs = [&](size_t base, const char* label) {
      std::printf("%s:", label);
      size_t i = 0;
      while (i < positions.size()) {
        size_t j = i;
        while (j + 1 < positions.size() && lost(base + j + 1) == lost(base + i)) ++j;
        std::printf(" k=%lld..%lld %s;", static_cast<long long>(positions[i]), static_cast<long long>(positions[j]),
                    lost(base + i) ? "LOST" : "kept");
        i = j + 1;
      }
      std::printf("\n");
    };
    runs(pos0, "position of 2^-6 after 256 at k=0");
    runs(rev0, "position of 256 after 2^-6 at k=0");
    std::printf("bits (256 + 256*2^-e; error at k=1 / k=40 / k=600):\n");
    for (int e = 0; e <= 17; ++e) {
      std::printf("  e=%2d", e);
      for (int w = 0; w < 3; ++w) {
        const size_t i = bits0 + static_cast<size_t>(e) * 3 + w;
        std::printf("  %12.6g", got[i] - rows[i].exact());
      }
      std::printf("\n");
    }
    std::printf("count (256 + c*2^-6 at k=1..c): c, got - 256, exact - 256\n");
    for (size_t c = 0; c < std::size(counts); ++c)
      std::printf("  c=%4d  %12.6g  %12.6g\n", counts[c], got[cnt0 + c] - 256.0, rows[cnt0 + c].exact() - 256.0);
    std::printf("rounding (256 + f*2^-5 at k=1): f, got - 256\n");
    for (size_t i = rnd0; i < rnd0 + 6; ++i)
      std::printf("  %8.4g  %12.6g\n", (rows[i].exact() - 256.0) / std::ldexp(1.0, -5), got[i] - 256.0);
  }
  return 0;
}
