// Registering built-in CUDA rows (rows.hpp), in every build.
#include "gpu/cuda/rows.hpp"

#if OPCTS_HAVE_CUDA
#include "gpu/cuda/abi_backend.hpp"
#endif

namespace opcts::cuda {

Row row(const char* family, const char* name, opcts_supports_fn supports, opcts_run_fn run,
        opcts_deterministic_fn deterministic, const void* impl_data, const char* backend) {
  Row r;
  r.desc.struct_size = sizeof(opcts_impl_desc);
  r.desc.family = family;
  r.desc.name = name;
  r.desc.backend = backend;
  r.desc.supports = supports;
  r.desc.run = run;
  r.desc.deterministic = deterministic;
  r.desc.impl_data = impl_data;
  return r;
}

void add_rows(Registry& reg, std::vector<Row> rows, const std::string& missing) {
  for (Row& r : rows) {
    std::vector<const char*> caps;
    for (const auto& c : r.caps) caps.push_back(c.c_str());
    r.desc.caps = caps.data();
    r.desc.n_caps = static_cast<int32_t>(caps.size());
    r.desc.planted = r.cannot_show ? 1 : 0;
    const bool runnable = r.desc.run != nullptr && missing.empty();
    const AbiBackend* backend = nullptr;
#if OPCTS_HAVE_CUDA
    if (runnable) backend = &abi_backend();
    if (runnable && r.prepare) set_prepare(r.desc.run, r.prepare);
#endif
    const std::string why = !missing.empty() ? missing
                            : runnable       ? std::string()
                                       : "this opcts was built without CUDA (OPCTS_CUDA=OFF or no CUDA toolkit found)";
    auto impl = std::make_unique<AbiImpl>(r.desc, backend, why);
    if (r.cannot_show) impl->set_cannot_show(std::move(r.cannot_show));
    if (r.plant_inputs) impl->set_planted_inputs(std::move(r.plant_inputs));
    impl->set_bug_needs_bitwise(r.bug_needs_bitwise);
    reg.add(std::move(impl));
  }
}

}  // namespace opcts::cuda
