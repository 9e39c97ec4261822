// One vocabulary: grouped_mm's mode and recipe are enums valued by the ABI's constants, each
// named by one table; an ABI struct whose value the enum does not name is refused, naming the field.
#include <gtest/gtest.h>

#include <cstring>

#include "app/builtins.hpp"
#include "core/errors.hpp"
#include "families/grouped_mm/cuda/grouped_mm_kernels.hpp"
#include "families/grouped_mm/grouped_mm.hpp"
#include "tests/test_family_util.hpp"

namespace opcts {
namespace {

using grouped_mm::Mode;
using grouped_mm::Problem;
using grouped_mm::Recipe;

TEST(GroupedMmVocabulary, EveryModeAndRecipeRoundTripsThroughTheAbi) {
  testutil::expect_vocabulary_round_trip(grouped_mm::fields(), "mode", &Problem::mode, &opcts_grouped_mm_params::mode,
                                         &grouped_mm::abi_params, "{recipe: bf16, groups: 2, m: 64, n: 64, k: 64}");
  testutil::expect_vocabulary_round_trip(grouped_mm::fields(), "recipe", &Problem::recipe,
                                         &opcts_grouped_mm_params::recipe, &grouped_mm::abi_params,
                                         "{mode: 2d_3d, groups: 2, m: 64, n: 64, k: 64}");
}

TEST(GroupedMmVocabulary, TheKernelsModeIsSpelledWithTheSameConstants) {
  for (const auto& n : grouped_mm::kModeNames)
    EXPECT_EQ(static_cast<int32_t>(as_kernel<cuda::GroupedMode>(n.value)), abi_value(n.value)) << n.yaml;
}

// host.grouped is an ABI row: a problem carrying a mode or recipe the ABI does not name (what a
// later version or a corrupted struct sends) is refused by supports, and by run with the
// struct's field as the argument.
TEST(GroupedMmVocabulary, AnAbiRowRefusesAValueTheAbiDoesNotName) {
  const Impl& impl = *builtin_registry().impl("host.grouped");
  const Problem good{.mode = Mode::m2d_3d, .recipe = Recipe::bf16, .groups = 2, .m = 32, .n = 16, .k = 16};
  EXPECT_TRUE(impl.supports(good, testutil::host_arch()).ok);

  Problem bad_recipe = good;
  bad_recipe.recipe = static_cast<Recipe>(7);
  const Support s = impl.supports(bad_recipe, testutil::host_arch());
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("recipe = 7"), std::string::npos) << s.reason;

  Problem bad_mode = good;
  bad_mode.mode = static_cast<Mode>(-1);
  EXPECT_FALSE(impl.supports(bad_mode, testutil::host_arch()).ok);
  const TensorMap in = grouped_mm::make_inputs(good, 1);
  try {
    impl.run(bad_mode, in, RunContext{&testutil::host_arch(), -1});
    ADD_FAILURE() << "ran a mode the ABI does not name";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument, "mode");
  }
}

}  // namespace
}  // namespace opcts
