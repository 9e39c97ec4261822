// Comparison of an output against its reference: statistics, not a bool.
#pragma once

#include <string>
#include <vector>

#include "core/result.hpp"
#include "judge/accumulator.hpp"
#include "numerics/tensor.hpp"

namespace opcts {

enum class Metric {
  bitexact,      // same value and same sign of zero; NaN matches any NaN (the code up to NaN payload)
  exact,         // every element equal (NaN matches NaN; +0 matches -0)
  allclose,      // |got − want| <= atol + rtol·|want| per element
  ref_relative,  // |got − want| <= e + spacing_out(|want| + e)/2 per element, e = max(factor·max_row|lowp − want|,
                 // bound[i]) + atol: FlashAttention's method with its statistic taken per row over the
                 // same-precision result before its output rounding, or the reference's own bound, and one rounding
  bounded,       // |got − want| <= factor·E[i] + atol + ulp_out(|want| + factor·E[i])/2 per element, want
                 // the exact unrounded value, E[i] the reference's own bound, or the accumulation error
                 // the impl's accumulator model allows for the reference's reduction statistics, with
                 // the bias check of the error's slope (judge/accumulator.hpp); half an output spacing
                 // is one rounding to nearest; E[i] = 0 (exact fills): got must be RN(want)
};

std::string_view to_string(Metric m);
/// Throws std::invalid_argument quoting the text.
Metric parse_metric(std::string_view s);

/// A resolved tolerance for one output. The absolute floor of a bound is
/// atol + atol_eps · eps(output dtype) · max|want|: atol_eps counts roundings to the output
/// dtype at the output's own scale, so the floor follows the data instead of a bare number.
struct Tolerance {
  Metric metric = Metric::exact;
  double atol = 0;
  double rtol = 0;
  double factor = 0;
  double atol_eps = 0;
  // bounded: how the impl accumulates (default IEEE fp32) and the false-alarm probability per
  // element of the probabilistic bound and per output of the bias check (0: worst case only).
  AccumulatorModel accumulator;
  double false_alarm = 0;
  // bounded and ref_relative: the impl's declared accumulation model (the indexing families'
  // per_add / grouped / once, SDPA lse's softmax structure); its bound is References::bound
  // at bound_key(output, model) (core/family.hpp: "<output>@<model>", "" = "<output>"), the
  // reference giving one bound per model it knows; a model the reference does not know is an
  // error (runner/execute.cpp), never no bound.
  std::string accumulation;
  std::string source;  // where it came from: "cases/tolerances.yaml:12", "manifest sm90.yaml:4"
  // bounded: the accumulator is a rule's stand-in for a model the arch never measured
  // (ToleranceRule::provisional); the verdict holds under that model only.
  bool provisional = false;
};

/// What one output is compared with: its references (core/family.hpp References), the ones a
/// metric does not use left null.
struct OutputReference {
  const std::vector<double>& want;                   // the fp64 reference, in got's element order
  const std::vector<double>* lowp = nullptr;         // References::lowp: before its output rounding
  const std::vector<double>* bound = nullptr;        // References::bound (above want, with bound_below)
  int64_t row = 0;                                   // ref_relative's row of the statistic (OutputSpec::row)
  const ReductionStats* reduction = nullptr;         // References::reduction, for an accumulator model
  const std::vector<double>* bound_below = nullptr;  // References::bound_below: the allowance below want
};

/// Compares `got` (any dtype, row-major over its shape) with `ref.want` (the fp64 reference, same
/// element order); the fields of `ref` below are its members. `lowp` is the same-precision reference before its one
/// rounding to the output dtype (the bound adds that rounding), required for ref_relative. ref_relative into a format
/// that saturates (default_overflow satfinite: e4m3fn) judges an element whose want lies `past` beyond ±max against
/// ±max, within max(0, e − past) and half a spacing there (exactly ±max where e <= past). bounded needs either
/// `bound`, the reference's per-element bound (References::bound), or `reduction`, its reduction statistics
/// (References::reduction), from which the tolerance's accumulator model derives the bound. For ref_relative `bound` is
/// optional: the reference's bound of the accumulation error where the statistic says little (a row of few roundings,
/// an exact 0), used where it is the larger. ref_relative takes max|lowp − want| over each row of `row` consecutive
/// elements (OutputSpec::row; 0: the whole output is one row) and reports as `bound` the one that makes max_abs_err /
/// bound the worst element's error ÷ bound. A reference value that rounds to 0 in got's dtype, or lies below fp32's
/// smallest normal (GPU kernels may flush fp32 subnormals), counts as a reference zero for the trust check. NaN and
/// ±Inf must sit at the same positions with the same sign in got and want; each position that differs counts as a
/// mismatch and is listed first among the worst elements. `worst` receives up to `max_worst` elements with the largest
/// errors. bounded with a fixed bound: `bound_below` (References::bound_below), where given, is the allowance below
/// want (got − want >= −factor·bound_below[i] − ...), `bound` then the one above. Throws std::invalid_argument when
/// sizes differ, lowp is missing for ref_relative, bounded has neither a bound nor statistics, or an accumulator model
/// is given for a fixed bound.
OutputStats compare_output(const std::string& name, const HostTensor& got, const OutputReference& ref,
                           const Tolerance& tol, std::vector<WorstElement>& worst, size_t max_worst = 5);

/// The ways an output compared by compare_output failed (core/failure_kind.hpp), in this order:
/// exceeds_bound (ratio: the largest error ÷ bound of a finite element) — or all_zero instead
/// when every element is zero and the reference is not —, biased, nonfinite, specials_mismatch,
/// untouched; each with the number of elements that show it; then not_conserved with the number
/// of groups off (OutputStats::conservation_off, set by the caller); then excess_energy with the
/// root of the error energy ÷ its limit (OutputStats::energy_ratio, set by the caller). Empty
/// for an output that passed.
std::vector<Failure> output_failures(const OutputStats& s);

}  // namespace opcts
