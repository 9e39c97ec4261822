// The stop request: a signal handler that writes to a self-pipe.
#include "runner/stop_signal.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>

namespace opcts {

namespace {

volatile sig_atomic_t g_signal = 0;
int g_pipe[2] = {-1, -1};
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE};
struct sigaction g_old[std::size(kStopSignals)];

void on_signal(int sig) {
  const int saved = errno;  // the interrupted code may read errno right after the handler
  if (g_signal == 0) g_signal = sig;
  if (g_pipe[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = write(g_pipe[1], &byte, 1);  // non-blocking: a full pipe is readable anyway
  }
  errno = saved;
}

}  // namespace

StopOnSignals::StopOnSignals() {
  if (g_pipe[0] >= 0) throw std::logic_error("StopOnSignals is already installed");
  if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking call returns EINTR and the caller looks at the flag
  for (size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &sa, &g_old[i]);
}

StopOnSignals::~StopOnSignals() {
  for (size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &g_old[i], nullptr);
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

int stop_requested() { return g_signal; }

std::string stop_description(int stopped_by) {
  if (stopped_by == kStopResultsUnwritable) return "the failure to write its results file";
  return "signal " + std::to_string(stopped_by) + " (" + strsignal(stopped_by) + ")";
}

int stop_fd() { return g_pipe[0]; }

void request_stop(int sig) { on_signal(sig); }

}  // namespace opcts
