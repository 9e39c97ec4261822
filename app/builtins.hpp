// The composition root: the registry of every family and impl this binary carries.
#pragma once

#include <string>
#include <vector>

#include "core/family.hpp"

namespace opcts {

/// Adds every family and impl compiled into this binary to `reg`.
void register_builtins(Registry& reg);

/// Every family and impl compiled into this binary (built once, on first use). Only the top
/// floor (app/, tests, benchmarks) reaches for it; everything below takes a Registry.
const Registry& builtin_registry();

/// The built-ins plus the impls of `plugins` (app/plugins.hpp), built on the first call and
/// kept for the process (one command, one plugin list); the built-ins alone for none. A
/// plugin that cannot be used is reported on stderr, naming it, and left out.
const Registry& registry_for(const std::vector<std::string>& plugins);

}  // namespace opcts
