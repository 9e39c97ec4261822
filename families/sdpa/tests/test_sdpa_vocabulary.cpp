// One vocabulary: sdpa's mask, mask tensor, layout and direction are enums valued by the ABI's
// constants, each named by one table.
#include <gtest/gtest.h>

#include "families/sdpa/cuda/sdpa_kernels.hpp"
#include "families/sdpa/sdpa.hpp"
#include "tests/test_family_util.hpp"

namespace opcts {
namespace {

using sdpa::Problem;

TEST(SdpaVocabulary, EveryEnumeratorRoundTripsThroughTheAbi) {
  const std::string base = "{dtype: bf16, batch: 1, heads: 2, seq: 8, head_dim: 16}";
  testutil::expect_vocabulary_round_trip(sdpa::fields(), "mask", &Problem::mask, &opcts_sdpa_params::mask,
                                         &sdpa::abi_params, base);
  testutil::expect_vocabulary_round_trip(sdpa::fields(), "attn_mask", &Problem::mask_tensor,
                                         &opcts_sdpa_params::attn_mask, &sdpa::abi_params, base);
  testutil::expect_vocabulary_round_trip(
      sdpa::fields(), "layout", &Problem::layout, &opcts_sdpa_params::layout, &sdpa::abi_params, base,
      std::function<void(YAML::Node&, sdpa::Layout)>([](YAML::Node& m, sdpa::Layout l) {
        if (l == sdpa::Layout::paged) m["page_size"] = 16;
      }));
  testutil::expect_vocabulary_round_trip(sdpa::fields(), "kv_layout", &Problem::kv_layout,
                                         &opcts_sdpa_params::kv_layout, &sdpa::abi_params,
                                         "{dtype: bf16, heads: 2, seq: 8, head_dim: 16, layout: paged, page_size: 4}");
  testutil::expect_vocabulary_round_trip(sdpa::fields(), "direction", &Problem::direction,
                                         &opcts_sdpa_params::direction, &sdpa::abi_params, base);
}

TEST(SdpaVocabulary, TheKernelsMasksAreSpelledWithTheSameConstants) {
  for (const auto& n : sdpa::kMaskNames)
    EXPECT_EQ(static_cast<int32_t>(as_kernel<cuda::SdpaMask>(n.value)), abi_value(n.value)) << n.yaml;
  for (const auto& n : sdpa::kMaskTensorNames)
    EXPECT_EQ(static_cast<int32_t>(as_kernel<cuda::SdpaMaskTensor>(n.value)), abi_value(n.value)) << n.yaml;
  EXPECT_EQ(as_kernel<cuda::SdpaMask>(sdpa::Mask::causal_lower_right), cuda::SdpaMask::causal_lower_right);
  EXPECT_EQ(as_kernel<cuda::SdpaMaskTensor>(sdpa::MaskTensor::additive), cuda::SdpaMaskTensor::additive);
}

}  // namespace
}  // namespace opcts
