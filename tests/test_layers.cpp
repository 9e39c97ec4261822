// The include graph follows the floors of docs/architecture.md: no #include runs upward.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Which folders a folder's files may include (besides themselves). Kept in the order of the
// floors; the same table is drawn in docs/architecture.md ("Floors").
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> table = {
      {"include/opcts", {}},
      {"core", {"include/opcts"}},
      {"refimpl", {"core", "include/opcts"}},
      {"device_impl/host", {"core", "refimpl", "include/opcts"}},
      {"device_impl/portable", {}},
      {"device_impl/cuda", {"core", "refimpl", "include/opcts", "device_impl/portable"}},
      {"device_impl/hip", {"core", "refimpl", "include/opcts", "device_impl/portable", "device_impl/cuda"}},
      {"runner", {"core", "include/opcts"}},
      {"reports", {"core", "runner", "include/opcts"}},
      {"app", {"core", "refimpl", "device_impl/host", "device_impl/cuda", "runner", "reports", "include/opcts"}},
  };
  return table;
}

// The floor a path belongs to: the longest table key that prefixes it ("" for none).
std::string floor_of(const std::string& rel) {
  std::string best;
  for (const auto& [dir, deps] : allowed())
    if (rel.rfind(dir + "/", 0) == 0 && dir.size() > best.size()) best = dir;
  return best;
}

bool is_source(const fs::path& p) {
  static const std::set<std::string> ext = {".cpp", ".hpp", ".cu", ".cuh", ".h"};
  return ext.count(p.extension().string()) > 0;
}

// Kernel sources compile with nvcc (and hipcc) into their own library and take no harness type:
// they may include other kernel headers, core's header-only number formats and the portable
// layer (device_impl/portable/: gpu.hpp, mma_tile.cuh, device_prims.cuh), nothing else of ours.
// Kernel sources: device_impl/cuda's .cu, .cuh and *_kernels.hpp, and the portable headers.
bool is_kernel_file(const std::string& rel) {
  if (rel.rfind("device_impl/portable/", 0) == 0) return true;
  if (rel.rfind("device_impl/cuda/", 0) != 0) return false;
  const fs::path p(rel);
  const std::string name = p.filename().string();
  return p.extension() == ".cu" || p.extension() == ".cuh" || name.size() > 12 && name.ends_with("_kernels.hpp");
}

struct Include {
  std::string file, target;
  int line;
};

std::vector<Include> project_includes(const fs::path& root) {
  std::vector<Include> out;
  const std::regex inc(R"(^\s*#\s*include\s+"([^"]+)\")");
  for (const auto& dir : allowed()) {
    const fs::path d = root / dir.first;
    if (!fs::exists(d)) continue;
    for (const auto& e : fs::recursive_directory_iterator(d)) {
      if (!e.is_regular_file() || !is_source(e.path())) continue;
      const std::string rel = fs::relative(e.path(), root).generic_string();
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (std::regex_search(line, m, inc)) out.push_back({rel, m[1].str(), n});
      }
    }
  }
  return out;
}

TEST(Layers, NoIncludeRunsUpward) {
  const fs::path root = OPCTS_SOURCE_DIR;
  const auto includes = project_includes(root);
  ASSERT_GT(includes.size(), 100u) << "scanned too little of " << root;
  for (const auto& i : includes) {
    // A bare name ("sdpa_kernels.hpp") is a sibling of the including file.
    const std::string target = i.target.find('/') == std::string::npos
                                   ? (fs::path(i.file).parent_path() / i.target).generic_string()
                                   : i.target;
    if (!fs::exists(root / target)) continue;  // a system or third-party header spelled with quotes
    const std::string from = floor_of(i.file), to = floor_of(target);
    ASSERT_FALSE(from.empty()) << i.file;
    if (to.empty() || to == from) {
      EXPECT_FALSE(to.empty()) << i.file << ":" << i.line << " includes " << i.target << ", which is in no floor";
    } else {
      EXPECT_TRUE(allowed().at(from).count(to))
          << i.file << ":" << i.line << " (" << from << ") includes " << i.target << " (" << to
          << "): an include from a lower floor to a higher one, or across siblings";
    }
    if (is_kernel_file(i.file))
      EXPECT_TRUE(is_kernel_file(target) || target == "core/minifloat_bits.hpp" ||
                  target.rfind("include/opcts/", 0) == 0)
          << i.file << ":" << i.line << " is a kernel source and includes " << i.target
          << " (kernels take plain parameter structs, no harness types)";
  }
}

// The harness never decides an impl's answer: a negative case reaches the impl, which finds the
// fault in the arguments and tensors it is handed. The functions that define a family's expected
// error (refimpl's contract_violation / check_contract, Family::expected_error) are the
// judge's; no impl, built-in or example plugin, may call them.
TEST(Layers, NoImplCallsTheJudgesContract) {
  const fs::path root = OPCTS_SOURCE_DIR;
  const std::regex judge(R"(\b(contract_violation|check_contract|expected_error)\s*\()");
  ASSERT_TRUE(std::regex_search(std::string("    sdpa::check_contract(p);"), judge));  // what it must catch
  ASSERT_FALSE(std::regex_search(std::string("int4_mm::planted_bug_cannot_show(p, bug)"), judge));
  int scanned = 0;
  for (const char* dir : {"device_impl", "plugins"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (!e.is_regular_file() || !is_source(e.path())) continue;
      ++scanned;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n)
        EXPECT_FALSE(std::regex_search(line, judge))
            << fs::relative(e.path(), root).generic_string() << ":" << n << " calls the judge's contract: " << line;
    }
  EXPECT_GT(scanned, 30);
}

TEST(Layers, TheCheckSeesAnUpwardInclude) {
  EXPECT_EQ(floor_of("core/dtype.hpp"), "core");
  EXPECT_EQ(floor_of("device_impl/cuda/sdpa_flash.cu"), "device_impl/cuda");
  EXPECT_FALSE(allowed().at("core").count("runner"));
  EXPECT_FALSE(allowed().at("runner").count("refimpl"));
  EXPECT_FALSE(allowed().at("runner").count("reports"));
  EXPECT_TRUE(is_kernel_file("device_impl/cuda/sdpa_flash.cu"));
  EXPECT_FALSE(is_kernel_file("device_impl/cuda/sdpa_impls.cpp"));
}

}  // namespace
