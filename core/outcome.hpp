// The closed set of case outcomes and their JUnit meaning (docs/ci.md "JUnit", docs/gate.md).
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace opcts {

/// What happened to one case. Raw outcomes come from running it; XFAIL and XPASS only
/// arise when the arch's manifest expects a failure (see manifest.hpp apply_expectation).
enum class Outcome {
  PASS,        // every output within its bound
  FAIL,        // an output outside its bound, or NaN/Inf in the wrong place
  ERROR,       // an unexpected exception (a typed error where none was expected)
  CRASH,       // the worker process died while running the case
  TIMEOUT,     // the case ran past --timeout; its worker was killed
  SKIP,        // cannot or must not run here: capability or manifest, always with a reason
  XFAIL,       // failed (FAIL/ERROR/CRASH/TIMEOUT) under a manifest xfail entry
  XPASS,       // passed under a strict xfail entry: the entry is stale, remove it
  FLAKE,       // reruns of a failure disagreed (both outcomes are in the message); fails the
               // gate unless a manifest `flaky` entry covers the case
  MISTRUSTED,  // within tolerance but untrustworthy (all zeros, norm 0, more zeros than the
               // family allows: benchdnn's trust check); cannot PASS, fails the gate
  MISSING,     // the plan expected the case but no report holds it (the gate's verdict only)
};

/// Every outcome, in the order reports list them (PASS first, MISSING last).
inline constexpr std::array<Outcome, 11> kAllOutcomes{
    Outcome::PASS,  Outcome::FAIL,  Outcome::ERROR, Outcome::CRASH,      Outcome::TIMEOUT, Outcome::SKIP,
    Outcome::XFAIL, Outcome::XPASS, Outcome::FLAKE, Outcome::MISTRUSTED, Outcome::MISSING};

std::string_view to_string(Outcome o);
/// Parses "PASS", "FAIL", ...; std::nullopt for anything else.
std::optional<Outcome> parse_outcome(std::string_view s);

/// True for the outcomes that make a run (and a CTest shard, and the gate) fail.
bool is_gate_failure(Outcome o);
/// True for FAIL, ERROR, CRASH and TIMEOUT: the outcomes an xfail entry may absorb.
bool is_failure(Outcome o);

}  // namespace opcts
