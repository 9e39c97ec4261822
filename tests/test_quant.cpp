// Tests of refimpl/quant: scale rules, per-element rounding bounds, special blocks, layouts and packing.
#include "refimpl/quant.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <set>
#include <vector>

#include "numerics/rng.hpp"

namespace opcts::quant {

// gtest prints parameters through this (found by ADL, so outside the anonymous namespace).
void PrintTo(const Scheme& s, std::ostream* os) { *os << to_string(s); }

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const FloatFormat& fmt(DType t) { return dtype_info(t).format; }
double max_of(DType t) { return dtype_info(t).max_finite; }

// Half the spacing of the format's values around magnitude v ≤ max (v in [2^e, 2^(e+1)) has
// spacing 2^(e − mantissa_bits); below the smallest normal the spacing is the subnormal one):
// the largest error of round-to-nearest at v. Derived from the field widths, not the codec.
double half_spacing(DType t, double v) {
  const FloatFormat& f = fmt(t);
  const int emin = 1 - f.bias;
  const int e = v > 0 ? std::max(std::ilogb(v), emin) : emin;
  return std::ldexp(1.0, e - f.mantissa_bits - 1);
}

// floor(log2 a) and the smallest e with a ≤ m·2^e, by stepping powers of two (independent of
// frexp and the e8m0 codec).
int floor_log2(double a) {
  int e = 0;
  while (std::ldexp(1.0, e) > a) --e;
  while (std::ldexp(1.0, e + 1) <= a) ++e;
  return e;
}
int ceil_log2_ratio(double a, double m) {
  int e = floor_log2(a / m) - 2;
  while (a > m * std::ldexp(1.0, e)) ++e;
  return e;
}

// Normal values with a different power-of-two magnitude per 16 columns of each row (2^-24 up to
// 2^(span−25)),
// every 7th element zero, and row 3 scaled into fp32 subnormals (≈2^-140), so scales of every
// recipe span many binades and hit their lower clamps.
HostTensor random_input(int64_t R, int64_t K, uint64_t seed, int span = 48) {
  HostTensor x(DType::fp32, {R, K});
  fill_normal(x, seed, 0, 1.0);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t i = r * K + k;
      const int e =
          r == 3
              ? -140
              : static_cast<int>(std::floor(uniform01(seed, 1, static_cast<uint64_t>(r * 4096 + k / 16)) * span)) - 24;
      x.set(i, i % 7 == 0 ? 0.0 : std::ldexp(x.get(i), e));
    }
  return x;
}

// NaN-propagating max |x| over a block, in double.
double amax_of(const HostTensor& x, const Quantized& q, int64_t br, int64_t bc) {
  double a = 0;
  for (int64_t r = br * q.grid.block_rows; r < std::min(q.rows, (br + 1) * q.grid.block_rows); ++r)
    for (int64_t k = bc * q.grid.block_cols; k < std::min(q.cols, (bc + 1) * q.grid.block_cols); ++k) {
      const double v = std::fabs(x.get(r * q.cols + k));
      if (std::isnan(v)) return kNaN;
      a = std::max(a, v);
    }
  return a;
}

int64_t block_row(const Quantized& q, int64_t r) { return r / std::max<int64_t>(q.grid.block_rows, 1); }
int64_t block_col(const Quantized& q, int64_t k) { return k / std::max<int64_t>(q.grid.block_cols, 1); }

// Every element of a finite-input quantization: |x − dequant| ≤ half the element spacing at
// |x/unit| times the unit (unit = block scale · global scale) where |x/unit| ≤ max; where it is
// above max the value must be exactly ±max·unit (the clamp, whose error is |x| − max·unit).
// `fp32_slack` widens the bound by |x/unit|·slack for NVFP4, whose x/(g·s) is an fp32 quotient
// by an fp32 product (two roundings of 2^-24 each, so slack 2^-22). Returns elements with q ≠ 0.
int64_t expect_rounding_bound(const Quantized& q, const HostTensor& x, double fp32_slack) {
  const DType el = q.scheme.element;
  int64_t nonzero = 0, failures = 0;
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t k = 0; k < q.cols; ++k) {
      const double xv = x.get(r * q.cols + k);
      const double unit = scale_value(q, block_row(q, r), block_col(q, k)) * q.global_scale;
      const double deq = element_value(q, r, k);
      const double v = std::fabs(xv) / unit;
      if (deq != 0) ++nonzero;
      if (v > max_of(el) * (1 + fp32_slack)) {
        if (deq != std::copysign(max_of(el) * unit, xv) && ++failures <= 5)
          ADD_FAILURE() << to_string(q.scheme) << " (" << r << "," << k << ") x=" << xv << " |x/unit|=" << v
                        << " beyond max must clamp to " << max_of(el) * unit << ", got " << deq;
        continue;
      }
      const double bound = (half_spacing(el, std::min(v, max_of(el))) + v * fp32_slack) * unit;
      if (!(std::fabs(xv - deq) <= bound) && ++failures <= 5)
        ADD_FAILURE() << to_string(q.scheme) << " (" << r << "," << k << ") x=" << xv << " dequant=" << deq << " error "
                      << std::fabs(xv - deq) << " > bound " << bound << " (unit " << unit << ")";
    }
  EXPECT_EQ(failures, 0);
  return nonzero;
}

// The scale of every block against the rule of its recipe, derived independently.
void expect_scale_rules(const Quantized& q, const HostTensor& x) {
  const DType el = q.scheme.element;
  int failures = 0;
  for (int64_t br = 0; br < q.grid.rows; ++br)
    for (int64_t bc = 0; bc < q.grid.cols; ++bc) {
      const double amax = amax_of(x, q, br, bc);
      const double s = scale_value(q, br, bc);
      double want = s;
      switch (q.scheme.recipe) {
        case Recipe::mx:
          if (q.scheme.mx_mode == MxScaleMode::floor)
            want = std::ldexp(1.0, amax == 0 ? -127 : std::clamp(floor_log2(amax) - mx_emax(el), -127, 127));
          else want = std::ldexp(1.0, amax == 0 ? -127 : std::clamp(ceil_log2_ratio(amax, max_of(el)), -127, 127));
          break;
        case Recipe::nvfp4: {  // nearest ue4m3 to clamp((amax/6)/g) up to the fp32 intermediates
          const double t = std::clamp(amax / 6 / q.global_scale, std::ldexp(1.0, -6), 448.0);
          if (std::fabs(s - t) > half_spacing(DType::ue4m3, t) + t * std::ldexp(1.0, -22)) want = t;
          break;
        }
        default: {
          const double d = amax == 0 ? 1.0 : static_cast<double>(static_cast<float>(amax / max_of(el)));
          want = d == 0 ? std::numeric_limits<float>::denorm_min() : d;
          break;
        }
      }
      if (s != want && ++failures <= 5)
        ADD_FAILURE() << to_string(q.scheme) << " block (" << br << "," << bc << ") amax " << amax << ": scale " << s
                      << ", rule gives " << want;
    }
  EXPECT_EQ(failures, 0);
}

// ---------------------------------------------------------------------------------------------
// Scheme names

TEST(QuantScheme, PrintParseRoundTripsEveryScheme) {
  std::set<std::string> names;
  for (const Scheme& s : all_schemes()) {
    const std::string n = to_string(s);
    EXPECT_EQ(parse_scheme(n), s) << n;
    names.insert(n);
  }
  EXPECT_EQ(names.size(), all_schemes().size());  // no two schemes share a name
  EXPECT_EQ(all_schemes().size(), 28u);
}

TEST(QuantScheme, CanonicalNamesAndAliases) {
  EXPECT_EQ(to_string({.recipe = Recipe::tensorwise}), "tensorwise");
  EXPECT_EQ(to_string({.recipe = Recipe::rowwise, .element = DType::e5m2}), "rowwise_e5m2");
  EXPECT_EQ(to_string({.recipe = Recipe::blockwise_128x128, .element = DType::e4m3fnuz}), "blockwise_128x128_e4m3fnuz");
  EXPECT_EQ(to_string({.recipe = Recipe::mx, .element = DType::e2m1fn}), "mxfp4");
  EXPECT_EQ(to_string({.recipe = Recipe::mx, .element = DType::e5m2, .mx_mode = MxScaleMode::rceil}),
            "mxfp8_e5m2_rceil");
  EXPECT_EQ(to_string({.recipe = Recipe::nvfp4, .element = DType::e2m1fn}), "nvfp4");
  EXPECT_EQ(to_string({.recipe = Recipe::nvfp4, .element = DType::e2m1fn, .global_scale = false}), "nvfp4_noglobal");
  EXPECT_EQ(parse_scheme("blockwise_1x128_e4m3fn"), parse_scheme("blockwise_1x128"));
  EXPECT_EQ(parse_scheme("mxfp6_e3m2_floor"), parse_scheme("mxfp6_e3m2"));
  EXPECT_EQ(parse_scheme("mxfp8_e4m3").mx_mode, MxScaleMode::floor);
}

TEST(QuantScheme, RejectsUnknownNamesAndElementTypes) {
  for (const char* bad : {"", "mxfp8", "nvfp4_e4m3", "tensorwise_e2m1fn", "rowwise_", "mxfp4_ceil", "Tensorwise"})
    EXPECT_THROW(parse_scheme(bad), std::invalid_argument) << bad;
  EXPECT_THROW((Scheme{.recipe = Recipe::mx, .element = DType::e4m3fnuz}.validate()), std::invalid_argument);
  EXPECT_THROW((Scheme{.recipe = Recipe::nvfp4, .element = DType::e4m3fn}.validate()), std::invalid_argument);
  EXPECT_THROW((Scheme{.recipe = Recipe::rowwise, .element = DType::e2m1fn}.validate()), std::invalid_argument);
  EXPECT_THROW((Scheme{.recipe = Recipe::tensorwise, .element = DType::fp32}.validate()), std::invalid_argument);
}

TEST(QuantScheme, LayoutNamesAndSupport) {
  for (ScaleLayout l : {ScaleLayout::row_major, ScaleLayout::column_major, ScaleLayout::swizzled})
    EXPECT_EQ(parse_scale_layout(to_string(l)), l);
  EXPECT_THROW(parse_scale_layout("blocked"), std::invalid_argument);
  HostTensor x(DType::fp32, {4, 64});
  EXPECT_THROW(quantize(x, parse_scheme("rowwise"), ScaleLayout::swizzled), std::invalid_argument);
  EXPECT_THROW(quantize(x, parse_scheme("mxfp4"), ScaleLayout::column_major), std::invalid_argument);
  EXPECT_NO_THROW(quantize(x, parse_scheme("nvfp4"), ScaleLayout::swizzled));
  EXPECT_NO_THROW(quantize(x, parse_scheme("blockwise_1x128"), ScaleLayout::column_major));
  EXPECT_THROW(quantize(HostTensor(DType::fp32, {4, 4, 4}), parse_scheme("mxfp4")), std::invalid_argument);
  EXPECT_THROW(quantize(HostTensor(DType::e4m3fn, {4, 32}), parse_scheme("mxfp4")), std::invalid_argument);
}

TEST(QuantScheme, ScaleGridsCoverPartialBlocks) {
  const auto grid = [](const char* s) {
    const ScaleGrid g = scale_grid(parse_scheme(s), 129, 130);
    return std::vector<int64_t>{g.block_rows, g.block_cols, g.rows, g.cols};
  };
  EXPECT_EQ(grid("tensorwise"), (std::vector<int64_t>{129, 130, 1, 1}));
  EXPECT_EQ(grid("rowwise"), (std::vector<int64_t>{1, 130, 129, 1}));
  EXPECT_EQ(grid("blockwise_1x128"), (std::vector<int64_t>{1, 128, 129, 2}));
  EXPECT_EQ(grid("blockwise_128x128"), (std::vector<int64_t>{128, 128, 2, 2}));
  EXPECT_EQ(grid("mxfp8_e4m3"), (std::vector<int64_t>{1, 32, 129, 5}));
  EXPECT_EQ(grid("nvfp4"), (std::vector<int64_t>{1, 16, 129, 9}));
  EXPECT_EQ(scale_dtype(parse_scheme("mxfp4")), DType::e8m0fnu);
  EXPECT_EQ(scale_dtype(parse_scheme("nvfp4")), DType::ue4m3);
  EXPECT_EQ(scale_dtype(parse_scheme("blockwise_128x128")), DType::fp32);
}

// ---------------------------------------------------------------------------------------------
// Rounding bounds and scale rules on random data, every scheme

class QuantRoundTrip : public testing::TestWithParam<Scheme> {};

TEST_P(QuantRoundTrip, EveryElementWithinHalfSpacingOfItsBlockScale) {
  const Scheme s = GetParam();
  const HostTensor x = random_input(131, 300, seed_of("quant/roundtrip/" + to_string(s)));
  const Quantized q = quantize(x, s);
  ASSERT_EQ(q.data.dtype(), s.element);
  ASSERT_EQ(q.data.shape(), (std::vector<int64_t>{131, 300}));
  const double slack = s.recipe == Recipe::nvfp4 ? std::ldexp(1.0, -22) : 0.0;
  const int64_t nonzero = expect_rounding_bound(q, x, slack);
  EXPECT_GT(nonzero, x.numel() / 4) << "too few non-zero codes for the check to mean anything";
  expect_scale_rules(q, x);
}

TEST_P(QuantRoundTrip, ScalesUseTheElementRange) {
  // The largest element of a (finite, non-zero) block lands where the recipe puts it: fp32
  // recipes at max (within fp32 rounding of d), MX RCEIL in (max/2, max], MX FLOOR in
  // [2^emax, 2^(emax+1)), except where the e8m0 clamp at 2^-127 holds the scale up.
  // NVFP4: amax/(g·s) within the ue4m3 rounding of 6 (relative 2^-4, plus fp32 slack) wherever
  // s is not held at a clamp (2^-6 or 448).
  const Scheme s = GetParam();
  const HostTensor x = random_input(64, 256, seed_of("quant/range/" + to_string(s)));
  const Quantized q = quantize(x, s);
  const double mx = max_of(s.element);
  int checked = 0;
  for (int64_t br = 0; br < q.grid.rows; ++br)
    for (int64_t bc = 0; bc < q.grid.cols; ++bc) {
      const double amax = amax_of(x, q, br, bc);
      const double sv = scale_value(q, br, bc);
      if (amax == 0 || sv == std::ldexp(1.0, -127) || sv < std::numeric_limits<float>::min()) continue;
      if (s.recipe == Recipe::nvfp4 && (sv == std::ldexp(1.0, -6) || sv == 448)) continue;
      const double top = amax / (sv * q.global_scale);
      ++checked;
      if (s.recipe == Recipe::nvfp4) {
        EXPECT_NEAR(top, 6.0, 6.0 * (std::ldexp(1.0, -4) + std::ldexp(1.0, -21))) << br << "," << bc;
      } else if (s.recipe != Recipe::mx) {
        EXPECT_NEAR(top, mx, mx * std::ldexp(1.0, -23)) << br << "," << bc;
      } else if (s.mx_mode == MxScaleMode::rceil) {
        EXPECT_TRUE(top > mx / 2 && top <= mx) << br << "," << bc << " top " << top;
      } else {
        const double lo = std::ldexp(1.0, mx_emax(s.element));
        EXPECT_TRUE(top >= lo && top < 2 * lo) << br << "," << bc << " top " << top;
      }
    }
  EXPECT_GT(checked, 0);
}

std::string scheme_name(const testing::TestParamInfo<Scheme>& info) { return to_string(info.param); }
INSTANTIATE_TEST_SUITE_P(Quant, QuantRoundTrip, testing::ValuesIn(all_schemes()), scheme_name);

// ---------------------------------------------------------------------------------------------
// MX scale modes

const std::vector<DType> kMxElements{DType::e4m3fn, DType::e5m2, DType::e2m3fn, DType::e3m2fn, DType::e2m1fn};

// A 1×32 block whose amax is `amax` (other elements smaller, both signs).
HostTensor block_with_amax(double amax) {
  HostTensor x(DType::fp32, {1, 32});
  for (int k = 0; k < 32; ++k) x.set(k, (k % 2 ? -1 : 1) * amax * (k + 1) / 33.0);
  x.set(17, -amax);
  return x;
}

TEST(QuantMxModes, FloorAndRceilDifferExactlyWhereTheSignificandExceedsMaxsSignificand) {
  // FLOOR: e_f = floor(log2 amax) − emax; RCEIL: e_r = ceil(log2(amax/max)). Writing amax = m·2^E
  // and max = M·2^emax (m, M in [1, 2)), e_r = e_f + 1 when m > M and e_r = e_f otherwise: the
  // modes differ exactly where amax's significand exceeds max's (1.75 e4m3/e5m2/e3m2, 1.875
  // e2m3, 1.5 e2m1) — e.g. amax = 1.5·2^E is not a power of two yet both modes agree for e4m3.
  // There, and only there, FLOOR puts the block's amax above max (it saturates) while RCEIL
  // never does.
  for (DType el : kMxElements) {
    const double M = max_of(el) / std::ldexp(1.0, mx_emax(el));
    int differ = 0, same = 0;
    for (uint64_t i = 0; i < 4000; ++i) {
      const double m = 1 + std::floor(uniform01(7, 0, i) * 8388608) / 8388608;  // fp32 significand
      const int E = static_cast<int>(std::floor(uniform01(7, 1, i) * 200)) - 100;
      const auto amax = static_cast<float>(std::ldexp(m, E));
      const int f = mx_scale_code(amax, el, MxScaleMode::floor);
      const int r = mx_scale_code(amax, el, MxScaleMode::rceil);
      const bool floor_saturates = amax / std::ldexp(1.0, f - 127) > max_of(el);
      const bool rceil_saturates = amax / std::ldexp(1.0, r - 127) > max_of(el);
      EXPECT_EQ(r - f, m > M ? 1 : 0) << name(el) << " amax " << amax;
      EXPECT_EQ(floor_saturates, m > M) << name(el) << " amax " << amax;
      EXPECT_FALSE(rceil_saturates) << name(el) << " amax " << amax;
      (r != f ? differ : same)++;
    }
    EXPECT_GT(differ, 100) << name(el);
    EXPECT_GT(same, 100) << name(el);
    // The named points: amax = max·2^k agrees; a significand one fp32 ulp above max's differs.
    const auto at_max = static_cast<float>(std::ldexp(max_of(el), 3));
    EXPECT_EQ(mx_scale_code(at_max, el, MxScaleMode::floor), mx_scale_code(at_max, el, MxScaleMode::rceil));
    const float above = std::nextafter(at_max, 1e30f);
    EXPECT_EQ(mx_scale_code(above, el, MxScaleMode::rceil), mx_scale_code(above, el, MxScaleMode::floor) + 1);
  }
  EXPECT_EQ(mx_scale_code(1.5f, DType::e4m3fn, MxScaleMode::floor),
            mx_scale_code(1.5f, DType::e4m3fn, MxScaleMode::rceil));
  EXPECT_NE(mx_scale_code(1.875f, DType::e4m3fn, MxScaleMode::floor),
            mx_scale_code(1.875f, DType::e4m3fn, MxScaleMode::rceil));
}

TEST(QuantMxModes, FloorSaturationIsTheClampError) {
  // amax = 1.99·2^10: FLOOR gives e = 10 − emax, so amax/2^e = 1.99·2^emax > max: the element is
  // clamped to max and its error is exactly |x| − max·2^e (larger than half a spacing for e4m3:
  // 509.4 − 448 = 61.4 > 16). RCEIL on the same block keeps every element within half a spacing.
  for (DType el : kMxElements) {
    const double amax = 1.99 * 1024;
    const HostTensor x = block_with_amax(amax);
    const Quantized fl = quantize(x, {.recipe = Recipe::mx, .element = el, .mx_mode = MxScaleMode::floor});
    const double unit = scale_value(fl, 0, 0);
    EXPECT_EQ(unit, std::ldexp(1.0, 10 - mx_emax(el))) << name(el);
    const double xv = x.get(17);
    EXPECT_EQ(element_value(fl, 0, 17), -max_of(el) * unit) << name(el);
    const double clamp_error = std::fabs(xv) - max_of(el) * unit;
    EXPECT_EQ(std::fabs(xv - element_value(fl, 0, 17)), clamp_error) << name(el);
    EXPECT_GT(clamp_error, half_spacing(el, max_of(el)) * unit) << name(el) << ": not a saturating case";
    const Quantized rc = quantize(x, {.recipe = Recipe::mx, .element = el, .mx_mode = MxScaleMode::rceil});
    EXPECT_EQ(scale_value(rc, 0, 0), 2 * unit) << name(el);
    expect_rounding_bound(rc, x, 0);
  }
}

TEST(QuantMxModes, ScaleCodesAtTheClampsAndSpecials) {
  // Tiny amax clamps e at −127 (code 0x00); zero too. Non-finite amax → 0xFF under both modes.
  for (DType el : kMxElements)
    for (MxScaleMode m : {MxScaleMode::floor, MxScaleMode::rceil}) {
      EXPECT_EQ(mx_scale_code(0.0f, el, m), 0x00);
      EXPECT_EQ(mx_scale_code(std::numeric_limits<float>::denorm_min(), el, m), 0x00);
      EXPECT_EQ(mx_scale_code(std::numeric_limits<float>::infinity(), el, m), 0xFF);
      EXPECT_EQ(mx_scale_code(std::numeric_limits<float>::quiet_NaN(), el, m), 0xFF);
      EXPECT_EQ(mx_scale_code(std::numeric_limits<float>::max(), el, m),
                127 + (m == MxScaleMode::floor ? 127 - mx_emax(el)
                                               : ceil_log2_ratio(std::numeric_limits<float>::max(), max_of(el))));
    }
  EXPECT_EQ(mx_scale_code(448.0f, DType::e4m3fn, MxScaleMode::floor), 127);  // floor(log2 448) − 8 = 0
  EXPECT_EQ(mx_scale_code(448.0f, DType::e4m3fn, MxScaleMode::rceil), 127);
  EXPECT_EQ(mx_scale_code(6.0f, DType::e2m1fn, MxScaleMode::rceil), 127);
  EXPECT_EQ(mx_scale_code(6.5f, DType::e2m1fn, MxScaleMode::rceil), 128);
  EXPECT_EQ(mx_scale_code(7.99f, DType::e2m1fn, MxScaleMode::floor), 127);
  // The one e4m3 amax where torchao's fp32 quotient amax·fp32(1/448) underflows to 2^-127 while
  // the exact ceil is 2^-126 (quant.hpp): opcts follows the exact definition.
  EXPECT_EQ(mx_scale_code(0x1.c00002p-119f, DType::e4m3fn, MxScaleMode::rceil), 1);
  EXPECT_EQ(mx_scale_code(0x1.c00000p-119f, DType::e4m3fn, MxScaleMode::rceil), 0);
}

// ---------------------------------------------------------------------------------------------
// Exact cases: representable values under power-of-two scales round-trip bit-exactly

// Codes of `el` that are finite numbers (no NaN/Inf codes).
std::vector<uint64_t> finite_codes(DType el) {
  std::vector<uint64_t> v;
  const int bits = 1 + fmt(el).exponent_bits + fmt(el).mantissa_bits;
  for (uint64_t c = 0; c < (uint64_t{1} << bits); ++c)
    if (std::isfinite(decode(el, c))) v.push_back(c);
  return v;
}

TEST(QuantExact, MxRepresentableBlocksRoundTripBitExactly) {
  // Block b holds representable element values times 2^e_b, with one element 2^emax·2^e_b so
  // both FLOOR and RCEIL pick exactly e_b; codes and dequantized values must come back exactly.
  for (DType el : kMxElements)
    for (MxScaleMode m : {MxScaleMode::floor, MxScaleMode::rceil}) {
      const auto codes = finite_codes(el);
      const int64_t K = 96;
      HostTensor x(DType::fp32, {2, K});
      std::vector<uint64_t> want(2 * K);
      for (int64_t i = 0; i < 2 * K; ++i) {
        const int e = static_cast<int>(i / 32) * 9 - 20;  // per block: −20, −11, −2, 7, 16, 25
        want[i] = i % 32 == 5 ? encode(el, std::ldexp(1.0, mx_emax(el)))
                              : codes[static_cast<size_t>(uniform01(11, 0, i) * codes.size())];
        x.set(i, std::ldexp(decode(el, want[i]), e));
      }
      const Quantized q = quantize(x, {.recipe = Recipe::mx, .element = el, .mx_mode = m});
      for (int64_t i = 0; i < 2 * K; ++i) {
        ASSERT_EQ(q.data.code(i), want[i]) << name(el) << " element " << i;
        ASSERT_EQ(element_value(q, i / K, i % K), x.get(i)) << name(el) << " element " << i;
        ASSERT_EQ(dequantize(q).code(i), x.code(i)) << name(el) << " element " << i;  // fp32 bits, −0 included
      }
      EXPECT_EQ(scale_code(q, 1, 2), static_cast<uint64_t>(127 + 5 * 9 - 20));
    }
}

TEST(QuantExact, Fp32RecipesWithPowerOfTwoScalesRoundTripBitExactly) {
  // A block whose amax is max·2^k gets d = 2^k exactly; its other elements are representable
  // values times 2^k, so the codes and the dequantized values come back exactly.
  for (const char* name_ : {"tensorwise", "rowwise_e5m2", "blockwise_1x128_e4m3fnuz", "blockwise_128x128_e5m2fnuz"}) {
    const Scheme s = parse_scheme(name_);
    const auto codes = finite_codes(s.element);
    const int64_t R = 130, K = 260;
    HostTensor x(DType::fp32, {R, K});
    const ScaleGrid g = scale_grid(s, R, K);
    std::vector<uint64_t> want(R * K);
    auto k_of = [&](int64_t r, int64_t c) {
      return static_cast<int>((r / g.block_rows * 7 + c / g.block_cols * 3) % 40) - 20;
    };
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < K; ++c) {
        const int64_t i = r * K + c;
        const bool top = r % g.block_rows == 0 && c % g.block_cols == 0;  // each block's first element
        want[i] = top ? encode(s.element, -max_of(s.element))
                      : codes[static_cast<size_t>(uniform01(12, 0, i) * codes.size())];
        x.set(i, std::ldexp(decode(s.element, want[i]), k_of(r, c)));
      }
    const Quantized q = quantize(x, s);
    for (int64_t br = 0; br < g.rows; ++br)
      for (int64_t bc = 0; bc < g.cols; ++bc)
        ASSERT_EQ(scale_value(q, br, bc), std::ldexp(1.0, k_of(br * g.block_rows, bc * g.block_cols))) << name_;
    for (int64_t i = 0; i < R * K; ++i) {
      // FNUZ has no −0: a zero code of either sign comes back as +0.
      if (decode(s.element, want[i]) == 0) {
        ASSERT_EQ(decode(s.element, q.data.code(i)), 0.0) << name_ << " " << i;
        continue;
      }
      ASSERT_EQ(q.data.code(i), want[i]) << name_ << " element " << i;
      ASSERT_EQ(element_value(q, i / K, i % K), x.get(i)) << name_ << " element " << i;
    }
  }
}

TEST(QuantExact, Nvfp4RepresentableBlocksRoundTripBitExactly) {
  // Block amax 6·s with s a ue4m3 value: without a global scale the block scale is s exactly.
  // With one, amax_tensor = 2688·2^j makes g = 2^j and block amax 6·s·2^j gives s again.
  const auto codes = finite_codes(DType::e2m1fn);
  for (bool global : {false, true}) {
    const int64_t K = 64;
    HostTensor x(DType::fp32, {3, K});
    std::vector<uint64_t> want(3 * K);
    std::vector<double> s_of(12);
    const double g = global ? std::ldexp(1.0, -3) : 1.0;
    for (int64_t b = 0; b < 12; ++b)
      s_of[b] = decode(DType::ue4m3, static_cast<uint64_t>(8 + b * 9));  // 2^-6 .. 2^3·1.875
    if (global) s_of[11] = 448;                                          // the tensor amax 6·448·g = 2688·g
    for (int64_t i = 0; i < 3 * K; ++i) {
      want[i] =
          i % 16 == 3 ? encode(DType::e2m1fn, 6.0) : codes[static_cast<size_t>(uniform01(13, 0, i) * codes.size())];
      x.set(i, decode(DType::e2m1fn, want[i]) * s_of[i / 16] * g);
    }
    const Quantized q = quantize(x, {.recipe = Recipe::nvfp4, .element = DType::e2m1fn, .global_scale = global});
    EXPECT_EQ(q.global_scale, g);
    for (int64_t b = 0; b < 12; ++b) EXPECT_EQ(scale_value(q, b / 4, b % 4), s_of[b]) << "block " << b;
    for (int64_t i = 0; i < 3 * K; ++i) {
      ASSERT_EQ(q.data.code(i), want[i]) << "global " << global << " element " << i;
      ASSERT_EQ(element_value(q, i / K, i % K), x.get(i)) << "global " << global << " element " << i;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Zero, NaN and Inf blocks

// Codes the element type gives a NaN: its +NaN code, or +max where it has none.
uint64_t nan_code(DType el) {
  switch (el) {
    case DType::e4m3fn: return 0x7F;
    case DType::e5m2: return 0x7E;
    case DType::e4m3fnuz:
    case DType::e5m2fnuz: return 0x80;
    case DType::e2m3fn:
    case DType::e3m2fn: return 0x1F;
    case DType::e2m1fn: return 0x7;
    default: return ~uint64_t{0};
  }
}

TEST(QuantSpecial, ZeroBlocks) {
  // Block 1 of row 0 (and the whole of row 1) is zeros of both signs.
  HostTensor x(DType::fp32, {2, 64});
  for (int k = 0; k < 32; ++k) x.set(k, 0.25 * (k + 1));
  for (int k = 32; k < 64; ++k) x.set(k, k % 2 ? -0.0 : 0.0);
  for (int k = 64; k < 128; ++k) x.set(k, k % 3 ? -0.0 : 0.0);
  for (const Scheme& s : all_schemes()) {
    const Quantized q = quantize(x, s);
    if (s.recipe == Recipe::mx) {
      EXPECT_EQ(scale_code(q, 0, 1), 0x00u) << to_string(s);  // 2^-127
      EXPECT_EQ(scale_code(q, 1, 0), 0x00u) << to_string(s);
    } else if (s.recipe == Recipe::nvfp4) {
      EXPECT_EQ(scale_code(q, 0, 2), 0x08u) << to_string(s);  // clamped to 2^-6
      EXPECT_EQ(scale_value(q, 1, 3), std::ldexp(1.0, -6)) << to_string(s);
    } else if (s.recipe == Recipe::rowwise || s.recipe == Recipe::blockwise_1x128) {
      EXPECT_EQ(scale_value(q, 1, 0), 1.0) << to_string(s);  // amax 0 → scale 1
    }
    for (int64_t i = 32; i < 128; ++i) {
      ASSERT_EQ(decode(s.element, q.data.code(i)), 0.0) << to_string(s) << " element " << i;
      const bool has_neg_zero = fmt(s.element).specials != Specials::fnuz;
      if (has_neg_zero)
        ASSERT_EQ(std::signbit(decode(s.element, q.data.code(i))), std::signbit(x.get(i))) << to_string(s) << " " << i;
      ASSERT_EQ(element_value(q, i / 64, i % 64), 0.0) << to_string(s);
    }
    // The non-zero block still quantizes (within bounds) next to the zero ones.
    EXPECT_NE(q.data.code(31), 0u) << to_string(s);
    EXPECT_NEAR(element_value(q, 0, 31), 8.0, 8.0 * 0.25) << to_string(s);
  }
  // Tensorwise on an all-zero tensor: scale 1, codes 0.
  const Quantized t = quantize(HostTensor(DType::fp32, {3, 5}), parse_scheme("tensorwise"));
  EXPECT_EQ(scale_value(t, 0, 0), 1.0);
}

// x [2, 64] of ordinary values with `v` placed at (0, 40): the special lands in block 1 of row 0
// for mx (cols 32..63), nvfp4 (cols 32..47), and in row 0's only block for rowwise / 1x128.
HostTensor with_special(double v) {
  HostTensor x(DType::fp32, {2, 64});
  for (int i = 0; i < 128; ++i) x.set(i, (i % 7 - 3) * 0.5);  // exact in every MX type at its scale
  x.set(40, v);
  return x;
}

TEST(QuantSpecial, MxNanOrInfMakesTheScale0xFFAndTheBlockNaN) {
  for (double special : {kNaN, kInf, -kInf})
    for (DType el : kMxElements)
      for (MxScaleMode m : {MxScaleMode::floor, MxScaleMode::rceil}) {
        const HostTensor x = with_special(special);
        const Quantized q = quantize(x, {.recipe = Recipe::mx, .element = el, .mx_mode = m});
        const std::string what = std::string(name(el)) + " with " + std::to_string(special);
        EXPECT_EQ(scale_code(q, 0, 1), 0xFFu) << what;
        EXPECT_TRUE(std::isnan(scale_value(q, 0, 1))) << what;  // 0xFF decodes to NaN, not Inf
        for (int64_t k = 32; k < 64; ++k) {
          ASSERT_EQ(q.data.code(k), nan_code(el)) << what << " k " << k;
          ASSERT_TRUE(std::isnan(element_value(q, 0, k))) << what << " k " << k;
          ASSERT_TRUE(std::isnan(dequantize(q).get(k))) << what;
        }
        // The neighbouring blocks are untouched.
        EXPECT_NE(scale_code(q, 0, 0), 0xFFu) << what;
        EXPECT_NE(scale_code(q, 1, 1), 0xFFu) << what;
        EXPECT_FALSE(std::isnan(element_value(q, 0, 31))) << what;
        EXPECT_EQ(element_value(q, 1, 40), x.get(104)) << what;
      }
}

TEST(QuantSpecial, Fp32RecipesNanGivesNanScaleInfGivesInfScale) {
  // A NaN block: d = NaN (fp32 0x7FC00000), every code the NaN code. An Inf block: d = +Inf,
  // finite elements ±0, Inf elements the NaN code. Both dequantize to NaN; other blocks are finite.
  for (double special : {kNaN, kInf, -kInf})
    for (const char* rname : {"tensorwise", "rowwise", "blockwise_1x128", "blockwise_128x128"})
      for (DType el : {DType::e4m3fn, DType::e5m2, DType::e4m3fnuz, DType::e5m2fnuz}) {
        const Scheme s{.recipe = parse_scheme(rname).recipe, .element = el};
        const HostTensor x = with_special(special);
        const Quantized q = quantize(x, s);
        const std::string what = to_string(s) + " with " + std::to_string(special);
        if (std::isnan(special)) {
          EXPECT_EQ(q.scale.code(0), 0x7FC00000u) << what;
        } else {
          EXPECT_EQ(scale_value(q, 0, 0), kInf) << what;
        }
        const bool whole_tensor = s.recipe == Recipe::tensorwise || s.recipe == Recipe::blockwise_128x128;
        for (int64_t i = 0; i < (whole_tensor ? 128 : 64); ++i) {
          const uint64_t c = q.data.code(i);
          if (std::isnan(special) || i == 40) {
            ASSERT_EQ(c, nan_code(el)) << what << " element " << i;
          } else {
            ASSERT_EQ(decode(el, c), 0.0) << what << " element " << i;
            if (fmt(el).specials != Specials::fnuz)
              ASSERT_EQ(std::signbit(decode(el, c)), std::signbit(x.get(i))) << what << " " << i;
          }
          ASSERT_TRUE(std::isnan(element_value(q, i / 64, i % 64))) << what << " element " << i;
        }
        if (!whole_tensor) {
          EXPECT_TRUE(std::isfinite(scale_value(q, 1, 0))) << what;
          EXPECT_FALSE(std::isnan(element_value(q, 1, 40))) << what;
        }
      }
}

TEST(QuantSpecial, Nvfp4NanAndInfBlocks) {
  const Scheme blockonly{.recipe = Recipe::nvfp4, .element = DType::e2m1fn, .global_scale = false};
  const Scheme global{.recipe = Recipe::nvfp4, .element = DType::e2m1fn, .global_scale = true};
  {  // NaN, block scales only: that block's scale is the ue4m3 NaN 0x7F, its codes +6 (0x7).
    const Quantized q = quantize(with_special(kNaN), blockonly);
    EXPECT_EQ(scale_code(q, 0, 2), 0x7Fu);
    for (int64_t k = 32; k < 48; ++k) ASSERT_EQ(q.data.code(k), 0x7u) << k;
    for (int64_t k = 32; k < 48; ++k) ASSERT_TRUE(std::isnan(element_value(q, 0, k))) << k;
    EXPECT_TRUE(std::isfinite(element_value(q, 0, 31)));
    EXPECT_TRUE(std::isfinite(element_value(q, 0, 48)));
  }
  {  // Inf, block scales only: the scale clamps to 448 (0x7E), ±Inf → ±6, the block stays finite.
    for (double inf : {kInf, -kInf}) {
      const HostTensor x = with_special(inf);
      const Quantized q = quantize(x, blockonly);
      EXPECT_EQ(scale_code(q, 0, 2), 0x7Eu);
      EXPECT_EQ(q.data.code(40), inf > 0 ? 0x7u : 0xFu);
      EXPECT_EQ(element_value(q, 0, 40), std::copysign(6 * 448.0, inf));
      for (int64_t k = 32; k < 48; ++k)
        if (k != 40) EXPECT_EQ(element_value(q, 0, k), 0.0) << k;  // |x|/448 ≤ 1.5/448 < 0.25 rounds to 0
    }
  }
  {  // NaN with a global scale: g = NaN, every block scale NaN, everything NaN.
    const Quantized q = quantize(with_special(kNaN), global);
    EXPECT_TRUE(std::isnan(q.global_scale));
    for (int64_t b = 0; b < 8; ++b) EXPECT_EQ(scale_code(q, b / 4, b % 4), 0x7Fu) << b;
    for (int64_t i = 0; i < 128; ++i) ASSERT_TRUE(std::isnan(element_value(q, i / 64, i % 64))) << i;
  }
  {  // Inf with a global scale: g = +Inf; finite blocks s = 2^-6 with ±0 data; the Inf block NaN.
    const HostTensor x = with_special(kInf);
    const Quantized q = quantize(x, global);
    EXPECT_EQ(q.global_scale, kInf);
    EXPECT_EQ(scale_code(q, 0, 2), 0x7Fu);
    EXPECT_EQ(scale_code(q, 0, 0), 0x08u);
    EXPECT_EQ(scale_code(q, 1, 3), 0x08u);
    for (int64_t i = 0; i < 128; ++i) {
      if (i / 16 != 2) ASSERT_EQ(decode(DType::e2m1fn, q.data.code(i)), 0.0) << i;
      ASSERT_TRUE(std::isnan(element_value(q, i / 64, i % 64))) << i;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// NVFP4 with and without the global scale

TEST(QuantNvfp4, GlobalScaleIsAmaxOver2688AndKeepsBlockScalesInRange) {
  HostTensor x = random_input(40, 128, seed_of("quant/nvfp4/global"), 28);  // |x| ≲ 2^3·5
  x.set(77, 6000.0);                                                        // a block with amax/6 = 1000 > 448
  const double amax_t = 6000.0;
  const Quantized g = quantize(x, {.recipe = Recipe::nvfp4, .element = DType::e2m1fn, .global_scale = true});
  EXPECT_EQ(g.global_scale, static_cast<double>(static_cast<float>(amax_t / 2688)));
  EXPECT_EQ(scale_value(g, 0, 77 / 16), 448.0);  // the tensor's amax block uses the top of ue4m3
  expect_rounding_bound(g, x, std::ldexp(1.0, -22));
  expect_scale_rules(g, x);
  // No element saturates beyond what scale rounding causes: |x|/(g·s) ≤ 6·(1 + 2^-4).
  for (int64_t r = 0; r < g.rows; ++r)
    for (int64_t k = 0; k < g.cols; ++k)
      ASSERT_LE(std::fabs(x.get(r * 128 + k)) / (scale_value(g, r, k / 16) * g.global_scale), 6 * (1 + 1.0 / 16))
          << r << "," << k;

  const Quantized b = quantize(x, {.recipe = Recipe::nvfp4, .element = DType::e2m1fn, .global_scale = false});
  EXPECT_EQ(b.global_scale, 1.0);
  EXPECT_EQ(scale_value(b, 0, 77 / 16), 448.0);   // clamped: 1000 > 448
  EXPECT_EQ(element_value(b, 0, 77), 6 * 448.0);  // and the element saturates
  expect_rounding_bound(b, x, std::ldexp(1.0, -22));
  expect_scale_rules(b, x);
  // The tiny row (≈2^-140) clamps to 2^-6 without a global scale: its codes are all zero.
  for (int64_t k = 0; k < 128; ++k) EXPECT_EQ(decode(DType::e2m1fn, b.data.code(3 * 128 + k)), 0.0) << k;
  EXPECT_EQ(scale_value(b, 3, 0), std::ldexp(1.0, -6));
}

TEST(QuantNvfp4, GlobalScaleRules) {
  EXPECT_EQ(nvfp4_global_scale(2688.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_scale(0.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_scale(std::numeric_limits<float>::denorm_min()), std::ldexp(1.0f, -126));
  EXPECT_EQ(nvfp4_global_scale(1.0f), 1.0f / 2688.0f);
  EXPECT_EQ(nvfp4_block_scale_code(6.0f, 1.0f), 0x38u);            // 1.0
  EXPECT_EQ(nvfp4_block_scale_code(0.0f, 1.0f), 0x08u);            // clamp to 2^-6
  EXPECT_EQ(nvfp4_block_scale_code(1e9f, 1.0f), 0x7Eu);            // clamp to 448
  EXPECT_EQ(nvfp4_block_scale_code(6.0f * 1.0625f, 1.0f), 0x38u);  // tie 1.0625 → even 1.0
  EXPECT_EQ(nvfp4_block_scale_code(6.0f * 1.1875f, 1.0f), 0x3Au);  // tie 1.1875 → even 1.25
}

// ---------------------------------------------------------------------------------------------
// Scale layouts

// torchao/PyTorch to_blocked, step by step: pad to (R', S'), view (R'/128, 128, S'/4, 4),
// permute(0, 2, 1, 3), reshape(-1, 4, 32, 4), transpose(1, 2), reshape(-1, 32, 16), flatten.
// Returns where scale (r, c) lands, following each step's index map.
size_t to_blocked_position(size_t r, size_t c, size_t scale_cols) {
  const size_t S4 = (scale_cols + 3) / 4;
  // view → (a, b, cc, d); permute → (a, cc, b, d) of shape (R'/128, S4, 128, 4), contiguous:
  const size_t a = r / 128, b = r % 128, cc = c / 4, d = c % 4;
  const size_t flat = ((a * S4 + cc) * 128 + b) * 4 + d;
  // reshape(-1, 4, 32, 4): (n, i1, i2, i3)
  const size_t n = flat / 512, i1 = flat / 128 % 4, i2 = flat / 4 % 32, i3 = flat % 4;
  // transpose(1, 2) → (n, i2, i1, i3) of shape (N, 32, 4, 4), contiguous; the reshapes keep order
  return ((n * 32 + i2) * 4 + i1) * 4 + i3;
}

TEST(QuantLayout, SwizzleUnswizzleIsIdentityAndPadsWithZeros) {
  for (size_t R : {1, 127, 128, 129, 300})
    for (size_t S : {1, 3, 4, 5, 8}) {
      HostTensor s(DType::e8m0fnu, {static_cast<int64_t>(R), static_cast<int64_t>(S)});
      for (size_t i = 0; i < R * S; ++i) s.set_code(static_cast<int64_t>(i), 1 + (i * 37) % 254);  // never 0x00
      const HostTensor z = swizzle(s);
      ASSERT_EQ(z.shape(), (std::vector<int64_t>{static_cast<int64_t>((R + 127) / 128 * 128 * ((S + 3) / 4 * 4))}));
      ASSERT_EQ(static_cast<size_t>(z.numel()), swizzled_size(R, S));
      size_t nonzero = 0;
      for (int64_t i = 0; i < z.numel(); ++i) nonzero += z.code(i) != 0;
      EXPECT_EQ(nonzero, R * S) << R << "x" << S << ": padding must be 0x00 and no scale may be lost";
      const HostTensor back = unswizzle(z, R, S);
      ASSERT_EQ(back.shape(), s.shape());
      for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(back.code(i), s.code(i)) << R << "x" << S << " at " << i;
    }
  EXPECT_THROW(unswizzle(HostTensor(DType::e8m0fnu, {511}), 1, 4), std::invalid_argument);
}

TEST(QuantLayout, SwizzledOffsetMatchesToBlockedEverywhere) {
  // Unique fp32 values r·S + c: every scale lands at the byte the formula and the to_blocked
  // chain give, and the offsets form a permutation of the non-padding positions.
  for (size_t R : {1, 127, 128, 129, 300})
    for (size_t S : {1, 3, 4, 5, 8}) {
      HostTensor s(DType::fp32, {static_cast<int64_t>(R), static_cast<int64_t>(S)});
      for (size_t i = 0; i < R * S; ++i) s.set(static_cast<int64_t>(i), static_cast<double>(i + 1));
      const HostTensor z = swizzle(s);
      std::set<size_t> seen;
      for (size_t r = 0; r < R; ++r)
        for (size_t c = 0; c < S; ++c) {
          const size_t off = swizzled_offset(r, c, S);
          ASSERT_EQ(off, to_blocked_position(r, c, S)) << R << "x" << S << " (" << r << "," << c << ")";
          ASSERT_EQ(z.get(static_cast<int64_t>(off)), static_cast<double>(r * S + c + 1));
          seen.insert(off);
        }
      EXPECT_EQ(seen.size(), R * S);
    }
}

TEST(QuantLayout, NvmathExamplesAndWhatTheyImply) {
  // nvmath get_block_scale_offset, M = K = 128 NVFP4: S = 128/16 = 8 scale columns (S' = 8).
  EXPECT_EQ(swizzled_offset(5, 2, 8), 82u);
  EXPECT_EQ(swizzled_offset(5, 5, 8), 593u);
  // For rows below 128 the offset does not depend on S' (the row-tile term is 0), so these two
  // fix only S' ≥ 8; a row in the second tile shows S' = 8: (1·2 + 1)·512 + 2·16 + 0 + 1.
  EXPECT_EQ(swizzled_offset(5, 5, 12), 593u);
  EXPECT_EQ(swizzled_offset(130, 5, 8), 1569u);
  EXPECT_EQ(swizzled_offset(130, 5, 12), 2081u);  // S' = 12 moves it
  // The same through quantize: a unique block in an NVFP4 128×128 tensor lands at byte 82.
  HostTensor x(DType::fp32, {128, 128});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 0.5);
  x.set(5 * 128 + 2 * 16 + 7, 3.0);   // block (5, 2): amax 3 → s = 0.5 (0x30)
  x.set(5 * 128 + 5 * 16 + 1, 12.0);  // block (5, 5): amax 12 → s = 2 (0x40)
  const Quantized q =
      quantize(x, {.recipe = Recipe::nvfp4, .element = DType::e2m1fn, .global_scale = false}, ScaleLayout::swizzled);
  const auto* bytes = reinterpret_cast<const uint8_t*>(q.scale.data());
  EXPECT_EQ(bytes[82], 0x30);
  EXPECT_EQ(bytes[593], 0x40);
  int others = 0;
  for (size_t i = 0; i < q.scale.nbytes(); ++i)
    others += i != 82 && i != 593 && bytes[i] != nvfp4_block_scale_code(0.5f, 1.0f);
  EXPECT_EQ(others, 0);
}

TEST(QuantLayout, UniqueScalePerBlockLandsAtTheFormulaByte) {
  // MX: block (r, c) gets a unique amax 2^(r·S + c − 100) → a unique e8m0 code; the swizzled
  // quantization must hold it at swizzled_offset(r, c, S) and 0x00 in the padding.
  for (auto [R, S] : std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {33, 5}, {129, 1}, {40, 3}, {50, 4}}) {
    HostTensor x(DType::fp32, {R, S * 32});
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < S; ++c)
        x.set(r * S * 32 + c * 32 + (r + c) % 32, std::ldexp(1.0, static_cast<int>(r * S + c) - 100));
    const Scheme mx{.recipe = Recipe::mx, .element = DType::e4m3fn};
    const Quantized z = quantize(x, mx, ScaleLayout::swizzled);
    const Quantized rm = quantize(x, mx);
    const auto* bytes = reinterpret_cast<const uint8_t*>(z.scale.data());
    std::vector<bool> used(z.scale.nbytes());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < S; ++c) {
        const uint8_t want = static_cast<uint8_t>(127 + (r * S + c - 100) - 8);
        const size_t off = swizzled_offset(static_cast<size_t>(r), static_cast<size_t>(c), static_cast<size_t>(S));
        ASSERT_EQ(bytes[off], want) << R << "x" << S << " block (" << r << "," << c << ")";
        ASSERT_EQ(rm.scale.code(r * S + c), want);
        ASSERT_EQ(scale_code(z, r, c), want);
        used[off] = true;
      }
    for (size_t i = 0; i < used.size(); ++i)
      if (!used[i]) ASSERT_EQ(bytes[i], 0) << "padding byte " << i;
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(z.data.code(i), rm.data.code(i));
  }
}

TEST(QuantLayout, ColumnMajorIsRContiguous) {
  const HostTensor x = random_input(5, 300, seed_of("quant/colmajor"));
  const Scheme s = parse_scheme("blockwise_1x128");
  const Quantized c = quantize(x, s, ScaleLayout::column_major);
  const Quantized r = quantize(x, s);
  ASSERT_EQ(c.scale.shape(), (std::vector<int64_t>{5, 3}));
  ASSERT_EQ(c.scale.strides(), (std::vector<int64_t>{1, 5}));
  const auto* cf = reinterpret_cast<const float*>(c.scale.data());
  for (int64_t br = 0; br < 5; ++br)
    for (int64_t bc = 0; bc < 3; ++bc) {
      EXPECT_EQ(static_cast<double>(cf[br + bc * 5]), r.scale.get(br * 3 + bc)) << br << "," << bc;
      EXPECT_EQ(scale_value(c, br, bc), scale_value(r, br, bc));
    }
  EXPECT_NE(scale_value(r, 0, 0), scale_value(r, 1, 0));  // the layouts are distinguishable
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(element_value(c, i / 300, i % 300), element_value(r, i / 300, i % 300));
  EXPECT_THROW(scale_code(r, 5, 0), std::out_of_range);
}

// ---------------------------------------------------------------------------------------------
// Packing, partial blocks, dequantize

TEST(QuantPacking, E2m1ElementTwoIIsTheLowNibble) {
  HostTensor x(DType::fp32, {1, 32});
  const double v[4] = {4.0, 0.5, -6.0, 1.0};  // amax 6: FLOOR e = 2 − 2 = 0, scale 1
  for (int k = 0; k < 4; ++k) x.set(k, v[k]);
  const Quantized q = quantize(x, parse_scheme("mxfp4"));
  EXPECT_EQ(scale_code(q, 0, 0), 127u);
  const auto* bytes = reinterpret_cast<const uint8_t*>(q.data.data());
  EXPECT_EQ(q.data.nbytes(), 16u);
  EXPECT_EQ(bytes[0], 0x16);  // element 0 (4.0 = 0x6) low, element 1 (0.5 = 0x1) high
  EXPECT_EQ(bytes[1], 0x2F);  // element 2 (−6 = 0xF) low, element 3 (1.0 = 0x2) high
  const Quantized n = quantize(x, parse_scheme("nvfp4_noglobal"));  // s = 1: same codes
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(n.data.data())[1], 0x2F);
}

TEST(QuantPartial, KNotAMultipleOfTheBlock) {
  // K = 40: MX blocks [0, 32) and [32, 40); the last block's scale comes from its 8 elements only.
  HostTensor x(DType::fp32, {2, 40});
  for (int64_t i = 0; i < 80; ++i) x.set(i, 1.0);
  x.set(39, 1000.0);  // row 0, last partial block
  x.set(40 + 5, 3.0);
  const Quantized q = quantize(x, parse_scheme("mxfp8_e4m3"));
  ASSERT_EQ(q.grid.cols, 2);
  EXPECT_EQ(scale_code(q, 0, 1), static_cast<uint64_t>(127 + 9 - 8));  // floor(log2 1000) = 9
  EXPECT_EQ(scale_code(q, 0, 0), static_cast<uint64_t>(127 + 0 - 8));
  EXPECT_EQ(scale_code(q, 1, 0), static_cast<uint64_t>(127 + 1 - 8));
  EXPECT_EQ(element_value(q, 0, 39), 896.0);  // 1000/2^1 = 500 > 464: FLOOR saturates to 448·2
  // nvfp4 K = 24 and 128x128 with R = 129, K = 130: grids and partial-block amax.
  HostTensor y(DType::fp32, {129, 130});
  for (int64_t i = 0; i < y.numel(); ++i) y.set(i, 1.0);
  y.set(128 * 130 + 129, 448.0 * 4);  // block (1, 1) holds only row 128, cols 128..129
  const Quantized b = quantize(y, parse_scheme("blockwise_128x128"));
  EXPECT_EQ(scale_value(b, 1, 1), 4.0);
  EXPECT_EQ(scale_value(b, 0, 1), static_cast<double>(1.0f / 448.0f));
  EXPECT_EQ(scale_value(b, 1, 0), static_cast<double>(1.0f / 448.0f));
  EXPECT_EQ(element_value(b, 128, 129), 448.0 * 4);
  HostTensor z(DType::fp32, {1, 24});
  for (int64_t i = 0; i < 24; ++i) z.set(i, 0.5);
  z.set(20, 12.0);
  const Quantized n = quantize(z, parse_scheme("nvfp4_noglobal"));
  ASSERT_EQ(n.grid.cols, 2);
  EXPECT_EQ(scale_value(n, 0, 1), 2.0);
  EXPECT_EQ(scale_value(n, 0, 0),
            0.5 / 6 < std::ldexp(1.0, -6) ? std::ldexp(1.0, -6) : decode(DType::ue4m3, encode(DType::ue4m3, 0.5 / 6)));
  EXPECT_EQ(n.data.nbytes(), 12u);
}

TEST(QuantInput, StridedAndBf16InputsQuantizeLikeContiguousFp32) {
  // x is read through its strides: a column-major [R, K] view gives the same codes and scales.
  const HostTensor x = random_input(7, 70, seed_of("quant/strided"));
  HostTensor t(DType::fp32, {7, 70}, {1, 7}, 7 * 70);
  HostTensor b(DType::bf16, {7, 70});
  for (int64_t i = 0; i < x.numel(); ++i) {
    t.set(i, x.get(i));
    b.set(i, x.get(i));
  }
  for (const char* n : {"mxfp6_e3m2", "nvfp4", "blockwise_1x128_e5m2"}) {
    const Quantized a = quantize(x, parse_scheme(n)), c = quantize(t, parse_scheme(n));
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(a.data.code(i), c.data.code(i)) << n << " " << i;
    for (int64_t i = 0; i < a.scale.numel(); ++i) ASSERT_EQ(a.scale.code(i), c.scale.code(i)) << n << " " << i;
    const Quantized h = quantize(b, parse_scheme(n));  // bf16 values are fp32 values: same rules
    expect_rounding_bound(h, b, n == std::string("nvfp4") ? std::ldexp(1.0, -22) : 0.0);
  }
}

TEST(QuantDequant, Fp32OutputIsTheExactProductRoundedOnce) {
  // Products q·scale that are not all fp32 numbers: row 3 (≈2^-140) gets fp32-subnormal rowwise
  // scales, so q·d needs bits below 2^-149; the result must equal fp32(element_value) everywhere.
  HostTensor x = random_input(9, 96, seed_of("quant/dequant"));
  for (const char* n : {"mxfp8_e5m2", "mxfp4_rceil", "nvfp4", "rowwise", "blockwise_128x128_e5m2fnuz"}) {
    const Quantized q = quantize(x, parse_scheme(n));
    const HostTensor d = dequantize(q);
    ASSERT_EQ(d.dtype(), DType::fp32);
    ASSERT_EQ(d.shape(), (std::vector<int64_t>{9, 96}));
    int rounded = 0;
    for (int64_t i = 0; i < d.numel(); ++i) {
      const double e = element_value(q, i / 96, i % 96);
      ASSERT_EQ(d.get(i), static_cast<double>(static_cast<float>(e))) << n << " " << i;
      rounded += d.get(i) != e;
    }
    if (std::string(n) == "rowwise") EXPECT_GT(rounded, 0) << "row 3 (≈2^-140) should need fp32 rounding";
  }
}

// quantize reads a contiguous fp32 input from its storage and any other through the codec
// (refimpl/quant.cpp): the same values, so the same codes and scales for every recipe.
TEST(QuantQuantize, ContiguousFp32InputQuantizesLikeAStridedOne) {
  const int64_t rows = 64, cols = 256;
  HostTensor fast(DType::fp32, {rows, cols}), slow(DType::fp32, {rows, cols}, {1, rows}, rows * cols);
  fill_normal(fast, 8, 0, 2.0);
  for (int64_t i = 0; i < fast.numel(); ++i) slow.set(i, fast.get(i));
  for (const char* scheme : {"tensorwise", "rowwise", "blockwise_1x128", "blockwise_128x128", "mxfp8_e4m3",
                             "mxfp6_e3m2", "mxfp4", "nvfp4"}) {
    SCOPED_TRACE(scheme);
    const Scheme s = parse_scheme(scheme);
    const Quantized a = quantize(fast, s, ScaleLayout::row_major), b = quantize(slow, s, ScaleLayout::row_major);
    for (int64_t i = 0; i < a.data.numel(); ++i) ASSERT_EQ(a.data.code(i), b.data.code(i)) << i;
    for (int64_t i = 0; i < a.scale.numel(); ++i) ASSERT_EQ(a.scale.code(i), b.scale.code(i)) << i;
    EXPECT_EQ(a.global_scale, b.global_scale);
  }
}

}  // namespace
}  // namespace opcts::quant
