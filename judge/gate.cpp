// The gate's decision table (deqp-runner's baseline rules plus flaky entries and the plan).
#include "judge/gate.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

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

namespace {

// How one record is judged: the outcome after the manifest, and the words for each finding.
struct Judged {
  Outcome outcome = Outcome::MISSING;
  std::string skipped_although_ran;  // a manifest skip over a case that ran: the note's text
  std::string flaky;                 // a failure under a flaky entry: the note's text
  std::string why;                   // an offending outcome's reason (before the message)
};

Judged judge_with(const ResultRecord& r, const Manifest& manifest) {
  Judged j;
  const Outcome raw = raw_of(r);
  j.outcome = gate_outcome(r, manifest);
  if (j.outcome == Outcome::SKIP && raw != Outcome::SKIP) {
    const ManifestEntry* e = manifest.find(EntryKind::skip, r.id);
    j.skipped_although_ran =
        fmt::format("ran ({}) although manifest skip {} skips it", to_string(raw), e ? e->source : std::string("?"));
    return j;
  }
  if (!is_gate_failure(j.outcome)) return j;
  const ManifestEntry* flaky = manifest.find(EntryKind::flaky, r.id);
  if (flaky && (is_failure(j.outcome) || j.outcome == Outcome::FLAKE)) {
    j.flaky = fmt::format("known flaky ({}): {}", flaky->source, flaky->reason);
    return j;
  }
  switch (j.outcome) {
    case Outcome::XPASS: {
      const ManifestEntry* x = manifest.find(EntryKind::xfail, r.id);
      j.why = x && x->planted ? planted_pass_text(x->source, r.blind_spot)
                              : fmt::format("remove this entry: the case now passes (strict xfail {} '{}')",
                                            x ? x->source : "?", x ? x->match : "");
      break;
    }
    case Outcome::FLAKE: j.why = "reruns disagreed and no manifest flaky entry covers the case"; break;
    case Outcome::MISTRUSTED: j.why = "output cannot be trusted (trust check)"; break;
    case Outcome::MISSING: j.why = "no result"; break;  // a report's mark for a case its run did not finish
    default: {
      const ManifestEntry* x = manifest.find(EntryKind::xfail, r.id);
      j.why = x ? "unexpected: " + unmet_expectation(raw, r.message, r.failures, *x) : "unexpected (no xfail entry)";
      break;
    }
  }
  return j;
}

// A record as its run judged it (runner/run.cpp: judge, and "known flaky" for failures under a
// flaky entry).
Judged judge_as_written(const ResultRecord& r) {
  Judged j;
  j.outcome = r.outcome;
  if (!is_gate_failure(j.outcome)) return j;
  if ((is_failure(j.outcome) || j.outcome == Outcome::FLAKE) && r.expectation.rfind("known flaky (", 0) == 0) {
    j.flaky = r.expectation;
    return j;
  }
  switch (j.outcome) {
    case Outcome::XPASS: j.why = r.expectation.empty() ? "passed under a strict xfail entry" : r.expectation; break;
    case Outcome::FLAKE: j.why = "reruns disagreed and no manifest flaky entry covers the case"; break;
    case Outcome::MISTRUSTED: j.why = "output cannot be trusted (trust check)"; break;
    case Outcome::MISSING: j.why = "no result"; break;
    default: j.why = r.expectation.empty() ? "unexpected (no xfail entry)" : "unexpected: " + r.expectation; break;
  }
  return j;
}

GateVerdict judge_all(const std::vector<ResultRecord>& results, const std::vector<std::string>& planned_ids,
                      const std::function<Judged(const ResultRecord&)>& judge) {
  GateVerdict v;
  const std::set<std::string> planned(planned_ids.begin(), planned_ids.end());
  std::set<std::string> held;
  for (const auto& r : results) {
    held.insert(r.id);
    const Judged j = judge(r);
    ++v.counts[j.outcome];
    if (!planned.empty() && !planned.count(r.id))
      v.notes.push_back({r.id, j.outcome, "not in the plan (a report of another selection?)"});
    if (!j.skipped_although_ran.empty()) {
      v.notes.push_back({r.id, j.outcome, j.skipped_although_ran});
      continue;
    }
    if (!j.flaky.empty()) {
      v.notes.push_back({r.id, j.outcome, j.flaky});
      continue;
    }
    if (!is_gate_failure(j.outcome)) continue;
    std::string why = j.why;
    if (!r.message.empty()) why += ": " + first_line(r.message);
    v.offending.push_back({r.id, j.outcome, why});
  }
  for (const auto& id : planned)
    if (!held.count(id)) {
      ++v.counts[Outcome::MISSING];
      v.offending.push_back({id, Outcome::MISSING, "planned, but no report holds it"});
    }
  std::stable_sort(v.offending.begin(), v.offending.end(), by_id);
  std::stable_sort(v.notes.begin(), v.notes.end(), by_id);
  return v;
}

std::string family_of(const ResultRecord& r) { return !r.family.empty() ? r.family : r.id.substr(0, r.id.find('.')); }

}  // namespace

GateVerdict gate(const std::vector<ResultRecord>& results, const Manifest& manifest,
                 const std::vector<std::string>& planned_ids, const std::vector<std::string>& catalog_ids) {
  GateVerdict v = judge_all(results, planned_ids, [&](const ResultRecord& r) { return judge_with(r, manifest); });
  std::vector<std::string> universe = catalog_ids;
  if (universe.empty()) {
    universe = planned_ids;
    for (const auto& r : results) universe.push_back(r.id);
  }
  for (const ManifestEntry* e : manifest.stale(universe)) v.stale.push_back(*e);
  return v;
}

GateVerdict gate_as_judged(const std::vector<ResultRecord>& results) {
  return judge_all(results, {}, judge_as_written);
}

bool skip_excuses_impl(const std::string& message) {
  return (message.rfind("arch ", 0) == 0 && message.find(" lacks capability '") != std::string::npos) ||
         message.rfind("manifest skip", 0) == 0 ||
         message.find("which only opcts run --bitwise shows") != std::string::npos ||
         message.find("which only opcts run --invariance shows") != std::string::npos ||
         message.find("which only opcts run --capture shows") != std::string::npos;
}

// The run mode a planted impl's SKIP asks for ("--invariance"), or "" for another reason.
std::string mode_asked(const std::string& message) {
  for (const char* mode : {"--bitwise", "--invariance", "--capture"})
    if (message.find(std::string("which only opcts run ") + mode + " shows") != std::string::npos) return mode;
  return "";
}

void check_measured_models(const std::vector<ResultRecord>& results, GateVerdict& v) {
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<std::size_t, std::string>> groups;
  for (const auto& r : results)
    if (!r.provisional.empty() && r.outcome != Outcome::SKIP && r.outcome != Outcome::MISSING) {
      auto& g = groups[{r.family, r.impl, r.arch}];
      if (g.first++ == 0) g.second = r.provisional;
    }
  for (const auto& [key, g] : groups) {
    const auto& [family, impl, arch] = key;
    v.problems.push_back(
        fmt::format("impl {} ({} on {}): {} case{} judged under a provisional accumulator model "
                    "({}); measure it with `opcts probe accumulators --arch {}` and put the "
                    "entries it prints in the manifest",
                    impl, family, arch, g.first, g.first == 1 ? "" : "s", g.second, arch));
  }
}

void check_coverage(const std::vector<ResultRecord>& results, const Manifest* manifest, std::size_t min_run,
                    GateVerdict& v, const std::set<std::string>& planted) {
  struct Impl {
    std::size_t ran = 0, skipped = 0, unexcused = 0, for_mode = 0;
    std::string example;  // an unexcused SKIP's reason
    std::string mode;     // the run mode its SKIPs ask for (a planted impl whose bug only it shows)
  };
  std::map<std::tuple<std::string, std::string, std::string>, Impl> impls;  // (arch, family, impl)
  std::size_t ran = 0;
  for (const auto& r : results) {
    const Outcome o = manifest ? gate_outcome(r, *manifest) : r.outcome;
    Impl& i = impls[{r.arch, family_of(r), r.impl}];
    if (o == Outcome::MISSING) continue;  // offending already
    if (o != Outcome::SKIP) {
      ++ran;
      ++i.ran;
      continue;
    }
    ++i.skipped;
    // A manifest skip of the gate's manifest excuses whatever the record's message says.
    const bool by_manifest = manifest && manifest->find(EntryKind::skip, r.id);
    if (const std::string mode = mode_asked(r.message); !by_manifest && !mode.empty()) ++i.for_mode, i.mode = mode;
    if (!by_manifest && !skip_excuses_impl(r.message)) {
      ++i.unexcused;
      if (i.example.empty()) i.example = r.message.substr(0, 200);
    }
  }
  if (ran < min_run)
    v.problems.push_back(
        fmt::format("{} case{} ran (neither SKIP nor MISSING) where at least {} must (--min-run): "
                    "a selection where nothing runs tests nothing",
                    ran, ran == 1 ? "" : "s", min_run));
  for (const auto& [key, i] : impls)
    if (i.ran == 0 && i.for_mode > 0 && planted.count(std::get<2>(key)))
      v.run_notes.push_back(
          fmt::format("planted impl {} ({} on {}) ran no case: {} of its {} SKIP because its bug "
                      "shows only under opcts run {}, which this run left off",
                      std::get<2>(key), std::get<1>(key), std::get<0>(key), i.for_mode, i.skipped, i.mode));
    else if (i.ran == 0 && i.unexcused > 0 && planted.count(std::get<2>(key)))
      v.run_notes.push_back(
          fmt::format("planted impl {} ({} on {}) ran no case: this selection shows its bug on no "
                      "problem (e.g. '{}'); another tier may",
                      std::get<2>(key), std::get<1>(key), std::get<0>(key), i.example));
    else if (i.ran == 0 && i.unexcused > 0)
      v.problems.push_back(
          fmt::format("impl {} ({} on {}) is not tested: it ran no case; {} of its {} SKIP for "
                      "another reason than a capability or the manifest, e.g. '{}'",
                      std::get<2>(key), std::get<1>(key), std::get<0>(key), i.unexcused, i.skipped, i.example));
}

void check_selections(const std::vector<std::pair<RunSelection, std::string>>& selections,
                      const std::vector<ResultRecord>& results, GateVerdict& v) {
  if (selections.empty()) {
    v.problems.push_back(
        "the reports carry no run selection (written by an older opcts, by hand, or a run that never started): nothing "
        "says what should have run; gate them against a plan with --arch");
    return;
  }
  // Each run (all shards of one selection): its shards' most advanced reports.
  struct Run {
    const RunSelection* any = nullptr;
    std::map<int, std::pair<const RunSelection*, std::string>> shards;  // index -> (selection, file)
    std::set<int> counts;                                               // the N of every shard seen
  };
  std::map<std::string, Run> runs;
  for (const auto& [sel, file] : selections) {
    Run& run = runs[sel.key()];
    run.any = &sel;
    const auto [i, n] = sel.shard_of();
    run.counts.insert(n);
    auto it = run.shards.find(i);
    if (it == run.shards.end() || static_cast<int>(it->second.first->state) < static_cast<int>(sel.state))
      run.shards[i] = {&sel, file};
  }
  for (const auto& [key, run] : runs) {
    const RunSelection& any = *run.any;
    const std::string what = "selection " + any.describe();
    if (run.counts.size() > 1) {
      v.problems.push_back(what + ": its reports were sharded in different counts (a mix of runs)");
      continue;
    }
    const int n = *run.counts.begin();
    bool complete = true;
    for (int i = 1; i <= n; ++i) {
      const auto it = run.shards.find(i);
      if (it == run.shards.end()) {
        v.problems.push_back(fmt::format("{}: shard {}/{} has no report (lost, or never run)", what, i, n));
        complete = false;
      } else if (it->second.first->state == RunState::started) {
        const std::string& err = it->second.first->error;
        v.problems.push_back(fmt::format("{}: shard {}/{} ({}) ended before it planned its cases ({})", what, i, n,
                                         it->second.second, err.empty() ? "stopped, or still loading" : err));
        complete = false;
      }
    }
    for (const auto& p : any.plugins) {
      if (p.error.empty()) continue;
      if (p.optional) v.run_notes.push_back(what + ": optional plugin " + p.path + " was not used: " + p.error);
      else v.problems.push_back(what + ": plugin " + p.path + " was not used: " + p.error);
    }
    if (!complete) continue;
    // Every shard is there: the records this selection covers must be exactly its plan.
    std::vector<std::string> ids;
    for (const auto& r : results)
      if (any.covers(r)) ids.push_back(r.id);
    if (ids.size() != any.selected || ids_digest(ids) != any.selected_digest)
      v.problems.push_back(
          fmt::format("{}: the reports hold {} of its cases where it planned {}{} (a report cut "
                      "short, edited, or mixed with another run's)",
                      what, ids.size(), any.selected, ids.size() == any.selected ? ", with other ids" : ""));
  }
}

std::string format_verdict(const GateVerdict& v, const std::string& arch) {
  std::string s;
  for (const auto& f : v.offending) s += fmt::format("{} {}: {}\n", to_string(f.outcome), f.id, f.why);
  for (const auto& p : v.problems) s += fmt::format("FAILED: {}\n", p);
  for (const auto& f : v.notes) s += fmt::format("note: {} {}: {}\n", to_string(f.outcome), f.id, f.why);
  for (const auto& n : v.run_notes) s += fmt::format("note: {}\n", n);
  for (const auto& e : v.stale)
    s += fmt::format("stale manifest entry {} ({} '{}'): matches no case of {}; remove it\n", e.source,
                     to_string(e.kind), e.match, arch);
  std::string counts;
  for (const auto& [o, n] : v.counts) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, to_string(o));
  s += fmt::format("gate {}: {} ({} offending case{}{}; {})\n", arch, v.passed() ? "PASSED" : "FAILED",
                   v.offending.size(), v.offending.size() == 1 ? "" : "s",
                   v.problems.empty()
                       ? ""
                       : fmt::format(", {} problem{} of the run", v.problems.size(), v.problems.size() == 1 ? "" : "s"),
                   counts.empty() ? "no results" : counts);
  return s;
}

}  // namespace opcts
