// Reading an input file whole, with a size limit checked while reading: `--catalog /dev/urandom`
// or `--resume /dev/zero` must end in an error, not in a process that reads until memory runs out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace opcts {

/// The largest YAML input (catalog, manifest, tolerances, archs) opcts reads: the largest real
/// one, cases/sdpa.yaml, is 30 KB, and a grid of a million points fits in a few lines.
inline constexpr std::uint64_t kMaxYamlBytes = std::uint64_t{16} << 20;
/// The largest report (results lines, JUnit, times) opcts reads back: a record is 1-2 KB and
/// the full tier of every arch together holds a few hundred thousand cases.
inline constexpr std::uint64_t kMaxReportBytes = std::uint64_t{4} << 30;

/// The bytes of `path` (any file: a regular file, a FIFO, a device), read to its end. Throws
/// std::runtime_error "<path>: cannot open ..." / "<path>: <what> larger than N MiB (...)" as
/// soon as more than `max_bytes` were read, so an endless source costs max_bytes, not memory.
std::string read_file_limited(const std::string& path, std::uint64_t max_bytes, std::string_view what);

}  // namespace opcts
