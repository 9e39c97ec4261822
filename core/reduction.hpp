// What a reference knows about the reduction behind each element of an output: the statistics every accumulator model needs.
#pragma once

#include <cstdint>
#include <vector>

namespace opcts {

/// What a reference knows about the reduction behind each element of one output (the bounds
/// that runner/accumulator.hpp derives from it under an impl's model), in the
/// output's units (for scaled_mm D = os·(g·Σ_k t_k + bias), t_k = deq(a_k)·deq(b_k)):
/// vectors are per element, in the output's element order.
struct ReductionStats {
  int64_t terms = 0;               // K: products summed per element
  // S and Q only scale bounds (every bound grows with them), so a reference may give upper
  // bounds of them close to the sums (refimpl/reduction_gemm.hpp: within 2γ_{K+4} at fp32's u).
  std::vector<double> abs_sum;     // S >= os·|g|·Σ_k |t_k|
  std::vector<double> sq_sum;      // Q >= (os·g)²·Σ_k t_k²
  std::vector<double> magnitude;   // X = os·(|g·Σ_k t_k| + |bias|): what the epilogue's roundings act on
  // The terms are independent and symmetric about zero (the fills' distributions), which the
  // probabilistic bound and the bias check assume; false: only the worst-case bound applies.
  bool zero_mean = false;
  // Exact fills: every term is an integer multiple of one quantum, at most 2^exact_term_bits
  // quanta in magnitude, and every scale a power of two; -1 when the fill gives no guarantee.
  int exact_term_bits = -1;
  bool operator==(const ReductionStats&) const = default;
};

}  // namespace opcts
