// dlopen'd plugins: the entry point, the version handshake and all-or-nothing registration.
#include "app/plugins.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#if OPCTS_HAVE_CUDA
#include "gpu/cuda/abi_backend.hpp"
#endif

namespace opcts {

BackendChoice abi_backend_for(const std::string& backend) {
  if (backend == "host") return {&host_abi_backend(), ""};
  if (backend == "cuda") {
#if OPCTS_HAVE_CUDA
    return {&cuda::abi_backend(), ""};
#else
    return {nullptr, "this opcts was built without CUDA (OPCTS_CUDA=OFF or no CUDA toolkit found)"};
#endif
  }
  if (backend == "hip") return {nullptr, "this opcts was built without HIP"};
  return {nullptr, ""};
}

namespace {

// What a plugin asked to add, checked before anything reaches the registry.
struct Staging {
  const Registry* reg = nullptr;
  std::vector<std::unique_ptr<Impl>> impls;
  std::set<std::string> names, tokens;
  std::vector<std::string> errors;
};

std::string token_of(std::string name) {
  for (char& c : name)
    if (c == '.') c = '_';
  return name;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.find('.') == std::string::npos || n.front() == '.' || n.back() == '.') return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
  return true;
}

int32_t add_impl(void* ctx, const opcts_impl_desc* d, char* error, size_t error_size) {
  auto* st = static_cast<Staging*>(ctx);
  auto refuse = [&](const std::string& why) {
    st->errors.push_back(why);
    if (error && error_size) std::snprintf(error, error_size, "%s", why.c_str());
    return 1;
  };
  if (!d || d->struct_size < offsetof(opcts_impl_desc, abi_minor))
    return refuse("an impl descriptor smaller than ABI 1.0's");
  const std::string name = d->name ? d->name : "";
  if (!valid_name(name))
    return refuse("impl name '" + name + "' is not <prefix>.<name> of lowercase letters, digits, '_' and '.'");
  if (!d->family || !st->reg->family(d->family))
    return refuse("impl " + name + ": unknown family '" + std::string(d->family ? d->family : "") + "'");
  const std::string backend = d->backend ? d->backend : "";
  if (backend != "host" && backend != "cuda" && backend != "hip")
    return refuse("impl " + name + ": backend '" + backend + "' is not host, cuda or hip");
  if (!d->run) return refuse("impl " + name + ": no run callback");
  if (st->reg->impl(name) || st->reg->impl_by_id_token(token_of(name)) || !st->names.insert(name).second ||
      !st->tokens.insert(token_of(name)).second)
    return refuse("impl " + name + ": another impl has this name (or its id spelling " + token_of(name) + ")");
  if (d->n_caps < 0 || (d->n_caps > 0 && !d->caps)) return refuse("impl " + name + ": caps list is malformed");
  const BackendChoice b = abi_backend_for(backend);
  st->impls.push_back(std::make_unique<AbiImpl>(*d, b.backend, b.missing));
  return 0;
}

// plugins/python's entry point: the module to import, then what opcts_plugin_init gets; the
// reason it refuses (an import's exception and traceback) in `error`.
using python_init_fn = int32_t (*)(const char* spec, uint32_t abi_version, const opcts_registrar* registrar,
                                   char* error, size_t error_size);

}  // namespace

bool is_python_plugin(const std::string& path) {
  return path.rfind("py:", 0) == 0 || (path.size() > 3 && path.compare(path.size() - 3, 3, ".py") == 0);
}

std::string python_host_library() {
  if (const char* env = std::getenv("OPCTS_PYTHON_HOST"); env && *env) return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "libopcts_python.so";
  const std::filesystem::path dir = exe.parent_path();
  // Beside the binary in a build tree; lib/opcts/ (OPCTS_PYTHON_HOST_FROM_BIN) in an install.
  const std::filesystem::path installed = dir / OPCTS_PYTHON_HOST_FROM_BIN / "libopcts_python.so";
  if (!std::filesystem::exists(dir / "libopcts_python.so", ec) && std::filesystem::exists(installed, ec))
    return installed.lexically_normal().string();
  return (dir / "libopcts_python.so").string();
}

std::string load_plugin(Registry& reg, const std::string& path) {
  const std::string who = "plugin " + path;
  Staging st;
  st.reg = &reg;
  opcts_registrar r{};
  r.struct_size = sizeof r;
  r.ctx = &st;
  r.add_impl = add_impl;
  if (is_python_plugin(path)) {
    // A Python module: the host library (plugins/python) imports it and registers its impls.
    const std::string host = python_host_library();
    void* h = dlopen(host.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h)
      return who + ": cannot load the Python plugin host " + host + ": " + std::string(dlerror()) +
             " (it is built where CMake finds Python's development files: docs/python.md)";
    auto init = reinterpret_cast<python_init_fn>(dlsym(h, "opcts_python_plugin_init"));
    if (!init) return who + ": " + host + " has no entry point 'opcts_python_plugin_init'";
    std::vector<char> error(8192, '\0');
    if (init(path.c_str(), OPCTS_PLUGIN_ABI_VERSION, &r, error.data(), error.size()) != 0) {
      const std::string why = error.data();
      if (std::find(st.errors.begin(), st.errors.end(), why) == st.errors.end())
        st.errors.insert(st.errors.begin(), why.empty() ? std::string("the Python host refused it") : why);
    }
  } else {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return who + ": cannot load: " + std::string(dlerror());
    // The handle stays open for the process: the descriptors' callbacks live in the library.
    auto init = reinterpret_cast<opcts_plugin_init_fn>(dlsym(h, OPCTS_PLUGIN_ENTRY));
    if (!init) return who + ": no entry point '" + std::string(OPCTS_PLUGIN_ENTRY) + "' (see include/opcts/plugin.h)";
    const int32_t rc = init(OPCTS_PLUGIN_ABI_VERSION, &r);
    if (rc != 0)
      st.errors.insert(st.errors.begin(), "its entry point returned " + std::to_string(rc) + " for ABI version " +
                                              std::to_string(OPCTS_PLUGIN_ABI_VERSION) +
                                              " (a version it does not speak?)");
  }
  if (st.errors.empty() && st.impls.empty()) st.errors.push_back("it registered no impl");
  if (!st.errors.empty()) {
    std::string msg = who + " is not used:";
    for (const auto& e : st.errors) msg += " " + e + ";";
    msg.pop_back();
    return msg;
  }
  for (auto& i : st.impls) reg.add(std::move(i));
  return "";
}

}  // namespace opcts
