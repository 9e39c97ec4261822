// cast inputs: every code of a 16-bit or narrow `from`, the fp32 values at the target's edges, or
// seeded random fp32 values (cast.hpp, "Inputs").
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "families/cast/cast.hpp"
#include "numerics/rng.hpp"

namespace opcts::cast {

std::vector<float> edge_values(DType to) {
  const auto& info = dtype_info(to);
  std::set<double> vals;  // representable magnitudes of the target
  const int codes = 1 << info.bits;
  for (int c = 0; c < codes; ++c) {
    const double v = decode(to, static_cast<uint64_t>(c));
    if (std::isfinite(v) && v >= 0) vals.insert(v);
  }
  std::vector<float> out;
  auto both_signs = [&](double x) {
    const float f = static_cast<float>(x);
    out.push_back(f);
    out.push_back(std::nextafter(f, INFINITY));
    out.push_back(std::nextafter(f, -INFINITY));
  };
  double prev = -1;
  for (double v : vals) {
    both_signs(v);
    if (prev >= 0) both_signs((prev + v) / 2);  // the tie between neighbours (exact in fp32)
    prev = v;
  }
  const double top = *vals.rbegin();
  const double ulp_top = top - *std::prev(vals.end(), 2);
  // Overflow thresholds: half an ulp above max is the RNE tie to the next binade.
  for (double x :
       {top + ulp_top / 2, top + ulp_top, 2 * top, 1e30, static_cast<double>(std::numeric_limits<float>::max())})
    both_signs(x);
  const double tiny = vals.size() > 1 ? *std::next(vals.begin()) : top;  // the smallest positive value
  for (double x : {tiny / 2, tiny / 4, tiny * 0.75, 1e-30, 1e-40})       // half the smallest: the tie to 0
    both_signs(x);
  std::vector<float> signed_out;
  for (float f : out) {
    signed_out.push_back(f);
    signed_out.push_back(-f);
  }
  for (float f : {0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()}) {
    signed_out.push_back(f);
    signed_out.push_back(-f);
  }
  return signed_out;
}

HostTensor make_input(const Problem& p, uint64_t seed) {
  switch (p.input) {
    case Input::exhaustive:
    case Input::all_codes: {
      const int64_t n = int64_t{1} << dtype_info(p.from).bits;
      HostTensor t(p.from, {n});
      for (int64_t c = 0; c < n; ++c) t.set_code(c, static_cast<uint64_t>(c));
      return t;
    }
    case Input::edges: {
      const auto v = edge_values(p.to);
      HostTensor t(DType::fp32, {static_cast<int64_t>(v.size())});
      for (size_t i = 0; i < v.size(); ++i) t.set_code(static_cast<int64_t>(i), std::bit_cast<uint32_t>(v[i]));
      return t;
    }
    case Input::random: {
      HostTensor t(DType::fp32, {p.count});
      const double top = dtype_info(p.to).max_finite;
      const double lo_exp = std::log2(dtype_info(p.to).min_normal) - dtype_info(p.to).format.mantissa_bits - 2;
      const double hi_exp = std::log2(top) + 2;
      auto* out = reinterpret_cast<uint32_t*>(t.data());
      // Element i: uniform01 of streams 0 and 1 at i, lane i % 4 of their blocks i / 4.
      for_each_block_run(seed, 0, (p.count + 3) / 4, [&](int64_t b0, int64_t nb, const uint32_t* draws0) {
        uint32_t draws1[4 * kBlockRun];
        random_blocks(seed, 1, static_cast<uint64_t>(b0), nb, draws1);
        const int64_t i0 = 4 * b0, count = std::min(4 * nb, p.count - i0);
        for (int64_t i = i0; i < i0 + count; ++i) {
          const double u = uniform01_of_bits(draws0[i - i0]), w = uniform01_of_bits(draws1[i - i0]);
          uint32_t bits;
          if (i % 2 == 0) {  // any fp32 bit pattern: huge, tiny, subnormal, Inf, NaN
            bits = static_cast<uint32_t>(u * 4294967296.0);
          } else {  // log-uniform magnitude across the target's range and a little beyond
            const float x = static_cast<float>(std::exp2(lo_exp + (hi_exp - lo_exp) * u));
            bits = std::bit_cast<uint32_t>(w < 0.5 ? -x : x);
          }
          out[i] = bits;
        }
      });
      return t;
    }
  }
  throw std::logic_error("unhandled cast input");
}

}  // namespace opcts::cast
