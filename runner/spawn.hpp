// Starting a child opcts process that answers over a pipe: the supervisor's workers
// (runner/supervisor.cpp) and the plugin probes (app/plugin_probe.cpp).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace opcts {

/// A started child and the read end of its answer pipe (O_CLOEXEC; the caller closes it and
/// reaps the child).
struct SpawnedChild {
  pid_t pid = -1;
  int read_fd = -1;
};

/// How spawn_with_pipe sets up the child.
struct SpawnOptions {
  int pipe_fd = -1;        // the fd number the child finds the pipe's write end at
  int extra_fd = -1;       // an fd of the caller's to hand over (-1: none) ...
  int extra_target = -1;   // ... at this fd number in the child
  bool own_group = false;  // the child leads a process group of its own (killed as one)
  std::string exec_error;  // written to stderr when exec fails (the child then exits 127)
};

/// Forks and execs `argv` (argv[0] a path, null-terminated, made by the caller: between fork and
/// exec only async-signal-safe calls run, as the caller may have threads holding malloc's lock).
/// The child dies with the calling thread (PR_SET_PDEATHSIG, SIGKILL) and exits 126 at once if
/// its parent is already gone; it inherits nothing else of ours (every other fd is O_CLOEXEC by
/// the callers' convention). Throws std::runtime_error naming the failed call (pipe, fcntl, fork).
SpawnedChild spawn_with_pipe(const std::vector<char*>& argv, const SpawnOptions& opt);

}  // namespace opcts
