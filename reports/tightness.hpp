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
  size_t cases = 0;       // passing cases with a non-zero bound and a recorded ratio
  size_t zero_error = 0;  // of those, the cases whose error was 0 everywhere
  size_t exact = 0;       // passing cases compared exactly (bound 0): not in the statistics
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

}  // namespace opcts
