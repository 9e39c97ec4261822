// Loading the suite's data files and deciding skips.
#include "runner/suite.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>


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
        return RuleProblem{"impl", "tolerance rule's impl '" + r.impl + "' matches no impl of " + r.family + " (known: " +
                                       known + "; a plugin's impls need its --plugin)"};
    }
    const auto names = archs.names();
    if (!r.arch.empty() && std::none_of(names.begin(), names.end(), [&](const std::string& a) { return glob_match(r.arch, a); }))
      return RuleProblem{"arch", "tolerance rule's arch '" + r.arch + "' matches no arch of archs.yaml"};
    return std::nullopt;
  };
}

}  // namespace

std::string default_cases_dir() {
  if (const char* env = std::getenv("OPCTS_CASES_DIR"); env && *env) return env;
  return OPCTS_SOURCE_CASES_DIR;  // set by CMake to <source>/cases
}

Suite::Suite(const Registry& reg, const SuiteOptions& opt)
    : reg_(&reg),
      options_(opt),
      archs_(ArchTable::load(opt.cases_dir + "/archs.yaml")),
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
  cases_ = make_cases(*reg_, load_catalogs(*reg_, paths), arch_, opt.include_planted);
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
  for (const auto& cap : c.impl->required_caps())
    if (!arch_.has(cap)) return "arch " + arch_.name + " lacks capability '" + cap + "' needed by " + std::string(c.impl->name());
  // A negative case must reach the impl's run: a supports() that declines the invalid problem
  // would hide the refusal the case is about. Only an impl that cannot run at all here skips it
  // (its supports() is asked after a refusal that is not the contract's: runner/execute.cpp).
  // Planted impls take only the problems that probe their bug.
  if (!c.family->expected_error(*c.problem).empty() && !c.impl->planted()) {
    if (std::string why = c.impl->unavailable(); !why.empty()) return why;
  } else if (const Support s = c.impl->supports(*c.problem, arch_); !s.ok) {
    return s.reason;
  }
  if (c.impl->planted() && c.impl->bug_needs_bitwise() && !options_.bitwise)
    return std::string(c.impl->name()) + ": its bug breaks its determinism claim, which only opcts run --bitwise shows";
  if (const ManifestEntry* e = manifest_.find(EntryKind::skip, c.id))
    return "manifest skip (" + e->source + "): " + e->reason;
  return std::nullopt;
}

Case case_from_id(const Registry& reg, const std::string& id) {
  const auto slash = id.find('/');
  const auto dot = id.find('.');
  if (slash == std::string::npos || dot == std::string::npos || dot > slash)
    throw std::invalid_argument("case id '" + id + "': expected <family>.<impl>/<problem>");
  const std::string fam = id.substr(0, dot);
  const std::string impl_tok = id.substr(dot + 1, slash - dot - 1);
  const Family* f = reg.family(fam);
  if (!f) throw std::invalid_argument("case id '" + id + "': unknown family '" + fam + "'");
  const Impl* impl = reg.impl_by_id_token(impl_tok);
  if (!impl || impl->family() != f->name())
    throw std::invalid_argument("case id '" + id + "': unknown impl '" + impl_tok + "' of family " + fam);
  Case c;
  c.family = f;
  c.impl = impl;
  c.problem = f->parse_id(id.substr(slash + 1));
  c.id = case_id(*f, *impl, *c.problem);
  if (c.id != id) throw std::invalid_argument("case id '" + id + "' is not canonical; did you mean '" + c.id + "'?");
  c.source = "id";
  return c;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string repro_command(const std::string& id, const std::string& arch, const std::string& manifest,
                          const std::vector<std::string>& plugins) {
  const bool plain_arch = !arch.empty() && arch.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos;
  std::string cmd = "opcts repro " + shell_quote(id) + " --arch " + (plain_arch ? arch : shell_quote(arch));
  if (!manifest.empty()) cmd += " --manifest " + shell_quote(manifest);
  for (const auto& p : plugins) cmd += " --plugin " + shell_quote(p);
  return cmd;
}

}  // namespace opcts
