// A catalog's `samples:` blocks: seeded draws over a family's field table, each drawn problem a
// catalog entry with its canonical id (so list, repro, manifests, shards and resume treat it
// as any grid point).
//
//   samples:
//     - name: shapes                      # the block's name (with the seed, its random stream)
//       why: what the draws are for
//       seed: 1                           # the geometry seed
//       count: {smoke: 2, default: 16, full: 128}   # or one number under `tier:`
//       attempts: 50                      # draws of one problem before the block fails (default 50)
//       axes:                             # a distribution per field, drawn in this order
//         dtype: {choice: [fp16, bf16], weights: [3, 1]}
//         sq: {log_uniform: [1, 4096]}    # integers, uniform octave then uniform inside it (from
//                                         # lo = 0, 0 is an octave of its own)
//         d: {uniform: [1, 256]}          # integers, inclusive
//         hkv: {divisor_of: hq}           # a divisor of an axis drawn before it, uniformly
//       fixed: {causal: none}             # fields every draw shares
//
// Draw i of a block is problem i of the sequence; tier T holds draws 0 .. count(T) − 1, so a
// smaller tier's draws are a prefix of a larger one's. A draw whose point the family refuses
// (its contract: `hkv` not dividing `hq`, a size past a limit) is drawn again, up to
// `attempts` times. Every draw is integer arithmetic on Philox4x32-10 bits (no libm), so a seed
// gives the same ids on every machine.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/family.hpp"
#include "core/yaml_util.hpp"

namespace opcts {

/// One drawn problem: its catalog point (a YAML map the family parsed), the problem and the
/// lowest tier that holds it.
struct SampleDraw {
  YAML::Node point;
  ProblemPtr problem;
  Tier tier = Tier::full;
  int64_t index = 0;  // its place in the block's sequence
};

/// What may replace a block's own seed and counts (`opcts sample --seed S --count N`).
struct SampleOverride {
  std::optional<uint64_t> seed;
  std::optional<int64_t> count;  // every tier draws this many
};

/// The most draws one block may hold (its largest count): a sample is a few hundred problems,
/// and a typo must not plan millions.
inline constexpr int64_t kMaxSampleDraws = 100'000;

/// The largest count of a `samples:` block (its full tier's), 0 where the block is malformed
/// (draw_sample names the fault); for counting a catalog's points before anything expands.
int64_t sample_size(const YAML::Node& block);

/// Draws a block's problems for family `f`, in sequence order. Throws YamlError naming the file,
/// line and key on a malformed block (an unknown distribution, weights that do not match the
/// choices, a `divisor_of` naming an axis not drawn before it, counts that shrink from a smaller
/// tier to a larger one, a count past kMaxSampleDraws), and naming the draw and the family's last
/// refusal when `attempts` draws of one problem all fail its contract.
std::vector<SampleDraw> draw_sample(const Family& f, const std::string& path, const YAML::Node& block,
                                    const SampleOverride& override = {});

}  // namespace opcts
