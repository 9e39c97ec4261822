// AMD GPU discovery from the KFD topology (runner/kfd_probe.hpp) on a made-up sysfs folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runner/kfd_probe.hpp"
#include "tests/test_util.hpp"

namespace {

namespace fs = std::filesystem;

TEST(KfdProbe, GfxNamesSpellMajorDecimalMinorAndSteppingHex) {
  EXPECT_EQ(opcts::gfx_name(90010), "gfx90a");  // MI200
  EXPECT_EQ(opcts::gfx_name(90402), "gfx942");  // MI300
  EXPECT_EQ(opcts::gfx_name(90500), "gfx950");  // MI350
  EXPECT_EQ(opcts::gfx_name(110000), "gfx1100");
  EXPECT_EQ(opcts::gfx_name(120001), "gfx1201");
  EXPECT_EQ(opcts::gfx_name(0), "");  // a CPU node
}

TEST(KfdProbe, GpuNodesInNumericNodeOrderCpusLeftOut) {
  const fs::path dir = fs::path(opcts::testutil::temp_dir()) / "nodes";
  auto node = [&](const char* id, const char* props) {
    fs::create_directories(dir / id);
    std::ofstream(dir / id / "properties") << props;
  };
  node("0", "cpu_cores_count 64\nsimd_count 0\ngfx_target_version 0\n");
  node("10", "simd_count 192\ngfx_target_version 110000\n");
  node("2", "gfx_target_version 90010\nsimd_count 416\n");
  node("1", "cpu_cores_count 0\ngfx_target_version 90402\n");
  fs::create_directories(dir / "not_a_node");
  EXPECT_EQ(opcts::kfd_gpu_archs(dir.string()), (std::vector<std::string>{"gfx942", "gfx90a", "gfx1100"}));
  EXPECT_TRUE(opcts::kfd_gpu_archs((dir / "absent").string()).empty());
}

}  // namespace
