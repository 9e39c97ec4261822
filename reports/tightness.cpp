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
      "| family | impl | output | metric | cases | error 0 | exact | error÷bound median | p99 | max | median (error > "
      "0) "
      "| bound÷error |\n"
      "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    const bool some = r.median_nonzero > 0;
    const std::string stats = r.cases ? fmt::format("{:.3g} | {:.3g} | {:.3g} | {} | {}", r.median, r.p99, r.max,
                                                    some ? fmt::format("{:.3g}", r.median_nonzero) : "–",
                                                    some ? fmt::format("{:.3g}", 1 / r.median_nonzero) : "–")
                                      : "– | – | – | – | –";
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", markdown_cell(r.family), markdown_cell(r.impl),
                      markdown_cell(r.out), markdown_cell(r.metric), r.cases, r.zero_error, r.exact, stats);
  }
  if (rows.empty()) md += "| (no passing compared outputs) | | | | | | | | | | | |\n";
  return md;
}

std::vector<LoosestCase> loosest_cases(const std::vector<ResultRecord>& records) {
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, std::pair<double, std::string>> best;  // the smallest ratio and its id
  for (const auto& r : records) {
    if (r.outcome != Outcome::PASS) continue;
    const std::string fam = r.family.empty() ? r.id.substr(0, r.id.find('.')) : r.family;
    for (const auto& o : r.outputs) {
      if (!(o.bound > 0) || !(o.max_ratio > 0) || !std::isfinite(o.max_ratio)) continue;
      const Key key{fam, r.impl, o.out};
      auto it = best.find(key);
      if (it == best.end() || o.max_ratio < it->second.first ||
          (o.max_ratio == it->second.first && r.id < it->second.second))
        best[key] = {o.max_ratio, r.id};
    }
  }
  std::vector<LoosestCase> out;
  for (const auto& [key, v] : best)
    out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), v.second, 1 / v.first});
  return out;
}

std::vector<EnergyRow> energy_tightness(const std::vector<ResultRecord>& records) {
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, std::vector<double>> ratios;
  for (const auto& r : records) {
    if (r.outcome != Outcome::PASS) continue;
    const std::string fam = r.family.empty() ? r.id.substr(0, r.id.find('.')) : r.family;
    for (const auto& o : r.outputs)
      if (o.energy_ratio > 0) ratios[{fam, r.impl, o.out}].push_back(o.energy_ratio);
  }
  std::vector<EnergyRow> out;
  for (auto& [key, v] : ratios) {
    std::sort(v.begin(), v.end());
    out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), v.size(), percentile(v, 0.5),
                   percentile(v, 0.99), v.back()});
  }
  return out;
}

std::vector<PlantedRow> planted_bugs(const std::vector<ResultRecord>& records) {
  std::map<std::pair<std::string, std::string>, PlantedRow> rows;
  for (const auto& r : records) {
    if (!r.planted && r.expectation.rfind("planted bug", 0) != 0) continue;
    const std::string fam = r.family.empty() ? r.id.substr(0, r.id.find('.')) : r.family;
    PlantedRow& row = rows[{fam, r.impl}];
    row.family = fam;
    row.impl = r.impl;
    ++row.cases;
    // Records that hold only the mapped outcome stand for the raw one behind it.
    const Outcome raw = r.raw_outcome == Outcome::XFAIL   ? Outcome::FAIL
                        : r.raw_outcome == Outcome::XPASS ? Outcome::PASS
                                                          : r.raw_outcome;
    if (raw == Outcome::SKIP) ++row.skipped;
    if (raw == Outcome::SKIP || raw == Outcome::MISSING) continue;
    ++row.run;
    if (raw == Outcome::FAIL) ++row.caught;
    else if (raw == Outcome::PASS) (r.blind_spot.empty() ? row.missed : row.blind).push_back(r.id);
    else row.other.push_back(r.id + " (" + std::string(to_string(raw)) + ")");
  }
  std::vector<PlantedRow> out;
  for (auto& [key, row] : rows) {
    std::sort(row.missed.begin(), row.missed.end());
    std::sort(row.blind.begin(), row.blind.end());
    std::sort(row.other.begin(), row.other.end());
    out.push_back(std::move(row));
  }
  return out;
}

namespace {

// At most kListed ids, then how many more.
constexpr size_t kListed = 20;
std::string id_list(const std::vector<std::string>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < kListed; ++i) s += (i ? ", " : "") + std::string("`") + ids[i] + "`";
  if (ids.size() > kListed) s += fmt::format(" … and {} more", ids.size() - kListed);
  return s;
}

// What each list of the report opens with: its heading, a paragraph saying what it lists, and its
// table's header (the columns, then the alignment row).
std::string section_head(std::string_view title, std::string_view intro, std::string_view table_header) {
  return fmt::format("\n## {}\n\n{}\n\n{}", title, intro, table_header);
}

}  // namespace

std::string tightness_report_markdown(const std::vector<ResultRecord>& records) {
  std::string md = tightness_markdown(tightness(records));
  const auto loosest = loosest_cases(records);
  md += section_head("Loosest case per impl and output",
                     "The passing case whose bound is the most times its error: a bug that many times a correct "
                     "device's error passes there.",
                     "| family | impl | output | case | bound÷error |\n|---|---|---|---|---:|\n");
  for (const auto& l : loosest)
    md += fmt::format("| {} | {} | {} | `{}` | {:.3g} |\n", markdown_cell(l.family), markdown_cell(l.impl),
                      markdown_cell(l.out), markdown_cell(l.id), l.bound_over_error);
  if (loosest.empty()) md += "| (no passing case with an error) | | | | |\n";
  if (const auto energy = energy_tightness(records); !energy.empty()) {
    md += section_head("Error energy",
                       "Where an output's reference gives an error-energy check: the root of the summed squared "
                       "errors ÷ its limit over the passing cases (judge/error_energy.hpp).",
                       "| family | impl | output | cases | median | p99 | max |\n|---|---|---|---:|---:|---:|---:|\n");
    for (const auto& e : energy)
      md += fmt::format("| {} | {} | {} | {} | {:.3g} | {:.3g} | {:.3g} |\n", markdown_cell(e.family),
                        markdown_cell(e.impl), markdown_cell(e.out), e.cases, e.median, e.p99, e.max);
  }
  const auto planted = planted_bugs(records);
  md += section_head("Planted bugs",
                     "Each planted impl must FAIL on every case it runs (SKIP: problems its bug cannot show on). "
                     "Not caught in a derived blind spot: passes where the impl derived why the bound may not see "
                     "its bug (each record's blind_spot); not caught: every other pass, a defect of the bound.",
                     "| family | planted impl | cases | skipped | run | caught | not caught | not caught in a derived "
                     "blind spot | neither |\n"
                     "|---|---|---:|---:|---:|---:|---|---|---|\n");
  const auto listed = [](const std::vector<std::string>& ids) {
    return ids.empty() ? std::string("0") : markdown_cell(fmt::format("{}: {}", ids.size(), id_list(ids)));
  };
  for (const auto& p : planted)
    md +=
        fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", markdown_cell(p.family), markdown_cell(p.impl),
                    p.cases, p.skipped, p.run, p.caught, listed(p.missed), listed(p.blind), listed(p.other));
  if (planted.empty()) md += "| (no planted impl in these reports) | | | | | | | | |\n";
  return md;
}

}  // namespace opcts
