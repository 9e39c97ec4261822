// scaled_mm reference: exact dequantization, fp64 Eigen GEMMs (OpenMP, dispatched per ISA level), the exact unrounded
// result, and the reduction statistics.
//
// "d" is x = os·(g·Σ_k t_k + bias), t_k = deq(a_k)·deq(b_k) (exact in double: fp8/fp4 codes
// times power-of-two or fp32 scales), unrounded: the bounded metric allows a device's one
// rounding to the output dtype as half a spacing around x (and decides, beyond the output's
// range, whether the largest finite value or inf is right); a saturating e4m3 output's value
// beyond its range is its largest value, with x kept beside it (ReductionStats::unsaturated) for
// the judge to bound how far a correct result may fall back into the range.
//
// What a device may differ by depends on how it accumulates, which the reference does not
// know (one reference serves every impl). So it gives, per element, the statistics every
// accumulator model needs (ReductionStats, core/reduction.hpp; judge/accumulator.hpp derives the bounds):
//   S = os·|g|·Σ_k |t_k|          the worst case: each rounding loses at most u·(a partial Σ|t|)
//   Q = (os·g)²·Σ_k t_k²          the probabilistic bound and the bias check: the variance of a
//                                 partial sum of independent zero-mean terms is its Σt²
//   X = os·(|g·Σ_k t_k| + |bias|) the values the fp32 epilogue rounds
// from three GEMMs: of the values, of their magnitudes and of their squares (the last two in
// fp32 with a derived inflation where the operands allow it: refimpl/reduction_gemm.hpp), and the
// products' significant bits (term_bits: a truncating adder loses nothing of a product on its
// grid, judge/accumulator.cpp). Both fills give
// independent terms symmetric about zero (random: N(0, 1) quantized symmetrically; exact:
// codes uniform in [-max, max]), so zero_mean holds. Exact fills also give term_bits
// (exact_ranges): every partial sum then fits a 14-bit adder over 128 products (the whole K
// with fast_accum) and fp32, so a model at least that wide compares bit for bit (E = 0).
#include <cmath>

#include "families/scaled_mm/scaled_mm.hpp"
#include "refimpl/reduction_gemm.hpp"

namespace opcts::scaled_mm {

namespace {

using RowMajor = RowMajorF64;

// Dequantized operand [R, K]: code value times its block's scale, exact in double. Codes are
// read straight from the storage through the 2-D strides and decoded by a table, and each
// block's scale is looked up once: this runs over tens of millions of weights per problem.
RowMajor dequantized(const Problem& p, const TensorMap& in, char which, int64_t R) {
  const HostTensor& codes = in.at(which == 'a' ? "a" : "b");
  const int64_t K = p.k, blk = scale_block_k(p);
  const int bits = dtype_info(codes.dtype()).bits;
  const std::vector<double> value = decode_table(codes.dtype());
  const int64_t s0 = codes.strides()[0], s1 = codes.strides()[1];
  const auto* bytes = reinterpret_cast<const uint8_t*>(codes.data());
  auto code_at = [&](int64_t r, int64_t k) -> unsigned {
    const int64_t pos = r * s0 + k * s1;
    if (bits == 4) return pos % 2 ? bytes[pos / 2] >> 4 : bytes[pos / 2] & 0xF;  // element 2i: low nibble
    return bytes[pos];
  };
  const int64_t block = blk ? blk : std::max<int64_t>(K, 1);
  RowMajor x(R, K);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k0 = 0; k0 < K; k0 += block) {
      const double scale = scale_at(p, in, which, r, blk ? k0 / blk : 0);
      for (int64_t k = k0; k < std::min(K, k0 + block); ++k) x(r, k) = value[code_at(r, k)] * scale;
    }
  return x;
}

}  // namespace

References reference(const Problem& p, const TensorMap& in) {
  const int64_t M = p.m, N = p.n;
  const double g = in.count("global_scale") ? in.at("global_scale").get(0) : 1.0;
  const double os = in.count("out_scale") ? in.at("out_scale").get(0) : 1.0;
  const HostTensor* bias = in.count("bias") ? &in.at("bias") : nullptr;

  References r;
  auto& want = r.exact["d"];
  ReductionStats& st = r.reduction["d"];
  const Overflow ov = p.out == DType::e4m3fn ? Overflow::satfinite : default_overflow(p.out);
  const size_t count = static_cast<size_t>(M * N);
  want.resize(count);
  st.terms = p.k;
  st.zero_mean = true;
  st.exact_term_bits = p.fill == Fill::exact ? exact_ranges(p).term_bits : -1;
  // The products an FP8 tensor core's adder receives are the two codes' (the fp32 scales
  // multiply the chunk sums): their significands' bits. Block-scaled MMAs may fold ue4m3
  // scales into the products: unknown.
  const auto significand = [](DType t) { return dtype_info(t).format.mantissa_bits + 1; };
  st.term_bits = p.block_scaled() ? -1 : significand(p.a_elem) + significand(p.b_elem);
  st.abs_sum.resize(count);
  st.sq_sum.resize(count);
  st.magnitude.resize(count);
  if (ov == Overflow::satfinite) st.unsaturated.resize(count);
  // The three products straight into the outputs (Σt in want, Σ|t| and Σt² in the statistics),
  // then scaled in place.
  reduction_products(dequantized(p, in, 'a', M), dequantized(p, in, 'b', N),
                     {want.data(), st.abs_sum.data(), st.sq_sum.data(), N});
  const double scale = os * std::fabs(g), max_out = dtype_info(p.out).max_finite;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const double bj = bias ? bias->get(j) : 0.0;
      const size_t idx = static_cast<size_t>(i * N + j);
      const double c = want[idx];
      const double x = os * (g * c + bj);
      // Unrounded: the bounded metric allows half an output spacing around x (judge/compare.cpp);
      // a saturating output's result beyond its range is its largest value, and the judge is given
      // x to see how far past the range it lies (ReductionStats::unsaturated).
      want[idx] = ov == Overflow::satfinite && std::fabs(x) > max_out ? std::copysign(max_out, x) : x;
      if (ov == Overflow::satfinite) st.unsaturated[idx] = x;
      st.abs_sum[idx] = scale * st.abs_sum[idx];
      st.sq_sum[idx] = scale * scale * st.sq_sum[idx];
      st.magnitude[idx] = os * (std::fabs(g * c) + std::fabs(bj));
    }
  return r;
}

}  // namespace opcts::scaled_mm
