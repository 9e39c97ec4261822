// The host emulations' shared parts: argument checks, code and scale readers, the fp32 epilogue.
#include "families/scaled_mm/host/scaled_mm_emulation.hpp"

#include <cstring>

#include "core/errors.hpp"

namespace opcts::host_mm {

namespace {

using scaled_mm::Problem;
using scaled_mm::Recipe;

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

}  // namespace

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
    if (s.ld < tight)
      throw InvalidArgument(name, std::string(name) + " = " + std::to_string(s.ld) + " < " + std::to_string(tight));
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

MatF code_values(const HostTensor& t, int64_t R, int64_t K) {
  // A table of every code's value (fp8 and fp4 codes have at most 256), looked up per element:
  // the decoder itself is too slow for weight matrices of tens of millions of codes.
  std::vector<float> value(size_t{1} << dtype_info(t.dtype()).bits);
  for (size_t c = 0; c < value.size(); ++c) value[c] = static_cast<float>(decode(t.dtype(), c));
  MatF x(R, K);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K; ++k) x(r, k) = value[t.code(r * K + k)];
  return x;
}

bool transposed_read_differs(const Problem& p) {
  const int64_t S = scale_cols(p);
  for (const char which : {'a', 'b'}) {
    const int64_t R = which == 'a' ? p.m : p.n;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t kb = 0; kb < S; ++kb)
        if (scale_pos(p, which, R, r, kb, false) != scale_pos(p, which, R, r, kb, true)) return true;
  }
  return false;
}

float scale(const Problem& p, const TensorMap& in, char which, int64_t r, int64_t kb, bool transposed) {
  const int64_t R = which == 'a' ? p.m : p.n;
  return stored_scale(in.at(which == 'a' ? "a_scale" : "b_scale"), scale_pos(p, which, R, r, kb, transposed));
}

TensorMap epilogue(const Problem& p, const TensorMap& in, const MatF& acc, bool out_scale) {
  const int64_t M = p.m, N = p.n;
  const float g = in.count("global_scale") ? stored_scale(in.at("global_scale"), 0) : 1.0f;
  const float os = in.count("out_scale") && out_scale ? stored_scale(in.at("out_scale"), 0) : 1.0f;
  const HostTensor* bias = in.count("bias") ? &in.at("bias") : nullptr;
  TensorMap out;
  HostTensor& d = out.emplace("d", HostTensor(p.out, {M, N})).first->second;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float v = acc(i, j) * g;
      if (bias) v += static_cast<float>(bias->get(j));
      if (p.out == DType::e4m3fn)
        d.set_code(i * N + j, encode(DType::e4m3fn, static_cast<double>(v * os), Overflow::satfinite));
      else d.set(i * N + j, static_cast<double>(v));  // one rounding, nearest even (fp32: none)
    }
  return out;
}

}  // namespace opcts::host_mm
