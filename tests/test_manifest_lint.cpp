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
  EXPECT_NE(good.output.find("0 stale or shadowed"), std::string::npos) << good.output;
}

}  // namespace
