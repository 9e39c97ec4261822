// Tests of the JUnit writer/reader and of merging report files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <pugixml.hpp>

#include "core/result.hpp"
#include "reports/junit.hpp"
#include "reports/merge.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::contains_all;
using testutil::read_file;

// A fresh directory per test under gtest's temp dir.
fs::path test_dir() {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(testing::TempDir()) / (std::string("opcts_") + info->test_suite_name() + "_" + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

ResultRecord make(const std::string& family, const std::string& rest, Outcome outcome,
                  const std::string& arch = "sm90") {
  ResultRecord r;
  r.family = family;
  r.impl = "cuda.flash";
  r.id = family + ".cuda_flash/" + rest;
  r.arch = arch;
  r.device = 0;
  r.outcome = outcome;
  r.raw_outcome = outcome;
  r.seed = "0x9f3a1c2e";
  r.ms = 1.75;
  r.tier = "default";
  r.repro = "opcts repro '" + r.id + "' --arch " + arch;
  return r;
}

void add_stats(ResultRecord& r) {
  r.outputs.push_back({"O", "ref_relative", 96, 0.031, 0.5, 0.004, 0.001, 64});
  r.outputs.back().max_ratio = 7.75;
  r.outputs.back().energy_ratio = 1.125;
  r.outputs.push_back({"lse", "allclose", 24, 1e-7, 2e-7, 1e-5, 0, 0});
  r.outputs.back().max_ratio = std::numeric_limits<double>::infinity();
  r.outputs.push_back({"d", "bounded", 16, 0.5, 0.01, 2.0, 0, 0});
  r.outputs.back().max_ratio = 0.25;
  r.outputs.back().slope = 0x1p-8;
  r.outputs.back().slope_lo = -0.006;
  r.outputs.back().slope_hi = 1e-4;
  r.outputs.back().conservation_off = 3;
  r.outputs.back().rule = "tolerances.yaml:412, sm90.yaml:37";
  r.worst.push_back({"O", {0, 0, 1, 5}, 0.031, 0.0});
  r.worst.push_back({"O", {0, 1, 2, 3}, -0.02, 0.01});
  r.worst.push_back({"lse", {}, std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()});
}

// One record per outcome, in two families, with every field set somewhere.
std::vector<ResultRecord> every_outcome() {
  std::vector<ResultRecord> rs;
  rs.push_back(make("sdpa", "bf16_b1_pass", Outcome::PASS));
  rs.back().outputs.push_back({"O", "ref_relative", 96, 1e-3, 2e-3, 4e-3, 1e-3, 0});
  rs.push_back(make("sdpa", "bf16_b1_fail", Outcome::FAIL));
  add_stats(rs.back());
  rs.back().message = "O exceeds its bound\nsecond line";
  rs.back().failures = {{"O", FailureKind::exceeds_bound, 64, 7.75},
                        {"lse", FailureKind::nonfinite, 3, 0},
                        {"d", FailureKind::biased, 0, 0},
                        {"", FailureKind::wrote_input, 0, 0}};
  rs.push_back(make("sdpa", "bf16_b1_error", Outcome::ERROR));
  rs.back().message = "std::runtime_error: cudaErrorIllegalAddress";
  rs.push_back(make("scaled_mm", "e4m3_crash", Outcome::CRASH));
  rs.back().message = "worker died with SIGSEGV";
  rs.back().device = -1;
  rs.push_back(make("scaled_mm", "e4m3_timeout", Outcome::TIMEOUT));
  rs.back().message = "ran past 60 s";
  rs.back().tier = "";
  rs.push_back(make("scaled_mm", "e4m3_skip", Outcome::SKIP));
  rs.back().message = "sm80 has no fp8 MMA";
  rs.push_back(make("scaled_mm", "e4m3_xfail", Outcome::XFAIL));
  rs.back().raw_outcome = Outcome::FAIL;
  rs.back().expectation = "rowwise scales exceed the bound by 9x";
  rs.back().message = "d: 3/100 mismatches";
  add_stats(rs.back());
  rs.back().failures = {{"d", FailureKind::exceeds_bound, 3, std::numeric_limits<double>::infinity()}};
  rs.back().planted = true;
  rs.back().blind_spot = "the bias check's band reaches 0.005, beyond the 0.0039 slope";
  rs.push_back(make("sdpa", "bf16_b1_xpass", Outcome::XPASS));
  rs.back().raw_outcome = Outcome::PASS;
  rs.back().expectation = "xfail (sm90.yaml:7): known bad on this arch";
  return rs;
}

std::map<std::string, ResultRecord> by_id(const std::vector<ResultRecord>& rs) {
  std::map<std::string, ResultRecord> m;
  for (const auto& r : rs) m[r.id] = r;
  return m;
}

pugi::xml_node find_case(const pugi::xml_document& doc, const std::string& name) {
  for (auto suite : doc.child("testsuites").children("testsuite"))
    for (auto tc : suite.children("testcase"))
      if (name == tc.attribute("name").value()) return tc;
  return {};
}

// Checks what an XML 1.0 parser demands of the bytes: well-formed UTF-8 and no control
// characters other than tab, LF and CR (even as character references).
void expect_xml10_bytes(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    ASSERT_FALSE(c < 0x20 && c != '\t' && c != '\n' && c != '\r') << "control byte at " << i;
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    ASSERT_NE(len, 0) << "bad UTF-8 lead byte at " << i;
    ASSERT_LE(i + len, s.size()) << "truncated UTF-8 at " << i;
    for (int k = 1; k < len; ++k)
      ASSERT_EQ(static_cast<unsigned char>(s[i + k]) & 0xC0, 0x80) << "bad continuation at " << i;
    i += len;
  }
  for (const char* ref : {"&#1;", "&#x1;", "&#27;", "&#x1b;", "&#x1B;", "&#0;"})
    EXPECT_EQ(s.find(ref), std::string::npos) << ref;
}

TEST(Junit, RoundTripsEveryOutcome) {
  const auto dir = test_dir();
  const auto records = every_outcome();
  const auto path = (dir / "r.xml").string();
  write_junit(records, path, "opcts sm90", JunitDetail::all);
  const auto back = read_junit(path);
  ASSERT_EQ(back.size(), records.size());
  const auto m = by_id(back);
  for (const auto& r : records) {
    ASSERT_TRUE(m.count(r.id)) << r.id;
    const auto& b = m.at(r.id);
    EXPECT_TRUE(same_record(r, b)) << r.id;
    EXPECT_EQ(b.outcome, r.outcome) << r.id;
    EXPECT_EQ(b.raw_outcome, r.raw_outcome) << r.id;
    EXPECT_EQ(b.message, r.message) << r.id;
    EXPECT_EQ(b.expectation, r.expectation) << r.id;
    EXPECT_EQ(b.family, r.family) << r.id;
    EXPECT_EQ(b.device, r.device) << r.id;
    EXPECT_EQ(b.tier, r.tier) << r.id;
    EXPECT_EQ(b.repro, r.repro) << r.id;
    EXPECT_EQ(b.outputs.size(), r.outputs.size()) << r.id;
    EXPECT_EQ(b.worst.size(), r.worst.size()) << r.id;
    EXPECT_EQ(b.failures, r.failures) << r.id;
    EXPECT_EQ(b.planted, r.planted) << r.id;
    EXPECT_EQ(b.blind_spot, r.blind_spot) << r.id;
  }
  // The failure message and the xfail's say the kinds.
  const std::string xml = read_file(path);
  EXPECT_NE(xml.find("second line; failed: O exceeds_bound ×7.75 (64 elements), lse nonfinite (3 elements), d biased, "
                     "wrote_input"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("[FAIL; failed: d exceeds_bound ×inf (3 elements)"), std::string::npos) << xml;
  const auto& fail = m.at("sdpa.cuda_flash/bf16_b1_fail");
  ASSERT_EQ(fail.worst.size(), 3u);
  EXPECT_EQ(fail.worst[1].index, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(std::isnan(fail.worst[2].got));
  EXPECT_EQ(fail.worst[2].want, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(fail.outputs[1].out, "lse");
  EXPECT_EQ(fail.outputs[1].max_abs_err, 1e-7);
  ASSERT_EQ(fail.outputs.size(), 3u);
  EXPECT_EQ(fail.outputs[0].max_ratio, 7.75);
  EXPECT_TRUE(std::isinf(fail.outputs[1].max_ratio));
  EXPECT_EQ(fail.outputs[2].slope, 0x1p-8);
  EXPECT_EQ(fail.outputs[2].slope_lo, -0.006);
  EXPECT_TRUE(fail.outputs[2].biased());
  EXPECT_FALSE(fail.outputs[0].has_slope());
  EXPECT_EQ(fail.outputs[2].rule, "tolerances.yaml:412, sm90.yaml:37");
  EXPECT_EQ(fail.outputs[0].rule, "");
}

TEST(JsonLines, RoundTripEveryOutcome) {
  for (const auto& r : every_outcome()) {
    const ResultRecord b = parse_json_line(to_json_line(r));
    EXPECT_TRUE(same_record(r, b)) << r.id;
    EXPECT_EQ(b.failures, r.failures) << r.id;
    EXPECT_EQ(b.planted, r.planted) << r.id;
    EXPECT_EQ(b.blind_spot, r.blind_spot) << r.id;
    for (size_t i = 0; i < r.outputs.size() && i < b.outputs.size(); ++i)
      EXPECT_EQ(b.outputs[i].rule, r.outputs[i].rule) << r.id;
  }
  EXPECT_THROW(parse_json_line(R"({"id":"a.b/c","outcome":"FAIL","failures":[{"kind":"too_big"}]})"),
               std::runtime_error);
  // Written before max_ratio existed: unknown (NaN), which the tightness report leaves out.
  const auto old = parse_json_line(
      R"({"id":"a.b/c","outcome":"PASS","outputs":[{"out":"d","max_abs_err":0,"max_rel_err":0,"bound":1}]})");
  EXPECT_TRUE(std::isnan(old.outputs.at(0).max_ratio));
}

// A verdict under a stand-in accumulator model says so in its results line.
TEST(JsonLines, ProvisionalModelRoundTrips) {
  ResultRecord r = every_outcome()[0];
  r.provisional = "d: {bits: 14, rounding: truncate, promote_every: 0} (cases/tolerances.yaml:150)";
  const std::string line = to_json_line(r);
  EXPECT_NE(line.find("\"provisional\""), std::string::npos) << line;
  EXPECT_EQ(parse_json_line(line).provisional, r.provisional);
  EXPECT_EQ(to_json_line(every_outcome()[0]).find("provisional"), std::string::npos);  // only when set
}

// ... and in the JUnit, lean or not, also for a case that passed.
TEST(Junit, ProvisionalModelRoundTripsLeanAndAll) {
  const auto dir = test_dir();
  ResultRecord r = every_outcome()[0];
  ASSERT_EQ(r.outcome, Outcome::PASS);
  r.provisional = "d: {bits: 14, rounding: truncate, promote_every: 0} (cases/tolerances.yaml:150)";
  for (const JunitDetail detail : {JunitDetail::lean, JunitDetail::all}) {
    const std::string path = (dir / (detail == JunitDetail::lean ? "lean.xml" : "all.xml")).string();
    write_junit({r}, path, "s", detail);
    EXPECT_EQ(read_junit(path).at(0).provisional, r.provisional) << path;
  }
}

TEST(Junit, SameRecordNoticesADifference) {
  // Guards the round-trip test: same_record must not be true for everything.
  const auto a = every_outcome()[1];
  EXPECT_TRUE(same_record(a, a));
  // One field changed at a time: each is a difference.
  const std::vector<std::function<void(ResultRecord&)>> changes{
      [](ResultRecord& b) { b.worst[0].index[3] = 6; },
      [](ResultRecord& b) { b.outputs[0].lowp_err = 0.002; },
      [](ResultRecord& b) { b.outputs[0].max_ratio = 1; },
      [](ResultRecord& b) { b.outputs[2].slope_hi = 1; },
      [](ResultRecord& b) { b.outputs[2].conservation_off = 0; },
      [](ResultRecord& b) { b.outputs[0].energy_ratio = 0.5; },
      [](ResultRecord& b) { b.outputs[2].rule = "tolerances.yaml:413"; },
      [](ResultRecord& b) { b.raw_outcome = Outcome::ERROR; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    auto b = a;
    changes[i](b);
    EXPECT_FALSE(same_record(a, b)) << "change " << i;
  }
}

// every_outcome() written as JUnit, with every detail, under the test suite name `suite` into
// this test's folder, and read back into `doc`: false when the file does not parse.
bool load_every_outcome(pugi::xml_document& doc, const std::string& suite) {
  const auto path = (test_dir() / "r.xml").string();
  write_junit(every_outcome(), path, suite, JunitDetail::all);
  return static_cast<bool>(doc.load_file(path.c_str()));
}

TEST(Junit, CountsAndNamesFollowTheMapping) {
  pugi::xml_document doc;
  ASSERT_TRUE(load_every_outcome(doc, "opcts sm90"));
  auto root = doc.child("testsuites");
  EXPECT_STREQ(root.attribute("name").value(), "opcts sm90");
  EXPECT_EQ(root.attribute("tests").as_int(), 8);
  EXPECT_EQ(root.attribute("failures").as_int(), 2);  // FAIL, XPASS
  EXPECT_EQ(root.attribute("errors").as_int(), 3);    // ERROR, CRASH, TIMEOUT
  EXPECT_FALSE(root.attribute("skipped"));            // the Ant schema forbids it there; suites count skips

  std::map<std::string, pugi::xml_node> suites;
  for (auto s : root.children("testsuite")) suites[s.attribute("name").value()] = s;
  ASSERT_EQ(suites.size(), 2u);
  const auto sdpa = suites.at("sdpa");
  EXPECT_EQ(sdpa.attribute("tests").as_int(), 4);
  EXPECT_EQ(sdpa.attribute("failures").as_int(), 2);
  EXPECT_EQ(sdpa.attribute("errors").as_int(), 1);
  EXPECT_EQ(sdpa.attribute("skipped").as_int(), 0);
  EXPECT_NEAR(sdpa.attribute("time").as_double(), 4 * 1.75e-3, 1e-9);
  EXPECT_FALSE(std::string(sdpa.attribute("timestamp").value()).empty());
  EXPECT_TRUE(sdpa.attribute("hostname"));
  const auto mm = suites.at("scaled_mm");
  EXPECT_EQ(mm.attribute("tests").as_int(), 4);
  EXPECT_EQ(mm.attribute("failures").as_int(), 0);
  EXPECT_EQ(mm.attribute("errors").as_int(), 2);
  EXPECT_EQ(mm.attribute("skipped").as_int(), 2);

  auto pass = find_case(doc, "cuda_flash/bf16_b1_pass");
  ASSERT_TRUE(pass);
  EXPECT_STREQ(pass.attribute("classname").value(), "sdpa.sm90");
  EXPECT_NEAR(pass.attribute("time").as_double(), 1.75e-3, 1e-9);
  EXPECT_FALSE(pass.child("failure") || pass.child("error") || pass.child("skipped"));

  auto fail = find_case(doc, "cuda_flash/bf16_b1_fail");
  ASSERT_TRUE(fail.child("failure"));
  EXPECT_STREQ(fail.child("failure").attribute("type").value(), "FAIL");
  const std::string body = fail.child("failure").text().get();
  EXPECT_NE(body.find("O exceeds its bound"), std::string::npos);
  EXPECT_NE(body.find("O[0,0,1,5]: got 0.031, want 0"), std::string::npos);
  EXPECT_NE(body.find("repro: opcts repro 'sdpa.cuda_flash/bf16_b1_fail' --arch sm90"), std::string::npos);

  std::map<std::string, std::string> props;
  for (auto p : fail.child("properties").children("property"))
    props[p.attribute("name").value()] = p.attribute("value").value();
  for (const char* key : {"id",
                          "arch",
                          "impl",
                          "device",
                          "seed",
                          "outcome",
                          "raw_outcome",
                          "tier",
                          "ms",
                          "metric",
                          "max_abs_err",
                          "max_rel_err",
                          "bound",
                          "mismatches",
                          "first_mismatch.out",
                          "first_mismatch.index",
                          "first_mismatch.got",
                          "first_mismatch.want",
                          "out.O.max_abs_err",
                          "out.lse.bound",
                          "repro"})
    EXPECT_TRUE(props.count(key)) << key;
  EXPECT_EQ(props["first_mismatch.index"], "0,0,1,5");
  EXPECT_EQ(props["max_abs_err"], "0.031");
  EXPECT_EQ(props["bound"], "0.004");
  EXPECT_EQ(props["mismatches"], "64");
  EXPECT_EQ(props["metric"], "ref_relative,allclose,bounded");
  EXPECT_EQ(props["out.d.slope"], "0.00390625");
  EXPECT_EQ(props["out.O.max_ratio"], "7.75");
  EXPECT_FALSE(props.count("out.O.slope"));  // written only where the bias check ran

  for (const char* name : {"cuda_flash/bf16_b1_error", "cuda_flash/e4m3_crash", "cuda_flash/e4m3_timeout"}) {
    auto e = find_case(doc, name).child("error");
    ASSERT_TRUE(e) << name;
    EXPECT_FALSE(find_case(doc, name).child("failure")) << name;
  }
  EXPECT_STREQ(find_case(doc, "cuda_flash/e4m3_crash").child("error").attribute("type").value(), "CRASH");
  EXPECT_STREQ(find_case(doc, "cuda_flash/e4m3_timeout").child("error").attribute("message").value(), "ran past 60 s");

  auto skip = find_case(doc, "cuda_flash/e4m3_skip").child("skipped");
  ASSERT_TRUE(skip);
  EXPECT_STREQ(skip.attribute("message").value(), "sm80 has no fp8 MMA");
  EXPECT_FALSE(skip.attribute("type"));
}

TEST(Junit, XfailIsSkippedWithTypeXfailAndXpassIsAFailure) {
  pugi::xml_document doc;
  ASSERT_TRUE(load_every_outcome(doc, "s"));
  auto xfail = find_case(doc, "cuda_flash/e4m3_xfail");
  ASSERT_TRUE(xfail.child("skipped"));
  EXPECT_FALSE(xfail.child("failure"));
  EXPECT_STREQ(xfail.child("skipped").attribute("type").value(), "xfail");
  const std::string xmsg = xfail.child("skipped").attribute("message").value();
  EXPECT_EQ(xmsg.rfind("rowwise scales exceed the bound by 9x", 0), 0u) << xmsg;
  EXPECT_NE(xmsg.find("FAIL"), std::string::npos) << xmsg;

  auto xpass = find_case(doc, "cuda_flash/bf16_b1_xpass");
  ASSERT_TRUE(xpass.child("failure"));
  EXPECT_FALSE(xpass.child("skipped"));
  EXPECT_STREQ(xpass.child("failure").attribute("type").value(), "XPASS");
  const std::string msg = xpass.child("failure").attribute("message").value();
  EXPECT_TRUE(contains_all(msg, {"remove this manifest entry: the case now passes", "known bad on this arch"}));
}

TEST(Junit, HostileMessagesStayValidAndReadable) {
  const auto dir = test_dir();
  const std::string hostile = std::string("ctl\x01 esc\x1b[31mred ff\xff\xfe trunc\xe2\x82 end ]]> <&>\"' nul") +
                              std::string(1, '\0') + "x tab\tok";
  auto records = every_outcome();
  for (auto& r : records) r.message = hostile;
  records[0].repro = "opcts repro ']]>\x07'";
  const auto path = (dir / "hostile.xml").string();
  write_junit(records, path, "suite\x02name", JunitDetail::all);

  const std::string bytes = read_file(path);
  expect_xml10_bytes(bytes);

  pugi::xml_document doc;
  const auto res = doc.load_file(path.c_str());
  ASSERT_TRUE(res) << res.description();
  const std::string readable = "ctl\\x01 esc\\x1b[31mred ff\\xff\\xfe trunc\\xe2\\x82 end ]]> <&>\"' nul\\x00x tab\tok";
  auto fail = find_case(doc, "cuda_flash/bf16_b1_fail").child("failure");
  const std::string fmsg = fail.attribute("message").value();
  EXPECT_EQ(fmsg.rfind(readable, 0), 0u) << fmsg;
  EXPECT_NE(std::string(fail.text().get()).find(readable), std::string::npos);
  EXPECT_EQ(std::string(find_case(doc, "cuda_flash/e4m3_skip").child("skipped").attribute("message").value()),
            readable);
  EXPECT_STREQ(doc.child("testsuites").attribute("name").value(), "suite\\x02name");

  // Reading back gives the readable form, not an exception.
  const auto back = by_id(read_junit(path));
  EXPECT_EQ(back.at("sdpa.cuda_flash/bf16_b1_error").message, readable);
  EXPECT_EQ(back.at("sdpa.cuda_flash/bf16_b1_pass").repro, "opcts repro ']]>\\x07'");

  if (std::system("command -v xmllint >/dev/null 2>&1") == 0) {
    const std::string cmd = "xmllint --noout '" + path + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

TEST(Junit, SanitizeKeepsValidUtf8AndEscapesTheRest) {
  EXPECT_EQ(sanitize_xml_text("plain\t\r\n"), "plain\t\r\n");
  EXPECT_EQ(sanitize_xml_text("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(sanitize_xml_text("\x01\x1f\x7f"), "\\x01\\x1f\x7f");
  EXPECT_EQ(sanitize_xml_text("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(sanitize_xml_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(sanitize_xml_text("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
  EXPECT_EQ(sanitize_xml_text("a\xe2\x82"), "a\\xe2\\x82");                  // truncated at the end
  EXPECT_EQ(sanitize_xml_text("\xe2\x82z"), "\\xe2\\x82z");                  // truncated mid-text
  EXPECT_EQ(sanitize_xml_text("\xef\xbf\xbe"), "\\u{fffe}");
  EXPECT_EQ(sanitize_xml_text("]]>"), "]]>");
}

TEST(Junit, LeavesNoTemporaryFileAndReplacesAnOldOne) {
  const auto dir = test_dir();
  const auto path = dir / "sub" / "r.xml";
  write_junit(every_outcome(), path.string(), "s", JunitDetail::all);
  write_junit({every_outcome()[0]}, path.string(), "s", JunitDetail::all);
  EXPECT_EQ(read_junit(path.string()).size(), 1u);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir / "sub")) {
    ++files;
    EXPECT_EQ(e.path().filename(), "r.xml");
  }
  EXPECT_EQ(files, 1u);
}

TEST(Junit, WriteFailureThrows) {
  const auto dir = test_dir();
  std::ofstream(dir / "file") << "x";
  EXPECT_THROW(write_junit(every_outcome(), (dir / "file" / "r.xml").string(), "s", JunitDetail::all),
               std::runtime_error);
}

void expect_read_error(const std::string& path, const std::string& needle) {
  try {
    read_junit(path);
    ADD_FAILURE() << "no exception for " << path;
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains_all(what, {path, needle}));
  }
}

TEST(Junit, ReadErrorsNameTheFileAndTheProblem) {
  const auto dir = test_dir();
  expect_read_error((dir / "missing.xml").string(), "");
  std::ofstream(dir / "bad.xml") << "<testsuites><testsuite>";
  expect_read_error((dir / "bad.xml").string(), "not valid XML");
  std::ofstream(dir / "root.xml") << "<results/>";
  expect_read_error((dir / "root.xml").string(), "<testsuites>");
  std::ofstream(dir / "noprops.xml")
      << "<testsuites><testsuite name='sdpa'><testcase classname='c' name='n'/></testsuite></testsuites>";
  expect_read_error((dir / "noprops.xml").string(), "properties");
  std::ofstream(dir / "noid.xml")
      << "<testsuites><testsuite name='sdpa'><testcase classname='c' name='n'><properties>"
         "<property name='outcome' value='PASS'/></properties></testcase></testsuite></testsuites>";
  expect_read_error((dir / "noid.xml").string(), "'id'");
  std::ofstream(dir / "badnum.xml")
      << "<testsuites><testsuite name='sdpa'><testcase classname='c' name='n'><properties>"
         "<property name='id' value='sdpa.x/y'/><property name='outcome' value='PASS'/>"
         "<property name='ms' value='fast'/></properties></testcase></testsuite></testsuites>";
  expect_read_error((dir / "badnum.xml").string(), "ms");
  std::ofstream(dir / "mismatch.xml")
      << "<testsuites><testsuite name='sdpa'><testcase classname='c' name='n'><properties>"
         "<property name='id' value='sdpa.x/y'/><property name='outcome' value='FAIL'/>"
         "</properties><skipped message='m'/></testcase></testsuite></testsuites>";
  expect_read_error((dir / "mismatch.xml").string(), "outcome FAIL");
}

TEST(Merge, LoadsXmlJsonlAndDirectoriesSortedById) {
  const auto dir = test_dir();
  auto records = every_outcome();
  std::vector<ResultRecord> first(records.begin(), records.begin() + 4);
  std::vector<ResultRecord> second(records.begin() + 4, records.end());
  fs::create_directories(dir / "shards" / "a");
  write_junit(first, (dir / "shards" / "a" / "shard1.xml").string(), "s", JunitDetail::all);
  write_junit({records[7]}, (dir / "shards" / "shard_dup.xml").string(), "s", JunitDetail::all);  // identical duplicate
  {
    std::ofstream out(dir / "rest.jsonl");
    for (const auto& r : second) out << to_json_line(r) << "\n";
  }
  const auto merged = load_reports({(dir / "rest.jsonl").string(), (dir / "shards").string()});
  ASSERT_EQ(merged.size(), records.size());
  for (std::size_t i = 1; i < merged.size(); ++i) EXPECT_LT(merged[i - 1].id, merged[i].id);
  const auto m = by_id(merged);
  for (const auto& r : records) EXPECT_TRUE(same_record(r, m.at(r.id))) << r.id;
}

TEST(Merge, SameIdOnAnotherArchIsAnotherCase) {
  const auto dir = test_dir();
  auto a = make("sdpa", "x", Outcome::PASS, "sm90");
  auto b = make("sdpa", "x", Outcome::FAIL, "sm89");
  write_junit({a}, (dir / "a.xml").string(), "s", JunitDetail::all);
  write_junit({b}, (dir / "b.xml").string(), "s", JunitDetail::all);
  const auto merged = load_reports({(dir / "a.xml").string(), (dir / "b.xml").string()});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].arch, "sm89");
  EXPECT_EQ(merged[1].arch, "sm90");
}

TEST(Merge, ConflictNamesBothFiles) {
  const auto dir = test_dir();
  auto a = make("sdpa", "x", Outcome::PASS);
  auto b = a;
  b.outcome = b.raw_outcome = Outcome::FAIL;
  const auto pa = (dir / "a.xml").string(), pb = (dir / "b.jsonl").string();
  write_junit({a}, pa, "s", JunitDetail::all);
  std::ofstream(pb) << to_json_line(b) << "\n";
  try {
    load_reports({pa, pb});
    ADD_FAILURE() << "no conflict reported";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains_all(what, {pa, pb, "sdpa.cuda_flash/x"}));
  }
}

TEST(Merge, SameOutcomeWithOtherTimingsMergesOnce) {
  const auto dir = test_dir();
  auto a = make("sdpa", "x", Outcome::PASS);
  auto b = a;
  b.ms = a.ms + 17;  // a retried shard: same case, same outcome, another timing
  write_junit({a}, (dir / "a.xml").string(), "s", JunitDetail::all);
  std::ofstream(dir / "b.jsonl") << to_json_line(b) << "\n";
  const auto merged = load_reports({(dir / "a.xml").string(), (dir / "b.jsonl").string()});
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].ms, a.ms);
}

TEST(Merge, RejectsUnknownFilesAndMissingPaths) {
  const auto dir = test_dir();
  std::ofstream(dir / "notes.txt") << "x";
  EXPECT_THROW(load_reports({(dir / "notes.txt").string()}), std::runtime_error);
  EXPECT_THROW(load_reports({(dir / "nope.xml").string()}), std::runtime_error);
  EXPECT_TRUE(load_reports({}).empty());
}

}  // namespace
}  // namespace opcts
