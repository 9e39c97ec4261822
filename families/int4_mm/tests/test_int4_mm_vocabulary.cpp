// One vocabulary: int4_mm's format is one enum valued by the ABI's constants, named by one table.
#include <gtest/gtest.h>

#include "families/int4_mm/cuda/int4_mm_kernels.hpp"
#include "families/int4_mm/int4_mm.hpp"
#include "tests/test_family_util.hpp"

namespace opcts {
namespace {

using int4_mm::Format;

TEST(Int4MmVocabulary, EveryFormatRoundTripsThroughTheAbi) {
  testutil::expect_vocabulary_round_trip(int4_mm::fields(), "format", &int4_mm::Problem::format,
                                         &opcts_int4_mm_params::format, &int4_mm::abi_params,
                                         "{dtype: bf16, m: 1, n: 64, k: 512}");
}

TEST(Int4MmVocabulary, TheKernelsFormatIsSpelledWithTheSameConstants) {
  for (const auto& n : int4_mm::kFormatNames)
    EXPECT_EQ(static_cast<int32_t>(as_kernel<cuda::Int4Format>(n.value)), abi_value(n.value)) << n.yaml;
  EXPECT_EQ(as_kernel<cuda::Int4Format>(Format::q4_0), cuda::Int4Format::q4_0);
  EXPECT_EQ(int4_mm::all_formats().size(), int4_mm::kFormatNames.size());
}

}  // namespace
}  // namespace opcts
