// host.emulated: scaled_mm on the CPU accumulating the way tensor cores do, plus three planted bugs.
//
// Per K block — the whole K for tensorwise and rowwise (one scale along K), 128 for the
// blockwise recipes, 32 for MX, 16 for NVFP4 — an fp32 partial sum of code-value products
// (Eigen fp32 GEMM over the block's codes), multiplied in fp32 by the A and B block scales and
// added to an fp32 accumulator; then the global scale (NVFP4), the bias, the output scale
// (e4m3fn) in fp32 and one rounding to the output dtype (e4m3fn: satfinite). It reads the
// device buffers (strided codes, scales in the recipe's layout) with its own index arithmetic,
// independent of refimpl's reader, and refuses what the operator's contract forbids with
// InvalidArgument naming the argument cuBLASLt would ("K", "lda", "ldb", "layout", "a_scale",
// "b_scale"), judged from the tensors it is given.
//
// Planted (Impl::planted, must FAIL):
//   host.emulated_no_out_scale       ignores the output scale of an e4m3fn output
//   host.emulated_scale_transposed   reads block scales with the layout's row and column roles
//                                    exchanged (column-major read as row-major and back,
//                                    swizzled read as plain row-major)
//   host.emulated_drop_partial_k     drops the last K tile when it is partial (tile 128 for fp32
//                                    recipes, 32 for MX, 16 for NVFP4), as a kernel that rounds
//                                    the tile count down would
#include <cmath>
#include <cstring>

#include <Eigen/Dense>

#include "device_impl/host/host_impls.hpp"
#include "core/errors.hpp"
#include "refimpl/scaled_mm.hpp"

namespace opcts {

namespace {

using scaled_mm::Problem;
using scaled_mm::Recipe;
using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

enum class Bug { none, no_out_scale, scale_transposed, drop_partial_k };

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundup(int64_t a, int64_t b) { return cdiv(a, b) * b; }

// How operand scales are stored (the kernel header's table).
enum class ScaleKind { scalar, per_row, vec128_colmajor, blk128_rowmajor, block_swizzled, block_rowmajor };

ScaleKind scale_kind(const Problem& p, char which) {
  switch (p.recipe) {
    case Recipe::tensorwise: return ScaleKind::scalar;
    case Recipe::rowwise: return ScaleKind::per_row;
    case Recipe::blockwise_1x128_1x128: return ScaleKind::vec128_colmajor;
    case Recipe::blockwise_1x128_128x128: return which == 'a' ? ScaleKind::vec128_colmajor : ScaleKind::blk128_rowmajor;
    default:
      return p.scale_layout == quant::ScaleLayout::swizzled ? ScaleKind::block_swizzled : ScaleKind::block_rowmajor;
  }
}

DType expected_scale_dtype(const Problem& p) {
  if (p.is_mx()) return DType::e8m0fnu;
  if (p.recipe == Recipe::nvfp4) return DType::ue4m3;
  return DType::fp32;
}

// Scale blocks along K (S) and the number of stored scales of an operand of R rows.
int64_t scale_cols(const Problem& p) {
  const int64_t b = scaled_mm::scale_block_k(p);
  return b ? cdiv(p.k, b) : 1;
}
int64_t stored_scales(const Problem& p, char which, int64_t R) {
  const int64_t S = scale_cols(p);
  switch (scale_kind(p, which)) {
    case ScaleKind::scalar: return 1;
    case ScaleKind::per_row: return R;
    case ScaleKind::vec128_colmajor: return R * S;
    case ScaleKind::blk128_rowmajor: return cdiv(R, 128) * S;
    case ScaleKind::block_swizzled: return roundup(R, 128) * roundup(S, 4);
    case ScaleKind::block_rowmajor: return R * S;
  }
  return 0;
}

// Storage position of scale (r, kb); `transposed` exchanges the roles (the planted bug).
int64_t scale_pos(const Problem& p, char which, int64_t R, int64_t r, int64_t kb, bool transposed) {
  const int64_t S = scale_cols(p);
  switch (scale_kind(p, which)) {
    case ScaleKind::scalar: return 0;
    case ScaleKind::per_row: return r;
    case ScaleKind::vec128_colmajor: return transposed ? r * S + kb : kb * R + r;
    case ScaleKind::blk128_rowmajor: return transposed ? kb * cdiv(R, 128) + r / 128 : (r / 128) * S + kb;
    case ScaleKind::block_rowmajor: return transposed ? kb * R + r : r * S + kb;
    case ScaleKind::block_swizzled: {
      if (transposed) return r * S + kb;
      const int64_t s4 = roundup(S, 4) / 4;
      return ((r / 128) * s4 + kb / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + kb % 4;
    }
  }
  return 0;
}

// The scale stored at storage position pos (the tensor's bytes, whatever its shape).
float stored_scale(const HostTensor& t, int64_t pos) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(t.data());
  if (t.dtype() == DType::fp32) {
    float f;
    std::memcpy(&f, bytes + 4 * pos, 4);
    return f;
  }
  return static_cast<float>(decode(t.dtype(), bytes[pos]));
}

// Leading dimension of a [R, K] code tensor and whether K is contiguous.
struct Strided {
  bool k_major;
  int64_t ld;
};
Strided strided(const HostTensor& t) {
  if (t.strides().size() != 2) throw std::invalid_argument("scaled_mm operands are 2-D");
  // (ld, 1): K contiguous; (1, ld): R contiguous. A single row or column is K-major when its
  // K stride is 1.
  const bool k_major = t.strides()[1] == 1 && !(t.strides()[0] == 1 && t.dim(0) > 1 && t.dim(1) > 1);
  return {k_major, k_major ? t.strides()[0] : t.strides()[1]};
}

void check_arguments(const Problem& p, const TensorMap& in) {
  const HostTensor& a = in.at("a");
  const HostTensor& b = in.at("b");
  const Strided sa = strided(a), sb = strided(b);
  const bool fp4 = p.is_fp4();
  if (fp4 && (!sa.k_major || !sb.k_major))
    throw InvalidArgument("layout", "packed e2m1 operands must be K-major (A row-major, B column-major)");
  const int64_t mult = p.is_mx() || fp4 ? 32 : 16;
  if (p.k % mult)
    throw InvalidArgument("K", "K = " + std::to_string(p.k) + " must be a multiple of " + std::to_string(mult));
  auto check_ld = [&](const char* name, const Strided& s, DType t, int64_t tight) {
    if (s.ld < tight) throw InvalidArgument(name, std::string(name) + " = " + std::to_string(s.ld) + " < " + std::to_string(tight));
    if ((s.ld * dtype_info(t).bits / 8) % 16)
      throw InvalidArgument(name, std::string(name) + " = " + std::to_string(s.ld) + " is not 16-byte aligned");
  };
  check_ld("lda", sa, a.dtype(), sa.k_major ? p.k : p.m);
  check_ld("ldb", sb, b.dtype(), sb.k_major ? p.k : p.n);
  for (char w : {'a', 'b'}) {
    const std::string nm = w == 'a' ? "a_scale" : "b_scale";
    const HostTensor& s = in.at(nm);
    const DType want = expected_scale_dtype(p);
    if (s.dtype() != want)
      throw InvalidArgument(nm, "scales must be " + std::string(name(want)) + ", not " + std::string(name(s.dtype())));
    const int64_t count = stored_scales(p, w, w == 'a' ? p.m : p.n);
    if (s.numel() != count)
      throw InvalidArgument(nm, "expected " + std::to_string(count) + " scales, got " + std::to_string(s.numel()));
  }
}

// Code values of a [R, K] operand as fp32 (every fp8/fp4 value is an fp32 value).
MatF code_values(const HostTensor& t, int64_t R, int64_t K) {
  MatF x(R, K);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K; ++k) x(r, k) = static_cast<float>(t.get(r * K + k));
  return x;
}

class HostScaledMm final : public Impl {
 public:
  explicit HostScaledMm(Bug bug) : bug_(bug) {}
  std::string_view family() const override { return "scaled_mm"; }
  std::string_view name() const override {
    switch (bug_) {
      case Bug::none: return "host.emulated";
      case Bug::no_out_scale: return "host.emulated_no_out_scale";
      case Bug::scale_transposed: return "host.emulated_scale_transposed";
      case Bug::drop_partial_k: return "host.emulated_drop_partial_k";
    }
    return "?";
  }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return bug_ != Bug::none; }
  // A planted impl runs only problems that probe its bug, so each of its cases must FAIL
  // (its cases are implied strict xfails: a PASS is the bug going unnoticed).
  Support supports(const opcts::Problem& pp, const ArchInfo&) const override {
    if (bug_ == Bug::none) return Support::yes();
    const auto& p = pp.as<Problem>();
    if (!p.expect_error.empty()) return Support::no(std::string(name()) + ": planted impls run valid problems only");
    const int64_t blk = scaled_mm::scale_block_k(p);
    switch (bug_) {
      case Bug::no_out_scale:
        if (p.out == DType::e4m3fn && p.out_scale != 1.0) return Support::yes();
        return Support::no(std::string(name()) + ": no output scale other than 1 to ignore");
      case Bug::scale_transposed:
        // Probed where both operands have several rows and several scale blocks along K.
        if (blk > 0 && p.m >= 64 && p.n >= 64 && p.k >= 2 * blk && p.k > 128) return Support::yes();
        return Support::no(std::string(name()) + ": too few scale rows and K blocks for a transposed read to differ");
      case Bug::drop_partial_k:
        if (p.k % (blk ? blk : 128) != 0 && p.m * p.n > 1) return Support::yes();
        return Support::no(std::string(name()) + ": K has no partial last block to drop");
      case Bug::none: break;
    }
    return Support::yes();
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& in, const RunContext&) const override {
    const auto& p = pp.as<Problem>();
    check_arguments(p, in);
    const int64_t M = p.m, N = p.n, K = p.k;
    const MatF a = code_values(in.at("a"), M, K);
    const MatF bt = code_values(in.at("b"), N, K);
    const HostTensor& as = in.at("a_scale");
    const HostTensor& bs = in.at("b_scale");
    const bool tr = bug_ == Bug::scale_transposed;

    const int64_t blk = scaled_mm::scale_block_k(p);
    const int64_t L = blk ? blk : std::max<int64_t>(K, 1);
    int64_t nblocks = blk ? cdiv(K, blk) : 1;
    int64_t k_end = K;
    if (bug_ == Bug::drop_partial_k) {
      const int64_t tile = blk ? blk : 128;
      k_end = K / tile * tile;
      if (!blk) nblocks = 1;
      else nblocks = k_end / blk;
    }

    MatF acc = MatF::Zero(M, N);
    MatF part(M, N);
    std::vector<float> sa(static_cast<size_t>(M)), sb(static_cast<size_t>(N));
    for (int64_t kb = 0; kb < nblocks; ++kb) {
      const int64_t k0 = kb * L, len = std::min(L, k_end - k0);
      if (len <= 0) break;
      part.noalias() = a.middleCols(k0, len) * bt.middleCols(k0, len).transpose();  // fp32 partial sums
      for (int64_t i = 0; i < M; ++i) sa[i] = stored_scale(as, scale_pos(p, 'a', M, i, kb, tr));
      for (int64_t j = 0; j < N; ++j) sb[j] = stored_scale(bs, scale_pos(p, 'b', N, j, kb, tr));
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) acc(i, j) += part(i, j) * sa[i] * sb[j];
    }

    const float g = in.count("global_scale") ? stored_scale(in.at("global_scale"), 0) : 1.0f;
    const float os = in.count("out_scale") && bug_ != Bug::no_out_scale ? stored_scale(in.at("out_scale"), 0) : 1.0f;
    const HostTensor* bias = in.count("bias") ? &in.at("bias") : nullptr;
    TensorMap out;
    HostTensor& d = out.emplace("d", HostTensor(p.out, {M, N})).first->second;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float v = acc(i, j) * g;
        if (bias) v += static_cast<float>(bias->get(j));
        if (p.out == DType::e4m3fn) d.set_code(i * N + j, encode(DType::e4m3fn, static_cast<double>(v * os), Overflow::satfinite));
        else d.set(i * N + j, static_cast<double>(v));  // one rounding, nearest even (fp32: none)
      }
    return out;
  }

 private:
  Bug bug_;
};

}  // namespace

void register_host_scaled_mm(Registry& reg) {
  for (Bug b : {Bug::none, Bug::no_out_scale, Bug::scale_transposed, Bug::drop_partial_k})
    reg.add(std::make_unique<HostScaledMm>(b));
}

}  // namespace opcts
