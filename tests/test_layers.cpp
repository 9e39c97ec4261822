// The include graph follows the floors of docs/architecture.md: no #include runs upward, also
// inside a family's wing (families/<f>/), whose folders are on the floors by role.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Which folders a folder's files may include (besides themselves). Kept in the order of the
// floors; the same table is drawn in docs/architecture.md ("Layout: the floors and the wings").
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> table = {
      {"include/opcts", {}},
      {"numerics", {"include/opcts"}},
      {"core", {"numerics", "include/opcts"}},
      {"refimpl", {"core", "numerics", "include/opcts"}},
      {"gpu/host", {"core", "numerics", "refimpl", "include/opcts"}},
      {"gpu/portable", {}},
      {"gpu/cuda", {"core", "numerics", "refimpl", "include/opcts", "gpu/portable"}},
      {"gpu/hip", {"core", "numerics", "refimpl", "include/opcts", "gpu/portable", "gpu/cuda"}},
      {"judge", {"core", "numerics", "include/opcts"}},
      {"runner", {"core", "numerics", "judge", "include/opcts"}},
      {"reports", {"core", "numerics", "judge", "runner", "include/opcts"}},
      {"app", {"core", "numerics", "refimpl", "gpu/host", "gpu/cuda", "judge", "runner", "reports", "include/opcts"}},
  };
  return table;
}

// A family's wing, families/<f>/, spans the floors by folder: its own files (header, fields,
// problem, inputs, reference, bound, family) are on refimpl's floor, host/ on the host impls',
// cuda/ on the CUDA impls'. Its tests/ and bench/ are on none (like tests/ and bench/).
// The folder of a wing file, as the floor table names it ("" for a wing's tests/ or bench/).
std::string wing_floor(const std::string& rel) {
  const auto wing = rel.find('/', sizeof("families/") - 1);  // the end of families/<f>
  if (wing == std::string::npos) return "";
  const std::string rest = rel.substr(wing + 1);
  if (rest.rfind("host/", 0) == 0) return "gpu/host";
  if (rest.rfind("cuda/", 0) == 0) return "gpu/cuda";
  if (rest.find('/') != std::string::npos) return "";  // tests/, bench/
  return "refimpl";
}

// The floor a path belongs to: the longest table key that prefixes it ("" for none).
std::string floor_of(const std::string& rel) {
  if (rel.rfind("families/", 0) == 0) return wing_floor(rel);
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
// they may include other kernel headers, numerics/minifloat_bits.hpp (the formats' bits) and the portable
// layer (gpu/portable/: gpu.hpp, mma_tile.cuh, device_prims.cuh), nothing else of ours.
// Kernel sources: the .cu, .cuh and *_kernels.hpp of gpu/cuda/ and of each wing's cuda/,
// and the portable headers.
bool is_kernel_file(const std::string& rel) {
  if (rel.rfind("gpu/portable/", 0) == 0) return true;
  if (floor_of(rel) != "gpu/cuda") return false;
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
  std::vector<std::string> dirs{"families"};
  for (const auto& dir : allowed()) dirs.push_back(dir.first);
  for (const auto& dir : dirs) {
    const fs::path d = root / dir;
    if (!fs::exists(d)) continue;
    for (const auto& e : fs::recursive_directory_iterator(d)) {
      if (!e.is_regular_file() || !is_source(e.path())) continue;
      const std::string rel = fs::relative(e.path(), root).generic_string();
      if (floor_of(rel).empty() && dir == "families") continue;  // a wing's tests/ and bench/
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

// The floors that know no family: the judge and the runner see a family only through core's
// Family and its references, whatever the table lets them include.
bool knows_no_wing(const std::string& floor) { return floor == "judge" || floor == "runner"; }

// What is wrong with one include of `target` (a path from the root) by i.file, "" for nothing.
std::string violation(const Include& i, const std::string& target) {
  const std::string from = floor_of(i.file), to = floor_of(target);
  const std::string at = i.file + ":" + std::to_string(i.line);
  if (from.empty()) return at + " is in no floor";
  if (knows_no_wing(from) && target.rfind("families/", 0) == 0)
    return at + " (" + from + ") includes " + i.target + ": the judge and the runner include no family's wing";
  if (to.empty()) return at + " includes " + i.target + ", which is in no floor";
  if (to != from && !allowed().at(from).count(to))
    return at + " (" + from + ") includes " + i.target + " (" + to +
           "): an include from a lower floor to a higher one, or across siblings";
  if (is_kernel_file(i.file) &&
      !(is_kernel_file(target) || target == "numerics/minifloat_bits.hpp" || target.rfind("include/opcts/", 0) == 0))
    return at + " is a kernel source and includes " + i.target +
           " (kernels take plain parameter structs, no harness types)";
  return "";
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
    EXPECT_EQ(violation(i, target), "");
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
  for (const char* dir : {"gpu", "plugins", "families"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (!e.is_regular_file() || !is_source(e.path())) continue;
      const std::string floor = floor_of(fs::relative(e.path(), root).generic_string());
      if (dir == std::string("families") && floor != "gpu/host" && floor != "gpu/cuda") continue;
      ++scanned;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n)
        EXPECT_FALSE(std::regex_search(line, judge))
            << fs::relative(e.path(), root).generic_string() << ":" << n << " calls the judge's contract: " << line;
    }
  }
  EXPECT_GT(scanned, 30);
}

// A cycle of a floor table ("a -> b -> a"), or a folder it names without a row; "" for none.
std::string cycle_in(const std::map<std::string, std::set<std::string>>& table) {
  std::map<std::string, int> state;  // 1: on the path being walked, 2: done
  std::vector<std::string> path;
  std::function<std::string(const std::string&)> walk = [&](const std::string& dir) -> std::string {
    if (!table.count(dir)) return dir + " is named but has no row";
    if (state[dir] == 2) return "";
    path.push_back(dir);
    if (state[dir] == 1) {
      std::string cycle;
      for (auto d = std::find(path.begin(), path.end(), dir); d != path.end(); ++d)
        cycle += (cycle.empty() ? "" : " -> ") + *d;
      return cycle;
    }
    state[dir] = 1;
    for (const auto& dep : table.at(dir))
      if (std::string found = walk(dep); !found.empty()) return found;
    state[dir] = 2;
    path.pop_back();
    return "";
  };
  for (const auto& [dir, deps] : table)
    if (std::string found = walk(dir); !found.empty()) return found;
  return "";
}

// The floors are floors: no folder reaches itself through the table (numerics < core < judge <
// runner < reports < app; core < refimpl < the gpu folders).
TEST(Layers, TheFloorTableHasNoCycle) {
  EXPECT_EQ(cycle_in(allowed()), "");
  EXPECT_EQ(cycle_in({{"a", {"b"}}, {"b", {"c"}}, {"c", {"b"}}}), "b -> c -> b");
  EXPECT_EQ(cycle_in({{"a", {"z"}}}), "z is named but has no row");
}

TEST(Layers, TheCheckSeesAnUpwardInclude) {
  EXPECT_EQ(floor_of("numerics/dtype.hpp"), "numerics");
  EXPECT_EQ(floor_of("core/family.hpp"), "core");
  EXPECT_EQ(floor_of("gpu/cuda/stream_gate.cu"), "gpu/cuda");
  EXPECT_FALSE(allowed().at("core").count("runner"));
  EXPECT_FALSE(allowed().at("numerics").count("core"));
  EXPECT_FALSE(allowed().at("runner").count("refimpl"));
  EXPECT_FALSE(allowed().at("runner").count("reports"));
  EXPECT_FALSE(allowed().at("judge").count("runner"));
  EXPECT_FALSE(allowed().at("judge").count("gpu/host"));
  EXPECT_FALSE(allowed().at("judge").count("gpu/cuda"));
  EXPECT_EQ(floor_of("judge/compare.hpp"), "judge");
  EXPECT_TRUE(is_kernel_file("gpu/cuda/stream_gate.cu"));
  EXPECT_FALSE(is_kernel_file("gpu/cuda/abi_backend.cpp"));
  // A wing's folders are on their floors.
  EXPECT_EQ(floor_of("families/sdpa/reference.cpp"), "refimpl");
  EXPECT_EQ(floor_of("families/sdpa/sdpa.hpp"), "refimpl");
  EXPECT_EQ(floor_of("families/sdpa/host/sdpa_flash.cpp"), "gpu/host");
  EXPECT_EQ(floor_of("families/sdpa/cuda/sdpa_flash.cu"), "gpu/cuda");
  EXPECT_EQ(floor_of("families/sdpa/tests/test_sdpa.cpp"), "");
  EXPECT_TRUE(is_kernel_file("families/sdpa/cuda/sdpa_flash.cu"));
  EXPECT_TRUE(is_kernel_file("families/sdpa/cuda/sdpa_kernels.hpp"));
  EXPECT_FALSE(is_kernel_file("families/sdpa/cuda/sdpa_impls.cpp"));
  EXPECT_FALSE(is_kernel_file("families/sdpa/sdpa.hpp"));
  // Planted includes that break a rule, each seen; the allowed ones pass.
  const auto bad = [](const std::string& file, const std::string& target) {
    return !violation({file, target, 1}, target).empty();
  };
  EXPECT_TRUE(bad("families/cast/reference.cpp", "families/cast/cuda/cast_kernels.hpp"));
  EXPECT_TRUE(bad("families/cast/problem.cpp", "families/cast/host/cast_cvt.hpp"));
  EXPECT_TRUE(bad("families/cast/inputs.cpp", "gpu/cuda/rows.hpp"));
  EXPECT_TRUE(bad("families/cast/host/cast_cvt.cpp", "families/cast/cuda/cast_launch.hpp"));
  EXPECT_TRUE(bad("families/cast/cuda/cast_cvt.cu", "families/cast/cast.hpp"));
  EXPECT_TRUE(bad("families/cast/cuda/cast_cvt.cu", "numerics/tensor.hpp"));
  EXPECT_TRUE(bad("runner/worker.cpp", "families/cast/cast.hpp"));
  // The wing rule holds whatever the table says: the message names it.
  EXPECT_NE(violation({"judge/compare.cpp", "families/cast/cast.hpp", 1}, "families/cast/cast.hpp")
                .find("include no family's wing"),
            std::string::npos);
  EXPECT_TRUE(bad("judge/compare.cpp", "families/cast/cast.hpp"));
  EXPECT_TRUE(bad("judge/compare.cpp", "families/cast/host/cast_cvt.hpp"));
  EXPECT_TRUE(bad("judge/gate.hpp", "runner/run.hpp"));
  EXPECT_TRUE(bad("judge/compare.cpp", "gpu/cuda/rows.hpp"));
  EXPECT_FALSE(bad("judge/tolerance.hpp", "judge/compare.hpp"));
  EXPECT_FALSE(bad("judge/compare.hpp", "numerics/tensor.hpp"));
  EXPECT_FALSE(bad("runner/execute.cpp", "judge/compare.hpp"));
  EXPECT_FALSE(bad("reports/junit.cpp", "judge/gate.hpp"));
  EXPECT_TRUE(bad("reports/junit.cpp", "families/cast/cast.hpp"));
  EXPECT_TRUE(bad("numerics/tensor.cpp", "families/cast/cast.hpp"));
  EXPECT_TRUE(bad("numerics/tensor.hpp", "core/errors.hpp"));
  EXPECT_FALSE(bad("core/family.hpp", "numerics/tensor.hpp"));
  EXPECT_FALSE(bad("families/cast/reference.cpp", "families/cast/cast.hpp"));
  EXPECT_FALSE(bad("families/cast/host/cast_cvt.cpp", "families/cast/cast.hpp"));
  EXPECT_FALSE(bad("families/cast/cuda/cast_impls.cpp", "families/cast/cast.hpp"));
  EXPECT_FALSE(bad("families/cast/cuda/cast_cvt.cu", "families/cast/cuda/cast_kernels.hpp"));
  EXPECT_FALSE(bad("families/cast/cuda/cast_cvt.cu", "gpu/portable/gpu.hpp"));
  EXPECT_FALSE(bad("app/builtins.cpp", "families/cast/cast.hpp"));
}

}  // namespace
