// A run of selected cases end to end: skip checks, workers, reruns, expectations and the gate's verdict.
//
// The CLI parses options into a RunRequest and calls run_cases; everything between the case list
// and the records happens here, once: each record is made once from its case (base_record), takes
// the outcome its worker (or the skip check) gave, is re-run when it is an unexpected failure, and
// is judged against the manifest once it is final.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "judge/gate.hpp"
#include "runner/suite.hpp"
#include "runner/supervisor.hpp"

namespace opcts {

/// What `opcts run` asks for beyond the cases.
struct RunRequest {
  SupervisorOptions supervise;  // suite options (passed to workers), exe, scratch folder, device, timeout, exec options
  int reruns = 1;  // reruns of an unexpected failure, 0..kMaxReruns; a manifest `flaky` entry's `reruns` wins
  // --resume: records an earlier run of these cases finished; their cases do not run again
  // (unexpected failures among them still get their reruns). MISSING records are not done.
  std::vector<ResultRecord> resumed;
  // Each case's first record as soon as it is known (SKIP records first, then as workers report,
  // before reruns): what `opcts run` appends to its results file, so a killed run keeps them.
  std::function<void(const ResultRecord&)> on_record;
};

/// The records of a run, sorted by id, and the gate's verdict on them. When a stop request
/// (SIGTERM, SIGINT) ended the run early, `stopped_by` is the signal, reruns were not made and
/// every case that did not finish has a record with raw outcome MISSING saying so.
struct RunResult {
  std::vector<ResultRecord> records;
  GateVerdict verdict;
  int stopped_by = 0;
};

/// Called as each case's first record is judged: the record, how many are done, how many run.
using RunProgress = std::function<void(const ResultRecord&, size_t done, size_t total)>;

/// The identity of a case's record: id, family, impl, arch, device (-1 on the host), seed,
/// tier, the repro command and whether the impl is planted. Every record of the case starts from it.
ResultRecord base_record(const Suite& suite, const Case& c, int device);

/// Judges a record against the manifest: `outcome` from its raw outcome (apply_expectation),
/// and for XFAIL/XPASS or an xfail the record did not meet, `expectation` saying which entry and why.
void judge(const Suite& suite, ResultRecord& r);

/// Whether the outcomes of a case's runs disagree: "runs gave FAIL, PASS" when they do, none when
/// every run gave the same outcome (a failure that repeats stays what it was).
std::optional<std::string> flake_of(const std::vector<Outcome>& outcomes);

/// The records of `resumed` (an earlier run's results) that stand for cases of `cases`, by id;
/// MISSING records (cases it did not finish) are left out. Throws std::invalid_argument when a
/// record is of another arch or of a case outside `cases` (a resume of another selection).
std::map<std::string, ResultRecord> resumed_records(const Suite& suite, const std::vector<Case>& cases,
                                                    const std::vector<ResultRecord>& resumed);

/// Runs `cases` (already selected and sharded): a SKIP record for each case the skip checks
/// stop (Suite::skip_reason), the rest in worker processes; unexpected failures are re-run
/// (req.reruns, or the case's `flaky` entry) and become FLAKE when the reruns disagree; each
/// final record is judged once. `planned` and `catalog` ids feed the gate (MISSING, stale).
/// Throws what resumed_records throws for `req.resumed`.
RunResult run_cases(const Suite& suite, const std::vector<Case>& cases, const RunRequest& req,
                    const RunProgress& progress = {});

}  // namespace opcts
