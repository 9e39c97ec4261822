// The supervisor: runs cases in worker processes, surviving crashes, hangs, protocol errors and stops.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "runner/execute.hpp"
#include "runner/suite.hpp"

namespace opcts {

/// `opcts run --sanitize TOOL`: each case runs in a worker of its own under NVIDIA's
/// compute-sanitizer (`sanitizer`, a path; `tool`: memcheck, racecheck, synccheck or initcheck),
/// started as `sanitizer --tool TOOL --error-exitcode 86 --log-file LOG opcts __worker ...`
/// (the options of the Compute Sanitizer user manual). Exit status 86 means it reported an error:
/// the case FAILs with FailureKind::sanitizer and the log's first report in its message.
struct SanitizeOptions {
  std::string tool;       // "" = off
  std::string sanitizer;  // the compute-sanitizer executable (or a stand-in with its options)
};
inline constexpr int kSanitizerErrorExit = 86;

struct SupervisorOptions {
  SuiteOptions suite;          // passed on to each worker
  std::string self_exe;        // the opcts binary (workers are the same binary)
  std::string scratch_parent;  // where each supervise call makes its case list's folder (mkdtemp); "" = the temp dir
  int device = 0;
  double timeout_s = 600;  // per case
  ExecOptions exec;        // passed on to each worker (--artifacts, --bitwise, --ref-cache)
  SanitizeOptions sanitize;
};

/// The first report of a compute-sanitizer log (its "========= " lines after the banner, up to
/// the next blank report line or three lines, the prefix dropped, joined by " | "; at most 400
/// bytes), or "" when the log holds none.
std::string first_sanitizer_report(const std::string& log);

/// What supervise gives back: one raw record per id, in order, for every case it finished
/// (nullopt for the cases a stop left unrun), and the signal that stopped it (0: it ran them all).
struct Supervised {
  std::vector<std::optional<ResultRecord>> records;
  int stopped_by = 0;
};

/// Runs `ids` (in order) in worker processes. A worker that dies costs the case in flight
/// (CRASH, with the signal or exit status); one that passes the time limit is killed (TIMEOUT);
/// one that breaks the protocol (an index outside the plan or out of order, a result for
/// another case, an unreadable line) is killed and its case is ERROR; a new worker resumes at
/// the next case. Each worker runs in a process group of its own and gets SIGKILL when the
/// supervisor's thread ends (PR_SET_PDEATHSIG), so none outlives it. Its case list is written
/// in a folder made by mkdtemp(3) under `opt.scratch_parent`, opened and unlinked at once and
/// handed to workers as an open file, so supervisors that share a folder (or a PID, in other
/// PID namespaces) never read each other's lists and a killed run leaves no file behind.
/// A stop request (runner/stop_signal.hpp) kills the worker in flight and returns at once.
/// `on_result` is called as each record arrives with the case's index in `ids`, the record
/// and how many records have arrived.
Supervised supervise(const SupervisorOptions& opt, const std::vector<std::string>& ids,
                     const std::function<void(size_t index, const ResultRecord&, size_t done)>& on_result);

}  // namespace opcts
