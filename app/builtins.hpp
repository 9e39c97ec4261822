// The composition root: the registry of every family and impl this binary carries.
#pragma once

#include <string>
#include <vector>

#include "app/plugin_probe.hpp"
#include "core/family.hpp"

namespace opcts {

/// Adds every family and impl compiled into this binary to `reg`.
void register_builtins(Registry& reg);

/// Every family and impl compiled into this binary (built once, on first use). Only the top
/// floor (app/, tests, benchmarks) reaches for it; everything below takes a Registry.
const Registry& builtin_registry();

/// The built-ins plus the impls of `plugins` and `optional` plugins, for planning: each
/// plugin is probed in a child process (app/plugin_probe.hpp: no plugin code runs in this one)
/// and its impls added as ProbedImpls, whose supports() ask_supports answers. Built on the
/// first call and kept for the process (one command, one plugin list); the built-ins alone for
/// none. A plugin of `plugins` that cannot be used (missing, no entry point, another ABI, a
/// duplicate or malformed impl, an unknown family, a crash or hang while loading) throws
/// std::runtime_error naming it and why; one of `optional` is left out with a warning.
const Registry& registry_for(const std::vector<std::string>& plugins, const std::vector<std::string>& optional = {});

/// What registry_for found of each plugin, in the order given (for the run's selection).
const std::vector<PluginStatus>& plugin_statuses();
/// The plugins registry_for loaded (what workers must load too).
std::vector<std::string> loaded_plugins();

/// The built-ins plus `plugins` loaded into this process (dlopen): for the processes that run
/// plugin code by design (a worker, a probe, `opcts repro`). Throws std::runtime_error naming a
/// plugin that cannot be used. Built once per process, like registry_for.
const Registry& loaded_registry_for(const std::vector<std::string>& plugins);

}  // namespace opcts
