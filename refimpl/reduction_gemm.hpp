// The three GEMMs behind a bounded reference's reduction statistics: values (fp64), magnitudes and squares of the K
// products (fp32 with a derived inflation, or fp64).
#pragma once

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "refimpl/gemm.hpp"

namespace opcts {

using RowMajorF64 = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMajorF32 = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace reduction_detail {

// x32 = fl32(|x|), or fl32(fl64(x²)) when `square`; false (x32 partly written) unless every
// nonzero |x| lies in [2^-30, 2^25] (NaN and ±inf do not): then x² lies in [2^-60, 2^50],
// every product of two magnitudes or two squares in [2^-120, 2^100], and a sum of at most 2^20
// of them below 2^120 — all normal fp32 numbers, so each fp32 rounding is relative.
inline bool to_fp32(const RowMajorF64& x, RowMajorF32& x32, bool square) {
  bool ok = true;
  const double* d = x.data();
  float* f = x32.data();
  const int64_t n = x.size();
#pragma omp parallel for schedule(static) reduction(&& : ok) if (n > (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) {
    const double v = std::fabs(d[i]);
    ok = ok && (v == 0 || (v >= 0x1p-30 && v <= 0x1p25));
    f[i] = static_cast<float>(square ? v * v : v);
  }
  return ok;
}

// x = |x|, or x = x² when `square`, in parallel (Eigen's coefficient-wise loops run on one thread).
inline void in_place(RowMajorF64& x, bool square) {
  double* d = x.data();
  const int64_t n = x.size();
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) d[i] = square ? d[i] * d[i] : std::fabs(d[i]);
}

// 1/(1 − γ_n) for fp32's unit roundoff u = 2^-24, γ_n = n·u/(1 − n·u) (Higham, Accuracy and
// Stability of Numerical Algorithms, 2nd ed., Lemma 3.1), raised by 2^-50 to cover this
// function's own double roundings and the one of the product it scales.
inline double fp32_sum_inflation(int64_t n) {
  const double nu = static_cast<double>(n) * 0x1p-24;
  const double gamma = nu / (1 - nu);
  return 1 / (1 - gamma) * (1 + 0x1p-50);
}

}  // namespace reduction_detail

/// The fewest rows (of either operand) for which the fp32 path pays for its conversions
/// (measured: grouped_mm's groups of ~32 rows ran slower in fp32 at 16).
inline constexpr int64_t kFp32MinRows = 64;

/// Where reduction_products writes: three row-major [R, C] blocks with leading dimension ldc
/// (a block of a larger output, such as one group's).
struct ReductionOut {
  double* value = nullptr;
  double* abs_sum = nullptr;
  double* sq_sum = nullptr;
  int64_t ldc = 0;
};

/// For dequantized operands a [R, K] and bt [C, K] (Bᵀ), with t_k = a[r, k]·bt[c, k], writes
/// value = Σ_k t_k (fp64), abs_sum >= Σ_k |t_k| and sq_sum >= Σ_k t_k² per (r, c) into `out`
/// (what ReductionStats holds, core/reduction.hpp). Takes the operands by value (the fp64 path
/// overwrites them by their magnitudes and squares).
///
/// abs_sum and sq_sum only scale bounds, so an upper bound close to the sum serves, and they
/// are computed in fp32 (twice fp64's rate on AVX-512) when every nonzero operand magnitude
/// lies in [2^-30, 2^25], K <= 2^20 and both R and C are at least 64 (below that the
/// conversions cost as much as the products); else in fp64, exactly as value. In fp32 every
/// term is a nonnegative normal number: each operand is rounded to fp32 once (|x|) or twice (x²
/// in double, then fp32), each relative error at most u = 2^-24, and any order of summing K
/// nonnegative products, with or without FMA, gives ŝ >= (1 − γ_K)·s (Higham §3.1). So
/// s <= ŝ/(1 − γ_{K+4}): the fp32 result times fp32_sum_inflation(K + 4), at most a relative
/// ~2γ_{K+4} above the sum (9.8e-4 at K = 8192). tests/test_gemm.cpp checks both sides.
inline void reduction_products(RowMajorF64 a, RowMajorF64 bt, const ReductionOut& out) {
  const int64_t R = a.rows(), C = bt.rows(), K = a.cols();
  // Each product at the CPU's best ISA level (refimpl/gemm.hpp): [R, C] = a·btᵀ.
  const auto product = [&](double* c) { ref::gemm<double>(R, C, K, {a.data(), K}, {bt.data(), K, true}, c, out.ldc); };
  product(out.value);
  if (K <= (int64_t{1} << 20) && std::min(R, C) >= kFp32MinRows) {
    RowMajorF32 a32(R, K), bt32(C, K);
    RowMajorF32 c32(R, C);
    const double inflate = reduction_detail::fp32_sum_inflation(K + 4);
    const auto product32 = [&](double* c) {
      ref::gemm<float>(R, C, K, {a32.data(), K}, {bt32.data(), K, true}, c32.data(), C);
#pragma omp parallel for schedule(static) if (R * C > (int64_t{1} << 16))
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) c[i * out.ldc + j] = static_cast<double>(c32(i, j)) * inflate;
    };
    if (reduction_detail::to_fp32(a, a32, false) && reduction_detail::to_fp32(bt, bt32, false)) {
      product32(out.abs_sum);
      reduction_detail::to_fp32(a, a32, true);
      reduction_detail::to_fp32(bt, bt32, true);
      product32(out.sq_sum);
      return;
    }
  }
  reduction_detail::in_place(a, false);
  reduction_detail::in_place(bt, false);
  product(out.abs_sum);
  reduction_detail::in_place(a, true);  // |x|² = x²
  reduction_detail::in_place(bt, true);
  product(out.sq_sum);
}

}  // namespace opcts
