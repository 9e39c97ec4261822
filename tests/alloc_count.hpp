// Heap allocations counted per thread (tests/alloc_count.cpp replaces the global operator new
// of the test binary): an operation count for complexity tests, which a loaded machine cannot
// make fail the way it does a wall-clock bound.
#pragma once

#include <cstddef>

namespace opcts::testutil {

/// How many times this thread has called operator new (any form) since it started.
std::size_t allocations_on_this_thread();

/// The allocations this thread makes while running f().
template <typename F>
std::size_t allocations_during(F&& f) {
  const std::size_t before = allocations_on_this_thread();
  f();
  return allocations_on_this_thread() - before;
}

}  // namespace opcts::testutil
