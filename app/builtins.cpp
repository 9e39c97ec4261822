// The composition root: every family and impl this binary carries.
#include "app/builtins.hpp"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "app/plugin_probe.hpp"
#include "app/plugins.hpp"
#include "core/family.hpp"

namespace opcts {

// Each family's three registration functions, declared from the family list (cmake/families.cmake):
// the family (refimpl/<f>_family.cpp), its host impls (gpu/host/) and its CUDA rows
// (families/<f>/cuda/<f>_rows.cpp, in every build, with the hip.* twins of its portable rows:
// where this build has not their backend each row is a SKIP saying why).
#define OPCTS_FAMILY(f)                  \
  void register_##f##_family(Registry&); \
  void register_host_##f(Registry&);     \
  void register_cuda_##f(Registry&);
#include "opcts_families.inc"
#undef OPCTS_FAMILY

void register_builtins(Registry& reg) {
  // Every family first: an impl is registered against its family.
#define OPCTS_FAMILY(f) register_##f##_family(reg);
#include "opcts_families.inc"
#undef OPCTS_FAMILY
#define OPCTS_FAMILY(f)   \
  register_host_##f(reg); \
  register_cuda_##f(reg);
#include "opcts_families.inc"
#undef OPCTS_FAMILY
}

const Registry& builtin_registry() {
  static const Registry reg = [] {
    Registry r;
    register_builtins(r);
    return r;
  }();
  return reg;
}

namespace {

std::vector<PluginStatus> g_statuses;  // registry_for's plugins, as probed

std::string token_of(std::string name) {
  for (char& c : name)
    if (c == '.') c = '_';
  return name;
}

std::string this_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw std::runtime_error("cannot find this program (/proc/self/exe) to start a plugin probe: " + ec.message());
  return p.string();
}

}  // namespace

const Registry& registry_for(const std::vector<std::string>& plugins, const std::vector<std::string>& optional) {
  if (plugins.empty() && optional.empty()) return builtin_registry();
  static const Registry reg = [&] {
    Registry r;
    register_builtins(r);
    const std::string exe = this_exe();
    std::vector<std::pair<std::string, bool>> all;
    for (const auto& p : plugins) all.emplace_back(p, false);
    for (const auto& p : optional) all.emplace_back(p, true);
    for (const auto& [path, is_optional] : all) {
      PluginStatus st = probe_plugin(exe, path, is_optional);
      // The probe checked the impls against the built-ins; against the plugins before it here.
      for (const auto& d : st.impls)
        if (st.error.empty() && (r.impl(d.name) || r.impl_by_id_token(token_of(d.name))))
          st.error = "plugin " + path + " is not used: impl " + d.name +
                     ": another impl has this name (or its id spelling " + token_of(d.name) + ")";
      if (st.error.empty()) {
        for (const auto& d : st.impls) r.add(std::make_unique<ProbedImpl>(d));
      } else {
        st.impls.clear();
        if (!is_optional) {
          g_statuses.push_back(st);
          throw std::runtime_error(st.error + " (a plugin the run may go without is passed with --plugin-optional)");
        }
        std::fprintf(stderr, "opcts: warning: optional plugin left out: %s\n", st.error.c_str());
      }
      g_statuses.push_back(std::move(st));
    }
    return r;
  }();
  return reg;
}

const std::vector<PluginStatus>& plugin_statuses() { return g_statuses; }

std::vector<std::string> loaded_plugins() {
  std::vector<std::string> out;
  for (const auto& st : g_statuses)
    if (st.error.empty()) out.push_back(st.path);
  return out;
}

const Registry& loaded_registry_for(const std::vector<std::string>& plugins) {
  if (plugins.empty()) return builtin_registry();
  static const Registry reg = [&] {
    Registry r;
    register_builtins(r);
    for (const auto& p : plugins)
      if (const std::string err = load_plugin(r, p); !err.empty()) throw std::runtime_error(err);
    return r;
  }();
  return reg;
}

}  // namespace opcts
