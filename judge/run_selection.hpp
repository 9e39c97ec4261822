// What a run was asked to run, written into its reports so that `opcts gate DIR` knows, with no
// flags, what should have run: the selection (arch, tier, families, filters, plugins, manifests,
// catalogs, with digests of their files), the opcts that ran it, and the planned case ids'
// count and digest, for the shard and for the whole selection.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace opcts {

/// A file the selection read, with the digest of its bytes when it ran (core/digest.hpp).
struct SelectedFile {
  std::string path, digest;
  bool operator==(const SelectedFile&) const = default;
};

/// A plugin of the selection: its file, whether the user marked it optional (--plugin-optional),
/// why it was not used ("" when it was) and the impls it added.
struct SelectedPlugin {
  std::string path, digest;
  bool optional = false;
  std::string error;
  std::vector<std::string> impls;
  bool operator==(const SelectedPlugin&) const = default;
};

/// How far the run that wrote a report got: its reports are rewritten at each step.
enum class RunState { started, planned, finished, stopped };
std::string_view to_string(RunState s);

struct RunSelection {
  RunState state = RunState::started;
  std::string opcts_version, opcts_commit, ref_digest;
  std::string arch, tier, shard = "1/1";
  std::vector<std::string> families, filters, excludes;
  bool include_planted = false, bitwise = false, invariance = false, capture = false;
  std::string cases_dir;
  std::vector<SelectedPlugin> plugins;
  std::vector<SelectedFile> manifests, catalogs;
  std::vector<std::string> planted;  // the planted impls of its cases (the gate's coverage notes them apart)
  // The plan: this shard's case ids, and the whole selection's (every shard's) ids.
  std::size_t planned = 0, selected = 0;
  std::string planned_digest, selected_digest;
  std::string error;  // why the run ended before it planned (a plugin it cannot use, a bad catalog)

  /// The selection without its shard, plan state or counts: equal for every shard of one run
  /// (a digest of the fields that define what runs; files by their digests, not their paths,
  /// since shards may run in other folders or on other machines).
  std::string key() const;
  /// The shard as (i, N); (1, 1) unsharded.
  std::pair<int, int> shard_of() const;
  /// One line for messages: "host smoke (families sdpa; filters 'x*')".
  std::string describe() const;
  /// Whether `r` belongs to this selection by the predicate a record shows (arch, family, tier,
  /// filters, excludes): select_cases's, without sharding.
  bool covers(const ResultRecord& r) const;

  /// The results file's header line: {"opcts_selection": {...}} (core/result.hpp's prefix).
  std::string header_line() const;
  /// The JSON object alone (JUnit carries it as a property's value).
  std::string json() const;
  /// Parses json() or header_line(); throws std::runtime_error naming the bad field.
  static RunSelection parse(const std::string& text);
};

/// digest_of the ids sorted and joined by '\n'.
std::string ids_digest(std::vector<std::string> ids);

}  // namespace opcts
