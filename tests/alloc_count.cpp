// The test binary's global operator new and delete: malloc and free, plus a per-thread count of
// allocations (tests/alloc_count.hpp). The array, nothrow and sized forms of the standard library
// forward to these two; aligned new is not used by the code the count measures.
#include "tests/alloc_count.hpp"

#include <cstdlib>
#include <new>

namespace {
thread_local std::size_t t_allocations = 0;
}  // namespace

void* operator new(std::size_t n) {
  ++t_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace opcts::testutil {

std::size_t allocations_on_this_thread() { return t_allocations; }

}  // namespace opcts::testutil
