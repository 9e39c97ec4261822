// The three fp64 GEMMs behind a bounded reference's reduction statistics: values, magnitudes and squares of the K products.
#pragma once

#include <Eigen/Dense>

#include "refimpl/gemm.hpp"

namespace opcts {

using RowMajorF64 = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// For dequantized operands a [R, K] and bt [C, K] (Bᵀ), with t_k = a[r, k]·bt[c, k]:
/// value = Σ_k t_k, abs_sum = Σ_k |t_k|, sq_sum = Σ_k t_k² per (r, c), each [R, C] (what
/// ReductionStats holds, core/reduction.hpp). Takes the operands by value: they are overwritten
/// by their magnitudes and squares.
struct ReductionProducts {
  RowMajorF64 value, abs_sum, sq_sum;
};
inline ReductionProducts reduction_products(RowMajorF64 a, RowMajorF64 bt) {
  const int64_t R = a.rows(), C = bt.rows(), K = a.cols();
  // Each product at the CPU's best ISA level (refimpl/gemm.hpp): [R, C] = a·btᵀ.
  const auto product = [&](RowMajorF64& out) {
    out.resize(R, C);
    ref::gemm<double>(R, C, K, {a.data(), K}, {bt.data(), K, true}, out.data(), C);
  };
  ReductionProducts r;
  product(r.value);
  a = a.cwiseAbs();
  bt = bt.cwiseAbs();
  product(r.abs_sum);
  a = a.cwiseAbs2();
  bt = bt.cwiseAbs2();
  product(r.sq_sum);
  return r;
}

}  // namespace opcts
