// libopcts_aten: PyTorch's own GPU operators as opcts impls (aten.*), registered through
// include/opcts/plugin.h. Built only with -DOPCTS_WITH_TORCH=ON (plugins/aten/CMakeLists.txt);
// how to run it: docs/plugins.md, "PyTorch's operators (aten.*)".
#include <cstdio>

#include "aten_common.hpp"

extern "C" __attribute__((visibility("default"))) int32_t opcts_plugin_init(uint32_t abi_version,
                                                                            const opcts_registrar* registrar) {
  if (abi_version != OPCTS_PLUGIN_ABI_VERSION) return 1;
  std::vector<opcts_aten::ImplSpec> all;
  for (auto part : {opcts_aten::sdpa_impls, opcts_aten::scaled_mm_impls, opcts_aten::grouped_mm_impls,
                    opcts_aten::int4_mm_impls, opcts_aten::indexing_impls, opcts_aten::cast_impls}) {
    const auto specs = part();
    all.insert(all.end(), specs.begin(), specs.end());
  }
  static const char* const kCaps[] = {"mma_sync_bf16"};  // PyTorch's fused kernels need sm80+
  for (const auto& s : all) {
    opcts_impl_desc d{};
    d.struct_size = sizeof d;
    d.family = s.family;
    d.name = s.name;
    d.backend = "cuda";
    d.caps = kCaps;
    d.n_caps = 1;
    d.planted = 0;
    d.supports = s.supports;
    d.run = s.run;
    d.deterministic = s.deterministic;
    d.impl_data = s.data;
    char error[256] = {};
    if (registrar->add_impl(registrar->ctx, &d, error, sizeof error) != 0) {
      std::fprintf(stderr, "libopcts_aten: %s not registered: %s\n", s.name, error);
      return 1;
    }
  }
  return 0;
}
