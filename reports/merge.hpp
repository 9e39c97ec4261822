// Merging result files (JUnit or JSON lines) from several shards or runs into one record set.
#pragma once

#include <string>
#include <vector>

#include "core/result.hpp"
#include "judge/run_selection.hpp"

namespace opcts {

/// Loads every path: a `.xml` file as JUnit written by write_junit, a `.jsonl` or `.json`
/// file as result lines (read_results_file), a directory as every `*.xml` and `*.jsonl`
/// beneath it (recursively, in path order). Records with the same id and arch are one case:
/// copies with the same outcome are kept once (the first; timings may differ); a MISSING
/// record (a case its run did not finish) gives way to any other record of the case; other
/// differing outcomes throw std::runtime_error naming both files, unless `prefer_later`,
/// which keeps the one read later (a later argument; in a folder, a later path), e.g. a
/// retried shard's. The result is sorted by id, then arch, whatever the order of the paths.
std::vector<ResultRecord> load_reports(const std::vector<std::string>& paths, bool prefer_later = false);

/// A run's selection as a report carried it, and the file it came from.
struct ReportSelection {
  RunSelection selection;
  std::string file;
};

/// load_reports, plus every selection the reports carry (results header lines, JUnit's
/// "opcts.selection" suite), each once per (key, shard, state, plan), in the order read.
struct LoadedReports {
  std::vector<ResultRecord> records;
  std::vector<ReportSelection> selections;
};
LoadedReports load_reports_with_selections(const std::vector<std::string>& paths, bool prefer_later = false);

/// True when two records hold the same values in every field (NaN equals NaN).
bool same_record(const ResultRecord& a, const ResultRecord& b);

}  // namespace opcts
