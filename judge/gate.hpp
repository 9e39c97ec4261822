// The gate: one pure function that judges result records against an arch's manifest and plan.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "judge/manifest.hpp"
#include "judge/run_selection.hpp"

namespace opcts {

/// One case the gate names: its outcome after the manifest and why it is there.
struct GateFinding {
  std::string id;
  Outcome outcome = Outcome::MISSING;
  std::string why;
};

/// What the gate decided. `offending` (cases) and `problems` (the run as a whole: a shard
/// without a report, an impl that ran nothing, fewer cases run than --min-run, a plan the
/// reports do not hold) fail the gate; `notes` (known flakes, results the plan did not ask
/// for, cases that ran although the manifest skips them, optional plugins left out) and
/// `stale` entries are printed but never fatal.
struct GateVerdict {
  std::vector<GateFinding> offending;
  std::vector<std::string> problems;
  std::vector<GateFinding> notes;
  std::vector<std::string> run_notes;
  std::vector<ManifestEntry> stale;
  std::map<Outcome, std::size_t> counts;  // one per judged record, plus MISSING per absent id
  bool passed() const { return offending.empty() && problems.empty(); }
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

/// The gate over records as the run that wrote them judged them: each record's `outcome` (the
/// run's manifest applied, its planted impls' implied entries included) and `expectation`
/// ("known flaky (...)" marks a failure under a `flaky` entry: a note). What `opcts gate DIR`
/// uses, which needs neither the manifest nor the plugins: the same table as gate() otherwise.
GateVerdict gate_as_judged(const std::vector<ResultRecord>& results);

/// Whether a SKIP's reason excuses an impl that ran no case: the arch lacks a capability the
/// impl needs ("arch X lacks capability"), the manifest skips it ("manifest skip"), or the run
/// leaves it out by its options (a planted bug only `--bitwise` shows). Any other reason (the
/// impl's own support, a build without its backend, a problem larger than the host) leaves
/// the impl not tested. Reads Suite::skip_reason's wording.
bool skip_excuses_impl(const std::string& message);

/// The run as a whole, added to `v.problems`: fewer than `min_run` records that ran (neither
/// SKIP nor MISSING), and each family × impl × arch of the records that ran no case while some
/// of its SKIPs are not excused (skip_excuses_impl): "not tested". A planted impl of `planted`
/// (the suite's own proof that a bug class is caught, not an impl under test) that ran nothing
/// is a note instead: the selection does not show its bug. `manifest` as in gate(); null: the
/// records' own outcomes (gate_as_judged).
void check_coverage(const std::vector<ResultRecord>& results, const Manifest* manifest, std::size_t min_run,
                    GateVerdict& v, const std::set<std::string>& planted = {});

/// `opcts gate --require-measured-models`, added to `v.problems`: each family × impl × arch
/// with cases that ran under a stand-in accumulator model (ResultRecord::provisional: the arch's
/// manifest measured none), naming the model and how to measure it. Without the flag such
/// verdicts pass, marked provisional in the reports.
void check_measured_models(const std::vector<ResultRecord>& results, GateVerdict& v);

/// The reports' selections (judge/run_selection.hpp; with the file each came from) against
/// the records, added to `v.problems` (and `v.run_notes`): for each selection (all shards of one
/// run), every shard 1..N has a report; none stopped before planning; the records the
/// selection covers (RunSelection::covers) are as many as it planned and have its ids' digest,
/// once every shard is there; each plugin it needed was used (one marked optional that was not
/// is a note). No selection at all is a problem: then nothing says what should have run.
void check_selections(const std::vector<std::pair<RunSelection, std::string>>& selections,
                      const std::vector<ResultRecord>& results, GateVerdict& v);

/// The verdict as text for a terminal or a CI log: one line per offending case (outcome, id,
/// why), the run's problems, the notes, the stale entries and a last line
/// "gate <arch>: PASSED|FAILED ...".
std::string format_verdict(const GateVerdict& v, const std::string& arch);

}  // namespace opcts
