// Helpers shared by the harness's tests: a fresh temp folder per test, files written into it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/yaml_util.hpp"

namespace opcts::testutil {

/// The source tree's cases/ folder.
inline std::filesystem::path cases_dir() { return OPCTS_SOURCE_CASES_DIR; }

/// A fresh, empty folder under gtest's temp dir, named after the running test.
inline std::string temp_dir() {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  const auto d = std::filesystem::path(testing::TempDir()) / "opcts_tests" /
                 (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

/// Writes `text` to dir/name and returns the path.
inline std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string p = (std::filesystem::path(dir) / name).string();
  std::ofstream(p) << text;
  return p;
}

/// The message of the YamlError that `load` throws, or "" when it loads.
template <typename Load>
std::string yaml_error_of(Load load) {
  try {
    load();
  } catch (const YamlError& e) {
    return e.what();
  }
  return "";
}

}  // namespace opcts::testutil
