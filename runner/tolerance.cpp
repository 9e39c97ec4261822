// Loading and resolving tolerance rules.
#include "runner/tolerance.hpp"

#include <algorithm>
#include <cmath>

#include "runner/catalog.hpp"
#include "core/yaml_util.hpp"

namespace opcts {

ToleranceTable ToleranceTable::load(const std::string& path) {
  const YAML::Node root = load_yaml_file(path);
  if (!root.IsMap() || !root["tolerances"] || !root["tolerances"].IsSequence())
    yaml_fail(path, root, "expected a list 'tolerances:'");
  ToleranceTable t;
  for (const auto& n : root["tolerances"]) {
    check_keys(path, n, {"family", "output", "dtype", "impl", "arch", "problem", "metric", "atol", "rtol", "factor",
                         "atol_eps", "accumulator", "accumulation", "false_alarm", "why"});
    ToleranceRule r;
    try {
      if (!n["family"]) yaml_fail(path, n, "a tolerance rule needs 'family:'");
      if (!n["metric"]) yaml_fail(path, n, "a tolerance rule needs 'metric:'");
      if (!n["why"]) yaml_fail(path, n, "a tolerance rule needs 'why:' deriving its bound");
      r.family = n["family"].as<std::string>();
      r.output = n["output"] ? n["output"].as<std::string>() : "";
      if (n["dtype"]) {
        if (n["dtype"].IsSequence())
          for (const auto& d : n["dtype"]) r.dtypes.push_back(std::string(name(parse_dtype(d.as<std::string>()))));
        else
          r.dtypes.push_back(std::string(name(parse_dtype(n["dtype"].as<std::string>()))));
      }
      r.impl = n["impl"] ? n["impl"].as<std::string>() : "";
      r.arch = n["arch"] ? n["arch"].as<std::string>() : "";
      r.problem = n["problem"] ? n["problem"].as<std::string>() : "";
      r.tol.metric = parse_metric(n["metric"].as<std::string>());
      if (n["accumulator"]) r.tol.accumulator = parse_accumulator(path, n["accumulator"]);
      r.tol.false_alarm = n["false_alarm"] ? n["false_alarm"].as<double>() : 0;
      r.tol.atol = n["atol"] ? n["atol"].as<double>() : 0;
      r.tol.rtol = n["rtol"] ? n["rtol"].as<double>() : 0;
      r.tol.factor = n["factor"] ? n["factor"].as<double>() : 0;
      r.tol.atol_eps = n["atol_eps"] ? n["atol_eps"].as<double>() : 0;
      r.tol.accumulation = n["accumulation"] ? n["accumulation"].as<std::string>() : "";
      r.tol.source = where(path, n);
      r.why = n["why"].as<std::string>();
    } catch (const YamlError&) {
      throw;
    } catch (const YAML::Exception& e) {
      yaml_fail(path, n, e.msg);
    } catch (const std::exception& e) {
      yaml_fail(path, n, e.what());
    }
    for (const auto& [key, v] : {std::pair{"atol", r.tol.atol}, {"rtol", r.tol.rtol}, {"factor", r.tol.factor},
                                 {"atol_eps", r.tol.atol_eps}})
      if (!std::isfinite(v) || v < 0) yaml_fail(path, n, std::string("'") + key + "' must be finite and >= 0");
    if ((r.tol.metric == Metric::ref_relative || r.tol.metric == Metric::bounded) && !(r.tol.factor > 0))
      yaml_fail(path, n, std::string(to_string(r.tol.metric)) + " needs a positive 'factor:'");
    if (!r.tol.accumulation.empty() && r.tol.metric != Metric::bounded)
      yaml_fail(path, n, "'accumulation' names a bound of the bounded metric only");
    if (r.tol.metric != Metric::allclose && r.tol.rtol != 0)
      yaml_fail(path, n, "'rtol' only applies to the allclose metric");
    if (r.tol.metric != Metric::bounded && (n["accumulator"] || n["false_alarm"]))
      yaml_fail(path, n, "'accumulator' and 'false_alarm' only apply to the bounded metric");
    if (!(r.tol.false_alarm >= 0 && r.tol.false_alarm < 1))
      yaml_fail(path, n["false_alarm"], "'false_alarm' must lie in [0, 1) (a probability per element; 0: worst case only)");
    t.rules_.push_back(std::move(r));
  }
  return t;
}

Tolerance ToleranceTable::resolve(const std::string& family, const std::string& output, DType dtype,
                                  const std::string& impl, const std::string& arch, const std::string& case_id,
                                  const Manifest* manifest) const {
  const ToleranceRule* hit = nullptr;
  const std::string dt(name(dtype));
  const auto slash = case_id.find('/');
  const std::string problem = slash == std::string::npos ? case_id : case_id.substr(slash + 1);
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
  if (manifest) {
    if (const ManifestEntry* e = manifest->find(EntryKind::tolerance, case_id, output)) {
      if (e->factor) t.factor = *e->factor;
      if (e->atol) t.atol = *e->atol;
      if (e->rtol) t.rtol = *e->rtol;
      if (e->atol_eps) t.atol_eps = *e->atol_eps;
      if (e->accumulator) t.accumulator = *e->accumulator;
      if (e->false_alarm) t.false_alarm = *e->false_alarm;
      if ((e->accumulator || e->false_alarm) && t.metric != Metric::bounded)
        throw std::runtime_error(e->source + ": 'accumulator' / 'false_alarm' override a bounded tolerance, not " +
                                 std::string(to_string(t.metric)) + " (" + case_id + ")");
      t.source += ", " + e->source;
    }
  }
  return t;
}

}  // namespace opcts
