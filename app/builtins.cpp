// The composition root: every family and impl this binary carries.
#include "app/builtins.hpp"

#include <cstdio>

#include "app/plugins.hpp"
#include "core/family.hpp"
#include "device_impl/host/host_impls.hpp"

#if OPCTS_HAVE_CUDA
#include "device_impl/cuda/cuda_impls.hpp"
#endif

namespace opcts {

void register_sdpa_family(Registry& reg);
void register_cast_family(Registry& reg);
void register_scaled_mm_family(Registry& reg);
void register_int4_mm_family(Registry& reg);
void register_indexing_families(Registry& reg);
/// The CUDA rows of cast, int4_mm and the indexing families (scatter_add, index_add,
/// index_select), in every build (device_impl/cuda/<family>_rows.cpp).
void register_cuda_cast(Registry& reg);
void register_cuda_int4_mm(Registry& reg);
void register_cuda_indexing(Registry& reg);
#if OPCTS_HAVE_CUDA
/// cuda.cublaslt and cuda.mx_kernel (device_impl/cuda/scaled_mm_impls.cpp).
void register_cuda_scaled_mm(Registry& reg);
#endif

namespace {

#if !OPCTS_HAVE_CUDA || !OPCTS_HAVE_CUDNN
// Without a CUDA toolkit (or cuDNN) the CUDA impls still exist as cases, each a SKIP saying
// why, so `opcts list --arch sm90` shows the same ids on every build and nothing silently
// vanishes.
class UnavailableImpl final : public Impl {
 public:
  UnavailableImpl(std::string family, std::string name,
                  std::string why = "this opcts was built without CUDA (OPCTS_CUDA=OFF or no CUDA toolkit found)")
      : family_(std::move(family)), name_(std::move(name)), why_(std::move(why)) {}
  std::string_view family() const override { return family_; }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "cuda"; }
  Support supports(const Problem&, const ArchInfo&) const override {
    return Support::no(name_ + ": " + why_);
  }
  TensorMap run(const Problem&, const TensorMap&, const RunContext&) const override {
    throw std::logic_error(name_ + " is not built into this binary");
  }

 private:
  std::string family_, name_, why_;
};
#endif

}  // namespace

void register_builtins(Registry& reg) {
  register_sdpa_family(reg);
  register_cast_family(reg);
  register_scaled_mm_family(reg);
  register_int4_mm_family(reg);
  register_indexing_families(reg);
  register_host_sdpa(reg);
  register_host_sdpa_planted(reg);
  register_host_cast(reg);
  register_host_scaled_mm(reg);
  register_host_int4_mm(reg);
  register_host_indexing(reg);
  register_cuda_cast(reg);
  register_cuda_int4_mm(reg);
  register_cuda_indexing(reg);
#if OPCTS_HAVE_CUDA
  register_cuda_sdpa(reg);
#if OPCTS_HAVE_CUDNN
  register_cuda_sdpa_cudnn(reg);
#else
  reg.add(std::make_unique<UnavailableImpl>("sdpa", "cuda.cudnn", "this opcts was built without cuDNN (no cudnn_graph.h / libcudnn found)"));
#endif
  register_cuda_scaled_mm(reg);
#else
  for (const char* impl : {"cuda.flash", "cuda.math", "cuda.cudnn"}) reg.add(std::make_unique<UnavailableImpl>("sdpa", impl));
  for (const char* impl : {"cuda.cublaslt", "cuda.mx_kernel"}) reg.add(std::make_unique<UnavailableImpl>("scaled_mm", impl));
#endif
}

const Registry& builtin_registry() {
  static const Registry reg = [] {
    Registry r;
    register_builtins(r);
    return r;
  }();
  return reg;
}

const Registry& registry_for(const std::vector<std::string>& plugins) {
  if (plugins.empty()) return builtin_registry();
  static const Registry reg = [&] {
    Registry r;
    register_builtins(r);
    for (const auto& p : plugins)
      if (const std::string err = load_plugin(r, p); !err.empty())
        std::fprintf(stderr, "opcts: %s; going on without it\n", err.c_str());
    return r;
  }();
  return reg;
}

}  // namespace opcts
