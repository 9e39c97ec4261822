// Whole-file reads that stop at a size limit.
#include "core/read_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace opcts {

std::string read_file_limited(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open file: " + std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw std::runtime_error(path + ": cannot read: " + why);
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::uint64_t>(n) > max_bytes) {
      ::close(fd);
      throw std::runtime_error(path + ": " + std::string(what) + " larger than " + std::to_string(max_bytes >> 20) +
                               " MiB (not " + std::string(what) + "? opcts stops reading there)");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace opcts
