// JUnit XML writer and reader (pugixml); the outcome mapping is docs/ci.md's "JUnit".
#include "reports/junit.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <pugixml.hpp>

#include "core/read_file.hpp"
#include "reports/summary.hpp"

namespace opcts {

namespace {

// The testsuite (and its properties' name) that carries the run's selection.
constexpr const char* kSelectionSuite = "opcts.selection";

// Doubles travel as fmt's shortest round-trip text ("0.031", "1e-05", "nan", "-inf"), which
// std::from_chars reads back to the same value.
std::string num(double v) { return fmt::format("{}", v); }

std::string family_of(const ResultRecord& r) {
  if (!r.family.empty()) return r.family;
  const auto dot = r.id.find('.');
  return dot == std::string::npos ? std::string("unknown") : r.id.substr(0, dot);
}

// The testcase name: the id without its "family." prefix (GitLab shows classname and name
// side by side, and the classname already holds the family).
std::string case_name(const ResultRecord& r, const std::string& family) {
  const std::string prefix = family + ".";
  return r.id.rfind(prefix, 0) == 0 ? r.id.substr(prefix.size()) : r.id;
}

std::string join_index(const std::vector<int64_t>& index) { return fmt::format("{}", fmt::join(index, ",")); }

std::string iso8601_utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Seconds for JUnit time attributes; a NaN or negative time (never measured) counts as 0.
double seconds(double ms) { return std::isfinite(ms) && ms > 0 ? ms / 1000.0 : 0.0; }
std::string time_attr(double secs) { return fmt::format("{:.6f}", secs); }

void set_attr(pugi::xml_node n, const char* name, std::string_view value) {
  n.append_attribute(name).set_value(sanitize_xml_text(value).c_str());
}

void add_prop(pugi::xml_node props, std::string_view name, std::string_view value) {
  auto p = props.append_child("property");
  set_attr(p, "name", name);
  set_attr(p, "value", value);
}

void add_text(pugi::xml_node n, std::string_view text) {
  n.append_child(pugi::node_pcdata).set_value(sanitize_xml_text(text).c_str());
}

// Distinct metrics of the outputs, in output order ("ref_relative" or "exact,allclose").
std::string metrics(const ResultRecord& r) {
  std::vector<std::string> seen;
  for (const auto& o : r.outputs)
    if (std::find(seen.begin(), seen.end(), o.metric) == seen.end()) seen.push_back(o.metric);
  return fmt::format("{}", fmt::join(seen, ","));
}

// The worst elements, the first as first_mismatch.*, the others as worst.<k>.* (read_junit
// reads both back).
void add_worst_properties(pugi::xml_node props, const ResultRecord& r) {
  for (std::size_t k = 0; k < r.worst.size(); ++k) {
    const auto& w = r.worst[k];
    const std::string p = k == 0 ? "first_mismatch." : fmt::format("worst.{}.", k);
    add_prop(props, p + "out", w.out);
    add_prop(props, p + "index", join_index(w.index));
    add_prop(props, p + "got", num(w.got));
    add_prop(props, p + "want", num(w.want));
  }
}

// The lean properties (JunitDetail::lean): what a CI page shows and a reader needs to rebuild
// the verdict. A passing case carries its id, impl and tier (the time is the testcase's
// attribute, the arch its classname's); any other outcome adds the outcomes, its message, the
// manifest's expectation, the worst elements and the repro line. The .jsonl keeps the rest.
void add_lean_properties(pugi::xml_node tc, const ResultRecord& r) {
  auto props = tc.append_child("properties");
  add_prop(props, "id", r.id);
  add_prop(props, "impl", r.impl);
  if (!r.tier.empty()) add_prop(props, "tier", r.tier);
  // A verdict under a stand-in accumulator model says so even when it passed.
  if (!r.provisional.empty()) add_prop(props, "provisional", r.provisional);
  if (r.outcome == Outcome::PASS && r.raw_outcome == Outcome::PASS) return;
  add_prop(props, "outcome", to_string(r.outcome));
  add_prop(props, "raw_outcome", to_string(r.raw_outcome));
  if (!r.message.empty()) add_prop(props, "message", r.message);
  if (!r.expectation.empty()) add_prop(props, "expectation", r.expectation);
  if (!r.tracking.empty()) add_prop(props, "tracking", r.tracking);
  add_worst_properties(props, r);
  if (!r.repro.empty()) add_prop(props, "repro", r.repro);
}

void add_properties(pugi::xml_node tc, const ResultRecord& r, JunitDetail detail) {
  if (detail == JunitDetail::lean) return add_lean_properties(tc, r);
  auto props = tc.append_child("properties");
  add_prop(props, "id", r.id);
  add_prop(props, "arch", r.arch);
  add_prop(props, "impl", r.impl);
  add_prop(props, "device", std::to_string(r.device));
  add_prop(props, "seed", r.seed);
  add_prop(props, "outcome", to_string(r.outcome));
  add_prop(props, "raw_outcome", to_string(r.raw_outcome));
  if (!r.tier.empty()) add_prop(props, "tier", r.tier);
  add_prop(props, "ms", num(r.ms));
  // The record's own message; the failure/skipped element's message is a display form.
  if (!r.message.empty()) add_prop(props, "message", r.message);
  if (!r.expectation.empty()) add_prop(props, "expectation", r.expectation);
  if (!r.tracking.empty()) add_prop(props, "tracking", r.tracking);
  // The failure kinds, machine-read by read_junit (the gate matches typed xfails against them).
  if (!r.failures.empty()) add_prop(props, "failures", failures_json(r.failures));
  if (r.planted) add_prop(props, "planted", "true");
  if (!r.blind_spot.empty()) add_prop(props, "blind_spot", r.blind_spot);
  if (!r.provisional.empty()) add_prop(props, "provisional", r.provisional);
  if (!r.outputs.empty()) {
    add_prop(props, "metric", metrics(r));
    add_prop(props, "max_abs_err", num(max_abs_err(r)));
    add_prop(props, "max_rel_err", num(max_rel_err(r)));
    add_prop(props, "bound", num(bound(r)));
    add_prop(props, "mismatches", std::to_string(mismatches(r)));
  }
  add_worst_properties(props, r);
  for (const auto& o : r.outputs) {
    const std::string p = "out." + o.out + ".";
    add_prop(props, p + "metric", o.metric);
    if (!o.rule.empty()) add_prop(props, p + "rule", o.rule);
    add_prop(props, p + "elements", std::to_string(o.elements));
    add_prop(props, p + "max_abs_err", num(o.max_abs_err));
    add_prop(props, p + "max_rel_err", num(o.max_rel_err));
    add_prop(props, p + "bound", num(o.bound));
    add_prop(props, p + "lowp_err", num(o.lowp_err));
    add_prop(props, p + "mismatches", std::to_string(o.mismatches));
    add_prop(props, p + "max_ratio", num(o.max_ratio));
    if (o.conservation_off) add_prop(props, p + "conservation_off", std::to_string(o.conservation_off));
    if (o.energy_ratio != 0) add_prop(props, p + "energy_ratio", num(o.energy_ratio));
    if (o.has_slope()) {
      add_prop(props, p + "slope", num(o.slope));
      add_prop(props, p + "slope_lo", num(o.slope_lo));
      add_prop(props, p + "slope_hi", num(o.slope_hi));
    }
  }
  add_prop(props, "repro", r.repro);
}

// The body of a failure or error: the message, the per-output statistics, the worst
// elements and the repro line, so a reader of the CI page needs nothing else.
std::string details(const ResultRecord& r) {
  std::string s;
  if (!r.message.empty()) s += r.message + "\n";
  if (!r.outputs.empty()) {
    s += "outputs:\n";
    for (const auto& o : r.outputs)
      s += fmt::format("  {}: metric {}, max_abs_err {}, max_rel_err {}, bound {}, {} of {} mismatched\n", o.out,
                       o.metric, o.max_abs_err, o.max_rel_err, o.bound, o.mismatches, o.elements);
  }
  if (!r.worst.empty()) {
    s += "worst elements:\n";
    for (const auto& w : r.worst)
      s += fmt::format("  {}[{}]: got {}, want {}\n", w.out, join_index(w.index), w.got, w.want);
  }
  s += "repro: " + r.repro;
  return s;
}

// "failed: dV exceeds_bound ×1.09 (1 element)" for a record with failure kinds, else "".
std::string kinds_line(const ResultRecord& r) { return r.failures.empty() ? "" : "failed: " + describe(r.failures); }

std::string join_nonempty(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "; " + b;
}

// The element that holds an outcome, or nullptr for PASS.
const char* result_element(Outcome o) {
  switch (o) {
    case Outcome::FAIL:
    case Outcome::XPASS:
    case Outcome::FLAKE:
    case Outcome::MISTRUSTED:
    case Outcome::MISSING: return "failure";
    case Outcome::ERROR:
    case Outcome::CRASH:
    case Outcome::TIMEOUT: return "error";
    case Outcome::SKIP:
    case Outcome::XFAIL: return "skipped";
    case Outcome::PASS: return nullptr;
  }
  return nullptr;
}

void add_result(pugi::xml_node tc, const ResultRecord& r) {
  const char* element = result_element(r.outcome);
  if (!element) return;
  auto e = tc.append_child(element);
  const std::string outcome(to_string(r.outcome));
  switch (r.outcome) {
    case Outcome::FAIL:
    case Outcome::FLAKE:
    case Outcome::MISTRUSTED:
    case Outcome::MISSING:
      set_attr(e, "message", with_stats(join_nonempty(join_nonempty(r.expectation, r.message), kinds_line(r)), r));
      set_attr(e, "type", outcome);
      add_text(e, details(r));
      break;
    case Outcome::XPASS:
      set_attr(e, "message",
               "remove this manifest entry: the case now passes" +
                   (r.expectation.empty() && r.message.empty() ? std::string()
                                                               : " (" + join_nonempty(r.expectation, r.message) + ")"));
      set_attr(e, "type", outcome);
      add_text(e, details(r));
      break;
    case Outcome::ERROR:
    case Outcome::CRASH:
    case Outcome::TIMEOUT:
      set_attr(e, "message",
               r.message.empty() ? outcome + " with no message" : join_nonempty(r.expectation, r.message));
      set_attr(e, "type", outcome);
      add_text(e, details(r));
      break;
    case Outcome::SKIP: set_attr(e, "message", r.message); break;
    case Outcome::XFAIL: {
      // pytest's convention; the message also says how it failed, so a change shows.
      const std::string how =
          join_nonempty(join_nonempty(std::string(to_string(r.raw_outcome)), kinds_line(r)), stats_line(r));
      set_attr(e, "type", "xfail");
      const std::string why = join_nonempty(r.expectation, r.message);
      set_attr(e, "message", why.empty() ? how : why + " [" + how + "]");
      break;
    }
    case Outcome::PASS: break;
  }
}

struct Counts {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  double secs = 0;
  void add(const ResultRecord& r) {
    ++tests;
    secs += seconds(r.ms);
    const std::string_view e = result_element(r.outcome) ? result_element(r.outcome) : "";
    failures += e == "failure";
    errors += e == "error";
    skipped += e == "skipped";
  }
  void write(pugi::xml_node n) const {
    n.append_attribute("tests").set_value(tests);
    n.append_attribute("failures").set_value(failures);
    n.append_attribute("errors").set_value(errors);
    n.append_attribute("skipped").set_value(skipped);
    n.append_attribute("time").set_value(time_attr(secs).c_str());
  }
};

// ---- reading ----

// A whole property value as T; `kind` ("a number", "an integer") words the error.
template <class T>
T parse_property(const std::string& s, const std::string& what, const char* kind) {
  T v = 0;
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || s.empty())
    throw std::runtime_error(fmt::format("property '{}' is not {}: '{}'", what, kind, s));
  return v;
}

double parse_double(const std::string& s, const std::string& what) {
  return parse_property<double>(s, what, "a number");
}

int64_t parse_int(const std::string& s, const std::string& what) {
  return parse_property<int64_t>(s, what, "an integer");
}

std::vector<int64_t> parse_index(const std::string& s, const std::string& what) {
  std::vector<int64_t> out;
  if (s.empty()) return out;
  std::size_t start = 0;
  while (true) {
    const auto comma = s.find(',', start);
    out.push_back(parse_int(s.substr(start, comma - start), what));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Outcome parse_outcome_prop(const std::string& s, const std::string& what) {
  const auto o = parse_outcome(s);
  if (!o) throw std::runtime_error(fmt::format("property '{}' is not an outcome: '{}'", what, s));
  return *o;
}

void set_worst_field(WorstElement& w, const std::string& field, const std::string& value, const std::string& name) {
  if (field == "out") w.out = value;
  else if (field == "index") w.index = parse_index(value, name);
  else if (field == "got") w.got = parse_double(value, name);
  else if (field == "want") w.want = parse_double(value, name);
}

// An output's numeric properties by the names write_junit gives them: integers, then reals.
constexpr std::pair<std::string_view, int64_t OutputStats::*> kOutputCounts[] = {
    {"elements", &OutputStats::elements},
    {"mismatches", &OutputStats::mismatches},
    {"conservation_off", &OutputStats::conservation_off},
};
constexpr std::pair<std::string_view, double OutputStats::*> kOutputReals[] = {
    {"max_abs_err", &OutputStats::max_abs_err},
    {"max_rel_err", &OutputStats::max_rel_err},
    {"bound", &OutputStats::bound},
    {"lowp_err", &OutputStats::lowp_err},
    {"max_ratio", &OutputStats::max_ratio},
    {"slope", &OutputStats::slope},
    {"slope_lo", &OutputStats::slope_lo},
    {"slope_hi", &OutputStats::slope_hi},
    {"energy_ratio", &OutputStats::energy_ratio},
};

void set_output_field(OutputStats& o, const std::string& field, const std::string& value, const std::string& name) {
  if (field == "metric") o.metric = value;
  else if (field == "rule") o.rule = value;
  for (const auto& [prop, member] : kOutputCounts)
    if (field == prop) o.*member = parse_int(value, name);
  for (const auto& [prop, member] : kOutputReals)
    if (field == prop) o.*member = parse_double(value, name);
}

// A lean testcase's outcome where it has no `outcome` property: PASS without a result element,
// else the element's type (failure and error carry the outcome's name; skipped is SKIP, or
// XFAIL by pytest's type="xfail").
std::optional<Outcome> outcome_from_element(pugi::xml_node tc) {
  for (const char* e : {"failure", "error"})
    if (auto n = tc.child(e)) return parse_outcome(n.attribute("type").value());
  if (auto n = tc.child("skipped"))
    return std::string_view(n.attribute("type").value()) == "xfail" ? Outcome::XFAIL : Outcome::SKIP;
  return Outcome::PASS;
}

ResultRecord parse_testcase(pugi::xml_node tc, const std::string& family) {
  auto props = tc.child("properties");
  if (!props) throw std::runtime_error("no <properties> (not written by opcts write_junit?)");
  ResultRecord r;
  r.family = family;
  // Lean reports carry no arch or ms property: the classname (<family>.<arch>) and the time
  // attribute say them; a property, where present, wins below.
  if (const std::string cls = tc.attribute("classname").value(); cls.rfind(family + ".", 0) == 0)
    r.arch = cls.substr(family.size() + 1);
  if (const std::string t = tc.attribute("time").value(); !t.empty()) r.ms = parse_double(t, "time") * 1000.0;
  bool has_id = false, has_outcome = false, has_raw = false;
  std::map<std::size_t, WorstElement> worst;
  std::vector<std::string> output_order;
  std::map<std::string, OutputStats> outputs;
  for (auto p : props.children("property")) {
    const std::string name = p.attribute("name").value();
    const std::string value = p.attribute("value").value();
    if (name == "id") r.id = value, has_id = true;
    else if (name == "arch") r.arch = value;
    else if (name == "impl") r.impl = value;
    else if (name == "device") r.device = static_cast<int>(parse_int(value, name));
    else if (name == "seed") r.seed = value;
    else if (name == "outcome") r.outcome = parse_outcome_prop(value, name), has_outcome = true;
    else if (name == "raw_outcome") r.raw_outcome = parse_outcome_prop(value, name), has_raw = true;
    else if (name == "tier") r.tier = value;
    else if (name == "ms") r.ms = parse_double(value, name);
    else if (name == "message") r.message = value;
    else if (name == "expectation") r.expectation = value;
    else if (name == "tracking") r.tracking = value;
    else if (name == "repro") r.repro = value;
    else if (name == "failures") r.failures = parse_failures_json(value);
    else if (name == "planted") r.planted = value == "true";
    else if (name == "blind_spot") r.blind_spot = value;
    else if (name == "provisional") r.provisional = value;
    else if (name.rfind("first_mismatch.", 0) == 0) {
      set_worst_field(worst[0], name.substr(15), value, name);
    } else if (name.rfind("worst.", 0) == 0) {
      const auto dot = name.find('.', 6);
      if (dot == std::string::npos) throw std::runtime_error("malformed property name '" + name + "'");
      const auto k = static_cast<std::size_t>(parse_int(name.substr(6, dot - 6), name));
      set_worst_field(worst[k], name.substr(dot + 1), value, name);
    } else if (name.rfind("out.", 0) == 0) {
      // out.<output name>.<field>; the output name may itself hold dots, or be empty.
      const auto dot = name.rfind('.');
      if (dot < 4) throw std::runtime_error("malformed property name '" + name + "'");
      const std::string out = name.substr(4, dot - 4);
      if (!outputs.count(out)) {
        output_order.push_back(out);
        outputs[out].out = out;
        // Written by every opcts that has it; reports from before read as unknown.
        outputs[out].max_ratio = std::numeric_limits<double>::quiet_NaN();
      }
      set_output_field(outputs[out], name.substr(dot + 1), value, name);
    }
    // Other properties (metric, max_abs_err, ...) are derived from these or unknown: ignored.
  }
  if (!has_id) throw std::runtime_error("no 'id' property");
  if (!has_outcome) {
    const auto o = outcome_from_element(tc);
    if (!o) throw std::runtime_error("no 'outcome' property, and the result element's type names no outcome");
    r.outcome = *o;
  }
  if (!has_raw) r.raw_outcome = r.outcome;
  for (auto& [k, w] : worst) r.worst.push_back(std::move(w));
  for (const auto& name : output_order) r.outputs.push_back(std::move(outputs[name]));

  // The result element must agree with the outcome property, or the file was edited.
  const char* want = result_element(r.outcome);
  for (const char* e : {"failure", "error", "skipped"}) {
    const bool present = static_cast<bool>(tc.child(e));
    const bool expected = want && std::string_view(want) == e;
    if (present != expected)
      throw std::runtime_error(
          fmt::format("outcome {} but <{}> is {}", to_string(r.outcome), e, present ? "present" : "missing"));
  }
  return r;
}

}  // namespace

std::string sanitize_xml_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto escape = [&](unsigned char b) { out += fmt::format("\\x{:02x}", b); };
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') escape(c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    std::size_t len = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    bool ok = len != 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xC0) == 0x80;
      cp = (cp << 6) | (b & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      escape(c);  // resynchronise at the next byte
      ++i;
    } else if (cp == 0xFFFE || cp == 0xFFFF) {
      out += fmt::format("\\u{{{:x}}}", cp);
      i += len;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string junit_xml(const std::vector<ResultRecord>& records, const std::string& suite_name, JunitDetail detail,
                      const std::vector<std::string>& selections) {
  // Families in name order; cases in the order given (callers sort for determinism).
  std::map<std::string, std::vector<const ResultRecord*>> by_family;
  for (const auto& r : records) by_family[family_of(r)].push_back(&r);

  pugi::xml_document doc;
  auto decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "UTF-8";
  auto root = doc.append_child("testsuites");
  set_attr(root, "name", suite_name);
  Counts total;
  for (const auto& r : records) total.add(r);
  total.write(root);
  root.remove_attribute("skipped");  // not allowed on <testsuites> by the Ant/Jenkins schemas

  const std::string timestamp = iso8601_utc_now();
  const std::string host = host_name();
  int suite_id = 0;
  for (const auto& [family, cases] : by_family) {
    auto suite = root.append_child("testsuite");
    set_attr(suite, "name", family);
    // The Ant schema's aggregated form: package and id required, then properties, the
    // testcases, system-out and system-err (tests/data/junit_ant.xsd).
    set_attr(suite, "package", family);
    suite.append_attribute("id").set_value(suite_id++);
    suite.append_child("properties");
    Counts counts;
    for (const auto* r : cases) counts.add(*r);
    counts.write(suite);
    set_attr(suite, "timestamp", timestamp);
    set_attr(suite, "hostname", host);
    for (const auto* r : cases) {
      auto tc = suite.append_child("testcase");
      set_attr(tc, "classname", family + "." + r->arch);
      set_attr(tc, "name", case_name(*r, family));
      set_attr(tc, "time", time_attr(seconds(r->ms)));
      add_properties(tc, *r, detail);
      add_result(tc, *r);
    }
    suite.append_child("system-out");
    suite.append_child("system-err");
  }
  if (!selections.empty()) {
    // What the run was asked to run (`opcts gate` reads it back): a suite of no testcases.
    auto suite = root.append_child("testsuite");
    set_attr(suite, "name", kSelectionSuite);
    set_attr(suite, "package", kSelectionSuite);
    suite.append_attribute("id").set_value(suite_id++);
    auto props = suite.append_child("properties");
    for (const auto& sel : selections) add_prop(props, kSelectionSuite, sel);
    Counts{}.write(suite);
    set_attr(suite, "timestamp", timestamp);
    set_attr(suite, "hostname", host);
    suite.append_child("system-out");
    suite.append_child("system-err");
  }
  std::ostringstream os;
  doc.save(os, "  ", pugi::format_default, pugi::encoding_utf8);
  return os.str();
}

void write_junit(const std::vector<ResultRecord>& records, const std::string& path, const std::string& suite_name,
                 JunitDetail detail) {
  write_text_file(path, junit_xml(records, suite_name, detail));
}

JunitDetail parse_junit_detail(const std::string& s) {
  if (s == "lean") return JunitDetail::lean;
  if (s == "all") return JunitDetail::all;
  throw std::invalid_argument("--junit-properties must be lean or all, not '" + s + "'");
}

std::vector<ResultRecord> read_junit(const std::string& path, std::vector<std::string>* selections) {
  pugi::xml_document doc;
  const std::string text = read_file_limited(path, kMaxReportBytes, "a JUnit report");
  const auto res = doc.load_buffer(text.data(), text.size());
  if (!res)
    throw std::runtime_error(fmt::format("{}: not valid XML: {} at byte {}", path, res.description(), res.offset));
  auto root = doc.child("testsuites");
  if (!root) throw std::runtime_error(path + ": no <testsuites> root element");
  std::vector<ResultRecord> out;
  for (auto suite : root.children("testsuite")) {
    const std::string family = suite.attribute("name").value();
    if (family == kSelectionSuite) {
      for (auto p : suite.child("properties").children("property"))
        if (selections && std::string(p.attribute("name").value()) == kSelectionSuite)
          selections->push_back(p.attribute("value").value());
      continue;
    }
    for (auto tc : suite.children("testcase")) {
      try {
        out.push_back(parse_testcase(tc, family));
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("{}: testcase '{}' '{}': {}", path, tc.attribute("classname").value(),
                                             tc.attribute("name").value(), e.what()));
      }
    }
  }
  return out;
}

}  // namespace opcts
