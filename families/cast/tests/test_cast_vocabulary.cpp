// One vocabulary: cast's e8m0 rounding is numerics' ScaleRounding, valued by the ABI's constants
// and named by one table.
#include <gtest/gtest.h>

#include "families/cast/cast.hpp"
#include "numerics/minifloat_bits.hpp"
#include "tests/test_family_util.hpp"

namespace opcts {
namespace {

TEST(CastVocabulary, EveryRoundingRoundTripsThroughTheAbi) {
  testutil::expect_vocabulary_round_trip(cast::fields(), "rounding", &cast::Problem::rounding,
                                         &opcts_cast_params::e8m0_rounding, &cast::abi_params,
                                         "{from: fp32, to: e8m0fnu, input: edges}");
}

TEST(CastVocabulary, TheBitsRoundingHoldsTheSameConstants) {
  for (const auto& n : kScaleRoundingNames)
    EXPECT_EQ(static_cast<int32_t>(static_cast<bits::ScaleRound>(abi_value(n.value))), abi_value(n.value)) << n.yaml;
  EXPECT_EQ(static_cast<int32_t>(bits::kRne), abi_value(ScaleRounding::rne));
}

}  // namespace
}  // namespace opcts
