// Appending result lines with one write(2) each.
#include "reports/results_stream.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "reports/output_files.hpp"

namespace opcts {

std::string results_text(const std::vector<ResultRecord>& records) {
  std::string lines;
  for (const auto& r : records) lines += to_json_line(r) + "\n";
  return lines;
}

ResultsStream::ResultsStream(const std::string& path, const std::vector<ResultRecord>& initial) : path_(path) {
  if (path.empty()) return;
  write_files({{path, results_text(initial)}});
  const std::string target = resolve_output(path);
  if (!std::filesystem::is_regular_file(target)) return;
  fd_ = ::open(target.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(path + ": cannot open for appending: " + std::strerror(errno));
}

ResultsStream::~ResultsStream() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsStream::append(const ResultRecord& r) {
  if (fd_ < 0) return;
  const std::string line = to_json_line(r) + "\n";
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::fprintf(stderr, "opcts: warning: %s: cannot append a result (%s); the final write will try again\n",
                   path_.c_str(), n < 0 ? std::strerror(errno) : "short write");
      ::close(fd_);
      fd_ = -1;
      return;
    }
    off += static_cast<size_t>(n);
  }
}

}  // namespace opcts
