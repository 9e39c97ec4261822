// The codec arithmetic: RNE quantisation in double, then each format's code layout.
#include "numerics/codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace opcts {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

int exp_all_ones(const FloatFormat& f) { return (1 << f.exponent_bits) - 1; }

// 2^n exactly: a normal double's bits for n in [−1022, 1023] (all the formats here need),
// std::ldexp beyond. glibc's ldexp and frexp were a third of int4_mm's input generation (perf, 2026-12-02).
double exp2i(int n) {
  if (n < -1022 || n > 1023) return std::ldexp(1.0, n);
  const uint64_t bits = static_cast<uint64_t>(n + 1023) << 52;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// a·2^n where the result is a normal double: one exact product where 2^n is one, std::ldexp
// where it is not (fp64's own subnormal scales).
double scale2(double a, int n) { return n < -1022 || n > 1023 ? std::ldexp(a, n) : a * exp2i(n); }

// frexp's exponent e of a finite x != 0 (|x| in [2^(e-1), 2^e)): from a normal double's bits,
// std::frexp for a subnormal one.
int binade(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  if (biased != 0) return biased - 1022;
  int e;
  std::frexp(x, &e);
  return e;
}

// Largest finite unbiased exponent: IEEE formats reserve the all-ones exponent.
int emax(const FloatFormat& f) {
  if (f.specials == Specials::e8m0) return 127;
  return exp_all_ones(f) - (f.specials == Specials::ieee ? 1 : 0) - f.bias;
}

uint64_t sign_bit(const FloatFormat& f) { return f.is_signed ? uint64_t{1} << (f.exponent_bits + f.mantissa_bits) : 0; }

// The value an overflow (finite beyond max, or ±Inf) becomes under the policy.
double overflow_value(double x, const FloatFormat& f, Overflow ov) {
  if (ov == Overflow::satfinite || f.specials == Specials::finite) return std::copysign(max_finite(f), x);
  if (f.specials == Specials::ieee) return std::copysign(kInf, x);
  return kNaN;  // fn, fnuz, e8m0
}

}  // namespace

double max_finite(const FloatFormat& f) {
  if (f.specials == Specials::e8m0) return exp2i(127);
  // fn formats lose the all-ones mantissa of the top exponent to NaN.
  const double top_mantissa =
      f.specials == Specials::fn ? 2.0 - 2 * exp2i(-f.mantissa_bits) : 2.0 - exp2i(-f.mantissa_bits);
  return scale2(top_mantissa, emax(f));
}

double min_normal(const FloatFormat& f) {
  if (f.specials == Specials::e8m0) return exp2i(-127);
  return exp2i(1 - f.bias);
}

double min_subnormal(const FloatFormat& f) {
  if (f.specials == Specials::e8m0) return min_normal(f);
  return exp2i(1 - f.bias - f.mantissa_bits);
}

double round_to_format(double x, const FloatFormat& f, Overflow ov) {
  if (f.specials == Specials::e8m0) return decode_format(encode_e8m0(x, ScaleRounding::rne, ov), f);
  if (std::isnan(x)) return f.specials == Specials::finite ? max_finite(f) : kNaN;
  if (!f.is_signed) x = std::fabs(x);
  if (std::isinf(x)) return overflow_value(x, f, ov);
  if (x == 0) return f.specials == Specials::fnuz ? 0.0 : x;
  const int emin = 1 - f.bias;
  const int e = binade(x);  // |x| in [2^(e-1), 2^e)
  // x in the format's normal range (a normal double of binade emin or above), the common case:
  // round its significand to the format's mantissa_bits on the bits themselves, adding half a
  // quantum less one (plus the kept last bit: ties to even) and clearing what lies below. This
  // is the nearbyint(x / quantum)·quantum below to the bit (the carry of an all-ones
  // significand moves x to the next binade as the division's rounding does), without its
  // division and libm call: round_to for bf16 took 15 ns, 16 of them per weight group of every
  // int4_mm reference and one per element of sdpa's same-precision one. The overflow test runs
  // only from 2^emax up, below which every value is under max_finite.
  if (e - 1 >= std::max(emin, -1022) && f.mantissa_bits < 52) {
    const int shift = 52 - f.mantissa_bits;
    uint64_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits = (bits + (uint64_t{1} << (shift - 1)) - 1 + ((bits >> shift) & 1)) & ~((uint64_t{1} << shift) - 1);
    double r;
    std::memcpy(&r, &bits, sizeof r);
    if (binade(r) - 1 >= emax(f) && std::fabs(r) > max_finite(f)) return overflow_value(x, f, ov);
    return r;
  }
  const int exp = std::max(e - 1, emin);
  // The quantum of x's binade (subnormals share emin's); scaling by a power of two is exact in
  // double and nearbyint rounds half to even in the default rounding mode.
  const double quantum = exp2i(exp - f.mantissa_bits);
  double r = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(r) > max_finite(f)) return overflow_value(x, f, ov);
  if (r == 0 && f.specials == Specials::fnuz) r = 0.0;  // no −0 in FNUZ
  return r;
}

bool is_nan_code(uint64_t bits, const FloatFormat& f) {
  const int mb = f.mantissa_bits;
  const uint64_t mant = bits & ((uint64_t{1} << mb) - 1);
  const uint64_t exp = (bits >> mb) & static_cast<uint64_t>(exp_all_ones(f));
  switch (f.specials) {
    case Specials::ieee: return exp == static_cast<uint64_t>(exp_all_ones(f)) && mant != 0;
    case Specials::fn: return exp == static_cast<uint64_t>(exp_all_ones(f)) && mant == (uint64_t{1} << mb) - 1;
    case Specials::fnuz: return (bits & ((sign_bit(f) << 1) - 1)) == sign_bit(f);
    case Specials::finite: return false;
    case Specials::e8m0: return (bits & 0xFF) == 0xFF;
  }
  return false;
}

uint64_t encode_format(double x, const FloatFormat& f, Overflow ov) {
  if (f.specials == Specials::e8m0) return encode_e8m0(x, ScaleRounding::rne, ov);
  const int mb = f.mantissa_bits;
  const uint64_t all_exp = static_cast<uint64_t>(exp_all_ones(f)) << mb;
  const uint64_t all_mant = (uint64_t{1} << mb) - 1;
  const double r = round_to_format(x, f, ov);
  const uint64_t sign = (f.is_signed && std::signbit(std::isnan(r) ? x : r)) ? sign_bit(f) : 0;
  if (std::isnan(r)) {
    switch (f.specials) {
      case Specials::ieee: return sign | all_exp | (uint64_t{1} << (mb - 1));  // quiet NaN
      case Specials::fn: return sign | all_exp | all_mant;
      default: return sign_bit(f);  // fnuz: the one NaN
    }
  }
  if (std::isinf(r)) return sign | all_exp;  // ieee only
  const double a = std::fabs(r);
  if (a == 0) return sign;
  const int exp = binade(a) - 1;
  const int emin = 1 - f.bias;
  if (exp < emin)  // subnormal: the mantissa counts quanta of 2^(emin − mb) (exact products)
    return sign | static_cast<uint64_t>(scale2(a, f.bias - 1 + mb));
  const uint64_t mant = static_cast<uint64_t>(scale2(a, mb - exp)) - (uint64_t{1} << mb);
  return sign | (static_cast<uint64_t>(exp + f.bias) << mb) | mant;
}

double decode_format(uint64_t bits, const FloatFormat& f) {
  if (f.specials == Specials::e8m0) {
    const unsigned c = bits & 0xFF;
    return c == 0xFF ? kNaN : exp2i(static_cast<int>(c) - 127);
  }
  if (is_nan_code(bits, f)) return kNaN;
  const int mb = f.mantissa_bits;
  const bool neg = f.is_signed && (bits & sign_bit(f));
  const uint64_t exp = (bits >> mb) & static_cast<uint64_t>(exp_all_ones(f));
  const uint64_t mant = bits & ((uint64_t{1} << mb) - 1);
  double v;
  if (f.specials == Specials::ieee && exp == static_cast<uint64_t>(exp_all_ones(f))) {
    v = kInf;
  } else if (exp == 0) {
    v = scale2(static_cast<double>(mant), 1 - f.bias - mb);
  } else {
    v = scale2(static_cast<double>(mant + (uint64_t{1} << mb)), static_cast<int>(exp) - f.bias - mb);
  }
  return neg ? -v : v;
}

uint8_t encode_e8m0(double x, ScaleRounding r, Overflow ov) {
  if (std::isnan(x)) return 0xFF;
  const double a = std::fabs(x);
  if (std::isinf(a)) return ov == Overflow::satfinite ? 0xFE : 0xFF;
  if (a == 0) return 0x00;  // no zero: the smallest scale 2^-127
  int e2;
  const double m = std::frexp(a, &e2);  // a = m·2^e2, m in [0.5, 1)
  int e = e2 - 1;                       // floor(log2 a)
  switch (r) {
    case ScaleRounding::floor: break;
    case ScaleRounding::ceil: e += m != 0.5 ? 1 : 0; break;
    case ScaleRounding::rne: e += (m >= 0.75) ? 1 : 0; break;  // a/2^e in [1,2): 1.5 and up round up
  }
  if (e < -127) return 0x00;
  if (e > 127) return ov == Overflow::satfinite ? 0xFE : 0xFF;
  return static_cast<uint8_t>(e + 127);
}

uint8_t encode_int4(double x, bool is_signed) {
  if (std::isnan(x)) return 0;
  const double lo = is_signed ? -8 : 0, hi = is_signed ? 7 : 15;
  const double r = std::clamp(std::nearbyint(std::clamp(x, lo - 1, hi + 1)), lo, hi);
  return static_cast<uint8_t>(static_cast<int>(r) & 0xF);
}

double decode_int4(uint8_t code, bool is_signed) {
  const int c = code & 0xF;
  return is_signed && c >= 8 ? c - 16 : c;
}

}  // namespace opcts
