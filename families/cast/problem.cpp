// cast problems: validation, ids, inputs and the codec reference.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "families/cast/cast.hpp"
#include "numerics/rng.hpp"

namespace opcts::cast {

namespace {

bool is_wide(DType t) { return t == DType::fp32 || t == DType::fp16 || t == DType::bf16; }
bool is_narrow(DType t) { return !is_wide(t) && t != DType::fp64; }
bool has_overflow_code(DType t) {
  const auto& i = dtype_info(t);
  return !i.is_integer && i.format.specials != Specials::finite;
}

}  // namespace

bool Problem::decoding() const { return is_narrow(from); }

void Problem::validate() const {
  if (decoding()) {
    if (to != DType::fp32)
      throw std::invalid_argument("decoding a narrow format goes to fp32, not " + std::string(name(to)));
    if (input != Input::all_codes) throw std::invalid_argument("decoding takes input all_codes");
    return;
  }
  if (!is_wide(from)) throw std::invalid_argument("from must be fp32, fp16, bf16 or a narrow format");
  if (!is_narrow(to)) throw std::invalid_argument("to must be a narrow format when from is " + std::string(name(from)));
  if (overflow == Overflow::nonsaturating && !has_overflow_code(to))
    throw std::invalid_argument(std::string(name(to)) + " has no Inf or NaN code: only overflow satfinite applies");
  if (to != DType::e8m0fnu && rounding != ScaleRounding::rne)
    throw std::invalid_argument("rounding applies to e8m0fnu targets only (others round to nearest even)");
  if (input == Input::exhaustive && from == DType::fp32)
    throw std::invalid_argument("exhaustive input needs a 16-bit from (fp16, bf16)");
  if (input == Input::all_codes) throw std::invalid_argument("all_codes is for decoding a narrow from");
  if (input != Input::exhaustive && from != DType::fp32)
    throw std::invalid_argument("edges and random inputs are fp32 values (from: fp32)");
  if (input == Input::random && count <= 0) throw std::invalid_argument("random input needs count > 0");
}

std::string problem_id(const Problem& p) { return fields().id(p); }
Problem parse_problem_id(std::string_view id) { return fields().parse_id(id); }

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

int64_t input_count(const Problem& p) {
  switch (p.input) {
    case Input::exhaustive:
    case Input::all_codes: return int64_t{1} << dtype_info(p.from).bits;
    case Input::edges: return static_cast<int64_t>(edge_values(p.to).size());
    case Input::random: return p.count;
  }
  return 0;
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

HostTensor reference_output(const Problem& p, const HostTensor& in) {
  HostTensor out(p.to, in.shape());
  const int64_t n = in.numel();
// Chunks of an even size: two threads never write the two nibbles of one 4-bit byte.
#pragma omp parallel for schedule(static, 4096) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const double x = in.get(i);
    if (p.decoding()) out.set(i, x);  // every narrow value is an fp32 value
    else if (p.to == DType::e8m0fnu) out.set_code(i, encode_e8m0(x, p.rounding, p.overflow));
    else out.set_code(i, encode(p.to, x, p.overflow));
  }
  return out;
}

}  // namespace opcts::cast
