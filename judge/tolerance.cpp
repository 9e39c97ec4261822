// Loading and resolving tolerance rules.
#include "judge/tolerance.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/glob.hpp"
#include "core/yaml_util.hpp"

namespace opcts {

ToleranceTable ToleranceTable::load(const std::string& path, const RuleCheck& check) {
  const YAML::Node root = load_yaml_file(path);
  check_keys(path, root, {"tolerances", "description"});
  if (!root["tolerances"]) yaml_fail(path, root, "expected a list 'tolerances:'");
  if (root["description"]) text_of(path, root, "description");
  ToleranceTable t;
  for (const auto& n : require_list(path, root["tolerances"], "'tolerances'")) {
    check_keys(path, n,
               {"family", "output", "dtype", "impl", "arch", "problem", "metric", "atol", "rtol", "factor", "atol_eps",
                "accumulator", "accumulation", "false_alarm", "provisional", "why"});
    ToleranceRule r;
    if (!n["family"]) yaml_fail(path, n, "a tolerance rule needs 'family:'");
    if (!n["metric"]) yaml_fail(path, n, "a tolerance rule needs 'metric:'");
    if (!n["why"]) yaml_fail(path, n, "a tolerance rule needs 'why:' deriving its bound");
    r.family = text_of(path, n, "family");
    r.output = n["output"] ? text_of(path, n, "output") : "";
    if (const YAML::Node d = n["dtype"]) {
      // One dtype or a list of them; each must be a dtype's name.
      const auto add = [&](const YAML::Node& v) {
        const std::string text = require_scalar(path, v, "a dtype").Scalar();
        try {
          r.dtypes.push_back(std::string(name(parse_dtype(text))));
        } catch (const std::exception& e) {
          yaml_fail(path, n, e.what());
        }
      };
      if (d.IsSequence()) {
        if (d.size() == 0) yaml_fail(path, d, "'dtype' is an empty list (leave it out to cover every dtype)");
        for (const auto& v : d) add(v);
      } else {
        add(d);
      }
    }
    r.impl = n["impl"] ? text_of(path, n, "impl") : "";
    r.arch = n["arch"] ? text_of(path, n, "arch") : "";
    r.problem = n["problem"] ? text_of(path, n, "problem") : "";
    r.tol.accumulation = n["accumulation"] ? text_of(path, n, "accumulation") : "";
    if (n["accumulator"]) r.tol.accumulator = parse_accumulator(path, n["accumulator"]);
    if (n["provisional"]) {
      r.provisional = bool_of(path, n, "provisional");
      if (r.provisional && !n["accumulator"])
        yaml_fail(path, n["provisional"], "'provisional' marks a stand-in 'accumulator:' model; this rule gives none");
    }
    try {
      r.tol.metric = parse_metric(text_of(path, n, "metric"));
    } catch (const YamlError&) {
      throw;
    } catch (const std::exception& e) {
      yaml_fail(path, n["metric"], e.what());
    }
    for (const auto& [key, field] : {std::pair{"atol", &r.tol.atol},
                                     {"rtol", &r.tol.rtol},
                                     {"factor", &r.tol.factor},
                                     {"atol_eps", &r.tol.atol_eps},
                                     {"false_alarm", &r.tol.false_alarm}}) {
      if (!n[key]) continue;
      *field = number_of(path, n, key);
      if (*field < 0) yaml_fail(path, n[key], std::string("'") + key + "' must be finite and >= 0");
    }
    r.tol.source = where(path, n);
    r.at = where_col(path, n);
    if (n["output"]) r.output_at = where_col(path, n["output"]);
    if (n["dtype"]) r.dtype_at = where_col(path, n["dtype"]);
    if (n["problem"]) r.problem_at = where_col(path, n["problem"]);
    r.why = text_of(path, n, "why");
    if ((r.tol.metric == Metric::ref_relative || r.tol.metric == Metric::bounded) && !(r.tol.factor > 0))
      yaml_fail(path, n, std::string(to_string(r.tol.metric)) + " needs a positive 'factor:'");
    if (!r.tol.accumulation.empty() && r.tol.metric != Metric::bounded && r.tol.metric != Metric::ref_relative)
      yaml_fail(path, n, "'accumulation' names a reference's bound: bounded and ref_relative only");
    if (r.tol.metric != Metric::allclose && r.tol.rtol != 0)
      yaml_fail(path, n["rtol"], "'rtol' only applies to the allclose metric");
    if (r.tol.metric != Metric::bounded && (n["accumulator"] || n["false_alarm"]))
      yaml_fail(path, n["accumulator"] ? n["accumulator"] : n["false_alarm"],
                "'accumulator' and 'false_alarm' only apply to the bounded metric");
    if (!(r.tol.false_alarm >= 0 && r.tol.false_alarm < 1))
      yaml_fail(path, n["false_alarm"],
                "'false_alarm' must lie in [0, 1) (a probability per element; 0: worst case only)");
    if (check)
      if (const auto problem = check(r)) yaml_fail(path, n[problem->key] ? n[problem->key] : n, problem->why);
    t.rules_.push_back(std::move(r));
  }
  return t;
}

void ToleranceTable::check_targets(const std::map<std::string, std::vector<RuleTarget>>& targets) const {
  for (const auto& r : rules_) {
    if (r.output.empty() && r.dtypes.empty() && r.problem.empty()) continue;
    const auto it = targets.find(r.family);
    if (it == targets.end() || it->second.empty()) continue;
    const auto& all = it->second;
    const auto problem_ok = [&](const RuleTarget& t) {
      return r.problem.empty() || glob_match(r.problem, t.problem_id);
    };
    const auto output_ok = [&](const RuleTarget& t) { return r.output.empty() || r.output == t.output; };
    const auto dtype_ok = [&](const RuleTarget& t) {
      return r.dtypes.empty() || std::find(r.dtypes.begin(), r.dtypes.end(), t.dtype) != r.dtypes.end();
    };
    if (std::any_of(all.begin(), all.end(),
                    [&](const RuleTarget& t) { return problem_ok(t) && output_ok(t) && dtype_ok(t); }))
      continue;
    // Which key is at fault, the narrowest first: the problem glob, the output name, the dtypes.
    const auto names = [&](auto field, auto keep) {
      std::set<std::string> seen;
      for (const auto& t : all)
        if (keep(t)) seen.insert(t.*field);
      std::string list;
      for (const auto& n : seen) list += (list.empty() ? "" : ", ") + n;
      return list;
    };
    const std::string in = " (in the catalogs loaded; a rule that applies to nothing leaves a wider rule in force)";
    if (!std::any_of(all.begin(), all.end(), problem_ok))
      throw YamlError(r.problem_at + ": tolerance rule's problem '" + r.problem + "' matches no problem of " +
                      r.family + in);
    if (!std::any_of(all.begin(), all.end(), [&](const RuleTarget& t) { return problem_ok(t) && output_ok(t); }))
      throw YamlError(r.output_at + ": tolerance rule's output '" + r.output + "' is no output of " + r.family +
                      (r.problem.empty() ? "" : " problems matching '" + r.problem + "'") +
                      " (outputs: " + names(&RuleTarget::output, problem_ok) + ")" + in);
    throw YamlError(r.dtype_at + ": tolerance rule's dtype matches no " +
                    (r.output.empty() ? "output" : "output '" + r.output + "'") + " of " + r.family +
                    (r.problem.empty() ? "" : " problems matching '" + r.problem + "'") + " (their dtypes: " +
                    names(&RuleTarget::dtype, [&](const RuleTarget& t) { return problem_ok(t) && output_ok(t); }) +
                    ")" + in);
  }
}

Tolerance ToleranceTable::resolve(const std::string& family, const std::string& output, DType dtype,
                                  const std::string& impl, const std::string& arch, const std::string& case_id,
                                  const Manifest* manifest) const {
  const ToleranceRule* hit = nullptr;
  const std::string dt(name(dtype));
  const auto slash = case_id.find('/');
  std::string problem = slash == std::string::npos ? case_id : case_id.substr(slash + 1);
  problem = problem.substr(0, problem.find('/'));  // without a tactic
  for (const auto& r : rules_) {
    if (r.family != family) continue;
    if (!r.output.empty() && r.output != output) continue;
    if (!r.dtypes.empty() && std::find(r.dtypes.begin(), r.dtypes.end(), dt) == r.dtypes.end()) continue;
    if (!r.impl.empty() && !glob_match(r.impl, impl)) continue;
    if (!r.arch.empty() && !glob_match(r.arch, arch)) continue;
    if (!r.problem.empty() && !glob_match(r.problem, problem)) continue;
    hit = &r;
  }
  if (!hit)
    throw std::runtime_error("no tolerance rule covers " + family + " output '" + output + "' (" + dt + ", " + impl +
                             ") in cases/tolerances.yaml");
  Tolerance t = hit->tol;
  bool measured = false;  // the arch's manifest states the impl's accumulator
  if (manifest) {
    if (const ManifestEntry* e = manifest->find(EntryKind::tolerance, case_id, output)) {
      if (e->factor) t.factor = *e->factor;
      if (e->atol) t.atol = *e->atol;
      if (e->rtol) t.rtol = *e->rtol;
      if (e->atol_eps) t.atol_eps = *e->atol_eps;
      if (e->accumulator) t.accumulator = *e->accumulator;
      if (e->accumulator) measured = true;
      if (e->false_alarm) t.false_alarm = *e->false_alarm;
      if (e->accumulation) t.accumulation = *e->accumulation;
      if ((e->accumulator || e->false_alarm) && t.metric != Metric::bounded)
        throw std::runtime_error(e->source + ": 'accumulator' / 'false_alarm' override a bounded tolerance, not " +
                                 std::string(to_string(t.metric)) + " (" + case_id + ")");
      if (e->accumulation && t.metric != Metric::bounded && t.metric != Metric::ref_relative)
        throw std::runtime_error(e->source +
                                 ": 'accumulation' names a reference's bound of a bounded or ref_relative " +
                                 "tolerance, not " + std::string(to_string(t.metric)) + " (" + case_id + ")");
      t.source += ", " + e->source;
    }
  }
  t.provisional = hit->provisional && !measured;
  return t;
}

}  // namespace opcts
