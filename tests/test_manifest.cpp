// Manifest: parsing of skip/xfail/flaky/tolerance entries (typed FAIL entries too), errors with file:line, extends,
// stale, apply_expectation.
#include <gtest/gtest.h>

#include "tests/test_util.hpp"

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/yaml_util.hpp"
#include "judge/manifest.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::cases_dir;
using testutil::contains_all;
using testutil::points_at;
using testutil::temp_dir;
using testutil::write;

// The message of the YamlError that loading `path` throws, or "" when it loads.
std::string load_error(const std::string& path) {
  return testutil::yaml_error_of([&] { Manifest::load(path); });
}

const char* kFull =
    "arch: sm90\n"                                                   // 1
    "description: test manifest\n"                                   // 2
    "skip:\n"                                                        // 3
    "  - match: \"sdpa.*/fp32_*\"\n"                                 // 4
    "    reason: no fp32 path\n"                                     // 5
    "    tracking: https://example.invalid/1\n"                      // 6
    "xfail:\n"                                                       // 7
    "  - match: \"sdpa.cuda_flash/*_d256_*\"\n"                      // 8
    "    reason: head dim 256 overflows smem\n"                      // 9
    "    expect: ERROR\n"                                            // 10
    "  - match: \"sdpa.cuda_math/*\"\n"                              // 11
    "    reason: known rounding issue\n"                             // 12
    "    strict: false\n"                                            // 13
    "    expect: FAIL\n"                                             // 14
    "    outputs: {O: [exceeds_bound, nonfinite], lse: [biased]}\n"  // 15
    "    case: [wrote_input]\n"                                      // 16
    "    max_ratio: 2.5\n"                                           // 17
    "flaky:\n"                                                       // 18
    "  - match: \"sdpa.*_b8_*\"\n"                                   // 19
    "    reason: races on the split-k path\n"                        // 20
    "    reruns: 3\n"                                                // 21
    "tolerance:\n"                                                   // 22
    "  - match: \"sdpa.cuda_flash/bf16_*\"\n"                        // 23
    "    reason: another summation order\n"                          // 24
    "    output: O\n"                                                // 25
    "    factor: 4\n";                                               // 26

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
  EXPECT_EQ(skip->tracking, "https://example.invalid/1");
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
  EXPECT_EQ(loose->message, "");
  using K = FailureKind;
  const std::vector<std::pair<std::string, std::vector<K>>> outs = {{"O", {K::exceeds_bound, K::nonfinite}},
                                                                    {"lse", {K::biased}}};
  EXPECT_EQ(loose->outputs, outs);
  EXPECT_EQ(loose->case_kinds, std::vector<K>{K::wrote_input});
  EXPECT_EQ(loose->max_ratio, 2.5);
  EXPECT_EQ(expected_failures(*loose), "O: exceeds_bound (ratio <= 2.5), nonfinite; lse: biased; case: wrote_input");

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
  EXPECT_EQ(m.find(EntryKind::xfail, id), nullptr);             // kinds do not mix
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
                                 "    case: [accepted_invalid]\n"
                                 "  - match: \"b*\"\n"
                                 "    strict: true\n");
  const std::string err = load_error(path);
  EXPECT_TRUE(points_at(err, path, 7, "reason"));
  // An empty reason is as bad as none.
  const std::string p2 = write(dir, "m2.yaml", "skip:\n  - match: x\n    reason: \"\"\n");
  EXPECT_TRUE(points_at(load_error(p2), p2, 2));
}

// The findings ledger's `tracking:`: each accepted form loads; a malformed one is a YamlError at
// its file:line:column, saying what forms it takes.
TEST(ManifestTracking, AcceptsUrlsIssueReferencesAndOurPagesAndRefusesOtherText) {
  for (const char* good : {"https://github.com/pytorch/pytorch/issues/131257", "opcts#32", "pytorch/pytorch#131257",
                           "issue 41", "docs/status/sm90.md#h200-runs", "docs/status/sm90.md"})
    EXPECT_TRUE(is_tracking_reference(good)) << good;
  for (const char* bad : {"", "see the H200 runs", "https://", "issue", "issue #41", "opcts#", "#32", "TODO",
                          "docs/../README.md", "docs/status/sm90.md#a b", "ftp://x/y", "pytorch/pytorch#12a"})
    EXPECT_FALSE(is_tracking_reference(bad)) << bad;
  const std::string dir = temp_dir();
  const std::string ok = write(dir, "t.yaml",
                               "arch: sm90\nxfail:\n  - match: \"a*\"\n    reason: r\n    expect: ERROR\n"
                               "    tracking: \"pytorch/pytorch#131257\"\nflaky:\n  - match: \"b*\"\n"
                               "    reason: r\n    tracking: issue 41\n");
  const Manifest m = Manifest::load(ok);
  ASSERT_EQ(m.entries().size(), 2u);
  EXPECT_EQ(m.entries()[0].tracking, "pytorch/pytorch#131257");
  EXPECT_EQ(m.entries()[1].tracking, "issue 41");
  const std::string bad = write(dir, "t2.yaml",
                                "arch: sm90\nxfail:\n  - match: \"a*\"\n    reason: r\n    expect: ERROR\n"
                                "    tracking: see the H200 runs\n");
  const std::string err = load_error(bad);
  EXPECT_TRUE(contains_all(err, {bad + ":6:15: 'tracking' must be a URL", "not 'see the H200 runs'"}));
  // `link:` was its old name: one key, so it is refused.
  const std::string old = write(dir, "t3.yaml", "arch: sm90\nskip:\n  - match: \"a*\"\n    reason: r\n    link: x\n");
  EXPECT_TRUE(points_at(load_error(old), old, 5));
}

// Every shipped manifest's kept failures are in the ledger, their pages of ours resolving —
// sm90_pytorch.yaml too, which no `manifest lint` CTest judges (its entries match plugin rows).
TEST(ManifestTracking, EveryShippedXfailAndFlakyEntryIsTracked) {
  const std::filesystem::path dir = std::filesystem::path(cases_dir()) / "manifests";
  std::size_t tracked = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".yaml") continue;
    const Manifest m = Manifest::load(f.path().string());
    for (const ManifestEntry& e : m.entries()) {
      if (!e.tracking.empty()) EXPECT_EQ(unresolved_tracking(e.tracking, cases_dir().string()), "") << e.source;
      if (!needs_tracking(e)) continue;
      EXPECT_NE(e.tracking, "") << e.source << " " << e.match;
      ++tracked;
    }
  }
  EXPECT_GT(tracked, 100u);  // sm90.yaml's and sm90_pytorch.yaml's (counted once per file that loads them)
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
  EXPECT_TRUE(points_at(err, path, 5, "'reruns'"));
  const std::string top = write(dir, "t.yaml", "arch: sm90\nxfails: []\n");
  EXPECT_TRUE(points_at(load_error(top), top, 2));
}

TEST(ManifestErrors, MissingMatchAndEmptyToleranceEntry) {
  const std::string dir = temp_dir();
  const std::string a = write(dir, "a.yaml", "skip:\n  - reason: r\n");
  EXPECT_TRUE(points_at(load_error(a), a, 2));
  const std::string b = write(dir, "b.yaml", "tolerance:\n  - match: x\n    reason: r\n    output: O\n");
  EXPECT_TRUE(points_at(load_error(b), b, 2));
}

TEST(ManifestExtends, LoadsParentFromTheSameFolderAndChildWins) {
  const std::string dir = temp_dir();
  write(dir, "common.yaml",
        "arch: common\n"
        "xfail:\n"
        "  - match: \"sdpa.*\"\n"
        "    reason: parent says strict\n"
        "    expect: FAIL\n"
        "    outputs: {O: [exceeds_bound]}\n"
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
                                  "    outputs: {O: [exceeds_bound]}\n"
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
  EXPECT_TRUE(points_at(load_error(lone), lone, 1));

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
                                 "arch: sm90\nextends: [" + builtin +
                                     ", sib.yaml, common/base.yaml]\n"
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
  EXPECT_NE(
      load_error(missing).find(missing + ":1:11: extends 'team/nothere.yaml': no file " + dir + "/team/nothere.yaml"),
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
  const std::vector<std::string> ids = {"sdpa.cuda_flash/fp32_b1_hq1_hkv1_sq1_sk1_d64_nomask",   // the skip entry
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
  EXPECT_NE(load_error(none).find(none + ":2:5: xfail entry 'x' needs 'expect:'"), std::string::npos)
      << load_error(none);
  const std::string pass = write(dir, "p.yaml", "xfail:\n  - match: x\n    reason: r\n    expect: PASS\n");
  EXPECT_NE(load_error(pass).find(pass + ":4:13: 'expect' must be FAIL, ERROR, CRASH or TIMEOUT"), std::string::npos)
      << load_error(pass);
  const std::string re =
      write(dir, "r.yaml", "xfail:\n  - match: x\n    reason: r\n    expect: ERROR\n    message: \"(\"\n");
  EXPECT_NE(load_error(re).find(re + ":5:14: 'message' is not a valid regular expression"), std::string::npos)
      << load_error(re);
  // 100,000 nested groups: std::regex recursed through them and overflowed the stack; RE2
  // parses and matches without recursion, so the pattern loads and matches, with no length cap.
  const std::string deep = write(dir, "d.yaml",
                                 "xfail:\n  - match: x\n    reason: r\n    expect: ERROR\n    message: \"" +
                                     std::string(100000, '(') + "a" + std::string(100000, ')') + "\"\n");
  ASSERT_EQ(load_error(deep), "");
  const Manifest m = Manifest::load(deep);
  const ManifestEntry& e = m.entries().at(0);
  EXPECT_EQ(apply_expectation(Outcome::ERROR, "xyz a", {}, &e), Outcome::XFAIL);
  EXPECT_EQ(apply_expectation(Outcome::ERROR, "xyz b", {}, &e), Outcome::ERROR);
  const std::string long_ok = write(
      dir, "l.yaml",
      "xfail:\n  - match: x\n    reason: r\n    expect: ERROR\n    message: \"" + std::string(5000, 'a') + "\"\n");
  EXPECT_EQ(Manifest::load(long_ok).entries().at(0).message.size(), 5000u);
}

// The typed table: an entry expects one failure (and, when it says so, a message); any other
// failure stands (so the gate sees what changed), PASS is XPASS or PASS by strictness.
TEST(ManifestExpectation, FullTable) {
  using K = FailureKind;
  ManifestEntry fail{.kind = EntryKind::xfail, .match = "*", .reason = "r", .source = "m.yaml:3"};
  fail.outputs = {{"O", {K::exceeds_bound}}};
  ManifestEntry loose = fail;
  loose.strict = false;
  ManifestEntry refused = fail;
  refused.outputs.clear();
  refused.expect = Outcome::ERROR;
  refused.message = "status 1[57]";
  const std::vector<Failure> o_exceeds = {{"O", K::exceeds_bound, 3, 1.2}};
  struct Row {
    Outcome raw;
    const char* message;
    std::vector<Failure> failures;
    Outcome none, under_fail, under_loose, under_refused;
  };
  const Row rows[] = {
      {Outcome::PASS, "", {}, Outcome::PASS, Outcome::XPASS, Outcome::PASS, Outcome::XPASS},
      {Outcome::FAIL, "O: 3 mismatches", o_exceeds, Outcome::FAIL, Outcome::XFAIL, Outcome::XFAIL, Outcome::FAIL},
      {Outcome::ERROR, "cuBLASLt status 15", {}, Outcome::ERROR, Outcome::ERROR, Outcome::ERROR, Outcome::XFAIL},
      {Outcome::ERROR, "cuBLASLt status 7", {}, Outcome::ERROR, Outcome::ERROR, Outcome::ERROR, Outcome::ERROR},
      {Outcome::CRASH, "signal 11", {}, Outcome::CRASH, Outcome::CRASH, Outcome::CRASH, Outcome::CRASH},
      {Outcome::TIMEOUT, "", {}, Outcome::TIMEOUT, Outcome::TIMEOUT, Outcome::TIMEOUT, Outcome::TIMEOUT},
      {Outcome::SKIP, "", {}, Outcome::SKIP, Outcome::SKIP, Outcome::SKIP, Outcome::SKIP},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(to_string(r.raw)) + " " + r.message);
    EXPECT_EQ(apply_expectation(r.raw, r.message, r.failures, nullptr), r.none);
    EXPECT_EQ(apply_expectation(r.raw, r.message, r.failures, &fail), r.under_fail);
    EXPECT_EQ(apply_expectation(r.raw, r.message, r.failures, &loose), r.under_loose);
    EXPECT_EQ(apply_expectation(r.raw, r.message, r.failures, &refused), r.under_refused);
  }
  EXPECT_EQ(unmet_expectation(Outcome::CRASH, "", {}, refused),
            "xfail m.yaml:3 expects ERROR matching 'status 1[57]', got CRASH");
  EXPECT_EQ(unmet_expectation(Outcome::ERROR, "status 15", {}, refused), "");
}

// A FAIL entry names the outputs and kinds it expects: the case's failures must all be among
// them. A second failing output, another kind on the named output, a case-level kind it does
// not name, an exceeds_bound past max_ratio, or a FAIL with no kind recorded stands as FAIL.
TEST(ManifestExpectation, TypedFailEntriesAbsorbOnlyTheFailuresTheyName) {
  using K = FailureKind;
  ManifestEntry dv{.kind = EntryKind::xfail, .match = "*", .reason = "r", .source = "sm90.yaml:52"};
  dv.outputs = {{"dV", {K::exceeds_bound}}};
  ManifestEntry capped = dv;
  capped.max_ratio = 1.5;
  ManifestEntry refusal{.kind = EntryKind::xfail, .match = "*", .reason = "r", .source = "p.yaml:9"};
  refusal.case_kinds = {K::wrong_refusal};
  refusal.message = "Invalid scaling";
  ManifestEntry planted{.kind = EntryKind::xfail, .match = "*", .reason = "r", .source = "planted impl host.x"};
  planted.planted = true;
  const Failure dv_exceeds{"dV", K::exceeds_bound, 1, 1.09};
  struct Row {
    const char* what;
    std::vector<Failure> failures;
    const char* message;
    Outcome under_dv, under_capped, under_refusal, under_planted;
  };
  const Row rows[] = {
      {"the named kind of the named output",
       {dv_exceeds},
       "",
       Outcome::XFAIL,
       Outcome::XFAIL,
       Outcome::FAIL,
       Outcome::XFAIL},
      {"a second failing output",
       {dv_exceeds, {"dK", K::exceeds_bound, 2, 1.3}},
       "",
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::XFAIL},
      {"another kind on the named output",
       {{"dV", K::nonfinite, 16128, 0}},
       "",
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::XFAIL},
      {"the named kind and another on the named output",
       {dv_exceeds, {"dV", K::untouched, 5, 0}},
       "",
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::XFAIL},
      {"past max_ratio",
       {{"dV", K::exceeds_bound, 1, 3.0}},
       "",
       Outcome::XFAIL,
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::XFAIL},
      {"a NaN ratio",
       {{"dV", K::exceeds_bound, 1, NAN}},
       "",
       Outcome::XFAIL,
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::XFAIL},
      {"a case kind beside the output's",
       {dv_exceeds, {"", K::written_outside, 0, 0}},
       "",
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::XFAIL},
      {"no kind recorded", {}, "", Outcome::FAIL, Outcome::FAIL, Outcome::FAIL, Outcome::XFAIL},
      {"the named case kind and message",
       {{"", K::wrong_refusal, 0, 0}},
       "got: Invalid scaling configuration",
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::XFAIL,
       Outcome::XFAIL},
      {"the named case kind, another message",
       {{"", K::wrong_refusal, 0, 0}},
       "got: status 15",
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::XFAIL},
      {"another case kind",
       {{"", K::accepted_invalid, 0, 0}},
       "Invalid scaling",
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::FAIL,
       Outcome::XFAIL},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.what);
    EXPECT_EQ(apply_expectation(Outcome::FAIL, r.message, r.failures, &dv), r.under_dv);
    EXPECT_EQ(apply_expectation(Outcome::FAIL, r.message, r.failures, &capped), r.under_capped);
    EXPECT_EQ(apply_expectation(Outcome::FAIL, r.message, r.failures, &refusal), r.under_refusal);
    EXPECT_EQ(apply_expectation(Outcome::FAIL, r.message, r.failures, &planted), r.under_planted);
  }
  // The unmet expectation names what the entry expects and what came instead.
  EXPECT_EQ(unmet_expectation(Outcome::FAIL, "", {dv_exceeds, {"dK", K::exceeds_bound, 2, 1.3}}, dv),
            "xfail sm90.yaml:52 expects FAIL of dV: exceeds_bound, got FAIL: dK exceeds_bound ×1.3 (2 elements)");
  EXPECT_EQ(
      unmet_expectation(Outcome::FAIL, "", {{"dV", K::exceeds_bound, 1, 3.0}}, capped),
      "xfail sm90.yaml:52 expects FAIL of dV: exceeds_bound (ratio <= 1.5), got FAIL: dV exceeds_bound ×3 (1 element)");
  EXPECT_EQ(unmet_expectation(Outcome::FAIL, "", {}, dv),
            "xfail sm90.yaml:52 expects FAIL of dV: exceeds_bound, got FAIL: no failure kind recorded");
  EXPECT_EQ(
      unmet_expectation(Outcome::FAIL, "got: status 15", {{"", K::wrong_refusal, 0, 0}}, refusal),
      "xfail p.yaml:9 expects FAIL of case: wrong_refusal matching 'Invalid scaling', got FAIL with another message");
  EXPECT_EQ(unmet_expectation(Outcome::ERROR, "", {}, dv),
            "xfail sm90.yaml:52 expects FAIL of dV: exceeds_bound, got ERROR");
}

TEST(ManifestErrors, AFailEntryNamesItsOutputsAndKinds) {
  const std::string dir = temp_dir();
  auto entry = [&](const std::string& name, const std::string& rest) {
    return write(dir, name, "xfail:\n  - match: x\n    reason: r\n" + rest);
  };
  struct Bad {
    const char* file;
    std::string body;
    const char* error;  // after "<path>:"
  };
  const Bad bad[] = {
      {"untyped.yaml", "    expect: FAIL\n",
       "2:5: xfail entry 'x' expects FAIL but names no failure kind: give 'outputs:"},
      {"message_only.yaml", "    expect: FAIL\n    message: \"mismatches\"\n",
       "2:5: xfail entry 'x' expects FAIL but names no failure kind"},
      {"unknown.yaml", "    expect: FAIL\n    outputs: {dV: [too_big]}\n",
       "5:20: 'too_big' is not a kind of an output (kinds: exceeds_bound,"},
      {"case_kind_on_output.yaml", "    expect: FAIL\n    outputs: {dV: [wrong_refusal]}\n",
       "5:20: 'wrong_refusal' is not a kind of an output (it is the case's: put it under 'case')"},
      {"output_kind_on_case.yaml", "    expect: FAIL\n    case: [nonfinite]\n",
       "5:12: 'nonfinite' is not a kind of the case (it is an output's: put it under 'outputs')"},
      {"empty_kinds.yaml", "    expect: FAIL\n    outputs: {dV: []}\n", "5:19: the kinds of output 'dV' is empty"},
      {"empty_outputs.yaml", "    expect: FAIL\n    outputs: {}\n", "5:14: 'outputs' is empty"},
      {"on_error.yaml", "    expect: ERROR\n    outputs: {O: [nonfinite]}\n",
       "2:5: xfail entry 'x' expects ERROR: 'outputs', 'case' and 'max_ratio' type a FAIL only"},
      {"ratio_low.yaml", "    expect: FAIL\n    outputs: {O: [exceeds_bound]}\n    max_ratio: 1\n",
       "6:16: 'max_ratio' must be > 1"},
      {"ratio_unused.yaml", "    expect: FAIL\n    outputs: {O: [nonfinite]}\n    max_ratio: 3\n",
       "6:16: 'max_ratio' caps exceeds_bound, which no output of this entry names"},
  };
  for (const Bad& b : bad) {
    const std::string path = entry(b.file, b.body);
    const std::string err = load_error(path);
    EXPECT_NE(err.find(path + ":" + b.error), std::string::npos) << b.file << ": " << err;
  }
  const std::string good =
      entry("good.yaml", "    expect: FAIL\n    outputs: {dV: [exceeds_bound]}\n    max_ratio: 1.5\n");
  EXPECT_EQ(load_error(good), "");
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
  EXPECT_EQ(apply_expectation(Outcome::ERROR, head + std::string(1 << 20, 'y'), {}, &e), Outcome::XFAIL);
  e.message = "^x.*tail$";
  EXPECT_EQ(apply_expectation(Outcome::ERROR, head + std::string(1 << 20, 'y') + "tail", {}, &e), Outcome::XFAIL);
  EXPECT_EQ(apply_expectation(Outcome::ERROR, head + std::string(1 << 20, 'y') + "tail!", {}, &e), Outcome::ERROR);
  const std::string long_prefix = std::string(1 << 20, '.') + "status 15";
  const std::array<std::array<const char*, 3>, 3> rows{
      {{"status 15$", "", "0 more"}, {"status 15\\b", " y", "0 more"}, {"status 15\\B", "0", " more"}}};
  for (const auto& [pattern, match_next, miss_next] : rows) {
    e.message = pattern;
    EXPECT_EQ(apply_expectation(Outcome::ERROR, long_prefix + match_next, {}, &e), Outcome::XFAIL) << pattern;
    EXPECT_EQ(apply_expectation(Outcome::ERROR, long_prefix + miss_next, {}, &e), Outcome::ERROR) << pattern;
  }
}

}  // namespace
}  // namespace opcts
