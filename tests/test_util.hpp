// Helpers shared by the harness's tests: a fresh temp folder per test, files written into it.
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/result.hpp"
#include "core/yaml_util.hpp"

namespace opcts::testutil {

/// What a shell command printed (stdout and stderr) and its exit status (-1 when signalled).
struct Shell {
  int status;
  std::string output;
};

inline Shell sh(const std::string& cmd) {
  Shell r{0, ""};
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// The bytes of a file ("" where it cannot be read).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// Whether a command exited with `status` and printed `text`; for EXPECT_TRUE, which then prints
/// the output.
inline testing::AssertionResult exits_with(const Shell& r, int status, const std::string& text) {
  if (r.status != status)
    return testing::AssertionFailure() << "exit status " << r.status << ", not " << status << ":\n" << r.output;
  if (r.output.find(text) == std::string::npos)
    return testing::AssertionFailure() << "no \"" << text << "\" in:\n" << r.output;
  return testing::AssertionSuccess();
}

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

/// One passing record of cast's host.cvt on the host: the least a results file needs to hold for
/// `opcts report merge` to read it.
inline ResultRecord passing_record() {
  ResultRecord r;
  r.id = "cast.host_cvt/x";
  r.family = "cast";
  r.impl = "host.cvt";
  r.arch = "host";
  r.outcome = r.raw_outcome = Outcome::PASS;
  return r;
}

/// Three tiny sdpa problems (tier smoke) for the tests that run the opcts binary: `--catalog`
/// a file holding kTinyCatalog with `--filter ` kTinyFilter selects host_flash's cases
/// kTinyA, kTinyB, kTinyC (run in that order: problems run in id order).
inline constexpr const char* kTinyCatalog = R"(family: sdpa
grids:
  - name: mine
    tier: smoke
    axes:
      dtype: [fp32]
      heads: [{q: 2, kv: 1}]
      seq: [{q: 3, k: 5}, {q: 4, k: 6}, {q: 5, k: 7}]
      head_dim: [8]
)";
inline constexpr const char* kTinyFilter = "'sdpa.host_flash/fp32_b1_hq2_hkv1_sq*_d8_nomask'";
inline const std::string kTinyA = "sdpa.host_flash/fp32_b1_hq2_hkv1_sq3_sk5_d8_nomask";
inline const std::string kTinyB = "sdpa.host_flash/fp32_b1_hq2_hkv1_sq4_sk6_d8_nomask";
inline const std::string kTinyC = "sdpa.host_flash/fp32_b1_hq2_hkv1_sq5_sk7_d8_nomask";

/// Eight tiny sdpa problems of host_flash (tier smoke), kTinyFilter selecting them all: enough to
/// spread over shards, or to stop a run part way.
inline constexpr const char* kEightCatalog = R"(family: sdpa
grids:
  - name: eight
    tier: smoke
    axes:
      dtype: [fp32]
      heads: [{q: 2, kv: 1}]
      seq: [{q: 3, k: 5}, {q: 4, k: 6}, {q: 5, k: 7}, {q: 6, k: 8}, {q: 7, k: 9}, {q: 8, k: 10}, {q: 9, k: 11}, {q: 10, k: 12}]
      head_dim: [8]
)";

/// The message of the E that `f` throws, or "" when it returns.
template <class E, class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

/// The message of the YamlError that `load` throws, or "" when it loads.
template <typename Load>
std::string yaml_error_of(Load load) {
  return error_of<YamlError>(load);
}

/// Expects parse(text) to throw std::invalid_argument whose message holds `why`, for each
/// {text, why}: a parser's refusals, one row each.
template <class Parse>
void expect_invalid(Parse parse, std::initializer_list<std::pair<std::string, std::string>> cases) {
  for (const auto& [text, why] : cases) {
    const std::string err = error_of<std::invalid_argument>([&] { parse(text); });
    EXPECT_NE(err.find(why), std::string::npos) << text << ": no \"" << why << "\" in: " << err;
  }
}

/// Whether `text` holds every one of `parts`; for EXPECT_TRUE, which then names the parts
/// missing and prints the text.
inline testing::AssertionResult contains_all(const std::string& text, std::initializer_list<std::string> parts) {
  std::string missing;
  for (const std::string& part : parts)
    if (text.find(part) == std::string::npos) missing += "\n  no \"" + part + "\"";
  if (missing.empty()) return testing::AssertionSuccess();
  return testing::AssertionFailure() << missing << "\nin:\n" << text;
}

/// Whether a loader's error message points at path:line and names `word` ("" for none); for
/// EXPECT_TRUE, which then prints the message.
inline testing::AssertionResult points_at(const std::string& err, const std::string& path, int line,
                                          const std::string& word = "") {
  const std::string at = path + ":" + std::to_string(line) + ":";
  if (err.find(at) == std::string::npos) return testing::AssertionFailure() << "no " << at << " in: " << err;
  if (err.find(word) == std::string::npos) return testing::AssertionFailure() << "no " << word << " in: " << err;
  return testing::AssertionSuccess();
}

}  // namespace opcts::testutil
