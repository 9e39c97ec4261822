// Test times from reports: the {case id: seconds} files per arch that the shard planner reads.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace opcts {

/// Seconds per case id, per arch: each record's `ms` / 1000 (SKIP records are 0 s: a skipped
/// case costs a shard nothing). Records with a negative or non-finite time are left out.
std::map<std::string, std::map<std::string, double>> times_by_arch(const std::vector<ResultRecord>& records);

/// The times file's text: one JSON object, keys sorted, what read_times_file reads.
std::string times_json(const std::map<std::string, double>& times);

/// Where the times of `arch` go: `out` with "{arch}" replaced by the arch name.
std::string times_path(const std::string& out, const std::string& arch);

}  // namespace opcts
