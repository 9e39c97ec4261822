// Reading and writing the reference cache's binary files.
#include "runner/ref_disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "opcts_ref_digest.hpp"  // OPCTS_REF_BUILD_DIGEST (cmake/ref_digest.cmake)

namespace opcts {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'O', 'P', 'C', 'T', 'S', 'R', 'E', 'F'};
// 2: reduction statistics after the per-element bounds; 3: then the bounds below and the
// conservation checks; 4: the reductions' raggedness, term bits, extra allowance and offset;
// 5: then the error-energy checks; 6: the reductions' unsaturated results
constexpr uint32_t kFormat = 6;

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& out, const std::string& s) {
  put(out, static_cast<uint64_t>(s.size()));
  out += s;
}

// A bounds-checked reader over the file's bytes: every read fails cleanly past the end.
struct Reader {
  const std::string& buf;
  size_t pos = 0;
  template <class T>
  bool get(T& v) {
    if (buf.size() - pos < sizeof v) return false;
    std::memcpy(&v, buf.data() + pos, sizeof v);
    pos += sizeof v;
    return true;
  }
  bool get_str(std::string& s, uint64_t max) {
    uint64_t n = 0;
    if (!get(n) || n > max || buf.size() - pos < n) return false;
    s.assign(buf.data() + pos, n);
    pos += n;
    return true;
  }
};

using Maps = std::map<std::string, std::vector<double>>;

bool get_values(Reader& r, std::vector<double>& v) {
  uint64_t count = 0;
  if (!r.get(count) || count > (r.buf.size() - r.pos) / sizeof(double)) return false;
  v.resize(count);
  std::memcpy(v.data(), r.buf.data() + r.pos, count * sizeof(double));
  r.pos += count * sizeof(double);
  return true;
}

// A name -> entry map as put_* wrote it: its size (at most 1024 entries), then each name (at
// most 4096 bytes) and entry, read by get_entry(r, entry). False on a short or implausible file.
template <class M, class GetEntry>
bool get_named(Reader& r, M& m, GetEntry get_entry) {
  uint64_t n = 0;
  if (!r.get(n) || n > 1024) return false;
  for (uint64_t i = 0; i < n; ++i) {
    std::string name;
    typename M::mapped_type e;
    if (!r.get_str(name, 4096) || !get_entry(r, e)) return false;
    m.emplace(std::move(name), std::move(e));
  }
  return true;
}

bool get_maps(Reader& r, Maps& m) { return get_named(r, m, get_values); }

using Reductions = std::map<std::string, ReductionStats>;

void put_values(std::string& out, const std::vector<double>& v) {
  put(out, static_cast<uint64_t>(v.size()));
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

void put_maps(std::string& out, const Maps& m) {
  put(out, static_cast<uint64_t>(m.size()));
  for (const auto& [name, v] : m) {
    put_str(out, name);
    put_values(out, v);
  }
}

void put_reductions(std::string& out, const Reductions& m) {
  put(out, static_cast<uint64_t>(m.size()));
  for (const auto& [name, st] : m) {
    put_str(out, name);
    put(out, static_cast<int64_t>(st.terms));
    put(out, static_cast<uint8_t>(st.zero_mean));
    put(out, static_cast<uint8_t>(st.ragged));
    put(out, static_cast<int32_t>(st.exact_term_bits));
    put(out, static_cast<int32_t>(st.term_bits));
    put(out, st.extra_rel);
    put(out, st.extra_abs);
    for (const auto* v : {&st.abs_sum, &st.sq_sum, &st.magnitude, &st.offset, &st.unsaturated}) put_values(out, *v);
  }
}

bool get_reduction(Reader& r, ReductionStats& st) {
  int64_t terms = 0;
  uint8_t zero_mean = 0, ragged = 0;
  int32_t bits = 0, term_bits = 0;
  if (!r.get(terms) || !r.get(zero_mean) || !r.get(ragged) || !r.get(bits) || !r.get(term_bits) ||
      !r.get(st.extra_rel) || !r.get(st.extra_abs))
    return false;
  st.terms = terms;
  st.zero_mean = zero_mean != 0;
  st.ragged = ragged != 0;
  st.exact_term_bits = bits;
  st.term_bits = term_bits;
  for (auto* v : {&st.abs_sum, &st.sq_sum, &st.magnitude, &st.offset, &st.unsaturated})
    if (!get_values(r, *v)) return false;
  return true;
}

bool get_reductions(Reader& r, Reductions& m) { return get_named(r, m, get_reduction); }

// Writes `data` to the new file `path`, checked through write, fsync and close (a full disk
// may only show at fsync or close) and against the size it must have: "" or why it failed.
std::string write_checked(const std::string& path, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return std::string("cannot create ") + path + ": " + std::strerror(errno);
  std::string why;
  size_t off = 0;
  while (why.empty() && off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) why = std::string("write: ") + (n < 0 ? std::strerror(errno) : "no progress");
    else off += static_cast<size_t>(n);
  }
  if (why.empty() && ::fsync(fd) != 0) why = std::string("fsync: ") + std::strerror(errno);
  struct stat st {};
  if (why.empty() && (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != data.size()))
    why = "the file holds " + std::to_string(st.st_size) + " of " + std::to_string(data.size()) + " bytes";
  if (::close(fd) != 0 && why.empty()) why = std::string("close: ") + std::strerror(errno);
  return why;
}

// One warning per process: a cache that cannot store (a full or read-only disk) makes every
// reference be computed, which the user should know once, not once per problem.
std::atomic<bool> g_store_failure_reported{false};

void report_store_failure(const std::string& dir, const std::string& why) {
  if (g_store_failure_reported.exchange(true)) return;
  std::fprintf(stderr,
               "opcts: warning: reference cache %s: cannot store a reference (%s); references this process cannot "
               "store are computed again next time\n",
               dir.c_str(), why.c_str());
}

using Conservations = std::map<std::string, Conservation>;

void put_conservations(std::string& out, const Conservations& m) {
  put(out, static_cast<uint64_t>(m.size()));
  for (const auto& [name, c] : m) {
    put_str(out, name);
    put(out, static_cast<int64_t>(c.group));
    for (const double v : {c.total_sum, c.total_below, c.total_above}) put(out, v);
    for (const auto* v : {&c.sum, &c.below, &c.above}) put_values(out, *v);
  }
}

bool get_conservation(Reader& r, Conservation& c) {
  int64_t group = 0;
  if (!r.get(group) || !r.get(c.total_sum) || !r.get(c.total_below) || !r.get(c.total_above)) return false;
  c.group = group;
  for (auto* v : {&c.sum, &c.below, &c.above})
    if (!get_values(r, *v)) return false;
  return true;
}

bool get_conservations(Reader& r, Conservations& m) { return get_named(r, m, get_conservation); }

using Energies = std::map<std::string, ErrorEnergy>;

void put_energies(std::string& out, const Energies& m) {
  put(out, static_cast<uint64_t>(m.size()));
  for (const auto& [name, e] : m) {
    put_str(out, name);
    put(out, e.fixed);
    put(out, static_cast<uint64_t>(e.sources.size()));
    for (const ErrorEnergy::Source& s : e.sources)
      for (const double v : {s.trace, s.trace_sq, s.spectral}) put(out, v);
    put_values(out, e.weight);
  }
}

bool get_energy(Reader& r, ErrorEnergy& e) {
  uint64_t sources = 0;
  if (!r.get(e.fixed) || !r.get(sources) || sources > 64) return false;
  e.sources.resize(sources);
  for (ErrorEnergy::Source& s : e.sources)
    if (!r.get(s.trace) || !r.get(s.trace_sq) || !r.get(s.spectral)) return false;
  return get_values(r, e.weight);
}

bool get_energies(Reader& r, Energies& m) { return get_named(r, m, get_energy); }

}  // namespace

std::string ref_build_digest() { return OPCTS_REF_BUILD_DIGEST; }

std::string default_ref_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "opcts").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "opcts").string();
  return "";
}

std::string RefDiskCache::key(const Family& f, const Problem& p, const TensorMap& inputs) {
  uint64_t h = 0x243f6a8885a308d3ull;  // the tensors in name order (a std::map): one fingerprint
  for (const auto& [name, t] : inputs) h = fnv1a(name.data(), name.size()) ^ (h * 0x100000001b3ull) ^ fingerprint(t);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string(f.name()) + "/" + f.problem_id(p) + "@" + f.reference_version() + "+" + ref_build_digest() + "#" +
         hex;
}

std::string RefDiskCache::path_of(const std::string& key) const {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key.data(), key.size())));
  const std::string family = key.substr(0, key.find('/'));
  return (fs::path(dir_) / family / (std::string(hex) + ".ref")).string();
}

namespace {

// A cache file's body (without its checksum) when the checksum holds and the header is ours,
// with the key it stores; nullopt otherwise.
std::optional<std::pair<std::string, std::string>> read_entry(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string buf = ss.str();
  if (buf.size() < sizeof kMagic + sizeof(uint32_t) + sizeof(uint64_t)) return std::nullopt;
  // The checksum (last 8 bytes) covers everything before it: a truncated or flipped file fails.
  uint64_t sum = 0;
  std::memcpy(&sum, buf.data() + buf.size() - sizeof sum, sizeof sum);
  if (sum != fnv1a(buf.data(), buf.size() - sizeof sum)) return std::nullopt;
  std::string body = buf.substr(0, buf.size() - sizeof sum);
  Reader r{body};
  char magic[8];
  uint32_t format = 0;
  std::string stored_key;
  if (!r.get(magic) || std::memcmp(magic, kMagic, sizeof kMagic) != 0 || !r.get(format) || format != kFormat ||
      !r.get_str(stored_key, 1 << 16))
    return std::nullopt;
  return std::make_pair(std::move(stored_key), std::move(body));
}

}  // namespace

std::optional<std::string> RefDiskCache::key_of_file(const std::string& path) {
  auto e = read_entry(path);
  if (!e) return std::nullopt;
  return std::move(e->first);
}

std::optional<References> RefDiskCache::load(const std::string& key) const {
  if (!enabled()) return std::nullopt;
  const auto entry = read_entry(path_of(key));
  if (!entry || entry->first != key) return std::nullopt;
  const std::string& body = entry->second;
  Reader r{body};
  r.pos = sizeof kMagic + sizeof(uint32_t) + sizeof(uint64_t) + key.size();
  References refs;
  if (!get_maps(r, refs.exact) || !get_maps(r, refs.lowp) || !get_maps(r, refs.bound) ||
      !get_reductions(r, refs.reduction) || !get_maps(r, refs.bound_below) ||
      !get_conservations(r, refs.conservation) || !get_energies(r, refs.energy) || r.pos != body.size())
    return std::nullopt;
  // Marks the file as just used for the LRU eviction; a read-only cache simply keeps its order.
  std::error_code ec;
  fs::last_write_time(path_of(key), fs::file_time_type::clock::now(), ec);
  return refs;
}

std::uint64_t RefDiskCache::evict(std::uint64_t target, const std::string& keep) const {
  struct File {
    fs::file_time_type used;
    std::uint64_t bytes;
    fs::path path;
  };
  std::vector<File> files;
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != ".ref") continue;  // temp files are another process's
    std::error_code e2;
    const auto bytes = it->file_size(e2);
    const auto used = it->last_write_time(e2);
    if (e2) continue;  // deleted meanwhile by another shard
    files.push_back({used, bytes, it->path()});
    total += bytes;
  }
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.used < b.used; });
  for (const auto& f : files) {
    if (total <= target) break;
    if (f.path == fs::path(keep)) continue;
    std::error_code e2;
    if (fs::remove(f.path, e2) || !e2) total -= f.bytes;  // gone either way
  }
  return total;
}

void RefDiskCache::store(const std::string& key, const References& refs) const {
  if (!enabled()) return;
  // A reference larger than this (a 4096² prefill's O is hundreds of MiB) costs about as
  // much to write and read back as to compute, and would fill the disk: not cached.
  constexpr size_t kMaxBytes = size_t{64} << 20;
  size_t bytes = 0;
  for (const auto* m : {&refs.exact, &refs.lowp, &refs.bound, &refs.bound_below})
    for (const auto& [name, v] : *m) bytes += v.size() * sizeof(double);
  for (const auto& [name, c] : refs.conservation) bytes += 3 * c.sum.size() * sizeof(double);
  for (const auto& [name, e] : refs.energy) bytes += e.weight.size() * sizeof(double);
  for (const auto& [name, st] : refs.reduction)
    bytes += (st.abs_sum.size() + st.sq_sum.size() + st.magnitude.size() + st.offset.size() + st.unsaturated.size()) *
             sizeof(double);
  if (bytes > kMaxBytes || bytes > max_bytes_) return;
  std::string out;
  out.append(kMagic, sizeof kMagic);
  put(out, kFormat);
  put_str(out, key);
  put_maps(out, refs.exact);
  put_maps(out, refs.lowp);
  put_maps(out, refs.bound);
  put_reductions(out, refs.reduction);
  put_maps(out, refs.bound_below);
  put_conservations(out, refs.conservation);
  put_energies(out, refs.energy);
  put(out, fnv1a(out.data(), out.size()));
  const fs::path dst = path_of(key);
  std::error_code ec;
  fs::create_directories(dst.parent_path(), ec);
  const fs::path tmp = dst.string() + ".tmp." + std::to_string(getpid());
  fs::remove(tmp, ec);  // left by a killed process of this PID
  // Only a file that holds every byte, synced, is renamed into place: a full disk must leave
  // no empty or short entry (it would be refused on every load, and never be reported).
  if (const std::string why = write_checked(tmp.string(), out); !why.empty()) {
    fs::remove(tmp, ec);
    report_store_failure(dir_, why);
    return;
  }
  fs::rename(tmp, dst, ec);  // atomic on one file system: readers see the old file or the new one
  if (ec) {
    const std::string why = "rename: " + ec.message();
    fs::remove(tmp, ec);
    report_store_failure(dir_, why);
    return;
  }
  // The cap: scanned now and then (other shards write here too), counted in between.
  if (!used_ || ++stores_since_scan_ >= 64) {
    used_ = evict(max_bytes_, dst.string());
    stores_since_scan_ = 0;
  } else {
    *used_ += out.size();
  }
  if (*used_ > max_bytes_) used_ = evict(max_bytes_ / 10 * 9, dst.string());
}

}  // namespace opcts
