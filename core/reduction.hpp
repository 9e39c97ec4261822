// What a reference knows about the reduction behind each element of an output: the statistics every accumulator model
// needs.
#pragma once

#include <cstdint>
#include <vector>

namespace opcts {

/// What a reference knows about the reduction behind each element of one output (the bounds
/// that judge/accumulator.hpp derives from it under an impl's model), in the
/// output's units (for scaled_mm D = os·(g·Σ_k t_k + bias), t_k = deq(a_k)·deq(b_k)):
/// vectors are per element, in the output's element order.
struct ReductionStats {
  int64_t terms = 0;    // K: products summed per element (the most, where ragged)
  bool ragged = false;  // some elements sum fewer than `terms` products (grouped_mm's groups)
  // S and Q only scale bounds (every bound grows with them), so a reference may give upper
  // bounds of them close to the sums (refimpl/reduction_gemm.hpp: within 2γ_{K+4} at fp32's u).
  std::vector<double> abs_sum;    // S >= os·|g|·Σ_k |t_k|
  std::vector<double> sq_sum;     // Q >= (os·g)²·Σ_k t_k²
  std::vector<double> magnitude;  // X = os·(|g·Σ_k t_k| + |bias|): what the epilogue's roundings act on;
                                  // empty: no epilogue (int4_mm: the fp32 sum is rounded straight to the output)
  // The terms are independent and symmetric about zero (the fills' distributions), which the
  // probabilistic bound and the bias check assume; false: only the worst-case bound applies.
  bool zero_mean = false;
  // Exact fills: every term is an integer multiple of one quantum, at most 2^exact_term_bits
  // quanta in magnitude, and every scale a power of two; -1 when the fill gives no guarantee.
  int exact_term_bits = -1;
  // Significant bits of each product as the adder receives it (scaled_mm: the two element
  // codes' significands, 4 + 4 for e4m3 × e4m3; int4_mm: 8 + 8 for bf16 × bf16); -1 unknown.
  // A truncating adder loses nothing of a product whose last bit lies on its step's grid
  // (judge/accumulator.cpp's drift bound uses it).
  int term_bits = -1;
  // A known, signed error of the reduction's inputs, per element, made before any sum (int4_mm:
  // Δ = Σ_k x_k·(ŵ_k − w_k), the weights' one rounding to the dtype): a device may carry all of
  // it or none of it (dequantizing in fp32), so E adds |offset| and the bias check allows the
  // slope between 0 and the offset's own. Empty: none.
  std::vector<double> offset;
  // A saturating output (scaled_mm's e4m3fn, converted satfinite): the exact result x before
  // saturation, per element, where the reference's value is x clamped to ±max_finite. A correct
  // device's v within E of x gives sat(RN(v)), so an element whose x lies d past the range may
  // differ from ±max by E − d at most, and by nothing once d >= E (judge/compare.cpp). Empty: the
  // output does not saturate.
  std::vector<double> unsaturated;
  // What no accumulator model covers, added to E of every element: rel·S + abs (int4_mm: the
  // reference's own fp64 roundings 4·γ_K(2^-53)·S, fp32 underflow of the products K·2^-149).
  double extra_rel = 0, extra_abs = 0;
  bool operator==(const ReductionStats&) const = default;
};

}  // namespace opcts
