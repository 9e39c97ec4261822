// The run pipeline: skip records, supervised workers, reruns and FLAKE, one judgement per record.
#include "runner/run.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

#include "numerics/rng.hpp"
#include "runner/stop_signal.hpp"

namespace opcts {

ResultRecord base_record(const Suite& suite, const Case& c, int device) {
  ResultRecord r;
  r.id = c.id;
  r.family = std::string(c.family->name());
  r.impl = std::string(c.impl->name());
  r.arch = suite.arch().name;
  r.device = suite.arch().backend == "host" ? -1 : device;
  r.seed = seed_hex(case_seed(*c.family, *c.problem));
  r.tier = std::string(to_string(c.tier));
  r.repro = repro_command(suite, c.id);
  r.planted = c.impl->planted();
  return r;
}

void judge(const Suite& suite, ResultRecord& r) {
  const ManifestEntry* xf = suite.manifest().find(EntryKind::xfail, r.id);
  r.outcome = apply_expectation(r.raw_outcome, r.message, r.failures, xf);
  r.expectation.clear();
  r.tracking.clear();
  if (!xf) return;
  if (r.outcome == Outcome::XFAIL || r.outcome == Outcome::XPASS) {
    r.expectation = xf->planted ? "planted bug (" + xf->source + ")" : "xfail (" + xf->source + "): " + xf->reason;
    if (r.outcome == Outcome::XPASS && xf->planted) r.expectation = planted_pass_text(xf->source, r.blind_spot);
  } else if (const std::string unmet = unmet_expectation(r.raw_outcome, r.message, r.failures, *xf); !unmet.empty()) {
    r.expectation = unmet;
  }
  if (!r.expectation.empty()) r.tracking = xf->tracking;
}

std::optional<std::string> flake_of(const std::vector<Outcome>& outcomes) {
  if (outcomes.empty() ||
      std::all_of(outcomes.begin(), outcomes.end(), [&](Outcome o) { return o == outcomes.front(); }))
    return std::nullopt;
  std::string s = "runs gave ";
  for (size_t i = 0; i < outcomes.size(); ++i) s += (i ? ", " : "") + std::string(to_string(outcomes[i]));
  return s;
}

namespace {

// The outcome part of a worker's (or the supervisor's synthetic) record on the case's own record.
void take_outcome(ResultRecord& r, ResultRecord&& ran) {
  r.raw_outcome = ran.raw_outcome;
  r.message = std::move(ran.message);
  r.outputs = std::move(ran.outputs);
  r.failures = std::move(ran.failures);
  r.worst = std::move(ran.worst);
  r.ms = ran.ms;
  r.inputs_ms = ran.inputs_ms;
  r.ref_ms = ran.ref_ms;
  r.device_ms = ran.device_ms;
  r.compare_ms = ran.compare_ms;
  r.blind_spot = std::move(ran.blind_spot);
  if (ran.device >= 0) r.device = ran.device;
}

// An unexpected failure (a gate failure that no xfail entry expects) is run again, as
// deqp-runner does: req.reruns times, or as often as a manifest `flaky` entry says. Reruns
// stop at the first outcome that differs from the first run's: the case becomes FLAKE, its
// message lists every outcome and the first failure's message, and the record keeps the first
// failure's statistics. A failure that repeats on every rerun stays what it was.
// Returns the signal that stopped the reruns, or 0.
int rerun_failures(const Suite& suite, const RunRequest& req, std::vector<ResultRecord>& ran) {
  std::vector<size_t> pending;
  std::map<size_t, int> budget;
  std::map<size_t, std::vector<Outcome>> seen;
  for (size_t i = 0; i < ran.size(); ++i) {
    // XPASS is no failure to re-run; a FLAKE (carried by --resume) already had its reruns.
    if (!is_gate_failure(ran[i].outcome) || ran[i].outcome == Outcome::XPASS || ran[i].outcome == Outcome::FLAKE)
      continue;
    const ManifestEntry* e = suite.manifest().find(EntryKind::flaky, ran[i].id);
    const int n = e && e->reruns > 0 ? e->reruns : req.reruns;
    if (n <= 0) continue;
    pending.push_back(i);
    budget[i] = n;
    seen[i] = {ran[i].raw_outcome};
  }
  if (!pending.empty()) std::fprintf(stderr, "opcts: re-running %zu failed cases\n", pending.size());
  for (int round = 1; !pending.empty(); ++round) {
    std::vector<std::string> ids;
    for (size_t i : pending) ids.push_back(ran[i].id);
    const Supervised again = supervise(req.supervise, ids, nullptr);
    std::vector<size_t> still;
    for (size_t k = 0; k < pending.size(); ++k) {
      const size_t i = pending[k];
      if (!again.records[k]) continue;  // stopped before this rerun: the first outcome stands
      seen[i].push_back(again.records[k]->raw_outcome);
      if (const auto flake = flake_of(seen[i])) {
        ResultRecord& r = ran[i];
        r.message = "flaky: " + *flake + "; first " + std::string(to_string(r.raw_outcome)) + ": " + r.message;
        r.raw_outcome = Outcome::FLAKE;
        std::fprintf(stderr, "FLAKE %s: %s\n", r.id.c_str(), r.message.substr(0, 300).c_str());
      } else if (round < budget[i]) {
        still.push_back(i);
      }
    }
    if (again.stopped_by) return again.stopped_by;
    pending = std::move(still);
  }
  return 0;
}

}  // namespace

std::map<std::string, ResultRecord> resumed_records(const Suite& suite, const std::vector<Case>& cases,
                                                    const std::vector<ResultRecord>& resumed) {
  std::map<std::string, ResultRecord> out;
  std::set<std::string> planned;
  for (const auto& c : cases) planned.insert(c.id);
  size_t outside = 0;
  std::string example;
  for (const auto& r : resumed) {
    if (r.arch != suite.arch().name)
      throw std::invalid_argument("--resume: case '" + r.id + "' ran on arch '" + r.arch + "', not " +
                                  suite.arch().name);
    if (!planned.count(r.id)) {
      if (outside++ == 0) example = r.id;
      continue;
    }
    if (r.raw_outcome == Outcome::MISSING) continue;
    // One run writes one record per case: two that differ are two runs' (sharing the file, or
    // files joined by hand), and neither can be taken for the case's result.
    if (const auto it = out.find(r.id); it != out.end()) {
      const ResultRecord& a = it->second;
      if (a.raw_outcome != r.raw_outcome || a.outcome != r.outcome || a.message != r.message)
        throw std::invalid_argument("--resume: two different records of case '" + r.id + "' (" +
                                    std::string(to_string(a.raw_outcome)) + " and " +
                                    std::string(to_string(r.raw_outcome)) +
                                    (a.raw_outcome == r.raw_outcome ? ", other messages" : "") +
                                    "): the file holds results of two runs; resume from one run's results");
      continue;
    }
    out[r.id] = r;
  }
  if (outside)
    throw std::invalid_argument("--resume: " + std::to_string(outside) +
                                " finished case(s) are not in this selection (e.g. '" + example +
                                "'); resume with the selection (--tier, --filter, --shard, ...) of the run");
  return out;
}

RunResult run_cases(const Suite& suite, const std::vector<Case>& cases, const RunRequest& req,
                    const RunProgress& progress) {
  const int device = req.supervise.device;
  const auto carried = resumed_records(suite, cases, req.resumed);
  RunResult out;
  std::vector<ResultRecord> ran;  // base records of the cases that run (or ran before a resume), in run order
  std::vector<size_t> to_run;     // their indices in `ran` that run now
  std::vector<std::string> to_run_ids;
  for (const auto& c : cases) {
    ResultRecord r = base_record(suite, c, device);
    if (auto pre = suite.pre_run(c)) {
      r.raw_outcome = r.outcome = pre->outcome;  // SKIP, or ERROR: the impl could not answer
      r.message = pre->reason;
      judge(suite, r);
      if (req.on_record && !carried.count(c.id)) req.on_record(r);
      out.records.push_back(std::move(r));
    } else if (const auto it = carried.find(c.id); it != carried.end()) {
      ResultRecord before = it->second;
      take_outcome(r, std::move(before));
      judge(suite, r);
      ran.push_back(std::move(r));
    } else {
      to_run.push_back(ran.size());
      to_run_ids.push_back(c.id);
      ran.push_back(std::move(r));
    }
  }
  std::vector<bool> finished(to_run.size(), false);
  Supervised results = supervise(req.supervise, to_run_ids, [&](size_t k, const ResultRecord& r, size_t done) {
    ResultRecord copy = r;
    ResultRecord& mine = ran[to_run[k]];
    take_outcome(mine, std::move(copy));
    judge(suite, mine);  // for the progress line and the stream; judged again once reruns are done
    finished[k] = true;
    if (req.on_record) req.on_record(mine);
    if (progress) progress(mine, done, to_run_ids.size());
  });
  out.stopped_by = results.stopped_by;
  for (size_t k = 0; k < to_run.size(); ++k) {
    ResultRecord& mine = ran[to_run[k]];
    if (finished[k]) continue;
    if (results.records[k]) {
      take_outcome(mine, std::move(*results.records[k]));
    } else {
      mine.raw_outcome = Outcome::MISSING;
      mine.message =
          "not run: the run was stopped by " + stop_description(out.stopped_by) + " before this case finished";
    }
    judge(suite, mine);
  }
  if (!out.stopped_by) out.stopped_by = rerun_failures(suite, req, ran);
  for (auto& r : ran) {
    judge(suite, r);
    const ManifestEntry* flaky = suite.manifest().find(EntryKind::flaky, r.id);
    // The gate's table (judge/gate.cpp): a failure or FLAKE under a flaky entry is a note;
    // the record says so, so that `opcts gate DIR` judges it as this run did.
    if (flaky && (is_failure(r.outcome) || r.outcome == Outcome::FLAKE)) {
      r.expectation = "known flaky (" + flaky->source + "): " + flaky->reason;
      r.tracking = flaky->tracking;
    }
    out.records.push_back(std::move(r));
  }
  std::sort(out.records.begin(), out.records.end(), [](const auto& a, const auto& b) { return a.id < b.id; });

  std::vector<std::string> planned, all_ids;
  for (const auto& c : cases) planned.push_back(c.id);
  for (const auto& c : suite.all_cases()) all_ids.push_back(c.id);
  out.verdict = gate(out.records, suite.manifest(), planned, all_ids);
  return out;
}

}  // namespace opcts
