// Probe processes for plugins: loading and supports() outside the supervisor.
#include "app/plugin_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "app/builtins.hpp"
#include "app/plugins.hpp"
#include "core/abi_impl.hpp"
#include "core/digest.hpp"
#include "runner/device_probe.hpp"
#include "runner/spawn.hpp"
#include "runner/suite.hpp"

namespace opcts {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The fds a probe finds its case list on and writes its answers to.
constexpr int kIdsFd = 3;
constexpr int kAnswerFd = 4;
// Loading a plugin (its library's constructors, a CUDA context) may take this long.
constexpr double kLoadSeconds = 120;

std::string exit_text(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  return "an unknown end";
}

// Runs `args` (args[0] the opcts binary) with `ids_fd` (or nothing) at fd 3 and a pipe at fd
// 4, calls `on_line` with each line the child writes there, and returns how the child ended
// with `timed_out` set when it was killed for `timeout_s` without a line (reset by each line).
int run_probe(const std::vector<std::string>& args, int ids_fd, double timeout_s,
              const std::function<void(const std::string&)>& on_line, bool& timed_out) {
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const SpawnedChild child = spawn_with_pipe(
      argv, {.pipe_fd = kAnswerFd, .extra_fd = ids_fd, .extra_target = kIdsFd, .own_group = false, .exec_error = ""});
  const pid_t pid = child.pid;
  const int read_fd = child.read_fd;
  timed_out = false;
  std::string buf;
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  char chunk[65536];
  for (;;) {
    const double left = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
    pollfd p{read_fd, POLLIN, 0};
    const int pr = poll(&p, 1, left <= 0 ? 0 : static_cast<int>(std::min(left, 2.0e9)));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      kill(pid, SIGKILL);
      timed_out = true;
      break;
    }
    const ssize_t n = read(read_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
      const std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      on_line(line);
      deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    }
  }
  close(read_fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

void write_line(int fd, const std::string& line) {
  const std::string s = line + "\n";
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(4);  // the supervisor is gone
    off += static_cast<size_t>(n);
  }
}

// A file no name reaches, holding `lines`: handed to a probe as fd kIdsFd.
int unnamed_file(const std::vector<std::string>& lines) {
  FILE* f = std::tmpfile();
  if (!f) throw std::runtime_error(std::string("tmpfile: ") + std::strerror(errno));
  for (const auto& l : lines) std::fprintf(f, "%s\n", l.c_str());
  std::fflush(f);
  const int fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 10);
  std::fclose(f);
  if (fd < 0) throw std::runtime_error(std::string("fcntl: ") + std::strerror(errno));
  lseek(fd, 0, SEEK_SET);
  return fd;
}

}  // namespace

PluginStatus probe_plugin(const std::string& exe, const std::string& path, bool optional) {
  PluginStatus st;
  st.path = path;
  st.optional = optional;
  st.digest = file_digest(path);
  bool answered = false, timed_out = false;
  const int status = run_probe(
      {exe, "__plugin-probe", "--plugin", path, "--answer-fd", std::to_string(kAnswerFd)}, -1, kLoadSeconds,
      [&](const std::string& line) {
        // A line that is not JSON is no answer: passed over.
        const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) return;
        answered = true;
        if (j.contains("error")) {
          st.error = j["error"].get<std::string>();
          return;
        }
        for (const auto& i : j.at("impls"))
          st.impls.push_back({i.at("family"), i.at("name"), i.at("backend"),
                              i.at("caps").get<std::vector<std::string>>(), i.at("planted"), i.value("abi_minor", 0u),
                              i.value("lists_tactics", false), exe, path});
      },
      timed_out);
  if (timed_out)
    st.error = "plugin " + path + ": loading it did not finish within " +
               std::to_string(static_cast<int>(kLoadSeconds)) +
               " s (its entry point or a constructor hangs); probe killed";
  else if (!answered || (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3)))
    st.error = "plugin " + path + ": loading it ended the probe process with " + exit_text(status) +
               " (its entry point or a constructor crashed)";
  if (!st.error.empty()) st.impls.clear();
  return st;
}

int plugin_probe_main(const std::string& path, int answer_fd) {
  Registry reg;
  register_builtins(reg);
  const auto names = [&] {
    std::vector<const Impl*> all;
    for (const Family* f : reg.families())
      for (const Impl* i : reg.impls_of(f->name())) all.push_back(i);
    return all;
  };
  std::set<const Impl*> before;
  for (const Impl* i : names()) before.insert(i);
  if (const std::string err = load_plugin(reg, path); !err.empty()) {
    write_line(answer_fd, json{{"error", err}}.dump());
    return 3;
  }
  json impls = json::array();
  for (const Impl* added : names()) {
    if (before.count(added)) continue;
    const Impl& impl = *added;
    const auto* abi = dynamic_cast<const AbiImpl*>(added);  // every plugin impl is one
    impls.push_back({{"family", std::string(impl.family())},
                     {"name", std::string(impl.name())},
                     {"backend", std::string(impl.backend())},
                     {"caps", impl.required_caps()},
                     {"planted", impl.planted()},
                     {"abi_minor", abi ? abi->abi_minor() : 0u},
                     {"lists_tactics", abi && abi->lists_tactics()}});
  }
  write_line(answer_fd, json{{"impls", impls}}.dump());
  return 0;
}

Support ProbedImpl::supports(const Problem& p, const ArchInfo&) const {
  if (const auto e = tactics_errors_.find(family_def().problem_id(p)); e != tactics_errors_.end())
    return Support::failed(e->second);
  const auto it = answers_.find(family_def().problem_id(p));
  if (it == answers_.end())
    return Support::no(d_.name + ": supports() not asked (this command does not probe plugins)");
  return it->second;
}

std::string ProbedImpl::abi_gap(const Problem& p) const {
  return abi_gap_reason(family_def(), p, d_.name, d_.abi_minor);
}

std::vector<std::string> ProbedImpl::tactics(const Problem& p) const {
  if (!d_.lists_tactics) return {};
  const std::string id = family_def().problem_id(p);
  if (!tactics_.count(id) && !tactics_errors_.count(id)) plan_tactics({&p});
  const auto it = tactics_.find(id);
  return it == tactics_.end() ? std::vector<std::string>{} : it->second;
}

void ProbedImpl::plan_tactics(const std::vector<const Problem*>& problems) const {
  if (!d_.lists_tactics || problems.empty()) return;
  std::vector<std::string> ids, problem_ids;
  for (const Problem* p : problems) {
    problem_ids.push_back(family_def().problem_id(*p));
    ids.push_back(case_id_from_problem_id(family_def(), *this, problem_ids.back()));
  }
  const int ids_fd = unnamed_file(ids);
  std::vector<bool> done(ids.size(), false);
  bool timed_out = false;
  const int status = run_probe(
      {d_.exe, "__plugin-probe", "--plugin", d_.plugin, "--tactics", "--ids", "/proc/self/fd/" + std::to_string(kIdsFd),
       "--answer-fd", std::to_string(kAnswerFd)},
      ids_fd, kLoadSeconds,
      [&](const std::string& line) {
        const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded() || !j.contains("i")) return;
        const size_t i = j["i"].get<size_t>();
        if (i >= ids.size()) return;
        if (j.contains("error")) tactics_errors_[problem_ids[i]] = j["error"].get<std::string>();
        else tactics_[problem_ids[i]] = j.at("tactics").get<std::vector<std::string>>();
        done[i] = true;
      },
      timed_out);
  close(ids_fd);
  const std::string how = timed_out ? "did not answer within " + std::to_string(static_cast<int>(kLoadSeconds)) + " s"
                                    : "ended with " + exit_text(status);
  for (size_t i = 0; i < ids.size(); ++i)
    if (!done[i]) tactics_errors_[problem_ids[i]] = d_.name + ": list_tactics not answered: the tactics probe " + how;
}

TensorMap ProbedImpl::run(const Problem&, const TensorMap&, const RunContext&) const {
  throw std::logic_error(d_.name + " is a probed plugin impl: its cases run in a worker, which loads the plugin");
}

void ask_supports(const SupportsProbe& probe, const std::vector<Case>& cases) {
  std::vector<const Case*> pending;
  for (const Case& c : cases)
    if (dynamic_cast<const ProbedImpl*>(c.impl)) pending.push_back(&c);
  std::set<const Impl*> crashed;  // impls whose supports() ended a probe
  while (!pending.empty()) {
    std::vector<std::string> ids;
    for (const Case* c : pending) ids.push_back(c->id);
    const int ids_fd = unnamed_file(ids);
    std::vector<std::string> args{probe.exe,     "__plugin-probe",
                                  "--arch",      probe.arch,
                                  "--cases-dir", probe.cases_dir,
                                  "--ids",       "/proc/self/fd/" + std::to_string(kIdsFd),
                                  "--device",    std::to_string(probe.device),
                                  "--answer-fd", std::to_string(kAnswerFd)};
    for (const auto& p : probe.plugins) args.insert(args.end(), {"--plugin", p});
    long asking = -1;
    size_t answered_upto = 0;  // every index below it has its answer
    bool timed_out = false;
    std::vector<bool> done(pending.size(), false);
    const int status = run_probe(
        args, ids_fd, probe.timeout_s,
        [&](const std::string& line) {
          // A line that is not JSON is no answer: passed over.
          const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
          if (j.is_discarded()) return;
          if (j.contains("ask")) {
            asking = j["ask"].get<long>();
            return;
          }
          const size_t i = j.at("i").get<size_t>();
          if (i >= pending.size()) return;
          const Case& c = *pending[i];
          const auto* impl = static_cast<const ProbedImpl*>(c.impl);
          Support s{j.at("ok").get<bool>(), j.at("reason").get<std::string>(), j.value("error", false)};
          impl->answer(c.family->problem_id(*c.problem), std::move(s));
          done[i] = true;
          asking = -1;
          answered_upto = i + 1;
        },
        timed_out);
    close(ids_fd);
    std::vector<const Case*> next;
    if (asking >= 0 && static_cast<size_t>(asking) < pending.size()) {
      // The probe died (or hung) inside this case's supports(): one ERROR naming it, and the
      // impl's other cases are not asked again.
      const Case& c = *pending[asking];
      const auto* impl = static_cast<const ProbedImpl*>(c.impl);
      const std::string how =
          timed_out ? "did not return within " + std::to_string(static_cast<int>(probe.timeout_s)) + " s (probe killed)"
                    : "ended the probe process with " + exit_text(status);
      impl->answer(c.family->problem_id(*c.problem),
                   Support::failed(std::string(impl->name()) + ": supports() " + how + " on this problem"));
      done[asking] = true;
      crashed.insert(impl);
      std::fprintf(stderr, "opcts: error: plugin impl %s: supports() %s on %s; its other cases are not asked\n",
                   std::string(impl->name()).c_str(), how.c_str(), c.id.c_str());
    } else if (answered_upto < pending.size() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      // Died before its first question (loading the plugins, reading the cases): nothing to
      // blame on one impl, and a retry would die alike.
      const std::string why = "the supports probe ended with " + exit_text(status) + " before it asked";
      for (size_t i = 0; i < pending.size(); ++i)
        if (!done[i]) {
          const Case& c = *pending[i];
          static_cast<const ProbedImpl*>(c.impl)->answer(c.family->problem_id(*c.problem),
                                                         Support::failed(std::string(c.impl->name()) + ": " + why));
        }
      return;
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      if (done[i]) continue;
      const Case& c = *pending[i];
      if (crashed.count(c.impl)) {
        static_cast<const ProbedImpl*>(c.impl)->answer(
            c.family->problem_id(*c.problem),
            Support::no(std::string(c.impl->name()) +
                        ": not asked: its supports() crashed on another problem (see its ERROR)"));
        continue;
      }
      next.push_back(&c);
    }
    if (next.size() == pending.size()) break;  // no progress: never loop
    pending = std::move(next);
  }
}

int tactics_probe_main(const Registry& loaded, const std::string& ids_file, int answer_fd) {
  std::ifstream in(ids_file);
  size_t i = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json answer{{"i", i++}};
    try {
      const CaseIdParts parts = split_case_id(line);
      const Family* f = loaded.family(parts.family);
      const Impl* impl = loaded.impl_by_id_token(parts.impl_token);
      if (!f || !impl) throw std::invalid_argument("no such family or impl");
      answer["tactics"] = tactics_of(*impl, *f->parse_id(parts.problem_id));
    } catch (const std::exception& e) {
      answer["error"] = line + ": " + e.what();
    }
    write_line(answer_fd, answer.dump());
  }
  return 0;
}

int supports_probe_main(const Registry& loaded, const std::string& arch, const std::string& cases_dir,
                        const std::string& ids_file, int answer_fd, int device) {
  SuiteOptions o{cases_dir, {}, arch, ""};
  o.load_catalogs = false;
  const Suite suite(loaded, o);
  if (suite.arch().backend == "cuda") use_cuda_device(device);  // supports() reads this GPU's free memory
  std::ifstream in(ids_file);
  std::vector<std::string> ids;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) ids.push_back(line);
  for (size_t i = 0; i < ids.size(); ++i) {
    write_line(answer_fd, json{{"ask", i}}.dump());
    Support s;
    try {
      const Case c = case_from_id(loaded, ids[i]);
      s = c.impl->supports(*c.problem, suite.arch());
    } catch (const std::exception& e) {
      s = Support::failed(ids[i] + ": " + e.what());
    }
    write_line(answer_fd, json{{"i", i}, {"ok", s.ok}, {"reason", s.reason}, {"error", s.error}}.dump());
  }
  return 0;
}

}  // namespace opcts
