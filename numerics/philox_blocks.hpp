// The code paths of random_blocks (numerics/rng.hpp), for tests that compare each path the CPU has
// against the scalar Random123 call. Callers use random_blocks, which takes the best path.
#pragma once

#include <cstdint>
#include <vector>

namespace opcts::detail {

enum class PhiloxPath { scalar, avx2, avx512 };

/// The paths this CPU can run, scalar first.
std::vector<PhiloxPath> supported_philox_paths();
/// random_blocks on one path; the path must be in supported_philox_paths().
void random_blocks_on(PhiloxPath path, uint64_t seed, uint32_t stream, uint64_t first, int64_t count, uint32_t* out);

}  // namespace opcts::detail
