// Tests of the report views: enablement matrix, times files, and the HTML report (rendered in headless Chromium when
// present).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "reports/html.hpp"
#include "reports/matrix.hpp"
#include "reports/summary.hpp"
#include "reports/tightness.hpp"
#include "reports/times.hpp"
#include "runner/shard_plan.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::contains_all;
using testutil::read_file;

ResultRecord rec(const std::string& family, const std::string& impl, const std::string& arch, const std::string& p,
                 Outcome o, const std::string& message = "", double ms = 2.0) {
  ResultRecord r;
  r.family = family;
  r.impl = impl;
  r.arch = arch;
  std::string tok = impl;
  for (char& c : tok) c = c == '.' ? '_' : c;
  r.id = family + "." + tok + "/" + p;
  r.outcome = r.raw_outcome = o;
  if (o == Outcome::XFAIL) r.raw_outcome = Outcome::FAIL;
  r.message = message;
  r.ms = ms;
  r.repro = "opcts repro '" + r.id + "' --arch " + arch;
  return r;
}

// Two archs; each impl is in one state on each arch.
std::vector<ResultRecord> records() {
  return {
      rec("sdpa", "cuda.flash", "sm90", "a", Outcome::PASS),
      rec("sdpa", "cuda.flash", "sm90", "b", Outcome::SKIP, "arch sm90 lacks nothing: impl does not support d=512"),
      rec("sdpa", "cuda.flash", "sm80", "a", Outcome::PASS),
      rec("sdpa", "cuda.flash", "sm80", "b", Outcome::XFAIL, "xfail (sm80.yaml:4): bf16 atomics are slow — FAIL: x"),
      rec("sdpa", "cuda.flash", "sm80", "c", Outcome::XFAIL, "xfail (sm80.yaml:4): bf16 atomics are slow — FAIL: y"),
      rec("scaled_mm", "cuda.mx", "sm80", "a", Outcome::SKIP, "arch sm80 lacks capability 'mx_mma' needed by cuda.mx"),
      rec("scaled_mm", "cuda.mx", "sm90", "a", Outcome::SKIP, "manifest skip (sm90.yaml:9): hangs the driver"),
      rec("scaled_mm", "cuda.mx", "sm90", "b", Outcome::SKIP, "arch sm90 lacks capability 'mx_mma' needed by cuda.mx"),
      rec("cast", "cuda.cvt", "sm90", "a", Outcome::FAIL, "mismatch <b>&amp;", 40.0),
      rec("cast", "cuda.cvt", "sm90", "b", Outcome::PASS),
      rec("cast", "cuda.cvt", "sm80", "a", Outcome::SKIP, "this opcts was built without CUDA (OPCTS_CUDA=OFF)"),
      rec("cast", "host.cvt", "sm90", "a", Outcome::SKIP, "host.cvt: e8m0 outputs only"),
  };
}

TEST(Matrix, CellsTakeTheirStateFromTheOutcomes) {
  const EnablementMatrix m = enablement_matrix(records());
  EXPECT_EQ(m.archs, (std::vector<std::string>{"sm80", "sm90"}));
  ASSERT_EQ(m.rows.size(), 4u);
  EXPECT_EQ(m.cell("sdpa", "cuda.flash", "sm90").state, CellState::enabled);
  const MatrixCell& partial = m.cell("sdpa", "cuda.flash", "sm80");
  EXPECT_EQ(partial.state, CellState::partial);
  EXPECT_EQ(partial.xfail, 2u);
  ASSERT_EQ(partial.xfail_reasons.size(), 1u);
  EXPECT_EQ(partial.xfail_reasons.begin()->first, "bf16 atomics are slow");
  EXPECT_EQ(m.cell("scaled_mm", "cuda.mx", "sm80").state, CellState::unsupported);
  EXPECT_EQ(m.cell("scaled_mm", "cuda.mx", "sm90").state, CellState::skipped);
  EXPECT_EQ(m.cell("cast", "cuda.cvt", "sm90").state, CellState::failing);
  // No case ran, and not for a capability or the manifest: the gate fails these (issue 33).
  EXPECT_EQ(m.cell("cast", "cuda.cvt", "sm80").state, CellState::not_tested);  // built without CUDA
  EXPECT_EQ(m.cell("cast", "host.cvt", "sm90").state, CellState::not_tested);  // the impl's support
  EXPECT_EQ(m.cell("cast", "host.cvt", "sm80").state, CellState::not_run);     // no record at all
}

TEST(Matrix, MarkdownHasOneRowPerImplAndTheReasons) {
  const std::string md = matrix_markdown(enablement_matrix(records()));
  EXPECT_TRUE(contains_all(
      md, {"| family | impl | sm80 | sm90 |", "| sdpa | cuda.flash | 🟡 partial: 2/3 xfail | ✅ enabled (1) |",
           "| cast | cuda.cvt | ⚠️ not tested (1 SKIP) | ❌ failing: 1/2 |", "2 × bf16 atomics are slow",
           "lacks capability 'mx_mma'"}));
}

// An impl with tactics: the matrix says per tactic how many of its cases ran and passed (a
// tactic the device lacks is a SKIP, which a cell's verdict alone would not show).
TEST(Matrix, TacticCoverageIsListedPerCell) {
  auto rs = records();
  rs.push_back(rec("scaled_mm", "cuda.cublaslt", "sm90", "p/h0", Outcome::PASS));
  rs.push_back(rec("scaled_mm", "cuda.cublaslt", "sm90", "p/h1", Outcome::SKIP, "tactic h1 not offered here"));
  rs.push_back(rec("scaled_mm", "cuda.cublaslt", "sm90", "q/h0", Outcome::PASS));
  const EnablementMatrix m = enablement_matrix(rs);
  const MatrixCell& c = m.cell("scaled_mm", "cuda.cublaslt", "sm90");
  ASSERT_EQ(c.tactics.size(), 2u);
  EXPECT_EQ(c.tactics.at("h0").pass, 2u);
  EXPECT_EQ(c.tactics.at("h1").ran, 0u);
  EXPECT_TRUE(m.cell("sdpa", "cuda.flash", "sm90").tactics.empty());
  EXPECT_NE(matrix_markdown(m).find("- **scaled_mm cuda.cublaslt on sm90**: h0 2/2 ran, 2 pass; h1 0/1 ran, 0 pass\n"),
            std::string::npos)
      << matrix_markdown(m);
}

// A cell whose cases ran under a stand-in accumulator model says how many, beside its state;
// the HTML's matrix shows the same text.
TEST(Matrix, ProvisionalCasesAreMarkedInTheCell) {
  auto rs = records();
  for (auto& r : rs)
    if (r.impl == "cuda.flash" && r.arch == "sm80") r.provisional = "O: {bits: 14} (t.yaml:1)";
  const EnablementMatrix m = enablement_matrix(rs);
  EXPECT_EQ(m.cell("sdpa", "cuda.flash", "sm80").provisional, 3u);
  EXPECT_EQ(cell_text(m.cell("sdpa", "cuda.flash", "sm80")), "partial: 2/3 xfail, provisional (3)");
  EXPECT_EQ(cell_text(m.cell("sdpa", "cuda.flash", "sm90")), "enabled (1)");
  EXPECT_NE(html_report(rs, "t").find("partial: 2/3 xfail, provisional (3)"), std::string::npos);
}

// The findings ledger: an expected failure's tracking reference (its manifest entry's
// `tracking:`) is shown beside it in the summary, the enablement matrix and the HTML report, and
// an unexpected failure under an entry names it too.
TEST(Ledger, TrackingIsShownInTheSummaryMatrixAndHtml) {
  auto rs = records();
  rs[3].tracking = rs[4].tracking = "pytorch/pytorch#131257";
  rs[8].tracking = "docs/status/sm90.md#cast";
  const std::string md = summary_markdown(rs);
  EXPECT_TRUE(
      contains_all(md, {"| cases | reason | tracking |", "bf16 atomics are slow — FAIL: x | pytorch/pytorch#131257 |",
                        "(tracking: docs/status/sm90.md#cast)"}));
  const std::string mx = matrix_markdown(enablement_matrix(rs));
  EXPECT_NE(mx.find("2 × [tracking: pytorch/pytorch#131257] bf16 atomics are slow"), std::string::npos) << mx;
  const std::string h = html_report(rs, "t");
  EXPECT_NE(h.find("2 × [tracking: pytorch/pytorch#131257] bf16 atomics are slow"), std::string::npos);
  EXPECT_NE(h.find("[tracking: docs/status/sm90.md#cast] mismatch"), std::string::npos);
  // Without a reference the expected failures say so, and nothing else changes.
  const std::string bare = summary_markdown(records());
  EXPECT_NE(bare.find("bf16 atomics are slow — FAIL: x | (none) |"), std::string::npos) << bare;
  EXPECT_EQ(matrix_markdown(enablement_matrix(records())).find("tracking"), std::string::npos);
}

TEST(Times, OneFilePerArchThatThePlannerReads) {
  const auto dir = testutil::temp_dir();
  const auto by_arch = times_by_arch(records());
  ASSERT_EQ(by_arch.size(), 2u);
  const std::string path = times_path(dir + "/times/{arch}.json", "sm90");
  EXPECT_EQ(path, dir + "/times/sm90.json");
  write_text_file(path, times_json(by_arch.at("sm90")));
  const auto back = read_times_file(path);
  EXPECT_EQ(back.size(), 7u);
  EXPECT_DOUBLE_EQ(back.at("cast.cuda_cvt/a"), 0.04);
  EXPECT_DOUBLE_EQ(back.at("sdpa.cuda_flash/b"), 0.0);  // skipped: costs a shard nothing
}

TEST(Html, SelfContainedEscapedAndComplete) {
  auto rs = records();
  rs[8].outputs.push_back({"y", "allclose", 10, 0.3, 0.1, 0.01, 0, 3});
  rs[9].outputs.push_back({"y", "bitexact", 10, 0, 0, 0, 0, 0});
  rs[0].outputs.push_back({"O", "ref_relative", 10, 1e-4, 1e-3, 1e-2, 1e-4, 0});
  rs[8].message += " <script>alert(1)</script> \x01\xff";
  const std::string h = html_report(rs, "sm80 & sm90 <report>");
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_NE(h.find("&lt;script&gt;"), std::string::npos);
  EXPECT_EQ(h.find("<b>&amp;"), std::string::npos) << "record text is escaped";
  EXPECT_NE(h.find("mismatch &lt;b&gt;&amp;amp;"), std::string::npos);
  EXPECT_NE(h.find("<title>sm80 &amp; sm90 &lt;report&gt;</title>"), std::string::npos);
  for (const char* ext : {"src=", "href=", "@import", "url("}) EXPECT_EQ(h.find(ext), std::string::npos) << ext;
  EXPECT_NE(h.find("3 PASS"), std::string::npos);
  EXPECT_NE(h.find("1 FAIL"), std::string::npos);
  EXPECT_NE(h.find("opcts repro &#39;cast.cuda_cvt/a&#39; --arch sm90"), std::string::npos) << "failure repro";
  EXPECT_NE(h.find("id=\"matrix\""), std::string::npos);
  EXPECT_NE(h.find("partial: 2/3 xfail"), std::string::npos);
  EXPECT_NE(h.find("aria-label=\"error over bound per family\""), std::string::npos);
  EXPECT_NE(h.find("aria-label=\"slowest cases\""), std::string::npos);
  EXPECT_NE(h.find("<circle"), std::string::npos);
  EXPECT_NE(h.find("id=\"tightness\""), std::string::npos);
  EXPECT_EQ(h.find('\x01'), std::string::npos);
}

// A scaled_mm record on sm90 whose one output "d" is judged by a bound, its error `ratio` times it.
ResultRecord bounded_record(const std::string& impl, const std::string& p, Outcome o, double bound, double ratio) {
  ResultRecord r = rec("scaled_mm", impl, "sm90", p, o);
  r.outputs.push_back({"d", "bounded", 16, ratio * bound, 0, bound, 0, 0});
  r.outputs.back().max_ratio = ratio;
  return r;
}

// Error ÷ bound over passing cases, per impl and output: failures, exact comparisons and
// records without a ratio stay out of the statistics.
TEST(Tightness, MedianP99AndMaxPerImplAndOutput) {
  std::vector<ResultRecord> rs;
  auto add = [&](const std::string& impl, const std::string& p, Outcome o, double bound, double ratio) {
    rs.push_back(bounded_record(impl, p, o, bound, ratio));
  };
  add("cuda.x", "a", Outcome::PASS, 1.0, 0.1);
  add("cuda.x", "b", Outcome::PASS, 2.0, 0.5);
  add("cuda.x", "c", Outcome::PASS, 1.0, 0.2);
  add("cuda.x", "exact", Outcome::PASS, 0.0, 0.0);
  add("cuda.x", "fail", Outcome::FAIL, 1.0, 30.0);
  add("cuda.x", "old", Outcome::PASS, 1.0, std::nan(""));
  add("cuda.y", "a", Outcome::PASS, 1.0, 0.0);
  const auto rows = tightness(rs);
  ASSERT_EQ(rows.size(), 2u);
  const TightnessRow& x = rows[0];
  EXPECT_EQ(x.impl, "cuda.x");
  EXPECT_EQ(x.cases, 3u);
  EXPECT_EQ(x.exact, 1u);
  EXPECT_EQ(x.zero_error, 0u);
  EXPECT_EQ(x.median, 0.2);
  EXPECT_EQ(x.p99, 0.5);
  EXPECT_EQ(x.max, 0.5);
  EXPECT_EQ(x.median_nonzero, 0.2);
  EXPECT_EQ(rows[1].zero_error, 1u);
  EXPECT_EQ(rows[1].median_nonzero, 0.0);
  const std::string md = tightness_markdown(rows);
  EXPECT_NE(md.find("| scaled_mm | cuda.x | d | bounded | 3 | 0 | 1 | 0.2 | 0.5 | 0.5 | 0.2 | 5 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| scaled_mm | cuda.y | d | bounded | 1 | 1 | 0 | 0 | 0 | 0 | – | – |"), std::string::npos) << md;
}

// The error-energy statistics: passing cases the check judged (a ratio above 0), per impl and
// output; failures and unjudged outputs stay out, and the report has the section only then.
TEST(Tightness, ErrorEnergyPerImplAndOutput) {
  std::vector<ResultRecord> rs;
  auto add = [&](const std::string& p, Outcome o, double energy) {
    rs.push_back(bounded_record("cuda.x", p, o, 1.0, 0.1));
    rs.back().outputs.back().energy_ratio = energy;
  };
  EXPECT_EQ(tightness_report_markdown(rs).find("## Error energy"), std::string::npos);
  add("a", Outcome::PASS, 0.5);
  add("b", Outcome::PASS, 0.25);
  add("c", Outcome::PASS, 0.75);
  add("unjudged", Outcome::PASS, 0.0);
  add("fail", Outcome::FAIL, 3.0);
  const auto rows = energy_tightness(rs);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].cases, 3u);
  EXPECT_EQ(rows[0].median, 0.5);
  EXPECT_EQ(rows[0].max, 0.75);
  const std::string md = tightness_report_markdown(rs);
  EXPECT_NE(md.find("| scaled_mm | cuda.x | d | 3 | 0.5 | 0.75 | 0.75 |"), std::string::npos) << md;
}

// The report's two lists: each impl and output's loosest passing case by id (the smallest error
// ÷ bound above 0: ties to the lower id; exact and error-free cases say nothing), and each
// planted impl's cases — skipped, run, caught, and the ids it passed or errored on.
TEST(Tightness, LoosestCasePerImplAndOutputAndEachPlantedBugsCases) {
  std::vector<ResultRecord> rs;
  auto add = [&](const std::string& impl, const std::string& p, Outcome o, double bound, double ratio) {
    rs.push_back(bounded_record(impl, p, o, bound, ratio));
  };
  add("cuda.x", "a", Outcome::PASS, 1.0, 0.1);
  add("cuda.x", "b", Outcome::PASS, 2.0, 0.02);
  add("cuda.x", "b2", Outcome::PASS, 2.0, 0.02);  // the same ratio: b, the lower id, stays
  add("cuda.x", "zero", Outcome::PASS, 1.0, 0.0);
  add("cuda.x", "exact", Outcome::PASS, 0.0, 0.0);
  add("cuda.x", "fail", Outcome::FAIL, 1.0, 0.001);
  const auto loose = loosest_cases(rs);
  ASSERT_EQ(loose.size(), 1u);
  EXPECT_EQ(loose[0].id, "scaled_mm.cuda_x/b");
  EXPECT_EQ(loose[0].out, "d");
  EXPECT_DOUBLE_EQ(loose[0].bound_over_error, 50.0);

  auto planted = [&](const std::string& p, Outcome raw) {
    rs.push_back(rec("sdpa", "host.flash_bug", "host", p, raw));
    rs.back().planted = true;
    rs.back().outcome = raw == Outcome::FAIL ? Outcome::XFAIL : raw == Outcome::PASS ? Outcome::XPASS : raw;
  };
  planted("caught1", Outcome::FAIL);
  planted("caught2", Outcome::FAIL);
  planted("missed", Outcome::PASS);
  planted("hidden", Outcome::PASS);  // a pass where the impl derived why the bound may not see its bug
  rs.back().blind_spot = "the bias check's band reaches 0.005, beyond the 0.0039 slope";
  planted("skipped", Outcome::SKIP);
  planted("crashed", Outcome::CRASH);
  // A record from before the field: known by its expectation.
  rs.push_back(rec("sdpa", "host.flash_old", "host", "x", Outcome::XFAIL));
  rs.back().expectation = "planted bug (planted impl host.flash_old)";
  const auto bugs = planted_bugs(rs);
  ASSERT_EQ(bugs.size(), 2u);
  EXPECT_EQ(bugs[0].impl, "host.flash_bug");
  EXPECT_EQ(bugs[0].cases, 6u);
  EXPECT_EQ(bugs[0].skipped, 1u);
  EXPECT_EQ(bugs[0].run, 5u);
  EXPECT_EQ(bugs[0].caught, 2u);
  EXPECT_EQ(bugs[0].missed, std::vector<std::string>{"sdpa.host_flash_bug/missed"});
  EXPECT_EQ(bugs[0].blind, std::vector<std::string>{"sdpa.host_flash_bug/hidden"});
  EXPECT_EQ(bugs[0].other, std::vector<std::string>{"sdpa.host_flash_bug/crashed (CRASH)"});
  EXPECT_EQ(bugs[1].caught, 1u);
  const std::string md = tightness_report_markdown(rs);
  EXPECT_NE(md.find("| scaled_mm | cuda.x | d | `scaled_mm.cuda_x/b` | 50 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sdpa | host.flash_bug | 6 | 1 | 5 | 2 | 1: `sdpa.host_flash_bug/missed` | 1: "
                    "`sdpa.host_flash_bug/hidden` | 1: `sdpa.host_flash_bug/crashed (CRASH)` |"),
            std::string::npos)
      << md;
}

// Renders the page in headless Chromium: the DOM holds the counts and the matrix, and a
// screenshot is a non-empty PNG. SKIP without /usr/bin/chromium (scripts/screenshot-report.sh
// installs it).
TEST(Html, RendersInHeadlessChromium) {
  const std::string chromium = "/usr/bin/chromium";
  if (!fs::exists(chromium))
    GTEST_SKIP() << chromium << " absent (Debian package chromium; see scripts/screenshot-report.sh)";
  const auto dir = testutil::temp_dir();
  const std::string html = testutil::write(dir, "report.html", html_report(records(), "opcts test report"));
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-background-networking "
      "--disable-component-update --no-first-run --disable-sync --user-data-dir='" +
      dir + "/profile'";
  const std::string dom = dir + "/dom.html", png = dir + "/shot.png";
  ASSERT_EQ(std::system((chromium + flags + " --dump-dom 'file://" + html + "' >'" + dom + "' 2>/dev/null").c_str()),
            0);
  const std::string d = read_file(dom);
  EXPECT_NE(d.find("3 PASS"), std::string::npos) << d.substr(0, 2000);
  EXPECT_NE(d.find("1 FAIL"), std::string::npos);
  EXPECT_NE(d.find("partial: 2/3 xfail"), std::string::npos);
  EXPECT_NE(d.find("<svg"), std::string::npos);
  ASSERT_EQ(std::system((chromium + flags + " --screenshot='" + png + "' --window-size=1280,1600 'file://" + html +
                         "' >/dev/null 2>&1")
                            .c_str()),
            0);
  const std::string p = read_file(png);
  ASSERT_GT(p.size(), 1000u);
  EXPECT_EQ(p.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace opcts
