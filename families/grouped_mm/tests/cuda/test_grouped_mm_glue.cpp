// The CUDA grouped_mm glue on the CPU: every smoke problem's tensors, as the ABI hands them, mapped
// by grouped_kernel_params and judged by the launchers' own checks (validate and the offsets'
// faults), against the family's contract (families/grouped_mm/grouped_mm.hpp contract_violation).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "core/abi_impl.hpp"
#include "families/grouped_mm/cuda/grouped_mm_args.cuh"
#include "families/grouped_mm/cuda/grouped_mm_launch.hpp"
#include "families/grouped_mm/grouped_mm.hpp"
#include "runner/catalog.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

// The launchers' verdict on a problem's tensors: "" or the argument they refuse.
std::string launcher_verdict(const Family& f, const grouped_mm::Problem& p) {
  TensorMap in = f.make_inputs(p, case_seed(f, p));
  HostTensor out(DType::bf16, grouped_mm::out_shape(p));
  AbiTensors t;
  for (auto& [name, x] : in) t.add(name, x, false);
  t.add("out", out, true);
  size_t i = 0;
  for (auto& [name, x] : in) t.descriptors()[i++].data = x.data();
  t.descriptors()[i].data = out.data();
  const auto c = abi_struct<opcts_grouped_mm_params>(f.abi_params(p));
  const cuda::GroupedMmParams k =
      cuda::grouped_kernel_params(c, t.descriptors().data(), static_cast<int32_t>(t.size()), cuda::GroupedPlant::none);
  try {
    const cuda::grouped::Shape s = cuda::grouped::validate(k, "glue test");
    if (k.offs_count > 0) {
      const std::vector<int32_t> offs(k.offs, k.offs + k.offs_count);
      const int64_t multiple = cuda::grouped_offs_multiple(k.mode, k.recipe);
      cuda::grouped::refuse_offs(cuda::grouped::find_offs_fault(offs, s.split, multiple), s.split, multiple,
                                 "glue test");
    }
  } catch (const cuda::GroupedArgumentError& e) {
    return e.argument;
  }
  return "";
}

TEST(GroupedMmGlue, LaunchersJudgeEverySmokeProblemAsTheContractDoes) {
  const Family& f = *builtin_registry().family("grouped_mm");
  int valid = 0, negative = 0;
  for (const auto& e : load_catalogs(builtin_registry(), {(testutil::cases_dir() / "grouped_mm.yaml").string()})) {
    if (e.tier != Tier::smoke) continue;
    const auto& p = e.problem->as<grouped_mm::Problem>();
    const std::string got = launcher_verdict(f, p);
    EXPECT_EQ(got, p.expect_error) << e.problem_id;
    ++(p.expect_error.empty() ? valid : negative);
  }
  EXPECT_GE(valid, 30);
  EXPECT_GE(negative, 10);
}

}  // namespace
}  // namespace opcts
