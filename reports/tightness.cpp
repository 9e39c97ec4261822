// The tightness report: error ÷ bound statistics per family, impl and output.
#include "reports/tightness.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "reports/summary.hpp"

namespace opcts {

namespace {

// The nearest-rank percentile q (0..1] of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

std::vector<TightnessRow> tightness(const std::vector<ResultRecord>& records) {
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, TightnessRow> rows;
  std::map<Key, std::vector<double>> ratios;
  for (const auto& r : records) {
    if (r.outcome != Outcome::PASS) continue;
    const std::string fam = r.family.empty() ? r.id.substr(0, r.id.find('.')) : r.family;
    for (const auto& o : r.outputs) {
      if (std::isnan(o.max_ratio)) continue;
      const Key key{fam, r.impl, o.out};
      TightnessRow& row = rows[key];
      row.family = fam;
      row.impl = r.impl;
      row.out = o.out;
      if (row.metric.empty()) row.metric = o.metric;
      else if (row.metric.find(o.metric) == std::string::npos) row.metric += "," + o.metric;
      if (!(o.bound > 0)) {
        ++row.exact;
        continue;
      }
      ++row.cases;
      row.zero_error += o.max_ratio == 0;
      ratios[key].push_back(o.max_ratio);
    }
  }
  std::vector<TightnessRow> out;
  for (auto& [key, row] : rows) {
    auto& v = ratios[key];
    std::sort(v.begin(), v.end());
    if (!v.empty()) {
      row.median = percentile(v, 0.5);
      row.p99 = percentile(v, 0.99);
      row.max = v.back();
      const std::vector<double> nonzero(std::upper_bound(v.begin(), v.end(), 0.0), v.end());
      if (!nonzero.empty()) row.median_nonzero = percentile(nonzero, 0.5);
    }
    out.push_back(row);
  }
  return out;
}

std::string tightness_markdown(const std::vector<TightnessRow>& rows) {
  std::string md =
      "| family | impl | output | metric | cases | error 0 | exact | error÷bound median | p99 | max | median (error > 0) "
      "| bound÷error |\n"
      "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    const bool some = r.median_nonzero > 0;
    const std::string stats =
        r.cases ? fmt::format("{:.3g} | {:.3g} | {:.3g} | {} | {}", r.median, r.p99, r.max,
                              some ? fmt::format("{:.3g}", r.median_nonzero) : "–",
                              some ? fmt::format("{:.3g}", 1 / r.median_nonzero) : "–")
                : "– | – | – | – | –";
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", markdown_cell(r.family), markdown_cell(r.impl),
                      markdown_cell(r.out), markdown_cell(r.metric), r.cases, r.zero_error, r.exact, stats);
  }
  if (rows.empty()) md += "| (no passing compared outputs) | | | | | | | | | | | |\n";
  return md;
}

}  // namespace opcts
