// Quantizers of the scaled-GEMM recipes (fp32-scale fp8, MX, NVFP4), their scale layouts and dequantization.
#include "refimpl/quant.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "core/spellings.hpp"

namespace opcts::quant {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool is_fp32_recipe(Recipe r) {
  return r == Recipe::tensorwise || r == Recipe::rowwise || r == Recipe::blockwise_1x128 ||
         r == Recipe::blockwise_128x128;
}

std::string_view recipe_stem(Recipe r) {
  switch (r) {
    case Recipe::tensorwise: return "tensorwise";
    case Recipe::rowwise: return "rowwise";
    case Recipe::blockwise_1x128: return "blockwise_1x128";
    case Recipe::blockwise_128x128: return "blockwise_128x128";
    case Recipe::mx: return "mx";
    case Recipe::nvfp4: return "nvfp4";
  }
  return "?";
}

std::string_view mx_stem(DType e) {
  switch (e) {
    case DType::e4m3fn: return "mxfp8_e4m3";
    case DType::e5m2: return "mxfp8_e5m2";
    case DType::e2m3fn: return "mxfp6_e2m3";
    case DType::e3m2fn: return "mxfp6_e3m2";
    case DType::e2m1fn: return "mxfp4";
    default: return "mx_?";
  }
}

// The element code of v: nearest-even, overflow clamped to ±max; every NaN becomes the
// format's +NaN code (or +max for formats without NaN), whatever sign arithmetic gave it.
uint64_t encode_element(DType t, double v) { return encode(t, std::isnan(v) ? kNaN : v, Overflow::satfinite); }

// NaN-propagating max |x| over rows [r0, r1) × cols [c0, c1).
// The input's element i (row-major) as a double: straight from the storage for a contiguous
// fp32 tensor (the usual input, hundreds of millions of elements at once), else through the
// codec; the same value either way.
struct Values {
  const HostTensor* x;
  const float* f32;
  explicit Values(const HostTensor& t)
      : x(&t),
        f32(t.dtype() == DType::fp32 && t.is_contiguous() ? reinterpret_cast<const float*>(t.data()) : nullptr) {}
  double operator()(int64_t i) const { return f32 ? static_cast<double>(f32[i]) : x->get(i); }
};

float block_amax(const Values& x, int64_t K, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  float amax = 0.0f;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) {
      const auto a = static_cast<float>(std::fabs(x(r * K + c)));
      if (std::isnan(a)) return std::numeric_limits<float>::quiet_NaN();
      amax = std::max(amax, a);
    }
  return amax;
}

float clamp_keep_nan(float v, float lo, float hi) { return std::isnan(v) ? v : std::clamp(v, lo, hi); }

}  // namespace

void Scheme::validate() const {
  bool ok = false;
  switch (recipe) {
    case Recipe::tensorwise:
    case Recipe::rowwise:
    case Recipe::blockwise_1x128:
    case Recipe::blockwise_128x128:
      ok = element == DType::e4m3fn || element == DType::e5m2 || element == DType::e4m3fnuz ||
           element == DType::e5m2fnuz;
      break;
    case Recipe::mx:
      ok = element == DType::e4m3fn || element == DType::e5m2 || element == DType::e2m3fn || element == DType::e3m2fn ||
           element == DType::e2m1fn;
      break;
    case Recipe::nvfp4: ok = element == DType::e2m1fn; break;
  }
  if (!ok)
    throw std::invalid_argument("quant: recipe " + std::string(recipe_stem(recipe)) + " does not take element type " +
                                std::string(name(element)));
}

std::string to_string(const Scheme& s) {
  s.validate();
  if (is_fp32_recipe(s.recipe)) {
    std::string out(recipe_stem(s.recipe));
    if (s.element != DType::e4m3fn) out.append("_").append(name(s.element));
    return out;
  }
  if (s.recipe == Recipe::mx)
    return std::string(mx_stem(s.element)) + (s.mx_mode == MxScaleMode::rceil ? "_rceil" : "");
  return s.global_scale ? "nvfp4" : "nvfp4_noglobal";
}

const std::vector<Scheme>& all_schemes() {
  static const std::vector<Scheme> schemes = [] {
    std::vector<Scheme> v;
    for (Recipe r : {Recipe::tensorwise, Recipe::rowwise, Recipe::blockwise_1x128, Recipe::blockwise_128x128})
      for (DType e : {DType::e4m3fn, DType::e5m2, DType::e4m3fnuz, DType::e5m2fnuz})
        v.push_back({.recipe = r, .element = e});
    for (DType e : {DType::e4m3fn, DType::e5m2, DType::e2m3fn, DType::e3m2fn, DType::e2m1fn})
      for (MxScaleMode m : {MxScaleMode::floor, MxScaleMode::rceil})
        v.push_back({.recipe = Recipe::mx, .element = e, .mx_mode = m});
    for (bool g : {true, false}) v.push_back({.recipe = Recipe::nvfp4, .element = DType::e2m1fn, .global_scale = g});
    return v;
  }();
  return schemes;
}

Scheme parse_scheme(std::string_view text) {
  static const std::map<std::string, Scheme, std::less<>> names = [] {
    std::map<std::string, Scheme, std::less<>> m;
    for (const Scheme& s : all_schemes()) {
      m[to_string(s)] = s;
      if (is_fp32_recipe(s.recipe) && s.element == DType::e4m3fn) m[to_string(s) + "_e4m3fn"] = s;
      if (s.recipe == Recipe::mx && s.mx_mode == MxScaleMode::floor) m[to_string(s) + "_floor"] = s;
    }
    return m;
  }();
  if (auto it = names.find(text); it != names.end()) return it->second;
  std::string known;
  for (const Scheme& s : all_schemes()) known += (known.empty() ? "" : ", ") + to_string(s);
  throw std::invalid_argument("quant: unknown scheme '" + std::string(text) + "'; known: " + known);
}

constexpr Spellings<ScaleLayout, 3> kScaleLayouts{{{ScaleLayout::row_major, "row_major"},
                                                   {ScaleLayout::column_major, "column_major"},
                                                   {ScaleLayout::swizzled, "swizzled"}}};

std::string_view to_string(ScaleLayout l) { return kScaleLayouts.of(l); }

ScaleLayout parse_scale_layout(std::string_view text) {
  if (const auto l = kScaleLayouts.parse(text)) return *l;
  throw std::invalid_argument("quant: unknown scale layout '" + std::string(text) +
                              "'; known: " + kScaleLayouts.joined(", "));
}

bool layout_supported(const Scheme& s, ScaleLayout l) {
  switch (l) {
    case ScaleLayout::row_major: return true;
    case ScaleLayout::column_major: return is_fp32_recipe(s.recipe);
    case ScaleLayout::swizzled: return s.recipe == Recipe::mx || s.recipe == Recipe::nvfp4;
  }
  return false;
}

DType scale_dtype(const Scheme& s) {
  if (s.recipe == Recipe::mx) return DType::e8m0fnu;
  if (s.recipe == Recipe::nvfp4) return DType::ue4m3;
  return DType::fp32;
}

int mx_emax(DType element) {
  switch (element) {
    case DType::e4m3fn: return 8;
    case DType::e5m2: return 15;
    case DType::e2m3fn: return 2;
    case DType::e3m2fn: return 4;
    case DType::e2m1fn: return 2;
    default: throw std::invalid_argument("quant: " + std::string(name(element)) + " is not an MX element type");
  }
}

ScaleGrid scale_grid(const Scheme& s, int64_t R, int64_t K) {
  const auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  switch (s.recipe) {
    case Recipe::tensorwise: return {.block_rows = R, .block_cols = K, .rows = 1, .cols = 1};
    case Recipe::rowwise: return {.block_rows = 1, .block_cols = K, .rows = R, .cols = 1};
    case Recipe::blockwise_1x128: return {.block_rows = 1, .block_cols = 128, .rows = R, .cols = cdiv(K, 128)};
    case Recipe::blockwise_128x128:
      return {.block_rows = 128, .block_cols = 128, .rows = cdiv(R, 128), .cols = cdiv(K, 128)};
    case Recipe::mx: return {.block_rows = 1, .block_cols = 32, .rows = R, .cols = cdiv(K, 32)};
    case Recipe::nvfp4: return {.block_rows = 1, .block_cols = 16, .rows = R, .cols = cdiv(K, 16)};
  }
  return {};
}

float fp32_recipe_scale(float amax, DType element) {
  if (!std::isfinite(amax)) return amax;  // NaN, or +Inf (amax is a magnitude)
  if (amax == 0.0f) return 1.0f;
  const float d = amax / static_cast<float>(dtype_info(element).max_finite);  // IEEE fp32 division
  return d == 0.0f ? std::numeric_limits<float>::denorm_min() : d;
}

uint8_t mx_scale_code(float amax, DType element, MxScaleMode mode) {
  if (!std::isfinite(amax)) return 0xFF;
  // encode_e8m0 clamps below to 2^-127 (code 0x00, also for 0) and above to 2^127 (0xFE).
  if (mode == MxScaleMode::floor)  // floor(log2 amax) − emax = floor(log2(amax · 2^-emax)), exact
    return encode_e8m0(std::ldexp(static_cast<double>(amax), -mx_emax(element)), ScaleRounding::floor);
  // amax / max in double: an fp32 amax over a ≤3-bit max is never within 2^-53 of a power of two
  // without being one, so rounding the quotient cannot move the ceiling.
  return encode_e8m0(static_cast<double>(amax) / dtype_info(element).max_finite, ScaleRounding::ceil);
}

float nvfp4_global_scale(float amax_tensor) {
  if (!std::isfinite(amax_tensor)) return amax_tensor;
  if (amax_tensor == 0.0f) return 1.0f;
  return std::max(amax_tensor / 2688.0f, std::ldexp(1.0f, -126));
}

uint8_t nvfp4_block_scale_code(float amax_block, float g) {
  const float per_block = amax_block / 6.0f;
  const float scaled = clamp_keep_nan(per_block / g, std::ldexp(1.0f, -6), 448.0f);
  return static_cast<uint8_t>(encode_element(DType::ue4m3, scaled));
}

Quantized quantize(const HostTensor& x, const Scheme& s, ScaleLayout layout) {
  s.validate();
  if (x.shape().size() != 2) throw std::invalid_argument("quant: the input must be 2-D [R, K]");
  if (x.dtype() != DType::fp32 && x.dtype() != DType::bf16 && x.dtype() != DType::fp16)
    throw std::invalid_argument("quant: the input must be fp32, bf16 or fp16, not " + std::string(name(x.dtype())));
  if (!layout_supported(s, layout))
    throw std::invalid_argument("quant: scheme " + to_string(s) + " has no " + std::string(to_string(layout)) +
                                " scale layout");
  const int64_t R = x.dim(0), K = x.dim(1);
  Quantized q;
  q.scheme = s;
  q.layout = layout;
  q.rows = R;
  q.cols = K;
  q.grid = scale_grid(s, R, K);
  q.data = HostTensor(s.element, {R, K});
  const ScaleGrid& g = q.grid;
  HostTensor scales(scale_dtype(s), {g.rows, g.cols});

  float global = 1.0f;
  const Values xv(x);
  // Codes of 8 bits go straight into the fresh contiguous storage; 4-bit ones pack in pairs.
  auto* bytes = dtype_info(s.element).bits == 8 ? reinterpret_cast<uint8_t*>(q.data.data()) : nullptr;
  const auto put = [&](int64_t i, uint64_t code) {
    if (bytes) bytes[i] = static_cast<uint8_t>(code);
    else q.data.set_code(i, code);
  };
  if (s.recipe == Recipe::nvfp4 && s.global_scale) global = nvfp4_global_scale(block_amax(xv, K, 0, R, 0, K));
  q.global_scale = global;

  // Blocks are independent; threads share no byte of the data unless 4-bit codes of two
  // rows meet in one byte (odd K), so that case stays serial.
  const bool parallel = dtype_info(s.element).bits >= 8 || K % 2 == 0;
#pragma omp parallel for collapse(2) schedule(dynamic, 16) if (parallel && R * K > (1 << 16))
  for (int64_t br = 0; br < g.rows; ++br)
    for (int64_t bc = 0; bc < g.cols; ++bc) {
      const int64_t r0 = br * g.block_rows, r1 = std::min(R, r0 + g.block_rows);
      const int64_t c0 = bc * g.block_cols, c1 = std::min(K, c0 + g.block_cols);
      const float amax = block_amax(xv, K, r0, r1, c0, c1);
      const int64_t si = br * g.cols + bc;
      switch (s.recipe) {
        case Recipe::mx: {
          const uint8_t code = mx_scale_code(amax, s.element, s.mx_mode);
          scales.set_code(si, code);
          // 2^-e (exact; e ∈ [−127, 127]) or NaN for the 0xFF scale.
          const double inv = code == 0xFF ? kNaN : std::ldexp(1.0, 127 - code);
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t c = c0; c < c1; ++c) put(r * K + c, encode_element(s.element, xv(r * K + c) * inv));
          break;
        }
        case Recipe::nvfp4: {
          const uint8_t code = nvfp4_block_scale_code(amax, global);
          scales.set_code(si, code);
          const float total = global * static_cast<float>(decode(DType::ue4m3, code));
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t c = c0; c < c1; ++c) {
              const float v = clamp_keep_nan(static_cast<float>(xv(r * K + c)) / total, -6.0f, 6.0f);
              put(r * K + c, encode_element(DType::e2m1fn, v));
            }
          break;
        }
        default: {
          const float d = fp32_recipe_scale(amax, s.element);
          scales.set(si, d);
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t c = c0; c < c1; ++c) put(r * K + c, encode_element(s.element, xv(r * K + c) / d));
          break;
        }
      }
    }

  switch (layout) {
    case ScaleLayout::row_major: q.scale = std::move(scales); break;
    case ScaleLayout::column_major: {
      q.scale = HostTensor(scale_dtype(s), {g.rows, g.cols}, {1, g.rows}, g.rows * g.cols);
      for (int64_t i = 0; i < scales.numel(); ++i) q.scale.set_code(i, scales.code(i));
      break;
    }
    case ScaleLayout::swizzled: q.scale = swizzle(scales); break;
  }
  return q;
}

uint64_t scale_code(const Quantized& q, int64_t br, int64_t bc) {
  if (br < 0 || br >= q.grid.rows || bc < 0 || bc >= q.grid.cols)
    throw std::out_of_range("quant: scale block (" + std::to_string(br) + ", " + std::to_string(bc) +
                            ") is outside the " + std::to_string(q.grid.rows) + "x" + std::to_string(q.grid.cols) +
                            " grid");
  if (q.layout == ScaleLayout::swizzled)
    return q.scale.code(static_cast<int64_t>(
        swizzled_offset(static_cast<size_t>(br), static_cast<size_t>(bc), static_cast<size_t>(q.grid.cols))));
  return q.scale.code(br * q.grid.cols + bc);  // row_major and column_major: the strides place it
}

double scale_value(const Quantized& q, int64_t br, int64_t bc) {
  return decode(q.scale.dtype(), scale_code(q, br, bc));
}

double element_value(const Quantized& q, int64_t r, int64_t k) {
  const double e = decode(q.data.dtype(), q.data.code(r * q.cols + k));
  return e * scale_value(q, r / std::max<int64_t>(q.grid.block_rows, 1), k / std::max<int64_t>(q.grid.block_cols, 1)) *
         q.global_scale;
}

HostTensor dequantize(const Quantized& q) {
  HostTensor out(DType::fp32, {q.rows, q.cols});
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t k = 0; k < q.cols; ++k) out.set(r * q.cols + k, element_value(q, r, k));
  return out;
}

size_t swizzled_offset(size_t r, size_t c, size_t scale_cols) {
  const size_t col_tiles = (scale_cols + 3) / 4;  // S'/4
  return ((r / 128) * col_tiles + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + (c % 4);
}

size_t swizzled_size(size_t rows, size_t scale_cols) { return (rows + 127) / 128 * 128 * ((scale_cols + 3) / 4 * 4); }

HostTensor swizzle(const HostTensor& row_major_scales) {
  if (row_major_scales.shape().size() != 2)
    throw std::invalid_argument("quant: swizzle takes 2-D [rows, scale_cols] scales");
  const auto rows = static_cast<size_t>(row_major_scales.dim(0));
  const auto cols = static_cast<size_t>(row_major_scales.dim(1));
  HostTensor out(row_major_scales.dtype(), {static_cast<int64_t>(swizzled_size(rows, cols))});  // padding: code 0
  if (dtype_info(out.dtype()).bits == 8 && row_major_scales.is_contiguous()) {                  // e8m0 and ue4m3: bytes
    const std::byte* in = row_major_scales.data();
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) out.data()[swizzled_offset(r, c, cols)] = in[r * cols + c];
    return out;
  }
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c)
      out.set_code(static_cast<int64_t>(swizzled_offset(r, c, cols)),
                   row_major_scales.code(static_cast<int64_t>(r * cols + c)));
  return out;
}

HostTensor unswizzle(const HostTensor& swizzled, size_t rows, size_t scale_cols) {
  if (swizzled.shape().size() != 1 || static_cast<size_t>(swizzled.numel()) != swizzled_size(rows, scale_cols))
    throw std::invalid_argument("quant: unswizzle expects a 1-D tensor of " +
                                std::to_string(swizzled_size(rows, scale_cols)) + " codes for " + std::to_string(rows) +
                                "x" + std::to_string(scale_cols) + " scales, got " + std::to_string(swizzled.numel()));
  HostTensor out(swizzled.dtype(), {static_cast<int64_t>(rows), static_cast<int64_t>(scale_cols)});
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < scale_cols; ++c)
      out.set_code(static_cast<int64_t>(r * scale_cols + c),
                   swizzled.code(static_cast<int64_t>(swizzled_offset(r, c, scale_cols))));
  return out;
}

}  // namespace opcts::quant
