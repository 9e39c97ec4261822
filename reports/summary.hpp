// Markdown summary of a run for humans (CI job summaries, PR comments), plus atomic text output.
#pragma once

#include <string>
#include <vector>

#include "core/result.hpp"

namespace opcts {

/// A Markdown summary: counts per outcome; a family × impl table with one column per outcome
/// that occurs (in the order PASS FAIL ERROR CRASH TIMEOUT SKIP XFAIL XPASS); a "Failures"
/// section listing each FAIL/ERROR/CRASH/TIMEOUT/XPASS case with a short message and its
/// repro line; skipped and expected-failure cases grouped by reason (top 20 reasons each).
std::string summary_markdown(const std::vector<ResultRecord>& records);

/// Text made safe for a Markdown table cell: '|' escaped, line breaks as spaces.
std::string markdown_cell(const std::string& s);

/// The error statistics of a record in one phrase, e.g. "max abs err 0.031 > bound 0.004
/// (64 mismatches)"; empty when the record has no compared outputs.
std::string stats_line(const ResultRecord& r);
/// `message`, then `sep` and stats_line(r), unless the message already gives the error against
/// the bound (a comparison's FAIL message does, per output): each fact said once.
std::string with_stats(const std::string& message, const ResultRecord& r, const std::string& sep = "; ");

/// Writes `content` to `path` atomically: a temporary file beside it, renamed over it, so a
/// reader never sees half a file; through symlinks to their targets (write_files in
/// reports/output_files.hpp). Creates missing parent directories. Throws std::runtime_error
/// naming the path on failure.
void write_text_file(const std::string& path, const std::string& content);

}  // namespace opcts
