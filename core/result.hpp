// One result record per case: the single source from which JUnit, summaries and the gate are written.
#pragma once

#include <bit>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/failure_kind.hpp"
#include "core/outcome.hpp"

namespace opcts {

/// One element where an output differs most from its reference.
struct WorstElement {
  std::string out;             // output name, e.g. "O" or "lse"
  std::vector<int64_t> index;  // multi-index into the output's shape
  double got = 0;
  double want = 0;
};

/// Error statistics of one output against its reference (see compare.hpp).
struct OutputStats {
  std::string out;
  std::string metric;  // "bitexact", "exact", "allclose", "ref_relative" or "bounded"
  int64_t elements = 0;
  double max_abs_err = 0;
  double max_rel_err = 0;
  double bound = 0;        // the error allowed (ref_relative, per-element bounds: max_abs_err ÷ the
                           // worst element's error ÷ bound, so max_abs_err / bound is that ratio)
  double lowp_err = 0;     // ref_relative only: max |same-precision reference − reference|
  int64_t mismatches = 0;  // elements beyond the bound, plus NaN/Inf position mismatches
  // For the trust check (judge/trust.hpp), counted during the comparison, not reported: exact
  // zeros (+0 and -0) of the output, of the reference rounded to the output dtype, and the
  // output's zeros that the reference does not explain (judge/compare.cpp: neither its
  // rounded value nor the element's own bound reaches 0).
  int64_t zeros = 0;
  int64_t ref_zeros = 0;
  int64_t unexplained_zeros = 0;
  // The largest per-element error ÷ that element's bound (0 when every error is 0; +inf for an
  // error against a zero bound or a NaN/Inf mismatch): how tight the bound is (report tightness).
  double max_ratio = 0;
  // bounded: the bias check (judge/accumulator.hpp) — the slope of the error against the
  // value and the interval a correct device's slope lies in; lo == hi == 0 when not checked.
  double slope = 0, slope_lo = 0, slope_hi = 0;
  bool biased() const { return slope_lo < slope_hi && !(slope >= slope_lo && slope <= slope_hi); }
  // How the failing elements fail, counted during the comparison for its failure kinds
  // (judge/compare.hpp output_failures; core/failure_kind.hpp); not reported themselves.
  int64_t nonfinite = 0;          // NaN/Inf where the reference is finite (poison excepted)
  int64_t untouched = 0;          // still the backends' poison where the reference is not NaN
  int64_t specials_mismatch = 0;  // the reference NaN/Inf, the output something else
  double finite_ratio = 0;        // the largest error ÷ bound over the finite pairs (max_ratio without specials)
  // The conservation check (judge/conservation.hpp): groups of the output (destination rows),
  // and the whole output counted as one more, whose sum lies outside the reference's interval;
  // `conservation` describes the first (the failure message; not written to records).
  int64_t conservation_off = 0;
  std::string conservation;
  // The error-energy check (judge/error_energy.hpp): ‖got − want‖₂ ÷ its limit where the
  // reference gives one for the impl's model (above 1: excess_energy), else 0.
  double energy_ratio = 0;
  // The tolerance rule that judged it, as file:line of the cases folder's files: the rule of
  // tolerances.yaml, then the manifest entry that refined it, if any ("tolerances.yaml:412,
  // sm90.yaml:37"), so that a failure names the rule to read (judge/tolerance.hpp).
  std::string rule;
  /// Whether the slope fields hold anything but +0 (reports write them only then).
  bool has_slope() const {
    return std::bit_cast<uint64_t>(slope) | std::bit_cast<uint64_t>(slope_lo) | std::bit_cast<uint64_t>(slope_hi);
  }
};

/// One way a case failed: a kind of one output (`out` names it) or of the case as a whole
/// (`out` empty; core/failure_kind.hpp is_case_kind).
struct Failure {
  std::string out;
  FailureKind kind = FailureKind::exceeds_bound;
  int64_t elements = 0;  // how many elements show it (0 where it is not counted by element)
  double ratio = 0;      // exceeds_bound: the largest error ÷ bound among the finite elements
  bool operator==(const Failure&) const = default;
};

/// "dV exceeds_bound ×1.09 (1 element)", "O nonfinite (16384 elements)", "accepted_invalid".
std::string describe(const Failure& f);
/// The failures described and joined by ", " ("" for none).
std::string describe(const std::vector<Failure>& failures);
/// The failures as the JSON array a record's "failures" field holds (JUnit's `failures`
/// property carries the same text), and back; the parser throws std::runtime_error naming the
/// bad field or kind.
std::string failures_json(const std::vector<Failure>& failures);
std::vector<Failure> parse_failures_json(const std::string& text);

/// The result line of one case (docs/architecture.md, "Reports"). `raw_outcome` is what running
/// the case gave; `outcome` is after the manifest's expectation (XFAIL/XPASS).
struct ResultRecord {
  std::string id;
  std::string family;
  std::string impl;
  std::string arch;
  int device = -1;  // GPU ordinal, -1 on the host device
  Outcome outcome = Outcome::ERROR;
  Outcome raw_outcome = Outcome::ERROR;
  std::string seed;  // hex, derived from the id
  double ms = 0;     // wall time of the case in the worker
  // Where ms went (issue 16 item 3): making the inputs and the references (0 when the case
  // shared them with the previous case of its problem; ref_ms is the load time when they came
  // from the disk cache), the impl's run, the comparison. ms minus these is the harness's own.
  double inputs_ms = 0, ref_ms = 0, device_ms = 0, compare_ms = 0;
  std::string message;      // skip reason, error text, the failure summary, or for a pass a check that did not
                            // apply (RunContext::note): what running the case said
  std::string expectation;  // the manifest entry that judged it: "xfail sm90.yaml:40: reason", a
                            // planted bug, an unmet xfail ("expects ERROR ..., got FAIL"), a known flake
  std::string tracking;     // that entry's `tracking:` (ManifestEntry::tracking): where the finding is tracked
  // Outputs judged under a stand-in accumulator model because the arch's manifest measured
  // none ("d: {bits: 14, ...} (cases/tolerances.yaml:150)"): the verdict is provisional
  // (`opcts probe accumulators` measures the model; `gate --require-measured-models` fails).
  std::string provisional;
  std::vector<OutputStats> outputs;
  // FAIL: each way it failed (an output's kinds in output order, then the case's); what a
  // manifest xfail's `outputs:` and `case:` are matched against. Empty for other outcomes.
  std::vector<Failure> failures;
  bool planted = false;             // the impl is a planted bug (Impl::planted): its cases exist to FAIL
  std::string blind_spot;           // a planted case the bound may not see, and why (Impl::blind_spot)
  std::vector<WorstElement> worst;  // a few worst elements over all outputs
  std::string repro;                // one shell command that reproduces the case
  std::string tier;
};

/// One JSON object on one line, no trailing newline.
std::string to_json_line(const ResultRecord& r);
/// Parses a line written by to_json_line; throws std::runtime_error naming the bad field.
ResultRecord parse_json_line(const std::string& line);
/// How a results file's header line starts: the run's selection (judge/run_selection.hpp),
/// written before the records (a record's line, keys in name order, starts with '{"arch"').
inline constexpr const char* kHeaderLinePrefix = "{\"opcts_selection\"";
/// Reads a results file (one JSON line per case, at most kMaxReportBytes); throws
/// std::runtime_error with file:line. A last line without its newline that does not parse is a
/// write cut off by a kill: ignored. Header lines (kHeaderLinePrefix) are no records: they go
/// to `headers` when given.
std::vector<ResultRecord> read_results_file(const std::string& path, std::vector<std::string>* headers = nullptr);

/// Summary statistics of a record over its outputs: the output with the largest
/// error-to-bound ratio gives max_abs_err and bound.
double max_abs_err(const ResultRecord& r);
double max_rel_err(const ResultRecord& r);
double bound(const ResultRecord& r);
int64_t mismatches(const ResultRecord& r);

}  // namespace opcts
