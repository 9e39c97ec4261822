// Plugin code never runs in the supervisor: a probe process loads each plugin (dlopen, its
// entry point, registration) and asks its impls' supports(), and the supervisor plans cases from
// what the probe printed. A plugin that crashes there costs a probe process, named with the
// signal, not the run; the workers load the plugins themselves to run their cases.
#pragma once

#include <string>
#include <vector>

#include "core/family.hpp"

namespace opcts {

/// An impl as a plugin registered it, seen from the supervisor: what planning needs.
struct ProbedImplDesc {
  std::string family, name, backend;
  std::vector<std::string> caps;
  bool planted = false;
  uint32_t abi_minor = 0;      // opcts_impl_desc.abi_minor
  bool lists_tactics = false;  // opcts_impl_desc.list_tactics is set (ABI 1.11)
  std::string exe, plugin;     // what a tactics probe runs: this opcts, the plugin's path
};

/// What probing one plugin gave: its impls, or why it cannot be used ("" when it can).
struct PluginStatus {
  std::string path;
  bool optional = false;  // --plugin-optional: its failure is a warning, not an error
  std::string digest;     // core/digest.hpp file_digest of the file probed
  std::string error;
  std::vector<ProbedImplDesc> impls;
};

/// Probes the plugin at `path` in a child process (`exe __plugin-probe --plugin PATH`): loads
/// it against the built-ins (app/plugins.hpp load_plugin's checks) and returns its impls, or
/// the error, which names a crash's signal or a probe that did not answer in time.
PluginStatus probe_plugin(const std::string& exe, const std::string& path, bool optional);

/// The probe process's side of probe_plugin: loads `path` into a registry of the built-ins
/// and writes one JSON line to `answer_fd` (the impls, or the error). Exit 0, or 3 on an error.
int plugin_probe_main(const std::string& path, int answer_fd);

/// A plugin's impl in the supervisor: its descriptor without its code. supports() answers
/// from what ask_supports learnt (a problem never asked is a SKIP saying so); run() throws.
class ProbedImpl final : public Impl {
 public:
  explicit ProbedImpl(ProbedImplDesc d) : d_(std::move(d)) {}
  std::string_view family() const override { return d_.family; }
  std::string_view name() const override { return d_.name; }
  std::string_view backend() const override { return d_.backend; }
  std::vector<std::string> required_caps() const override { return d_.caps; }
  bool planted() const override { return d_.planted; }
  Support supports(const Problem& p, const ArchInfo& arch) const override;
  std::string abi_gap(const Problem& p) const override;
  /// The tactics the plugin's list_tactics gave in a tactics probe (plan_tactics; a problem not
  /// planned is asked alone). Where the probe could not answer, none, and supports() is the error.
  std::vector<std::string> tactics(const Problem& p) const override;
  /// Asks list_tactics of every problem in one probe process (`opcts __plugin-probe --tactics`).
  void plan_tactics(const std::vector<const Problem*>& problems) const override;
  TensorMap run(const Problem& p, const TensorMap& inputs, const RunContext& ctx) const override;
  /// Records the probe's answer for a problem id (ask_supports).
  void answer(const std::string& problem_id, Support s) const { answers_[problem_id] = std::move(s); }

 private:
  ProbedImplDesc d_;
  mutable std::map<std::string, Support> answers_;
  mutable std::map<std::string, std::vector<std::string>> tactics_;  // by problem id
  mutable std::map<std::string, std::string> tactics_errors_;        // by problem id
};

/// What the supports probe needs to rebuild the cases: the arch, its tables, the plugins.
struct SupportsProbe {
  std::string exe, arch, cases_dir;
  std::vector<std::string> plugins;  // the plugins that loaded
  int device = 0;
  double timeout_s = 120;  // for one supports() answer
};

/// Asks, in probe processes, the supports() of every case of `cases` whose impl is a
/// ProbedImpl, and gives each impl its answers. A probe that dies (or hangs past the timeout)
/// while asking a case makes that case's answer an error naming the signal (an ERROR record)
/// and every case of that impl it did not ask yet a SKIP saying why; the next probe goes on
/// with the other impls.
void ask_supports(const SupportsProbe& probe, const std::vector<Case>& cases);

/// The tactics probe's side: reads problem-level case ids ("<family>.<impl>/<problem id>") from
/// `ids_file` and writes per id {"i": i, "tactics": [...]} or {"i": i, "error": ...} to `answer_fd`.
int tactics_probe_main(const Registry& loaded, const std::string& ids_file, int answer_fd);

/// The supports probe's side: loads `plugins` against the built-ins, reads case ids from
/// `ids_file` and writes per case {"ask": i} before asking and {"i": i, "ok": ..., "reason":
/// ..., "error": ...} after, one JSON line each, to `answer_fd`.
int supports_probe_main(const Registry& loaded, const std::string& arch, const std::string& cases_dir,
                        const std::string& ids_file, int answer_fd, int device);

}  // namespace opcts
