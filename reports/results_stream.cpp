// Appending result lines with one write(2) each.
#include "reports/results_stream.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "reports/output_files.hpp"

namespace opcts {

std::string results_text(const std::vector<ResultRecord>& records, const std::string& header) {
  std::string lines = header.empty() ? "" : header + "\n";
  for (const auto& r : records) lines += to_json_line(r) + "\n";
  return lines;
}

ResultsStream::ResultsStream(const std::string& path, const std::vector<ResultRecord>& initial,
                             const std::string& header, std::function<void(const std::string&)> on_failure)
    : path_(path), on_failure_(std::move(on_failure)) {
  if (path.empty()) return;
  write_files({{path, results_text(initial, header)}});
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
  struct stat st {};
  const bool full =
      ::fstat(fd_, &st) == 0 && fault_disk_full(path_, static_cast<unsigned long long>(st.st_size) + line.size());
  while (off < line.size()) {
    const ssize_t n = full ? (errno = ENOSPC, -1) : ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "short write";
      std::fprintf(stderr, "opcts: error: %s: cannot append a result (%s)\n", path_.c_str(), why.c_str());
      ::close(fd_);
      fd_ = -1;
      if (on_failure_) on_failure_(path_ + ": cannot append a result (" + why + ")");
      return;
    }
    off += static_cast<size_t>(n);
  }
}

}  // namespace opcts
