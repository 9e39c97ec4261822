// opcts manifest lint (app/cli_manifest.cpp): a stale and a shadowed entry are reported and fail
// it; the arch's own manifest passes (the ctest opcts.manifest_lint.<arch> runs every arch).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.hpp"

namespace {

namespace fs = std::filesystem;
using opcts::testutil::contains_all;
using opcts::testutil::sh;
using opcts::testutil::Shell;

TEST(ManifestLint, ReportsStaleAndShadowedEntriesAndFails) {
  const fs::path m = fs::path(opcts::testutil::temp_dir()) / "lint.yaml";
  std::ofstream(m) << "arch: gfx942\nskip:\n"
                      "  - match: \"nothing.hip_x/*\"\n    reason: matches no case\n"
                      "  - match: \"cast.hip_cvt/*\"\n    reason: every cast case\n"
                      "  - match: \"cast.hip_cvt/*fnuz*\"\n    reason: decided by the entry above\n";
  const std::string lint =
      std::string(OPCTS_BINARY) + " manifest lint --arch gfx942 --cases-dir " + OPCTS_SOURCE_DIR + "/cases";
  const Shell bad = sh(lint + " --manifest " + m.string());
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_TRUE(contains_all(
      bad.output, {":3: stale skip entry 'nothing.hip_x/*'", ":7: shadowed skip entry 'cast.hip_cvt/*fnuz*'"}));
  EXPECT_EQ(bad.output.find("'cast.hip_cvt/*':"), std::string::npos) << bad.output;
  const Shell good = sh(lint);
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_NE(good.output.find("0 stale, shadowed, misnamed or untracked"), std::string::npos) << good.output;
}

// The findings ledger: an xfail or flaky entry without `tracking:` is listed with its file:line
// and fails the lint, as one whose page section is not there; one with it, and a skip without
// it, do not.
TEST(ManifestLint, ListsXfailAndFlakyEntriesWithoutTracking) {
  const fs::path m = fs::path(opcts::testutil::temp_dir()) / "ledger.yaml";
  std::ofstream(m) << "arch: gfx942\nskip:\n"                                                    // 1
                      "  - match: \"cast.hip_cvt/*fnuz*\"\n    reason: no path\n"                // 3
                      "xfail:\n"                                                                 // 5
                      "  - match: \"sdpa.hip_flash/*_bwd\"\n    reason: r\n    expect: CRASH\n"  // 6
                      "  - match: \"sdpa.hip_flash/*\"\n    reason: r\n    expect: ERROR\n"      // 9
                      "    tracking: opcts#42\n"                                                 // 12
                      "  - match: \"cast.hip_cvt/*fnuz*\"\n    reason: r\n    expect: ERROR\n"   // 13
                      "    tracking: docs/status/sm90.md#no-such-section\n"                      // 16
                      "flaky:\n"                                                                 // 17
                      "  - match: \"cast.hip_cvt/*\"\n    reason: r\n";                          // 18
  const std::string lint =
      std::string(OPCTS_BINARY) + " manifest lint --arch gfx942 --cases-dir " + OPCTS_SOURCE_DIR + "/cases";
  const Shell bad = sh(lint + " --manifest " + m.string());
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_NE(bad.output.find(m.string() + ":6: untracked xfail entry 'sdpa.hip_flash/*_bwd'"), std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find(m.string() + ":18: untracked flaky entry 'cast.hip_cvt/*'"), std::string::npos)
      << bad.output;
  // A page of ours is checked against the checkout: the file and the heading its anchor names.
  EXPECT_NE(bad.output.find(m.string() +
                            ":13: xfail entry 'cast.hip_cvt/*fnuz*': tracking names section #no-such-section, which "
                            "no heading of docs/status/sm90.md has"),
            std::string::npos)
      << bad.output;
  EXPECT_EQ(bad.output.find("untracked xfail entry 'sdpa.hip_flash/*'"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("untracked skip"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("(2 untracked)"), std::string::npos) << bad.output;
}

// A FAIL entry names its outputs and kinds: an untyped one is refused with its file and line,
// and an output name no case of the entry has (a misspelt "dv") fails the lint, listing the
// names the cases have.
TEST(ManifestLint, RefusesAnUntypedFailEntryAndAnOutputNoCaseHas) {
  const std::string lint =
      std::string(OPCTS_BINARY) + " manifest lint --arch gfx942 --cases-dir " + OPCTS_SOURCE_DIR + "/cases";
  const fs::path untyped = fs::path(opcts::testutil::temp_dir()) / "untyped.yaml";
  std::ofstream(untyped)
      << "arch: gfx942\nxfail:\n"
         "  - match: \"sdpa.hip_flash/*_bwd*\"\n    reason: r\n    expect: FAIL\n    message: \"dV: \"\n";
  const Shell u = sh(lint + " --manifest " + untyped.string());
  EXPECT_NE(u.status, 0) << u.output;
  EXPECT_NE(u.output.find(untyped.string() +
                          ":3:5: xfail entry 'sdpa.hip_flash/*_bwd*' expects FAIL but names no failure kind"),
            std::string::npos)
      << u.output;
  const fs::path misnamed = fs::path(opcts::testutil::temp_dir()) / "misnamed.yaml";
  std::ofstream(misnamed) << "arch: gfx942\nxfail:\n"
                             "  - match: \"sdpa.hip_flash/*_bwd*\"\n    reason: r\n    expect: FAIL\n"
                             "    outputs: {dV: [exceeds_bound], dv: [nonfinite]}\n";
  const Shell m = sh(lint + " --manifest " + misnamed.string());
  EXPECT_NE(m.status, 0) << m.output;
  EXPECT_NE(m.output.find(":3: xfail entry 'sdpa.hip_flash/*_bwd*' names output 'dv', which no case it matches has "
                          "(outputs: dK, dQ, dV, dbias, dsinks)"),
            std::string::npos)
      << m.output;
  EXPECT_EQ(m.output.find("names output 'dV'"), std::string::npos) << m.output;
}

// A tolerance rule or manifest entry whose output names nothing applied to nothing while
// looking as if it did: `output: outt` on the host scatter_add rule let five planted dtype_acc
// bugs pass, and `manifest lint` said "0 stale". Now run, list and lint stop at its line.
TEST(ManifestLint, ARuleOrEntryThatNamesNoOutputStopsRunListAndLint) {
  const fs::path dir = opcts::testutil::temp_dir();
  const fs::path cases = dir / "cases";
  fs::copy(fs::path(OPCTS_SOURCE_DIR) / "cases", cases, fs::copy_options::recursive);
  std::ifstream in(cases / "tolerances.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string rule = "  - family: scatter_add\n";
  const auto at = text.find(rule);
  ASSERT_NE(at, std::string::npos);
  const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + at, '\n')) + 1;
  text.insert(at + rule.size(), "    output: outt\n");
  std::ofstream(cases / "tolerances.yaml") << text;
  const std::string where = (cases / "tolerances.yaml").string() + ":" + std::to_string(line) +
                            ":13: " + "tolerance rule's output 'outt' is no output of scatter_add";
  const std::string opcts = std::string(OPCTS_BINARY);
  const std::string sel = " --arch host --tier smoke --cases-dir " + cases.string();
  for (const std::string& cmd : {opcts + " list" + sel, opcts + " run" + sel + " --filter 'scatter_add.host_omp/*'",
                                 opcts + " manifest lint --arch host --cases-dir " + cases.string()}) {
    const Shell r = sh(cmd);
    EXPECT_EQ(r.status, 2) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find(where), std::string::npos) << cmd << "\n" << r.output;
  }
  // A manifest tolerance entry's output, against the cases its glob matches.
  const fs::path m = dir / "host.yaml";
  std::ofstream(m) << "arch: host\ntolerance:\n  - match: \"scatter_add.host_*/*\"\n    output: outt\n"
                      "    reason: a typo\n    factor: 2\n";
  const Shell lint =
      sh(opcts + " manifest lint --arch host --cases-dir " + OPCTS_SOURCE_DIR + "/cases --manifest " + m.string());
  EXPECT_EQ(lint.status, 2) << lint.output;
  EXPECT_NE(lint.output.find(m.string() + ":4:13: tolerance entry 'scatter_add.host_*/*' names output 'outt'"),
            std::string::npos)
      << lint.output;
}

}  // namespace
