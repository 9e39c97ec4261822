// SIGTERM and SIGINT as a request to stop a run: a flag and a self-pipe the supervisor polls.
//
// A CI engine that cancels a job, a `timeout`, CTest or a user's Ctrl-C sends SIGTERM or SIGINT;
// the run must then stop starting cases, end its worker and write what it has (issue 17). The
// handler only records the signal and writes one byte to a pipe, so a supervisor blocked in
// poll(2) on its worker wakes at once (a flag alone can be missed between a check and the poll).
#pragma once

namespace opcts {

/// While alive, SIGTERM and SIGINT set the stop request instead of ending the process; the
/// previous dispositions come back when it is destroyed. Not nestable.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
};

/// The signal that asked the run to stop (SIGTERM, SIGINT), or 0.
int stop_requested();
/// A descriptor that becomes readable when a stop is requested (poll it with POLLIN); -1 when
/// no StopOnSignals is alive. Never read it: it stays readable once a stop was requested.
int stop_fd();
/// Requests a stop as the signal `sig` would (for tests and for callers that decide to stop).
void request_stop(int sig);

}  // namespace opcts
