// One vocabulary: scaled_mm's recipe is one enum valued by the ABI's constants, named by one table.
#include <gtest/gtest.h>

#include "families/scaled_mm/scaled_mm.hpp"
#include "tests/test_family_util.hpp"

namespace opcts {
namespace {

TEST(ScaledMmVocabulary, EveryRecipeRoundTripsThroughTheAbi) {
  testutil::expect_vocabulary_round_trip(scaled_mm::fields(), "recipe", &scaled_mm::Problem::recipe,
                                         &opcts_scaled_mm_params::recipe, &scaled_mm::abi_params,
                                         "{m: 128, n: 256, k: 512}");
}

}  // namespace
}  // namespace opcts
