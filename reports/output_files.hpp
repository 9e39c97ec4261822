// Writing report files safely: through symlinks, all files of a set or none, one path per output.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace opcts {

/// The file a report path stands for: the final target of a symlink (relative links resolved
/// against the link's folder, at most 40 links deep), else the path itself. Throws
/// std::runtime_error on a symlink loop.
std::string resolve_output(const std::string& path);

/// Writes each (path, content) pair, all or none: every content goes first to a temporary
/// file beside its target (mkstemp, fsync'd, so a full disk shows here), and only when every
/// one is written are they renamed over their targets. A path that is a symlink is written
/// through to its target (the link stays); a target that is not a regular file (a FIFO, a
/// terminal, /dev/stdout) is written in place after the others are staged and before any
/// rename, so a failure anywhere leaves every regular target as it was. Creates missing parent
/// folders. Throws std::runtime_error naming the path that failed.
void write_files(const std::vector<std::pair<std::string, std::string>>& files);

/// Fault injection for the runner's own tests (like the worker's OPCTS_FAULT_*): with
/// $OPCTS_FAULT_DISK_FULL set to "<path>:<bytes>", the file `target` (after symlinks) is on a
/// disk that holds only <bytes> of it when `target` is that path: true when a write that makes
/// it `size_after` bytes long must fail with ENOSPC. Unset in real runs.
bool fault_disk_full(const std::string& target, unsigned long long size_after);

/// Throws std::invalid_argument when two non-empty outputs are one file (after symlinks and
/// relative paths), e.g. "--junit and --results are the same file: r.txt". `flagged` holds
/// (flag, path) pairs.
void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& flagged);

}  // namespace opcts
