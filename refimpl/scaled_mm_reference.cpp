// scaled_mm reference: exact dequantization, an fp64 Eigen GEMM (OpenMP), one rounding to the output dtype, and the error bound.
//
// The bound ("d" in References::bound, metric `bounded`): what a correct device may differ by.
// A device accumulates in fp32 (unit roundoff u = 2^-24): products of two codes are exact in
// fp32 (at most 4 + 4 significant bits), partial sums over a K block, the multiplications by
// the two block scales, the adds into the accumulator, the global scale, the bias add and the
// output scale are each one fp32 rounding, in whatever order the device sums. Every path from
// a product to the result passes through at most K − 1 additions and 5 multiplications or
// additions besides, so (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1, for
// any summation order) the fp32 value v before the output rounding satisfies
//     |v − x| <= E = γ_{K+5} · os · (|g| · Σ_k |a_k|·|b_k| + |bias|),   γ_n = n·u / (1 − n·u),
// with x the exact value and a_k, b_k the dequantized operands. The device then rounds v to the
// output dtype once, the reference rounds x once; rounding is monotone and moves a value by at
// most half the spacing of its binade, so
//     |RN(v) − RN(x)| <= E + ulp_out(|x| + E),
// where ulp_out(y) is the output format's spacing at magnitude y (its subnormal spacing below
// the smallest normal). The reference supplies E per element; the `bounded` metric scales it
// by the tolerance's factor (an accumulator model of another precision, e.g. Hopper's FP8
// tensor cores) and adds the ulp_out term.
// fast_accum ("no periodic promotion", cuBLASLt FAST_ACCUM; DeepSeek-V3 reports that H800's FP8
// tensor cores keep about 14 significant bits while accumulating): the model is a 14-bit
// accumulator that truncates (a full ulp, u = 2^-13) once per 32-deep MMA, and products aligned
// to the largest of their 32-element chunk, losing up to 2^-13 of it each:
//     E = ((ceil(K/32) + 5)·2^-13 + 32·2^-13) · os · (|g| Σ |a_k||b_k| + |bias|).
// Exact fills without fast_accum: every partial sum is an exactly representable fp32 value
// (exact_ranges), so v = x and the bound is 0: the comparison is exact.
#include <cmath>

#include <Eigen/Dense>

#include "refimpl/scaled_mm.hpp"

namespace opcts::scaled_mm {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Dequantized operand [R, K]: code value times its block's scale, exact in double. Codes are
// read straight from the storage through the 2-D strides and decoded by a table, and each
// block's scale is looked up once: this runs over tens of millions of weights per problem.
RowMajor dequantized(const Problem& p, const TensorMap& in, char which, int64_t R) {
  const HostTensor& codes = in.at(which == 'a' ? "a" : "b");
  const int64_t K = p.k, blk = scale_block_k(p);
  const int bits = dtype_info(codes.dtype()).bits;
  std::vector<double> value(size_t{1} << bits);
  for (size_t c = 0; c < value.size(); ++c) value[c] = decode(codes.dtype(), c);
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
  RowMajor a = dequantized(p, in, 'a', M);
  RowMajor bt = dequantized(p, in, 'b', N);
  const double g = in.count("global_scale") ? in.at("global_scale").get(0) : 1.0;
  const double os = in.count("out_scale") ? in.at("out_scale").get(0) : 1.0;
  const HostTensor* bias = in.count("bias") ? &in.at("bias") : nullptr;

  RowMajor c(M, N);
  c.noalias() = a * bt.transpose();
  const bool exact = p.fill == Fill::exact && !p.fast_accum;
  RowMajor mag;
  if (!exact) {
    a = a.cwiseAbs();
    bt = bt.cwiseAbs();
    mag.resize(M, N);
    mag.noalias() = a * bt.transpose();
  }
  const double u = std::ldexp(1.0, -24);
  const double kn = static_cast<double>(p.k);
  double coef;
  if (p.fast_accum) coef = (std::ceil(kn / 32) + 5 + 32) * std::ldexp(1.0, -13);
  else coef = (kn + 5) * u / (1 - (kn + 5) * u);

  References r;
  auto& want = r.exact["d"];
  auto& bound = r.bound["d"];
  want.assign(static_cast<size_t>(M * N), 0.0);
  bound.assign(want.size(), 0.0);
  const Overflow ov = p.out == DType::e4m3fn ? Overflow::satfinite : default_overflow(p.out);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const double bj = bias ? bias->get(j) : 0.0;
      const double x = os * (g * c(i, j) + bj);
      const size_t idx = static_cast<size_t>(i * N + j);
      want[idx] = round_to(p.out, x, ov);
      if (!exact) {
        // Beyond the output's range the value is kept unrounded: within the accumulation
        // error a device may round to the largest finite value or to inf, and the bounded
        // metric decides which it may (runner/compare.cpp).
        if (std::isinf(want[idx]) && std::isfinite(x)) want[idx] = x;
        const double e = coef * os * (std::fabs(g) * mag(i, j) + std::fabs(bj));
        bound[idx] = e;  // the metric adds the one output rounding (compare.hpp, bounded)
      }
    }
  return r;
}

}  // namespace opcts::scaled_mm
