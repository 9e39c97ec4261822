// Tests of the Markdown summary and the atomic text writer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "reports/summary.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::contains_all;

ResultRecord make(const std::string& family, const std::string& impl, const std::string& rest, Outcome outcome,
                  const std::string& message = "") {
  ResultRecord r;
  r.family = family;
  r.impl = impl;
  r.id = family + "." + impl + "/" + rest;
  r.arch = "sm90";
  r.outcome = r.raw_outcome = outcome;
  r.message = message;
  r.repro = "opcts repro '" + r.id + "' --arch sm90";
  return r;
}

std::size_t count_of(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

std::vector<ResultRecord> sample() {
  std::vector<ResultRecord> rs;
  for (int i = 0; i < 3; ++i) rs.push_back(make("sdpa", "cuda_flash", "pass" + std::to_string(i), Outcome::PASS));
  auto fail = make("sdpa", "cuda_flash", "bf16_fail", Outcome::FAIL, "O out of bound");
  fail.outputs.push_back({"O", "ref_relative", 96, 0.031, 0.5, 0.004, 0.001, 64});
  rs.push_back(fail);
  rs.push_back(make("sdpa", "cuda_cudnn", "pass", Outcome::PASS));
  rs.push_back(make("scaled_mm", "cuda_cublaslt", "crash", Outcome::CRASH, "worker died\nwith SIGSEGV"));
  rs.push_back(make("scaled_mm", "cuda_cublaslt", "xpass", Outcome::XPASS, "old reason"));
  for (int i = 0; i < 4; ++i)
    rs.push_back(make("scaled_mm", "cuda_cublaslt", "skipA" + std::to_string(i), Outcome::SKIP, "no fp8 MMA"));
  rs.push_back(make("scaled_mm", "cuda_cublaslt", "skipB", Outcome::SKIP, "D=256 needs more smem"));
  rs.push_back(make("scaled_mm", "cuda_cublaslt", "xfail", Outcome::XFAIL, "rowwise bound 9x"));
  return rs;
}

// Cases judged under a stand-in accumulator model get a section naming impl, arch and model;
// a SKIP under it is not counted, and a summary without any has no such section.
TEST(Summary, ProvisionalVerdictsAreListedByImplAndModel) {
  auto rs = sample();
  EXPECT_EQ(summary_markdown(rs).find("## Provisional"), std::string::npos);
  const std::string model = "d: {bits: 14, rounding: truncate, promote_every: 0} (cases/tolerances.yaml:150)";
  for (auto& r : rs)
    if (r.impl == "cuda_cublaslt") r.provisional = model;
  const std::string md = summary_markdown(rs);
  // crash, xpass and xfail ran; the five SKIPs did not.
  EXPECT_TRUE(
      contains_all(md, {"## Provisional (3)", "- scaled_mm cuda_cublaslt on sm90: 3 cases under `" + model + "`"}));
}

TEST(Summary, CountsPerOutcome) {
  const auto md = summary_markdown(sample());
  EXPECT_TRUE(contains_all(
      md, {"**13 cases**", "4 PASS", "1 FAIL", "1 CRASH", "5 SKIP", "1 XFAIL", "1 XPASS", "3 gate failures"}));
  EXPECT_EQ(md.find("ERROR"), std::string::npos) << md;  // no ERROR case: no column
}

TEST(Summary, TableHasFamilyImplRowsAndOrderedColumns) {
  const auto md = summary_markdown(sample());
  EXPECT_TRUE(contains_all(
      md, {"| family | impl | PASS | FAIL | CRASH | SKIP | XFAIL | XPASS |",
           "| sdpa | cuda_flash | 3 | 1 | 0 | 0 | 0 | 0 |", "| sdpa | cuda_cudnn | 1 | 0 | 0 | 0 | 0 | 0 |",
           "| scaled_mm | cuda_cublaslt | 0 | 0 | 1 | 5 | 1 | 1 |"}));
}

TEST(Summary, FailuresListMessageBoundAndRepro) {
  const auto md = summary_markdown(sample());
  const auto section = md.find("## Failures (3)");
  ASSERT_NE(section, std::string::npos) << md;
  const std::string failures = md.substr(section, md.find("\n## ", section + 1) - section);
  EXPECT_NE(failures.find("`sdpa.cuda_flash/bf16_fail`"), std::string::npos) << failures;
  EXPECT_NE(failures.find("**FAIL**: O out of bound; max abs err 0.031 > bound 0.004 (64 mismatches)"),
            std::string::npos)
      << failures;
  EXPECT_TRUE(contains_all(
      failures, {"`opcts repro 'sdpa.cuda_flash/bf16_fail' --arch sm90`", "**CRASH**: worker died with SIGSEGV"}));
  EXPECT_NE(failures.find("`opcts repro 'scaled_mm.cuda_cublaslt/crash' --arch sm90`"), std::string::npos);
  EXPECT_NE(failures.find("**XPASS**"), std::string::npos) << failures;
  EXPECT_EQ(failures.find("xfail'"), std::string::npos) << failures;  // the XFAIL case is no failure
  EXPECT_EQ(failures.find("skipA"), std::string::npos) << failures;
  EXPECT_EQ(count_of(failures, "repro: "), 3u) << failures;
}

TEST(Summary, SkipsGroupedByReasonMostFirst) {
  const auto md = summary_markdown(sample());
  const auto section = md.find("## Skipped (5)");
  ASSERT_NE(section, std::string::npos) << md;
  const auto a = md.find("| 4 | no fp8 MMA |", section);
  const auto b = md.find("| 1 | D=256 needs more smem |", section);
  ASSERT_NE(a, std::string::npos) << md;
  ASSERT_NE(b, std::string::npos) << md;
  EXPECT_LT(a, b);
  EXPECT_TRUE(contains_all(md, {"## Expected failures (1)", "| 1 | rowwise bound 9x |"}));
}

TEST(Summary, KeepsTheTopTwentyReasons) {
  std::vector<ResultRecord> rs;
  for (int i = 0; i < 25; ++i)
    for (int k = 0; k <= i; ++k)
      rs.push_back(make("cast", "host_tiled", std::to_string(i) + "_" + std::to_string(k), Outcome::SKIP,
                        "reason " + std::to_string(i)));
  const auto md = summary_markdown(rs);
  EXPECT_TRUE(contains_all(md, {"| 25 | reason 24 |", "| 6 | reason 5 |"}));
  EXPECT_EQ(md.find("| 5 | reason 4 |"), std::string::npos) << md;
  EXPECT_NE(md.find("and 5 more reasons (15 cases)"), std::string::npos) << md;
  EXPECT_EQ(md.find("## Failures"), std::string::npos) << md;
  EXPECT_NE(md.find("no gate failures"), std::string::npos) << md;
}

TEST(Summary, ReproWithBackticksStaysOneCodeSpan) {
  auto r = make("cast", "host_tiled", "x", Outcome::ERROR, "bad");
  r.repro = "opcts repro `x`";
  const auto md = summary_markdown({r});
  EXPECT_NE(md.find("`` opcts repro `x` ``"), std::string::npos) << md;
}

TEST(Summary, EmptyInput) {
  const auto md = summary_markdown({});
  EXPECT_NE(md.find("**0 cases**"), std::string::npos) << md;
  EXPECT_EQ(md.find("| family |"), std::string::npos) << md;
}

TEST(StatsLine, SaysWhetherTheBoundHolds) {
  auto r = make("sdpa", "cuda_flash", "x", Outcome::PASS);
  EXPECT_EQ(stats_line(r), "");
  r.outputs.push_back({"O", "allclose", 10, 1e-4, 1e-3, 2e-4, 0, 0});
  EXPECT_EQ(stats_line(r), "max abs err 0.0001 <= bound 0.0002 (0 mismatches)");
}

TEST(WriteTextFile, WritesAtomicallyAndCreatesParents) {
  const fs::path dir = fs::path(testing::TempDir()) / "opcts_write_text_file";
  fs::remove_all(dir);
  const auto path = dir / "a" / "b.md";
  write_text_file(path.string(), "first");
  write_text_file(path.string(), std::string("second\0bytes", 12));
  std::ifstream in(path, std::ios::binary);
  const std::string got{std::istreambuf_iterator<char>(in), {}};
  EXPECT_EQ(got, std::string("second\0bytes", 12));
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / "a")) ++files;
  EXPECT_EQ(files, 1u);
  EXPECT_THROW(write_text_file((path / "below_a_file").string(), "x"), std::runtime_error);
}

}  // namespace
}  // namespace opcts
