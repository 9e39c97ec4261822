// YAML catalogs: grids (cartesian products of axes), edge lists and samples (seeded draws,
// runner/catalog_sample.hpp) expanded into cases.
//
// A catalog file is a map with `family:`, optional `grids:`, `edges:` and `samples:` lists:
//   grids: [{name, tier, axes: {field: [values]}, fixed: {field: value}}]
//   edges: [{name, tier, problem: {field: value}, why}]
//   samples: [{name, why, seed, count, axes: {field: distribution}, fixed}] (runner/catalog_sample.hpp)
// A grid point is the map `fixed` plus one value of every axis; the family parses it.
#pragma once

#include <string>
#include <vector>

#include "core/family.hpp"
#include "runner/catalog_sample.hpp"

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
/// The most points (grid points plus edges, before duplicates merge) one catalog file, and all
/// catalogs of one run together, may hold. A point costs about 1 KB while it is planned (five
/// grids of 10^6 points took 5 GB and ended in std::bad_alloc after 124 s), so each cap is
/// checked from the axes' lengths before a grid expands: memory stays bounded by these.
inline constexpr size_t kMaxCatalogPoints = 1'000'000;
inline constexpr size_t kMaxRunPoints = 2'000'000;

/// The most bytes a problem's tensors may need (Family::device_bytes, and the outputs' fp64
/// references on the host: problem_bytes): a problem past it (a 4·10^9 batch, four sizes of
/// 65536) cannot exist on any device or host, so it is a catalog error at its line. One that
/// exceeds only the memory of the machine at hand is a SKIP naming both sizes (Suite).
inline constexpr double kMaxProblemBytes = 1099511627776.0;  // 1 TiB

/// A lower bound of the memory a case of `p` needs on the host: the tensors as stored
/// (Family::device_bytes) plus three fp64 values (the exact and same-precision references and
/// the bound) per output element. Computed in double from the output shapes, so sizes whose
/// product overflows 64 bits still give a (huge) finite answer.
double problem_bytes(const Family& f, const Problem& p);

/// Loads catalogs from files and folders (a folder means every *.yaml and *.yml file in it,
/// sorted, except archs.yaml and tolerances.yaml; each must be a catalog). The same problem
/// listed twice keeps its lowest tier. A grid expands in time linear in its points, at most
/// kMaxGridPoints; a file holds at most kMaxCatalogPoints and all of them kMaxRunPoints.
/// Throws YamlError ("path:line:column: ...") on a malformed catalog (see
/// core/yaml_util.hpp), a missing or unknown family, an unknown field, a grid or file past its
/// cap (checked before it expands), a problem past kMaxProblemBytes.
std::vector<CatalogEntry> load_catalogs(const Registry& reg, const std::vector<std::string>& paths);

/// One draw of a catalog's `samples:` block, with the block's name and place and the problem's id.
struct SampledProblem {
  std::string block, source;  // the block's name; "path:line" of the block
  std::string problem_id;
  SampleDraw draw;
};

/// The draws of every `samples:` block of `family` in the catalogs at `paths` (files and
/// folders, as load_catalogs reads them), each block's seed and counts replaced by `override`'s
/// where it gives them; in file order, then block order, then draw order. Throws
/// std::invalid_argument for an unknown family, YamlError as load_catalogs does.
std::vector<SampledProblem> sample_catalogs(const Registry& reg, const std::vector<std::string>& paths,
                                            const std::string& family, const SampleOverride& override);

/// Every case of the entries for the impls of the arch's backend, sorted by id; planted
/// impls (Impl::planted) only when `include_planted`.
std::vector<Case> make_cases(const Registry& reg, const std::vector<CatalogEntry>& entries, const ArchInfo& arch,
                             bool include_planted = false);

/// Keeps the cases of tier <= `tier` whose id or impl name matches any of `filters` (all when
/// empty) and none of `excludes` ('sdpa.cuda_flash/*' by id, 'aten.*' or 'cuda.cudnn' by impl).
/// Globs are fnmatch(3) patterns where '*' also matches '/'.
std::vector<Case> select_cases(std::vector<Case> cases, Tier tier, const std::vector<std::string>& filters,
                               const std::vector<std::string>& excludes);

}  // namespace opcts
