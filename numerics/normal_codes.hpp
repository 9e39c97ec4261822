// Normal draws made in the code domain: the code of RN_satfinite(σ·z), z ~ N(0, 1), drawn
// directly with its exact probability from 32 random bits, for float dtypes of up to 16 bits.
//
// Why: Box–Muller (a log, a cosine and a rounding per element) was most of the time of the
// 16-bit activations the SDPA, int4_mm and atomics families make, tens of millions per case; a
// table lookup on one 32-bit Philox lane gives the same distribution of codes (that of the
// rounded normal, up to 2^-32 per code), 10× faster, and is the same on every machine.
#pragma once

#include <cstdint>
#include <vector>

#include "numerics/dtype.hpp"

namespace opcts {

/// Inverse-CDF sampler of the codes of `element` under RN_satfinite(σ·z): code c with the
/// normal's mass of the rounding interval of its value (the midpoints to its neighbours; −0 and
/// +0 split at 0; the largest finite value takes everything above it, the most negative
/// everything below). Intervals whose mass is below the 32-bit draw's resolution get no draw.
/// Thread-safe once built. Throws std::invalid_argument for a dtype that is not a float of at
/// most 16 bits, or sigma <= 0 or not finite.
class NormalCodeSampler {
 public:
  NormalCodeSampler(DType element, double sigma);
  /// The code for u in [0, 1): the first code whose CDF exceeds u (binary search; for tests).
  uint16_t operator()(double u) const;
  /// The code of u = bits·2^-32 (32 random bits: numerics/rng's uniform01 and random_block lanes),
  /// the same code as operator()(u), found in integers: cdf_[i] <= bits·2^-32 exactly when
  /// bits >= ceil(cdf_[i]·2^32) (scaling by 2^32 is exact).
  uint16_t from_bits(uint32_t bits) const {
    const size_t j = bits >> 16;
    const uint16_t direct = direct_[j];
    if (direct != no_code_) return direct;
    return code_[search(bits, j)];
  }
  DType element() const { return element_; }
  double sigma() const { return sigma_; }

 private:
  size_t search(uint32_t bits, size_t range) const;  // the slow path of from_bits

  DType element_;
  double sigma_;
  std::vector<double> cdf_;          // P(code index <= i), ascending
  std::vector<uint64_t> threshold_;  // ceil(cdf_[i]·2^32): the least 32-bit draw past cdf_[i]
  std::vector<uint16_t> code_;
  // Per 2^16-draw range j (the draw's top 16 bits): direct_[j], the code of every draw in the
  // range, or no_code_ (a code of no finite value, so never drawn) where a threshold falls
  // inside it; start_[j], the index of the range's first draw, where the search begins.
  std::vector<uint16_t> direct_;
  std::vector<uint16_t> start_;
  uint16_t no_code_ = 0;
};

/// A process-wide NormalCodeSampler for (element, sigma), built on first use (a 16-bit dtype's
/// takes a few ms) and kept; thread-safe. Same exceptions as the constructor.
const NormalCodeSampler& normal_code_sampler(DType element, double sigma);

}  // namespace opcts
