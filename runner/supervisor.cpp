// Worker processes, their result pipe, crash and timeout handling.
#include "runner/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace opcts {

namespace {

using Clock = std::chrono::steady_clock;

// Startup (loading the catalogs, CUDA context) is allowed this long before the first case.
constexpr double kStartupSeconds = 120;

struct Worker {
  pid_t pid = -1;
  int fd = -1;
};

Worker spawn(const SupervisorOptions& opt, const std::string& ids_file, size_t start) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> args{opt.self_exe, "__worker",  "--arch",      opt.suite.arch,
                                "--cases-dir", opt.suite.cases_dir, "--ids", ids_file,
                                "--start",   std::to_string(start), "--device", std::to_string(opt.device),
                                "--result-fd", "3"};
  if (!opt.suite.manifest.empty()) {
    args.push_back("--manifest");
    args.push_back(opt.suite.manifest);
  }
  if (!opt.exec.artifacts_dir.empty()) args.insert(args.end(), {"--artifacts", opt.exec.artifacts_dir});
  if (!opt.exec.ref_cache_dir.empty()) args.insert(args.end(), {"--ref-cache", opt.exec.ref_cache_dir});
  if (opt.exec.bitwise) args.push_back("--bitwise");
  for (const auto& p : opt.suite.plugins) args.insert(args.end(), {"--plugin", p});
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: the write end of the pipe becomes fd 3 (dup2 clears O_CLOEXEC on the copy).
    dup2(fds[1], 3);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(opt.self_exe.c_str(), argv.data());
    std::fprintf(stderr, "opcts: cannot start worker %s: %s\n", opt.self_exe.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  return {pid, fds[0]};
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

}  // namespace

std::vector<ResultRecord> supervise(
    const SupervisorOptions& opt, const std::vector<std::string>& ids,
    const std::function<void(size_t index, const ResultRecord&, size_t done)>& on_result) {
  std::vector<ResultRecord> results(ids.size());
  std::vector<bool> have(ids.size(), false);
  if (ids.empty()) return results;
  const std::string ids_file = opt.work_dir + "/cases." + std::to_string(getpid()) + ".txt";
  {
    std::ofstream f(ids_file);
    for (const auto& id : ids) f << id << "\n";
    if (!f) throw std::runtime_error(ids_file + ": cannot write the case list");
  }
  size_t done = 0;
  size_t next = 0;          // first case the next worker runs
  int failed_starts = 0;    // workers that died before starting any case
  auto record = [&](size_t i, ResultRecord r) {
    if (have[i]) return;
    have[i] = true;
    results[i] = std::move(r);
    ++done;
    if (on_result) on_result(i, results[i], done);
  };

  while (next < ids.size()) {
    Worker w = spawn(opt, ids_file, next);
    std::string buf;
    long in_flight = -1;
    bool started_any = false;
    auto deadline = Clock::now() + std::chrono::duration<double>(kStartupSeconds);
    bool killed_for_timeout = false;
    while (true) {
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      pollfd p{w.fd, POLLIN, 0};
      const int pr = poll(&p, 1, left <= 0 ? 0 : static_cast<int>(std::min(left * 1000.0, 2.0e9)));
      if (pr == 0) {  // time is up for the case in flight (or for startup)
        kill(w.pid, SIGKILL);
        killed_for_timeout = true;
        break;
      }
      if (pr < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
      }
      char chunk[65536];
      const ssize_t n = read(w.fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the worker closed the pipe: finished or died
      buf.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        const std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        if (line.rfind("BEGIN ", 0) == 0) {
          in_flight = std::stol(line.substr(6));
          started_any = true;
          deadline = Clock::now() + std::chrono::duration<double>(opt.timeout_s);
        } else if (line.rfind("RESULT ", 0) == 0 && in_flight >= 0) {
          ResultRecord r;
          try {
            r = parse_json_line(line.substr(7));
          } catch (const std::exception& e) {
            r = synthetic(ids[in_flight], Outcome::ERROR, std::string("unreadable result line: ") + e.what());
          }
          r.device = r.device < 0 && opt.suite.arch != "host" ? opt.device : r.device;
          record(static_cast<size_t>(in_flight), std::move(r));
          next = static_cast<size_t>(in_flight) + 1;
          in_flight = -1;
          deadline = Clock::now() + std::chrono::duration<double>(kStartupSeconds);
        }
      }
    }
    close(w.fd);
    int status = 0;
    waitpid(w.pid, &status, 0);
    if (in_flight >= 0) {
      const std::string id = ids[in_flight];
      if (killed_for_timeout)
        record(in_flight, synthetic(id, Outcome::TIMEOUT, "no result within --timeout " + std::to_string(opt.timeout_s) + " s; worker killed"));
      else
        record(in_flight, synthetic(id, Outcome::CRASH, exit_description(status) + " while running this case"));
      next = static_cast<size_t>(in_flight) + 1;
      failed_starts = 0;
    } else if (!started_any && next < ids.size()) {
      // Died or hung before its first case: retry once, then give the rest up as ERROR
      // (a broken binary or environment, not a case's fault), still one record per case.
      if (++failed_starts >= 2) {
        const std::string why = (killed_for_timeout ? std::string("worker did not start a case in time") : exit_description(status));
        for (size_t i = next; i < ids.size(); ++i) record(i, synthetic(ids[i], Outcome::ERROR, "worker failed to start: " + why));
        next = ids.size();
      }
    } else {
      failed_starts = 0;
    }
    // Cases the worker skipped past without a result (should not happen) are resumed.
    while (next < ids.size() && have[next]) ++next;
  }
  unlink(ids_file.c_str());
  return results;
}

}  // namespace opcts
