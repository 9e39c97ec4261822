// The coverage report (reports/coverage.hpp).
#include "reports/coverage.hpp"

#include <map>
#include <set>

#include <fmt/format.h>

#include "reports/summary.hpp"

namespace opcts {

namespace {

// The classes a case's problem reaches, "invalid arguments" for a negative case included.
std::vector<std::string> reached_by(const Case& c) {
  std::vector<std::string> reached = c.family->edge_classes_of(*c.problem);
  if (!c.family->expected_error(*c.problem).empty()) reached.push_back("invalid arguments");
  return reached;
}

// Each impl's distinct problems that run, and their classes, into the family's rows.
void count_impls(const std::vector<Case>& cases, const std::function<bool(const Case&)>& runs,
                 std::map<std::string, CoverageRow>& rows) {
  std::map<std::string, std::map<std::string, CoverageImpl>> impls;  // family -> impl -> counts
  std::map<std::string, std::set<std::string>> seen;                 // impl -> problem ids counted
  for (const Case& c : cases) {
    const std::string fam(c.family->name()), impl(c.impl->name());
    CoverageRow& row = rows.at(fam);
    CoverageImpl& ci = impls[fam][impl];
    if (ci.impl.empty()) ci.impl = impl, ci.reached.assign(row.classes.size(), 0);
    if (!runs(c) || !seen[impl].insert(c.family->problem_id(*c.problem)).second) continue;
    ++ci.problems;
    for (const std::string& n : reached_by(c))
      for (size_t k = 0; k < row.classes.size(); ++k)
        if (row.classes[k].name == n) ++ci.reached[k];
  }
  for (auto& [fam, by_name] : impls)
    for (auto& [name, ci] : by_name) rows.at(fam).impls.push_back(std::move(ci));
}

}  // namespace

std::vector<CoverageRow> coverage(const std::vector<Case>& cases, const std::function<bool(const Case&)>& runs) {
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
    for (const std::string& n : reached_by(c))
      for (CoverageClass& k : row.classes)
        if (k.name == n) {
          ++k.problems;
          k.sampled += sampled;
        }
  }
  if (runs) count_impls(cases, runs, rows);
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
    if (r.impls.empty()) continue;
    // Per impl: what the family's problems reach that none of the impl's running problems does
    // (an impl that SKIPs a class's every problem says nothing about that class).
    md += "| impl | problems run | classes the family reaches that it never runs |\n|---|---:|---|\n";
    for (const CoverageImpl& ci : r.impls) {
      std::string missed;
      for (size_t k = 0; k < r.classes.size(); ++k)
        if (r.classes[k].problems > 0 && ci.reached[k] == 0) missed += (missed.empty() ? "" : ", ") + r.classes[k].name;
      if (ci.problems == 0) missed = "(runs none of them here)";
      md += fmt::format("| {} | {} | {} |\n", markdown_cell(ci.impl), ci.problems,
                        missed.empty() ? "—" : markdown_cell(missed));
    }
    md += "\n";
  }
  if (rows.empty()) md += "(no case selected)\n";
  return md;
}

}  // namespace opcts
