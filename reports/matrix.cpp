// Building and printing the enablement matrix.
#include "reports/matrix.hpp"

#include "judge/gate.hpp"
#include "reports/summary.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace opcts {

std::string_view to_string(CellState s) {
  switch (s) {
    case CellState::enabled: return "enabled";
    case CellState::partial: return "partial";
    case CellState::unsupported: return "unsupported";
    case CellState::skipped: return "skipped";
    case CellState::failing: return "failing";
    case CellState::not_run: return "not run";
    case CellState::not_tested: return "not tested";
  }
  return "?";
}

SkipKind skip_kind(const std::string& message) {
  if (message.rfind("manifest skip", 0) == 0) return SkipKind::manifest;
  if (message.find("built without") != std::string::npos) return SkipKind::not_built;
  return SkipKind::capability;  // a missing capability or the impl's own supports()
}

namespace {

std::string family_of(const ResultRecord& r) {
  if (!r.family.empty()) return r.family;
  return r.id.substr(0, r.id.find('.'));
}

std::string impl_of(const ResultRecord& r) {
  if (!r.impl.empty()) return r.impl;
  const auto dot = r.id.find('.'), slash = r.id.find('/');
  return dot == std::string::npos || slash == std::string::npos ? "?" : r.id.substr(dot + 1, slash - dot - 1);
}

// The reason behind an XFAIL message "xfail (<source>): <reason> — <failure>": the entry's
// reason, so that cases of one entry group together.
std::string xfail_reason(const std::string& message) {
  std::string s = message;
  if (s.rfind("xfail (", 0) == 0) {
    const auto colon = s.find("): ");
    if (colon != std::string::npos) s = s.substr(colon + 3);
  }
  const auto dash = s.find(" — ");
  return dash == std::string::npos ? s : s.substr(0, dash);
}

// The tactic part of a case id ("<family>.<impl>/<problem>/<tactic>"), or "".
std::string tactic_of(const std::string& id) {
  const auto slash = id.find('/');
  const auto second = slash == std::string::npos ? slash : id.find('/', slash + 1);
  return second == std::string::npos ? "" : id.substr(second + 1);
}

void classify(MatrixCell& c) {
  const std::size_t skips = c.skip_capability + c.skip_manifest + c.skip_not_built;
  if (c.total == 0) c.state = CellState::not_run;
  else if (c.failing > 0) c.state = CellState::failing;
  else if (c.xfail > 0) c.state = CellState::partial;
  else if (c.pass > 0) c.state = CellState::enabled;
  else if (c.skip_unexcused > 0) c.state = CellState::not_tested;  // as the gate judges it
  else if (skips == c.total && c.skip_manifest > 0) c.state = CellState::skipped;
  else c.state = CellState::unsupported;
}

}  // namespace

const MatrixCell& EnablementMatrix::cell(const std::string& family, const std::string& impl,
                                         const std::string& arch) const {
  static const MatrixCell kNotRun;
  const auto it = cells.find({family, impl, arch});
  return it == cells.end() ? kNotRun : it->second;
}

EnablementMatrix enablement_matrix(const std::vector<ResultRecord>& records) {
  EnablementMatrix m;
  std::set<std::string> archs;
  std::set<std::pair<std::string, std::string>> rows;
  for (const auto& r : records) {
    const std::string fam = family_of(r), impl = impl_of(r);
    archs.insert(r.arch);
    rows.insert({fam, impl});
    MatrixCell& c = m.cells[{fam, impl, r.arch}];
    ++c.total;
    if (const std::string t = tactic_of(r.id); !t.empty()) {
      MatrixCell::TacticCount& n = c.tactics[t];
      ++n.cases;
      n.ran += r.outcome != Outcome::SKIP && r.outcome != Outcome::MISSING;
      n.pass += r.outcome == Outcome::PASS;
    }
    c.provisional += !r.provisional.empty() && r.outcome != Outcome::SKIP;
    switch (r.outcome) {
      case Outcome::PASS: ++c.pass; break;
      case Outcome::XFAIL:
        ++c.xfail;
        // The tracking reference first: the HTML report's hover text cuts a long reason.
        ++c.xfail_reasons[(r.tracking.empty() ? "" : "[tracking: " + r.tracking + "] ") + xfail_reason(r.message)];
        break;
      case Outcome::SKIP:
        switch (skip_kind(r.message)) {
          case SkipKind::capability: ++c.skip_capability; break;
          case SkipKind::manifest: ++c.skip_manifest; break;
          case SkipKind::not_built: ++c.skip_not_built; break;
        }
        ++c.skip_reasons[r.message];
        c.skip_unexcused += !skip_excuses_impl(r.message);
        break;
      default:
        if (is_gate_failure(r.outcome)) ++c.failing;
        break;
    }
  }
  for (auto& [key, c] : m.cells) classify(c);
  m.archs.assign(archs.begin(), archs.end());
  m.rows.assign(rows.begin(), rows.end());
  return m;
}

namespace {

std::string cell_state_text(const MatrixCell& c) {
  switch (c.state) {
    case CellState::enabled: return fmt::format("enabled ({})", c.pass);
    case CellState::partial: return fmt::format("partial: {}/{} xfail", c.xfail, c.total);
    case CellState::unsupported: return "unsupported";
    case CellState::skipped: return fmt::format("skipped ({} by manifest)", c.skip_manifest);
    case CellState::failing: return fmt::format("failing: {}/{}", c.failing, c.total);
    case CellState::not_run: return "not run";
    case CellState::not_tested: return fmt::format("not tested ({} SKIP)", c.skip_unexcused);
  }
  return "?";
}

}  // namespace

std::string cell_text(const MatrixCell& c) {
  const std::string s = cell_state_text(c);
  return c.provisional == 0 ? s : fmt::format("{}, provisional ({})", s, c.provisional);
}

std::string matrix_markdown(const EnablementMatrix& m) {
  static const std::map<CellState, std::string> kIcon{{CellState::enabled, "✅"},        {CellState::partial, "🟡"},
                                                      {CellState::unsupported, "⛔"},    {CellState::skipped, "⏭️"},
                                                      {CellState::failing, "❌"},        {CellState::not_run, "—"},
                                                      {CellState::not_tested, "⚠️"}};
  std::string s = "## Enablement matrix\n\n";
  s += "✅ enabled: every case that ran passed · 🟡 partial: some cases are expected failures (xfail) · "
       "⛔ unsupported: every case skipped for a capability the arch lacks · ⏭️ skipped by the manifest · "
       "⚠️ not tested: no case ran, skipped by the impl's support or the build (the gate fails it) · "
       "❌ failing the gate · — not run · *provisional (N)*: N cases judged under a stand-in accumulator "
       "model, the loosest the family's paths are known to have, because the arch's manifest measured none "
       "(`opcts probe accumulators`; `opcts gate --require-measured-models` fails them)\n\n";
  if (m.rows.empty()) return s + "_no results_\n";
  s += "| family | impl |";
  // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false positive) on `" " + f()`.
  for (const auto& a : m.archs) s.append(" ").append(markdown_cell(a)).append(" |");
  s += "\n|---|---|";
  for (std::size_t i = 0; i < m.archs.size(); ++i) s += "---|";
  s += "\n";
  for (const auto& [fam, impl] : m.rows) {
    s += "| " + markdown_cell(fam) + " | " + markdown_cell(impl) + " |";
    for (const auto& a : m.archs) {
      const MatrixCell& c = m.cell(fam, impl, a);
      s.append(" ").append(kIcon.at(c.state));
      if (c.state != CellState::not_run) s.append(" ").append(cell_text(c));
      s.append(" |");
    }
    s += "\n";
  }
  std::string details;
  for (const auto& [fam, impl] : m.rows)
    for (const auto& a : m.archs) {
      const MatrixCell& c = m.cell(fam, impl, a);
      if (c.state != CellState::partial && c.state != CellState::unsupported && c.state != CellState::skipped &&
          c.state != CellState::not_tested)
        continue;
      std::vector<std::pair<std::size_t, std::string>> top;
      for (const auto& [why, n] : c.state == CellState::partial ? c.xfail_reasons : c.skip_reasons)
        top.push_back({n, why});
      std::stable_sort(top.begin(), top.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
      details += fmt::format("- **{} {} on {}** ({}):\n", markdown_cell(fam), markdown_cell(impl), markdown_cell(a),
                             cell_text(c));
      for (std::size_t i = 0; i < top.size() && i < 5; ++i)
        details += fmt::format("  - {} × {}\n", top[i].first, markdown_cell(top[i].second));
      if (top.size() > 5) details += fmt::format("  - … {} more reasons\n", top.size() - 5);
    }
  if (!details.empty()) s += "\n### Why cells are partial, unsupported, skipped or not tested\n\n" + details;
  std::string tactics;
  for (const auto& [fam, impl] : m.rows)
    for (const auto& a : m.archs) {
      const MatrixCell& c = m.cell(fam, impl, a);
      if (c.tactics.empty()) continue;
      tactics += fmt::format("- **{} {} on {}**:", markdown_cell(fam), markdown_cell(impl), markdown_cell(a));
      for (const auto& [t, n] : c.tactics)
        tactics += fmt::format(" {} {}/{} ran, {} pass;", markdown_cell(t), n.ran, n.cases, n.pass);
      tactics.back() = '\n';
    }
  if (!tactics.empty())
    s += "\n### Tactic coverage (per tactic: cases that ran of those listed, and passed)\n\n" + tactics;
  return s;
}

}  // namespace opcts
