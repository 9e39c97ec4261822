// The HIP build of the portable kernels (gpu/portable/kernels.txt, cmake/hip.cmake):
// every kernel file is classified, portable files reach CUDA's headers only through gpu.hpp,
// and in a build with hipcc each portable file has its HIP object (a file that stops compiling
// for HIP fails the build; one dropped from the HIP target fails here).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Entry {
  std::string kind, reason;
  int line;
};

// kernels.txt: `portable FILE` or `cuda_only FILE: REASON`; errors as "line N: ...".
std::map<std::string, Entry> parse_kernels(std::istream& in, std::vector<std::string>* errors) {
  std::map<std::string, Entry> out;
  const std::regex portable(R"(^portable ([a-z0-9_/]+\.cu)$)"), cuda_only(R"(^cuda_only ([a-z0-9_/]+\.cu): (.+)$)");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::smatch m;
    Entry e{"", "", n};
    if (std::regex_match(line, m, portable)) e.kind = "portable";
    else if (std::regex_match(line, m, cuda_only)) e.kind = "cuda_only", e.reason = m[2].str();
    else {
      errors->push_back("line " + std::to_string(n) + ": not 'portable FILE' or 'cuda_only FILE: REASON': " + line);
      continue;
    }
    if (!out.emplace(m[1].str(), e).second)
      errors->push_back("line " + std::to_string(n) + ": " + m[1].str() + " listed twice");
  }
  return out;
}

std::map<std::string, Entry> load_kernels(std::vector<std::string>* errors) {
  std::ifstream in(fs::path(OPCTS_SOURCE_DIR) / "gpu/portable/kernels.txt");
  EXPECT_TRUE(in.good());
  return parse_kernels(in, errors);
}

TEST(HipKernels, EveryKernelFileIsClassifiedOnce) {
  std::vector<std::string> errors;
  const auto kernels = load_kernels(&errors);
  for (const auto& e : errors) ADD_FAILURE() << "kernels.txt " << e;
  const fs::path root = OPCTS_SOURCE_DIR;
  std::vector<fs::path> dirs{root / "gpu/cuda"};
  if (fs::exists(root / "families"))
    for (const auto& w : fs::directory_iterator(root / "families"))
      if (fs::is_directory(w.path() / "cuda")) dirs.push_back(w.path() / "cuda");
  int files = 0;
  std::map<std::string, std::string> names;  // file name -> path: hipcc's objects are named by it
  for (const auto& dir : dirs)
    for (const auto& d : fs::directory_iterator(dir)) {
      if (d.path().extension() != ".cu") continue;
      ++files;
      const std::string rel = fs::relative(d.path(), root).generic_string();
      EXPECT_TRUE(kernels.count(rel)) << rel << " is in neither list of gpu/portable/kernels.txt";
      const auto [it, fresh] = names.emplace(d.path().filename().string(), rel);
      EXPECT_TRUE(fresh) << rel << " and " << it->second << " share a file name";
    }
  EXPECT_GT(files, 10);
  for (const auto& [f, e] : kernels) EXPECT_TRUE(fs::exists(root / f)) << "kernels.txt:" << e.line << ": no " << f;
}

TEST(HipKernels, TheListParserCatchesWhatItMust) {
  std::istringstream bad("portable a.cu\nportable a.cu\ncuda_only b.cu\nportable c.cpp\n");
  std::vector<std::string> errors;
  const auto k = parse_kernels(bad, &errors);
  EXPECT_EQ(k.size(), 1u);
  ASSERT_EQ(errors.size(), 3u);  // listed twice, no reason, not a .cu
  EXPECT_NE(errors[0].find("listed twice"), std::string::npos);
}

// A portable file includes CUDA's own headers only under `#if !OPCTS_GPU_HIP` (gpu.hpp picks the
// runtime and the 16-bit types for both compilers).
TEST(HipKernels, PortableFilesIncludeCudaHeadersOnlyUnderTheCudaBranch) {
  std::vector<std::string> errors;
  const std::regex cuda_inc(R"(^\s*#\s*include\s*<(cuda|cub/|cublas|cudnn)[^>]*>)");
  for (const auto& [f, e] : load_kernels(&errors)) {
    if (e.kind != "portable") continue;
    std::ifstream in(fs::path(OPCTS_SOURCE_DIR) / f);
    std::string line, guard;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.rfind("#if", 0) == 0) guard = line;
      if (line.rfind("#endif", 0) == 0) guard.clear();
      if (std::regex_search(line, cuda_inc))
        EXPECT_EQ(guard, "#if !OPCTS_GPU_HIP") << f << ":" << n << " includes a CUDA header hipcc has not: " << line;
    }
  }
}

#if OPCTS_HAVE_HIP
TEST(HipKernels, EveryPortableFileHasItsHipObject) {
  std::vector<std::string> errors;
  int portable = 0;
  for (const auto& [f, e] : load_kernels(&errors)) {
    if (e.kind != "portable") continue;
    ++portable;
    const fs::path obj = fs::path(OPCTS_HIP_OBJECT_DIR) / (fs::path(f).filename().string() + ".o");
    EXPECT_TRUE(fs::exists(obj) && fs::file_size(obj) > 0) << f << " is listed portable but hipcc built no " << obj;
  }
  EXPECT_GT(portable, 5);
  EXPECT_TRUE(fs::exists(fs::path(OPCTS_HIP_OBJECT_DIR) / "libopcts_hip_kernels.a"));
}
#endif

}  // namespace
