// The CUDA and the HIP backend are built from the same source files (cmake/gpu_sources.cmake):
// the glue's two lists, written at configure time, differ only by the cuDNN glue; no file of
// them, nor a header of the backend's, names a runtime's headers or tests which runtime it is
// built for (only gpu/portable/runtime.hpp, the runtime-name mapping, does); gpu/hip/ holds no
// source of the backend; and every hip.* row is the twin of a cuda.* row of its family.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "core/abi_impl.hpp"
#include "families/cast/cast.hpp"
#include "tests/test_family_util.hpp"

namespace {

namespace fs = std::filesystem;

std::set<std::string> glue_list(const std::string& runtime) {
  std::ifstream in(fs::path(OPCTS_GPU_GLUE_LISTS_DIR) / (runtime + ".txt"));
  EXPECT_TRUE(in.good()) << "no " << runtime << ".txt in " << OPCTS_GPU_GLUE_LISTS_DIR;
  std::set<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.insert(line);
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The vendor glue: files that call a vendor library that has no HIP build (cuDNN).
bool vendor_glue(const std::string& rel) { return rel.find("cudnn") != std::string::npos; }

// Where a file names a runtime itself: its headers, or a test of which one it is built for.
std::string names_a_runtime(const std::string& text) {
  static const std::regex runtime_use(
      R"((#\s*include\s*<(cuda_runtime|cuda_runtime_api|cuda|hip/)[^>]*>)|(#\s*if.*(OPCTS_GPU_HIP|__HIPCC__|__HIP_PLATFORM|OPCTS_GPU_RUNTIME_HIP))|\bhip[A-Z][A-Za-z]+\b)");
  std::smatch m;
  return std::regex_search(text, m, runtime_use) ? m.str() : std::string();
}

TEST(GpuBackendSources, CudaAndHipBuildTheSameGlueButTheVendorsOwn) {
  const std::set<std::string> cuda = glue_list("cuda"), hip = glue_list("hip");
  ASSERT_GT(hip.size(), 5u);
  EXPECT_TRUE(hip.count("gpu/cuda/abi_backend.cpp"));
  EXPECT_TRUE(cuda.count("gpu/cuda/abi_backend.cpp"));
  for (const auto& f : hip) EXPECT_TRUE(cuda.count(f)) << f << " is built for HIP only";
  for (const auto& f : cuda)
    if (!hip.count(f)) EXPECT_TRUE(vendor_glue(f)) << f << " is built for CUDA only and calls no vendor library";
}

TEST(GpuBackendSources, OnlyTheRuntimeMappingNamesARuntime) {
  const fs::path root = OPCTS_SOURCE_DIR;
  std::set<std::string> files = glue_list("hip");
  // The backend's headers and its gate's kernel, wherever the glue includes them from.
  for (const auto& d : fs::directory_iterator(root / "gpu/cuda")) {
    const std::string ext = d.path().extension().string();
    if (ext == ".hpp" || ext == ".cuh" || d.path().filename() == "stream_gate.cu")
      files.insert(fs::relative(d.path(), root).generic_string());
  }
  for (const auto& f : files) {
    if (vendor_glue(f) || f == "gpu/cuda/cp_async.cuh") continue;  // cp.async: PTX, CUDA only (kernels.txt)
    const std::string hit = names_a_runtime(read(root / f));
    EXPECT_EQ(hit, "") << f << " names a runtime itself; gpu/portable/runtime.hpp maps them";
  }
  EXPECT_NE(names_a_runtime(read(root / "gpu/portable/runtime.hpp")), "");
}

TEST(GpuBackendSources, GpuHipHoldsNoBackendSource) {
  for (const auto& d : fs::directory_iterator(fs::path(OPCTS_SOURCE_DIR) / "gpu/hip"))
    EXPECT_EQ(d.path().filename(), "link_check.cpp") << d.path() << ": the HIP backend is the CUDA one's files";
}

TEST(GpuBackendSources, EveryHipRowIsTheTwinOfACudaRow) {
  const opcts::Registry& reg = opcts::builtin_registry();
  std::set<std::string> cuda;
  int hip = 0;
  std::vector<const opcts::Impl*> impls;
  for (const opcts::Family* f : reg.families())
    for (const opcts::Impl* i : reg.impls_of(f->name())) impls.push_back(i);
  for (const opcts::Impl* i : impls)
    if (i->backend() == "cuda") cuda.insert(std::string(i->family()) + "/" + std::string(i->name()));
  for (const opcts::Impl* i : impls) {
    if (i->backend() != "hip") continue;
    ++hip;
    const std::string name(i->name());
    ASSERT_EQ(name.rfind("hip.", 0), 0u) << name;
    EXPECT_TRUE(cuda.count(std::string(i->family()) + "/cuda." + name.substr(4))) << name << " has no cuda.* twin";
    EXPECT_FALSE(i->planted()) << name;
  }
  EXPECT_EQ(hip, 13);
}

// A backend that cannot run here (HIP's without a ROCm device) makes each of its impls' cases a
// SKIP with its reason, before anything of the impl is asked.
class DevicelessBackend final : public opcts::AbiBackend {
 public:
  opcts::TensorMap run(const opcts_impl_desc&, const void*, const opcts::TensorMap&,
                       const std::vector<opcts::OutputSpec>&, const opcts_arch&, int, const char*, std::string*,
                       std::vector<opcts::GuardBreach>*) const override {
    throw std::logic_error("ran without a device");
  }
  opcts::CapturedRun run_captured(const opcts_impl_desc&, const void*, const opcts::TensorMap&, const opcts::TensorMap&,
                                  const std::vector<opcts::OutputSpec>&, const opcts_arch&, int, const char*,
                                  std::string*, std::vector<opcts::GuardBreach>*) const override {
    throw std::logic_error("recorded without a device");
  }
  std::string unavailable() const override { return "no ROCm device found"; }
};

TEST(GpuBackendSources, ABackendWithoutItsDeviceSkipsEveryCase) {
  const DevicelessBackend backend;
  opcts_impl_desc desc{};
  desc.struct_size = sizeof desc;
  desc.family = "cast";
  desc.name = "hip.fake";
  desc.backend = "hip";
  desc.supports = [](const void*, const void*, const opcts_arch*, char*, size_t) -> int32_t { return 1; };
  const opcts::AbiImpl impl(desc, &backend);
  EXPECT_EQ(impl.unavailable(), "hip.fake: no ROCm device found");
  const opcts::Support s = impl.supports(opcts::cast::Problem{}, opcts::testutil::host_arch());
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.reason, "hip.fake: no ROCm device found");
}

}  // namespace
