// Markdown summary of result records, and the atomic file writer the reports share.
#include "reports/summary.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

#include "reports/output_files.hpp"

#include <fmt/format.h>

namespace opcts {

namespace {

constexpr const auto& kOrder = kAllOutcomes;
constexpr std::size_t kTopReasons = 20;
// A job summary page has a size limit (GitHub: 1 MiB); the JUnit file holds every failure.
constexpr std::size_t kMaxFailuresListed = 500;
constexpr std::size_t kMaxMessageChars = 200;

std::size_t slot(Outcome o) {
  return static_cast<std::size_t>(std::find(kOrder.begin(), kOrder.end(), o) - kOrder.begin());
}

using Counts = std::array<std::size_t, kOrder.size()>;

// One line of at most kMaxMessageChars bytes, cut at a UTF-8 character boundary.
std::string one_line(std::string s) {
  std::replace_if(
      s.begin(), s.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  if (s.size() > kMaxMessageChars) {
    std::size_t cut = kMaxMessageChars;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s = s.substr(0, cut) + "…";
  }
  return s;
}

// A Markdown code span that survives backticks inside the text: the fence is one backtick
// longer than the longest run inside, and padded with spaces when the text touches it.
std::string code_span(const std::string& text) {
  std::size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
  return fence + (pad ? " " : "") + text + (pad ? " " : "") + fence;
}

std::string short_message(const ResultRecord& r) {
  std::string msg;
  if (r.outcome == Outcome::XPASS) msg = "passes under a strict xfail entry: remove the entry";
  else msg = one_line(r.message);
  // The failure kinds first: the message may be cut, and they are what an xfail would name.
  if (!r.failures.empty()) msg = "failed: " + describe(r.failures) + (msg.empty() ? "" : "; " + msg);
  return with_stats(msg, r);
}

// Cases judged under a stand-in accumulator model (ResultRecord::provisional), grouped by
// family, impl, arch and model: their verdict holds under that model only.
void provisional_section(std::string& md, const std::vector<ResultRecord>& records) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::size_t> groups;
  for (const auto& r : records)
    if (!r.provisional.empty() && r.outcome != Outcome::SKIP) ++groups[{r.family, r.impl, r.arch, r.provisional}];
  if (groups.empty()) return;
  std::size_t n = 0;
  for (const auto& [key, count] : groups) n += count;
  md += fmt::format(
      "\n## Provisional ({})\n\nJudged under a stand-in accumulator model, the loosest the family's "
      "paths are known to have, because the arch's manifest measured none: run `opcts probe "
      "accumulators --arch A` on the GPU and put the entries it prints in the manifest "
      "(`opcts gate --require-measured-models` fails these).\n\n",
      n);
  for (const auto& [key, count] : groups) {
    const auto& [family, impl, arch, model] = key;
    md += fmt::format("- {} {} on {}: {} case{} under {}\n", markdown_cell(family), markdown_cell(impl),
                      markdown_cell(arch), count, count == 1 ? "" : "s", code_span(model));
  }
}

// The cases grouped by reason, most first; `tracking` adds a column with where each group's
// manifest entry tracks the finding (ResultRecord::tracking), the expected failures' ledger.
void reasons_section(std::string& md, const std::vector<const ResultRecord*>& cases, const std::string& title,
                     bool tracking = false) {
  if (cases.empty()) return;
  std::map<std::pair<std::string, std::string>, std::size_t> by_reason;
  for (const auto* r : cases)
    by_reason[{r->message.empty() ? "(no reason given)" : one_line(r->message), tracking ? r->tracking : ""}]++;
  std::vector<std::pair<std::pair<std::string, std::string>, std::size_t>> sorted(by_reason.begin(), by_reason.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  md += fmt::format("\n## {} ({})\n\n| cases | reason |{}\n|---:|---|{}\n", title, cases.size(),
                    tracking ? " tracking |" : "", tracking ? "---|" : "");
  for (std::size_t i = 0; i < sorted.size() && i < kTopReasons; ++i) {
    const auto& [why, where] = sorted[i].first;
    md += fmt::format("| {} | {} |", sorted[i].second, markdown_cell(why));
    if (tracking) md += " " + (where.empty() ? std::string("(none)") : markdown_cell(where)) + " |";
    md += "\n";
  }
  if (sorted.size() > kTopReasons) {
    std::size_t rest = 0;
    for (std::size_t i = kTopReasons; i < sorted.size(); ++i) rest += sorted[i].second;
    md += fmt::format("\n…and {} more reasons ({} cases).\n", sorted.size() - kTopReasons, rest);
  }
}

}  // namespace

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += "\\|";
    else if (ch == '\n' || ch == '\r') out += ' ';
    else out += ch;
  }
  return out;
}

std::string stats_line(const ResultRecord& r) {
  if (r.outputs.empty()) return "";
  const double err = max_abs_err(r), b = bound(r);
  const char* rel = (err > b || std::isnan(err)) ? ">" : "<=";
  return fmt::format("max abs err {:.3g} {} bound {:.3g} ({} mismatches)", err, rel, b, mismatches(r));
}

std::string with_stats(const std::string& message, const ResultRecord& r, const std::string& sep) {
  const std::string stats = stats_line(r);
  if (stats.empty() || message.find("max abs err") != std::string::npos) return message;
  return message.empty() ? stats : message + sep + stats;
}

std::string summary_markdown(const std::vector<ResultRecord>& records) {
  Counts total{};
  std::map<std::pair<std::string, std::string>, Counts> table;
  std::vector<const ResultRecord*> failures, skips, xfails;
  for (const auto& r : records) {
    total[slot(r.outcome)]++;
    table[{r.family, r.impl}][slot(r.outcome)]++;
    if (is_gate_failure(r.outcome)) failures.push_back(&r);
    if (r.outcome == Outcome::SKIP) skips.push_back(&r);
    if (r.outcome == Outcome::XFAIL) xfails.push_back(&r);
  }
  std::vector<std::size_t> columns;
  for (std::size_t k = 0; k < kOrder.size(); ++k)
    if (total[k]) columns.push_back(k);

  std::string md = "# opcts results\n\n";
  md += fmt::format("**{} cases**", records.size());
  for (std::size_t k : columns) md += fmt::format(" · {} {}", total[k], to_string(kOrder[k]));
  md += failures.empty() ? " — no gate failures\n" : fmt::format(" — **{} gate failures**\n", failures.size());

  if (!records.empty()) {
    md += "\n| family | impl |";
    for (std::size_t k : columns) md += fmt::format(" {} |", to_string(kOrder[k]));
    md += "\n|---|---|";
    for (std::size_t i = 0; i < columns.size(); ++i) md += "---:|";
    md += "\n";
    for (const auto& [key, counts] : table) {
      md += fmt::format("| {} | {} |", markdown_cell(key.first), markdown_cell(key.second));
      for (std::size_t k : columns) md += fmt::format(" {} |", counts[k]);
      md += "\n";
    }
  }

  if (!failures.empty()) {
    std::stable_sort(failures.begin(), failures.end(),
                     [](const auto* a, const auto* b) { return std::tie(a->id, a->arch) < std::tie(b->id, b->arch); });
    md += fmt::format("\n## Failures ({})\n\n", failures.size());
    for (std::size_t i = 0; i < failures.size() && i < kMaxFailuresListed; ++i) {
      const auto& r = *failures[i];
      md += fmt::format("- {} on {} **{}**", code_span(r.id), r.arch.empty() ? "?" : r.arch, to_string(r.outcome));
      const std::string msg = short_message(r);
      if (!msg.empty()) md += ": " + msg;
      if (!r.tracking.empty()) md += " (tracking: " + markdown_cell(r.tracking) + ")";
      md += "\n";
      if (!r.repro.empty()) md += "  repro: " + code_span(r.repro) + "\n";
    }
    if (failures.size() > kMaxFailuresListed)
      md += fmt::format("\n…and {} more; see the JUnit report.\n", failures.size() - kMaxFailuresListed);
  }
  provisional_section(md, records);
  reasons_section(md, skips, "Skipped");
  reasons_section(md, xfails, "Expected failures", true);
  return md;
}

void write_text_file(const std::string& path, const std::string& content) { write_files({{path, content}}); }

}  // namespace opcts
