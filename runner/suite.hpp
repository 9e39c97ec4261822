// The loaded suite: registry, arch table, tolerance table, manifest and the cases of one arch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/family.hpp"
#include "judge/manifest.hpp"
#include "judge/tolerance.hpp"
#include "runner/catalog.hpp"

namespace opcts {

/// Where the suite's data lives and what to add to it.
struct SuiteOptions {
  std::string cases_dir;              // built-in catalogs, archs.yaml, tolerances.yaml, manifests/
  std::vector<std::string> catalogs;  // --catalog: a user's own files or folders, added to the built-ins
  std::string arch;                   // resolved arch name ("sm90", "host")
  std::string manifest;               // --manifest; default <cases_dir>/manifests/<arch>.yaml if it exists
  bool load_catalogs = true;          // workers rebuild cases from ids and need no catalogs
  bool include_planted = false;       // add the cases of planted-bug impls (they must FAIL)
  bool bitwise = false;               // run --bitwise: else planted impls whose bug only it sees SKIP
  bool invariance = false;            // run --invariance: else planted impls whose bug only it sees SKIP
  bool capture = false;               // run --capture: else planted impls whose bug only it sees SKIP
  std::vector<std::string>
      plugins;  // --plugin: shared libraries whose impls the registry holds (workers load them too)
};

/// The default cases folder: $OPCTS_CASES_DIR, else cases_dir_beside_binary() (`--cases-dir`
/// overrides both). Never the source tree's path compiled in: a copied binary must not read
/// the clone it was built from.
std::string default_cases_dir();
/// The cases folder where an install puts it, relative to the running binary
/// (<bin>/../share/opcts/cases; the build tree links it to the source's cases/, cmake/install.cmake).
std::string cases_dir_beside_binary();

/// Everything a run needs, loaded once.
class Suite {
 public:
  /// Loads archs.yaml, tolerances.yaml, the manifest and the catalogs of `reg`'s families
  /// (the registry is the caller's: the composition root, a test's fake families, a plugin set). Throws YamlError
  /// (file:line:column; also for a tolerance rule whose family, impl glob or arch glob names
  /// nothing) or std::invalid_argument (unknown arch) with a message fit for the user.
  Suite(const Registry& reg, const SuiteOptions& opt);

  const Registry& registry() const { return *reg_; }
  const SuiteOptions& options() const { return options_; }
  const ArchInfo& arch() const { return arch_; }
  const ArchTable& archs() const { return archs_; }
  const Manifest& manifest() const { return manifest_; }
  const ToleranceTable& tolerances() const { return tolerances_; }
  /// Every case of the arch (all tiers, unfiltered), sorted by id.
  const std::vector<Case>& all_cases() const { return cases_; }

  /// Capability, host memory (problem_bytes against this host's, naming both), impl support
  /// and manifest skip, in that order: the SKIP reason, or nullopt when the case must run.
  /// An impl that could not answer (Support::error) gives its reason here too. A negative case
  /// (Family::expected_error) of an impl that is not planted is not asked about support, only
  /// whether the impl runs at all here (Impl::unavailable): it must reach run, which must refuse it.
  std::optional<std::string> skip_reason(const Case& c) const;

  /// What a case is without running it: SKIP (skip_reason), or ERROR when its impl could not
  /// say whether it supports the problem (Support::error); nullopt when it must run.
  struct PreRun {
    Outcome outcome;
    std::string reason;
  };
  std::optional<PreRun> pre_run(const Case& c) const;

 private:
  const Registry* reg_;
  SuiteOptions options_;
  ArchTable archs_;
  ArchInfo arch_;
  Manifest manifest_;
  ToleranceTable tolerances_;
  std::vector<Case> cases_;
};

/// Rebuilds a case from its id alone ("<family>.<impl token>/<problem id>"): what
/// `opcts repro` and the worker use. Throws std::invalid_argument naming the bad part.
Case case_from_id(const Registry& reg, const std::string& id);

/// The one-line command that reproduces a case (with --cases-dir, --manifest and --plugin when
/// given); every argument is quoted for POSIX shells, so pasting it runs nothing else. It starts
/// with repro_program().
std::string repro_command(const std::string& id, const std::string& arch, const std::string& manifest = "",
                          const std::vector<std::string>& plugins = {}, const std::string& cases_dir = "");
/// The repro line of a case of `suite`: its manifest and plugin paths made absolute, and its
/// cases folder where it is not the default one, so the line runs from any folder; the suite's
/// run modes (--bitwise, --invariance, --capture) after them, which `opcts repro` takes too.
std::string repro_command(const Suite& suite, const std::string& id);
/// How a pasted repro line calls this binary: "opcts" when that is what PATH finds (or this is
/// no binary named opcts, e.g. a test), else the binary's absolute path (quoted where it holds
/// a character a shell would read).
std::string repro_program();

/// `s` as one POSIX shell word: in single quotes, each ' written as '\''.
std::string shell_quote(const std::string& s);

}  // namespace opcts
