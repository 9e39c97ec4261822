// Compares opcts's codecs with CUDA 13's own host-callable conversions (cuda_fp8/fp6/fp4.hpp run on the CPU); each
// policy difference is a named rule.
//
// Compiled by g++ against the toolkit headers: without __CUDA_ARCH__ these functions take their
// software paths, which docs/architecture.md ("The model", dtypes) records as identical to the
// H200's PTX cvt results.
// Bulk comparisons expect CUDA's code to equal opcts's except where a named rule below predicts
// CUDA's exact code; each rule has its own test that asserts the difference itself.
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "numerics/codec.hpp"
#include "numerics/dtype.hpp"

namespace opcts {
namespace {

constexpr uint64_t kSeed = 0xC0DACC0DEull;
constexpr Overflow kPolicies[] = {Overflow::satfinite, Overflow::nonsaturating};

const FloatFormat& fmt(DType t) { return dtype_info(t).format; }
__nv_saturation_t cuda_sat(Overflow ov) { return ov == Overflow::satfinite ? __NV_SATFINITE : __NV_NOSAT; }
const char* name(Overflow ov) { return ov == Overflow::satfinite ? "satfinite" : "nonsaturating"; }

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

/// fp16 code → double from its fields, keeping a NaN's sign (opcts sees the input as it is).
double fp16_value(uint16_t h) {
  const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const bool neg = h >> 15;
  if (e == 0x1F && m) return std::bit_cast<float>((neg ? 0xFFC00000u : 0x7FC00000u) | m);
  const double v = e == 0x1F ? std::numeric_limits<double>::infinity()
                   : e == 0  ? std::ldexp(static_cast<double>(m), -24)
                             : std::ldexp(static_cast<double>(m | 0x400), static_cast<int>(e) - 25);
  return neg ? -v : v;
}

/// A few million fp32 inputs: every fp16 and bf16 value, 2^22 uniform bit patterns, and 2^20
/// values with exponents in [-20, 20] where the small formats live.
const std::vector<float>& fp32_inputs() {
  static const std::vector<float> v = [] {
    std::vector<float> out;
    for (uint32_t i = 0; i < 0x10000; ++i) {
      out.push_back(static_cast<float>(fp16_value(static_cast<uint16_t>(i))));
      out.push_back(bf16_to_float(static_cast<uint16_t>(i)));
    }
    std::mt19937_64 g(kSeed);
    for (int i = 0; i < (1 << 22); ++i) out.push_back(std::bit_cast<float>(static_cast<uint32_t>(g())));
    std::uniform_int_distribution<uint32_t> ex(127 - 20, 127 + 20);
    for (int i = 0; i < (1 << 20); ++i)
      out.push_back(std::bit_cast<float>((static_cast<uint32_t>(g()) & 0x807FFFFFu) | (ex(g) << 23)));
    return out;
  }();
  return v;
}

std::string hex(uint64_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v;
  return o.str();
}

struct Mismatches {
  size_t count = 0;
  std::string first;  // up to five, one per line
  void add(const std::string& what) {
    if (count++ < 5) first += what + "\n";
  }
};

// ---- Named policy differences ----------------------------------------------------------------

/// Named difference "fp8 NaN loses its sign and payload in CUDA": __nv_cvt_float_to_fp8 first
/// replaces any NaN by the canonical +NaN 0x7FFFFFFF (cuda_fp8.hpp, "Canonical NaN"; the
/// halfraw path already drops the sign while widening), so every NaN input encodes to 0x7F in
/// both E4M3 and E5M2. opcts keeps the sign (codec.hpp): e4m3fn 0x7F|s, and for e5m2 writes the
/// quiet NaN 0x7E|s where CUDA's canonical NaN has both mantissa bits set (0x7F). Both are NaN.
constexpr uint8_t kCudaFp8Nan = 0x7F;

/// CUDA's fp8 code for input x, predicted from opcts's code: equal except under the rule above.
uint8_t predicted_cuda_fp8(float x, uint8_t opcts_code) { return std::isnan(x) ? kCudaFp8Nan : opcts_code; }

TEST(CodecCudaPolicy, Fp8NanLosesSignAndPayloadInCuda) {
  std::vector<float> nans;
  for (uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u})
    nans.push_back(std::bit_cast<float>(bits));
  size_t negative = 0;
  for (float x : fp32_inputs())
    if (std::isnan(x)) nans.push_back(x);
  for (float x : nans) {
    const bool neg = std::signbit(x);
    negative += neg;
    SCOPED_TRACE(hex(std::bit_cast<uint32_t>(x)));
    for (auto ov : kPolicies) {
      EXPECT_EQ(__nv_cvt_float_to_fp8(x, cuda_sat(ov), __NV_E4M3), 0x7F);
      EXPECT_EQ(__nv_cvt_float_to_fp8(x, cuda_sat(ov), __NV_E5M2), 0x7F);
      EXPECT_EQ(encode_format(x, fmt(DType::e4m3fn), ov), neg ? 0xFFu : 0x7Fu);
      EXPECT_EQ(encode_format(x, fmt(DType::e5m2), ov), neg ? 0xFEu : 0x7Eu);
    }
  }
  EXPECT_GT(negative, 1000u);  // the rule is exercised with both signs
  // The 16-bit entry points do the same for every NaN code of their input type.
  for (uint32_t i = 0; i < 0x10000; ++i) {
    __half_raw h;
    h.x = static_cast<uint16_t>(i);
    __nv_bfloat16_raw b;
    b.x = static_cast<uint16_t>(i);
    for (auto ov : kPolicies)
      for (auto interp : {__NV_E4M3, __NV_E5M2}) {
        if (std::isnan(fp16_value(h.x))) {
          EXPECT_EQ(__nv_cvt_halfraw_to_fp8(h, cuda_sat(ov), interp), 0x7F) << hex(i);
        }
        if (std::isnan(bf16_to_float(b.x))) {
          EXPECT_EQ(__nv_cvt_bfloat16raw_to_fp8(b, cuda_sat(ov), interp), 0x7F) << hex(i);
        }
      }
  }
}

// ---- fp8: encode --------------------------------------------------------------------------------

struct Fp8 {
  __nv_fp8_interpretation_t cuda;
  DType opcts;
  const char* label;
};
constexpr Fp8 kFp8[] = {{__NV_E4M3, DType::e4m3fn, "E4M3"}, {__NV_E5M2, DType::e5m2, "E5M2"}};

TEST(CodecCudaFp8, FloatPathOnEveryFp16Bf16AndAFewMillionFp32) {
  for (const auto& f : kFp8)
    for (auto ov : kPolicies) {
      Mismatches mm;
      size_t by_rule = 0;
      for (float x : fp32_inputs()) {
        const uint8_t ours = static_cast<uint8_t>(encode_format(x, fmt(f.opcts), ov));
        const uint8_t cuda = __nv_cvt_float_to_fp8(x, cuda_sat(ov), f.cuda);
        by_rule += cuda != ours;
        if (cuda != predicted_cuda_fp8(x, ours))
          mm.add(hex(std::bit_cast<uint32_t>(x)) + " cuda " + hex(cuda) + " opcts " + hex(ours));
      }
      EXPECT_EQ(mm.count, 0u) << f.label << " " << name(ov) << " seed " << kSeed << "\n" << mm.first;
      EXPECT_GT(by_rule, 0u);  // the named rule was needed (and so was exercised)
    }
}

// Every code of a 16-bit format (Raw: __half_raw or __nv_bfloat16_raw, `value_of` its value)
// converted by cuda_fp8.h's raw-input path `cvt` to each fp8 format under each policy: the
// result must be what predicted_cuda_fp8 says of our encoding of the same value.
template <class Raw, class ValueOf, class Cvt>
void expect_raw_path_on_every_code(ValueOf value_of, Cvt cvt) {
  for (const auto& f : kFp8)
    for (auto ov : kPolicies) {
      Mismatches mm;
      for (uint32_t i = 0; i < 0x10000; ++i) {
        Raw r;
        r.x = static_cast<uint16_t>(i);
        const double x = value_of(r.x);
        const uint8_t ours = static_cast<uint8_t>(encode_format(x, fmt(f.opcts), ov));
        const uint8_t cuda = cvt(r, cuda_sat(ov), f.cuda);
        if (cuda != predicted_cuda_fp8(static_cast<float>(x), ours))
          mm.add(hex(i) + " cuda " + hex(cuda) + " opcts " + hex(ours));
      }
      EXPECT_EQ(mm.count, 0u) << f.label << " " << name(ov) << "\n" << mm.first;
    }
}

TEST(CodecCudaFp8, HalfrawPathOnEveryFp16) {
  expect_raw_path_on_every_code<__half_raw>(
      fp16_value, [](__half_raw h, __nv_saturation_t sat, auto kind) { return __nv_cvt_halfraw_to_fp8(h, sat, kind); });
}

TEST(CodecCudaFp8, Bfloat16rawPathOnEveryBf16) {
  expect_raw_path_on_every_code<__nv_bfloat16_raw>(
      bf16_to_float,
      [](__nv_bfloat16_raw b, __nv_saturation_t sat, auto kind) { return __nv_cvt_bfloat16raw_to_fp8(b, sat, kind); });
}

// Agreements worth stating: the thresholds and Inf/overflow policies of cuda_fp8.h's
// __nv_saturation_t (__NV_SATFINITE, __NV_NOSAT).
TEST(CodecCudaFp8, OverflowAndInfPolicyAgree) {
  const float above464 = std::nextafter(464.0f, INFINITY), inf = INFINITY;
  struct Row {
    const Fp8& f;
    float x;
    uint8_t sat, nosat;
  };
  const Row rows[] = {
      {kFp8[0], 464.0f, 0x7E, 0x7E},    {kFp8[0], above464, 0x7E, 0x7F}, {kFp8[0], -above464, 0xFE, 0xFF},
      {kFp8[0], inf, 0x7E, 0x7F},       {kFp8[0], -inf, 0xFE, 0xFF},     {kFp8[1], 61440.0f, 0x7B, 0x7C},
      {kFp8[1], -61440.0f, 0xFB, 0xFC}, {kFp8[1], inf, 0x7B, 0x7C},      {kFp8[1], -inf, 0xFB, 0xFC},
      {kFp8[0], -0.0f, 0x80, 0x80},     {kFp8[0], 0x1p-10f, 0x00, 0x00}, {kFp8[1], 0x1p-17f, 0x00, 0x00}};
  for (const auto& r : rows) {
    SCOPED_TRACE(testing::Message() << r.f.label << " " << r.x);
    EXPECT_EQ(__nv_cvt_float_to_fp8(r.x, __NV_SATFINITE, r.f.cuda), r.sat);
    EXPECT_EQ(__nv_cvt_float_to_fp8(r.x, __NV_NOSAT, r.f.cuda), r.nosat);
    EXPECT_EQ(encode_format(r.x, fmt(r.f.opcts), Overflow::satfinite), r.sat);
    EXPECT_EQ(encode_format(r.x, fmt(r.f.opcts), Overflow::nonsaturating), r.nosat);
  }
}

// ---- fp8: decode ---------------------------------------------------------------------------------

/// A fp16 result → double, NaN compared as a class (CUDA returns the canonical 0x7FFF; opcts's
/// decode returns a NaN double: no sign on either side to compare).
bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

TEST(CodecCudaFp8, DecodeEveryCode) {
  for (const auto& f : kFp8)
    for (uint32_t c = 0; c < 256; ++c) {
      const double cuda = fp16_value(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), f.cuda).x);
      EXPECT_TRUE(same_value(cuda, decode_format(c, fmt(f.opcts)))) << f.label << " " << hex(c) << " cuda " << cuda;
    }
}

// ---- e8m0 ----------------------------------------------------------------------------------------

struct E8 {
  cudaRoundMode cuda;
  ScaleRounding opcts;
  const char* label;
};
constexpr E8 kE8[] = {{cudaRoundZero, ScaleRounding::floor, "RZ=floor"},
                      {cudaRoundPosInf, ScaleRounding::ceil, "RP=ceil"}};

// No named difference exists for e8m0: CUDA RZ/RP equal opcts floor/ceil on every input,
// including the classes where policies could differ (stated in the test below).
TEST(CodecCudaE8m0, FloatToE8m0OnEveryFp16Bf16AndAFewMillionFp32) {
  for (const auto& r : kE8)
    for (auto ov : kPolicies) {
      Mismatches mm;
      for (float x : fp32_inputs()) {
        const uint8_t ours = encode_e8m0(x, r.opcts, ov);
        const uint8_t cuda = __nv_cvt_float_to_e8m0(x, cuda_sat(ov), r.cuda);
        if (cuda != ours) mm.add(hex(std::bit_cast<uint32_t>(x)) + " cuda " + hex(cuda) + " opcts " + hex(ours));
      }
      EXPECT_EQ(mm.count, 0u) << r.label << " " << name(ov) << " seed " << kSeed << "\n" << mm.first;
    }
}

TEST(CodecCudaE8m0, ZeroSubnormalsNegativesInfAndNanAgree) {
  const float inf = INFINITY, nan = std::bit_cast<float>(0x7FC00000u), nnan = std::bit_cast<float>(0xFFC00000u);
  struct Row {
    float x;
    uint8_t rz_sat, rp_sat, rz_nosat, rp_nosat;
  };
  const Row rows[] = {
      {0.0f, 0x00, 0x00, 0x00, 0x00},        {-0.0f, 0x00, 0x00, 0x00, 0x00},      // no zero: 2^-127
      {0x1p-149f, 0x00, 0x00, 0x00, 0x00},   {0x1p-127f, 0x00, 0x00, 0x00, 0x00},  // fp32 subnormals clip
      {0x1.8p-127f, 0x00, 0x01, 0x00, 0x01}, {std::nextafter(0x1p-126f, 0.0f), 0x00, 0x01, 0x00, 0x01},
      {-3.0f, 0x80, 0x81, 0x80, 0x81},       {3.0f, 0x80, 0x81, 0x80, 0x81},  // |x|
      {0x1.8p127f, 0xFE, 0xFE, 0xFE, 0xFF},  {std::numeric_limits<float>::max(), 0xFE, 0xFE, 0xFE, 0xFF},
      {inf, 0xFE, 0xFE, 0xFF, 0xFF},         {-inf, 0xFE, 0xFE, 0xFF, 0xFF},
      {nan, 0xFF, 0xFF, 0xFF, 0xFF},         {nnan, 0xFF, 0xFF, 0xFF, 0xFF},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(hex(std::bit_cast<uint32_t>(r.x)));
    EXPECT_EQ(__nv_cvt_float_to_e8m0(r.x, __NV_SATFINITE, cudaRoundZero), r.rz_sat);
    EXPECT_EQ(__nv_cvt_float_to_e8m0(r.x, __NV_SATFINITE, cudaRoundPosInf), r.rp_sat);
    EXPECT_EQ(__nv_cvt_float_to_e8m0(r.x, __NV_NOSAT, cudaRoundZero), r.rz_nosat);
    EXPECT_EQ(__nv_cvt_float_to_e8m0(r.x, __NV_NOSAT, cudaRoundPosInf), r.rp_nosat);
    EXPECT_EQ(encode_e8m0(r.x, ScaleRounding::floor, Overflow::satfinite), r.rz_sat);
    EXPECT_EQ(encode_e8m0(r.x, ScaleRounding::ceil, Overflow::satfinite), r.rp_sat);
    EXPECT_EQ(encode_e8m0(r.x, ScaleRounding::floor, Overflow::nonsaturating), r.rz_nosat);
    EXPECT_EQ(encode_e8m0(r.x, ScaleRounding::ceil, Overflow::nonsaturating), r.rp_nosat);
  }
}

TEST(CodecCudaE8m0, DecodeEveryCode) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float cuda = bf16_to_float(__nv_cvt_e8m0_to_bf16raw(static_cast<__nv_fp8_storage_t>(c)).x);
    EXPECT_TRUE(same_value(cuda, decode_format(c, fmt(DType::e8m0fnu)))) << hex(c) << " cuda " << cuda;
  }
  EXPECT_EQ(__nv_cvt_e8m0_to_bf16raw(0x00).x, 0x0040);  // 2^-127, a bf16 subnormal
}

// ---- fp6 / fp4 -----------------------------------------------------------------------------------

struct Small {
  DType opcts;
  const char* label;
  uint8_t (*cuda_from_float)(float);
  uint8_t (*cuda_from_half)(__half_raw);
  uint8_t (*cuda_from_bf16)(__nv_bfloat16_raw);
  double (*cuda_decode)(uint8_t);
  uint32_t codes;
  uint8_t max;
};

const Small kSmall[] = {
    {DType::e2m3fn, "E2M3", [](float x) -> uint8_t { return __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest); },
     [](__half_raw h) -> uint8_t { return __nv_cvt_halfraw_to_fp6(h, __NV_E2M3, cudaRoundNearest); },
     [](__nv_bfloat16_raw b) -> uint8_t { return __nv_cvt_bfloat16raw_to_fp6(b, __NV_E2M3, cudaRoundNearest); },
     [](uint8_t c) { return fp16_value(__nv_cvt_fp6_to_halfraw(c, __NV_E2M3).x); }, 64, 0x1F},
    {DType::e3m2fn, "E3M2", [](float x) -> uint8_t { return __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest); },
     [](__half_raw h) -> uint8_t { return __nv_cvt_halfraw_to_fp6(h, __NV_E3M2, cudaRoundNearest); },
     [](__nv_bfloat16_raw b) -> uint8_t { return __nv_cvt_bfloat16raw_to_fp6(b, __NV_E3M2, cudaRoundNearest); },
     [](uint8_t c) { return fp16_value(__nv_cvt_fp6_to_halfraw(c, __NV_E3M2).x); }, 64, 0x1F},
    {DType::e2m1fn, "E2M1", [](float x) -> uint8_t { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); },
     [](__half_raw h) -> uint8_t { return __nv_cvt_halfraw_to_fp4(h, __NV_E2M1, cudaRoundNearest); },
     [](__nv_bfloat16_raw b) -> uint8_t { return __nv_cvt_bfloat16raw_to_fp4(b, __NV_E2M1, cudaRoundNearest); },
     [](uint8_t c) { return fp16_value(__nv_cvt_fp4_to_halfraw(c, __NV_E2M1).x); }, 16, 0x7},
};

// No named difference: fp6/fp4 have no NaN or Inf codes, CUDA always saturates and sends NaN
// to +max (cuda_fp6.hpp/cuda_fp4.hpp "NaN converts to positive MAXNORM"), which is opcts's
// policy under both of its overflow settings.
TEST(CodecCudaFp6Fp4, FloatPathOnEveryFp16Bf16AndAFewMillionFp32) {
  for (const auto& s : kSmall)
    for (auto ov : kPolicies) {
      Mismatches mm;
      for (float x : fp32_inputs()) {
        const uint8_t ours = static_cast<uint8_t>(encode_format(x, fmt(s.opcts), ov));
        const uint8_t cuda = s.cuda_from_float(x);
        if (cuda != ours) mm.add(hex(std::bit_cast<uint32_t>(x)) + " cuda " + hex(cuda) + " opcts " + hex(ours));
      }
      EXPECT_EQ(mm.count, 0u) << s.label << " " << name(ov) << " seed " << kSeed << "\n" << mm.first;
    }
}

TEST(CodecCudaFp6Fp4, HalfrawAndBfloat16rawPathsOnEvery16BitInput) {
  for (const auto& s : kSmall) {
    Mismatches mm;
    for (uint32_t i = 0; i < 0x10000; ++i) {
      __half_raw h;
      h.x = static_cast<uint16_t>(i);
      __nv_bfloat16_raw b;
      b.x = static_cast<uint16_t>(i);
      const auto h_ours = encode_format(fp16_value(h.x), fmt(s.opcts), Overflow::satfinite);
      const auto b_ours = encode_format(bf16_to_float(b.x), fmt(s.opcts), Overflow::satfinite);
      if (s.cuda_from_half(h) != h_ours)
        mm.add("fp16 " + hex(i) + " cuda " + hex(s.cuda_from_half(h)) + " opcts " + hex(h_ours));
      if (s.cuda_from_bf16(b) != b_ours)
        mm.add("bf16 " + hex(i) + " cuda " + hex(s.cuda_from_bf16(b)) + " opcts " + hex(b_ours));
    }
    EXPECT_EQ(mm.count, 0u) << s.label << "\n" << mm.first;
  }
}

TEST(CodecCudaFp6Fp4, NanGoesToPlusMaxAndInfSaturatesInBoth) {
  for (const auto& s : kSmall)
    for (uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7F800000u, 0xFF800000u}) {
      const float x = std::bit_cast<float>(bits);
      const uint8_t sign = s.codes == 64 ? 0x20 : 0x8;
      const uint8_t want = std::isnan(x) ? s.max : static_cast<uint8_t>(s.max | (std::signbit(x) ? sign : 0));
      EXPECT_EQ(s.cuda_from_float(x), want) << s.label << " " << hex(bits);
      for (auto ov : kPolicies) EXPECT_EQ(encode_format(x, fmt(s.opcts), ov), want) << s.label << " " << hex(bits);
    }
}

TEST(CodecCudaFp6Fp4, DecodeEveryCode) {
  for (const auto& s : kSmall)
    for (uint32_t c = 0; c < s.codes; ++c) {
      const double cuda = s.cuda_decode(static_cast<uint8_t>(c));
      EXPECT_TRUE(same_value(cuda, decode_format(c, fmt(s.opcts)))) << s.label << " " << hex(c) << " cuda " << cuda;
    }
}

}  // namespace
}  // namespace opcts
