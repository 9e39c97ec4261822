// Loads and merges result files, refusing two different results for one case.
#include "reports/merge.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "reports/junit.hpp"

namespace opcts {

namespace {

namespace fs = std::filesystem;

bool same_num(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool same_output(const OutputStats& a, const OutputStats& b) {
  return a.out == b.out && a.metric == b.metric && a.elements == b.elements && same_num(a.max_abs_err, b.max_abs_err) &&
         same_num(a.max_rel_err, b.max_rel_err) && same_num(a.bound, b.bound) && same_num(a.lowp_err, b.lowp_err) &&
         a.mismatches == b.mismatches && same_num(a.max_ratio, b.max_ratio) && same_num(a.slope, b.slope) &&
         same_num(a.slope_lo, b.slope_lo) && same_num(a.slope_hi, b.slope_hi) &&
         a.conservation_off == b.conservation_off && same_num(a.energy_ratio, b.energy_ratio) && a.rule == b.rule;
}

bool same_worst(const WorstElement& a, const WorstElement& b) {
  return a.out == b.out && a.index == b.index && same_num(a.got, b.got) && same_num(a.want, b.want);
}

template <class T, class Eq>
bool same_list(const std::vector<T>& a, const std::vector<T>& b, Eq eq) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), eq);
}

std::string lower_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

std::vector<ResultRecord> load_file(const std::string& path, std::vector<std::string>& selections) {
  const std::string ext = lower_extension(path);
  if (ext == ".xml") return read_junit(path, &selections);
  if (ext == ".jsonl" || ext == ".json") return read_results_file(path, &selections);
  throw std::runtime_error(path + ": unknown report type (expected .xml, .jsonl or .json)");
}

// The files one argument names: itself, or every report (*.xml, *.jsonl) beneath a directory
// in path order.
std::vector<std::string> expand(const std::string& arg) {
  std::error_code ec;
  if (!fs::is_directory(arg, ec)) {
    if (!fs::exists(arg, ec)) throw std::runtime_error(arg + ": no such file or directory");
    return {arg};
  }
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(arg)) {
    const std::string ext = lower_extension(e.path());
    if (e.is_regular_file() && (ext == ".xml" || ext == ".jsonl")) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

bool same_record(const ResultRecord& a, const ResultRecord& b) {
  return a.id == b.id && a.family == b.family && a.impl == b.impl && a.arch == b.arch && a.device == b.device &&
         a.outcome == b.outcome && a.raw_outcome == b.raw_outcome && a.seed == b.seed && same_num(a.ms, b.ms) &&
         a.message == b.message && same_list(a.outputs, b.outputs, same_output) &&
         same_list(a.worst, b.worst, same_worst) && a.repro == b.repro && a.tier == b.tier;
}

std::vector<ResultRecord> load_reports(const std::vector<std::string>& paths, bool prefer_later) {
  return load_reports_with_selections(paths, prefer_later).records;
}

LoadedReports load_reports_with_selections(const std::vector<std::string>& paths, bool prefer_later) {
  LoadedReports loaded;
  std::set<std::string> seen_selections;
  // (id, arch) -> the record and the file it came from.
  std::map<std::pair<std::string, std::string>, std::pair<ResultRecord, std::string>> merged;
  for (const auto& arg : paths) {
    for (const auto& file : expand(arg)) {
      std::vector<std::string> selections;
      auto records = load_file(file, selections);
      for (const auto& text : selections) {
        RunSelection sel;
        try {
          sel = RunSelection::parse(text);
        } catch (const std::exception& e) {
          throw std::runtime_error(file + ": " + e.what());
        }
        // A results file and a JUnit of one run carry the same selection: kept once.
        if (seen_selections.insert(sel.json()).second) loaded.selections.push_back({std::move(sel), file});
      }
      for (auto& r : records) {
        auto key = std::make_pair(r.id, r.arch);
        const auto it = merged.find(key);
        if (it == merged.end()) {
          merged.emplace(std::move(key), std::make_pair(std::move(r), file));
          continue;
        }
        ResultRecord& have = it->second.first;
        // A MISSING record marks a case its run did not finish: any result of the case wins.
        if (r.raw_outcome == Outcome::MISSING && have.raw_outcome != Outcome::MISSING) continue;
        const bool same = have.outcome == r.outcome && have.raw_outcome == r.raw_outcome;
        if (have.raw_outcome == Outcome::MISSING || (prefer_later && !same)) {
          it->second = std::make_pair(std::move(r), file);
        } else if (!same) {
          // The same case reported twice (a retried shard, a rerun) merges when the outcome
          // agrees — timings and error statistics may differ — and is a conflict otherwise.
          throw std::runtime_error("case '" + r.id + "' on arch '" + r.arch + "' is " +
                                   std::string(to_string(have.outcome)) + " in " + it->second.second + " but " +
                                   std::string(to_string(r.outcome)) + " in " + file +
                                   " (--prefer-later takes the later one, e.g. a retried shard's)");
        }
      }
    }
  }
  loaded.records.reserve(merged.size());
  for (auto& [key, value] : merged) loaded.records.push_back(std::move(value.first));
  return loaded;
}

}  // namespace opcts
