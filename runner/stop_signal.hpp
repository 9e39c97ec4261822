// SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGPIPE as a request to stop a run: a flag and a
// self-pipe the supervisor polls.
//
// A CI engine that cancels a job, a `timeout`, CTest or a user's Ctrl-C sends SIGTERM or SIGINT;
// a closed terminal SIGHUP, a Ctrl-\ SIGQUIT, a reader of our output that went away SIGPIPE.
// The run must then stop starting cases, end its worker and write what it has (issue 17): by
// default each of them ends the process and leaves the reports as they were. The handler only
// records the signal and writes one byte to a pipe, so a supervisor blocked in poll(2) on its
// worker wakes at once (a flag alone can be missed between a check and the poll).
#pragma once

#include <string>

namespace opcts {

/// The stop request's value when the run stops itself because it cannot record results (its
/// results file cannot be written): not a signal.
inline constexpr int kStopResultsUnwritable = -1;

/// While alive, SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGPIPE set the stop request instead of
/// ending the process; the previous dispositions come back when it is destroyed. Not nestable.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
};

/// The signal that asked the run to stop (SIGTERM, SIGINT, ...), kStopResultsUnwritable, or 0.
int stop_requested();
/// What stopped the run, for messages: "signal 15 (Terminated)", "the failure to write its
/// results file".
std::string stop_description(int stopped_by);
/// A descriptor that becomes readable when a stop is requested (poll it with POLLIN); -1 when
/// no StopOnSignals is alive. Never read it: it stays readable once a stop was requested.
int stop_fd();
/// Requests a stop as the signal `sig` would (for tests and for callers that decide to stop,
/// with kStopResultsUnwritable).
void request_stop(int sig);

}  // namespace opcts
