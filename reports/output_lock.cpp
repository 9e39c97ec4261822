// flock(2)ed lock files beside report paths.
#include "reports/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "reports/output_files.hpp"

namespace opcts {

namespace fs = std::filesystem;

OutputLock::OutputLock(const std::vector<std::string>& paths) {
  try {
    for (const auto& path : paths) {
      if (path.empty()) continue;
      const fs::path target = resolve_output(path);
      std::error_code ec;
      const auto st = fs::status(target, ec);
      if (fs::exists(st) && !fs::is_regular_file(st)) continue;  // a pipe or a terminal: nothing to replace
      if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
      const std::string lock = target.string() + ".lock";
      const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      if (fd < 0) throw std::runtime_error(path + ": cannot make its lock file " + lock + ": " + std::strerror(errno));
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        char pid[32] = {0};
        [[maybe_unused]] const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
        ::close(fd);
        if (err != EWOULDBLOCK) throw std::runtime_error(lock + ": cannot lock: " + std::strerror(err));
        throw std::runtime_error(path + " is being written by another opcts run (pid " +
                                 (pid[0] ? std::string(pid) : std::string("?")) + ", holding " + lock +
                                 "); give each run its own --results, --junit and --summary");
      }
      fds_.push_back(fd);
      const std::string me = std::to_string(getpid());
      if (::ftruncate(fd, 0) == 0) {
        [[maybe_unused]] const ssize_t n = ::pwrite(fd, me.data(), me.size(), 0);
      }
    }
  } catch (...) {
    for (int fd : fds_) ::close(fd);
    throw;
  }
}

OutputLock::~OutputLock() {
  for (int fd : fds_) ::close(fd);
}

}  // namespace opcts
