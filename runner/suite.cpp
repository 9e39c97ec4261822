// Loading the suite's data files and deciding skips.
#include "runner/suite.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "core/glob.hpp"
#include "core/yaml_util.hpp"
#include "runner/path_search.hpp"

namespace opcts {

namespace fs = std::filesystem;

namespace {

// A tolerance rule that names no family of the registry, or whose impl or arch glob matches
// nothing, would never apply: a misspelling that silently leaves the table's wider rule in
// force. Each is an error at the rule's key.
RuleCheck rule_globs_name_something(const Registry& reg, const ArchTable& archs) {
  return [&reg, &archs](const ToleranceRule& r) -> std::optional<RuleProblem> {
    if (!reg.family(r.family)) {
      std::string known;
      for (const Family* fam : reg.families()) known += (known.empty() ? "" : ", ") + std::string(fam->name());
      return RuleProblem{"family", "tolerance rule for unknown family '" + r.family + "' (known: " + known + ")"};
    }
    if (!r.impl.empty()) {
      std::string known;
      bool any = false;
      for (const Impl* i : reg.impls_of(r.family)) {
        any = any || glob_match(r.impl, std::string(i->name()));
        known += (known.empty() ? "" : ", ") + std::string(i->name());
      }
      if (!any)
        return RuleProblem{"impl", "tolerance rule's impl '" + r.impl + "' matches no impl of " + r.family +
                                       " (known: " + known + "; a plugin's impls need its --plugin)"};
    }
    const auto names = archs.names();
    if (!r.arch.empty() &&
        std::none_of(names.begin(), names.end(), [&](const std::string& a) { return glob_match(r.arch, a); }))
      return RuleProblem{"arch", "tolerance rule's arch '" + r.arch + "' matches no arch of archs.yaml"};
    // Both given: some impl it names must run on some arch it names (host impls never on sm90).
    if (!r.impl.empty() && !r.arch.empty()) {
      bool meet = false;
      for (const Impl* i : reg.impls_of(r.family))
        for (const auto& a : names)
          meet = meet || (glob_match(r.impl, std::string(i->name())) && glob_match(r.arch, a) &&
                          archs.get(a).backend == i->backend());
      if (!meet)
        return RuleProblem{
            "arch",
            "tolerance rule's impl '" + r.impl + "' and arch '" + r.arch +
                "' never meet: no impl it names runs on an arch it names (impls run on archs of their backend)"};
    }
    return std::nullopt;
  };
}

// Every output of every loaded problem, by family: what tolerance rules may name.
std::map<std::string, std::vector<RuleTarget>> rule_targets(const std::vector<CatalogEntry>& entries) {
  std::map<std::string, std::vector<RuleTarget>> out;
  for (const auto& e : entries)
    for (const OutputSpec& o : e.family->outputs(*e.problem))
      out[std::string(e.family->name())].push_back({e.problem_id, o.name, std::string(name(o.dtype))});
  return out;
}

// A manifest entry's `output:` must name an output of a case its glob matches: else it applies
// to nothing while looking as if it did. An entry that matches no case is stale (warned by the
// run and the gate, an error of `manifest lint`), not checked here.
void check_manifest_outputs(const Manifest& m, const std::vector<Case>& cases) {
  for (const ManifestEntry& e : m.entries()) {
    if (e.output.empty() || e.planted) continue;
    size_t matched = 0;
    std::set<std::string> outputs;
    bool found = false;
    for (const Case& c : cases) {
      if (!glob_match(e.match, c.id)) continue;
      ++matched;
      for (const OutputSpec& o : c.family->outputs(*c.problem)) {
        found = found || o.name == e.output;
        if (outputs.size() < 20) outputs.insert(o.name);
      }
      if (found) break;
    }
    if (found || matched == 0) continue;
    std::string list;
    for (const auto& o : outputs) list += (list.empty() ? "" : ", ") + o;
    throw YamlError((e.output_at.empty() ? e.source : e.output_at) + ": " + std::string(to_string(e.kind)) +
                    " entry '" + e.match + "' names output '" + e.output + "', which none of the " +
                    std::to_string(matched) + " cases it matches has (their outputs: " + list + ")");
  }
}

double host_memory_bytes() {
  static const double bytes =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  return bytes;
}

std::string gib(double bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / 1073741824.0);
  return buf;
}

}  // namespace

std::string cases_dir_beside_binary() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return OPCTS_CASES_FROM_BIN;
  // lexically_normal, not canonical: the build tree's cases/ is a link into the source tree,
  // and the message should name the path a user can look at.
  return (exe.parent_path() / OPCTS_CASES_FROM_BIN).lexically_normal().string();
}

std::string default_cases_dir() {
  if (const char* env = std::getenv("OPCTS_CASES_DIR"); env && *env) return env;
  return cases_dir_beside_binary();
}

namespace {

// The cases folder, checked before anything in it is read: a missing folder names the three
// ways to give one, so a copied binary never guesses.
const std::string& existing_cases_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw std::invalid_argument("no cases folder at " + dir + " (--cases-dir, else $OPCTS_CASES_DIR, else " +
                                std::string(OPCTS_CASES_FROM_BIN) +
                                " beside the opcts binary: " + cases_dir_beside_binary() + ")");
  return dir;
}

}  // namespace

Suite::Suite(const Registry& reg, const SuiteOptions& opt)
    : reg_(&reg),
      options_(opt),
      archs_(ArchTable::load(existing_cases_dir(opt.cases_dir) + "/archs.yaml")),
      arch_(archs_.get(opt.arch)),
      manifest_(Manifest::empty(opt.arch)),
      tolerances_(ToleranceTable::load(opt.cases_dir + "/tolerances.yaml", rule_globs_name_something(reg, archs_))) {
  std::string mpath = opt.manifest;
  if (mpath.empty()) {
    const std::string def = opt.cases_dir + "/manifests/" + opt.arch + ".yaml";
    if (fs::exists(def)) mpath = def;
  }
  if (!mpath.empty()) {
    manifest_ = Manifest::load(mpath);
    if (!manifest_.arch().empty() && manifest_.arch() != opt.arch)
      throw std::invalid_argument(mpath + ": manifest is for arch '" + manifest_.arch() + "', not '" + opt.arch + "'");
  }
  if (!opt.load_catalogs) return;
  std::vector<std::string> paths{opt.cases_dir};
  paths.insert(paths.end(), opt.catalogs.begin(), opt.catalogs.end());
  const std::vector<CatalogEntry> entries = load_catalogs(*reg_, paths);
  tolerances_.check_targets(rule_targets(entries));
  cases_ = make_cases(*reg_, entries, arch_, opt.include_planted);
  check_manifest_outputs(manifest_, cases_);
  // A planted impl exists to fail: each of its cases is an implied strict xfail, so a caught
  // bug is XFAIL (neither rerun nor a gate failure) and a missed one is XPASS, which fails
  // the run and the gate.
  std::set<std::string> planted;
  for (const auto& c : cases_)
    if (c.impl->planted() && planted.insert(c.id.substr(0, c.id.find('/'))).second) {
      ManifestEntry e;
      e.kind = EntryKind::xfail;
      e.match = c.id.substr(0, c.id.find('/')) + "/*";
      e.reason = "planted bug: " + std::string(c.impl->name()) +
                 " exists to fail; every case it runs must FAIL (a PASS means the suite missed its bug)";
      e.source = "planted impl " + std::string(c.impl->name());
      e.planted = true;
      manifest_.append(std::move(e));
    }
}

std::optional<std::string> Suite::skip_reason(const Case& c) const {
  const auto p = pre_run(c);
  return p ? std::optional<std::string>(p->reason) : std::nullopt;
}

std::optional<Suite::PreRun> Suite::pre_run(const Case& c) const {
  const auto skip = [](std::string why) { return PreRun{Outcome::SKIP, std::move(why)}; };
  for (const auto& cap : c.impl->required_caps())
    if (!arch_.has(cap))
      return skip("arch " + arch_.name + " lacks capability '" + cap + "' needed by " + std::string(c.impl->name()));
  // Every case's inputs and references live on the host, whatever device runs the impl.
  if (const double need = problem_bytes(*c.family, *c.problem); need > host_memory_bytes())
    return skip("the problem needs at least " + gib(need) +
                " of host memory (its tensors and fp64 references); this host has " + gib(host_memory_bytes()));
  // A negative case must reach the impl's run: a supports() that declines the invalid problem
  // would hide the refusal the case is about. Only an impl that cannot run at all here skips it
  // (its supports() is asked after a refusal that is not the contract's: runner/execute.cpp).
  // Planted impls take only the problems that probe their bug.
  if (!c.family->expected_error(*c.problem).empty() && !c.impl->planted()) {
    if (std::string why = c.impl->unavailable(); !why.empty()) return skip(why);
    // Nor one built before the problem's layout existed: it would read it as another.
    if (std::string why = c.impl->abi_gap(*c.problem); !why.empty()) return skip(why);
  } else {
    const Support s = c.impl->supports(*c.problem, arch_);
    if (s.error) {  // unless the manifest skips the case anyway
      if (const ManifestEntry* e = manifest_.find(EntryKind::skip, c.id))
        return skip("manifest skip (" + e->source + "): " + e->reason);
      return PreRun{Outcome::ERROR, s.reason};
    }
    if (!s.ok) return skip(s.reason);
  }
  if (c.impl->planted() && c.impl->bug_needs_bitwise() && !options_.bitwise)
    return skip(std::string(c.impl->name()) +
                ": its bug breaks its determinism claim, which only opcts run --bitwise shows");
  if (c.impl->planted() && c.impl->bug_needs_invariance() && !options_.invariance)
    return skip(std::string(c.impl->name()) +
                ": its bug breaks its invariance claim, which only opcts run --invariance shows");
  if (c.impl->planted() && c.impl->bug_needs_capture() && !options_.capture)
    return skip(std::string(c.impl->name()) +
                ": its bug breaks the capture contract (a run recorded, then replayed on fresh inputs), which only "
                "opcts run --capture shows");
  if (const ManifestEntry* e = manifest_.find(EntryKind::skip, c.id))
    return skip("manifest skip (" + e->source + "): " + e->reason);
  return std::nullopt;
}

Case case_from_id(const Registry& reg, const std::string& id) {
  const CaseIdParts parts = split_case_id(id);
  const std::string fam(parts.family);
  const std::string impl_tok(parts.impl_token);
  const Family* f = reg.family(fam);
  if (!f) throw std::invalid_argument("case id '" + id + "': unknown family '" + fam + "'");
  const Impl* impl = reg.impl_by_id_token(impl_tok);
  if (!impl || impl->family() != f->name())
    throw std::invalid_argument("case id '" + id + "': unknown impl '" + impl_tok + "' of family " + fam);
  Case c;
  c.family = f;
  c.impl = impl;
  c.problem = f->parse_id(parts.problem_id);
  const std::vector<std::string> tactics = tactics_of(*impl, *c.problem);
  if (!parts.tactic.empty() || !tactics.empty()) {
    if (std::find(tactics.begin(), tactics.end(), parts.tactic) == tactics.end()) {
      std::string known;
      for (const auto& t : tactics) known += (known.empty() ? "" : ", ") + t;
      throw std::invalid_argument("case id '" + id + "': " +
                                  (parts.tactic.empty() ? "no tactic" : "tactic '" + std::string(parts.tactic) + "'") +
                                  ", but " + std::string(impl->name()) + " runs this problem with " +
                                  (known.empty() ? "no tactics" : "the tactics " + known));
    }
    c.tactic = parts.tactic;
  }
  c.id = case_id_from_problem_id(*f, *impl, f->problem_id(*c.problem), c.tactic);
  if (c.id != id) throw std::invalid_argument("case id '" + id + "' is not canonical; did you mean '" + c.id + "'?");
  c.source = "id";
  return c;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string repro_program() {
  static const std::string program = [] {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec || exe.filename() != "opcts") return std::string("opcts");  // a test binary, say
    for (const std::string& dir : path_dirs())
      if (fs::equivalent(fs::path(dir) / "opcts", exe, ec)) return std::string("opcts");
    const std::string path = exe.string();
    const bool plain = path.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+-") ==
                       std::string::npos;
    return plain ? path : shell_quote(path);
  }();
  return program;
}

std::string repro_command(const std::string& id, const std::string& arch, const std::string& manifest,
                          const std::vector<std::string>& plugins, const std::string& cases_dir) {
  const bool plain_arch =
      !arch.empty() && arch.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos;
  std::string cmd =
      repro_program() + " repro " + shell_quote(id) + " --arch " + (plain_arch ? arch : shell_quote(arch));
  if (!cases_dir.empty()) cmd += " --cases-dir " + shell_quote(cases_dir);
  if (!manifest.empty()) cmd += " --manifest " + shell_quote(manifest);
  for (const auto& p : plugins) cmd += " --plugin " + shell_quote(p);
  return cmd;
}

std::string repro_command(const Suite& suite, const std::string& id) {
  const SuiteOptions& o = suite.options();
  // Paths as absolute ones, so the line runs from any folder; a plugin's bare name stays a
  // name (dlopen looks it up on the library path) and so does a Python module's "py:" name, but a
  // ".py" file is a path however it is spelled; the default cases folder goes unsaid.
  const auto absolute = [](const std::string& p) {
    std::error_code ec;
    const fs::path a = fs::absolute(p, ec);
    return ec ? p : a.lexically_normal().string();
  };
  std::vector<std::string> plugins;
  for (const auto& p : o.plugins) {
    const bool py_file = p.size() > 3 && p.compare(p.size() - 3, 3, ".py") == 0 && p.rfind("py:", 0) != 0;
    plugins.push_back(p.find('/') == std::string::npos && !py_file ? p : absolute(p));
  }
  std::error_code ec;
  const bool default_cases = fs::equivalent(o.cases_dir, default_cases_dir(), ec);
  std::string cmd = repro_command(id, suite.arch().name, o.manifest.empty() ? "" : absolute(o.manifest), plugins,
                                  default_cases || o.cases_dir.empty() ? "" : absolute(o.cases_dir));
  // The run modes the case ran under: a failure only a mode shows is reproduced only with it.
  if (o.bitwise) cmd += " --bitwise";
  if (o.invariance) cmd += " --invariance";
  if (o.capture) cmd += " --capture";
  return cmd;
}

}  // namespace opcts
