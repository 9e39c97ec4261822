// Where the checks of a case may not see a precision plant of host.flash or of
// host.normalised_p_fp8 (Impl::blind_spot).
#pragma once

#include <string>
#include <vector>

#include "core/family.hpp"
#include "families/sdpa/host/sdpa_flash.hpp"

namespace opcts::host_sdpa {

/// Why the checks may not see `plant` on this case, or "" where they should have. The plant's
/// own change to each output it moves is measured against host.flash's on the case's inputs
/// (fp8_p_unscaled's against host.normalised_p_fp8's)
/// (both before a forward's rounding of O to the dtype, whose flips are not the plant's), and
/// judged under the key its rule judged the output by (CaseEvidence::judged_under):
///   - an output with an energy check (O under flash_fp32 / flash_fp32_rn): the change's weighted
///     root ‖Δ‖_w fits within √(L² − M_min), the room the limit L leaves above the least error
///     energy M_min a correct kernel is expected to have — each modelled rounding (P's and O's) at
///     its binade's finest spacing, a quarter of the roundings' trace (the variance proxy b²/3
///     with b = u·|x| charges the coarsest: families/sdpa/bound.hpp), its score, sum and outright
///     terms at 0. A kernel whose roundings fall there and which adds the plant's stays under L in
///     expectation: no check that passes every correct kernel by this model tells them apart.
///     Its per-element bounds, set at λ = 4 of the same roundings, see less of a few extra
///     roundings than the energy does (judge/error_energy.hpp), and an exact kernel plus the
///     plant's change is no model of them there: the plant's rounding of the accumulator and O's
///     own rounding fall on one grid (a row of one tile rounds twice to it);
///   - any other output (lse, dsinks, dbias, an fp8 O that may saturate), judged per element: an exact kernel
///     changed as the plant changes it passes every element — RN(x_i + δ_i) within the rule's
///     bound of x_i, e_i + s_i/2 with e_i the larger of the reference's bound and the rule's
///     factor times the same-precision pipeline's error over the element's row (Family::outputs;
///     judge/compare.cpp), s_i the output's spacing: the plant's change fits within what the
///     check allows any kernel on this case, so no per-element check of this rule sees it.
/// Every output the plant moves must be so; an output it leaves bit for bit alone needs nothing.
/// `outputs`: the family's output specs for the problem (names and rows).
std::string precision_blind_spot(const sdpa::Problem& p, const CaseEvidence& evidence, Plant plant,
                                 const std::vector<OutputSpec>& outputs);

/// Where a variant-tile plant's pass is no defect of --invariance: on this case's inputs the
/// small tiles (sdpa::kBatchVariantTile keys) give every element the check compares the very bytes
/// of host.flash's 64-key tiles (each row's running maximum settled where both tilings agree).
/// batch_variant_tiles: batch entry 0, which the batch_size check runs alone (host.flash computes
/// each entry alone, so the small tiles over the whole case give entry 0 what the batch of one
/// gives it); packed_variant_tiles: every element, the case's layout against its packing twin's.
/// "" where a byte differs.
std::string tiles_blind_spot(const sdpa::Problem& p, const TensorMap& inputs, Plant plant);

/// Where a plant's pass is no defect because, on this case's inputs, it changes no byte of any
/// output against host.flash (fp8_p_unscaled: against host.normalised_p_fp8) (a transposed read of a mask whose
/// elements it swaps are equal, a one-key row whose P is 1 either way): "" where a byte differs.
std::string unchanged_blind_spot(const sdpa::Problem& p, const TensorMap& inputs, Plant plant);

}  // namespace opcts::host_sdpa
