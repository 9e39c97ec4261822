// Registering built-in GPU rows and their hip.* twins (rows.hpp), in every build.
#include "gpu/cuda/rows.hpp"

#include <stdexcept>

#if OPCTS_HAVE_CUDA || OPCTS_HAVE_HIP_BACKEND
#include "gpu/cuda/abi_backend.hpp"
#endif

namespace opcts::cuda {

namespace {

// The backend this build runs its rows on: CUDA's, HIP's (a build without CUDA, cmake/hip.cmake)
// or none.
#if OPCTS_HAVE_CUDA
constexpr std::string_view kBuilt = "cuda";
#elif OPCTS_HAVE_HIP_BACKEND
constexpr std::string_view kBuilt = "hip";
#else
constexpr std::string_view kBuilt = "";
#endif

// Why a row of `backend` cannot run in this build.
std::string not_built(std::string_view backend) {
  if (backend == "hip")
    return "no HIP backend in this build: opcts runs the hip.* rows when configured with OPCTS_HIP=ON and "
           "without CUDA (OPCTS_CUDA=OFF, the hip preset)";
  return "this opcts was built without CUDA (OPCTS_CUDA=OFF or no CUDA toolkit found)";
}

void add_row(Registry& reg, Row& r, const std::string& missing) {
  std::vector<const char*> caps;
  for (const auto& c : r.caps) caps.push_back(c.c_str());
  r.desc.caps = caps.data();
  r.desc.n_caps = static_cast<int32_t>(caps.size());
  r.desc.planted = r.cannot_show ? 1 : 0;
  const std::string_view backend_name = r.desc.backend ? r.desc.backend : "";
  const bool runnable = r.desc.run != nullptr && missing.empty() && backend_name == kBuilt;
  const AbiBackend* backend = nullptr;
#if OPCTS_HAVE_CUDA || OPCTS_HAVE_HIP_BACKEND
  if (runnable) backend = &abi_backend();
  if (runnable && r.prepare) set_prepare(r.desc.run, r.prepare);
#endif
  const std::string why = !missing.empty() ? missing : runnable ? std::string() : not_built(backend_name);
  auto impl = std::make_unique<AbiImpl>(r.desc, backend, why);
  if (r.cannot_show) impl->set_cannot_show(std::move(r.cannot_show));
  if (r.plant_inputs) impl->set_planted_inputs(std::move(r.plant_inputs));
  if (r.plant_outputs) impl->set_planted_outputs(std::move(r.plant_outputs));
  if (r.blind_spot) impl->set_blind_spot(std::move(r.blind_spot));
  impl->set_bug_needs_bitwise(r.bug_needs_bitwise);
  impl->set_bug_needs_capture(r.bug_needs_capture);
  if (r.tactics) impl->set_tactics(r.tactics);
  impl->set_deterministic_tactic(r.deterministic_tactic);
  reg.add(std::move(impl));
}

// The hip.* twin of a cuda.* row: the same callbacks, tactics and impl data, HIP's capabilities.
Row hip_twin_of(const Row& r, std::string& name) {
  const std::string cuda_name = r.desc.name ? r.desc.name : "";
  if (r.cannot_show || cuda_name.rfind("cuda.", 0) != 0)
    throw std::logic_error("hip twin of '" + cuda_name + "': only an unplanted cuda.* row has one");
  name = "hip." + cuda_name.substr(5);
  Row t = r;                   // its callbacks, preparation, tactics and determinism claims
  t.desc.name = name.c_str();  // AbiImpl copies it
  t.desc.backend = "hip";
  t.caps = r.hip_caps;
  t.hip_twin = false;
  return t;
}

}  // namespace

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
  std::vector<Row> twins;
  std::vector<std::string> twin_names;
  twin_names.reserve(rows.size());  // the twins' descriptors point into it
  for (const Row& r : rows)
    if (r.hip_twin) twins.push_back(hip_twin_of(r, twin_names.emplace_back()));
  for (Row& r : rows) add_row(reg, r, missing);
  for (Row& t : twins) add_row(reg, t, "");
}

}  // namespace opcts::cuda
