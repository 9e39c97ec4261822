#include "runner/spawn.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

namespace opcts {

SpawnedChild spawn_with_pipe(const std::vector<char*>& argv, const SpawnOptions& opt) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  // The write end above the fds the child sets up, so that no dup2 below overwrites another.
  const int write_end = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
  close(fds[1]);
  if (write_end < 0) {
    close(fds[0]);
    throw std::runtime_error(std::string("fcntl: ") + std::strerror(errno));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(write_end);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    if (opt.own_group) setpgid(0, 0);  // a terminal's Ctrl-C then reaches only the parent
    // Dies with the parent's thread (SIGKILL included); if the parent died already, go now.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    // dup2 clears O_CLOEXEC on the copies: these two fds, and only these, survive the exec.
    dup2(write_end, opt.pipe_fd);
    if (opt.extra_fd >= 0) dup2(opt.extra_fd, opt.extra_target);
    execv(argv[0], argv.data());
    if (!opt.exec_error.empty()) {
      [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, opt.exec_error.data(), opt.exec_error.size());
    }
    _exit(127);
  }
  if (opt.own_group) setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  close(write_end);
  return {pid, fds[0]};
}

}  // namespace opcts
