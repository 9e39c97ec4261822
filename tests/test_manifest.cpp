// Manifest: parsing of skip/xfail/flaky/tolerance entries, errors with file:line, extends, stale, apply_expectation.
#include <gtest/gtest.h>

#include "tests/test_util.hpp"

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runner/manifest.hpp"
#include "core/yaml_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::temp_dir;
using testutil::write;
using testutil::cases_dir;

// The message of the YamlError that loading `path` throws, or "" when it loads.
std::string load_error(const std::string& path) {
  return testutil::yaml_error_of([&] { Manifest::load(path); });
}

const char* kFull =
    "arch: sm90\n"                                    // 1
    "description: test manifest\n"                    // 2
    "skip:\n"                                         // 3
    "  - match: \"sdpa.*/fp32_*\"\n"                  // 4
    "    reason: no fp32 path\n"                      // 5
    "    link: https://example.invalid/1\n"           // 6
    "xfail:\n"                                        // 7
    "  - match: \"sdpa.cuda_flash/*_d256_*\"\n"       // 8
    "    reason: head dim 256 overflows smem\n"       // 9
    "    expect: ERROR\n"                             // 10
    "  - match: \"sdpa.cuda_math/*\"\n"               // 11
    "    reason: known rounding issue\n"              // 12
    "    strict: false\n"                             // 13
    "    expect: FAIL\n"                              // 14
    "    message: \"O: .* mismatches\"\n"             // 15
    "flaky:\n"                                        // 16
    "  - match: \"sdpa.*_b8_*\"\n"                    // 17
    "    reason: races on the split-k path\n"         // 18
    "    reruns: 3\n"                                 // 19
    "tolerance:\n"                                    // 20
    "  - match: \"sdpa.cuda_flash/bf16_*\"\n"         // 21
    "    reason: another summation order\n"           // 22
    "    output: O\n"                                 // 23
    "    factor: 4\n";                                // 24

TEST(ManifestLoad, ParsesEveryEntryKind) {
  const std::string dir = temp_dir();
  const std::string path = write(dir, "sm90.yaml", kFull);
  const Manifest m = Manifest::load(path);
  EXPECT_EQ(m.arch(), "sm90");
  EXPECT_EQ(m.path(), path);
  ASSERT_EQ(m.entries().size(), 5u);

  const ManifestEntry* skip = m.find(EntryKind::skip, "sdpa.cuda_flash/fp32_b1_hq1_hkv1_sq1_sk1_d64_nomask");
  ASSERT_NE(skip, nullptr);
  EXPECT_EQ(skip->reason, "no fp32 path");
  EXPECT_EQ(skip->link, "https://example.invalid/1");
  EXPECT_EQ(skip->source, path + ":4");
  EXPECT_EQ(m.find(EntryKind::skip, "sdpa.cuda_flash/bf16_b1_hq1_hkv1_sq1_sk1_d64_nomask"), nullptr);

  const ManifestEntry* strict = m.find(EntryKind::xfail, "sdpa.cuda_flash/bf16_b1_hq1_hkv1_sq1_sk1_d256_nomask");
  ASSERT_NE(strict, nullptr);
  EXPECT_TRUE(strict->strict);  // the default
  const ManifestEntry* loose = m.find(EntryKind::xfail, "sdpa.cuda_math/bf16_b1_hq1_hkv1_sq1_sk1_d64_nomask");
  ASSERT_NE(loose, nullptr);
  EXPECT_FALSE(loose->strict);
  EXPECT_EQ(loose->source, path + ":11");
  EXPECT_EQ(loose->expect, Outcome::FAIL);
  EXPECT_EQ(loose->message, "O: .* mismatches");

  const ManifestEntry* flaky = m.find(EntryKind::flaky, "sdpa.host_flash/bf16_b8_hq1");
  ASSERT_NE(flaky, nullptr);
  EXPECT_EQ(flaky->reruns, 3);

  const std::string id = "sdpa.cuda_flash/bf16_b1_hq1_hkv1_sq1_sk1_d64_nomask";
  const ManifestEntry* tol = m.find(EntryKind::tolerance, id, "O");
  ASSERT_NE(tol, nullptr);
  EXPECT_EQ(tol->output, "O");
  ASSERT_TRUE(tol->factor.has_value());
  EXPECT_EQ(*tol->factor, 4.0);
  EXPECT_FALSE(tol->atol.has_value());
  EXPECT_FALSE(tol->rtol.has_value());
  EXPECT_FALSE(tol->atol_eps.has_value());
  EXPECT_EQ(m.find(EntryKind::tolerance, id, "lse"), nullptr);  // the entry names output O only
  EXPECT_EQ(m.find(EntryKind::xfail, id), nullptr);                // kinds do not mix
}

TEST(ManifestLoad, EmptyFileIsAnErrorAndEmptyManifestIsNot) {
  const std::string dir = temp_dir();
  // An empty file is a mistake (a truncated copy, a wrong path); a manifest with no entries
  // says its arch and nothing else.
  const std::string e = write(dir, "e.yaml", "");
  EXPECT_EQ(load_error(e).rfind(e + ":1:1: empty file", 0), 0u) << load_error(e);
  EXPECT_TRUE(Manifest::load(write(dir, "a.yaml", "arch: host\n")).entries().empty());
  const Manifest m = Manifest::empty("host");
  EXPECT_EQ(m.arch(), "host");
  EXPECT_TRUE(m.entries().empty());
  EXPECT_EQ(m.find(EntryKind::skip, "anything"), nullptr);
}

TEST(ManifestErrors, MissingReasonNamesFileAndLine) {
  const std::string dir = temp_dir();
  const std::string path = write(dir, "m.yaml",
                                 "arch: sm90\n"
                                 "xfail:\n"
                                 "  - match: \"a*\"\n"
                                 "    reason: fine\n"
                                 "    expect: FAIL\n"
                                 "  - match: \"b*\"\n"
                                 "    strict: true\n");
  const std::string err = load_error(path);
  EXPECT_NE(err.find(path + ":6:"), std::string::npos) << err;
  EXPECT_NE(err.find("reason"), std::string::npos) << err;
  // An empty reason is as bad as none.
  const std::string p2 = write(dir, "m2.yaml", "skip:\n  - match: x\n    reason: \"\"\n");
  EXPECT_NE(load_error(p2).find(p2 + ":2:"), std::string::npos) << load_error(p2);
}

TEST(ManifestErrors, UnknownKeyNamesKeyAndLine) {
  const std::string dir = temp_dir();
  const std::string path = write(dir, "m.yaml",
                                 "arch: sm90\n"
                                 "skip:\n"
                                 "  - match: \"a*\"\n"
                                 "    reason: r\n"
                                 "    reruns: 2\n");  // reruns belongs to flaky entries
  const std::string err = load_error(path);
  EXPECT_NE(err.find(path + ":5:"), std::string::npos) << err;
  EXPECT_NE(err.find("'reruns'"), std::string::npos) << err;
  const std::string top = write(dir, "t.yaml", "arch: sm90\nxfails: []\n");
  EXPECT_NE(load_error(top).find(top + ":2:"), std::string::npos) << load_error(top);
}

TEST(ManifestErrors, MissingMatchAndEmptyToleranceEntry) {
  const std::string dir = temp_dir();
  const std::string a = write(dir, "a.yaml", "skip:\n  - reason: r\n");
  EXPECT_NE(load_error(a).find(a + ":2:"), std::string::npos) << load_error(a);
  const std::string b = write(dir, "b.yaml", "tolerance:\n  - match: x\n    reason: r\n    output: O\n");
  EXPECT_NE(load_error(b).find(b + ":2:"), std::string::npos) << load_error(b);
}

TEST(ManifestExtends, LoadsParentFromTheSameFolderAndChildWins) {
  const std::string dir = temp_dir();
  write(dir, "common.yaml",
        "arch: common\n"
        "xfail:\n"
        "  - match: \"sdpa.*\"\n"
        "    reason: parent says strict\n"
        "    expect: FAIL\n"
        "skip:\n"
        "  - match: \"sdpa.*/fp32_*\"\n"
        "    reason: parent skip\n");
  const std::string child = write(dir, "sm90.yaml",
                                  "arch: sm90\n"
                                  "extends: [common]\n"
                                  "xfail:\n"
                                  "  - match: \"sdpa.cuda_math/*\"\n"
                                  "    reason: child says non-strict\n"
                                  "    expect: FAIL\n"
                                  "    strict: false\n");
  const Manifest m = Manifest::load(child);
  EXPECT_EQ(m.arch(), "sm90");  // the parent's arch does not override
  ASSERT_EQ(m.entries().size(), 3u);
  const ManifestEntry* x = m.find(EntryKind::xfail, "sdpa.cuda_math/bf16_x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->reason, "child says non-strict");
  EXPECT_FALSE(x->strict);
  const ManifestEntry* p = m.find(EntryKind::xfail, "sdpa.cuda_flash/bf16_x");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->reason, "parent says strict");
  EXPECT_NE(p->source.find("common.yaml:3"), std::string::npos) << p->source;
  ASSERT_NE(m.find(EntryKind::skip, "sdpa.cuda_flash/fp32_x"), nullptr);
}

TEST(ManifestExtends, MissingParentAndCyclesError) {
  const std::string dir = temp_dir();
  const std::string lone = write(dir, "lone.yaml", "extends: [nothere]\n");
  EXPECT_NE(load_error(lone).find("nothere"), std::string::npos) << load_error(lone);
  EXPECT_NE(load_error(lone).find(lone + ":1:"), std::string::npos) << load_error(lone);

  write(dir, "a.yaml", "extends: [b]\n");
  write(dir, "b.yaml", "extends: [c]\n");
  write(dir, "c.yaml", "extends: [a]\n");
  EXPECT_NE(load_error((fs::path(dir) / "a.yaml").string()).find("cycle"), std::string::npos);
  const std::string self = write(dir, "self.yaml", "extends: [self]\n");
  EXPECT_NE(load_error(self).find("cycle"), std::string::npos) << load_error(self);
}

// A team's manifest anywhere extends another by a path relative to its own folder (or an
// absolute one): the built-in sm90 manifest from a folder outside cases/, a sibling file with
// its .yaml, a relative path into a subfolder. A bare name keeps meaning <name>.yaml beside it.
TEST(ManifestExtends, ByPathRelativeToTheFile) {
  const std::string dir = temp_dir();
  fs::create_directories(fs::path(dir) / "team" / "common");
  write(dir + "/team/common", "base.yaml", "skip:\n  - match: 'from_base'\n    reason: b\n");
  write(dir + "/team", "sib.yaml", "skip:\n  - match: 'from_sib'\n    reason: s\n");
  const std::string builtin = fs::relative(cases_dir() / "manifests" / "sm90.yaml", fs::path(dir) / "team").string();
  const std::string mine = write(dir + "/team", "mine.yaml",
                                 "arch: sm90\nextends: [" + builtin + ", sib.yaml, common/base.yaml]\n"
                                 "skip:\n  - match: 'from_mine'\n    reason: m\n");
  const Manifest m = Manifest::load(mine);
  const Manifest sm90 = Manifest::load((cases_dir() / "manifests" / "sm90.yaml").string());
  ASSERT_EQ(m.entries().size(), sm90.entries().size() + 3) << load_error(mine);
  EXPECT_EQ(m.entries().front().match, "from_mine");  // the file's own entries first
  EXPECT_NE(m.find(EntryKind::skip, "from_sib"), nullptr);
  EXPECT_NE(m.find(EntryKind::skip, "from_base"), nullptr);
  const std::string abs = write(dir, "abs.yaml", "extends: [" + (fs::path(dir) / "team" / "sib.yaml").string() + "]\n");
  EXPECT_NE(Manifest::load(abs).find(EntryKind::skip, "from_sib"), nullptr);
  const std::string missing = write(dir, "missing.yaml", "extends: [team/nothere.yaml]\n");
  EXPECT_NE(load_error(missing).find(missing + ":1:11: extends 'team/nothere.yaml': no file " + dir + "/team/nothere.yaml"),
            std::string::npos)
      << load_error(missing);
}

TEST(ManifestExtends, SharedAncestorLoadsOnce) {
  // a extends b and c; b extends c: a diamond, not a cycle, and c's entries appear once.
  const std::string d = temp_dir();
  write(d, "c.yaml", "skip:\n  - match: 'from_c'\n    reason: c\n");
  write(d, "b.yaml", "extends: [c]\nskip:\n  - match: 'from_b'\n    reason: b\n");
  const std::string a = write(d, "a.yaml", "arch: sm90\nextends: [b, c]\n");
  EXPECT_EQ(load_error(a), "");
  const Manifest m = Manifest::load(a);
  ASSERT_EQ(m.entries().size(), 2u);
  EXPECT_EQ(m.stale({"x"}).size(), 2u);
}

TEST(ManifestStale, ReportsEntriesMatchingNoId) {
  const std::string dir = temp_dir();
  const Manifest m = Manifest::load(write(dir, "sm90.yaml", kFull));
  const std::vector<std::string> ids = {
      "sdpa.cuda_flash/fp32_b1_hq1_hkv1_sq1_sk1_d64_nomask",   // the skip entry
      "sdpa.cuda_math/bf16_b1_hq1_hkv1_sq1_sk1_d64_nomask",    // the non-strict xfail
      "sdpa.cuda_flash/bf16_b1_hq1_hkv1_sq1_sk1_d64_nomask"};  // the tolerance entry
  const auto stale = m.stale(ids);
  ASSERT_EQ(stale.size(), 2u);  // the d256 xfail and the b8 flaky entry
  EXPECT_EQ(stale[0]->match, "sdpa.cuda_flash/*_d256_*");
  EXPECT_EQ(stale[1]->match, "sdpa.*_b8_*");
  EXPECT_EQ(m.stale({}).size(), m.entries().size());
}

TEST(ManifestErrors, AnXfailNamesTheFailureItExpects) {
  const std::string dir = temp_dir();
  const std::string none = write(dir, "n.yaml", "xfail:\n  - match: x\n    reason: r\n");
  EXPECT_NE(load_error(none).find(none + ":2:5: xfail entry 'x' needs 'expect:'"), std::string::npos) << load_error(none);
  const std::string pass = write(dir, "p.yaml", "xfail:\n  - match: x\n    reason: r\n    expect: PASS\n");
  EXPECT_NE(load_error(pass).find(pass + ":4:13: 'expect' must be FAIL, ERROR, CRASH or TIMEOUT"), std::string::npos)
      << load_error(pass);
  const std::string re = write(dir, "r.yaml", "xfail:\n  - match: x\n    reason: r\n    expect: ERROR\n    message: \"(\"\n");
  EXPECT_NE(load_error(re).find(re + ":5:14: 'message' is not a valid regular expression"), std::string::npos)
      << load_error(re);
  // 100,000 nested groups: std::regex recursed through them and overflowed the stack; RE2
  // parses and matches without recursion, so the pattern loads and matches, with no length cap.
  const std::string deep = write(dir, "d.yaml", "xfail:\n  - match: x\n    reason: r\n    expect: ERROR\n    message: \"" +
                                                    std::string(100000, '(') + "a" + std::string(100000, ')') + "\"\n");
  ASSERT_EQ(load_error(deep), "");
  const Manifest m = Manifest::load(deep);
  const ManifestEntry& e = m.entries().at(0);
  EXPECT_EQ(apply_expectation(Outcome::ERROR, "xyz a", &e), Outcome::XFAIL);
  EXPECT_EQ(apply_expectation(Outcome::ERROR, "xyz b", &e), Outcome::ERROR);
  const std::string long_ok = write(dir, "l.yaml", "xfail:\n  - match: x\n    reason: r\n    expect: ERROR\n    message: \"" +
                                                       std::string(5000, 'a') + "\"\n");
  EXPECT_EQ(Manifest::load(long_ok).entries().at(0).message.size(), 5000u);
}

// The typed table: an entry expects one failure (and, when it says so, a message); any other
// failure stands (so the gate sees what changed), PASS is XPASS or PASS by strictness.
TEST(ManifestExpectation, FullTable) {
  ManifestEntry fail{.kind = EntryKind::xfail, .match = "*", .reason = "r", .source = "m.yaml:3"};
  ManifestEntry loose = fail;
  loose.strict = false;
  ManifestEntry refused = fail;
  refused.expect = Outcome::ERROR;
  refused.message = "status 1[57]";
  struct Row {
    Outcome raw;
    const char* message;
    Outcome none, under_fail, under_loose, under_refused;
  };
  const Row rows[] = {
      {Outcome::PASS, "", Outcome::PASS, Outcome::XPASS, Outcome::PASS, Outcome::XPASS},
      {Outcome::FAIL, "O: 3 mismatches", Outcome::FAIL, Outcome::XFAIL, Outcome::XFAIL, Outcome::FAIL},
      {Outcome::ERROR, "cuBLASLt status 15", Outcome::ERROR, Outcome::ERROR, Outcome::ERROR, Outcome::XFAIL},
      {Outcome::ERROR, "cuBLASLt status 7", Outcome::ERROR, Outcome::ERROR, Outcome::ERROR, Outcome::ERROR},
      {Outcome::CRASH, "signal 11", Outcome::CRASH, Outcome::CRASH, Outcome::CRASH, Outcome::CRASH},
      {Outcome::TIMEOUT, "", Outcome::TIMEOUT, Outcome::TIMEOUT, Outcome::TIMEOUT, Outcome::TIMEOUT},
      {Outcome::SKIP, "", Outcome::SKIP, Outcome::SKIP, Outcome::SKIP, Outcome::SKIP},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(to_string(r.raw)) + " " + r.message);
    EXPECT_EQ(apply_expectation(r.raw, r.message, nullptr), r.none);
    EXPECT_EQ(apply_expectation(r.raw, r.message, &fail), r.under_fail);
    EXPECT_EQ(apply_expectation(r.raw, r.message, &loose), r.under_loose);
    EXPECT_EQ(apply_expectation(r.raw, r.message, &refused), r.under_refused);
  }
  EXPECT_EQ(unmet_expectation(Outcome::CRASH, "", refused), "xfail m.yaml:3 expects ERROR matching 'status 1[57]', got CRASH");
  EXPECT_EQ(unmet_expectation(Outcome::ERROR, "status 15", refused), "");
}

// A megabyte-long impl message under a pattern that consumes all it can: RE2 matches the whole
// text in linear time without recursion (std::regex recursed once per character and crashed
// at ~100,000 here, so only a 4,096-character head was matched), so `$`, `\b` and `\B` see
// the message's real end.
TEST(Manifest, ALongMessageIsMatchedWholeWithoutOverflowingTheStack) {
  ManifestEntry e{.kind = EntryKind::xfail, .match = "*", .reason = "r", .source = "m.yaml:3"};
  e.expect = Outcome::ERROR;
  e.message = "^x.*status 15";
  const std::string head = "x status 15 " + std::string(4096, '.');
  EXPECT_EQ(apply_expectation(Outcome::ERROR, head + std::string(1 << 20, 'y'), &e), Outcome::XFAIL);
  e.message = "^x.*tail$";
  EXPECT_EQ(apply_expectation(Outcome::ERROR, head + std::string(1 << 20, 'y') + "tail", &e), Outcome::XFAIL);
  EXPECT_EQ(apply_expectation(Outcome::ERROR, head + std::string(1 << 20, 'y') + "tail!", &e), Outcome::ERROR);
  const std::string long_prefix = std::string(1 << 20, '.') + "status 15";
  const std::array<std::array<const char*, 3>, 3> rows{{
      {"status 15$", "", "0 more"}, {"status 15\\b", " y", "0 more"}, {"status 15\\B", "0", " more"}}};
  for (const auto& [pattern, match_next, miss_next] : rows) {
    e.message = pattern;
    EXPECT_EQ(apply_expectation(Outcome::ERROR, long_prefix + match_next, &e), Outcome::XFAIL) << pattern;
    EXPECT_EQ(apply_expectation(Outcome::ERROR, long_prefix + miss_next, &e), Outcome::ERROR) << pattern;
  }
}

}  // namespace
}  // namespace opcts
