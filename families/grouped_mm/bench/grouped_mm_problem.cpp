// Generates grouped-GEMM problems in the code domain on the device and gives any output element's reference on the
// host through the wing's reference_element (families/grouped_mm/bench/grouped_mm_problem.hpp).
#include "families/grouped_mm/bench/grouped_mm_problem.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

namespace opcts::bench {

namespace {

using cuda::GroupedMode;
using cuda::GroupedRecipe;

enum Stream : uint64_t { kA = 1, kB = 2, kScaleA = 3, kScaleB = 4 };

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t hash(uint64_t seed, Stream s, int64_t i) { return mix(mix(seed * 8 + s) ^ static_cast<uint64_t>(i)); }

// ±(1 + m/128)·2^e, e in [−2, 1]: every bf16 mantissa, no rounding anywhere.
uint16_t bf16_bits(uint64_t h) {
  return static_cast<uint16_t>(((h >> 9) & 1) << 15 | (125 + ((h >> 7) & 3)) << 7 | (h & 127));
}
// Any e4m3fn code but NaN.
uint8_t fp8_code(uint64_t h) {
  const auto c = static_cast<uint8_t>(h & 0xFF);
  return (c & 0x7F) == 0x7F ? static_cast<uint8_t>(c & 0xFE) : c;
}
// fp32 rowwise scales (1 + j/256)·2^e, e in [−2, 2], exact in fp32.
float row_scale_value(uint64_t h) {
  return std::ldexp(1.0f + static_cast<float>(h & 255) / 256.0f, static_cast<int>((h >> 8) % 5) - 2);
}
// e8m0 exponents 2^−8 .. 2^7.
uint8_t e8m0_code(uint64_t h) { return static_cast<uint8_t>(119 + h % 16); }

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

int64_t blocked(int64_t r, int64_t c, int64_t cols) {
  return 512 * ((r / 128) * (cols / 4) + c / 4) + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// count elements of `bytes` each, element i = fn(i), made by host threads chunk by chunk.
template <class Fn>
void* upload(int64_t count, int bytes, Fn fn, std::vector<void*>& owned) {
  void* d = nullptr;
  if (count == 0) return d;
  ck(cudaMalloc(&d, static_cast<size_t>(count) * bytes), "cudaMalloc");
  owned.push_back(d);
  constexpr int64_t kChunk = 1 << 24;
  std::vector<uint8_t> host(static_cast<size_t>(std::min(count, kChunk)) * bytes);
  const unsigned nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  for (int64_t c0 = 0; c0 < count; c0 += kChunk) {
    const int64_t n = std::min(kChunk, count - c0);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < nt; ++t)
      pool.emplace_back([&, t] {
        for (int64_t i = t; i < n; i += nt) {
          const auto v = fn(c0 + i);
          std::memcpy(host.data() + i * bytes, &v, bytes);
        }
      });
    for (auto& th : pool) th.join();
    ck(cudaMemcpy(static_cast<uint8_t*>(d) + c0 * bytes, host.data(), static_cast<size_t>(n) * bytes,
                  cudaMemcpyHostToDevice),
       "upload");
  }
  return d;
}

}  // namespace

double decode_e4m3(uint8_t c) {
  const int e = (c >> 3) & 15, m = c & 7;
  if ((c & 0x7F) == 0x7F) return std::nan("");
  const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (c & 0x80) ? -v : v;
}

double bf16_value(uint16_t bits) {
  uint32_t w = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

GroupedProblem::GroupedProblem(const GroupedSpec& spec) : spec_(spec) {
  const GroupedMode mode = spec.mode;
  const bool mx = spec.recipe == GroupedRecipe::mxfp8, fp8 = spec.recipe != GroupedRecipe::bf16;
  const int64_t g = mode == GroupedMode::m3d_3d ? spec.groups3d : static_cast<int64_t>(spec.sizes.size());
  int64_t split = 0;
  for (int64_t s : spec.sizes) {
    split += s;
    offs_.push_back(static_cast<int32_t>(split));
  }
  if (mode == GroupedMode::m3d_3d) offs_.clear();
  split += spec.guard;
  const int64_t m = spec.m, n = spec.n, k = spec.k;
  cuda::GroupedMmParams& p = p_;
  p.mode = mode, p.recipe = spec.recipe, p.groups = g;
  int64_t a_elems = 0, b_elems = 0;
  switch (mode) {
    case GroupedMode::m2d_3d:
      p.a_rows = split, p.a_cols = k, p.b_batch = g, p.b_rows = k, p.b_cols = n, p.out_rows = split, p.out_cols = n;
      break;
    case GroupedMode::m3d_3d:
      p.a_batch = g, p.a_rows = m, p.a_cols = k, p.b_batch = g, p.b_rows = k, p.b_cols = n;
      p.out_batch = g, p.out_rows = m, p.out_cols = n;
      break;
    case GroupedMode::m2d_2d:
      p.a_rows = m, p.a_cols = split, p.b_rows = split, p.b_cols = n, p.out_batch = g, p.out_rows = m, p.out_cols = n;
      break;
    case GroupedMode::m3d_2d:
      p.a_batch = g, p.a_rows = m, p.a_cols = k, p.b_rows = k, p.b_cols = split, p.out_rows = m, p.out_cols = split;
      break;
  }
  a_elems = std::max<int64_t>(p.a_batch, 1) * p.a_rows * p.a_cols;
  b_elems = std::max<int64_t>(p.b_batch, 1) * p.b_rows * p.b_cols;
  out_elems_ = std::max<int64_t>(p.out_batch, 1) * p.out_rows * p.out_cols;

  const uint64_t seed = spec.seed;
  if (fp8) {
    p.a = upload(
        a_elems, 1, [&](int64_t i) { return fp8_code(hash(seed, kA, i)); }, owned_);
    p.b = upload(
        b_elems, 1, [&](int64_t i) { return fp8_code(hash(seed, kB, i)); }, owned_);
  } else {
    p.a = upload(
        a_elems, 2, [&](int64_t i) { return bf16_bits(hash(seed, kA, i)); }, owned_);
    p.b = upload(
        b_elems, 2, [&](int64_t i) { return bf16_bits(hash(seed, kB, i)); }, owned_);
  }
  // Scale counts as grouped_mm_kernels.hpp documents them.
  const bool k_split = mode == GroupedMode::m2d_2d;
  if (mx) {
    pad_before_.assign(static_cast<size_t>(g) + 1, 0);
    for (int64_t h = 0; h < (mode == GroupedMode::m3d_3d ? 0 : g);
         ++h) {  // 3d_3d: every group's block is the same size
      const int64_t s = spec.sizes[h];
      pad_before_[h + 1] = pad_before_[h] + (k_split ? round_up(s / 32, 4) : round_up(s, 128));
    }
    const int64_t cp = round_up(k / 32, 4), width = split / 32 + 4 * g;
    const auto three_d = [&](int64_t rows) { return g * round_up(rows, 128) * cp; };
    switch (mode) {
      case GroupedMode::m2d_3d: p.a_scale_count = (split + 128 * g) * cp, p.b_scale_count = three_d(n); break;
      case GroupedMode::m3d_3d: p.a_scale_count = three_d(m), p.b_scale_count = three_d(n); break;
      case GroupedMode::m3d_2d: p.a_scale_count = three_d(m), p.b_scale_count = (split + 128 * g) * cp; break;
      case GroupedMode::m2d_2d:
        p.a_scale_count = round_up(m, 128) * width, p.b_scale_count = round_up(n, 128) * width;
        break;
    }
    p.a_scale = upload(
        p.a_scale_count, 1, [&](int64_t i) { return e8m0_code(hash(seed, kScaleA, i)); }, owned_);
    p.b_scale = upload(
        p.b_scale_count, 1, [&](int64_t i) { return e8m0_code(hash(seed, kScaleB, i)); }, owned_);
  } else if (fp8) {
    p.a_scale_count = mode == GroupedMode::m2d_3d ? split : g * m;
    p.b_scale_count = mode == GroupedMode::m3d_2d ? split : g * n;
    p.a_scale = upload(
        p.a_scale_count, 4, [&](int64_t i) { return row_scale_value(hash(seed, kScaleA, i)); }, owned_);
    p.b_scale = upload(
        p.b_scale_count, 4, [&](int64_t i) { return row_scale_value(hash(seed, kScaleB, i)); }, owned_);
  }
  if (!offs_.empty()) {
    p.offs = static_cast<const int32_t*>(upload(
        static_cast<int64_t>(offs_.size()), 4, [&](int64_t i) { return offs_[i]; }, owned_));
    p.offs_count = static_cast<int64_t>(offs_.size());
  }
  p.out = extra_out();
}

GroupedProblem::~GroupedProblem() {
  for (void* d : owned_) cudaFree(d);
}

void* GroupedProblem::extra_out() {
  void* d = nullptr;
  if (out_elems_ == 0) return d;
  ck(cudaMalloc(&d, static_cast<size_t>(out_elems_) * 2), "cudaMalloc(out)");
  owned_.push_back(d);
  ck(cudaMemset(d, 0xFF, static_cast<size_t>(out_elems_) * 2), "cudaMemset(out)");
  return d;
}

void GroupedProblem::poison_out() const {
  if (out_elems_) ck(cudaMemset(p_.out, 0xFF, static_cast<size_t>(out_elems_) * 2), "cudaMemset(out)");
}

void GroupedProblem::range(int64_t g, int64_t& start, int64_t& end) const {
  start = end = 0;
  if (offs_.empty()) return;
  start = g ? offs_[g - 1] : 0;
  end = offs_[g];
}

void GroupedProblem::group_dims(int64_t g, int64_t& rows, int64_t& cols, int64_t& kg) const {
  int64_t s = 0, e = 0;
  range(g, s, e);
  rows = spec_.m, cols = spec_.n, kg = spec_.k;
  switch (spec_.mode) {
    case GroupedMode::m2d_3d: rows = e - s; break;
    case GroupedMode::m3d_3d: break;
    case GroupedMode::m2d_2d: kg = e - s; break;
    case GroupedMode::m3d_2d: cols = e - s; break;
  }
}

int64_t GroupedProblem::out_index(int64_t g, int64_t r, int64_t c) const {
  int64_t s = 0, e = 0;
  range(g, s, e);
  switch (spec_.mode) {
    case GroupedMode::m2d_3d: return (s + r) * p_.out_cols + c;
    case GroupedMode::m3d_2d: return r * p_.out_cols + s + c;
    default: return (g * p_.out_rows + r) * p_.out_cols + c;
  }
}

int64_t GroupedProblem::mx_at(bool operand_a, int64_t g, int64_t idx, int64_t kb) const {
  const GroupedMode mode = spec_.mode;
  const int64_t cp = round_up(spec_.k / 32, 4);
  if (mode == GroupedMode::m2d_2d) {  // the K-split slab of group g
    int64_t s = 0, e = 0;
    range(g, s, e);
    const int64_t cg = round_up((e - s) / 32, 4), f = blocked(idx, kb, cg), width = p_.a_cols / 32 + 4 * p_.groups;
    return (f / cg) * width + pad_before_[g] + f % cg;
  }
  const bool split_operand = operand_a ? mode == GroupedMode::m2d_3d : mode == GroupedMode::m3d_2d;
  if (split_operand) return pad_before_[g] * cp + blocked(idx, kb, cp);
  return g * round_up(operand_a ? spec_.m : spec_.n, 128) * cp + blocked(idx, kb, cp);
}

double GroupedProblem::dequant(bool operand_a, int64_t i, int64_t g, int64_t idx, int64_t kk) const {
  const uint64_t h = hash(spec_.seed, operand_a ? kA : kB, i);
  if (spec_.recipe == GroupedRecipe::bf16) return bf16_value(bf16_bits(h));
  const double v = decode_e4m3(fp8_code(h));
  if (spec_.recipe != GroupedRecipe::mxfp8) return v;
  const uint8_t e = e8m0_code(hash(spec_.seed, operand_a ? kScaleA : kScaleB, mx_at(operand_a, g, idx, kk / 32)));
  return std::ldexp(v, static_cast<int>(e) - 127);
}

double GroupedProblem::a_value(int64_t g, int64_t r, int64_t kk) const {
  int64_t s = 0, e = 0;
  range(g, s, e);
  int64_t i = 0;
  switch (spec_.mode) {
    case GroupedMode::m2d_3d: i = (s + r) * p_.a_cols + kk; break;
    case GroupedMode::m2d_2d: i = r * p_.a_cols + s + kk; break;
    default: i = (g * p_.a_rows + r) * p_.a_cols + kk; break;
  }
  return dequant(true, i, g, r, kk);
}

double GroupedProblem::b_value(int64_t g, int64_t kk, int64_t c) const {
  int64_t s = 0, e = 0;
  range(g, s, e);
  int64_t i = 0;
  switch (spec_.mode) {
    case GroupedMode::m2d_2d: i = c * p_.b_rows + s + kk; break;
    case GroupedMode::m3d_2d: i = (s + c) * p_.b_rows + kk; break;
    default: i = (g * p_.b_cols + c) * p_.b_rows + kk; break;
  }
  return dequant(false, i, g, c, kk);
}

double GroupedProblem::row_scale(int64_t g, int64_t r) const {
  int64_t s = 0, e = 0;
  range(g, s, e);
  const int64_t i = spec_.mode == GroupedMode::m2d_3d ? s + r : g * spec_.m + r;
  return row_scale_value(hash(spec_.seed, kScaleA, i));
}

double GroupedProblem::col_scale(int64_t g, int64_t c) const {
  int64_t s = 0, e = 0;
  range(g, s, e);
  const int64_t i = spec_.mode == GroupedMode::m3d_2d ? s + c : g * spec_.n + c;
  return row_scale_value(hash(spec_.seed, kScaleB, i));
}

grouped_mm::Problem GroupedProblem::family_problem() const {
  grouped_mm::Problem p;
  p.mode = static_cast<grouped_mm::Mode>(spec_.mode);  // both valued by the ABI's constants
  p.recipe = spec_.recipe == GroupedRecipe::bf16    ? grouped_mm::Recipe::bf16
             : spec_.recipe == GroupedRecipe::mxfp8 ? grouped_mm::Recipe::mxfp8
                                                    : grouped_mm::Recipe::rowwise;
  p.m = spec_.m, p.n = spec_.n, p.k = spec_.k;
  p.tail = spec_.guard;
  if (spec_.mode == GroupedMode::m3d_3d) {
    p.groups = spec_.groups3d;
  } else {
    p.groups = static_cast<int64_t>(spec_.sizes.size());
    p.split = grouped_mm::Split::sizes;
    p.sizes = spec_.sizes;
  }
  return p;
}

grouped_mm::ElementReference GroupedProblem::reference(int64_t g, int64_t r, int64_t c) const {
  int64_t rows = 0, cols = 0, kg = 0;
  group_dims(g, rows, cols, kg);
  // The dequantized operands: each code times its scale (fp8_rowwise: one per row of A and per
  // column of B; mxfp8's block scales are in a_value and b_value).
  const bool rowwise = spec_.recipe == GroupedRecipe::fp8_rowwise;
  const double sa = rowwise ? row_scale(g, r) : 1.0, sb = rowwise ? col_scale(g, c) : 1.0;
  return grouped_mm::reference_element(
      kg, [&](int64_t kk) { return a_value(g, r, kk) * sa; }, [&](int64_t kk) { return b_value(g, kk, c) * sb; });
}

}  // namespace opcts::bench
