// The worker process: runs a list of cases under GoogleTest and streams one result line per case.
//
// Protocol on the result fd, one line each: "BEGIN <index>" before a case starts and
// "RESULT <json>" (to_json_line) when it ends. The supervisor reads them; a worker that dies
// between the two costs only that case.
#pragma once

#include <string>
#include <vector>

#include "runner/execute.hpp"
#include "runner/suite.hpp"

namespace opcts {

struct WorkerOptions {
  SuiteOptions suite;
  std::string ids_file;  // one case id per line
  size_t start = 0;      // index of the first case to run
  size_t count = 0;      // cases to run from `start` (0: to the end of the list)
  int device = 0;
  int result_fd = 3;
  ExecOptions exec;
};

/// Runs the cases from `start` on (`count` of them, or to the end), in order, each reporting BEGIN and RESULT on
/// `result_fd`. Returns the process exit code (0 once the list is done, 2 when the ids file cannot be read); exits the
/// process at once after a DeviceLost.
int worker_main(const Registry& reg, const WorkerOptions& opt);

}  // namespace opcts
