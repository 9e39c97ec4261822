// Accumulator models of reductions (how a device sums K products) and the error bounds they give the bounded metric.
//
// A reference states what it knows about each output element's reduction without knowing
// who computes it (core/reduction.hpp: Σ|t|, Σt², the epilogue's magnitude, an exact fill's
// guarantee); the comparison resolves the impl's model (cases/tolerances.yaml, a manifest's
// `tolerance:` entry) and turns both into a per-element bound E and an aggregate bias check.
// The derivations, with their sources, are in accumulator.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/reduction.hpp"

namespace YAML {
class Node;
}

namespace opcts {

/// How the adder within a chunk rounds, which also fixes its structure:
///   rne       an IEEE adder or FMA: every addition rounds once to nearest even, |δ| <= 2^-p of
///             its result (fp32 FMA chains, CPUs, cuda.mx_kernel)
///   truncate  a tensor-core adder: each product is aligned to the largest exponent of its MMA
///             step and truncated there, the step's sum is normalized by truncation; each loses
///             less than 2^(1-p) of the step's magnitude, always toward zero (Hopper FP8)
enum class AccRounding { rne, truncate };
std::string_view to_string(AccRounding r);

/// `accumulator: {bits: 14, rounding: truncate, promote_every: 128}`: products are summed in
/// chunks of `promote_every` consecutive K elements (0: the whole K, never promoted) by a
/// `bits`-bit adder, and chunk sums are added in IEEE fp32. The default is IEEE fp32 with no
/// chunking: {24, rne, 0}.
struct AccumulatorModel {
  int bits = 24;  // significant bits within a chunk, 2..24
  AccRounding rounding = AccRounding::rne;
  int64_t promote_every = 0;  // K elements per chunk; 0 = never promoted
  bool operator==(const AccumulatorModel&) const = default;
};
/// "{bits: 14, rounding: truncate, promote_every: 128}" (the YAML spelling).
std::string to_string(const AccumulatorModel& m);
/// Parses the `accumulator:` map of a tolerance rule or manifest entry. Throws YamlError
/// ("path:line: ...") naming the field for unknown keys, bits outside 2..24, an unknown
/// rounding or a negative promote_every.
AccumulatorModel parse_accumulator(const std::string& path, const YAML::Node& node);

/// The bound of one output under one model, its constants resolved once (accumulator.cpp
/// derives each). Per element: E = 0 when the fill is exact for the model, else
/// |offset| + extra_rel·S + extra_abs + min(worst case, probabilistic) with
///   worst case     E_acc = c_wc·S,            E = E_acc + c_epi·(X + E_acc)
///   probabilistic  E_acc = λ·√(c_var·Q) + c_drift·√Q, E = E_acc + c_epi·(X + E_acc)
/// (the probabilistic one only for zero-mean terms and a false-alarm probability > 0; c_epi = 0
/// where the reduction has no epilogue).
struct AccumulationBound {
  bool exact = false;  // the exact fill's partial sums all fit the model's adders
  double c_wc = 0;     // worst-case coefficient of S; +inf once k·u_p >= 1 (the proof says nothing)
  double c_epi = 0;    // γ_5: the fp32 epilogue (scales, global scale, bias, output scale); 0 without one
  double c_var = 0;    // variance proxy per unit of Q (0: no probabilistic bound)
  double c_drift = 0;  // toward-zero drift of a truncating adder per unit of √Q
  double lambda = 0;   // Azuma–Hoeffding's λ for the false-alarm probability (core/azuma.hpp)
  // The bias check's expected slope under a truncating adder: E[err·x] lies in
  // [−D_hi·Q, −D_lo·Q] per element, D_hi = drift_hi + min(drift_hi_ct·ĉ, drift_ct_cap) with
  // ĉ = S/√(K·Q) when the whole K is one chunk (drift_ct_terms = K), else ĉ = 1. 0 for rne.
  double drift_lo = 0, drift_hi = 0, drift_hi_ct = 0;
  double drift_ct_cap = INFINITY;  // (a)'s cap from the product bits: min(drift_hi_ct·ĉ, drift_ct_cap)
  int64_t drift_ct_terms = 0;
  /// D_hi of element i (its ĉ, where K is one chunk).
  double drift_hi_of(const ReductionStats& stats, size_t i) const;
  /// E for element i of `stats`.
  double element(const ReductionStats& stats, size_t i) const;
  /// The probabilistic variance proxy of element i (λ·√ of it bounds the noise), 0 if none.
  double variance(const ReductionStats& stats, size_t i) const;
  /// What a correct device's error is expected to give element i's term of the bias check:
  /// err·want within [−D_hi, −D_lo]·want² (the model's relative drift) and the known offset
  /// (stats.offset).
  struct Expected {
    double drift_lo = 0, drift_hi = 0;  // the interval of err·want the model's drift gives, <= 0
    double offset = 0;                  // a known error a device carries all of or none of
  };
  Expected expected(const ReductionStats& stats, size_t i, double want) const;
};

/// Resolves the model for a reduction of stats.terms products; `false_alarm` is the
/// probability per element (and per output for the bias check) that a correct device
/// exceeds the probabilistic bound; 0 keeps the worst case only.
AccumulationBound accumulation_bound(const AccumulatorModel& model, const ReductionStats& stats, double false_alarm);

/// The bias check of a bounded output: the least-squares slope β of err = got − want against
/// want over the compared elements, and the interval a correct device's β lies in.
struct SlopeCheck {
  double slope = 0;
  double lo = 0, hi = 0;  // lo == hi == 0: not checked
};

/// Accumulates the bias check over elements (add), then decides (finish). Each element adds
/// want, the error, its noise variance (the accumulation's proxy plus a quarter of the output
/// spacing squared: the output rounding) and what a correct device's error is expected to give
/// it (AccumulationBound::expected).
class SlopeAccumulator {
 public:
  void add(double want, double err, double noise_variance, const AccumulationBound::Expected& expected = {});
  /// Adds another accumulator's elements (the sums of a chunk compared on its own).
  void merge(const SlopeAccumulator& o);
  /// The slope and its interval: [(Σ lo_i + min(0, O))/Σw² − ε − λ·σ_β, (Σ hi_i + max(0, O))/Σw²
  /// + ε + λ·σ_β], with σ_β the slope's noise, ε = c_epi (a systematic fp32 rounding common to
  /// all elements, such as fl(s_a·s_b)), [lo_i, hi_i] the expected drift (a truncating adder's
  /// [−D_hi, −D_lo]·w²: the interval is centred on the drift the model predicts,
  /// accumulator.cpp) and O = Σ offset_i·w_i the slope of a known offset a device may carry.
  /// Not checked (lo == hi == 0) without a probabilistic bound or without elements.
  SlopeCheck finish(const AccumulationBound& b) const;

 private:
  double sww_ = 0, swe_ = 0, sw2v_ = 0, lo_ = 0, hi_ = 0, swo_ = 0;
};

}  // namespace opcts
