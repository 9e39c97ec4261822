// The grouped-GEMM launchers' argument checks (families/grouped_mm/cuda/grouped_mm_args.cu) run on the
// CPU: shapes per mode, the group count, scale counts per recipe, and the offsets' faults.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "families/grouped_mm/cuda/grouped_mm_args.cuh"

namespace {

using opcts::cuda::GroupedArgumentError;
using opcts::cuda::GroupedMmParams;
using opcts::cuda::GroupedMode;
using opcts::cuda::GroupedRecipe;
namespace grouped = opcts::cuda::grouped;

// A 2d_3d problem of G = 4 groups over 300 rows, K 64, N 48, valid for `recipe` (device
// pointers are stand-ins: validate never dereferences them).
GroupedMmParams two_d_three_d(GroupedRecipe recipe) {
  static const int32_t offs[4] = {};
  static char buf[1];
  GroupedMmParams p;
  p.mode = GroupedMode::m2d_3d, p.recipe = recipe, p.groups = 4;
  p.a = buf, p.a_rows = 300, p.a_cols = 64;
  p.b = buf, p.b_batch = 4, p.b_rows = 64, p.b_cols = 48;
  p.offs = offs, p.offs_count = 4;
  p.out = buf, p.out_rows = 300, p.out_cols = 48;
  if (recipe == GroupedRecipe::fp8_rowwise)
    p.a_scale = buf, p.a_scale_count = 300, p.b_scale = buf, p.b_scale_count = 4 * 48;
  if (recipe == GroupedRecipe::mxfp8) {
    // (rows + 128·G)·round_up(K/32, 4) and G·round_up(N, 128)·round_up(K/32, 4).
    p.a_scale = buf, p.a_scale_count = (300 + 512) * 4;
    p.b_scale = buf, p.b_scale_count = 4 * 128 * 4;
  }
  return p;
}

std::string refused(const GroupedMmParams& p) {
  try {
    grouped::validate(p, "test");
  } catch (const GroupedArgumentError& e) {
    return e.argument;
  }
  return "";
}

TEST(GroupedMmArgs, ValidProblemsPassAndResolveStrides) {
  for (GroupedRecipe r : {GroupedRecipe::bf16, GroupedRecipe::fp8_rowwise, GroupedRecipe::mxfp8}) {
    const GroupedMmParams p = two_d_three_d(r);
    EXPECT_EQ(refused(p), "");
    const grouped::Shape s = grouped::validate(p, "test");
    EXPECT_EQ(s.split, 300);
    EXPECT_EQ(s.lda, 64);
    EXPECT_EQ(s.ldb, 64);        // Bᵀ rows are K long
    EXPECT_EQ(s.b_bs, 48 * 64);  // one group's N·K
    EXPECT_EQ(s.ldo, 48);
  }
}

// The argument the valid 2d_3d problem of `recipe` is refused naming once `edit` has changed it.
template <class Edit>
std::string refused_after(GroupedRecipe recipe, Edit edit) {
  GroupedMmParams p = two_d_three_d(recipe);
  edit(p);
  return refused(p);
}

TEST(GroupedMmArgs, GroupCountOffsetsAndShapesAreRefusedByName) {
  const GroupedRecipe bf16 = GroupedRecipe::bf16;
  EXPECT_EQ(refused_after(bf16, [](GroupedMmParams& p) { p.b_batch = 5; }), "groups");
  EXPECT_EQ(refused_after(bf16, [](GroupedMmParams& p) { p.offs_count = 3; }), "offs");
  EXPECT_EQ(refused_after(bf16, [](GroupedMmParams& p) { p.b_rows = 63; }), "K");
  EXPECT_EQ(refused_after(bf16, [](GroupedMmParams& p) { p.out_rows = 299; }), "out");
  // 3d_3d wants a 3-d A of G batches (and no offsets).
  EXPECT_EQ(refused_after(bf16, [](GroupedMmParams& p) { p.mode = GroupedMode::m3d_3d; }), "groups");
}

TEST(GroupedMmArgs, ScaleCountsFollowTheRecipe) {
  for (GroupedRecipe r : {GroupedRecipe::fp8_rowwise, GroupedRecipe::mxfp8}) {
    EXPECT_EQ(refused_after(r, [](GroupedMmParams& p) { p.a_scale_count -= 1; }), "scale_a");
    EXPECT_EQ(refused_after(r, [](GroupedMmParams& p) { p.b_scale_count += 1; }), "scale_b");
  }
  // K = 48 is not whole MX blocks.
  EXPECT_EQ(refused_after(GroupedRecipe::mxfp8, [](GroupedMmParams& p) { p.a_cols = p.b_rows = 48; }), "K");
}

TEST(GroupedMmArgs, KSplitMxScalesAreSlabsOfTheWholeWidth) {
  static char buf[1];
  static const int32_t offs[3] = {};
  GroupedMmParams p;
  p.mode = GroupedMode::m2d_2d, p.recipe = GroupedRecipe::mxfp8, p.groups = 3;
  p.a = p.b = p.out = buf;
  p.offs = offs, p.offs_count = 3;
  p.a_rows = 200, p.a_cols = 320, p.b_rows = 320, p.b_cols = 70;
  p.out_batch = 3, p.out_rows = 200, p.out_cols = 70;
  const int64_t width = 320 / 32 + 4 * 3;
  p.a_scale = p.b_scale = buf, p.a_scale_count = 256 * width, p.b_scale_count = 128 * width;
  EXPECT_EQ(refused(p), "");
  EXPECT_EQ(grouped::validate(p, "test").mx_width, width);
  p.b_scale_count = 128 * (width - 1);
  EXPECT_EQ(refused(p), "scale_b");
}

TEST(GroupedMmArgs, TheFirstFaultyOffsetIsNamed) {
  using F = grouped::OffsFault;
  EXPECT_EQ(grouped::find_offs_fault({0, 32, 32, 96}, 100, 32).kind, F::none);
  const F dec = grouped::find_offs_fault({32, 96, 64, 200}, 100, 32);
  EXPECT_EQ(dec.kind, F::decreasing);
  EXPECT_EQ(dec.index, 2);
  const F far = grouped::find_offs_fault({32, 101}, 100, 1);
  EXPECT_EQ(far.kind, F::out_of_range);
  EXPECT_EQ(far.index, 1);
  EXPECT_EQ(grouped::find_offs_fault({-1}, 100, 1).kind, F::out_of_range);
  const F odd = grouped::find_offs_fault({16, 40}, 100, 16);
  EXPECT_EQ(odd.kind, F::misaligned);
  EXPECT_EQ(odd.index, 1);
  try {
    grouped::refuse_offs(odd, 100, 16, "test");
    ADD_FAILURE() << "not refused";
  } catch (const GroupedArgumentError& e) {
    EXPECT_EQ(e.argument, "offs");
    EXPECT_NE(std::string(e.what()).find("offs[1]"), std::string::npos);
  }
}

TEST(GroupedMmArgs, OffsetMultiplesPerRecipe) {
  using opcts::cuda::grouped_offs_multiple;
  EXPECT_EQ(grouped_offs_multiple(GroupedMode::m2d_3d, GroupedRecipe::bf16), 1);
  EXPECT_EQ(grouped_offs_multiple(GroupedMode::m2d_3d, GroupedRecipe::fp8_rowwise), 1);
  EXPECT_EQ(grouped_offs_multiple(GroupedMode::m2d_2d, GroupedRecipe::fp8_rowwise), 16);
  EXPECT_EQ(grouped_offs_multiple(GroupedMode::m3d_2d, GroupedRecipe::mxfp8), 32);
  EXPECT_EQ(grouped_offs_multiple(GroupedMode::m3d_3d, GroupedRecipe::mxfp8), 1);
}

}  // namespace
