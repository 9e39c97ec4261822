// Staged, symlink-following, all-or-nothing report writes.
#include "reports/output_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace opcts {

namespace fs = std::filesystem;

namespace {

// Writes all of `data` to `fd`; false (errno set) on failure.
bool write_all(int fd, const std::string& data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

std::string errno_text() { return std::strerror(errno); }

// One file of the set: its target and, once staged, the temporary file beside it.
struct Pending {
  std::string path;  // as given, for messages
  fs::path target;
  const std::string* content;
  std::string tmp;  // "" until staged; stays "" for targets written in place
  bool in_place = false;
};

void remove_staged(const std::vector<Pending>& files) {
  for (const auto& f : files)
    if (!f.tmp.empty()) ::unlink(f.tmp.c_str());
}

}  // namespace

bool fault_disk_full(const std::string& target, unsigned long long size_after) {
  const char* spec = std::getenv("OPCTS_FAULT_DISK_FULL");
  if (!spec || !*spec) return false;
  const std::string s(spec);
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  std::error_code ec;
  const fs::path want = fs::weakly_canonical(fs::absolute(s.substr(0, colon)), ec);
  const fs::path got = fs::weakly_canonical(fs::absolute(target), ec);
  return want == got && size_after > std::stoull(s.substr(colon + 1));
}

namespace {

void stage(Pending& f) {
  std::error_code ec;
  if (f.target.has_parent_path()) fs::create_directories(f.target.parent_path(), ec);
  std::string tmpl = f.target.string() + ".tmp.XXXXXX";
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) throw std::runtime_error(f.path + ": cannot create a temporary file beside it: " + errno_text());
  f.tmp = tmpl;
  const mode_t mask = umask(0);
  umask(mask);
  // mkstemp makes 0600; a report is as readable as any file this user makes.
  if (fault_disk_full(f.target.string(), f.content->size())) {
    ::close(fd);
    errno = ENOSPC;
    throw std::runtime_error(f.path + ": write failed: " + errno_text());
  }
  bool ok = fchmod(fd, 0666 & ~mask) == 0 && write_all(fd, *f.content) && fsync(fd) == 0;
  std::string why = ok ? "" : errno_text();
  if (::close(fd) != 0 && ok) {
    ok = false;
    why = errno_text();
  }
  if (!ok) throw std::runtime_error(f.path + ": write failed: " + why);
}

void write_in_place(const Pending& f) {
  const int fd = ::open(f.target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(f.path + ": cannot open: " + errno_text());
  const bool ok = write_all(fd, *f.content);
  const std::string why = ok ? "" : errno_text();
  ::close(fd);
  if (!ok) throw std::runtime_error(f.path + ": write failed: " + why);
}

}  // namespace

std::string resolve_output(const std::string& path) {
  fs::path p(path);
  for (int depth = 0; depth < 40; ++depth) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p.string();
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) throw std::runtime_error(path + ": cannot read symlink: " + ec.message());
    const fs::path next = link.is_absolute() ? link : p.parent_path() / link;
    // A magic link (/proc/self/fd/1, which /dev/stdout names) opens a file its text does not
    // name ("pipe:[123]"): the link itself is the way to it.
    if (!fs::exists(fs::symlink_status(next, ec)) && fs::exists(fs::status(p, ec))) return p.string();
    p = next;
  }
  throw std::runtime_error(path + ": too many levels of symbolic links");
}

void write_files(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<Pending> todo;
  for (const auto& [path, content] : files) {
    Pending f{path, fs::path(resolve_output(path)), &content, "", false};
    std::error_code ec;
    const auto st = fs::status(f.target, ec);
    if (fs::is_directory(st)) throw std::runtime_error(path + ": is a directory");
    f.in_place = fs::exists(st) && !fs::is_regular_file(st);
    todo.push_back(std::move(f));
  }
  try {
    for (auto& f : todo)
      if (!f.in_place) stage(f);
    for (const auto& f : todo)
      if (f.in_place) write_in_place(f);
  } catch (...) {
    remove_staged(todo);
    throw;
  }
  for (auto& f : todo) {
    if (f.in_place) continue;
    if (::rename(f.tmp.c_str(), f.target.c_str()) != 0) {
      const std::string why = errno_text();
      remove_staged(todo);
      throw std::runtime_error(f.path + ": cannot rename the temporary file into place: " + why);
    }
    f.tmp.clear();
  }
}

void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& flagged) {
  std::vector<std::pair<std::string, fs::path>> seen;
  for (const auto& [flag, path] : flagged) {
    if (path.empty()) continue;
    std::error_code ec;
    const fs::path target = fs::absolute(resolve_output(path)).lexically_normal();
    fs::path real = fs::weakly_canonical(target, ec);
    if (ec) real = target;
    for (const auto& [other_flag, other] : seen)
      if (other == real) throw std::invalid_argument(other_flag + " and " + flag + " are the same file: " + path);
    seen.emplace_back(flag, real);
  }
}

}  // namespace opcts
