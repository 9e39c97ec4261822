// The gate's decision table (deqp-runner's baseline rules plus flaky entries and the plan).
#include "runner/gate.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace opcts {

namespace {

// What running the case gave. A record that holds only the mapped outcome (raw == XFAIL or
// XPASS, e.g. written by an older tool) stands for the failure or pass behind it.
Outcome raw_of(const ResultRecord& r) {
  if (r.raw_outcome == Outcome::XFAIL) return Outcome::FAIL;
  if (r.raw_outcome == Outcome::XPASS) return Outcome::PASS;
  return r.raw_outcome;
}

bool by_id(const GateFinding& a, const GateFinding& b) { return a.id < b.id; }

std::string first_line(const std::string& s, std::size_t max = 200) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > max ? line.substr(0, max) + "..." : line;
}

}  // namespace

Outcome gate_outcome(const ResultRecord& r, const Manifest& manifest) {
  const Outcome raw = raw_of(r);
  if (raw == Outcome::SKIP || manifest.find(EntryKind::skip, r.id)) return Outcome::SKIP;
  return apply_expectation(raw, r.message, r.failures, manifest.find(EntryKind::xfail, r.id));
}

GateVerdict gate(const std::vector<ResultRecord>& results, const Manifest& manifest,
                 const std::vector<std::string>& planned_ids, const std::vector<std::string>& catalog_ids) {
  GateVerdict v;
  const std::set<std::string> planned(planned_ids.begin(), planned_ids.end());
  std::set<std::string> held;
  for (const auto& r : results) {
    held.insert(r.id);
    const Outcome raw = raw_of(r);
    const Outcome o = gate_outcome(r, manifest);
    ++v.counts[o];
    if (!planned.empty() && !planned.count(r.id))
      v.notes.push_back({r.id, o, "not in the plan (a report of another selection?)"});
    if (o == Outcome::SKIP && raw != Outcome::SKIP) {
      const ManifestEntry* e = manifest.find(EntryKind::skip, r.id);
      v.notes.push_back({r.id, o, fmt::format("ran ({}) although manifest skip {} skips it", to_string(raw),
                                              e ? e->source : std::string("?"))});
      continue;
    }
    if (!is_gate_failure(o)) continue;
    const ManifestEntry* flaky = manifest.find(EntryKind::flaky, r.id);
    if (flaky && (is_failure(o) || o == Outcome::FLAKE)) {
      v.notes.push_back({r.id, o, fmt::format("known flaky ({}): {}", flaky->source, flaky->reason)});
      continue;
    }
    std::string why;
    switch (o) {
      case Outcome::XPASS: {
        const ManifestEntry* x = manifest.find(EntryKind::xfail, r.id);
        why = x && x->planted ? "planted bug NOT caught: the planted impl passed (" + x->source + ")"
                              : fmt::format("remove this entry: the case now passes (strict xfail {} '{}')",
                                            x ? x->source : "?", x ? x->match : "");
        break;
      }
      case Outcome::FLAKE: why = "reruns disagreed and no manifest flaky entry covers the case"; break;
      case Outcome::MISTRUSTED: why = "output cannot be trusted (trust check)"; break;
      case Outcome::MISSING: why = "no result"; break;  // a report's mark for a case its run did not finish
      default: {
        const ManifestEntry* x = manifest.find(EntryKind::xfail, r.id);
        why = x ? "unexpected: " + unmet_expectation(raw, r.message, r.failures, *x) : "unexpected (no xfail entry)";
        break;
      }
    }
    if (!r.message.empty()) why += ": " + first_line(r.message);
    v.offending.push_back({r.id, o, why});
  }
  for (const auto& id : planned)
    if (!held.count(id)) {
      ++v.counts[Outcome::MISSING];
      v.offending.push_back({id, Outcome::MISSING, "planned, but no report holds it"});
    }
  std::vector<std::string> universe = catalog_ids;
  if (universe.empty()) {
    universe.assign(planned.begin(), planned.end());
    universe.insert(universe.end(), held.begin(), held.end());
  }
  for (const ManifestEntry* e : manifest.stale(universe)) v.stale.push_back(*e);
  std::stable_sort(v.offending.begin(), v.offending.end(), by_id);
  std::stable_sort(v.notes.begin(), v.notes.end(), by_id);
  return v;
}

std::string format_verdict(const GateVerdict& v, const std::string& arch) {
  std::string s;
  for (const auto& f : v.offending) s += fmt::format("{} {}: {}\n", to_string(f.outcome), f.id, f.why);
  for (const auto& f : v.notes) s += fmt::format("note: {} {}: {}\n", to_string(f.outcome), f.id, f.why);
  for (const auto& e : v.stale)
    s += fmt::format("stale manifest entry {} ({} '{}'): matches no case of {}; remove it\n", e.source,
                     to_string(e.kind), e.match, arch);
  std::string counts;
  for (const auto& [o, n] : v.counts) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, to_string(o));
  s += fmt::format("gate {}: {} ({} offending case{}; {})\n", arch, v.passed() ? "PASSED" : "FAILED",
                   v.offending.size(), v.offending.size() == 1 ? "" : "s", counts.empty() ? "no results" : counts);
  return s;
}

}  // namespace opcts
