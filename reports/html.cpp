// The HTML report: tables and inline SVG written as text, every record string escaped.
#include "reports/html.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>

#include <fmt/format.h>

#include "reports/junit.hpp"
#include "reports/matrix.hpp"
#include "reports/summary.hpp"
#include "reports/tightness.hpp"

namespace opcts {

std::string html_escape(std::string_view text) {
  const std::string clean = sanitize_xml_text(text);
  std::string out;
  out.reserve(clean.size());
  for (char c : clean) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

constexpr const auto& kOrder = kAllOutcomes;
constexpr std::size_t kMaxFailures = 500;
constexpr std::size_t kSlowest = 20;
constexpr std::size_t kMaxMessage = 400;
// The error/bound axis: 1e-6 (far inside the bound) to 1e2 (100× over it); beyond clamps.
constexpr double kLogLo = -6, kLogHi = 2;

std::string color(Outcome o) {
  switch (o) {
    case Outcome::PASS: return "#2e7d32";
    case Outcome::SKIP: return "#9e9e9e";
    case Outcome::XFAIL: return "#ef6c00";
    default: return is_gate_failure(o) ? "#c62828" : "#555";
  }
}

std::string state_color(CellState s) {
  switch (s) {
    case CellState::enabled: return "#c8e6c9";
    case CellState::partial: return "#fff3c4";
    case CellState::unsupported: return "#e0e0e0";
    case CellState::skipped: return "#eeeeee";
    case CellState::not_tested: return "#ffe0b2";  // the gate fails it: amber, apart from partial
    case CellState::failing: return "#ffcdd2";
    case CellState::not_run: return "#ffffff";
  }
  return "#fff";
}

std::string short_text(const std::string& s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "…";
}

// A deterministic jitter in [0,1) from the id, so a strip plot is the same on every render.
double jitter(const std::string& id) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return static_cast<double>(h % 10007) / 10007.0;
}

std::string family_of(const ResultRecord& r) { return r.family.empty() ? r.id.substr(0, r.id.find('.')) : r.family; }

std::string counts_section(const std::vector<ResultRecord>& records) {
  std::map<std::string, std::map<Outcome, std::size_t>> per_arch;
  std::map<Outcome, std::size_t> total;
  for (const auto& r : records) ++per_arch[r.arch][r.outcome], ++total[r.outcome];
  std::string s = "<section id=\"counts\"><h2>Outcomes</h2>\n<p class=\"total\">";
  bool first = true;
  for (Outcome o : kOrder)
    if (total.count(o)) {
      s += fmt::format("{}<span class=\"count\" style=\"color:{}\">{} {}</span>", first ? "" : " · ", color(o),
                       total[o], to_string(o));
      first = false;
    }
  s += fmt::format(" — {} cases</p>\n<table><tr><th>arch</th>", records.size());
  for (Outcome o : kOrder)
    if (total.count(o)) s += fmt::format("<th>{}</th>", to_string(o));
  s += "</tr>\n";
  for (const auto& [arch, c] : per_arch) {
    s += "<tr><td>" + html_escape(arch) + "</td>";
    for (Outcome o : kOrder)
      if (total.count(o)) s += fmt::format("<td class=\"num\">{}</td>", c.count(o) ? c.at(o) : 0);
    s += "</tr>\n";
  }
  return s + "</table></section>\n";
}

std::string matrix_section(const std::vector<ResultRecord>& records) {
  const EnablementMatrix m = enablement_matrix(records);
  std::string s = "<section id=\"matrix\"><h2>Enablement matrix</h2>\n<table><tr><th>family</th><th>impl</th>";
  for (const auto& a : m.archs) s += "<th>" + html_escape(a) + "</th>";
  s += "</tr>\n";
  for (const auto& [fam, impl] : m.rows) {
    s += "<tr><td>" + html_escape(fam) + "</td><td>" + html_escape(impl) + "</td>";
    for (const auto& a : m.archs) {
      const MatrixCell& c = m.cell(fam, impl, a);
      std::string tip;
      for (const auto& [why, n] : c.state == CellState::partial ? c.xfail_reasons : c.skip_reasons)
        tip += fmt::format("{} × {}\n", n, short_text(why, 200));
      s += fmt::format("<td class=\"cell {}\" style=\"background:{}\" title=\"{}\">{}</td>",
                       c.state == CellState::not_run ? "notrun" : std::string(to_string(c.state)), state_color(c.state),
                       html_escape(tip), html_escape(cell_text(c)));
    }
    s += "</tr>\n";
  }
  return s + "</table><p class=\"legend\">Hover a cell for its xfail or skip reasons.</p></section>\n";
}

std::string failures_section(const std::vector<ResultRecord>& records) {
  std::vector<const ResultRecord*> bad;
  for (const auto& r : records)
    if (is_gate_failure(r.outcome)) bad.push_back(&r);
  std::string s = fmt::format("<section id=\"failures\"><h2>Failures ({})</h2>\n", bad.size());
  if (bad.empty()) return s + "<p>None: every case passed, was skipped or is an expected failure.</p></section>\n";
  s += "<table><tr><th>outcome</th><th>arch</th><th>case and repro</th><th>why</th></tr>\n";
  for (std::size_t i = 0; i < bad.size() && i < kMaxFailures; ++i) {
    const ResultRecord& r = *bad[i];
    std::string why = r.outcome == Outcome::XPASS ? "remove this manifest entry: the case now passes. " : "";
    if (!r.failures.empty()) why += "failed: " + describe(r.failures) + ". ";
    why = with_stats(why + r.message, r, " — ");
    if (!r.tracking.empty()) why = "[tracking: " + r.tracking + "] " + why;  // before a cut can lose it
    s += fmt::format(
        "<tr><td style=\"color:{}\"><b>{}</b></td><td>{}</td><td><code>{}</code><br><code "
        "class=\"repro\">{}</code></td>"
        "<td>{}</td></tr>\n",
        color(r.outcome), to_string(r.outcome), html_escape(r.arch), html_escape(r.id), html_escape(r.repro),
        html_escape(short_text(why, kMaxMessage)));
  }
  if (bad.size() > kMaxFailures)
    s += fmt::format("<tr><td colspan=\"4\">… and {} more (see the JUnit report)</td></tr>\n",
                     bad.size() - kMaxFailures);
  return s + "</table></section>\n";
}

// A record's error ÷ bound: the largest per-element ratio over its outputs where recorded
// (the bounded metric's bound differs per element), else max_abs_err / bound.
double error_ratio(const ResultRecord& r) {
  double ratio = -1;
  for (const auto& o : r.outputs)
    if (!std::isnan(o.max_ratio)) ratio = std::max(ratio, o.max_ratio);
  if (ratio >= 0) return ratio;
  const double err = max_abs_err(r), b = bound(r);
  return err == 0 ? 0 : b > 0 ? err / b : INFINITY;
}

std::string tightness_section(const std::vector<ResultRecord>& records) {
  const auto rows = tightness(records);
  std::string s =
      "<section id=\"tightness\"><h2>Tightness</h2>\n<p>Per impl and output, over passing cases with a non-zero "
      "bound: the largest per-element error ÷ bound of each case, its median, 99th percentile and maximum, and the "
      "median over the cases with an error (bound ÷ error is its inverse). A bound many times the error a correct "
      "device makes lets bugs of that size through.</p>\n";
  if (rows.empty()) return s + "<p>No passing compared outputs.</p></section>\n";
  s += "<table><tr><th>family</th><th>impl</th><th>output</th><th>metric</th><th>cases</th><th>error 0</th>"
       "<th>exact</th><th>median</th><th>p99</th><th>max</th><th>median (error &gt; 0)</th><th>bound÷error</th></tr>\n";
  for (const auto& r : rows) {
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td>",
        html_escape(r.family), html_escape(r.impl), html_escape(r.out), html_escape(r.metric), r.cases, r.zero_error,
        r.exact);
    const bool some = r.median_nonzero > 0;
    if (r.cases)
      s += fmt::format(
          "<td class=\"num\">{:.3g}</td><td class=\"num\">{:.3g}</td><td class=\"num\">{:.3g}</td>"
          "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
          r.median, r.p99, r.max, some ? fmt::format("{:.3g}", r.median_nonzero) : "–",
          some ? fmt::format("{:.3g}", 1 / r.median_nonzero) : "–");
    else s += "<td colspan=\"5\">–</td></tr>\n";
  }
  s += "</table>\n<h3>Loosest case per impl and output</h3>\n<table><tr><th>family</th><th>impl</th><th>output</th>"
       "<th>case</th><th>bound÷error</th></tr>\n";
  for (const auto& l : loosest_cases(records))
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td class=\"num\">{:.3g}</td></tr>\n",
        html_escape(l.family), html_escape(l.impl), html_escape(l.out), html_escape(l.id), l.bound_over_error);
  s += "</table>\n";
  const auto planted = planted_bugs(records);
  if (planted.empty()) return s + "</section>\n";
  s += "<h3>Planted bugs</h3>\n<table><tr><th>family</th><th>planted "
       "impl</th><th>skipped</th><th>run</th><th>caught</th>"
       "<th>not caught</th></tr>\n";
  for (const auto& p : planted) {
    std::string missed;
    for (const auto& id : p.missed) missed += (missed.empty() ? "" : " ") + id;
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td>{}</td></tr>\n",
        html_escape(p.family), html_escape(p.impl), p.skipped, p.run, p.caught,
        html_escape(short_text(missed.empty() ? "0" : fmt::format("{}: {}", p.missed.size(), missed), kMaxMessage)));
  }
  return s + "</table></section>\n";
}

// Per family, one strip: x = log10(error ÷ bound) of each compared case, in three regions: exact
// results (error 0) on the left, the log axis, and on the right the cases whose ratio is
// infinite (an error against a zero bound, a NaN or Inf where the reference holds another
// value) or beyond the axis, each spread over a column of its own rather than piled on an edge;
// under it, a legend of the outcomes' colours.
std::string error_plot_section(const std::vector<ResultRecord>& records) {
  std::map<std::string, std::vector<const ResultRecord*>> by_family;
  std::map<Outcome, std::size_t> shown;
  for (const auto& r : records)
    if (!r.outputs.empty() && r.outcome != Outcome::SKIP) by_family[family_of(r)].push_back(&r), ++shown[r.outcome];
  std::string s =
      "<section id=\"errors\"><h2>Error as a fraction of the bound</h2>\n<p>Each dot is one case: "
      "the largest error ÷ bound of its outputs (per element where the bound is), log scale. Left of the red "
      "line is within the bound; the first column holds exact results (error 0), the last the cases beyond the "
      "axis or with an infinite ratio (an error where the bound is 0, a NaN or Inf the reference does not "
      "have).</p>\n";
  if (by_family.empty()) return s + "<p>No compared outputs.</p></section>\n";
  const double w = 960, left = 150, exact_w = 50, far_w = 60, plot_l = left + exact_w + 25, far_l = w - 20 - far_w,
               plot_r = far_l - 25, row_h = 44, top = 24;
  const double legend_h = 24;
  const double h = top + row_h * static_cast<double>(by_family.size()) + 30 + legend_h;
  auto xpos = [&](double lg) {
    return plot_l + (std::clamp(lg, kLogLo, kLogHi) - kLogLo) / (kLogHi - kLogLo) * (plot_r - plot_l);
  };
  s += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\" aria-label=\"error over bound per family\">\n",
      w, h, w, h);
  s +=
      fmt::format("<text x=\"{}\" y=\"16\" font-size=\"11\" text-anchor=\"middle\">exact</text>\n", left + exact_w / 2);
  s += fmt::format("<text x=\"{}\" y=\"16\" font-size=\"11\" text-anchor=\"middle\">&gt;1e{} or ∞</text>\n",
                   far_l + far_w / 2, static_cast<int>(kLogHi));
  const double axis_bottom = top + row_h * static_cast<double>(by_family.size());
  for (int e = static_cast<int>(kLogLo); e <= static_cast<int>(kLogHi); ++e) {
    const double x = xpos(e);
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"{4}\"/>"
        "<text x=\"{0}\" y=\"16\" font-size=\"11\" text-anchor=\"middle\">1e{5}</text>\n",
        x, top, axis_bottom, e == 0 ? "#c62828" : "#ddd", e == 0 ? 2 : 1, e);
  }
  double y = top;
  for (const auto& [fam, rs] : by_family) {
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"13\" text-anchor=\"end\">{} ({})</text>\n", left - 8,
                     y + row_h / 2 + 4, html_escape(fam), rs.size());
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#eee\"/>\n", left,
                     y + 2, far_l + far_w - left, row_h - 4);
    for (const ResultRecord* r : rs) {
      const double ratio = error_ratio(*r);
      double x;
      if (ratio == 0 || std::isnan(ratio)) x = left + 5 + jitter(r->id + "x") * (exact_w - 10);
      else if (!(std::log10(ratio) <= kLogHi)) x = far_l + 5 + jitter(r->id + "x") * (far_w - 10);
      else x = xpos(std::log10(ratio));
      s += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\" fill-opacity=\"0.6\"><title>{}: {}, error/bound "
          "{:.3g}</title></circle>\n",
          x, y + 6 + jitter(r->id) * (row_h - 12), color(r->outcome), html_escape(r->id), to_string(r->outcome), ratio);
    }
    y += row_h;
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">max_abs_err / bound (log)</text>\n",
                   (plot_l + plot_r) / 2, axis_bottom + 18);
  double lx = left;
  for (const auto& [o, n] : shown) {
    const std::string label = fmt::format("{} ({})", to_string(o), n);
    s += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/><text class=\"legend-item\" x=\"{:.1f}\" "
        "y=\"{:.1f}\" font-size=\"11\">{}</text>\n",
        lx, h - 10, color(o), lx + 8, h - 6, label);
    lx += 16 + 7 * static_cast<double>(label.size());
  }
  return s + "</svg></section>\n";
}

std::string slowest_section(const std::vector<ResultRecord>& records) {
  std::vector<const ResultRecord*> rs;
  for (const auto& r : records)
    if (std::isfinite(r.ms) && r.ms > 0) rs.push_back(&r);
  std::stable_sort(rs.begin(), rs.end(), [](const auto* a, const auto* b) { return a->ms > b->ms; });
  if (rs.size() > kSlowest) rs.resize(kSlowest);
  std::string s = fmt::format("<section id=\"slowest\"><h2>Slowest cases ({})</h2>\n", rs.size());
  if (rs.empty()) return s + "<p>No timed cases.</p></section>\n";
  const double w = 1100, label_w = 640, bar_h = 18, gap = 4, top = 8;
  const double h = top + (bar_h + gap) * static_cast<double>(rs.size()) + 8;
  const double max_ms = rs.front()->ms;
  s += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\" aria-label=\"slowest cases\">\n",
      w, h, w, h);
  double y = top;
  for (const ResultRecord* r : rs) {
    const double bw = std::max(1.0, r->ms / max_ms * (w - label_w - 90));
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\" font-family=\"monospace\">{}</text>"
        "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>"
        "<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\">{:.1f} ms</text>\n",
        label_w - 6, y + bar_h - 5, html_escape(short_text(r->arch + " " + r->id, 90)), label_w, y, bw, bar_h,
        color(r->outcome), html_escape(r->id), label_w + bw + 4, y + bar_h - 5, r->ms);
    y += bar_h + gap;
  }
  return s + "</svg></section>\n";
}

}  // namespace

std::string html_report(const std::vector<ResultRecord>& records, const std::string& title) {
  std::set<std::string> archs;
  for (const auto& r : records) archs.insert(r.arch);
  std::string arch_list;
  for (const auto& a : archs) arch_list += (arch_list.empty() ? "" : ", ") + a;
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + html_escape(title) +
                  "</title>\n<style>\n"
                  "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}\n"
                  "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;"
                  "font-size:13px;text-align:left;vertical-align:top}\n"
                  "td.num{text-align:right}.total{font-size:18px}.count{font-weight:600}"
                  "code{font-size:12px;word-break:break-all}.repro{color:#555}\n"
                  "h2{margin-top:28px;border-bottom:1px solid #ddd}\n"
                  "</style></head><body>\n";
  s += "<h1>" + html_escape(title) + "</h1>\n";
  s +=
      fmt::format("<p>{} results on {}.</p>\n", records.size(), html_escape(arch_list.empty() ? "no arch" : arch_list));
  s += counts_section(records);
  s += matrix_section(records);
  s += failures_section(records);
  s += error_plot_section(records);
  s += tightness_section(records);
  s += slowest_section(records);
  return s + "</body></html>\n";
}

}  // namespace opcts
