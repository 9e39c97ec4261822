// Reads a GEMM path's accumulator model off its answers to designed reductions (opcts probe accumulators).
//
// Each experiment is one output element whose K products are all zero but two: a big product
// 2^8 and a small one next to it or further along K. Two products sum alike in any order, so
// what the path returns — in fp32: the probe needs an fp32 output, which holds 2^8 + 2^-15 —
// shows whether its adder kept the small one. Read in this order (judge/accumulator.hpp's
// AccumulatorModel):
//   bits           2^8 at k = 0 and 2^(8−e) at one k of 1..8 (a path of up to 8 interleaved
//                  accumulators meets 2^8 at one of them): a p-bit adder keeps 2^(8−e) for
//                  e <= p − 1 and loses it from e = p (truncation, or round-to-nearest-even's tie),
//                  so the first e lost anywhere is `bits` (e = 1..23; none lost is an adder as wide
//                  as fp32's, read as IEEE fp32 {24, rne, 0}: an fp32 output shows neither its last
//                  bit nor its rounding)
//   rounding       ±(2^8 + f·u) with u = 2^(9−bits) the adder's spacing at 2^8, the small product
//                  where bits saw it lost: truncation toward zero keeps ⌊f⌋·u, round-to-nearest-
//                  even rne(f)·u (f = 0.75, 1.5, 1.75)
//   promote_every  2^8 at k = 0 and half that spacing at k = j, for every j: lost while j shares the
//                  big product's chunk, kept from the first k of the next chunk on (a chunk without
//                  2^8 sums it exactly, and fp32 adds chunk sums); the first j kept is the chunk
//                  length, none kept is never promoted within K (0). A pattern no chunk length
//                  explains is reported as such: under rne any summation order is bounded
//                  (promote_every 0), under truncation no model is given.
// The products are a[k]·b[k] with every value exact in e4m3fn (and so in e5m2 for the values
// used, bf16, fp16 and fp32): the small ones are placed by b[k] = 2^-9 where a alone cannot
// reach them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "judge/accumulator.hpp"

namespace opcts {

/// One batch of experiments: each row r's output is Σ_k a[r][k]·b[k] over k < k_len (b shared
/// by the rows: it is every column of B). The runner places it in a problem of its family.
struct ProbeBatch {
  int64_t k_len = 0;
  std::vector<double> b;               // [k_len]
  std::vector<std::vector<double>> a;  // [rows][k_len]
};

/// Runs a batch on the path under test; returns each row's output as a double (NaN where the
/// path wrote none). Throws what the path throws (a refusal ends the probe of that path).
using ProbeRun = std::function<std::vector<double>(const ProbeBatch&)>;

/// What the experiments showed: the model (nullopt where no AccumulatorModel explains the
/// answers) and one line per experiment group saying what was seen.
struct ProbeFinding {
  std::optional<AccumulatorModel> model;
  std::vector<std::string> evidence;
  std::string unexplained;  // why no model, "" when there is one
};

/// The K of every experiment: 1024, eight chunks of Hopper's 128 and past cuBLASLt's split-K
/// thresholds for small M·N.
inline constexpr int64_t kProbeK = 1024;

/// Runs the three experiment groups through `run` and reads the model (see the file comment). Throws
/// std::runtime_error when `run` returns another number of sums than the batch has rows.
ProbeFinding probe_accumulator(const ProbeRun& run, int64_t k_len = kProbeK);

}  // namespace opcts
