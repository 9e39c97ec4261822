// The composition root: every family and impl this binary carries.
#include "app/builtins.hpp"

#include <cstdio>

#include "app/plugins.hpp"
#include "core/family.hpp"

namespace opcts {

// Each family's three registration functions, declared from the family list (cmake/families.cmake):
// the family (refimpl/<f>_family.cpp), its host impls (device_impl/host/) and its CUDA rows
// (device_impl/cuda/<f>_rows.cpp, in every build: without CUDA each row is a SKIP saying why).
#define OPCTS_FAMILY(f)                 \
  void register_##f##_family(Registry&); \
  void register_host_##f(Registry&);     \
  void register_cuda_##f(Registry&);
#include "opcts_families.inc"
#undef OPCTS_FAMILY
void register_hip_rows(Registry&);  // device_impl/hip/rows.cpp: the hip.* rows of every family

void register_builtins(Registry& reg) {
  // Every family first: an impl is registered against its family.
#define OPCTS_FAMILY(f) register_##f##_family(reg);
#include "opcts_families.inc"
#undef OPCTS_FAMILY
#define OPCTS_FAMILY(f) \
  register_host_##f(reg); \
  register_cuda_##f(reg);
#include "opcts_families.inc"
#undef OPCTS_FAMILY
  register_hip_rows(reg);
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
