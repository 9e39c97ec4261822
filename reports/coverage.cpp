// The coverage report (reports/coverage.hpp).
#include "reports/coverage.hpp"

#include <map>
#include <set>

#include <fmt/format.h>

#include "reports/summary.hpp"

namespace opcts {

std::vector<CoverageRow> coverage(const std::vector<Case>& cases) {
  std::map<std::string, CoverageRow> rows;
  std::map<std::string, std::set<std::string>> seen;  // family -> problem ids counted
  for (const Case& c : cases) {
    const Family& f = *c.family;
    const std::string fam(f.name());
    CoverageRow& row = rows[fam];
    if (row.family.empty()) {
      row.family = fam;
      for (const std::string& n : f.edge_classes()) row.classes.push_back({n});
      row.declared = !row.classes.empty();
      row.classes.push_back({"invalid arguments"});
    }
    const std::string pid = f.problem_id(*c.problem);
    if (!seen[fam].insert(pid).second) continue;
    const bool sampled = c.source.find("(sample '") != std::string::npos;
    ++row.problems;
    row.sampled += sampled;
    std::vector<std::string> reached = f.edge_classes_of(*c.problem);
    if (!f.expected_error(*c.problem).empty()) reached.push_back("invalid arguments");
    for (const std::string& n : reached)
      for (CoverageClass& k : row.classes)
        if (k.name == n) {
          ++k.problems;
          k.sampled += sampled;
        }
  }
  std::vector<CoverageRow> out;
  for (auto& [name, row] : rows) out.push_back(std::move(row));
  return out;
}

std::string coverage_markdown(const std::vector<CoverageRow>& rows) {
  std::string md;
  for (const CoverageRow& r : rows) {
    md += fmt::format("## {}: {} problems ({} sampled)\n\n", markdown_cell(r.family), r.problems, r.sampled);
    if (!r.declared)
      md +=
          "No edge classes declared for this family yet (Family::edge_classes): only its negative cases are "
          "counted.\n\n";
    md += "| edge class | problems | sampled |\n|---|---:|---:|\n";
    std::string never;
    for (const CoverageClass& k : r.classes) {
      md += fmt::format("| {} | {} | {} |\n", markdown_cell(k.name), k.problems, k.sampled);
      if (k.problems == 0) never += (never.empty() ? "" : ", ") + k.name;
    }
    md += never.empty() ? "\nEvery class reached.\n\n" : "\nNever reached: " + never + ".\n\n";
  }
  if (rows.empty()) md += "(no case selected)\n";
  return md;
}

}  // namespace opcts
