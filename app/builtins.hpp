// The composition root: the registry of every family and impl this binary carries.
#pragma once

#include "core/family.hpp"

namespace opcts {

/// Every family and impl compiled into this binary (built once, on first use). Only the top
/// floor (app/, tests, benchmarks) reaches for it; everything below takes a Registry.
const Registry& builtin_registry();

}  // namespace opcts
