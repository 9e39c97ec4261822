// JSON-line serialisation of result records (nlohmann::json).
#include "core/result.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/read_file.hpp"

namespace opcts {

namespace {

using nlohmann::json;

// JSON has no Inf/NaN; errors can be either (a NaN where a number was due), so such
// values travel as strings and come back as doubles.
json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double as_num(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  throw std::runtime_error("expected a number, got " + j.dump());
}

Outcome as_outcome(const json& j, const char* field) {
  const auto o = parse_outcome(j.get<std::string>());
  if (!o) throw std::runtime_error(std::string("unknown outcome in field '") + field + "': " + j.dump());
  return *o;
}

// The output with the largest error relative to its bound speaks for the record.
const OutputStats* decisive(const ResultRecord& r) {
  const OutputStats* best = nullptr;
  double best_ratio = -1;
  for (const auto& o : r.outputs) {
    const double ratio = o.bound > 0 ? o.max_abs_err / o.bound : (o.max_abs_err > 0 ? INFINITY : 0);
    if (!best || ratio > best_ratio || std::isnan(ratio)) {
      best = &o;
      best_ratio = std::isnan(ratio) ? INFINITY : ratio;
    }
  }
  return best;
}

json failures_to(const std::vector<Failure>& fs) {
  json a = json::array();
  for (const auto& f : fs) {
    json jf = {{"kind", std::string(to_string(f.kind))}};
    if (!f.out.empty()) jf["out"] = f.out;
    if (f.elements) jf["elements"] = f.elements;
    if (f.kind == FailureKind::exceeds_bound) jf["ratio"] = num(f.ratio);
    a.push_back(std::move(jf));
  }
  return a;
}

std::vector<Failure> failures_from(const json& a) {
  if (!a.is_array()) throw std::runtime_error("'failures' is not an array: " + a.dump());
  std::vector<Failure> out;
  for (const auto& jf : a) {
    Failure f;
    const std::string kind = jf.at("kind").get<std::string>();
    const auto k = parse_failure_kind(kind);
    if (!k) throw std::runtime_error("unknown failure kind '" + kind + "'");
    f.kind = *k;
    f.out = jf.value("out", "");
    f.elements = jf.value("elements", int64_t{0});
    f.ratio = jf.contains("ratio") ? as_num(jf["ratio"]) : 0;
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

std::string describe(const Failure& f) {
  std::string s = f.out.empty() ? std::string(to_string(f.kind)) : f.out + " " + std::string(to_string(f.kind));
  if (f.kind == FailureKind::exceeds_bound) {
    char r[32];
    std::snprintf(r, sizeof r, " ×%.3g", f.ratio);
    s += r;
  }
  if (f.elements) s += " (" + std::to_string(f.elements) + (f.elements == 1 ? " element)" : " elements)");
  return s;
}

std::string describe(const std::vector<Failure>& failures) {
  std::string s;
  for (const auto& f : failures) s += (s.empty() ? "" : ", ") + describe(f);
  return s;
}

std::string failures_json(const std::vector<Failure>& failures) {
  return failures_to(failures).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<Failure> parse_failures_json(const std::string& text) {
  try {
    return failures_from(json::parse(text));
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("'failures': ") + e.what());
  }
}

std::string to_json_line(const ResultRecord& r) {
  json j;
  j["id"] = r.id;
  j["family"] = r.family;
  j["impl"] = r.impl;
  j["outcome"] = std::string(to_string(r.outcome));
  if (r.raw_outcome != r.outcome) j["raw_outcome"] = std::string(to_string(r.raw_outcome));
  j["arch"] = r.arch;
  j["device"] = r.device;
  j["seed"] = r.seed;
  j["ms"] = num(r.ms);
  if (r.inputs_ms || r.ref_ms || r.device_ms || r.compare_ms)
    j["phases_ms"] = {{"inputs", num(r.inputs_ms)},
                      {"reference", num(r.ref_ms)},
                      {"device", num(r.device_ms)},
                      {"compare", num(r.compare_ms)}};
  if (!r.tier.empty()) j["tier"] = r.tier;
  if (!r.message.empty()) j["message"] = r.message;
  if (!r.expectation.empty()) j["expectation"] = r.expectation;
  if (!r.tracking.empty()) j["tracking"] = r.tracking;
  if (!r.provisional.empty()) j["provisional"] = r.provisional;
  json outs = json::array();
  for (const auto& o : r.outputs) {
    json jo = {{"out", o.out},
               {"metric", o.metric},
               {"elements", o.elements},
               {"max_abs_err", num(o.max_abs_err)},
               {"max_rel_err", num(o.max_rel_err)},
               {"bound", num(o.bound)},
               {"lowp_err", num(o.lowp_err)},
               {"mismatches", o.mismatches},
               {"max_ratio", num(o.max_ratio)}};
    if (!o.rule.empty()) jo["rule"] = o.rule;
    if (o.conservation_off) jo["conservation_off"] = o.conservation_off;
    if (o.energy_ratio != 0) jo["energy_ratio"] = num(o.energy_ratio);
    if (o.has_slope()) {
      jo["slope"] = num(o.slope);
      jo["slope_lo"] = num(o.slope_lo);
      jo["slope_hi"] = num(o.slope_hi);
    }
    outs.push_back(std::move(jo));
  }
  if (!outs.empty()) j["outputs"] = outs;
  if (!r.failures.empty()) j["failures"] = failures_to(r.failures);
  if (r.planted) j["planted"] = true;
  if (!r.blind_spot.empty()) j["blind_spot"] = r.blind_spot;
  json worst = json::array();
  for (const auto& w : r.worst)
    worst.push_back({{"out", w.out}, {"index", w.index}, {"got", num(w.got)}, {"want", num(w.want)}});
  if (!worst.empty()) j["worst"] = worst;
  j["repro"] = r.repro;
  // Messages may hold any bytes (a kernel's error text); replace invalid UTF-8, never throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

ResultRecord parse_json_line(const std::string& line) {
  const json j = json::parse(line);
  ResultRecord r;
  r.id = j.at("id").get<std::string>();
  r.family = j.value("family", "");
  r.impl = j.value("impl", "");
  r.outcome = as_outcome(j.at("outcome"), "outcome");
  r.raw_outcome = j.contains("raw_outcome") ? as_outcome(j["raw_outcome"], "raw_outcome") : r.outcome;
  r.arch = j.value("arch", "");
  r.device = j.value("device", -1);
  r.seed = j.value("seed", "");
  r.ms = j.contains("ms") ? as_num(j["ms"]) : 0;
  if (j.contains("phases_ms")) {
    const json& ph = j["phases_ms"];
    r.inputs_ms = ph.contains("inputs") ? as_num(ph["inputs"]) : 0;
    r.ref_ms = ph.contains("reference") ? as_num(ph["reference"]) : 0;
    r.device_ms = ph.contains("device") ? as_num(ph["device"]) : 0;
    r.compare_ms = ph.contains("compare") ? as_num(ph["compare"]) : 0;
  }
  r.tier = j.value("tier", "");
  r.message = j.value("message", "");
  r.expectation = j.value("expectation", "");
  r.tracking = j.value("tracking", "");
  r.provisional = j.value("provisional", "");
  if (j.contains("outputs")) {
    for (const auto& o : j["outputs"]) {
      OutputStats s;
      s.out = o.at("out").get<std::string>();
      s.metric = o.value("metric", "");
      s.rule = o.value("rule", "");
      s.elements = o.value("elements", int64_t{0});
      s.max_abs_err = as_num(o.at("max_abs_err"));
      s.max_rel_err = as_num(o.at("max_rel_err"));
      s.bound = as_num(o.at("bound"));
      s.lowp_err = o.contains("lowp_err") ? as_num(o["lowp_err"]) : 0;
      s.mismatches = o.value("mismatches", int64_t{0});
      // Records written before max_ratio existed: unknown, which the tightness report skips.
      s.max_ratio = o.contains("max_ratio") ? as_num(o["max_ratio"]) : std::numeric_limits<double>::quiet_NaN();
      s.slope = o.contains("slope") ? as_num(o["slope"]) : 0;
      s.slope_lo = o.contains("slope_lo") ? as_num(o["slope_lo"]) : 0;
      s.slope_hi = o.contains("slope_hi") ? as_num(o["slope_hi"]) : 0;
      s.conservation_off = o.value("conservation_off", int64_t{0});
      s.energy_ratio = o.contains("energy_ratio") ? as_num(o["energy_ratio"]) : 0;
      r.outputs.push_back(std::move(s));
    }
  }
  if (j.contains("failures")) r.failures = failures_from(j["failures"]);
  r.planted = j.value("planted", false);
  r.blind_spot = j.value("blind_spot", std::string());
  if (j.contains("worst")) {
    for (const auto& w : j["worst"])
      r.worst.push_back({w.at("out").get<std::string>(), w.at("index").get<std::vector<int64_t>>(), as_num(w.at("got")),
                         as_num(w.at("want"))});
  }
  r.repro = j.value("repro", "");
  return r;
}

std::vector<ResultRecord> read_results_file(const std::string& path, std::vector<std::string>* headers) {
  const std::string text = read_file_limited(path, kMaxReportBytes, "a results file");
  std::vector<ResultRecord> out;
  size_t pos = 0;
  for (int n = 1; pos < text.size(); ++n) {
    const size_t nl = text.find('\n', pos);
    // A last line without its newline is a run killed in the middle of appending it (lines
    // are appended whole, each ending in '\n'): that half line is no record.
    const bool torn = nl == std::string::npos;
    const std::string line = text.substr(pos, torn ? std::string::npos : nl - pos);
    pos = torn ? text.size() : nl + 1;
    if (line.empty()) continue;
    if (line.rfind(kHeaderLinePrefix, 0) == 0) {  // the run's selection (judge/run_selection.hpp)
      if (headers && !torn) headers->push_back(line);
      continue;
    }
    try {
      out.push_back(parse_json_line(line));
    } catch (const std::exception& e) {
      if (torn) break;
      throw std::runtime_error(path + ":" + std::to_string(n) + ": " + e.what());
    }
  }
  return out;
}

double max_abs_err(const ResultRecord& r) {
  const auto* o = decisive(r);
  return o ? o->max_abs_err : 0;
}
double max_rel_err(const ResultRecord& r) {
  const auto* o = decisive(r);
  return o ? o->max_rel_err : 0;
}
double bound(const ResultRecord& r) {
  const auto* o = decisive(r);
  return o ? o->bound : 0;
}
int64_t mismatches(const ResultRecord& r) {
  // Saturating: records read back from files (merge) may hold any int64; overflow is UB.
  int64_t n = 0;
  for (const auto& o : r.outputs)
    if (__builtin_add_overflow(n, o.mismatches, &n))
      n = o.mismatches > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return n;
}

}  // namespace opcts
