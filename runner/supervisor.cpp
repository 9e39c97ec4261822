// Worker processes, their result pipe, crash, timeout, protocol and stop handling.
#include "runner/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "runner/spawn.hpp"
#include "runner/stop_signal.hpp"

namespace opcts {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Startup (loading the catalogs, CUDA context) is allowed this long before the first case.
constexpr double kStartupSeconds = 120;
// A worker's line longer than this is not a protocol line (a result line is a few KiB).
constexpr size_t kMaxLineBytes = size_t{16} << 20;

// The fds a worker finds its result pipe and its case list on.
constexpr int kResultFd = 3;
constexpr int kListFd = 4;

// The case list workers read, as an open file that no name reaches: written in a folder made
// by mkdtemp(3) (a name no other process holds, whatever the PIDs: two containers, two PID
// namespaces, two threads of one process), opened, then unlinked with its folder at once, so
// nothing is left behind even when the supervisor is killed. Workers get it as fd kListFd and
// open /proc/self/fd/4, which reads it from the start.
class CaseList {
 public:
  CaseList(const std::string& parent, const std::vector<std::string>& ids) {
    const fs::path base = parent.empty() ? fs::temp_directory_path() : fs::path(parent);
    std::string dir = (base / "opcts-run-XXXXXX").string();
    if (!mkdtemp(dir.data()))
      throw std::runtime_error("cannot make a scratch folder in " + base.string() + ": " + std::strerror(errno));
    const std::string file = dir + "/cases.txt";
    {
      std::ofstream f(file);
      for (const auto& id : ids) f << id << "\n";
      f.close();
      if (f) fd_ = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (fd_ < 0) throw std::runtime_error(file + ": cannot write the case list");
    const int high = fcntl(fd_, F_DUPFD_CLOEXEC, 10);  // above the fds the child sets up
    ::close(fd_);
    fd_ = high;
  }
  ~CaseList() { ::close(fd_); }
  CaseList(const CaseList&) = delete;
  CaseList& operator=(const CaseList&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

struct Worker {
  pid_t pid = -1;
  int fd = -1;
  std::string log;  // --sanitize: compute-sanitizer's log file, read and removed once the worker ends
};

// A new empty file for a sanitizer's log under `parent` (the temp dir when ""): its path.
std::string new_log_file(const std::string& parent) {
  const std::filesystem::path dir =
      parent.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(parent);
  std::string path = (dir / "opcts-sanitizer-XXXXXX").string();
  const int fd = mkstemp(path.data());
  if (fd < 0)
    throw std::runtime_error("cannot create a sanitizer log in " + dir.string() + ": " + std::strerror(errno));
  ::close(fd);
  return path;
}

// The log's text, the file removed.
std::string take_log(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  return text;
}

// Marks r with what the sanitizer reported: a FAIL of kind sanitizer, the report first.
void add_sanitizer_finding(ResultRecord& r, const SanitizeOptions& s, const std::string& report) {
  const std::string what = "compute-sanitizer " + s.tool + ": " +
                           (report.empty() ? "reported an error (exit status 86) and its log holds no report" : report);
  r.message = r.raw_outcome == Outcome::FAIL && !r.message.empty() ? what + "; " + r.message : what;
  r.raw_outcome = r.outcome = Outcome::FAIL;
  r.failures.push_back({"", FailureKind::sanitizer, 0, 0});
}

// Kills the worker and anything it started (its process group).
void kill_worker(const Worker& w) {
  kill(-w.pid, SIGKILL);
  kill(w.pid, SIGKILL);  // in case the group was not made yet
}

Worker spawn(const SupervisorOptions& opt, const CaseList& list, size_t start) {
  const SanitizeOptions& s = opt.sanitize;
  const std::string log = s.tool.empty() ? std::string() : new_log_file(opt.scratch_parent);
  std::vector<std::string> args;
  if (!s.tool.empty())
    args = {s.sanitizer, "--tool", s.tool, "--error-exitcode", std::to_string(kSanitizerErrorExit), "--log-file", log};
  args.insert(args.end(), {opt.self_exe, "__worker", "--arch", opt.suite.arch, "--cases-dir", opt.suite.cases_dir,
                           "--ids", "/proc/self/fd/" + std::to_string(kListFd), "--start", std::to_string(start),
                           "--device", std::to_string(opt.device), "--result-fd", std::to_string(kResultFd)});
  if (!s.tool.empty()) args.insert(args.end(), {"--count", "1"});  // one case a worker: its findings are its own
  if (!opt.suite.manifest.empty()) args.insert(args.end(), {"--manifest", opt.suite.manifest});
  for (std::string& a : exec_worker_args(opt.exec)) args.push_back(std::move(a));
  for (const auto& p : opt.suite.plugins) args.insert(args.end(), {"--plugin", p});
  // Everything the child needs is made before fork: between fork and exec only
  // async-signal-safe calls (the parent may have threads holding malloc's lock).
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const SpawnedChild child = spawn_with_pipe(argv, {.pipe_fd = kResultFd,
                                                    .extra_fd = list.fd(),
                                                    .extra_target = kListFd,
                                                    .own_group = true,
                                                    .exec_error = "opcts: cannot start worker " + args[0] + "\n"});
  return {child.pid, child.read_fd, log};
}

std::string exit_description(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return std::string("worker killed by signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "worker exited with status " + std::to_string(WEXITSTATUS(status));
  return "worker ended";
}

ResultRecord synthetic(const std::string& id, Outcome o, std::string message) {
  ResultRecord r;
  r.id = id;
  const auto dot = id.find('.'), slash = id.find('/');
  r.family = id.substr(0, dot);
  if (dot != std::string::npos && slash != std::string::npos) {
    r.impl = id.substr(dot + 1, slash - dot - 1);
    const auto us = r.impl.find('_');
    if (us != std::string::npos) r.impl[us] = '.';  // "cuda_flash" → "cuda.flash"
  }
  r.outcome = r.raw_outcome = o;
  r.message = std::move(message);
  return r;
}

// The index of a "BEGIN <index>" line: decimal digits only, nothing after them.
std::optional<size_t> parse_index(const std::string& text) {
  size_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || text.empty() || text[0] == '+' || text[0] == '-') return std::nullopt;
  return v;
}

std::string shorten(const std::string& s) { return s.size() > 120 ? s.substr(0, 120) + "..." : s; }

}  // namespace

Supervised supervise(const SupervisorOptions& opt, const std::vector<std::string>& ids,
                     const std::function<void(size_t index, const ResultRecord&, size_t done)>& on_result) {
  Supervised out;
  out.records.resize(ids.size());
  if (ids.empty()) return out;
  const CaseList list(opt.scratch_parent, ids);
  size_t done = 0;
  size_t next = 0;        // first case the next worker runs
  int failed_starts = 0;  // workers that died before starting any case
  auto record = [&](size_t i, ResultRecord r) {
    if (out.records[i]) return;
    out.records[i] = std::move(r);
    ++done;
    if (on_result) on_result(i, *out.records[i], done);
  };

  while (next < ids.size()) {
    if ((out.stopped_by = stop_requested()) != 0) break;
    Worker w = spawn(opt, list, next);
    std::string buf;
    long in_flight = -1;
    bool started_any = false;
    auto deadline = Clock::now() + std::chrono::duration<double>(kStartupSeconds);
    bool killed_for_timeout = false;
    std::optional<std::pair<size_t, ResultRecord>> held;  // --sanitize: the result, until the exit status is in
    std::string protocol_error;                           // set when the worker broke the protocol; it is killed
    // A protocol error is charged to the case in flight, else to the one the worker was due to start.
    auto broke_protocol = [&](std::string what) {
      protocol_error = "worker protocol error: " + std::move(what) + "; worker killed";
      if (in_flight < 0) in_flight = static_cast<long>(next);
      kill_worker(w);
    };
    // The lines of `buf` that are complete: BEGIN and RESULT checked against the plan.
    auto take_lines = [&] {
      size_t nl;
      while (protocol_error.empty() && (nl = buf.find('\n')) != std::string::npos) {
        const std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        if (line.rfind("BEGIN ", 0) == 0) {
          // Every index is checked against the plan: this worker runs ids[next..] in order.
          const auto i = parse_index(line.substr(6));
          if (in_flight >= 0) {
            broke_protocol(std::string("'") + shorten(line) + "' while case " + std::to_string(in_flight) +
                           " is in flight");
          } else if (!i || *i < next || *i >= ids.size() || out.records[*i]) {
            broke_protocol(std::string("'") + shorten(line) + "' is outside the plan (this worker runs cases " +
                           std::to_string(next) + " to " + std::to_string(ids.size() - 1) + ", in order)");
          } else {
            in_flight = static_cast<long>(*i);
            started_any = true;
            deadline = Clock::now() + std::chrono::duration<double>(opt.timeout_s);
          }
        } else if (line.rfind("RESULT ", 0) == 0) {
          if (in_flight < 0) {
            broke_protocol("a result line before any BEGIN");
            break;
          }
          ResultRecord r;
          try {
            r = parse_json_line(line.substr(7));
          } catch (const std::exception& e) {
            r = synthetic(ids[in_flight], Outcome::ERROR, std::string("unreadable result line: ") + e.what());
          }
          if (r.id != ids[in_flight]) {
            broke_protocol(std::string("a result for '") + shorten(r.id) + "' while '" + ids[in_flight] +
                           "' is in flight");
            break;
          }
          r.device = r.device < 0 && opt.suite.arch != "host" ? opt.device : r.device;
          if (w.log.empty()) record(static_cast<size_t>(in_flight), std::move(r));
          else held.emplace(static_cast<size_t>(in_flight), std::move(r));
          next = static_cast<size_t>(in_flight) + 1;
          in_flight = -1;
          deadline = Clock::now() + std::chrono::duration<double>(kStartupSeconds);
        } else {
          broke_protocol(std::string("unexpected line '") + shorten(line) + "'");
        }
      }
      if (protocol_error.empty() && buf.size() > kMaxLineBytes)
        broke_protocol("a line longer than " + std::to_string(kMaxLineBytes) + " bytes");
    };
    char chunk[65536];
    while (protocol_error.empty()) {
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      pollfd p[2] = {{w.fd, POLLIN, 0}, {stop_fd(), POLLIN, 0}};
      const int pr = poll(p, p[1].fd >= 0 ? 2 : 1, left <= 0 ? 0 : static_cast<int>(std::min(left * 1000.0, 2.0e9)));
      if (stop_requested()) {
        kill_worker(w);
        out.stopped_by = stop_requested();
        // Every result the worker sent before it died is a finished case: read the pipe to its
        // end (the killed worker's write end is closed; a second at most, should a process
        // outside its group still hold it) and keep them.
        const auto until = Clock::now() + std::chrono::seconds(1);
        for (;;) {
          const double ms = std::chrono::duration<double, std::milli>(until - Clock::now()).count();
          pollfd d{w.fd, POLLIN, 0};
          const int dr = poll(&d, 1, ms <= 0 ? 0 : static_cast<int>(ms));
          if (dr < 0 && errno == EINTR) continue;
          if (dr <= 0) break;
          const ssize_t n = read(w.fd, chunk, sizeof chunk);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          buf.append(chunk, static_cast<size_t>(n));
        }
        take_lines();
        break;
      }
      if (pr == 0) {  // time is up for the case in flight (or for startup)
        kill_worker(w);
        killed_for_timeout = true;
        break;
      }
      if (pr < 0) {
        if (errno == EINTR) continue;
        kill_worker(w);
        throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
      }
      const ssize_t n = read(w.fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the worker closed the pipe: finished or died
      buf.append(chunk, static_cast<size_t>(n));
      take_lines();
    }
    close(w.fd);
    int status = 0;
    while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    // --sanitize: the sanitizer's verdict on the one case this worker ran.
    const bool found = !w.log.empty() && WIFEXITED(status) && WEXITSTATUS(status) == kSanitizerErrorExit;
    const std::string report = w.log.empty() ? std::string() : first_sanitizer_report(take_log(w.log));
    if (held) {
      if (found) add_sanitizer_finding(held->second, opt.sanitize, report);
      record(held->first, std::move(held->second));
    }
    if (out.stopped_by) break;  // the case in flight is not run: the caller marks it
    if (in_flight >= 0) {
      const std::string id = ids[in_flight];
      const std::string seen = report.empty() ? "" : "; compute-sanitizer " + opt.sanitize.tool + ": " + report;
      if (!protocol_error.empty()) record(in_flight, synthetic(id, Outcome::ERROR, protocol_error));
      else if (killed_for_timeout)
        record(in_flight,
               synthetic(id, Outcome::TIMEOUT,
                         "no result within --timeout " + std::to_string(opt.timeout_s) + " s; worker killed" + seen));
      else
        record(in_flight, synthetic(id, Outcome::CRASH, exit_description(status) + " while running this case" + seen));
      next = static_cast<size_t>(in_flight) + 1;
      failed_starts = 0;
    } else if (!started_any && next < ids.size()) {
      // Died or hung before its first case: retry once, then give the rest up as ERROR
      // (a broken binary or environment, not a case's fault), still one record per case.
      if (++failed_starts >= 2) {
        const std::string why =
            (killed_for_timeout ? std::string("worker did not start a case in time") : exit_description(status));
        for (size_t i = next; i < ids.size(); ++i)
          record(i, synthetic(ids[i], Outcome::ERROR, "worker failed to start: " + why));
        next = ids.size();
      }
    } else {
      failed_starts = 0;
    }
    // Cases the worker skipped past without a result (should not happen) are resumed.
    while (next < ids.size() && out.records[next]) ++next;
  }
  return out;
}

std::string first_sanitizer_report(const std::string& log) {
  constexpr std::string_view kPrefix = "========= ";
  std::string out;
  int lines = 0;
  size_t pos = 0;
  while (pos < log.size() && lines < 3) {
    const size_t nl = std::min(log.find('\n', pos), log.size());
    std::string_view line(log.data() + pos, nl - pos);
    pos = nl + 1;
    if (line.rfind(kPrefix, 0) != 0) {
      if (lines > 0 && line.rfind("=========", 0) == 0) break;  // "=========": the report ends
      continue;
    }
    line.remove_prefix(kPrefix.size());
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line.empty() || line.rfind("COMPUTE-SANITIZER", 0) == 0) continue;
    if (line.rfind("ERROR SUMMARY", 0) == 0) break;
    out += (lines++ ? " | " : "") + std::string(line);
  }
  if (out.size() > 400) out = out.substr(0, 397) + "...";
  return out;
}

}  // namespace opcts
