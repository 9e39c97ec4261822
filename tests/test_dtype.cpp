// Exhaustive and randomized checks of the fp16/bf16 RNE codecs in numerics/dtype.hpp against formulas written here.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "numerics/dtype.hpp"

namespace opcts {
namespace {

// The value of a binary16/bfloat16 code from its fields, written independently of dtype.cpp.
// ebits/mbits/bias describe the format; scaling uses exact powers of two.
double value_from_fields(uint32_t code, int ebits, int mbits, int bias) {
  const bool neg = (code >> (ebits + mbits)) & 1u;
  const uint32_t e = (code >> mbits) & ((1u << ebits) - 1);
  const uint32_t m = code & ((1u << mbits) - 1);
  double v;
  if (e == (1u << ebits) - 1) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = static_cast<double>(m) * std::pow(2.0, 1 - bias - mbits);  // subnormal: m quanta of 2^(emin-mbits)
  } else {
    v = (1.0 + static_cast<double>(m) / static_cast<double>(1u << mbits)) * std::pow(2.0, static_cast<int>(e) - bias);
  }
  return neg ? -v : v;
}

bool is_nan_code16(uint64_t c, int mbits) {
  const uint64_t exp_mask = mbits == 10 ? 0x7C00 : 0x7F80;
  return (c & exp_mask) == exp_mask && (c & ((uint64_t{1} << mbits) - 1)) != 0 && c <= 0xFFFF;
}

// Right shift by s (1..31) with round to nearest, ties to even.
uint32_t rne_shift(uint32_t v, int s) {
  const uint32_t q = v >> s;
  const uint32_t rem = v & ((1u << s) - 1);
  const uint32_t half = 1u << (s - 1);
  return (rem > half || (rem == half && (q & 1u))) ? q + 1 : q;
}

// fp32 → fp16 by bit manipulation, RNE, overflow to Inf; NaN gives 0x7E00 (any NaN is accepted).
uint16_t ref_fp32_to_fp16(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  const uint32_t a = f & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // 65520 and up (incl. Inf) overflow
  if (a >= 0x38800000u) {                       // fp16 normal range: rebias by 127-15 and drop 13 bits
    return sign | static_cast<uint16_t>(rne_shift(a - 0x38000000u, 13));
  }
  const uint32_t e = a >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero (fp32 subnormals included)
  // value = mant·2^(e-150); in units of 2^-24 that is mant·2^(e-126): shift by 126-e (14..24)
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  return sign | static_cast<uint16_t>(rne_shift(mant, 126 - static_cast<int>(e)));
}

// fp32 → bf16: add the rounding bias and truncate (RNE; overflow carries into Inf).
uint16_t ref_fp32_to_bf16(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  if ((f & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);
  return static_cast<uint16_t>((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}

float f32(uint32_t bits) { return std::bit_cast<float>(bits); }

// Edge values for the 16-bit encoders: ties at every exponent, one ulp either side, limits.
std::vector<float> edge_values() {
  std::vector<float> v;
  auto add_with_neighbours = [&](float x) {
    for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, INFINITY)}) {
      v.push_back(y);
      v.push_back(-y);
    }
  };
  // fp16 ties: (1024+m+0.5)·2^(E-25) for every normal exponent and both parities of m,
  // and (m+0.5)·2^-24 in the subnormal range.
  for (int E = 1; E <= 30; ++E)
    for (int m : {0, 1, 2, 3, 511, 512, 1022, 1023})
      add_with_neighbours(static_cast<float>(std::ldexp(1024.0 + m + 0.5, E - 25)));
  for (int m : {0, 1, 2, 3, 100, 1022, 1023}) add_with_neighbours(static_cast<float>(std::ldexp(m + 0.5, -24)));
  // bf16 ties at every fp32 exponent: the 16 dropped bits are exactly 0x8000.
  for (uint32_t e = 0; e <= 254; ++e)
    for (uint32_t m : {0u, 1u, 2u, 0x7Eu, 0x7Fu}) add_with_neighbours(f32((e << 23) | (m << 16) | 0x8000u));
  for (float x : {0.0f, 65504.0f, 65520.0f, 65519.99f, 65536.0f, 6.1035156e-05f /*2^-14*/, 5.9604645e-08f /*2^-24*/,
                  2.9802322e-08f /*2^-25*/, std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), INFINITY})
    add_with_neighbours(x);
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(-std::numeric_limits<float>::quiet_NaN());
  v.push_back(f32(0x7F800001u));  // signalling NaN pattern
  return v;
}

// splitmix64: a test-local generator, independent of harness/rng.
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void expect_same_code(uint16_t got, uint16_t want, int mbits, float x, const char* what) {
  if (is_nan_code16(want, mbits)) {
    EXPECT_TRUE(is_nan_code16(got, mbits)) << what << " of NaN bits 0x" << std::hex << std::bit_cast<uint32_t>(x);
  } else {
    EXPECT_EQ(got, want) << what << " of " << x << " (bits 0x" << std::hex << std::bit_cast<uint32_t>(x) << ")";
  }
}

// Every code of a 16-bit float dtype (ebits exponent bits, mbits mantissa bits, bias) decodes to
// its field value, by decode() and by the fp32 bit conversions, and encodes back to itself.
void expect_every_16_bit_code(DType t, int ebits, int mbits, int bias, float (*to_fp32)(uint16_t),
                              uint16_t (*from_fp32)(float)) {
  int failures = 0;
  for (uint32_t c = 0; c <= 0xFFFF && failures < 20; ++c) {
    const double want = value_from_fields(c, ebits, mbits, bias);
    const double got = decode(t, c);
    const float got32 = to_fp32(static_cast<uint16_t>(c));
    if (std::isnan(want)) {
      failures += !std::isnan(got) || !std::isnan(got32) || !is_nan_code16(encode(t, got), mbits);
      EXPECT_TRUE(std::isnan(got)) << "code 0x" << std::hex << c;
      EXPECT_TRUE(is_nan_code16(encode(t, got), mbits)) << "code 0x" << std::hex << c;
      continue;
    }
    const bool ok = got == want && std::signbit(got) == std::signbit(want) && got32 == want && encode(t, got) == c &&
                    from_fp32(got32) == c && round_to(t, got) == got;
    failures += !ok;
    EXPECT_TRUE(ok) << "code 0x" << std::hex << c << std::dec << ": want " << want << ", decode " << got << ", to fp32 "
                    << got32 << ", re-encoded 0x" << std::hex << encode(t, got);
  }
  EXPECT_EQ(failures, 0);
}

TEST(DtypeFp16, EveryCodeDecodesToItsFieldValueAndReencodes) {
  expect_every_16_bit_code(DType::fp16, 5, 10, 15, fp16_bits_to_fp32, fp32_to_fp16_bits);
}

TEST(DtypeBf16, EveryCodeDecodesToItsFieldValueAndReencodes) {
  expect_every_16_bit_code(DType::bf16, 8, 7, 127, bf16_bits_to_fp32, fp32_to_bf16_bits);
}

TEST(DtypeFp16, EncodeFromFp32MatchesBitTwiddlingReferenceOnEdges) {
  for (float x : edge_values()) {
    const uint16_t want = ref_fp32_to_fp16(x);
    expect_same_code(fp32_to_fp16_bits(x), want, 10, x, "fp32_to_fp16_bits");
    expect_same_code(static_cast<uint16_t>(encode(DType::fp16, x)), want, 10, x, "encode(fp16)");
  }
}

TEST(DtypeBf16, EncodeFromFp32MatchesBitTwiddlingReferenceOnEdges) {
  for (float x : edge_values()) {
    const uint16_t want = ref_fp32_to_bf16(x);
    expect_same_code(fp32_to_bf16_bits(x), want, 7, x, "fp32_to_bf16_bits");
    expect_same_code(static_cast<uint16_t>(encode(DType::bf16, x)), want, 7, x, "encode(bf16)");
  }
}

// Two million random fp32 patterns from `seed`: `encode` must give `reference`'s 16-bit code
// (any NaN for a NaN; `mant_bits` is the format's mantissa width). Stops after ten failures.
void expect_encode_matches_on_random_patterns(uint64_t seed, uint16_t (*reference)(float), uint16_t (*encode)(float),
                                              int mant_bits) {
  uint64_t s = seed;
  int failures = 0;
  for (int k = 0; k < 2'000'000 && failures < 10; ++k) {
    const float x = f32(static_cast<uint32_t>(splitmix(s)));
    const uint16_t want = reference(x), got = encode(x);
    const bool ok = is_nan_code16(want, mant_bits) ? is_nan_code16(got, mant_bits) : got == want;
    failures += !ok;
    EXPECT_TRUE(ok) << "x bits 0x" << std::hex << std::bit_cast<uint32_t>(x) << ": got 0x" << got << ", want 0x"
                    << want;
  }
}

TEST(DtypeFp16, EncodeFromFp32MatchesReferenceOnRandomPatterns) {
  expect_encode_matches_on_random_patterns(0x0DDBA11, ref_fp32_to_fp16, fp32_to_fp16_bits, 10);
}

TEST(DtypeBf16, EncodeFromFp32MatchesReferenceOnRandomPatterns) {
  expect_encode_matches_on_random_patterns(0xB16B00B5, ref_fp32_to_bf16, fp32_to_bf16_bits, 7);
}

// The 16-bit forms work on the bits (numerics/dtype.cpp); encode() and round_to() go through the
// generic codec. Every 257th fp32 pattern over the exponents where fp16 rounds to something
// other than 0 or Inf (and bf16's whole range, every 4099th), and the edges, must agree on
// the code and on the rounded value (the SDPA reference's ToDtype takes the second).
TEST(Dtype16, BitFormsAgreeWithTheGenericCodec) {
  const auto check = [](float x) {
    const uint16_t h = fp32_to_fp16_bits(x), b = fp32_to_bf16_bits(x);
    if (std::isnan(x)) return is_nan_code16(h, 10) && is_nan_code16(b, 7);
    return h == encode(DType::fp16, x) && b == encode(DType::bf16, x) &&
           fp16_bits_to_fp32(h) == static_cast<float>(round_to(DType::fp16, x)) &&
           bf16_bits_to_fp32(b) == static_cast<float>(round_to(DType::bf16, x));
  };
  int64_t bad = 0;
  for (uint32_t u = 102u << 23; u < 144u << 23; u += 257) bad += !check(f32(u)) + !check(-f32(u));
  for (uint64_t u = 0; u < 0xFFFFFFFFull; u += 4099) bad += !check(f32(static_cast<uint32_t>(u)));
  for (float x : edge_values()) bad += !check(x);
  EXPECT_EQ(bad, 0);
}

TEST(DtypeFp16, NamedEdgeValues) {
  EXPECT_EQ(encode(DType::fp16, 65504.0), 0x7BFFu);
  EXPECT_EQ(encode(DType::fp16, 65519.99), 0x7BFFu);  // below the overflow threshold
  EXPECT_EQ(encode(DType::fp16, 65520.0), 0x7C00u);   // the tie above max finite rounds to Inf
  EXPECT_EQ(encode(DType::fp16, -65520.0), 0xFC00u);
  EXPECT_EQ(encode(DType::fp16, std::ldexp(1.0, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(encode(DType::fp16, std::ldexp(1.0, -25)), 0x0000u);  // half of it ties to 0
  EXPECT_EQ(encode(DType::fp16, std::nextafter(std::ldexp(1.0, -25), 1.0)), 0x0001u);
  EXPECT_EQ(encode(DType::fp16, std::ldexp(3.0, -25)), 0x0002u);  // 1.5 quanta ties to even 2
  EXPECT_EQ(encode(DType::fp16, -0.0), 0x8000u);
  EXPECT_EQ(encode(DType::fp16, INFINITY), 0x7C00u);
  EXPECT_EQ(encode(DType::fp16, -INFINITY), 0xFC00u);
  EXPECT_TRUE(is_nan_code16(encode(DType::fp16, NAN), 10));
  EXPECT_EQ(dtype_info(DType::fp16).max_finite, 65504.0);
  EXPECT_EQ(dtype_info(DType::fp16).epsilon, std::ldexp(1.0, -10));
  EXPECT_EQ(dtype_info(DType::bf16).epsilon, std::ldexp(1.0, -7));
  EXPECT_EQ(dtype_info(DType::bf16).max_finite, static_cast<double>(f32(0x7F7F0000u)));
}

// A double just above an fp16 tie that fp32 rounds onto the tie: one rounding must round up,
// while going through float rounds twice and lands on the even neighbour.
TEST(DtypeFp16, RoundToDoubleAvoidsDoubleRounding) {
  const double tie = 1.0 + std::ldexp(1.0, -11);  // halfway between 1 and 1 + 2^-10
  const double x = tie + std::ldexp(1.0, -40);    // above the tie, far below fp32's ulp 2^-23
  ASSERT_EQ(static_cast<double>(static_cast<float>(x)), tie);
  EXPECT_EQ(fp32_to_fp16_bits(static_cast<float>(x)), 0x3C00u);  // via float: tie to even, down
  EXPECT_EQ(encode(DType::fp16, x), 0x3C01u);                    // directly: up
  EXPECT_EQ(round_to(DType::fp16, x), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(encode(DType::fp16, -x), 0xBC01u);
}

TEST(DtypeBf16, RoundToDoubleAvoidsDoubleRounding) {
  const double tie = 1.0 + std::ldexp(1.0, -8);
  const double x = tie + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(x)), tie);
  EXPECT_EQ(fp32_to_bf16_bits(static_cast<float>(x)), 0x3F80u);
  EXPECT_EQ(encode(DType::bf16, x), 0x3F81u);
  EXPECT_EQ(round_to(DType::bf16, x), 1.0 + std::ldexp(1.0, -7));
}

TEST(DtypeFp32, RoundToAndEncodeUseOneIeeeRounding) {
  const double x = 1.0 + std::ldexp(1.0, -24) + std::ldexp(1.0, -50);  // just above an fp32 tie
  EXPECT_EQ(round_to(DType::fp32, x), 1.0 + std::ldexp(1.0, -23));
  EXPECT_EQ(encode(DType::fp32, x), 0x3F800001u);
  EXPECT_EQ(decode(DType::fp32, 0x3F800001u), 1.0 + std::ldexp(1.0, -23));
  EXPECT_EQ(round_to(DType::fp64, x), x);
  EXPECT_EQ(decode(DType::fp64, encode(DType::fp64, x)), x);
}

TEST(DtypeParse, AcceptsNamesAndAliases) {
  EXPECT_EQ(parse_dtype("fp16"), DType::fp16);
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("fp32"), DType::fp32);
  EXPECT_EQ(parse_dtype("fp64"), DType::fp64);
  EXPECT_EQ(parse_dtype("float16"), DType::fp16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("float32"), DType::fp32);
  EXPECT_EQ(parse_dtype("float64"), DType::fp64);
  for (DType t : {DType::fp16, DType::bf16, DType::fp32, DType::fp64}) EXPECT_EQ(parse_dtype(name(t)), t);
}

TEST(DtypeParse, ErrorNamesTheText) {
  for (const char* bad : {"fp8_e4m3", "FP16", "", "bf16 "}) {
    try {
      parse_dtype(bad);
      ADD_FAILURE() << "parse_dtype('" << bad << "') did not throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace opcts
