// Worker: runs its share of the plan's cases in order, each writing its result line.
#include "runner/worker.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include <fstream>

#include "core/errors.hpp"
#include "core/glob.hpp"
#include "runner/catalog.hpp"
#include "runner/execute.hpp"

namespace opcts {

namespace {

void write_line(int fd, const std::string& line) {
  std::string s = line + "\n";
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n <= 0) _exit(4);  // the supervisor is gone: nothing left to report to
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Fault injection for the runner's own tests (tests/test_supervisor.cpp), like deqp-runner's
// fake binaries: a case whose id matches $OPCTS_FAULT_CRASH dies by SIGSEGV, one matching
// $OPCTS_FAULT_HANG never returns. With $OPCTS_FAULT_ONCE naming a file, the crash happens
// only while that file does not exist (it is created first): a flake. One matching
// $OPCTS_FAULT_PROTOCOL announces an index outside the plan. Unset in real runs.
bool fault_matches(const char* var, const std::string& id) {
  const char* g = std::getenv(var);
  return g && *g && glob_match(g, id);
}

void inject_faults(const std::string& id) {
  if (fault_matches("OPCTS_FAULT_CRASH", id)) {
    const char* once = std::getenv("OPCTS_FAULT_ONCE");
    if (!once || !*once) raise(SIGSEGV);
    if (std::FILE* f = std::fopen(once, "wx")) {  // exclusive create: only the first run crashes
      std::fclose(f);
      raise(SIGSEGV);
    }
  }
  if (fault_matches("OPCTS_FAULT_HANG", id))
    for (;;) pause();
}

struct WorkerState {
  const Suite* suite;
  ReferenceCache cache;
  int device;
  int fd;
  ExecOptions exec;
};

// One case: BEGIN, then its RESULT line on the result fd (the supervisor's protocol,
// runner/supervisor.hpp). The record is the case's whole verdict: the worker's exit code only
// says whether it finished its list.
void run_case(WorkerState& st, size_t index, const std::string& id) {
  const bool bad_index = fault_matches("OPCTS_FAULT_PROTOCOL", id);
  write_line(st.fd, "BEGIN " + (bad_index ? std::string("18446744073709551615") : std::to_string(index)));
  inject_faults(id);
  ResultRecord r;
  try {
    const Case c = case_from_id(st.suite->registry(), id);
    r = execute_case(*st.suite, c, st.device, st.cache, st.exec);
  } catch (const DeviceLost& e) {
    r.id = id;
    r.arch = st.suite->arch().name;
    r.device = st.device;
    r.outcome = r.raw_outcome = Outcome::CRASH;
    r.message = std::string("device context lost: ") + e.what();
    write_line(st.fd, "RESULT " + to_json_line(r));
    _exit(3);  // a sticky CUDA error poisons this process; a fresh worker continues
  } catch (const std::exception& e) {
    r.id = id;
    r.arch = st.suite->arch().name;
    r.outcome = r.raw_outcome = Outcome::ERROR;
    r.message = e.what();
  }
  write_line(st.fd, "RESULT " + to_json_line(r));
}

}  // namespace

int worker_main(const Registry& reg, const WorkerOptions& opt) {
  Suite suite(reg, opt.suite);
  std::ifstream in(opt.ids_file);
  if (!in) {
    std::fprintf(stderr, "opcts worker: cannot read %s\n", opt.ids_file.c_str());
    return 2;
  }
  std::vector<std::string> ids;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) ids.push_back(line);

  WorkerState state{&suite, ReferenceCache(opt.exec.ref_cache_dir, opt.exec.ref_cache_max_bytes), opt.device,
                    opt.result_fd, opt.exec};
  // In the planned order: consecutive impls of one problem share the ReferenceCache's entry.
  const size_t end = opt.count ? std::min(ids.size(), opt.start + opt.count) : ids.size();
  for (size_t i = opt.start; i < end; ++i) run_case(state, i, ids[i]);
  return 0;
}

}  // namespace opcts
