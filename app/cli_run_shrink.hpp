// opcts run's last step: each unexpected failure on a sampled problem shrunk to the smallest
// problem that fails the same way (runner/shrink.hpp), within a time budget.
#pragma once

#include <string>
#include <vector>

#include "core/result.hpp"
#include "runner/suite.hpp"

namespace opcts::cli {

/// The FAIL records among `records` whose case `cases` drew from a `samples:` block (its source
/// says "(sample ...)"), each shrunk in this process on `device` with the plugins loaded here
/// (`opcts shrink`'s way), `seconds` of wall time in all, shared evenly among those left. Returns
/// a Markdown section for the summary ("" when no sampled case failed) and prints a line a case
/// to stderr. A shrink that throws is reported in its row, not raised: the run's reports are
/// written already.
std::string shrink_sampled_failures(const Suite& run_suite, const std::vector<std::string>& plugins, int device,
                                    const std::vector<Case>& cases, const std::vector<ResultRecord>& records,
                                    double seconds);

}  // namespace opcts::cli
