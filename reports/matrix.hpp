// The enablement matrix: family × impl × arch cells (enabled, partial, unsupported, ...) from reports of several archs.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/result.hpp"

namespace opcts {

/// The state of one family × impl on one arch, judged from the records' outcomes.
enum class CellState {
  enabled,      // every case that ran passed (skips by capability may sit beside them)
  partial,      // no unexpected failure, but n cases are XFAIL (reasons listed)
  unsupported,  // every case is SKIP for a capability the arch lacks (or a run option, --bitwise)
  skipped,      // every case is SKIP and the manifest skips some of them
  failing,      // some case fails the gate (FAIL, ERROR, CRASH, TIMEOUT, XPASS, FLAKE, MISTRUSTED)
  not_run,      // no record
  not_tested,   // no case ran and some SKIP for another reason (the impl's support, a build without the
                // backend, the host's memory): the gate fails it (judge/gate.hpp skip_excuses_impl)
};
std::string_view to_string(CellState s);

/// Where a SKIP comes from, read from its reason (Suite::skip_reason's wording).
enum class SkipKind { capability, manifest, not_built };
SkipKind skip_kind(const std::string& message);

struct MatrixCell {
  CellState state = CellState::not_run;
  std::size_t total = 0, pass = 0, xfail = 0, failing = 0;
  std::size_t skip_capability = 0, skip_manifest = 0, skip_not_built = 0;
  std::size_t skip_unexcused = 0;  // SKIPs that leave an impl not tested (skip_excuses_impl)
  // Cases that ran under a stand-in accumulator model (ResultRecord::provisional): the cell's
  // verdict holds under that model only, until the arch's model is measured.
  std::size_t provisional = 0;
  std::map<std::string, std::size_t> xfail_reasons;  // the xfail entry's reason → cases
  std::map<std::string, std::size_t> skip_reasons;   // SKIP message → cases
  // Tactic coverage of an impl with tactics (ids "<…>/<problem>/<tactic>"): per tactic, its
  // cases, those that ran (not SKIP) and those that passed.
  struct TacticCount {
    std::size_t cases = 0, ran = 0, pass = 0;
  };
  std::map<std::string, TacticCount> tactics;
};

struct EnablementMatrix {
  std::vector<std::string> archs;                                                 // sorted
  std::vector<std::pair<std::string, std::string>> rows;                          // (family, impl), sorted
  std::map<std::tuple<std::string, std::string, std::string>, MatrixCell> cells;  // (family, impl, arch)
  /// The cell, or a not_run cell when no record holds that family × impl × arch.
  const MatrixCell& cell(const std::string& family, const std::string& impl, const std::string& arch) const;
};

/// Groups records (any archs, outcomes as written by the run) into the matrix.
EnablementMatrix enablement_matrix(const std::vector<ResultRecord>& records);

/// A cell in a few words: "enabled (12)", "partial: 3/40 xfail", "unsupported", "failing: 2/40", "not run";
/// ", provisional (N)" after it when N of its cases ran under a stand-in accumulator model.
std::string cell_text(const MatrixCell& c);

/// Markdown for a CI job summary: a legend, one table row per family × impl with one column
/// per arch, then per partial/unsupported/skipped cell its reasons (top 5, with counts), then
/// per cell of an impl with tactics how many cases of each tactic ran and passed.
std::string matrix_markdown(const EnablementMatrix& m);

}  // namespace opcts
