// Manifest parsing, matching and the expectation table.
#include "judge/manifest.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <re2/re2.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/glob.hpp"
#include "core/spellings.hpp"
#include "core/yaml_util.hpp"

namespace opcts {

namespace fs = std::filesystem;

// Each kind's name, which is also its list's key in a manifest file.
constexpr Spellings<EntryKind, 4> kEntryKinds{{{EntryKind::skip, "skip"},
                                               {EntryKind::xfail, "xfail"},
                                               {EntryKind::flaky, "flaky"},
                                               {EntryKind::tolerance, "tolerance"}}};

std::string_view to_string(EntryKind k) { return kEntryKinds.of(k); }

bool is_tracking_reference(const std::string& s) {
  // A URL; owner/repo#N or repo#N; "issue N"; a Markdown page of this repository with an
  // optional section anchor (GitHub's, which keeps non-ASCII letters and dashes; relative, no
  // "..": it names a file of the checkout, which `manifest lint` checks).
  static const RE2 kForms(R"(https?://[^\s/]+(/\S*)?|([A-Za-z0-9_.-]+/)?[A-Za-z0-9_.-]+#[0-9]+|issue [0-9]+|)"
                          R"([A-Za-z0-9_][A-Za-z0-9_./-]*\.md(#\S+)?)");
  return RE2::FullMatch(s, kForms) && (s.rfind("http", 0) == 0 || s.find("..") == std::string::npos);
}

std::string heading_anchor(const std::string& heading) {
  std::string a;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_') a += static_cast<char>(std::tolower(c));
    else if (c == ' ') a += '-';
    else if (c >= 0x80) a += static_cast<char>(c);
  }
  return a;
}

std::string unresolved_tracking(const std::string& tracking, const std::string& cases_dir) {
  if (tracking.rfind("http", 0) == 0 || tracking.find(".md") == std::string::npos) return "";
  const std::string file = tracking.substr(0, tracking.find('#'));
  std::filesystem::path dir = std::filesystem::absolute(cases_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "cases/"
  const std::filesystem::path root = dir.parent_path();
  if (!std::filesystem::is_directory(root / file.substr(0, file.find('/')))) return "";
  std::ifstream in(root / file);
  if (!in) return "names " + file + ", which is not there";
  if (file.size() == tracking.size()) return "";
  const std::string anchor = tracking.substr(file.size() + 1);
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || line.empty() || line[0] != '#') continue;
    const auto text = line.find_first_not_of('#');
    if (text != std::string::npos && heading_anchor(line.substr(text + 1)) == anchor) return "";
  }
  return "names section #" + anchor + ", which no heading of " + file + " has";
}

namespace {

// Every kind name of the output (case_kinds false) or case (true) kinds, for errors.
std::string kind_names(bool case_kinds) {
  std::string s;
  for (FailureKind k : kAllFailureKinds)
    if (is_case_kind(k) == case_kinds) s += (s.empty() ? "" : ", ") + std::string(to_string(k));
  return s;
}

// A list of failure kinds at `n` (`what` names it in errors), each of the output kinds or of the
// case kinds as `case_kinds` says.
std::vector<FailureKind> parse_kinds(const std::string& path, const YAML::Node& n, const std::string& what,
                                     bool case_kinds) {
  std::vector<FailureKind> out;
  const YAML::Node list = require_list(path, n, what + " (a list of failure kinds)");
  if (list.size() == 0) yaml_fail(path, n, what + " is empty: name the failure kinds expected");
  for (const auto& k : list) {
    const std::string name = require_scalar(path, k, "a failure kind in " + what).Scalar();
    const auto kind = parse_failure_kind(name);
    if (!kind || is_case_kind(*kind) != case_kinds)
      yaml_fail(path, k,
                "'" + name + "' is not " + (case_kinds ? "a kind of the case" : "a kind of an output") + " (" +
                    (kind ? std::string(case_kinds ? "it is an output's: put it under 'outputs'"
                                                   : "it is the case's: put it under 'case'")
                          : "kinds: " + kind_names(case_kinds)) +
                    ")");
    if (std::find(out.begin(), out.end(), *kind) == out.end()) out.push_back(*kind);
  }
  return out;
}

// An xfail's typed failures: `outputs: {NAME: [KIND...]}`, `case: [KIND...]`, `max_ratio`. An
// entry expecting FAIL must name at least one (an untyped FAIL entry would absorb any failure
// of any output); the others expect what their `message` says and take none of these.
void parse_expected_failures(const std::string& path, const YAML::Node& n, ManifestEntry& e) {
  const bool typed = n["outputs"] || n["case"] || n["max_ratio"];
  if (e.expect != Outcome::FAIL) {
    if (typed)
      yaml_fail(path, n,
                "xfail entry '" + e.match + "' expects " + std::string(to_string(e.expect)) +
                    ": 'outputs', 'case' and 'max_ratio' type a FAIL only (an " + std::string(to_string(e.expect)) +
                    " says what it expects with 'message')");
    return;
  }
  if (n["outputs"]) {
    const YAML::Node m = require_map(path, n["outputs"], "'outputs' (a map of output names to failure kinds)");
    if (m.size() == 0)
      yaml_fail(path, n["outputs"], "'outputs' is empty: name each output and the kinds expected of it");
    for (const auto& kv : m) {
      const std::string out = require_scalar(path, kv.first, "an output name in 'outputs'").Scalar();
      if (out.empty()) yaml_fail(path, kv.first, "an output name in 'outputs' is empty");
      e.outputs.emplace_back(out, parse_kinds(path, kv.second, "the kinds of output '" + out + "'", false));
    }
  }
  if (n["case"]) e.case_kinds = parse_kinds(path, n["case"], "'case'", true);
  if (e.outputs.empty() && e.case_kinds.empty())
    yaml_fail(path, n,
              "xfail entry '" + e.match +
                  "' expects FAIL but names no failure kind: give 'outputs: {OUTPUT: [KIND, ...]}' (kinds: " +
                  kind_names(false) + ") and/or 'case: [KIND, ...]' (kinds: " + kind_names(true) + ")");
  if (n["max_ratio"]) {
    e.max_ratio = number_of(path, n, "max_ratio");
    if (!(*e.max_ratio > 1))
      yaml_fail(path, n["max_ratio"], "'max_ratio' must be > 1 (an exceeds_bound's error ÷ bound is above 1)");
    bool any = false;
    for (const auto& [out, kinds] : e.outputs)
      any = any || std::find(kinds.begin(), kinds.end(), FailureKind::exceeds_bound) != kinds.end();
    if (!any) yaml_fail(path, n["max_ratio"], "'max_ratio' caps exceeds_bound, which no output of this entry names");
  }
}

ManifestEntry parse_entry(const std::string& path, EntryKind kind, const YAML::Node& n) {
  switch (kind) {
    case EntryKind::skip: check_keys(path, n, {"match", "reason", "tracking"}); break;
    case EntryKind::xfail:
      check_keys(path, n,
                 {"match", "reason", "tracking", "strict", "expect", "message", "outputs", "case", "max_ratio"});
      break;
    case EntryKind::flaky: check_keys(path, n, {"match", "reason", "tracking", "reruns"}); break;
    case EntryKind::tolerance:
      check_keys(path, n,
                 {"match", "reason", "tracking", "output", "factor", "atol", "rtol", "atol_eps", "accumulator",
                  "false_alarm", "accumulation"});
      break;
  }
  const std::string what(to_string(kind));
  ManifestEntry e;
  e.kind = kind;
  e.source = where(path, n);
  if (!n["match"]) yaml_fail(path, n, what + " entry needs 'match:' (a glob over case ids)");
  e.match = text_of(path, n, "match");
  if (e.match.empty()) yaml_fail(path, n["match"], what + " entry has an empty 'match:'");
  if (!n["reason"] || text_of(path, n, "reason").empty())
    yaml_fail(path, n, what + " entry '" + e.match + "' needs a 'reason:'");
  e.reason = text_of(path, n, "reason");
  // A folded (>) reason ends in a newline; reports and `list -v` print it on one line.
  while (!e.reason.empty() && std::isspace(static_cast<unsigned char>(e.reason.back()))) e.reason.pop_back();
  if (n["tracking"]) {
    e.tracking = text_of(path, n, "tracking");
    if (!is_tracking_reference(e.tracking))
      yaml_fail(path, n["tracking"],
                "'tracking' must be a URL (https://...), an issue reference (opcts#32, pytorch/pytorch#131257, "
                "issue 41) or a page of ours (docs/status/sm90.md#section), not '" +
                    e.tracking + "'");
  }
  if (n["strict"]) e.strict = bool_of(path, n, "strict");
  if (kind == EntryKind::xfail) {
    if (!n["expect"])
      yaml_fail(
          path, n,
          "xfail entry '" + e.match + "' needs 'expect:' (FAIL, ERROR, CRASH or TIMEOUT): the failure it expects");
    const std::string expect = text_of(path, n, "expect");
    const auto o = parse_outcome(expect);
    if (!o || !is_failure(*o))
      yaml_fail(path, n["expect"], "'expect' must be FAIL, ERROR, CRASH or TIMEOUT, not '" + expect + "'");
    e.expect = *o;
    if (n["message"]) {
      e.message = text_of(path, n, "message");
      // RE2 (unmet_expectation) refuses what it cannot match in bounded memory (nesting past
      // 1,000, a program over its 8 MiB) here, with its reason: no length cap of our own.
      if (const RE2 re(e.message, RE2::Quiet); !re.ok())
        yaml_fail(path, n["message"], "'message' is not a valid regular expression (RE2 syntax): " + re.error());
    }
    parse_expected_failures(path, n, e);
  }
  if (n["reruns"]) e.reruns = static_cast<int>(int_of(path, n, "reruns", 0, kMaxReruns));
  if (n["output"]) {
    e.output = text_of(path, n, "output");
    e.output_at = where_col(path, n["output"]);
  }
  for (const auto& [key, field] :
       {std::pair{"factor", &e.factor}, {"atol", &e.atol}, {"rtol", &e.rtol}, {"atol_eps", &e.atol_eps}}) {
    if (!n[key]) continue;
    *field = number_of(path, n, key);
    const bool positive = std::string(key) == "factor";
    if (**field < 0 || (positive && **field == 0))
      yaml_fail(path, n[key], std::string("'") + key + "' must be finite and " + (positive ? "> 0" : ">= 0"));
  }
  if (n["false_alarm"]) {
    e.false_alarm = number_of(path, n, "false_alarm");
    if (!(*e.false_alarm >= 0 && *e.false_alarm < 1))
      yaml_fail(path, n["false_alarm"], "'false_alarm' must lie in [0, 1)");
  }
  if (n["accumulator"]) e.accumulator = parse_accumulator(path, n["accumulator"]);
  if (n["accumulation"]) {
    e.accumulation = text_of(path, n, "accumulation");
    if (e.accumulation->empty()) yaml_fail(path, n["accumulation"], "'accumulation' is empty");
  }
  if (kind == EntryKind::tolerance && !e.factor && !e.atol && !e.rtol && !e.atol_eps && !e.accumulator &&
      !e.false_alarm && !e.accumulation)
    yaml_fail(path, n,
              "tolerance entry '" + e.match +
                  "' sets none of factor, atol, rtol, atol_eps, accumulator, false_alarm, accumulation");
  return e;
}

// Where `extends: [name]` in the manifest at `path` points: a bare name ("sm90") is
// <name>.yaml in the same folder; a path (one with a '/', or ending in .yaml or .yml) is taken
// relative to that folder, or as it is when absolute, so a team's manifest anywhere can extend
// the built-in one ("../opcts/cases/manifests/sm90.yaml").
fs::path extended_path(const std::string& path, const std::string& name) {
  const fs::path dir = fs::path(path).parent_path();
  const auto ends_with = [&](const char* ext) { return fs::path(name).extension() == ext; };
  if (name.find('/') == std::string::npos && !ends_with(".yaml") && !ends_with(".yml")) return dir / (name + ".yaml");
  return fs::path(name).is_absolute() ? fs::path(name) : dir / name;
}

// `chain` holds the files being loaded (a repeat is a cycle); `done` the files already
// loaded, so a manifest reached twice (a diamond of extends) adds its entries once.
void load_into(const std::string& path, std::vector<ManifestEntry>& out, std::string* arch,
               std::set<std::string>& chain, std::set<std::string>& done) {
  const std::string canon = fs::weakly_canonical(path).string();
  if (chain.count(canon)) throw YamlError(path + ":1:1: extends cycle");
  if (!done.insert(canon).second) return;
  chain.insert(canon);
  const YAML::Node root = load_yaml_file(path);
  check_keys(path, root, {"arch", "extends", "skip", "xfail", "flaky", "tolerance", "description"});
  const std::string own_arch = root["arch"] ? text_of(path, root, "arch") : "";
  if (arch) *arch = own_arch;
  if (root["description"]) text_of(path, root, "description");
  for (const auto& [kind, name] : kEntryKinds.rows) {
    const std::string key(name);
    if (!root[key]) continue;
    for (const auto& n : require_list(path, root[key], "'" + key + "'")) out.push_back(parse_entry(path, kind, n));
  }
  if (root["extends"]) {
    for (const auto& x : require_list(path, root["extends"], "'extends' (a list of manifest names or paths)")) {
      const std::string name = require_scalar(path, x, "a manifest name or path in 'extends'").Scalar();
      if (name.empty()) yaml_fail(path, x, "extends: an empty manifest name");
      const fs::path parent = extended_path(path, name);
      if (!fs::is_regular_file(parent)) yaml_fail(path, x, "extends '" + name + "': no file " + parent.string());
      load_into(parent.string(), out, nullptr, chain, done);
    }
  }
  chain.erase(canon);
}

}  // namespace

Manifest Manifest::load(const std::string& path) {
  Manifest m;
  m.path_ = path;
  std::set<std::string> chain, done;
  load_into(path, m.entries_, &m.arch_, chain, done);
  return m;
}

Manifest Manifest::empty(std::string arch) {
  Manifest m;
  m.arch_ = std::move(arch);
  return m;
}

const ManifestEntry* Manifest::find(EntryKind kind, const std::string& id, const std::string& output) const {
  for (const auto& e : entries_) {
    if (e.kind != kind || !glob_match(e.match, id)) continue;
    if (kind == EntryKind::tolerance && !e.output.empty() && e.output != output) continue;
    return &e;
  }
  return nullptr;
}

std::vector<const ManifestEntry*> Manifest::stale(const std::vector<std::string>& ids) const {
  std::vector<const ManifestEntry*> out;
  for (const auto& e : entries_) {
    if (e.planted) continue;  // implied by an impl, not written in a file: nothing to remove
    bool any = false;
    for (const auto& id : ids)
      if ((any = glob_match(e.match, id))) break;
    if (!any) out.push_back(&e);
  }
  return out;
}

namespace {

std::string fmt_ratio(double r) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", r);
  return b;
}

}  // namespace

std::string expected_failures(const ManifestEntry& xfail) {
  std::string s;
  for (const auto& [out, kinds] : xfail.outputs) {
    s += (s.empty() ? "" : "; ") + out + ":";
    for (size_t i = 0; i < kinds.size(); ++i) {
      s += (i ? ", " : " ") + std::string(to_string(kinds[i]));
      if (kinds[i] == FailureKind::exceeds_bound && xfail.max_ratio)
        s += " (ratio <= " + fmt_ratio(*xfail.max_ratio) + ")";
    }
  }
  if (!xfail.case_kinds.empty()) {
    s += (s.empty() ? "" : "; ") + std::string("case:");
    for (size_t i = 0; i < xfail.case_kinds.size(); ++i)
      s += (i ? ", " : " ") + std::string(to_string(xfail.case_kinds[i]));
  }
  return s;
}

namespace {

// The failures of a FAIL that its typed entry does not name (or names with a smaller ratio).
std::vector<Failure> unexpected_failures(const std::vector<Failure>& failures, const ManifestEntry& xfail) {
  std::vector<Failure> out;
  for (const Failure& f : failures) {
    bool named = false;
    if (f.out.empty()) {
      named = std::find(xfail.case_kinds.begin(), xfail.case_kinds.end(), f.kind) != xfail.case_kinds.end();
    } else {
      for (const auto& [o, kinds] : xfail.outputs)
        if (o == f.out) named = std::find(kinds.begin(), kinds.end(), f.kind) != kinds.end();
    }
    // NaN-safe: a ratio that is not at most the cap is over it.
    if (named && f.kind == FailureKind::exceeds_bound && xfail.max_ratio) named = f.ratio <= *xfail.max_ratio;
    if (!named) out.push_back(f);
  }
  return out;
}

}  // namespace

std::string planted_pass_text(const std::string& source, const std::string& blind_spot) {
  return "planted bug NOT caught: " + source + " passed" +
         (blind_spot.empty() ? "" : ", in a derived blind spot of its checks: " + blind_spot);
}

std::string unmet_expectation(Outcome raw, const std::string& message, const std::vector<Failure>& failures,
                              const ManifestEntry& xfail) {
  if (!is_failure(raw)) return "";
  const bool outcome_ok = raw == xfail.expect;
  // A FAIL meets a typed entry when each of its failures is one the entry names; a planted
  // impl's implied entry takes any FAIL (any kind shows the bug caught).
  std::string kinds_unmet;
  if (outcome_ok && raw == Outcome::FAIL && !xfail.planted) {
    if (failures.empty()) kinds_unmet = "no failure kind recorded";
    else if (const auto other = unexpected_failures(failures, xfail); !other.empty()) kinds_unmet = describe(other);
  }
  // RE2 matches in time linear in the message and without recursion, so the whole message is
  // matched however long (libstdc++'s std::regex recursed once per character consumed and
  // overflowed the stack at ~100,000). A pattern that does not compile matches nothing.
  const bool message_ok = xfail.message.empty() || RE2::PartialMatch(message, RE2(xfail.message, RE2::Quiet));
  if (outcome_ok && message_ok && kinds_unmet.empty()) return "";
  std::string want = std::string(to_string(xfail.expect));
  if (xfail.expect == Outcome::FAIL && !xfail.planted) want += " of " + expected_failures(xfail);
  if (!xfail.message.empty()) want += " matching '" + xfail.message + "'";
  std::string got = std::string(to_string(raw));
  if (!kinds_unmet.empty()) got += ": " + kinds_unmet;
  else if (outcome_ok) got += " with another message";
  return "xfail " + xfail.source + " expects " + want + ", got " + got;
}

Outcome apply_expectation(Outcome raw, const std::string& message, const std::vector<Failure>& failures,
                          const ManifestEntry* xfail) {
  if (!xfail) return raw;
  // Only the failure the entry expects is XFAIL (a planted bug is caught by a FAIL, not by an
  // error, crash or timeout); any other failure stands.
  if (is_failure(raw)) return unmet_expectation(raw, message, failures, *xfail).empty() ? Outcome::XFAIL : raw;
  if (raw == Outcome::PASS) return xfail->strict ? Outcome::XPASS : Outcome::PASS;
  return raw;  // SKIP stays SKIP; XFAIL/XPASS are already resolved
}

}  // namespace opcts
