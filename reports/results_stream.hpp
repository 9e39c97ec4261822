// The results file of a run as it happens: each finished record appended and flushed at once.
#pragma once

#include <string>
#include <vector>

#include "core/result.hpp"

namespace opcts {

/// Appends result lines to a results file while a run goes on, so a run killed at any point
/// (SIGKILL, a CI engine's time limit) leaves every record it had finished. Each line goes to
/// the kernel in one write(2) as soon as it is known (no user-space buffer; no fsync, so a
/// power cut may lose the last ones); read_results_file ignores a last line cut off by a kill.
class ResultsStream {
 public:
  /// Starts `path` (through a symlink, to its target) with `initial` records, written whole
  /// (write_files), then appends. A target that is not a regular file (a pipe, a terminal) is
  /// not streamed to: only the run's final write reaches it. An empty path streams nowhere.
  /// Throws std::runtime_error when the file cannot be written.
  ResultsStream(const std::string& path, const std::vector<ResultRecord>& initial);
  ~ResultsStream();
  ResultsStream(const ResultsStream&) = delete;
  ResultsStream& operator=(const ResultsStream&) = delete;

  /// Appends one record's line. A failed write (a full disk) prints one warning and stops the
  /// stream; the run goes on and its final write tries again.
  void append(const ResultRecord& r);

 private:
  std::string path_;
  int fd_ = -1;
};

/// The text of a results file: one to_json_line per record, each ending in '\n'.
std::string results_text(const std::vector<ResultRecord>& records);

}  // namespace opcts
