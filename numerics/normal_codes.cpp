// The code-domain normal sampler (numerics/normal_codes.hpp).
#include "numerics/normal_codes.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "numerics/codec.hpp"

namespace opcts {

NormalCodeSampler::NormalCodeSampler(DType element, double sigma) : element_(element), sigma_(sigma) {
  const DTypeInfo& info = dtype_info(element);
  const FloatFormat& f = info.format;
  const int code_bits = (f.is_signed ? 1 : 0) + f.exponent_bits + f.mantissa_bits;
  if (info.is_integer || info.bits > 16 || code_bits < 2 || code_bits > 16 || !(sigma > 0) || !std::isfinite(sigma))
    throw std::invalid_argument("NormalCodeSampler: " + std::string(name(element)) + " with sigma " +
                                std::to_string(sigma) + ": a float dtype of at most 16 bits and a finite sigma > 0");
  struct Value {
    double v;
    uint16_t code;
  };
  const std::vector<double> decoded = decode_table(element);  // 2^storage bits ≥ 2^code_bits
  std::vector<Value> values;
  for (uint64_t c = 0; c < (uint64_t{1} << code_bits); ++c)
    if (std::isfinite(decoded[c])) values.push_back({decoded[c], static_cast<uint16_t>(c)});
  // Ascending, −0 before +0.
  std::sort(values.begin(), values.end(), [](const Value& a, const Value& b) {
    return a.v != b.v ? a.v < b.v : std::signbit(a.v) && !std::signbit(b.v);
  });
  const auto phi = [&](double x) { return 0.5 * std::erfc(-x / (sigma * std::sqrt(2.0))); };
  for (size_t i = 0; i < values.size(); ++i) {
    double upper = 1;  // the last value takes everything above it (satfinite)
    if (i + 1 < values.size()) {
      const double a = values[i].v, b = values[i + 1].v;
      upper = a == b ? phi(0) : phi(0.5 * (a + b));  // −0 | +0 split at 0
    }
    if (!cdf_.empty() && upper <= cdf_.back()) continue;  // an empty interval (far tails)
    cdf_.push_back(upper);
    code_.push_back(values[i].code);
  }
  cdf_.back() = 1;
  for (double c : cdf_) threshold_.push_back(static_cast<uint64_t>(std::ceil(std::ldexp(c, 32))));

  // A value no code_ holds is never drawn: a NaN or Inf code, or 2^code_bits where every code
  // is finite (e2m1fn, e2m3fn, e3m2fn); from_bits returns 16-bit codes, so one always exists.
  std::vector<bool> used(size_t{1} << 16);
  for (uint16_t c : code_) used[c] = true;
  while (used[no_code_]) ++no_code_;
  direct_.assign(size_t{1} << 16, no_code_);
  start_.resize(size_t{1} << 16);
  size_t i = 0;
  for (uint64_t j = 0; j < direct_.size(); ++j) {
    const uint64_t lo = j << 16, hi = lo | 0xFFFF;
    while (i + 1 < threshold_.size() && threshold_[i] <= lo) ++i;                 // from_bits(lo) is code_[i]
    start_[j] = static_cast<uint16_t>(i);                                         // < 2^16: one index per code
    if (i + 1 == threshold_.size() || threshold_[i] > hi) direct_[j] = code_[i];  // and so is from_bits(hi)
  }
}

size_t NormalCodeSampler::search(uint32_t bits, size_t range) const {
  // The first i with threshold_[i] > bits lies in [start_[range], start_[range + 1]] (the last
  // index takes the rest: its threshold is 2^32, above every draw).
  const size_t from = start_[range], to = range + 1 < start_.size() ? start_[range + 1] : threshold_.size() - 1;
  const auto first = threshold_.begin();
  return static_cast<size_t>(std::upper_bound(first + static_cast<std::ptrdiff_t>(from),
                                              first + static_cast<std::ptrdiff_t>(to), uint64_t{bits}) -
                             first);
}

uint16_t NormalCodeSampler::operator()(double u) const {
  const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  return code_[std::min(static_cast<size_t>(it - cdf_.begin()), code_.size() - 1)];
}

const NormalCodeSampler& normal_code_sampler(DType element, double sigma) {
  // A NaN key would compare equivalent to every sigma of the map and return another's sampler.
  if (!(sigma > 0) || !std::isfinite(sigma)) (void)NormalCodeSampler(element, sigma);  // throws
  static std::mutex mutex;
  static std::map<std::pair<DType, double>, std::unique_ptr<NormalCodeSampler>> samplers;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = samplers[{element, sigma}];
  if (!slot) slot = std::make_unique<NormalCodeSampler>(element, sigma);  // on a throw the slot stays empty
  return *slot;
}

}  // namespace opcts
