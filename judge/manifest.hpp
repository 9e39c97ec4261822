// Per-arch expectations (cases/manifests/<arch>.yaml): skip, xfail, flaky and tolerance entries.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/outcome.hpp"
#include "core/result.hpp"
#include "judge/accumulator.hpp"

namespace opcts {

enum class EntryKind { skip, xfail, flaky, tolerance };

/// The most reruns `--reruns` or a manifest `flaky` entry may ask for: a case that crashes on
/// every run costs a worker start each time, so a typo such as 100000000 must not run for days.
inline constexpr int kMaxReruns = 100;
std::string_view to_string(EntryKind k);

/// One manifest entry: a glob over case ids, a required reason and kind-specific fields.
struct ManifestEntry {
  EntryKind kind;
  std::string match;   // fnmatch glob over case ids
  std::string reason;  // required: why the entry exists
  // Where the finding is tracked (is_tracking_reference): a URL, an issue reference or a page
  // of ours. Required of xfail and flaky entries by `opcts manifest lint`; travels into the
  // record (ResultRecord::tracking) and the reports.
  std::string tracking;
  std::string source;    // "path:line"
  bool strict = true;    // xfail: an unexpected pass is XPASS (fails the gate)
  bool planted = false;  // xfail implied by a planted-bug impl (Impl::planted), not by a file
  // xfail: the failure it expects (required in files: FAIL, ERROR, CRASH or TIMEOUT) and,
  // optionally, an RE2 pattern the raw message must contain (e.g. "status 15"). Another
  // outcome or message is an unexpected failure: the entry no longer describes what happens.
  Outcome expect = Outcome::FAIL;
  std::string message;
  // xfail expecting FAIL (required in files, at least one of the two): the failure kinds it
  // expects of each named output (`outputs: {dV: [exceeds_bound]}`) and of the case as a whole
  // (`case: [wrong_refusal]`); every failure of the case must be one of them, so another kind,
  // or any kind of another output, stands. `max_ratio` caps an exceeds_bound's error ÷ bound.
  std::vector<std::pair<std::string, std::vector<FailureKind>>> outputs;
  std::vector<FailureKind> case_kinds;
  std::optional<double> max_ratio;
  int reruns = 0;  // flaky: how often a failure is re-run
  // tolerance: overrides of the table's values (unset fields keep the table's)
  std::string output;     // "" = every output
  std::string output_at;  // "path:line:column" of `output:` (Suite checks it names a real output)
  std::optional<double> factor, atol, rtol, atol_eps;
  std::optional<AccumulatorModel> accumulator;  // bounded: how the impl accumulates on this arch
  std::optional<double> false_alarm;
  // bounded and ref_relative: the reference's bound the impl declares ("warp32", "two_pass"):
  // a plugin's, which cases/tolerances.yaml cannot name (its rules name built-in impls)
  std::optional<std::string> accumulation;
};

/// A parsed manifest with its `extends:` chain flattened: the file's own entries first, so
/// they win over the ones it extends.
class Manifest {
 public:
  /// Loads `path`; `extends: [name]` loads `<dir of path>/<name>.yaml`, and `extends: [p]` with
  /// a path (a '/' or a .yaml/.yml ending) loads p relative to `path`'s folder. Throws YamlError
  /// ("path:line:column: ...") on a malformed file (core/yaml_util.hpp: empty, a second
  /// document, a duplicate key), unknown keys, a value of the wrong kind or out of range, a
  /// missing reason or match, a missing `extends` file, a cycle. An entry that matches no
  /// case is not an error here: the run and the gate print it as stale.
  static Manifest load(const std::string& path);
  /// An empty manifest for archs that have none.
  static Manifest empty(std::string arch);

  const std::string& arch() const { return arch_; }
  const std::string& path() const { return path_; }
  const std::vector<ManifestEntry>& entries() const { return entries_; }
  /// The first entry of the kind whose glob matches `id` (and `output` for tolerances).
  const ManifestEntry* find(EntryKind kind, const std::string& id, const std::string& output = "") const;
  /// Appends an entry after the file's (so a file entry matching the same case wins).
  void append(ManifestEntry e) { entries_.push_back(std::move(e)); }
  /// Entries that match none of `ids` (the whole catalog of the arch): stale, to be removed.
  std::vector<const ManifestEntry*> stale(const std::vector<std::string>& ids) const;

 private:
  std::string arch_, path_;
  std::vector<ManifestEntry> entries_;
};

/// Whether `s` is a tracking reference a manifest entry may carry: a URL ("https://..."), an
/// issue reference ("opcts#32", "pytorch/pytorch#131257", "issue 41") or a Markdown page of
/// this repository with an optional section ("docs/status/sm90.md#h200-runs").
bool is_tracking_reference(const std::string& s);

/// GitHub's anchor of a Markdown heading: lower case, punctuation other than '-' and '_' dropped
/// (non-ASCII bytes kept), spaces as '-'.
std::string heading_anchor(const std::string& heading);

/// Why a `tracking:` page of ours ("docs/status/sm90.md#section") does not resolve against the
/// checkout `cases_dir` lies in: the file is not there, or no heading of it has that anchor
/// (GitHub's). "" when it resolves, when `tracking` is no page, or when the checkout has no such
/// top-level folder (an installed cases folder has no docs beside it).
std::string unresolved_tracking(const std::string& tracking, const std::string& cases_dir);

/// Whether lint requires `tracking:` of an entry: the kinds that keep a known failure (xfail,
/// flaky) and come from a file (a planted impl's implied entry does not).
inline bool needs_tracking(const ManifestEntry& e) {
  return !e.planted && (e.kind == EntryKind::xfail || e.kind == EntryKind::flaky);
}

/// The outcome of a case given its raw outcome, message and failure kinds (ResultRecord::
/// failures) and the xfail entry matching it (or null). The whole table, as deqp-runner's
/// baseline rules and pytest's xfail(raises=...), typed: the failure the entry expects is XFAIL —
/// its `expect`; for FAIL, every failure of the case among the output kinds and case kinds it
/// names (an exceeds_bound within its `max_ratio`); its `message` pattern when given —; any other
/// failure (FAIL/ERROR/CRASH/TIMEOUT, a FAIL of another kind or output, a FAIL with no kind
/// recorded) stands, so a refusal that turns into wrong numbers, a NaN where a bound was
/// exceeded or a second output going wrong fails the gate; PASS under a strict xfail is XPASS,
/// under a non-strict one PASS; SKIP stays SKIP; without an entry the raw outcome stands.
/// Planted impls' implied entries expect FAIL of any kind.
Outcome apply_expectation(Outcome raw, const std::string& message, const std::vector<Failure>& failures,
                          const ManifestEntry* xfail);

/// Why a failure does not meet its xfail entry ("" when it does, or when it is no failure):
/// "xfail sm90.yaml:40 expects ERROR matching 'status 15', got FAIL", "xfail sm90.yaml:52
/// expects FAIL of lse: exceeds_bound, got FAIL: O nonfinite (16384 elements)".
std::string unmet_expectation(Outcome raw, const std::string& message, const std::vector<Failure>& failures,
                              const ManifestEntry& xfail);

/// What a planted impl's pass under its implied entry says (a run record's expectation, the
/// gate's reason): "planted bug NOT caught: <source> passed", with ", in a derived blind spot of
/// its checks: <why>" where the impl derived one (Impl::blind_spot) — a bound's, or a byte
/// check's (--invariance, --bitwise) where no tolerance is involved.
std::string planted_pass_text(const std::string& source, const std::string& blind_spot);

/// What a typed FAIL entry expects, as messages say it: "dV: exceeds_bound (ratio <= 2); case:
/// wrong_refusal".
std::string expected_failures(const ManifestEntry& xfail);

}  // namespace opcts
