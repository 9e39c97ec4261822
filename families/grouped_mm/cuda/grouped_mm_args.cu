// The grouped GEMMs' argument checks: the tensors' sizes against the mode and recipe, and the offsets' values (on the
// host or on the device), refused by name.
#include "gpu/portable/gpu.hpp"

#include <stdexcept>
#include <string>

#include "families/grouped_mm/cuda/grouped_mm_args.cuh"

namespace opcts::cuda::grouped {

namespace {

void require(bool ok, const char* who, const char* arg, const std::string& why) {
  if (!ok) throw GroupedArgumentError(arg, std::string(who) + ": " + why);
}

std::string num(int64_t v) { return std::to_string(v); }
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return cdiv(a, b) * b; }

std::string dims(int64_t batch, int64_t rows, int64_t cols) {
  return "[" + (batch ? num(batch) + ", " : std::string()) + num(rows) + ", " + num(cols) + "]";
}

bool three_d_a(GroupedMode m) { return m == GroupedMode::m3d_3d || m == GroupedMode::m3d_2d; }
bool three_d_b(GroupedMode m) { return m == GroupedMode::m3d_3d || m == GroupedMode::m2d_3d; }

// The scale element counts of a recipe (grouped_mm_kernels.hpp's table).
void check_scales(const GroupedMmParams& p, const Shape& s, const char* who) {
  const int64_t g = p.groups;
  int64_t want_a = 0, want_b = 0;
  if (p.recipe == GroupedRecipe::fp8_rowwise) {
    want_a = p.mode == GroupedMode::m2d_3d ? s.split : g * s.m;
    want_b = p.mode == GroupedMode::m3d_2d ? s.split : g * s.n;
  } else {
    const auto three_d = [&](int64_t rows) { return g * round_up(rows, 128) * s.mx_cols; };
    switch (p.mode) {
      case GroupedMode::m2d_3d:
        want_a = (s.split + 128 * g) * s.mx_cols;
        want_b = three_d(s.n);
        break;
      case GroupedMode::m3d_3d:
        want_a = three_d(s.m);
        want_b = three_d(s.n);
        break;
      case GroupedMode::m3d_2d:
        want_a = three_d(s.m);
        want_b = (s.split + 128 * g) * s.mx_cols;
        break;
      case GroupedMode::m2d_2d:
        want_a = round_up(s.m, 128) * s.mx_width;
        want_b = round_up(s.n, 128) * s.mx_width;
        break;
    }
  }
  const char* unit = p.recipe == GroupedRecipe::fp8_rowwise ? " fp32 scales" : " e8m0 scales";
  require(p.a_scale_count == want_a, who, "scale_a",
          "scale_a holds " + num(p.a_scale_count) + unit + ", the mode needs " + num(want_a));
  require(p.b_scale_count == want_b, who, "scale_b",
          "scale_b holds " + num(p.b_scale_count) + unit + ", the mode needs " + num(want_b));
  require(want_a == 0 || p.a_scale, who, "scale_a", "null scale_a");
  require(want_b == 0 || p.b_scale, who, "scale_b", "null scale_b");
}

}  // namespace

Shape validate(const GroupedMmParams& p, const char* who) {
  const GroupedMode mode = p.mode;
  const int64_t g = p.groups;
  require(g >= 0, who, "groups", "negative group count " + num(g));
  require(p.a_rows >= 0 && p.a_cols >= 0 && p.a_batch >= 0, who, "mat_a", "negative size");
  require(p.b_rows >= 0 && p.b_cols >= 0 && p.b_batch >= 0, who, "mat_b", "negative size");
  // 3-d operands carry the group count in their first dimension; 2-d ones have none.
  require(three_d_a(mode) ? p.a_batch == g : p.a_batch == 0, who, three_d_a(mode) ? "groups" : "mat_a",
          "mat_a is " + dims(p.a_batch, p.a_rows, p.a_cols) +
              (three_d_a(mode) ? ", not G = " + num(g) + " batches" : ", not 2-d"));
  require(three_d_b(mode) ? p.b_batch == g : p.b_batch == 0, who, three_d_b(mode) ? "groups" : "mat_b",
          "mat_b is " + dims(p.b_batch, p.b_rows, p.b_cols) +
              (three_d_b(mode) ? ", not G = " + num(g) + " batches" : ", not 2-d"));
  require(p.a_cols == p.b_rows, who, "K", "mat_a has " + num(p.a_cols) + " columns, mat_b " + num(p.b_rows) + " rows");
  const bool needs_offs = mode != GroupedMode::m3d_3d;
  require(needs_offs ? p.offs_count == g && (g == 0 || p.offs) : p.offs_count == 0, who, "offs",
          needs_offs ? "offs holds " + num(p.offs_count) + " offsets for G = " + num(g) + " groups"
                     : "3d_3d takes no offsets");

  Shape s;
  s.k = p.a_cols;
  switch (mode) {
    case GroupedMode::m2d_3d:
      s.m = s.split = p.a_rows;
      s.n = p.b_cols;
      break;
    case GroupedMode::m3d_3d:
      s.m = p.a_rows;
      s.n = p.b_cols;
      break;
    case GroupedMode::m2d_2d:
      s.m = p.a_rows;
      s.n = p.b_cols;
      s.split = s.k;
      break;
    case GroupedMode::m3d_2d:
      s.m = p.a_rows;
      s.n = s.split = p.b_cols;
      break;
  }
  const bool out_3d = mode == GroupedMode::m3d_3d || mode == GroupedMode::m2d_2d;
  require(out_3d ? p.out_batch == g : p.out_batch == 0, who, "out",
          "out is " + dims(p.out_batch, p.out_rows, p.out_cols));
  require(p.out_rows == s.m && p.out_cols == s.n, who, "out",
          "out is " + dims(p.out_batch, p.out_rows, p.out_cols) + ", the mode makes " + dims(out_3d ? g : 0, s.m, s.n));

  s.lda = p.lda ? p.lda : p.a_cols;
  s.a_bs = p.a_batch_stride ? p.a_batch_stride : p.a_rows * s.lda;
  s.ldb = p.ldb ? p.ldb : p.b_rows;
  s.b_bs = p.b_batch_stride ? p.b_batch_stride : p.b_cols * s.ldb;
  s.ldo = p.ldo ? p.ldo : p.out_cols;
  s.o_bs = p.out_batch_stride ? p.out_batch_stride : p.out_rows * s.ldo;
  require(s.lda >= p.a_cols && s.a_bs >= 0, who, "mat_a", "lda " + num(s.lda) + " < " + num(p.a_cols) + " columns");
  require(s.ldb >= p.b_rows && s.b_bs >= 0, who, "mat_b",
          "mat_b's column stride " + num(s.ldb) + " < K = " + num(p.b_rows));
  require(s.ldo >= p.out_cols && s.o_bs >= 0, who, "out", "ldo " + num(s.ldo) + " < " + num(p.out_cols) + " columns");

  if (p.recipe == GroupedRecipe::fp8_rowwise) {
    // torch._scaled_grouped_mm's fp8 contract (aten/src/ATen/native/cuda/GroupedBlas.cpp):
    // K and N multiples of 16, for the fp8 tensor cores' 16-byte rows; a dimension the offsets
    // split (2d_2d's K, 3d_2d's N) is held to the offsets' multiple instead (find_offs_fault).
    if (mode != GroupedMode::m2d_2d)
      require(s.k % 16 == 0, who, "K", "K = " + num(s.k) + " is not a multiple of 16 (fp8)");
    if (mode != GroupedMode::m3d_2d)
      require(s.n % 16 == 0, who, "N", "N = " + num(s.n) + " is not a multiple of 16 (fp8)");
  }
  if (p.recipe == GroupedRecipe::mxfp8) {
    // An MX block is 32 elements of K: a fixed K must hold whole blocks, and so must ΣK.
    require(s.k % 32 == 0, who, "K", "K = " + num(s.k) + " is not a multiple of the MX block 32");
    s.mx_cols = round_up(s.k / 32, 4);
    if (mode == GroupedMode::m2d_2d) s.mx_width = s.k / 32 + 4 * g;
  }
  if (p.recipe != GroupedRecipe::bf16) check_scales(p, s, who);
  const bool empty = (out_3d ? g : 1) * s.m * s.n == 0;
  require(empty || p.out, who, "out", "null out");
  require(empty || s.k == 0 || (p.a && p.b), who, p.a ? "mat_b" : "mat_a", "null operand");
  return s;
}

OffsFault find_offs_fault(const std::vector<int32_t>& offs, int64_t split, int64_t multiple) {
  for (size_t i = 0; i < offs.size(); ++i) {
    const int64_t v = offs[i];
    if (v < 0 || v > split) return {static_cast<int64_t>(i), OffsFault::out_of_range};
    if (i > 0 && v < offs[i - 1]) return {static_cast<int64_t>(i), OffsFault::decreasing};
    if (v % multiple != 0) return {static_cast<int64_t>(i), OffsFault::misaligned};
  }
  return {};
}

namespace {

// The first faulty index, packed as index·4 + kind, by atomicMin (the smallest index wins; at
// one index the kinds are exclusive in the order the host check tests them).
__global__ void offs_fault_kernel(const int32_t* __restrict__ offs, int64_t count, int64_t split, int64_t multiple,
                                  unsigned long long* first) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t v = offs[i];
    int kind = OffsFault::none;
    if (v < 0 || v > split) kind = OffsFault::out_of_range;
    else if (i > 0 && v < offs[i - 1]) kind = OffsFault::decreasing;
    else if (v % multiple != 0) kind = OffsFault::misaligned;
    if (kind != OffsFault::none) atomicMin(first, static_cast<unsigned long long>(i) * 4 + kind);
  }
}

std::string cuda_message(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

}  // namespace

OffsFault find_offs_fault_device(const GroupedMmParams& p, int64_t split, int64_t multiple) {
  if (p.offs_count == 0) return {};
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess)
    throw std::runtime_error("grouped offsets check: cudaStreamCreateWithFlags: " + cuda_message(e));
  unsigned long long first = ~0ull;
  unsigned long long* d = nullptr;
  e = cudaMallocAsync(reinterpret_cast<void**>(&d), sizeof first, s);
  if (e == cudaSuccess) e = cudaMemcpyAsync(d, &first, sizeof first, cudaMemcpyHostToDevice, s);
  if (e == cudaSuccess) {
    constexpr int kThreads = 256;
    const int64_t blocks = (p.offs_count + kThreads - 1) / kThreads;
    offs_fault_kernel<<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), kThreads, 0, s>>>(p.offs, p.offs_count,
                                                                                                split, multiple, d);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(&first, d, sizeof first, cudaMemcpyDeviceToHost, s);
  if (d) (void)cudaFreeAsync(d, s);
  const cudaError_t sync = cudaStreamSynchronize(s);
  (void)cudaStreamDestroy(s);
  if (e == cudaSuccess) e = sync;
  if (e != cudaSuccess) throw std::runtime_error("grouped offsets check: " + cuda_message(e));
  if (first == ~0ull) return {};
  return {static_cast<int64_t>(first / 4), static_cast<OffsFault::Kind>(first % 4)};
}

void refuse_offs(const OffsFault& f, int64_t split, int64_t multiple, const char* who) {
  const std::string at = "offs[" + num(f.index) + "]";
  switch (f.kind) {
    case OffsFault::none: return;
    case OffsFault::out_of_range:
      require(false, who, "offs", at + " is outside [0, " + num(split) + "] (the split dimension)");
      break;
    case OffsFault::decreasing:
      require(false, who, "offs", at + " is smaller than offs[" + num(f.index - 1) + "]: offsets must not decrease");
      break;
    case OffsFault::misaligned:
      require(false, who, "offs", at + " is not a multiple of " + num(multiple) + " (the recipe's split alignment)");
      break;
  }
}

}  // namespace opcts::cuda::grouped
