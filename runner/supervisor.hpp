// The supervisor: runs cases in worker processes, surviving crashes and hangs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runner/execute.hpp"
#include "core/result.hpp"
#include "runner/suite.hpp"

namespace opcts {

struct SupervisorOptions {
  SuiteOptions suite;     // passed on to each worker
  std::string self_exe;   // the opcts binary (workers are the same binary)
  std::string work_dir;   // where the case list for workers is written
  int device = 0;
  double timeout_s = 600;  // per case
  ExecOptions exec;        // passed on to each worker (--artifacts, --bitwise, --ref-cache)
};

/// Runs `ids` (in order) in worker processes and returns one raw record per id, in order.
/// A worker that dies costs the case in flight (CRASH, with the signal or exit status); one
/// that passes the time limit is killed (TIMEOUT); a new worker resumes at the next case.
/// `on_result` is called as each record arrives with the case's index in `ids`, the record
/// and how many records have arrived.
std::vector<ResultRecord> supervise(
    const SupervisorOptions& opt, const std::vector<std::string>& ids,
    const std::function<void(size_t index, const ResultRecord&, size_t done)>& on_result);

}  // namespace opcts
