// Catalog loading and grid expansion.
#include "runner/catalog.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/glob.hpp"
#include "core/yaml_util.hpp"
#include "runner/catalog_sample.hpp"

namespace opcts {

namespace fs = std::filesystem;

namespace {

Tier tier_of(const std::string& path, const YAML::Node& n) {
  if (!n["tier"]) return Tier::default_;
  try {
    return parse_tier(text_of(path, n, "tier"));
  } catch (const YamlError&) {
    throw;
  } catch (const std::exception& e) {
    yaml_fail(path, n["tier"], e.what());
  }
}

std::string optional_text(const std::string& path, const YAML::Node& n, const char* key) {
  return n[key] ? text_of(path, n, key) : "";
}

// "5.1e+14 bytes (465 TiB)": a size as a byte count and in the unit a reader thinks in.
std::string bytes_text(double b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = b;
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3g bytes (%.3g %s)", b, v, units[u]);
  return buf;
}

// Why a problem's tensors cannot exist anywhere, or "" when they can (kMaxProblemBytes).
std::string too_large(const Family& f, const Problem& p) {
  const double need = problem_bytes(f, p);
  if (need <= kMaxProblemBytes) return "";
  return "its tensors and references need " + bytes_text(need) + ", more than " + bytes_text(kMaxProblemBytes) +
         ": no device or host can hold them (check its sizes)";
}

ProblemPtr parse_problem(const Family& f, const std::string& path, const YAML::Node& n) {
  ProblemPtr p;
  try {
    p = f.parse(n);
  } catch (const YamlError&) {
    throw;
  } catch (const YAML::Exception& e) {
    yaml_fail(path, n, e.msg);
  } catch (const std::exception& e) {
    yaml_fail(path, n, e.what());
  }
  if (const std::string why = too_large(f, *p); !why.empty())
    yaml_fail(path, n, "problem " + f.problem_id(*p) + ": " + why);
  return p;
}

// Points planned so far: in the catalog file being read and in the whole run.
struct Budget {
  size_t file = 0, run = 0;
  // Takes `n` more points for what is at `n_at`, or fails there naming the cap it passes.
  void take(size_t n, const std::string& path, const YAML::Node& at, const std::string& what) {
    if (n > kMaxCatalogPoints - file)
      yaml_fail(path, at,
                what + " takes the file past " + std::to_string(kMaxCatalogPoints) +
                    " points (grid points and edges together); split the catalog or shorten its axes");
    if (n > kMaxRunPoints - run)
      yaml_fail(path, at,
                what + " takes the run past " + std::to_string(kMaxRunPoints) +
                    " points (all catalogs together); pass fewer --catalog files");
    file += n;
    run += n;
  }
};

// Adds an entry, keeping the lowest tier of a problem listed more than once.
void add_entry(std::vector<CatalogEntry>& out, std::map<std::string, size_t>& seen, CatalogEntry e) {
  const std::string key = std::string(e.family->name()) + "/" + e.problem_id;
  auto it = seen.find(key);
  if (it == seen.end()) {
    seen[key] = out.size();
    out.push_back(std::move(e));
  } else if (e.tier < out[it->second].tier) {
    out[it->second].tier = e.tier;
  }
}

void expand_grid(const Family& f, const std::string& path, const YAML::Node& grid, std::vector<CatalogEntry>& out,
                 std::map<std::string, size_t>& seen) {
  check_keys(path, grid, {"name", "tier", "axes", "fixed", "why"});
  if (!grid["name"]) yaml_fail(path, grid, "a grid needs a name");
  const std::string name = text_of(path, grid, "name");
  if (name.empty()) yaml_fail(path, grid, "a grid needs a name");
  const Tier tier = tier_of(path, grid);
  const std::string why = optional_text(path, grid, "why");
  if (!grid["axes"]) yaml_fail(path, grid, "grid '" + name + "' needs a map 'axes:'");
  const YAML::Node axes = require_map(path, grid["axes"], "grid '" + name + "' 'axes'");
  if (axes.size() == 0) yaml_fail(path, axes, "grid '" + name + "' has no axes");
  const YAML::Node fixed =
      grid["fixed"] ? require_map(path, grid["fixed"], "grid '" + name + "' 'fixed'") : YAML::Node();
  std::vector<std::pair<std::string, YAML::Node>> ax;
  size_t points = 1;
  for (const auto& kv : axes) {
    const std::string axis = kv.first.Scalar();
    if (!kv.second.IsSequence() || kv.second.size() == 0)
      yaml_fail(path, kv.second, "axis '" + axis + "' must be a non-empty list");
    if (fixed && fixed[axis])
      yaml_fail(path, kv.first, "'" + axis + "' is both an axis and in 'fixed' of grid '" + name + "'");
    // The cap is checked as the product grows, so it cannot overflow.
    points *= kv.second.size();
    if (points > kMaxGridPoints)
      yaml_fail(path, grid,
                "grid '" + name + "' has more than " + std::to_string(kMaxGridPoints) +
                    " points (the product of its axes' lengths); split it or shorten its axes");
    ax.emplace_back(axis, kv.second);
  }
  std::vector<size_t> pos(ax.size(), 0);
  const std::string source = where(path, grid) + " (grid " + name + ")";
  while (true) {
    // Each point is a map of its own: values are cloned into it, so a point never shares
    // yaml-cpp's node memory with the document (assigning a document's node merges the two
    // memories, which made expansion quadratic in the number of points).
    YAML::Node point(YAML::NodeType::Map);
    if (fixed)
      for (const auto& kv : fixed) point[kv.first.Scalar()] = YAML::Clone(kv.second);
    for (size_t a = 0; a < ax.size(); ++a) point[ax[a].first] = YAML::Clone(ax[a].second[pos[a]]);
    // Errors point at the grid; the point's own values say which combination failed.
    ProblemPtr p;
    try {
      p = f.parse(point);
    } catch (const std::exception& e) {
      yaml_fail(path, grid, "grid '" + name + "' point " + one_line(point).substr(0, 200) + ": " + e.what());
    }
    if (const std::string why = too_large(f, *p); !why.empty())
      yaml_fail(path, grid, "grid '" + name + "' point " + one_line(point).substr(0, 200) + ": " + why);
    add_entry(out, seen, {&f, p, f.problem_id(*p), tier, source, why});
    size_t a = ax.size();
    while (a-- > 0) {
      if (++pos[a] < ax[a].second.size()) break;
      pos[a] = 0;
    }
    if (a == static_cast<size_t>(-1)) break;
  }
}

// Counts a catalog's points (each grid's product of axis lengths, each edge one) into the
// budget before anything expands, failing at the grid or edge that passes a cap. What is
// malformed is left for load_one to name.
void count_points(const std::string& path, const YAML::Node& root, Budget& budget) {
  budget.file = 0;
  if (!root.IsMap()) return;
  if (const YAML::Node grids = root["grids"]; grids && grids.IsSequence())
    for (const auto& g : grids) {
      if (!g.IsMap() || !g["axes"] || !g["axes"].IsMap()) continue;
      size_t points = 1;
      for (const auto& kv : g["axes"]) {
        const size_t n = kv.second.IsSequence() ? kv.second.size() : 1;
        points = n == 0 ? 0 : points > kMaxRunPoints / n ? kMaxRunPoints + 1 : points * n;  // saturating
      }
      if (points > kMaxGridPoints) continue;  // expand_grid refuses it, naming the grid's own cap
      const std::string name = g["name"] && g["name"].IsScalar() ? g["name"].Scalar() : "?";
      budget.take(points, path, g, "grid '" + name + "' (" + std::to_string(points) + " points)");
    }
  if (const YAML::Node edges = root["edges"]; edges && edges.IsSequence())
    for (const auto& e : edges) {
      const std::string name = e.IsMap() && e["name"] && e["name"].IsScalar() ? e["name"].Scalar() : "?";
      budget.take(1, path, e, "edge '" + name + "'");
    }
  if (const YAML::Node samples = root["samples"]; samples && samples.IsSequence())
    for (const auto& s : samples) {
      const std::string name = s.IsMap() && s["name"] && s["name"].IsScalar() ? s["name"].Scalar() : "?";
      const auto n = static_cast<size_t>(sample_size(s));
      budget.take(n, path, s, "sample '" + name + "' (" + std::to_string(n) + " draws)");
    }
}

void load_one(const Registry& reg, const std::string& path, const YAML::Node& root, std::vector<CatalogEntry>& out,
              std::map<std::string, size_t>& seen) {
  check_keys(path, root, {"family", "grids", "edges", "samples", "description"});
  if (!root["family"]) yaml_fail(path, root, "not a catalog: no top-level 'family:'");
  const auto fname = text_of(path, root, "family");
  const Family* f = reg.family(fname);
  if (!f) {
    std::string known;
    for (const Family* fam : reg.families()) known += (known.empty() ? "" : ", ") + std::string(fam->name());
    yaml_fail(path, root["family"], "unknown family '" + fname + "' (known: " + known + ")");
  }
  if (root["description"]) text_of(path, root, "description");
  if (!root["grids"] && !root["edges"] && !root["samples"])
    yaml_fail(path, root, "the catalog lists no 'grids:', 'edges:' or 'samples:'");
  if (root["grids"])
    for (const auto& g : require_list(path, root["grids"], "'grids'")) expand_grid(*f, path, g, out, seen);
  if (root["edges"]) {
    for (const auto& e : require_list(path, root["edges"], "'edges'")) {
      check_keys(path, e, {"name", "tier", "problem", "why"});
      if (!e["name"]) yaml_fail(path, e, "an edge needs a name");
      const std::string name = text_of(path, e, "name");
      if (name.empty()) yaml_fail(path, e, "an edge needs a name");
      if (!e["why"]) yaml_fail(path, e, "edge '" + name + "' needs a 'why:' saying what it probes");
      const std::string why = text_of(path, e, "why");
      if (!e["problem"]) yaml_fail(path, e, "edge '" + name + "' needs a 'problem:'");
      ProblemPtr p = parse_problem(*f, path, require_map(path, e["problem"], "edge '" + name + "' 'problem'"));
      add_entry(out, seen, {f, p, f->problem_id(*p), tier_of(path, e), where(path, e) + " (edge " + name + ")", why});
    }
  }
  if (root["samples"])
    for (const auto& s : require_list(path, root["samples"], "'samples'")) {
      const std::vector<SampleDraw> draws = draw_sample(*f, path, s);
      const std::string name = text_of(path, s, "name"), why = text_of(path, s, "why");
      for (const SampleDraw& d : draws) {
        const std::string draw = "sample '" + name + "' draw " + std::to_string(d.index);
        if (const std::string big = too_large(*f, *d.problem); !big.empty())
          yaml_fail(path, s, draw + " " + f->problem_id(*d.problem) + ": " + big);
        add_entry(out, seen,
                  {f, d.problem, f->problem_id(*d.problem), d.tier, where(path, s) + " (" + draw + ")", why});
      }
    }
}

// The suite's own tables, which live beside the built-in catalogs in cases/.
bool is_catalog_file(const fs::path& p) {
  if (p.extension() != ".yaml" && p.extension() != ".yml") return false;
  const std::string name = p.filename().string();
  return name != "archs.yaml" && name != "tolerances.yaml";
}

}  // namespace

double problem_bytes(const Family& f, const Problem& p) {
  double elements = 0;
  for (const OutputSpec& o : f.outputs(p)) {
    double n = 1;
    for (const int64_t d : o.shape) n *= static_cast<double>(d);
    elements += n;
  }
  return f.device_bytes(p) + 24 * elements;
}

namespace {

// The catalog files of `paths`: a folder's *.yaml and *.yml files (is_catalog_file), sorted; a
// file as given. Throws YamlError for a path that does not exist.
std::vector<std::string> catalog_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    if (fs::is_directory(p)) {
      std::vector<fs::path> files;
      for (const auto& de : fs::directory_iterator(p))
        if (de.is_regular_file() && is_catalog_file(de.path())) files.push_back(de.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) out.push_back(f.string());
    } else if (fs::exists(p)) {
      out.push_back(p);
    } else {
      throw YamlError(p + ": no such catalog file or folder");
    }
  }
  return out;
}

}  // namespace

std::vector<CatalogEntry> load_catalogs(const Registry& reg, const std::vector<std::string>& paths) {
  std::vector<CatalogEntry> out;
  std::map<std::string, size_t> seen;
  // Every file is read and its points counted first: a run past a cap is refused before any
  // grid expands, whichever file takes it there.
  std::vector<std::pair<std::string, YAML::Node>> docs;
  Budget budget;
  for (const auto& file : catalog_files(paths)) {
    docs.emplace_back(file, load_yaml_file(file));
    count_points(file, docs.back().second, budget);
  }
  for (const auto& [file, root] : docs) load_one(reg, file, root, out, seen);
  return out;
}

std::vector<SampledProblem> sample_catalogs(const Registry& reg, const std::vector<std::string>& paths,
                                            const std::string& family, const SampleOverride& override) {
  const Family* f = reg.family(family);
  if (!f) throw std::invalid_argument("unknown family '" + family + "'");
  std::vector<SampledProblem> out;
  for (const auto& file : catalog_files(paths)) {
    const YAML::Node root = load_yaml_file(file);
    if (!root.IsMap() || !root["family"] || !root["family"].IsScalar() || root["family"].Scalar() != family ||
        !root["samples"])
      continue;
    for (const auto& s : require_list(file, root["samples"], "'samples'")) {
      const std::string name = text_of(file, s, "name");
      for (SampleDraw& d : draw_sample(*f, file, s, override))
        out.push_back({name, where(file, s), f->problem_id(*d.problem), std::move(d)});
    }
  }
  return out;
}

std::vector<Case> make_cases(const Registry& reg, const std::vector<CatalogEntry>& entries, const ArchInfo& arch,
                             bool include_planted) {
  // Ids first (from the entry's problem id, rendered once per problem), then the cases in id
  // order: sorting indices moves no Case, whose strings make a sort of Cases slow at 100k+.
  struct Slot {
    std::string id;
    const CatalogEntry* entry;
    const Impl* impl;
    std::string tactic;
    Tier tier;
  };
  std::vector<Slot> slots;
  std::map<std::string_view, std::vector<const Impl*>> impls;
  for (const auto& e : entries) {
    auto [it, fresh] = impls.try_emplace(e.family->name());
    if (fresh)
      for (const Impl* impl : reg.impls_of(e.family->name()))
        if (impl->backend() == arch.backend && (!impl->planted() || include_planted)) it->second.push_back(impl);
  }
  // A negative problem is judged on the refusal alone: one case, no tactics (tactics_of).
  std::vector<bool> negative(entries.size());
  for (size_t i = 0; i < entries.size(); ++i)
    negative[i] = !entries[i].family->expected_error(*entries[i].problem).empty();
  // An impl with tactics is asked for them all at once first (a plugin's answer in a probe).
  for (const auto& [family, family_impls] : impls) {
    std::vector<const Problem*> problems;
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].family->name() == family && !negative[i]) problems.push_back(entries[i].problem.get());
    for (const Impl* impl : family_impls) impl->plan_tactics(problems);
  }
  for (size_t n = 0; n < entries.size(); ++n) {
    const CatalogEntry& e = entries[n];
    for (const Impl* impl : impls.at(e.family->name())) {
      const std::vector<std::string> tactics = negative[n] ? std::vector<std::string>{} : impl->tactics(*e.problem);
      if (tactics.empty()) {
        slots.push_back({case_id_from_problem_id(*e.family, *impl, e.problem_id), &e, impl, {}, e.tier});
        continue;
      }
      for (size_t i = 0; i < tactics.size(); ++i) {
        if (!is_tactic_name(tactics[i]))
          throw std::logic_error(std::string(impl->name()) + ": tactic '" + tactics[i] + "' of " + e.problem_id +
                                 " is not a tactic name (1 to 32 of a-z, 0-9, _, a letter first)");
        // Two cases of one id would be one case run twice, its tally counted twice.
        if (std::find(tactics.begin(), tactics.begin() + static_cast<std::ptrdiff_t>(i), tactics[i]) !=
            tactics.begin() + static_cast<std::ptrdiff_t>(i))
          throw std::logic_error(std::string(impl->name()) + ": tactic '" + tactics[i] + "' of " + e.problem_id +
                                 " listed twice");
        slots.push_back({case_id_from_problem_id(*e.family, *impl, e.problem_id, tactics[i]), &e, impl, tactics[i],
                         tactic_tier(e.tier, i, tactics.size(), e.problem_id)});
      }
    }
  }
  std::sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) { return a.id < b.id; });
  std::vector<Case> cases;
  cases.reserve(slots.size());
  for (auto& s : slots)
    cases.push_back({std::move(s.id), s.entry->family, s.impl, s.entry->problem, s.tier, s.entry->source, s.entry->why,
                     std::move(s.tactic)});
  return cases;
}

std::vector<Case> select_cases(std::vector<Case> cases, Tier tier, const std::vector<std::string>& filters,
                               const std::vector<std::string>& excludes) {
  std::vector<Case> out;
  // A glob matches a case by its id or by its impl's name ("aten.*", "cuda.cudnn"): ids begin
  // with a family and impl names with a backend or a plugin's prefix, so a glob written for one
  // never matches the other by accident.
  const auto matches = [](const std::string& glob, const Case& c) {
    return glob_match(glob, c.id) || (c.impl && glob_match(glob, std::string(c.impl->name())));
  };
  for (auto& c : cases) {
    if (c.tier > tier) continue;
    bool in = filters.empty();
    for (const auto& f : filters) in = in || matches(f, c);
    for (const auto& x : excludes) in = in && !matches(x, c);
    if (in) out.push_back(std::move(c));
  }
  return out;
}

}  // namespace opcts
