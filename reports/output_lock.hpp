// One writer per report file: a run holds a lock beside each of its report paths for as long as
// it runs, so a second run given the same --results (or --junit, --summary) is refused at once
// instead of both writing and one run's records silently replacing the other's.
#pragma once

#include <string>
#include <vector>

namespace opcts {

/// Holds an exclusive flock(2) on "<target>.lock" for each non-empty path (its symlink target,
/// reports/output_files.hpp's resolve_output) that is or will be a regular file; targets that
/// are not (a pipe, /dev/stdout) need none. The lock files stay (removing one would let a third
/// run lock a new file while a second waits on the old); each holds the pid of its last holder.
/// The locks go with the object, or with the process: a killed run never leaves one held.
/// Throws std::runtime_error naming the path and the pid holding it when another process holds
/// a lock, or when a lock file cannot be made.
class OutputLock {
 public:
  explicit OutputLock(const std::vector<std::string>& paths);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::vector<int> fds_;
};

}  // namespace opcts
