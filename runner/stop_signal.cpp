// The stop request: a signal handler that writes to a self-pipe.
#include "runner/stop_signal.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace opcts {

namespace {

volatile sig_atomic_t g_signal = 0;
int g_pipe[2] = {-1, -1};
struct sigaction g_old_term, g_old_int;

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
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGINT, &sa, &g_old_int);
}

StopOnSignals::~StopOnSignals() {
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGINT, &g_old_int, nullptr);
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

int stop_requested() { return g_signal; }

int stop_fd() { return g_pipe[0]; }

void request_stop(int sig) { on_signal(sig); }

}  // namespace opcts
