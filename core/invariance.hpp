// The invariance contracts (`opcts run --invariance`): the axes of a problem over which an impl
// declares its outputs the same bit for bit, so a row's answer does not depend on the batch
// around it — what serving needs for reproducible decoding (vLLM's and FlashInfer's batch-
// invariance tests; He et al., "Defeating Nondeterminism in LLM Inference", Thinking Machines
// 2025). The runner builds the sub-problems from the case's own problem and inputs
// (runner/invariance.hpp); a family says how each axis cuts its problems (Family::invariance_cut:
// by default the batch of Family::batch_entries and Family::with_batch).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/spellings.hpp"
#include "include/opcts/plugin.h"

namespace opcts {

/// One axis an impl may declare its outputs invariant over (the ABI's OPCTS_INVARIANT_* bits).
enum class InvarianceAxis : uint32_t {
  /// An entry of the batch computed alone (a batch of one) gives the bytes it gets in the batch.
  batch_size = OPCTS_INVARIANT_BATCH_SIZE,
  /// An entry at another position of a batch of the same size (the batch reversed) gives the
  /// bytes it gets at its own.
  batch_position = OPCTS_INVARIANT_BATCH_POSITION,
  /// The same sequences given in the family's other batch layout — a dense (padded) batch packed
  /// into one token dimension with cu_seqlens, or a packed batch of equal lengths as a dense one —
  /// give the same bytes.
  packing = OPCTS_INVARIANT_PACKING,
  /// Every tactic the impl lists for the problem (Impl::tactics) gives the case's bytes: a split
  /// count (split-K, split-KV), tile or algorithm chosen at run time leaves the result alone. Not a
  /// cut: the runner runs the case's own problem and inputs with the other tactics.
  tactic = OPCTS_INVARIANT_TACTIC,
};

inline constexpr Spellings<InvarianceAxis, 4> kInvarianceAxes{{{InvarianceAxis::batch_size, "batch_size"},
                                                               {InvarianceAxis::batch_position, "batch_position"},
                                                               {InvarianceAxis::packing, "packing"},
                                                               {InvarianceAxis::tactic, "tactic"}}};

inline std::string_view to_string(InvarianceAxis a) { return kInvarianceAxes.of(a); }

/// The axes of an ABI bitmask, in the table's order (bits it does not know are left out).
inline std::vector<InvarianceAxis> invariance_axes(uint32_t mask) {
  std::vector<InvarianceAxis> axes;
  for (InvarianceAxis a : kInvarianceAxes.values())
    if (mask & static_cast<uint32_t>(a)) axes.push_back(a);
  return axes;
}

/// A run of elements (element order, not storage) that a sub-problem's tensor shares with the
/// case's tensor of the same name: elements [to, to + count) of the one are [from, from + count)
/// of the other, all of the case's batch entry `entry` (-1: a tensor that does not depend on the
/// batch).
struct SharedRun {
  int64_t to = 0, from = 0, count = 0, entry = -1;
};

}  // namespace opcts
