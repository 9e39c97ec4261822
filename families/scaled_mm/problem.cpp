// scaled_mm problems: names, validation, the argument contract, ids, the exact fill's ranges and where each scale
// lies in its tensor.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "families/scaled_mm/scaled_mm.hpp"

namespace opcts::scaled_mm {

namespace {

bool is_ocp_fp8(DType t) { return t == DType::e4m3fn || t == DType::e5m2; }
bool is_fnuz_fp8(DType t) { return t == DType::e4m3fnuz || t == DType::e5m2fnuz; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Largest integer n such that every integer in [0, n] is representable in t.
int integer_range(DType t) {
  switch (t) {
    case DType::e4m3fn:
    case DType::e4m3fnuz: return 16;
    case DType::e5m2:
    case DType::e5m2fnuz: return 8;
    case DType::e2m1fn: return 4;
    default: return 1;
  }
}

// Bytes of `elements` codes of the operand dtype (e2m1: two per byte).
int64_t row_bytes(DType t, int64_t elements) { return elements * dtype_info(t).bits / 8; }

}  // namespace

std::string_view to_string(Defect d) {
  switch (d) {
    case Defect::none: return "none";
    case Defect::a_scale_shape: return "ascaleshape";
    case Defect::b_scale_shape: return "bscaleshape";
    case Defect::a_scale_dtype: return "ascaledtype";
    case Defect::b_scale_dtype: return "bscaledtype";
  }
  return "?";
}

int64_t Problem::eff_lda() const { return lda ? lda : a_layout == Layout::row ? k : m; }
int64_t Problem::eff_ldb() const { return ldb ? ldb : b_layout == Layout::col ? k : n; }

quant::Scheme Problem::a_scheme() const {
  quant::Scheme s;
  s.element = a_elem;
  switch (recipe) {
    case Recipe::tensorwise: s.recipe = quant::Recipe::tensorwise; break;
    case Recipe::rowwise: s.recipe = quant::Recipe::rowwise; break;
    case Recipe::blockwise_1x128_128x128:
    case Recipe::blockwise_1x128_1x128: s.recipe = quant::Recipe::blockwise_1x128; break;
    case Recipe::mxfp8:
    case Recipe::mxfp4:
      s.recipe = quant::Recipe::mx;
      s.mx_mode = mx_mode;
      break;
    case Recipe::nvfp4:
      s.recipe = quant::Recipe::nvfp4;
      s.global_scale = true;
      break;
  }
  return s;
}

quant::Scheme Problem::b_scheme() const {
  quant::Scheme s = a_scheme();
  s.element = b_elem;
  if (recipe == Recipe::blockwise_1x128_128x128) s.recipe = quant::Recipe::blockwise_128x128;
  return s;
}

quant::ScaleLayout Problem::a_scale_layout() const {
  if (block_scaled()) return scale_layout;
  if (recipe == Recipe::blockwise_1x128_128x128 || recipe == Recipe::blockwise_1x128_1x128)
    return quant::ScaleLayout::column_major;  // cuBLASLt VEC128_32F: [R, ceil(K/128)], strides (1, R)
  return quant::ScaleLayout::row_major;
}

quant::ScaleLayout Problem::b_scale_layout() const {
  if (recipe == Recipe::blockwise_1x128_128x128) return quant::ScaleLayout::row_major;  // BLK128x128_32F
  return a_scale_layout();
}

int64_t k_multiple(const Problem& p) { return p.is_mx() || p.is_fp4() ? 32 : 16; }

int64_t scale_block_k(const Problem& p) {
  switch (p.recipe) {
    case Recipe::tensorwise:
    case Recipe::rowwise: return 0;
    case Recipe::blockwise_1x128_128x128:
    case Recipe::blockwise_1x128_1x128: return 128;
    case Recipe::mxfp8:
    case Recipe::mxfp4: return 32;
    case Recipe::nvfp4: return 16;
  }
  return 0;
}

std::optional<Violation> contract_violation(const Problem& p) {
  if (p.is_fp4() && (p.a_layout != Layout::row || p.b_layout != Layout::col))
    return Violation{"layout", "packed e2m1 operands must be K-major (A row-major, B column-major: TN)"};
  if (p.k % k_multiple(p) != 0)
    return Violation{"K", "K = " + std::to_string(p.k) + " is not a multiple of " + std::to_string(k_multiple(p)) +
                              (p.is_mx() || p.is_fp4() ? " (MX / fp4 recipes)" : " (16-byte aligned fp8 rows)")};
  const int64_t a_tight = p.a_layout == Layout::row ? p.k : p.m, b_tight = p.b_layout == Layout::col ? p.k : p.n;
  if (p.eff_lda() < a_tight)
    return Violation{"lda", "lda = " + std::to_string(p.eff_lda()) + " < " + std::to_string(a_tight)};
  if (row_bytes(p.a_elem, p.eff_lda()) % 16 != 0)
    return Violation{"lda", "lda = " + std::to_string(p.eff_lda()) + " elements is not a multiple of 16 bytes"};
  if (p.eff_ldb() < b_tight)
    return Violation{"ldb", "ldb = " + std::to_string(p.eff_ldb()) + " < " + std::to_string(b_tight)};
  if (row_bytes(p.b_elem, p.eff_ldb()) % 16 != 0)
    return Violation{"ldb", "ldb = " + std::to_string(p.eff_ldb()) + " elements is not a multiple of 16 bytes"};
  switch (p.defect) {
    case Defect::none: break;
    case Defect::a_scale_shape: return Violation{"a_scale", "the A scale tensor has the wrong number of scales"};
    case Defect::b_scale_shape: return Violation{"b_scale", "the B scale tensor has the wrong number of scales"};
    case Defect::a_scale_dtype: return Violation{"a_scale", "the A scale tensor has the wrong dtype"};
    case Defect::b_scale_dtype: return Violation{"b_scale", "the B scale tensor has the wrong dtype"};
  }
  return std::nullopt;
}

void Problem::validate() const {
  auto bad = [](const std::string& why) { throw std::invalid_argument(why); };
  if (m < 0 || n < 0 || k < 0) bad("m, n and k must be >= 0");
  if (lda < 0 || ldb < 0) bad("lda and ldb must be >= 0 (0 = tight)");
  switch (recipe) {
    case Recipe::tensorwise:
    case Recipe::rowwise:
      if (!((is_ocp_fp8(a_elem) && is_ocp_fp8(b_elem)) || (is_fnuz_fp8(a_elem) && is_fnuz_fp8(b_elem))))
        bad("a and b of " + std::string(to_string(recipe)) +
            " must both be OCP fp8 (e4m3fn, e5m2) or both FNUZ (e4m3fnuz, e5m2fnuz)");
      break;
    case Recipe::blockwise_1x128_128x128:
    case Recipe::blockwise_1x128_1x128:
      if (!((a_elem == DType::e4m3fn && b_elem == DType::e4m3fn) ||
            (a_elem == DType::e4m3fnuz && b_elem == DType::e4m3fnuz)))
        bad("blockwise recipes take e4m3fn (or e4m3fnuz) a and b");
      break;
    case Recipe::mxfp8:
      if (!is_ocp_fp8(a_elem) || !is_ocp_fp8(b_elem)) bad("mxfp8 takes e4m3fn or e5m2 a and b");
      break;
    case Recipe::mxfp4:
    case Recipe::nvfp4:
      if (a_elem != DType::e2m1fn || b_elem != DType::e2m1fn)
        bad(std::string(to_string(recipe)) + " takes e2m1fn a and b");
      break;
  }
  if (!is_mx() && mx_mode != quant::MxScaleMode::floor) bad("mx_mode applies to mxfp8 and mxfp4 only");
  if (block_scaled()) {
    if (scale_layout != quant::ScaleLayout::swizzled && scale_layout != quant::ScaleLayout::row_major)
      bad("MX / NVFP4 scale_layout is swizzled or row_major");
  } else if (scale_layout != quant::ScaleLayout::swizzled) {
    bad("scale_layout applies to mxfp8, mxfp4 and nvfp4 only (fp32 recipes have one layout each)");
  }
  if (out != DType::bf16 && out != DType::fp16 && out != DType::fp32 && out != DType::e4m3fn)
    bad("out must be bf16, fp16, fp32 or e4m3fn");
  if (!(std::isfinite(out_scale) && out_scale > 0)) bad("out_scale must be finite and > 0");
  if (out != DType::e4m3fn && out_scale != 1.0) bad("out_scale applies to an e4m3fn output only");
  if (bias && out != DType::bf16 && out != DType::fp16) bad("bias applies to bf16 and fp16 outputs only");
  if (fast_accum && recipe != Recipe::tensorwise && recipe != Recipe::rowwise && recipe != Recipe::mxfp8)
    bad("fast_accum applies to tensorwise, rowwise and mxfp8 only (cuBLASLt refuses it with block scales, "
        "PyTorch with fp4)");
  if (scale_exp < -48 || scale_exp > 48) bad("scale_exp must lie in [-48, 48]");
  if (fill == Fill::exact) {
    int e = 0;
    if (std::frexp(out_scale, &e) != 0.5) bad("an exact fill needs a power-of-two out_scale");
  }
  const auto v = contract_violation(*this);
  if (v && expect_error != v->argument)
    bad("the problem breaks the argument contract (" + v->why + "): it needs expect_error: " + v->argument);
  if (!v && !expect_error.empty()) bad("expect_error: " + expect_error + " given, but the problem is valid");
}

std::string problem_id(const Problem& p) { return fields().id(p); }
Problem parse_problem_id(std::string_view id) { return fields().parse_id(id); }

ExactRanges exact_ranges(const Problem& p) {
  ExactRanges r;
  r.exp_lo =
      p.recipe == Recipe::nvfp4 ? -2 : p.scale_exp - 2;  // nvfp4 moves scale_exp into g (ue4m3's range is narrow)
  auto ceil_log2 = [](int64_t n) {
    int b = 0;
    while ((int64_t{1} << b) < n) ++b;
    return b;
  };
  const int64_t K = std::max<int64_t>(p.k, 1);
  const int64_t run = p.fast_accum ? K : std::min<int64_t>(K, kExactRun);
  // Bits of a term's magnitude in quanta that keep runs of `run` terms below 2^(14-1) and the
  // whole sum below 2^23 quanta (fp32, with room for the bias: 8 quanta).
  const int avail = std::min(kExactBits - 1 - ceil_log2(run), 23 - ceil_log2(K));
  r.exp_span = avail >= 2 ? 1 : 0;  // distinct scales cost 2 bits (both operands' exponents)
  const int code_bits = std::max(0, avail - 2 * r.exp_span);
  const int a_bits = code_bits / 2;
  r.a_max = std::min(integer_range(p.a_elem), 1 << a_bits);
  r.b_max = std::min(integer_range(p.b_elem), 1 << (code_bits - a_bits));
  r.term_bits = ceil_log2(int64_t{r.a_max} * r.b_max) + 2 * r.exp_span;
  return r;
}

int64_t scale_index(const Problem& p, char which, int64_t r, int64_t kb) {
  const quant::ScaleLayout layout = which == 'a' ? p.a_scale_layout() : p.b_scale_layout();
  const int64_t blk = scale_block_k(p);
  const int64_t cols = blk ? ceil_div(p.k, blk) : 1;
  switch (p.recipe) {
    case Recipe::tensorwise: return 0;
    case Recipe::rowwise: return r;
    default: break;
  }
  if (layout == quant::ScaleLayout::swizzled)
    return static_cast<int64_t>(
        quant::swizzled_offset(static_cast<size_t>(r), static_cast<size_t>(kb), static_cast<size_t>(cols)));
  const bool block128_rows = which == 'b' && p.recipe == Recipe::blockwise_1x128_128x128;
  // row_major and column_major: the tensor's strides place (row, block).
  return (block128_rows ? r / 128 : r) * cols + kb;
}

double scale_at(const Problem& p, const TensorMap& in, char which, int64_t r, int64_t kb) {
  return in.at(which == 'a' ? "a_scale" : "b_scale").get(scale_index(p, which, r, kb));
}

}  // namespace opcts::scaled_mm
