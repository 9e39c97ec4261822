// opcts manifest lint: an arch's manifest checked against every case of that arch (malformed and
// untyped FAIL entries are refused by Manifest::load, naming file:line; xfail and flaky entries
// without `tracking:` are listed).
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "app/cli_commands.hpp"
#include "core/glob.hpp"
#include "judge/manifest.hpp"
#include "runner/catalog.hpp"
#include "runner/suite.hpp"

namespace opcts::cli {

namespace {

// The entry's ids that no earlier entry of its kind (and output) claims: first match wins,
// so an entry with none left never decides a case.
bool decides_some_case(const std::vector<ManifestEntry>& entries, size_t at, const std::vector<std::string>& ids) {
  const ManifestEntry& e = entries[at];
  for (const auto& id : ids) {
    if (!glob_match(e.match, id)) continue;
    bool claimed = false;
    for (size_t j = 0; j < at && !claimed; ++j)
      claimed = entries[j].kind == e.kind && entries[j].output == e.output && glob_match(entries[j].match, id);
    if (!claimed) return true;
  }
  return false;
}

// A typed xfail's output names that no case it matches has (a misspelt "dv" would leave the
// entry expecting a failure no case can give): each printed with file:line; how many.
int unknown_outputs(const ManifestEntry& e, const std::vector<Case>& cases) {
  if (e.outputs.empty()) return 0;
  std::set<std::string> have;
  for (const auto& c : cases)
    if (glob_match(e.match, c.id))
      for (const auto& o : c.family->outputs(*c.problem)) have.insert(o.name);
  int bad = 0;
  for (const auto& [out, kinds] : e.outputs) {
    if (have.count(out)) continue;
    std::string names;
    for (const auto& h : have) names += (names.empty() ? "" : ", ") + h;
    std::printf("%s: xfail entry '%s' names output '%s', which no case it matches has (outputs: %s)\n",
                e.source.c_str(), e.match.c_str(), out.c_str(), names.empty() ? "none" : names.c_str());
    ++bad;
  }
  return bad;
}

}  // namespace

int cmd_manifest_lint(const Selection& s) {
  Selection all = s;
  all.include_planted = true;  // the universe the gate judges staleness against, planted rows included
  const std::string arch = resolve_arch(s.arch, 0);
  // Loading the manifest (and its extends chain) throws on a malformed entry, naming file:line.
  Suite suite(registry_for(all.plugins, all.optional_plugins), suite_options(all, arch));
  if (suite.manifest().path().empty())
    throw std::invalid_argument("manifest lint: arch '" + arch + "' has no manifest (" + all.cases_dir + "/manifests/" +
                                arch + ".yaml) and no --manifest was given");
  std::vector<std::string> ids;
  for (const auto& c : suite.all_cases()) ids.push_back(c.id);
  const auto& entries = suite.manifest().entries();
  int problems = 0, from_files = 0, untracked = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const ManifestEntry& e = entries[i];
    if (e.planted) continue;
    ++from_files;
    // The findings ledger: a kept failure says where it is tracked (docs/manifests.md).
    if (needs_tracking(e) && e.tracking.empty()) {
      std::printf("%s: untracked %s entry '%s': give it 'tracking:' (a URL, an issue reference or a page of ours)\n",
                  e.source.c_str(), std::string(to_string(e.kind)).c_str(), e.match.c_str());
      ++problems, ++untracked;
    }
    if (const std::string why = unresolved_tracking(e.tracking, all.cases_dir); !why.empty()) {
      std::printf("%s: %s entry '%s': tracking %s\n", e.source.c_str(), std::string(to_string(e.kind)).c_str(),
                  e.match.c_str(), why.c_str());
      ++problems;
    }
    bool any = false;
    for (const auto& id : ids)
      if ((any = glob_match(e.match, id))) break;
    if (!any) {
      std::printf("%s: stale %s entry '%s': matches no case of %s\n", e.source.c_str(),
                  std::string(to_string(e.kind)).c_str(), e.match.c_str(), arch.c_str());
      ++problems;
    } else if (!decides_some_case(entries, i, ids)) {
      std::printf("%s: shadowed %s entry '%s': every case it matches is decided by an earlier entry\n",
                  e.source.c_str(), std::string(to_string(e.kind)).c_str(), e.match.c_str());
      ++problems;
    } else {
      problems += unknown_outputs(e, suite.all_cases());
    }
  }
  std::printf(
      "manifest lint %s: %d entries (%s), %zu cases, %d stale, shadowed, misnamed or untracked (%d untracked)\n",
      arch.c_str(), from_files, suite.manifest().path().c_str(), ids.size(), problems, untracked);
  return problems == 0 ? 0 : 1;
}

}  // namespace opcts::cli
