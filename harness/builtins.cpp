// The composition root: every family and impl this binary carries.
#include "device_impl/host/host_impls.hpp"
#include "harness/family.hpp"

#if OPCTS_HAVE_CUDA
#include "device_impl/cuda/cuda_impls.hpp"
#endif

namespace opcts {

void register_sdpa_family(Registry& reg);
void register_cast_family(Registry& reg);

namespace {

#if !OPCTS_HAVE_CUDA
// Without a CUDA toolkit the CUDA impls still exist as cases, each a SKIP saying why, so
// `opcts list --arch sm90` shows the same ids on every build and nothing silently vanishes.
class UnavailableImpl final : public Impl {
 public:
  UnavailableImpl(std::string family, std::string name) : family_(std::move(family)), name_(std::move(name)) {}
  std::string_view family() const override { return family_; }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "cuda"; }
  Support supports(const Problem&, const ArchInfo&) const override {
    return Support::no("this opcts was built without CUDA (OPCTS_CUDA=OFF or no CUDA toolkit found)");
  }
  TensorMap run(const Problem&, const TensorMap&, const RunContext&) const override {
    throw std::logic_error(name_ + " is not built into this binary");
  }

 private:
  std::string family_, name_;
};
#endif

Registry make() {
  Registry reg;
  register_sdpa_family(reg);
  register_cast_family(reg);
  register_host_sdpa(reg);
  register_host_cast(reg);
#if OPCTS_HAVE_CUDA
  register_cuda_sdpa(reg);
  register_cuda_cast(reg);
#else
  for (const char* impl : {"cuda.flash", "cuda.math"}) reg.add(std::make_unique<UnavailableImpl>("sdpa", impl));
  reg.add(std::make_unique<UnavailableImpl>("cast", "cuda.cvt"));
#endif
  return reg;
}

}  // namespace

const Registry& builtin_registry() {
  static const Registry reg = make();
  return reg;
}

}  // namespace opcts
