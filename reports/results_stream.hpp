// The results file of a run as it happens: each finished record appended and flushed at once.
#pragma once

#include <functional>
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
  /// Starts `path` (through a symlink, to its target) with the `header` line (the run's
  /// selection; none when empty) and `initial` records, written whole (write_files), then
  /// appends. A target that is not a regular file (a pipe, a terminal) is not streamed to: only
  /// the run's final write reaches it. An empty path streams nowhere. Throws
  /// std::runtime_error when the file cannot be written. `on_failure` is called once, with
  /// the reason, when an append fails (a full disk).
  ResultsStream(const std::string& path, const std::vector<ResultRecord>& initial, const std::string& header = "",
                std::function<void(const std::string&)> on_failure = {});
  ~ResultsStream();
  ResultsStream(const ResultsStream&) = delete;
  ResultsStream& operator=(const ResultsStream&) = delete;

  /// Appends one record's line. A failed write (a full disk) prints one error, stops the
  /// stream and calls `on_failure` (`opcts run` then stops: a record it cannot keep is not
  /// worth a case's time); a line cut short is never completed by a later one.
  void append(const ResultRecord& r);

 private:
  std::string path_;
  int fd_ = -1;
  std::function<void(const std::string&)> on_failure_;
};

/// The text of a results file: the `header` line when not empty, then one to_json_line per
/// record, each ending in '\n'.
std::string results_text(const std::vector<ResultRecord>& records, const std::string& header = "");

}  // namespace opcts
