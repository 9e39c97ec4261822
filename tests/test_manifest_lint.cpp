// opcts manifest lint (app/cli_manifest.cpp): a stale and a shadowed entry are reported and fail
// it; the arch's own manifest passes (the ctest opcts.manifest_lint.<arch> runs every arch).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.hpp"

namespace {

namespace fs = std::filesystem;
using opcts::testutil::Shell;
using opcts::testutil::sh;

TEST(ManifestLint, ReportsStaleAndShadowedEntriesAndFails) {
  const fs::path m = fs::path(opcts::testutil::temp_dir()) / "lint.yaml";
  std::ofstream(m) << "arch: gfx942\nskip:\n"
                      "  - match: \"nothing.hip_x/*\"\n    reason: matches no case\n"
                      "  - match: \"cast.hip_cvt/*\"\n    reason: every cast case\n"
                      "  - match: \"cast.hip_cvt/*fnuz*\"\n    reason: decided by the entry above\n";
  const std::string lint = std::string(OPCTS_BINARY) + " manifest lint --arch gfx942 --cases-dir " + OPCTS_SOURCE_DIR + "/cases";
  const Shell bad = sh(lint + " --manifest " + m.string());
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_NE(bad.output.find(":3: stale skip entry 'nothing.hip_x/*'"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find(":7: shadowed skip entry 'cast.hip_cvt/*fnuz*'"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("'cast.hip_cvt/*':"), std::string::npos) << bad.output;
  const Shell good = sh(lint);
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_NE(good.output.find("0 stale, shadowed or misnamed"), std::string::npos) << good.output;
}

// A FAIL entry names its outputs and kinds: an untyped one is refused with its file and line,
// and an output name no case of the entry has (a misspelt "dv") fails the lint, listing the
// names the cases have.
TEST(ManifestLint, RefusesAnUntypedFailEntryAndAnOutputNoCaseHas) {
  const std::string lint = std::string(OPCTS_BINARY) + " manifest lint --arch gfx942 --cases-dir " + OPCTS_SOURCE_DIR + "/cases";
  const fs::path untyped = fs::path(opcts::testutil::temp_dir()) / "untyped.yaml";
  std::ofstream(untyped) << "arch: gfx942\nxfail:\n"
                            "  - match: \"sdpa.hip_flash/*_bwd\"\n    reason: r\n    expect: FAIL\n    message: \"dV: \"\n";
  const Shell u = sh(lint + " --manifest " + untyped.string());
  EXPECT_NE(u.status, 0) << u.output;
  EXPECT_NE(u.output.find(untyped.string() + ":3:5: xfail entry 'sdpa.hip_flash/*_bwd' expects FAIL but names no failure kind"),
            std::string::npos)
      << u.output;
  const fs::path misnamed = fs::path(opcts::testutil::temp_dir()) / "misnamed.yaml";
  std::ofstream(misnamed) << "arch: gfx942\nxfail:\n"
                             "  - match: \"sdpa.hip_flash/*_bwd\"\n    reason: r\n    expect: FAIL\n"
                             "    outputs: {dV: [exceeds_bound], dv: [nonfinite]}\n";
  const Shell m = sh(lint + " --manifest " + misnamed.string());
  EXPECT_NE(m.status, 0) << m.output;
  EXPECT_NE(m.output.find(":3: xfail entry 'sdpa.hip_flash/*_bwd' names output 'dv', which no case it matches has (outputs: dK, dQ, dV)"),
            std::string::npos)
      << m.output;
  EXPECT_EQ(m.output.find("names output 'dV'"), std::string::npos) << m.output;
}

}  // namespace
