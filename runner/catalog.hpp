// YAML catalogs: grids (cartesian products of axes) and edge lists expanded into cases.
//
// A catalog file is a map with `family:`, optional `grids:` and `edges:` lists:
//   grids: [{name, tier, axes: {field: [values]}, fixed: {field: value}}]
//   edges: [{name, tier, problem: {field: value}, why}]
// A grid point is the map `fixed` plus one value of every axis; the family parses it.
#pragma once

#include <string>
#include <vector>

#include "core/family.hpp"

namespace opcts {

/// One problem of a catalog, before impls are attached.
struct CatalogEntry {
  const Family* family = nullptr;
  ProblemPtr problem;
  std::string problem_id;  // family->problem_id(*problem), rendered once (make_cases builds ids from it)
  Tier tier = Tier::full;
  std::string source;  // "path:line (grid NAME)" or "path:line (edge NAME)"
  std::string why;
};

/// The most points one grid may expand to: a typo in an axis must not make a run that never
/// starts (the default tier of every family together holds about 20,000 cases).
inline constexpr size_t kMaxGridPoints = 1'000'000;

/// Loads catalogs from files and folders (a folder means every *.yaml and *.yml file in it,
/// sorted, except archs.yaml and tolerances.yaml; each must be a catalog). The same problem
/// listed twice keeps its lowest tier. A grid expands in time linear in its points, at most
/// kMaxGridPoints. Throws YamlError ("path:line:column: ...") on a malformed catalog (see
/// core/yaml_util.hpp), a missing or unknown family, an unknown field, a grid past the cap.
std::vector<CatalogEntry> load_catalogs(const Registry& reg, const std::vector<std::string>& paths);

/// Every case of the entries for the impls of the arch's backend, sorted by id; planted
/// impls (Impl::planted) only when `include_planted`.
std::vector<Case> make_cases(const Registry& reg, const std::vector<CatalogEntry>& entries, const ArchInfo& arch,
                             bool include_planted = false);

/// Keeps the cases of tier <= `tier` whose id or impl name matches any of `filters` (all when
/// empty) and none of `excludes` ('sdpa.cuda_flash/*' by id, 'aten.*' or 'cuda.cudnn' by impl).
/// Globs are fnmatch(3) patterns where '*' also matches '/'.
std::vector<Case> select_cases(std::vector<Case> cases, Tier tier, const std::vector<std::string>& filters,
                               const std::vector<std::string>& excludes);

/// fnmatch(3) without flags: '*' matches any run of characters, '/' included.
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace opcts
