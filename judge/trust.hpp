// benchdnn's trust check: an output of zeros the reference does not explain cannot PASS.
#pragma once

#include <optional>
#include <string>

#include "core/result.hpp"

namespace opcts {

/// Zeros the output may hold that the reference does not explain: room for a few elements
/// whose reference's own bound is smaller than a correct kernel's error there (ref_relative
/// bounds the accumulation by the larger of a row statistic and the reference's per-element
/// model, so a tiny element of a row may err by more than its model; a bf16 sum of 37 atomics
/// cancelled to an exact 0 in some orders on the H200, docs/status/sm90.md call Q) — 1% of the
/// output, and at least one element.
constexpr double kTrustZeroMargin = 0.01;

/// Why an output that is within tolerance is still not trusted, or nullopt. Reads the zero
/// counts compare_output took (OutputStats::zeros, ref_zeros, unexplained_zeros).
///
/// A zero is a right answer where the reference explains it (judge/compare.cpp): its fp64
/// value rounds to 0 in the output dtype, or 0 lies within the element's own bound, where a
/// correct result within that bound rounds to 0 (an fp16 dQ entry of a few subnormals with a
/// large scale, where the rounded reference keeps a subnormal). Only the other zeros count:
/// MISTRUSTED when the output is all zero while one of its zeros is unexplained (an output
/// never written, or written as zeros, whatever its size), or when its unexplained zeros exceed
/// max(kTrustZeroMargin · elements, 1). Under the bounded, exact and bitexact metrics an
/// unexplained zero is also a mismatch (the element's bound is the comparison's), so the check
/// decides only where the comparison allows more than the reference's own model: ref_relative's
/// row statistic, allclose's hand-set atol.
std::optional<std::string> trust_check(const OutputStats& s);

}  // namespace opcts
