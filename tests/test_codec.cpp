// Proves numerics/codec (and codec_fast) against the format definitions: every code, every fp16/bf16 input, random
// fp32, edge classes.
//
// Everything expected here is computed from sign/exponent/mantissa fields by formulas written in
// this file (OCP OFP8 v1.0, OCP MX v1.0, codec.hpp's policies), never by calling codec.cpp: a decoder
// from fields, and an integer RNE encoder that rounds the 53-bit significand of a double.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "numerics/codec.hpp"
#include "numerics/codec_fast.hpp"
#include "numerics/dtype.hpp"

namespace opcts {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint64_t kSeed = 0x0C0DEC5EEDull;  // every random sample derives from this

// ---- The definitions -------------------------------------------------------------------------

/// One small float format as its spec defines it (OCP OFP8 v1.0, OCP MX v1.0, ml_dtypes float8.h).
struct Spec {
  const char* name;
  DType dtype;
  int ebits, mbits, bias;
  Specials specials;
  bool is_signed;
  double max;         // the spec table's max normal
  uint32_t max_code;  // and its code
  double min_sub;     // the spec table's min subnormal
};

const Spec kSpecs[] = {
    {"e4m3fn", DType::e4m3fn, 4, 3, 7, Specials::fn, true, 448, 0x7E, 0x1p-9},
    {"e5m2", DType::e5m2, 5, 2, 15, Specials::ieee, true, 57344, 0x7B, 0x1p-16},
    {"e4m3fnuz", DType::e4m3fnuz, 4, 3, 8, Specials::fnuz, true, 240, 0x7F, 0x1p-10},
    {"e5m2fnuz", DType::e5m2fnuz, 5, 2, 16, Specials::fnuz, true, 57344, 0x7F, 0x1p-17},
    {"ue4m3", DType::ue4m3, 4, 3, 7, Specials::fn, false, 448, 0x7E, 0x1p-9},
    {"e2m3fn", DType::e2m3fn, 2, 3, 1, Specials::finite, true, 7.5, 0x1F, 0.125},
    {"e3m2fn", DType::e3m2fn, 3, 2, 3, Specials::finite, true, 28.0, 0x1F, 0.0625},
    {"e2m1fn", DType::e2m1fn, 2, 1, 1, Specials::finite, true, 6.0, 0x7, 0.5},
};

const Spec& spec(DType t) {
  for (const auto& s : kSpecs)
    if (s.dtype == t) return s;
  throw std::logic_error("no spec");
}

FloatFormat format_of(const Spec& s) { return dtype_info(s.dtype).format; }
int code_bits(const Spec& s) { return (s.is_signed ? 1 : 0) + s.ebits + s.mbits; }
uint32_t num_codes(const Spec& s) { return 1u << code_bits(s); }
uint32_t sign_bit(const Spec& s) { return s.is_signed ? 1u << (s.ebits + s.mbits) : 0; }
uint32_t mag_mask(const Spec& s) { return (1u << (s.ebits + s.mbits)) - 1; }
uint32_t exp_field(const Spec& s, uint32_t c) { return (c >> s.mbits) & ((1u << s.ebits) - 1); }
uint32_t mant_field(const Spec& s, uint32_t c) { return c & ((1u << s.mbits) - 1); }

/// NaN codes by definition: ieee all-ones exponent with mantissa ≠ 0; fn all-ones magnitude;
/// fnuz the sign bit alone; finite formats none.
bool def_is_nan(const Spec& s, uint32_t c) {
  const uint32_t all_exp = (1u << s.ebits) - 1;
  switch (s.specials) {
    case Specials::ieee: return exp_field(s, c) == all_exp && mant_field(s, c) != 0;
    case Specials::fn: return (c & mag_mask(s)) == mag_mask(s);
    case Specials::fnuz: return c == sign_bit(s);
    default: return false;
  }
}

bool def_is_inf(const Spec& s, uint32_t c) {
  return s.specials == Specials::ieee && exp_field(s, c) == (1u << s.ebits) - 1 && mant_field(s, c) == 0;
}

/// The value of a non-NaN code from its fields: (−1)^s · 2^(e−bias) · 1.m, or 2^(1−bias) · 0.m.
double def_value(const Spec& s, uint32_t c) {
  if (def_is_inf(s, c)) return (c & sign_bit(s)) ? -kInf : kInf;
  const uint32_t e = exp_field(s, c), m = mant_field(s, c);
  const double frac = static_cast<double>(m) / static_cast<double>(1u << s.mbits);
  const double v = e == 0 ? std::ldexp(frac, 1 - s.bias) : std::ldexp(1.0 + frac, static_cast<int>(e) - s.bias);
  return (c & sign_bit(s)) ? -v : v;
}

/// The code the policy gives finite overflow and ±Inf (codec.hpp): satfinite and the finite
/// formats → ±max; otherwise ieee → ±Inf, fn → NaN with the sign, fnuz → 0x80.
uint32_t def_overflow_code(const Spec& s, bool neg, Overflow ov) {
  const uint32_t sgn = neg ? sign_bit(s) : 0;
  if (ov == Overflow::satfinite || s.specials == Specials::finite) return sgn | s.max_code;
  if (s.specials == Specials::ieee) return sgn | (((1u << s.ebits) - 1) << s.mbits);
  if (s.specials == Specials::fn) return sgn | mag_mask(s);
  return sign_bit(s);
}

/// The code of a NaN input (codec.hpp): ieee → quiet NaN (top mantissa bit) with the sign,
/// fn → all ones with the sign, fnuz → 0x80, finite → +max.
uint32_t def_nan_code(const Spec& s, bool neg) {
  const uint32_t sgn = neg ? sign_bit(s) : 0;
  switch (s.specials) {
    case Specials::ieee: return sgn | (((1u << s.ebits) - 1) << s.mbits) | (1u << (s.mbits - 1));
    case Specials::fn: return sgn | mag_mask(s);
    case Specials::fnuz: return sign_bit(s);
    default: return s.max_code;
  }
}

/// A double's magnitude as M·2^(E−52) with M in [2^52, 2^53) (finite, nonzero).
void split(uint64_t a, uint64_t& M, int& E) {
  const uint64_t be = a >> 52;
  if (be != 0) {
    M = (a & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
    E = static_cast<int>(be) - 1023;
    return;
  }
  M = a;
  E = -1022;
  while (M < (uint64_t{1} << 52)) {
    M <<= 1;
    --E;
  }
}

/// Independent RNE encoder: counts quanta of the target binade by an integer shift of the
/// significand with explicit round/sticky comparison, then lays out the fields.
uint32_t ref_encode(const Spec& s, double x, Overflow ov) {
  const uint64_t u = std::bit_cast<uint64_t>(x);
  const bool neg = s.is_signed && (u >> 63);
  const uint32_t sgn = neg ? sign_bit(s) : 0;
  const uint64_t a = u & ~(uint64_t{1} << 63);
  constexpr uint64_t kInfBits = 0x7FF0000000000000ull;
  if (a > kInfBits) return def_nan_code(s, neg);
  if (a == kInfBits) return def_overflow_code(s, neg, ov);
  const uint32_t zero = s.specials == Specials::fnuz ? 0 : sgn;
  if (a == 0) return zero;
  uint64_t M;
  int E;
  split(a, M, E);
  const int emin = 1 - s.bias;
  const int q = std::max(E, emin) - s.mbits;  // exponent of one quantum in x's binade
  const int shift = q - (E - 52);             // significand bits below the quantum (≥ 1)
  uint64_t kept = 0;
  if (shift < 64) {
    kept = M >> shift;
    const uint64_t rem = M & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (kept & 1))) ++kept;
  }
  if (kept == 0) return zero;
  int qe = q;
  if (kept == uint64_t{1} << (s.mbits + 1)) {  // rounded up into the next binade
    kept >>= 1;
    ++qe;
  }
  const uint64_t mag = kept < (uint64_t{1} << s.mbits) ? kept  // subnormal: exponent field 0
                                                       : (static_cast<uint64_t>(qe + s.mbits + s.bias) << s.mbits) |
                                                             (kept - (uint64_t{1} << s.mbits));
  if (mag > s.max_code) return def_overflow_code(s, neg, ov);
  return sgn | static_cast<uint32_t>(mag);
}

/// Independent e8m0 encoder from the double's fields: floor keeps E, ceil adds 1 unless the
/// significand is exactly 1.0, rne adds 1 when it is ≥ 1.5 (bit 51); clamp to [2^-127, 2^127].
uint8_t ref_e8m0(double x, ScaleRounding r, Overflow ov) {
  const uint64_t a = std::bit_cast<uint64_t>(x) & ~(uint64_t{1} << 63);
  const uint8_t over = ov == Overflow::satfinite ? 0xFE : 0xFF;
  if (a > 0x7FF0000000000000ull) return 0xFF;
  if (a == 0x7FF0000000000000ull) return over;
  if (a == 0) return 0x00;
  uint64_t M;
  int E;
  split(a, M, E);
  if (r == ScaleRounding::ceil) E += M != (uint64_t{1} << 52);
  if (r == ScaleRounding::rne) E += static_cast<int>((M >> 51) & 1);
  if (E < -127) return 0x00;
  if (E > 127) return over;
  return static_cast<uint8_t>(E + 127);
}

// ---- Inputs ----------------------------------------------------------------------------------

/// fp16 code → double from its fields (1-5-10, bias 15).
double fp16_value(uint32_t h) {
  const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v;
  if (e == 0x1F) v = m ? std::numeric_limits<double>::quiet_NaN() : kInf;
  else if (e == 0) v = std::ldexp(static_cast<double>(m), -24);
  else v = std::ldexp(static_cast<double>(m | 0x400), static_cast<int>(e) - 25);
  if (std::isnan(v)) return std::bit_cast<double>(std::bit_cast<uint64_t>(v) | (static_cast<uint64_t>(h >> 15) << 63));
  return (h & 0x8000) ? -v : v;
}

std::vector<double> all_fp16() {
  std::vector<double> v;
  for (uint32_t h = 0; h < 0x10000; ++h) v.push_back(fp16_value(h));
  return v;
}

std::vector<double> all_bf16() {
  std::vector<double> v;
  for (uint32_t b = 0; b < 0x10000; ++b) v.push_back(std::bit_cast<float>(b << 16));
  return v;
}

/// n uniform fp32 bit patterns (every class: NaN payloads, Inf, subnormals, huge).
std::vector<double> random_fp32(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = std::bit_cast<float>(static_cast<uint32_t>(g()));
  return v;
}

/// n fp32 values with exponents spread over the format's range ± 3 binades, random mantissa/sign.
std::vector<double> random_in_range(const Spec& s, size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  const int lo = 1 - s.bias - s.mbits - 3, hi = (1 << s.ebits) - s.bias + 3;
  std::uniform_int_distribution<int> ex(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) {
    const uint32_t bits = (static_cast<uint32_t>(g()) & 0x807FFFFFu) | (static_cast<uint32_t>(ex(g) + 127) << 23);
    x = std::bit_cast<float>(bits);
  }
  return v;
}

/// The non-negative finite values of the format in increasing order, plus the next value the
/// top binade would hold (the overflow side of the last tie).
std::vector<double> ladder(const Spec& s) {
  std::vector<double> v;
  for (uint32_t c = 0; c <= s.max_code; ++c) v.push_back(def_value(s, c));
  v.push_back(s.max + std::ldexp(1.0, static_cast<int>(std::ilogb(s.max)) - s.mbits));
  return v;
}

/// Edge classes: every code value, every tie, one fp32 ulp and one double ulp either side of
/// each tie, half the smallest subnormal, zeros, fp32 extremes, ±Inf and NaNs of both signs.
std::vector<double> edge_inputs(const Spec& s) {
  std::vector<double> v;
  const auto L = ladder(s);
  for (size_t i = 0; i + 1 < L.size(); ++i) {
    const double t = (L[i] + L[i + 1]) / 2;  // exact: one bit beyond the format's mantissa
    for (double x : {L[i], t, static_cast<double>(std::nextafter(static_cast<float>(t), 0.0f)),
                     static_cast<double>(std::nextafter(static_cast<float>(t), INFINITY)), std::nextafter(t, 0.0),
                     std::nextafter(t, kInf)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  for (float f : {0.0f, std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), INFINITY, 1e30f, 1e-30f})
    for (float g : {f, -f}) v.push_back(g);
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu})
    v.push_back(std::bit_cast<float>(nan));
  return v;
}

// ---- Comparison with a capped record of mismatches -------------------------------------------

struct Mismatches {
  size_t count = 0;
  std::string first;  // up to five, one per line
  void add(const std::string& what) {
    if (count++ < 5) first += what + "\n";
  }
};

std::string describe(double x) {
  std::ostringstream o;
  o << std::hexfloat << x << " (0x" << std::hex << std::bit_cast<uint64_t>(x) << ")";
  return o.str();
}

const char* name(Overflow ov) { return ov == Overflow::satfinite ? "satfinite" : "nonsaturating"; }

/// encode_format against ref_encode on every input under both policies.
Mismatches check_encode(const Spec& s, const std::vector<double>& xs) {
  Mismatches mm;
  const FloatFormat f = format_of(s);
  for (Overflow ov : {Overflow::satfinite, Overflow::nonsaturating})
    for (double x : xs) {
      const uint32_t want = ref_encode(s, x, ov);
      const uint64_t got = encode_format(x, f, ov);
      if (got != want) {
        std::ostringstream o;
        o << s.name << " " << name(ov) << " x=" << describe(x) << " want 0x" << std::hex << want << " got 0x" << got;
        mm.add(o.str());
      }
    }
  return mm;
}

std::string spec_name(const testing::TestParamInfo<Spec>& i) { return i.param.name; }

// gtest prints a failing parameter with this instead of its bytes.
void PrintTo(const Spec& s, std::ostream* os) { *os << s.name; }

// ---- The format table ------------------------------------------------------------------------

TEST(CodecFormats, DtypeTableMatchesTheSpec) {
  for (const auto& s : kSpecs) {
    SCOPED_TRACE(s.name);
    const FloatFormat f = format_of(s);
    EXPECT_EQ(f.exponent_bits, s.ebits);
    EXPECT_EQ(f.mantissa_bits, s.mbits);
    EXPECT_EQ(f.bias, s.bias);
    EXPECT_EQ(f.specials, s.specials);
    EXPECT_EQ(f.is_signed, s.is_signed);
    EXPECT_EQ(max_finite(f), s.max);
    EXPECT_EQ(min_subnormal(f), s.min_sub);
    EXPECT_EQ(min_normal(f), std::ldexp(1.0, 1 - s.bias));
    EXPECT_EQ(def_value(s, s.max_code), s.max);  // the field formula agrees with the spec table
    EXPECT_EQ(def_value(s, 1), s.min_sub);
  }
  const FloatFormat e8 = dtype_info(DType::e8m0fnu).format;
  EXPECT_EQ(e8.specials, Specials::e8m0);
  EXPECT_FALSE(e8.is_signed);
  EXPECT_EQ(max_finite(e8), 0x1p127);
  EXPECT_EQ(min_normal(e8), 0x1p-127);
}

// ---- Decoding: every code of every format ----------------------------------------------------

class CodecEveryCode : public testing::TestWithParam<Spec> {};

TEST_P(CodecEveryCode, DecodesToTheDefinedValue) {
  const Spec& s = GetParam();
  const FloatFormat f = format_of(s);
  for (uint32_t c = 0; c < num_codes(s); ++c) {
    SCOPED_TRACE(testing::Message() << s.name << " code 0x" << std::hex << c);
    EXPECT_EQ(is_nan_code(c, f), def_is_nan(s, c));
    const double got = decode_format(c, f);
    if (def_is_nan(s, c)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    EXPECT_EQ(got, def_value(s, c));
    EXPECT_EQ(std::signbit(got), std::signbit(def_value(s, c)));  // −0 stays −0
    // Bits above the format's width are ignored.
    const uint64_t high = ~uint64_t{0} << code_bits(s);
    EXPECT_EQ(decode_format(c | (high & 0xFF), f), got);
  }
}

TEST_P(CodecEveryCode, ReencodesToItselfUnderBothPolicies) {
  const Spec& s = GetParam();
  const FloatFormat f = format_of(s);
  size_t checked = 0;
  for (uint32_t c = 0; c < num_codes(s); ++c) {
    if (def_is_nan(s, c)) continue;  // fnuz 0x80 among them
    SCOPED_TRACE(testing::Message() << s.name << " code 0x" << std::hex << c);
    const double v = def_value(s, c);
    EXPECT_EQ(encode_format(v, f, Overflow::nonsaturating), c);
    // ±Inf is an overflow: satfinite makes it ±max.
    EXPECT_EQ(encode_format(v, f, Overflow::satfinite), def_is_inf(s, c) ? (c & sign_bit(s)) | s.max_code : c);
    ++checked;
  }
  EXPECT_EQ(checked, num_codes(s) - (s.specials == Specials::ieee   ? 6
                                     : s.specials == Specials::fn   ? (s.is_signed ? 2 : 1)
                                     : s.specials == Specials::fnuz ? 1
                                                                    : 0));
}

INSTANTIATE_TEST_SUITE_P(Codec, CodecEveryCode, testing::ValuesIn(kSpecs), spec_name);

TEST(CodecDecode, NanAndInfCodesAreExactlyTheSpecLists) {
  auto nan_codes = [](DType t) {
    std::vector<uint32_t> v;
    const Spec& s = spec(t);
    for (uint32_t c = 0; c < num_codes(s); ++c)
      if (std::isnan(decode_format(c, format_of(s)))) v.push_back(c);
    return v;
  };
  EXPECT_EQ(nan_codes(DType::e4m3fn), (std::vector<uint32_t>{0x7F, 0xFF}));
  EXPECT_EQ(nan_codes(DType::e5m2), (std::vector<uint32_t>{0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}));
  EXPECT_EQ(nan_codes(DType::e4m3fnuz), (std::vector<uint32_t>{0x80}));
  EXPECT_EQ(nan_codes(DType::e5m2fnuz), (std::vector<uint32_t>{0x80}));
  EXPECT_EQ(nan_codes(DType::ue4m3), (std::vector<uint32_t>{0x7F}));
  EXPECT_EQ(nan_codes(DType::e2m3fn), (std::vector<uint32_t>{}));
  EXPECT_EQ(nan_codes(DType::e3m2fn), (std::vector<uint32_t>{}));
  EXPECT_EQ(nan_codes(DType::e2m1fn), (std::vector<uint32_t>{}));
  const FloatFormat e5 = format_of(spec(DType::e5m2));
  EXPECT_EQ(decode_format(0x7C, e5), kInf);
  EXPECT_EQ(decode_format(0xFC, e5), -kInf);
  // FN vs FNUZ: the same pattern is worth half in FNUZ (bias 8), 0x7F is 240 there.
  EXPECT_EQ(decode_format(0x7F, format_of(spec(DType::e4m3fnuz))), 240.0);
  EXPECT_EQ(decode_format(0x7E, format_of(spec(DType::e4m3fnuz))), 224.0);
  EXPECT_EQ(decode_format(0x7E, format_of(spec(DType::e4m3fn))), 448.0);
  EXPECT_EQ(decode_format(0x7F, format_of(spec(DType::e5m2fnuz))), 57344.0);
}

TEST(CodecDecode, E2m1CodesAreTheSpecList) {
  const FloatFormat f = format_of(spec(DType::e2m1fn));
  const double want[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (uint32_t c = 0; c < 8; ++c) {
    EXPECT_EQ(decode_format(c, f), want[c]) << c;
    EXPECT_EQ(decode_format(c | 8, f), -want[c]) << c;
  }
  EXPECT_TRUE(std::signbit(decode_format(0x8, f)));
}

TEST(CodecDecode, E8m0EveryCode) {
  const FloatFormat f = dtype_info(DType::e8m0fnu).format;
  for (uint32_t c = 0; c < 255; ++c) {
    EXPECT_EQ(decode_format(c, f), std::ldexp(1.0, static_cast<int>(c) - 127)) << c;
    EXPECT_FALSE(is_nan_code(c, f)) << c;
    for (auto r : {ScaleRounding::floor, ScaleRounding::ceil, ScaleRounding::rne})
      for (auto ov : {Overflow::satfinite, Overflow::nonsaturating})
        EXPECT_EQ(encode_e8m0(std::ldexp(1.0, static_cast<int>(c) - 127), r, ov), c) << c;
    EXPECT_EQ(encode_format(decode_format(c, f), f, Overflow::nonsaturating), c);
  }
  EXPECT_EQ(decode_format(0x00, f), 0x1p-127);
  EXPECT_TRUE(std::isnan(decode_format(0xFF, f)));
  EXPECT_TRUE(is_nan_code(0xFF, f));
}

// ---- Encoding: exhaustive 16-bit inputs, random fp32, edge classes ---------------------------

class CodecEncode : public testing::TestWithParam<Spec> {};

TEST_P(CodecEncode, EveryFp16Input) {
  const auto mm = check_encode(GetParam(), all_fp16());
  EXPECT_EQ(mm.count, 0u) << mm.first;
}

TEST_P(CodecEncode, EveryBf16Input) {
  const auto mm = check_encode(GetParam(), all_bf16());
  EXPECT_EQ(mm.count, 0u) << mm.first;
}

TEST_P(CodecEncode, RandomFp32BitPatterns) {
  const auto mm = check_encode(GetParam(), random_fp32(size_t{1} << 21, kSeed));
  EXPECT_EQ(mm.count, 0u) << "seed " << kSeed << "\n" << mm.first;
}

TEST_P(CodecEncode, RandomFp32InTheFormatsRange) {
  const auto mm = check_encode(GetParam(), random_in_range(GetParam(), size_t{1} << 20, kSeed + 1));
  EXPECT_EQ(mm.count, 0u) << "seed " << kSeed + 1 << "\n" << mm.first;
}

TEST_P(CodecEncode, EdgeClasses) {
  const auto mm = check_encode(GetParam(), edge_inputs(GetParam()));
  EXPECT_EQ(mm.count, 0u) << mm.first;
}

// Ties go to the even code (mantissa LSB 0) at every exponent; one fp32 ulp off the tie goes to
// the nearer neighbour. Checked against the ladder directly, not through ref_encode.
TEST_P(CodecEncode, TiesToEvenAndOneUlpOffAtEveryExponent) {
  const Spec& s = GetParam();
  const FloatFormat f = format_of(s);
  const auto L = ladder(s);
  for (uint32_t c = 0; c < s.max_code; ++c) {
    const double t = (L[c] + L[c + 1]) / 2;
    const uint32_t even = (c & 1) ? c + 1 : c;
    SCOPED_TRACE(testing::Message() << s.name << " tie " << t);
    for (auto ov : {Overflow::satfinite, Overflow::nonsaturating}) {
      EXPECT_EQ(encode_format(t, f, ov), even);
      EXPECT_EQ(encode_format(std::nextafter(static_cast<float>(t), 0.0f), f, ov), c);
      EXPECT_EQ(encode_format(std::nextafter(static_cast<float>(t), INFINITY), f, ov), c + 1);
      if (s.is_signed) {  // the mirror image; FNUZ's −0 is +0
        EXPECT_EQ(encode_format(-t, f, ov), even == 0 && s.specials == Specials::fnuz ? 0 : even | sign_bit(s));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codec, CodecEncode, testing::ValuesIn(kSpecs), spec_name);

TEST(CodecEncodeEdges, OverflowThresholds) {
  struct Row {
    DType t;
    double x;
    uint32_t sat, nonsat;
  };
  const float above464 = std::nextafter(464.0f, INFINITY), below61440 = std::nextafter(61440.0f, 0.0f);
  const Row rows[] = {
      {DType::e4m3fn, 448, 0x7E, 0x7E},
      {DType::e4m3fn, 464, 0x7E, 0x7E},  // 464 ties to even 448
      {DType::e4m3fn, above464, 0x7E, 0x7F},
      {DType::e4m3fn, -above464, 0xFE, 0xFF},
      {DType::e4m3fn, 480, 0x7E, 0x7F},
      {DType::e4m3fn, 1e30, 0x7E, 0x7F},
      {DType::e5m2, 57344, 0x7B, 0x7B},
      {DType::e5m2, below61440, 0x7B, 0x7B},
      {DType::e5m2, 61440, 0x7B, 0x7C},
      {DType::e5m2, -61440, 0xFB, 0xFC},  // the tie rounds up (57344 odd)
      {DType::e4m3fnuz, 240, 0x7F, 0x7F},
      {DType::e4m3fnuz, std::nextafter(248.0f, 0.0f), 0x7F, 0x7F},
      {DType::e4m3fnuz, 248, 0x7F, 0x80},
      {DType::e4m3fnuz, -248, 0xFF, 0x80},  // 240 is odd: the tie overflows
      {DType::e5m2fnuz, 57344, 0x7F, 0x7F},
      {DType::e5m2fnuz, 61440, 0x7F, 0x80},
      {DType::e5m2fnuz, below61440, 0x7F, 0x7F},
      {DType::e5m2fnuz, -1e9, 0xFF, 0x80},
      {DType::ue4m3, 464, 0x7E, 0x7E},
      {DType::ue4m3, -above464, 0x7E, 0x7F},  // |x|
      {DType::e2m3fn, 7.75, 0x1F, 0x1F},
      {DType::e2m3fn, -100, 0x3F, 0x3F},
      {DType::e3m2fn, 30, 0x1F, 0x1F},
      {DType::e3m2fn, -1e9, 0x3F, 0x3F},
      {DType::e2m1fn, 7, 0x7, 0x7},
      {DType::e2m1fn, -7, 0xF, 0xF},
      {DType::e2m1fn, 5, 0x6, 0x6},
      {DType::e2m1fn, 1e9, 0x7, 0x7},
      {DType::e2m1fn, 0.25, 0x0, 0x0},
      {DType::e2m1fn, 0.75, 0x2, 0x2},
      {DType::e2m1fn, 2.5, 0x4, 0x4},
      {DType::e2m1fn, -0.0, 0x8, 0x8},
  };
  for (const auto& r : rows) {
    const Spec& s = spec(r.t);
    SCOPED_TRACE(testing::Message() << s.name << " x=" << describe(r.x));
    EXPECT_EQ(encode_format(r.x, format_of(s), Overflow::satfinite), r.sat);
    EXPECT_EQ(encode_format(r.x, format_of(s), Overflow::nonsaturating), r.nonsat);
    EXPECT_EQ(ref_encode(s, r.x, Overflow::satfinite), r.sat);  // the reference agrees with the spec
    EXPECT_EQ(ref_encode(s, r.x, Overflow::nonsaturating), r.nonsat);
  }
}

TEST(CodecEncodeEdges, HalfTheSmallestSubnormalTiesToZero) {
  for (const auto& s : kSpecs) {
    SCOPED_TRACE(s.name);
    const FloatFormat f = format_of(s);
    const double h = s.min_sub / 2;
    for (auto ov : {Overflow::satfinite, Overflow::nonsaturating}) {
      EXPECT_EQ(encode_format(h, f, ov), 0u);
      EXPECT_EQ(encode_format(std::nextafter(h, kInf), f, ov), 1u);
      EXPECT_EQ(encode_format(std::nextafter(static_cast<float>(h), INFINITY), f, ov), 1u);
      EXPECT_EQ(encode_format(s.min_sub, f, ov), 1u);
      EXPECT_EQ(encode_format(1.5 * s.min_sub, f, ov), 2u);  // tie between 1 and 2 → even
      const uint32_t neg_zero = s.specials == Specials::fnuz ? 0u : sign_bit(s);
      EXPECT_EQ(encode_format(-h, f, ov), neg_zero);
    }
  }
}

TEST(CodecEncodeEdges, NegativeZero) {
  const std::pair<DType, uint32_t> rows[] = {{DType::e4m3fn, 0x80},   {DType::e5m2, 0x80},  {DType::e4m3fnuz, 0x00},
                                             {DType::e5m2fnuz, 0x00}, {DType::ue4m3, 0x00}, {DType::e2m3fn, 0x20},
                                             {DType::e3m2fn, 0x20},   {DType::e2m1fn, 0x8}};
  for (const auto& [t, code] : rows)
    for (auto ov : {Overflow::satfinite, Overflow::nonsaturating}) {
      EXPECT_EQ(encode_format(-0.0, format_of(spec(t)), ov), code) << spec(t).name;
      EXPECT_EQ(encode_format(0.0, format_of(spec(t)), ov), 0u) << spec(t).name;
    }
}

// FNUZ has no −0: every negative that rounds to zero is +0 (0x00), never 0x80 (NaN there).
TEST(CodecEncodeEdges, FnuzTinyNegativesBecomePlusZero) {
  for (DType t : {DType::e4m3fnuz, DType::e5m2fnuz}) {
    const Spec& s = spec(t);
    const FloatFormat f = format_of(s);
    size_t zeros = 0;
    for (double x : all_fp16()) {
      if (!(x <= 0) || -x > s.min_sub / 2) continue;
      for (auto ov : {Overflow::satfinite, Overflow::nonsaturating}) EXPECT_EQ(encode_format(x, f, ov), 0u) << x;
      ++zeros;
    }
    EXPECT_GE(zeros, 60u) << s.name;  // the sweep really held tiny negatives (fp16 subnormals)
    for (double x : {-1e-30, -0x1p-149, -s.min_sub / 2, -0.4 * s.min_sub, -0.0})
      EXPECT_EQ(encode_format(x, f, Overflow::nonsaturating), 0u) << s.name << " " << x;
    EXPECT_EQ(encode_format(-0.6 * s.min_sub, f, Overflow::nonsaturating), 0x81u) << s.name;
  }
}

TEST(CodecEncodeEdges, InfAndNanUnderBothPolicies) {
  struct Row {
    DType t;
    uint32_t inf_sat, ninf_sat, inf_nonsat, ninf_nonsat, nan, nnan;
  };
  const Row rows[] = {
      {DType::e4m3fn, 0x7E, 0xFE, 0x7F, 0xFF, 0x7F, 0xFF},    // NaN keeps its sign
      {DType::e5m2, 0x7B, 0xFB, 0x7C, 0xFC, 0x7E, 0xFE},      // quiet NaN, sign kept
      {DType::e4m3fnuz, 0x7F, 0xFF, 0x80, 0x80, 0x80, 0x80},  // the one NaN
      {DType::e5m2fnuz, 0x7F, 0xFF, 0x80, 0x80, 0x80, 0x80},
      {DType::ue4m3, 0x7E, 0x7E, 0x7F, 0x7F, 0x7F, 0x7F},   // unsigned: |x|
      {DType::e2m3fn, 0x1F, 0x3F, 0x1F, 0x3F, 0x1F, 0x1F},  // no NaN: +max, as CUDA
      {DType::e3m2fn, 0x1F, 0x3F, 0x1F, 0x3F, 0x1F, 0x1F},
      {DType::e2m1fn, 0x7, 0xF, 0x7, 0xF, 0x7, 0x7},
  };
  const double nan = std::bit_cast<float>(0x7FC00000u), nnan = std::bit_cast<float>(0xFFC00000u);
  for (const auto& r : rows) {
    const FloatFormat f = format_of(spec(r.t));
    SCOPED_TRACE(spec(r.t).name);
    EXPECT_EQ(encode_format(kInf, f, Overflow::satfinite), r.inf_sat);
    EXPECT_EQ(encode_format(-kInf, f, Overflow::satfinite), r.ninf_sat);
    EXPECT_EQ(encode_format(kInf, f, Overflow::nonsaturating), r.inf_nonsat);
    EXPECT_EQ(encode_format(-kInf, f, Overflow::nonsaturating), r.ninf_nonsat);
    for (auto ov : {Overflow::satfinite, Overflow::nonsaturating}) {
      EXPECT_EQ(encode_format(nan, f, ov), r.nan);
      EXPECT_EQ(encode_format(nnan, f, ov), r.nnan);
    }
  }
}

// A value one fp32 ulp off a tie must round as itself; rounding it to fp16 (or bf16) first
// would move it onto the tie and then to even — the wrong neighbour. The direct encode gets the
// right one at every such tie, and the two-step path demonstrably does not (the hazard is real).
TEST(CodecEncodeEdges, NoDoubleRoundingThroughA16BitIntermediate) {
  const FloatFormat fp16 = dtype_info(DType::fp16).format, bf16 = dtype_info(DType::bf16).format;
  for (const auto& s : kSpecs) {
    const FloatFormat f = format_of(s);
    const auto L = ladder(s);
    size_t hazards = 0;
    for (uint32_t c = 0; c < s.max_code; ++c) {
      const double t = (L[c] + L[c + 1]) / 2;
      // Just above a tie whose even side is below, and just below a tie whose even side is above.
      const bool lower_even = (c & 1) == 0;
      const double x = std::nextafter(static_cast<float>(t), lower_even ? INFINITY : 0.0f);
      const uint32_t right = lower_even ? c + 1 : c;
      for (auto mid : {fp16, bf16}) {
        if (round_to_format(x, mid) != t) continue;  // the intermediate keeps x off the tie here
        ++hazards;
        EXPECT_EQ(encode_format(x, f), right) << s.name << " x=" << describe(x);
        EXPECT_NE(encode_format(round_to_format(x, mid), f), right) << s.name << " x=" << describe(x);
      }
    }
    EXPECT_GT(hazards, 10u) << s.name;
  }
  // The classic e4m3fn case: 1.0625 is the tie of 1.0 (0x38) and 1.125 (0x39).
  const FloatFormat e4 = format_of(spec(DType::e4m3fn));
  EXPECT_EQ(encode_format(std::nextafter(1.0625f, 2.0f), e4), 0x39u);
  EXPECT_EQ(encode_format(std::nextafter(1.1875f, 0.0f), e4), 0x39u);
  EXPECT_EQ(encode_format(1.1875, e4), 0x3Au);
}

// ---- e8m0 scales -----------------------------------------------------------------------------

constexpr ScaleRounding kRoundings[] = {ScaleRounding::floor, ScaleRounding::ceil, ScaleRounding::rne};
constexpr Overflow kPolicies[] = {Overflow::satfinite, Overflow::nonsaturating};

int e8(double x, ScaleRounding r, Overflow ov = Overflow::satfinite) { return encode_e8m0(x, r, ov); }

TEST(CodecE8m0, PowersOfTwoAndNegatives) {
  for (int k = -127; k <= 127; ++k)
    for (auto r : kRoundings)
      for (auto ov : kPolicies) {
        EXPECT_EQ(e8(std::ldexp(1.0, k), r, ov), k + 127) << k;
        EXPECT_EQ(e8(-std::ldexp(1.0, k), r, ov), k + 127) << k;  // |x|
      }
  EXPECT_EQ(e8(3.0, ScaleRounding::floor), 0x80);
  EXPECT_EQ(e8(3.0, ScaleRounding::ceil), 0x81);
  EXPECT_EQ(e8(3.0, ScaleRounding::rne), 0x81);
  EXPECT_EQ(e8(-3.0, ScaleRounding::floor), 0x80);
  EXPECT_EQ(e8(-3.0, ScaleRounding::ceil), 0x81);
}

TEST(CodecE8m0, OneAndAHalfPowersAndTheirNeighbours) {
  for (int k = -126; k <= 126; ++k) {
    SCOPED_TRACE(k);
    const float p = std::ldexp(1.0f, k), m = 1.5f * p;
    const int c = k + 127;
    EXPECT_EQ(e8(m, ScaleRounding::floor), c);
    EXPECT_EQ(e8(m, ScaleRounding::ceil), c + 1);
    EXPECT_EQ(e8(m, ScaleRounding::rne), c + 1);  // the tie goes up
    EXPECT_EQ(e8(std::nextafter(m, 0.0f), ScaleRounding::rne), c);
    EXPECT_EQ(e8(std::nextafter(m, INFINITY), ScaleRounding::rne), c + 1);
    const float below = std::nextafter(p, 0.0f), above = std::nextafter(p, INFINITY);
    EXPECT_EQ(e8(below, ScaleRounding::floor), c - 1);
    EXPECT_EQ(e8(below, ScaleRounding::ceil), c);
    EXPECT_EQ(e8(below, ScaleRounding::rne), c);
    EXPECT_EQ(e8(above, ScaleRounding::floor), c);
    EXPECT_EQ(e8(above, ScaleRounding::ceil), c + 1);
    EXPECT_EQ(e8(above, ScaleRounding::rne), c);
  }
}

TEST(CodecE8m0, ZeroSubnormalsHugeInfAndNan) {
  const float sub_min = std::numeric_limits<float>::denorm_min(), fmax = std::numeric_limits<float>::max();
  for (auto r : kRoundings)
    for (auto ov : kPolicies) {
      EXPECT_EQ(encode_e8m0(0.0, r, ov), 0x00);
      EXPECT_EQ(encode_e8m0(-0.0, r, ov), 0x00);
      EXPECT_EQ(encode_e8m0(sub_min, r, ov), 0x00);  // below 2^-127: clamped to the smallest scale
      EXPECT_EQ(encode_e8m0(0x1p-128, r, ov), 0x00);
      EXPECT_EQ(encode_e8m0(0x1p-127, r, ov), 0x00);  // an fp32 subnormal, exactly the smallest scale
      EXPECT_EQ(encode_e8m0(0x1p127, r, ov), 0xFE);
      EXPECT_EQ(encode_e8m0(std::bit_cast<float>(0x7FC00000u), r, ov), 0xFF);
      EXPECT_EQ(encode_e8m0(std::bit_cast<float>(0xFFC00000u), r, ov), 0xFF);
      const uint8_t over = ov == Overflow::satfinite ? 0xFE : 0xFF;
      EXPECT_EQ(encode_e8m0(kInf, r, ov), over);
      EXPECT_EQ(encode_e8m0(-kInf, r, ov), over);
      EXPECT_EQ(encode_e8m0(0x1p200, r, ov), over);
      EXPECT_EQ(encode_e8m0(fmax, r, ov), r == ScaleRounding::floor ? 0xFE : over);
      EXPECT_EQ(encode_e8m0(0x1.8p127, r, ov), r == ScaleRounding::floor ? 0xFE : over);
    }
  EXPECT_EQ(e8(0x1.8p-127, ScaleRounding::floor), 0x00);  // fp32 subnormal 1.5·2^-127
  EXPECT_EQ(e8(0x1.8p-127, ScaleRounding::ceil), 0x01);
  EXPECT_EQ(e8(0x1.8p-127, ScaleRounding::rne), 0x01);
  EXPECT_EQ(e8(std::nextafter(0x1p-126f, 0.0f), ScaleRounding::floor), 0x00);
  EXPECT_EQ(e8(std::nextafter(0x1p-126f, 0.0f), ScaleRounding::ceil), 0x01);
}

TEST(CodecE8m0, EveryFp16Bf16AndRandomFp32Input) {
  const FloatFormat f = dtype_info(DType::e8m0fnu).format;
  std::vector<double> xs = all_fp16();
  for (double x : all_bf16()) xs.push_back(x);
  for (double x : random_fp32(size_t{1} << 21, kSeed + 2)) xs.push_back(x);
  Mismatches mm;
  for (auto ov : kPolicies) {
    for (auto r : kRoundings)
      for (double x : xs)
        if (encode_e8m0(x, r, ov) != ref_e8m0(x, r, ov))
          mm.add("x=" + describe(x) + " rounding " + std::to_string(static_cast<int>(r)) + " " + name(ov));
    for (double x : xs)  // encode_format on e8m0 is the rne scale
      if (encode_format(x, f, ov) != ref_e8m0(x, ScaleRounding::rne, ov)) mm.add("encode_format x=" + describe(x));
  }
  EXPECT_EQ(mm.count, 0u) << "seed " << kSeed + 2 << "\n" << mm.first;
}

// ---- int4 / uint4 ----------------------------------------------------------------------------

/// RNE to an integer by floor and the fraction, then saturation; NaN → 0.
int ref_int4(double x, bool is_signed) {
  const double lo = is_signed ? -8 : 0, hi = is_signed ? 7 : 15;
  if (std::isnan(x)) return 0;
  if (x <= lo) return static_cast<int>(lo);
  if (x >= hi) return static_cast<int>(hi);
  const double fl = std::floor(x), frac = x - fl;
  const int r = static_cast<int>(fl) + (frac > 0.5 || (frac == 0.5 && (static_cast<int>(fl) & 1)) ? 1 : 0);
  return std::min(std::max(r, static_cast<int>(lo)), static_cast<int>(hi));
}

TEST(CodecInt4, DecodeEveryCode) {
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(decode_int4(static_cast<uint8_t>(c), true), c < 8 ? c : c - 16);
    EXPECT_EQ(decode_int4(static_cast<uint8_t>(c), false), c);
    EXPECT_EQ(decode_int4(static_cast<uint8_t>(c | 0xF0), true), c < 8 ? c : c - 16);  // high nibble ignored
  }
}

TEST(CodecInt4, RoundsHalfToEvenAndSaturates) {
  const std::pair<double, int> s4[] = {{0.5, 0}, {1.5, 2},  {2.5, 2},    {-0.5, 0}, {-1.5, -2},      {-2.5, -2},
                                       {6.5, 6}, {7.4, 7},  {7.5, 7},    {100, 7},  {-7.5, -8},      {-8.5, -8},
                                       {-9, -8}, {kInf, 7}, {-kInf, -8}, {-0.0, 0}, {0.49999999, 0}, {0.5000001, 1}};
  for (const auto& [x, v] : s4) {
    EXPECT_EQ(encode_int4(x, true), v & 0xF) << x;
    EXPECT_EQ(ref_int4(x, true), v) << x;
  }
  const std::pair<double, int> u4[] = {{0.5, 0},   {1.5, 2}, {-0.5, 0}, {-3, 0},    {14.5, 14},
                                       {15.5, 15}, {16, 15}, {1e9, 15}, {-kInf, 0}, {kInf, 15}};
  for (const auto& [x, v] : u4) EXPECT_EQ(encode_int4(x, false), v) << x;
  EXPECT_EQ(encode_int4(std::numeric_limits<double>::quiet_NaN(), true), 0);
  EXPECT_EQ(encode_int4(std::numeric_limits<double>::quiet_NaN(), false), 0);
}

TEST(CodecInt4, EveryFp16Input) {
  size_t bad = 0;
  for (double x : all_fp16())
    for (bool sgn : {true, false})
      if (encode_int4(x, sgn) != (ref_int4(x, sgn) & 0xF)) {
        ADD_FAILURE() << "x=" << x << " signed=" << sgn;
        if (++bad > 5) return;
      }
}

// ---- The fast array encoders (numerics/codec_fast) --------------------------------------------

void check_fast(DType t, void (*fast)(const float*, uint8_t*, size_t, Overflow), const std::vector<double>& xs) {
  const FloatFormat f = format_of(spec(t));
  std::vector<float> in(xs.begin(), xs.end());  // every input is an fp32 value
  std::vector<uint8_t> out(in.size());
  for (auto ov : kPolicies) {
    fast(in.data(), out.data(), in.size(), ov);
    Mismatches mm;
    for (size_t i = 0; i < in.size(); ++i) {
      const uint64_t want = encode_format(in[i], f, ov);
      if (out[i] != want) {
        std::ostringstream o;
        o << "x=" << describe(in[i]) << " " << name(ov) << " want 0x" << std::hex << want << " got 0x" << +out[i];
        mm.add(o.str());
      }
    }
    EXPECT_EQ(mm.count, 0u) << spec(t).name << "\n" << mm.first;
  }
}

std::vector<double> fast_inputs(DType t) {
  std::vector<double> xs = all_fp16();
  for (double x : all_bf16()) xs.push_back(x);
  for (double x : random_fp32(size_t{1} << 22, kSeed + 3)) xs.push_back(x);
  for (double x : random_in_range(spec(t), size_t{1} << 20, kSeed + 4)) xs.push_back(x);
  for (double x : edge_inputs(spec(t))) xs.push_back(static_cast<float>(x));
  return xs;
}

TEST(CodecFast, E4m3fnEqualsEncodeFormat) {
  check_fast(DType::e4m3fn, encode_fp32_to_e4m3fn, fast_inputs(DType::e4m3fn));
}

TEST(CodecFast, E5m2EqualsEncodeFormat) { check_fast(DType::e5m2, encode_fp32_to_e5m2, fast_inputs(DType::e5m2)); }

TEST(CodecFast, HandlesShortAndEmptyArrays) {
  const float in[3] = {464.0f, std::nextafter(464.0f, INFINITY), -0.0f};
  uint8_t out[3] = {1, 2, 3};
  encode_fp32_to_e4m3fn(in, out, 0, Overflow::satfinite);
  EXPECT_EQ(out[0], 1);  // n = 0 writes nothing
  encode_fp32_to_e4m3fn(in, out, 3, Overflow::nonsaturating);
  EXPECT_EQ(out[0], 0x7E);
  EXPECT_EQ(out[1], 0x7F);
  EXPECT_EQ(out[2], 0x80);
}

// round_to from double (the references' rounding: sdpa's same-precision pipeline, int4_mm's
// weights) into bf16 and fp16, against their ladder of finite values: the nearer neighbour,
// ties to the even code, beyond the largest value's half spacing inf. Doubles reach what fp32
// inputs cannot: a tie or one double ulp off it at 2^-53 relative, below fp32's resolution.
TEST(CodecRoundTo, Bf16AndFp16FromDoubleMatchTheirLadders) {
  for (DType t : {DType::bf16, DType::fp16}) {
    std::vector<double> L;  // positive finite values in code order: 0x0000 .. the largest
    for (uint64_t c = 0;; ++c) {
      const double v = decode(t, c);
      if (!std::isfinite(v)) break;
      L.push_back(v);
    }
    const double top = L.back(), half_ulp_top = (L.back() - L[L.size() - 2]) / 2;
    const auto ladder = [&](double x) {  // the oracle, for x >= 0
      if (x >= top + half_ulp_top) return kInf;
      if (x >= top) return top;
      const size_t hi = static_cast<size_t>(std::upper_bound(L.begin(), L.end(), x) - L.begin()), lo = hi - 1;
      const double dl = x - L[lo], dh = L[hi] - x;
      return dl < dh || (dl == dh && lo % 2 == 0) ? L[lo] : L[hi];
    };
    std::mt19937_64 rng(kSeed + 7);
    std::vector<double> xs;
    for (size_t c = 0; c + 1 < L.size(); ++c) {
      const double tie = (L[c] + L[c + 1]) / 2;  // exact in double
      for (double x : {tie, std::nextafter(tie, 0.0), std::nextafter(tie, kInf), L[c]}) xs.push_back(x);
    }
    for (double x : {top + half_ulp_top, std::nextafter(top + half_ulp_top, 0.0), 1e300, 0x1p-1074}) xs.push_back(x);
    for (int i = 0; i < 1 << 20; ++i) {  // random significands across the range and past its ends
      const int e = static_cast<int>(rng() % 300) - 160;
      xs.push_back(std::ldexp(1.0 + std::ldexp(static_cast<double>(rng() >> 12), -52), e));
    }
    size_t bad = 0;
    for (double x : xs)
      for (double sx : {x, -x}) {
        const double want = std::copysign(ladder(x), sx), got = round_to(t, sx);
        if (std::bit_cast<uint64_t>(got) != std::bit_cast<uint64_t>(want) && bad++ < 5)
          ADD_FAILURE() << dtype_info(t).name << " " << std::hexfloat << sx << ": got " << got << ", want " << want;
      }
    EXPECT_EQ(bad, 0u) << dtype_info(t).name << " of " << 2 * xs.size();
  }
}

}  // namespace
}  // namespace opcts
