// The on-disk reference cache: one file per problem and reference version, written atomically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/family.hpp"

namespace opcts {

/// The default folder: $XDG_CACHE_HOME/opcts, else $HOME/.cache/opcts, else "" (no cache).
std::string default_ref_cache_dir();

/// The references' build digest (cmake/ref_digest.cmake): a hash of the sources references and
/// inputs are made from and of how they were compiled, derived by the build itself.
std::string ref_build_digest();

/// The default size cap of the cache: one default-tier run on an H200 wrote 3.2 GB, so a few
/// GiB keep a run's references while a disk shared by runs and toolkits does not fill up.
inline constexpr std::uint64_t kDefaultRefCacheMaxBytes = std::uint64_t{4} << 30;

/// References stored under `dir`, keyed by
/// "<family>/<problem id>@<reference_version>+<ref_build_digest>#<inputs>", <inputs> the
/// fingerprint of the generated inputs (numerics/tensor.hpp fingerprint over every tensor), so that
/// a changed input generator can never reuse a reference of other inputs, and the build digest
/// so that a folder shared by checkouts and builds never serves one build another's references.
/// Each file holds a header with the magic, a format version and the full key, then the
/// exact, lowp and bound vectors and the reduction statistics, then a checksum; a file whose key differs (a hash
/// collision), that is truncated or corrupt is ignored and rewritten. Writes go to a temp
/// file, checked through fsync and close, renamed into place only when whole, so concurrent
/// shards never read half a file and a full disk leaves no empty entry; the first store that
/// fails in a process is reported on stderr (`opcts cache verify` recomputes a sample).
///
/// The folder holds at most `max_bytes` of reference files: a store that takes it past the
/// cap deletes the least recently used files (a load sets its file's mtime to now, so mtime
/// is the last use) until it is back under 90% of the cap, the file just stored kept. The
/// size is scanned at the first store and again every 64 stores, so shards that share the
/// folder notice each other's files; between scans each process counts its own writes.
class RefDiskCache {
 public:
  explicit RefDiskCache(std::string dir, std::uint64_t max_bytes = kDefaultRefCacheMaxBytes)
      : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  bool enabled() const { return !dir_.empty(); }
  /// The full key of a problem and the inputs it was computed from.
  static std::string key(const Family& f, const Problem& p, const TensorMap& inputs);
  /// The file that holds `key`.
  std::string path_of(const std::string& key) const;
  /// The key a cache file holds (its checksum and header checked), or nullopt.
  static std::optional<std::string> key_of_file(const std::string& path);
  const std::string& dir() const { return dir_; }
  /// The stored references of `key`, or nullopt (absent, another key, truncated, corrupt).
  /// A hit marks the file as just used.
  std::optional<References> load(const std::string& key) const;
  /// Stores them (not above 64 MiB of values, nor above the cap), then evicts as above; a
  /// failure to write (read-only disk, full disk) is a cache miss next time, never a failed
  /// case, and the first one of the process is reported on stderr.
  void store(const std::string& key, const References& refs) const;

 private:
  // Deletes least recently used files until the folder holds at most `target` bytes; `keep`
  // is never deleted. Returns the bytes left.
  std::uint64_t evict(std::uint64_t target, const std::string& keep) const;

  std::string dir_;
  std::uint64_t max_bytes_;
  mutable std::optional<std::uint64_t> used_;  // bytes in the folder, as last scanned plus own writes
  mutable int stores_since_scan_ = 0;
};

}  // namespace opcts
