// The toy family: a throwaway wing that tests/throwaway_family.sh adds to a copy of the tree,
// to show that a new family is its wing and its catalog and nothing else
// (docs/adding-a-family.md). A problem scales a vector by a power of two, y = x · 2^shift, in
// fp32: exact for the inputs drawn (|x| in [2^-4, 2)) and the shifts allowed, so the reference
// is bit-exact.
#pragma once

#include <cstdint>
#include <vector>

#include "core/family.hpp"
#include "core/fields.hpp"

namespace opcts::toy {

struct Problem {
  int64_t n = 0;      // elements of x and y
  int64_t shift = 0;  // y = x · 2^shift
  bool operator==(const Problem&) const = default;
};

/// The field table (fields.cpp): YAML keys n and shift; ids "n4097_s3", "n1_sm2".
const kit::FieldTable<Problem>& fields();
/// Throws std::invalid_argument naming the field: n in [1, 2^24], shift in [-8, 8].
void validate(const Problem& p);
/// x (fp32, n elements), a pure function of (problem, seed) (inputs.cpp).
HostTensor make_input(const Problem& p, uint64_t seed);
/// y's exact values (reference.cpp).
std::vector<double> reference_output(const Problem& p, const HostTensor& x);

}  // namespace opcts::toy

namespace opcts {
void register_toy_family(Registry& reg);
}  // namespace opcts
