// Planted scaled_mm bugs shared by the host emulation and the cuBLASLt glue: which problems show each, and the wrong
// inputs it hands the impl.
//
// Each bug is applied to what an impl is given (inputs) so that the host emulation of the
// Hopper accumulator (host.emulated_hopper_*) and cuBLASLt itself (cuda.cublaslt_*) make the
// same mistake with their own arithmetic; the suite must FAIL every case they run, under the
// accumulator model of their arch (cases/manifests/sm90.yaml), with the per-element bound or
// the bias check (judge/accumulator.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "families/scaled_mm/scaled_mm.hpp"

namespace opcts::scaled_mm {

enum class PlantedBug {
  none,
  block_scale_doubled,   // A's scale of row 0, K block 0 twice what it is (a block-scale index bug)
  k_block_scale_zeroed,  // A's scales of K block 0 zero for every row (a K block dropped)
  no_out_scale,          // the e4m3fn output scale ignored (taken as 1)
  scale_error,           // every A and B scale off by 2^-8 relative (×(1 + 2^-8)): seen only in aggregate
  no_bias,               // the bias dropped
  half_k,                // the second half of K dropped (A's codes there read as 0)
  out_times_2,           // the result doubled (every A scale, or the NVFP4 global scale, ×2)
  product_low,           // every product 2^-8 low (every A scale × (1 − 2^-8)): seen only by the bias check
  product_high,          // every product 2^-8 high (every A scale × (1 + 2^-8))
  drop_last_k_step,      // the last MMA step of K dropped (A's codes of the last 32 K elements read as 0):
                         // a FAST_ACCUM main loop that stops one step short
  saturate_at_240,       // e4m3fn results clamped to ±240, e4m3fnuz's largest value, not e4m3fn's 448: a
                         // satfinite conversion ported from MI300's FNUZ format (an output bug)
};
/// The K elements of one FP8 MMA step (a Hopper wgmma's K): what drop_last_k_step drops.
constexpr int64_t kPlantedKStep = 32;
/// "block_scale_doubled", ...: the suffix of the planted impls' names.
std::string_view to_string(PlantedBug b);
/// Every bug but none.
const std::vector<PlantedBug>& planted_bugs();

/// Why `bug` cannot show on `p` ("" when it can): negative cases and empty products; a bug that
/// does not exist in the problem (no output scale other than 1 or no bias to drop, e8m0 / ue4m3
/// scales that cannot carry a 2^-8 error, no result that rounds past 240); results pushed past
/// fp16's range, where a wrong result is the same ±inf. Only problems where the bug changes no
/// output value: where the bound may not see it is planted_bug_blind_spot's.
std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug);
/// Why the bound may not see `bug` on `p` although it changes the output ("" where it must be
/// caught; Impl::blind_spot), derived in planted.cpp: the bias check's band reaching past the
/// slope of a 2^-8 scale or product error or of a doubling on a scaled-up e4m3fn output, row 0
/// doubled inside its per-element bounds there (rowwise), a dropped K step holding too small a share of
/// the products' squares. Such cases run; a pass is listed apart from the bound's defects.
std::string planted_bug_blind_spot(const Problem& p, PlantedBug bug);

/// The inputs with the bug applied (scales, codes, out_scale or bias changed; the layouts kept).
TensorMap planted_inputs(const Problem& p, const TensorMap& inputs, PlantedBug bug);
/// The outputs an impl returned with an output bug applied (saturate_at_240: d's results past
/// ±240 set to ±240); the others return them unchanged.
TensorMap planted_outputs(const Problem& p, TensorMap outputs, PlantedBug bug);

}  // namespace opcts::scaled_mm
