// How tight the bounds are: per family, impl and output, the distribution of error ÷ bound over passing cases.
#pragma once

#include <string>
#include <vector>

#include "core/result.hpp"

namespace opcts {

/// One family × impl × output. A bound that is ten times the error a correct device makes
/// lets bugs ten times smaller than it through; these rows say how much room each bound leaves.
struct TightnessRow {
  std::string family, impl, out, metric;
  size_t cases = 0;                     // passing cases with a non-zero bound and a recorded ratio
  size_t zero_error = 0;                // of those, the cases whose error was 0 everywhere
  size_t exact = 0;                     // passing cases compared exactly (bound 0): not in the statistics
  double median = 0, p99 = 0, max = 0;  // of the largest per-element error ÷ bound (OutputStats::max_ratio)
  // The median over the cases with an error: a case without error says nothing about how
  // tight its bound is (no non-zero bound could be tight against 0).
  double median_nonzero = 0;
};

/// Rows sorted by family, impl, output, over records whose outcome is PASS. Outputs without a
/// recorded ratio (reports from before it existed) are left out.
std::vector<TightnessRow> tightness(const std::vector<ResultRecord>& records);

/// A Markdown table: the rows with median, p99 and max of error ÷ bound, the median over the
/// cases with an error and its inverse, bound ÷ error (how many times the typical error the
/// bound allows).
std::string tightness_markdown(const std::vector<TightnessRow>& rows);

/// The loosest case of one family × impl × output: among its passing cases with an error and a
/// non-zero bound, the one whose bound is the most times its error (the smallest error ÷ bound;
/// ties to the lower id) — the case where a bug of that many times a correct error passes.
struct LoosestCase {
  std::string family, impl, out, id;
  double bound_over_error = 0;  // 1 / OutputStats::max_ratio
};

/// One per family × impl × output that has such a case, sorted by family, impl, output.
std::vector<LoosestCase> loosest_cases(const std::vector<ResultRecord>& records);

/// The error-energy check's room (judge/error_energy.hpp) per family × impl × output: over the
/// passing cases the check judged, the root of the error energy ÷ its limit
/// (OutputStats::energy_ratio). Near 1: the limit is the model's own; far below: room for a bug.
struct EnergyRow {
  std::string family, impl, out;
  size_t cases = 0;
  double median = 0, p99 = 0, max = 0;
};

/// One per family × impl × output with a judged case, sorted by family, impl, output.
std::vector<EnergyRow> energy_tightness(const std::vector<ResultRecord>& records);

/// What a planted impl's cases gave (ResultRecord::planted; records from before the field by
/// their "planted bug" expectation): each must FAIL wherever its bug changes an output.
struct PlantedRow {
  std::string family, impl;
  size_t cases = 0;                 // records of the impl
  size_t skipped = 0;               // SKIP: problems the bug cannot show on (planted_bug_cannot_show) or a capability
  size_t run = 0;                   // the rest, MISSING left out
  size_t caught = 0;                // raw FAIL
  std::vector<std::string> missed;  // raw PASS: the bug passed these (each an XPASS of the gate)
  std::vector<std::string> blind;   // raw PASS where the impl derived a blind spot (ResultRecord::blind_spot)
  std::vector<std::string> other;   // ERROR, CRASH, TIMEOUT, MISTRUSTED, FLAKE: neither caught nor missed
};

/// One per planted impl, sorted by family and impl.
std::vector<PlantedRow> planted_bugs(const std::vector<ResultRecord>& records);

/// The whole report: the table (tightness_markdown), each family × impl × output's loosest case
/// by id, the error-energy check's statistics where it judged, and each planted bug's cases —
/// run, caught, and the ids it was not caught on.
std::string tightness_report_markdown(const std::vector<ResultRecord>& records);

}  // namespace opcts
