// The CUDA sdpa rows' determinism claim on the CPU: sdpa_kernel_deterministic is asked with the
// problem's ABI parameters alone (no tensors), and must name the kernel the run takes, whose key
// block decides whether dQ's fp32 atomics can land in another order (more than two blocks a row).
#include <gtest/gtest.h>

#include "app/builtins.hpp"
#include "core/abi_impl.hpp"
#include "families/sdpa/cuda/sdpa_launch.hpp"
#include "families/sdpa/sdpa.hpp"

namespace opcts {
namespace {

int32_t flash_deterministic(const char* id) {
  const Family& f = *builtin_registry().family("sdpa");
  const ProblemPtr p = f.parse_id(id);
  const auto c = abi_struct<opcts_sdpa_params>(f.abi_params(*p));
  static constexpr cuda::SdpaRow kFlash{cuda::SdpaKernel::flash};
  return cuda::sdpa_kernel_deterministic(&kFlash, &c);
}

// A mask tensor sends the backward to the FMA kernel (32 keys a block): Sk 77 is three blocks
// there, so dQ is not reproducible, although the tensor-core kernel (64 keys) would take it in
// two. Seen on an H100 with --bitwise (2026-12-05), when the claim looked at the mask's pointer.
TEST(SdpaCudaGlue, TheBackwardsDeterminismFollowsTheKernelItRuns) {
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask_amask_bwd"), 0);
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask_bmask_bwd"), 0);
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk64_d64_nomask_amask_bwd"), 1);  // two blocks of 32
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask_bwd"), 1);        // two blocks of 64
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk129_d64_nomask_bwd"), 0);       // three blocks of 64
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask"), 1);            // the forward
}

// cuDNN's claim (sdpa_cudnn_row_deterministic): not the backward (dQ's atomics) nor a decode
// forward (one query row: lse differed by a bit on two H100s), every other forward.
TEST(SdpaCudaGlue, CudnnClaimsNoDeterminismForBackwardOrDecode) {
  const Family& f = *builtin_registry().family("sdpa");
  const Impl* cudnn = builtin_registry().impl("cuda.cudnn");
  ASSERT_NE(cudnn, nullptr);
  const ProblemPtr fwd = f.parse_id("bf16_b1_hq32_hkv8_sq4_sk4096_d128_nomask");
  const ProblemPtr bwd = f.parse_id("bf16_b1_hq4_hkv4_sq64_sk512_d64_causal_ul_bwd");
  // Without cuDNN in the build the row has no claim callback (every case SKIPs there).
  if (cudnn->deterministic(*bwd)) GTEST_SKIP() << "built without cuDNN: cuda.cudnn has no claim";
  EXPECT_TRUE(cudnn->deterministic(*fwd));
  EXPECT_FALSE(cudnn->deterministic(*f.parse_id("bf16_b1_hq32_hkv8_sq1_sk4096_d128_nomask")));
}

}  // namespace
}  // namespace opcts
