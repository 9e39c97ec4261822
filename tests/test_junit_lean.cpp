// Lean JUnit (the default): bytes per passing testcase, what each outcome keeps, the Ant schema,
// and --junit-properties all keeping every field.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <pugixml.hpp>

#include "reports/junit.hpp"
#include "reports/merge.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using testutil::contains_all;

// A record as a real run writes it: an sdpa forward's O and lse statistics, a seed, a repro.
ResultRecord realistic(const std::string& id, Outcome o) {
  ResultRecord r;
  r.id = id;
  r.family = id.substr(0, id.find('.'));
  const std::string token = id.substr(id.find('.') + 1, id.find('/') - id.find('.') - 1);
  r.impl = token.substr(0, token.find('_')) + "." + token.substr(token.find('_') + 1);
  r.arch = "sm90";
  r.device = 3;
  r.outcome = r.raw_outcome = o;
  r.seed = "0x08a70bb349b7632b";
  r.ms = 12345.678901;
  r.tier = "default";
  r.repro = "opcts repro '" + id + "' --arch sm90";
  for (const char* out : {"O", "lse", "dQ"}) {
    OutputStats o;
    o.out = out;
    o.metric = "ref_relative";
    o.elements = 134217728;
    o.max_abs_err = 0.0078125;
    o.max_rel_err = 0.03125;
    o.bound = 0.015625;
    o.lowp_err = 0.00390625;
    o.max_ratio = 0.4999;
    r.outputs.push_back(o);
  }
  if (o != Outcome::PASS) {
    r.message = "O: 3 of 134217728 elements beyond the bound (max_abs_err 0.5, bound 0.0156)";
    r.worst.push_back({"O", {0, 31, 4095, 127}, 0.5, 0.0});
    r.worst.push_back({"O", {0, 30, 4095, 127}, 0.25, 0.0});
  }
  return r;
}

// The longest pinned case id of each family (tests/data/case_ids/cuda/<family>.txt: literal ids,
// or "impl NAME" lines with problem lines, every impl with every problem), the worst case for size.
std::vector<std::string> longest_ids() {
  std::map<std::string, std::string> longest;
  for (const auto& f :
       std::filesystem::directory_iterator(std::string(OPCTS_SOURCE_DIR) + "/tests/data/case_ids/cuda")) {
    if (f.path().extension() != ".txt") continue;
    std::ifstream in(f.path());
    std::string impl, problem;  // the longest of each
    auto keep = [&](const std::string& id) {
      std::string& l = longest[id.substr(0, id.find('.'))];
      if (id.size() > l.size()) l = id;
    };
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      if (line.rfind("impl ", 0) == 0) {
        if (line.size() - 5 > impl.size()) impl = line.substr(5);
      } else if (line.find('/') != std::string::npos) {
        keep(line);
      } else if (line.size() > problem.size()) {
        problem = line;
      }
    }
    if (!impl.empty() && !problem.empty()) keep(impl + "/" + problem);
  }
  std::vector<std::string> out;
  for (const auto& [family, id] : longest) out.push_back(id);
  return out;
}

size_t testcase_bytes(const std::string& xml) {
  const size_t from = xml.find("<testcase ");
  const size_t to = xml.find("</testcase>", from);
  return to == std::string::npos ? std::string::npos : to + std::string("</testcase>").size() - from;
}

// A passing case is its id, impl, tier and time: ≤ 800 bytes even for the longest id, where
// every property of the record was ~2.9 KB (115 MB for an sm90 default tier).
TEST(JunitLean, APassingTestcaseIsAtMost800Bytes) {
  const auto ids = longest_ids();
  ASSERT_GE(ids.size(), 8u);
  size_t worst = 0, all_worst = 0;
  for (const auto& id : ids) {
    const ResultRecord r = realistic(id, Outcome::PASS);
    const size_t lean = testcase_bytes(junit_xml({r}, "s"));
    const size_t all = testcase_bytes(junit_xml({r}, "s", JunitDetail::all));
    EXPECT_LE(lean, 800u) << id;
    EXPECT_GT(all, 2 * lean) << id;  // the measure measures something: `all` keeps every field
    worst = std::max(worst, lean);
    all_worst = std::max(all_worst, all);
  }
  RecordProperty("lean_bytes_longest_id", static_cast<int>(worst));
  RecordProperty("all_bytes_longest_id", static_cast<int>(all_worst));
  std::printf("passing testcase, longest id: lean %zu bytes, all %zu bytes\n", worst, all_worst);
}

// What each outcome keeps in lean form, read back: identity, outcomes, time, tier; for failures
// the message, expectation, worst elements and repro; per-output statistics only under `all`.
TEST(JunitLean, EveryOutcomeReadsBackWithItsVerdict) {
  const std::string dir = testutil::temp_dir();
  std::vector<ResultRecord> rs;
  int k = 0;
  for (Outcome o : {Outcome::PASS, Outcome::FAIL, Outcome::ERROR, Outcome::CRASH, Outcome::TIMEOUT, Outcome::SKIP,
                    Outcome::XFAIL, Outcome::XPASS, Outcome::FLAKE, Outcome::MISTRUSTED, Outcome::MISSING}) {
    ResultRecord r = realistic("sdpa.cuda_flash/bf16_case" + std::to_string(k++), o);
    r.raw_outcome = o == Outcome::XFAIL ? Outcome::FAIL : o == Outcome::XPASS ? Outcome::PASS : o;
    if (o == Outcome::XFAIL) r.expectation = "xfail sm90.yaml:40: known";
    rs.push_back(r);
  }
  const std::string path = testutil::write(dir, "lean.xml", junit_xml(rs, "opcts.sm90"));
  const auto back = read_junit(path);
  ASSERT_EQ(back.size(), rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    const ResultRecord &a = rs[i], &b = back[i];
    SCOPED_TRACE(a.id);
    EXPECT_EQ(b.id, a.id);
    EXPECT_EQ(b.impl, a.impl);
    EXPECT_EQ(b.arch, a.arch);
    EXPECT_EQ(b.tier, a.tier);
    EXPECT_EQ(b.outcome, a.outcome);
    EXPECT_EQ(b.raw_outcome, a.raw_outcome);
    EXPECT_NEAR(b.ms, a.ms, 1e-3);
    EXPECT_TRUE(b.outputs.empty());
    if (a.outcome == Outcome::PASS) {
      EXPECT_TRUE(b.repro.empty());
      continue;
    }
    EXPECT_EQ(b.message, a.message);
    EXPECT_EQ(b.expectation, a.expectation);
    EXPECT_EQ(b.repro, a.repro);
    ASSERT_EQ(b.worst.size(), a.worst.size());
    EXPECT_EQ(b.worst[0].index, a.worst[0].index);
  }
  // Merged with the shard's .jsonl (read first: 'j' < 'x'), the full record is kept.
  testutil::write(dir, "lean.jsonl", [&] {
    std::string t;
    for (const auto& r : rs) t += to_json_line(r) + "\n";
    return t;
  }());
  const auto merged = load_reports({dir});
  ASSERT_EQ(merged.size(), rs.size());
  EXPECT_EQ(merged[0].outputs.size(), 3u);
}

// The failure's message and details stay in the <failure> element, ahead of nothing else.
TEST(JunitLean, AFailureCarriesMessageReproAndWorstElements) {
  const ResultRecord r = realistic("sdpa.cuda_flash/bf16_x", Outcome::FAIL);
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_string(junit_xml({r}, "s").c_str()));
  const auto tc = doc.child("testsuites").child("testsuite").child("testcase");
  std::map<std::string, std::string> props;
  for (auto p : tc.child("properties").children("property"))
    props[p.attribute("name").value()] = p.attribute("value").value();
  EXPECT_EQ(props.at("repro"), r.repro);
  EXPECT_EQ(props.at("first_mismatch.index"), "0,31,4095,127");
  EXPECT_EQ(props.count("out.O.bound"), 0u);
  EXPECT_EQ(props.count("seed"), 0u);
  const std::string body = tc.child("failure").text().get();
  EXPECT_TRUE(contains_all(body, {r.message, "O[0,31,4095,127]: got 0.5, want 0", "repro: " + r.repro}));
}

int xmllint(const std::string& xml) {
  const std::string cmd = "xmllint --noout --schema '" + std::string(OPCTS_SOURCE_DIR) +
                          "/tests/data/junit_ant.xsd' '" + xml + "' >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(JunitLean, BothFormsValidateAgainstTheAntSchema) {
  if (std::system("command -v xmllint >/dev/null 2>&1") != 0) GTEST_SKIP() << "xmllint not found (libxml2-utils)";
  const std::string dir = testutil::temp_dir();
  std::vector<ResultRecord> rs;
  for (Outcome o : {Outcome::PASS, Outcome::FAIL, Outcome::ERROR, Outcome::SKIP, Outcome::XFAIL, Outcome::MISSING})
    rs.push_back(realistic("sdpa.cuda_flash/bf16_" + std::string(to_string(o)), o));
  EXPECT_EQ(xmllint(testutil::write(dir, "lean.xml", junit_xml(rs, "s"))), 0);
  EXPECT_EQ(xmllint(testutil::write(dir, "all.xml", junit_xml(rs, "s", JunitDetail::all))), 0);
}

TEST(JunitLean, TheOptionIsLeanOrAll) {
  EXPECT_EQ(parse_junit_detail("lean"), JunitDetail::lean);
  EXPECT_EQ(parse_junit_detail("all"), JunitDetail::all);
  try {
    parse_junit_detail("some");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--junit-properties must be lean or all"), std::string::npos);
  }
}

}  // namespace
}  // namespace opcts
