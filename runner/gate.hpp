// The gate: one pure function that judges result records against an arch's manifest and plan.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "runner/manifest.hpp"
#include "core/result.hpp"

namespace opcts {

/// One case the gate names: its outcome after the manifest and why it is there.
struct GateFinding {
  std::string id;
  Outcome outcome = Outcome::MISSING;
  std::string why;
};

/// What the gate decided. `offending` fails the gate; `notes` (known flakes, results the plan
/// did not ask for, cases that ran although the manifest skips them) and `stale` entries are
/// printed but never fatal.
struct GateVerdict {
  std::vector<GateFinding> offending;
  std::vector<GateFinding> notes;
  std::vector<ManifestEntry> stale;
  std::map<Outcome, std::size_t> counts;  // one per judged record, plus MISSING per absent id
  bool passed() const { return offending.empty(); }
};

/// The outcome of one record under `manifest`, whatever manifest the run used: the record's
/// raw outcome (when a record holds only a mapped XFAIL/XPASS, the FAIL/PASS behind it) goes
/// through a manifest `skip` (SKIP) and then apply_expectation with the manifest's xfail
/// entry. So raw records and records already mapped by a run give the same verdict.
Outcome gate_outcome(const ResultRecord& r, const Manifest& manifest);

/// Judges `results` (one arch) against `manifest` and the plan:
///  - fatal: FAIL/ERROR/CRASH/TIMEOUT without an xfail entry; XPASS (a pass under a strict
///    xfail: "remove this entry: the case now passes"); FLAKE without a `flaky` entry;
///    MISTRUSTED; MISSING (an id of `planned_ids` that no record holds);
///  - not fatal: PASS, SKIP, XFAIL, and FAIL/ERROR/CRASH/TIMEOUT/FLAKE under a `flaky` entry
///    (a note each);
///  - a record whose id is not planned is judged like the others and noted (an empty
///    `planned_ids` means "no plan": nothing is MISSING or unplanned);
///  - stale: manifest entries that match none of `catalog_ids` (every case of the arch, all
///    tiers), or of the planned and result ids when `catalog_ids` is empty.
/// Findings are sorted by id.
GateVerdict gate(const std::vector<ResultRecord>& results, const Manifest& manifest,
                 const std::vector<std::string>& planned_ids, const std::vector<std::string>& catalog_ids = {});

/// The verdict as text for a terminal or a CI log: one line per offending case (outcome, id,
/// why), the notes, the stale entries and a last line "gate <arch>: PASSED|FAILED ...".
std::string format_verdict(const GateVerdict& v, const std::string& arch);

}  // namespace opcts
