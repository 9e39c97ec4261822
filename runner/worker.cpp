// Worker: GoogleTest tests registered at run time, one per case, each writing its result line.
#include "runner/worker.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>
#include <fstream>

#include "core/errors.hpp"
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

class CaseTest : public testing::Test {
 public:
  CaseTest(WorkerState* st, size_t index, std::string id) : st_(st), index_(index), id_(std::move(id)) {}

  void TestBody() override {
    const bool bad_index = fault_matches("OPCTS_FAULT_PROTOCOL", id_);
    write_line(st_->fd, "BEGIN " + (bad_index ? std::string("18446744073709551615") : std::to_string(index_)));
    inject_faults(id_);
    ResultRecord r;
    try {
      const Case c = case_from_id(st_->suite->registry(), id_);
      r = execute_case(*st_->suite, c, st_->device, st_->cache, st_->exec);
    } catch (const DeviceLost& e) {
      r.id = id_;
      r.arch = st_->suite->arch().name;
      r.device = st_->device;
      r.outcome = r.raw_outcome = Outcome::CRASH;
      r.message = std::string("device context lost: ") + e.what();
      write_line(st_->fd, "RESULT " + to_json_line(r));
      _exit(3);  // a sticky CUDA error poisons this process; a fresh worker continues
    } catch (const std::exception& e) {
      r.id = id_;
      r.arch = st_->suite->arch().name;
      r.outcome = r.raw_outcome = Outcome::ERROR;
      r.message = e.what();
    }
    write_line(st_->fd, "RESULT " + to_json_line(r));
    if (r.raw_outcome == Outcome::FAIL || r.raw_outcome == Outcome::ERROR || r.raw_outcome == Outcome::MISTRUSTED)
      ADD_FAILURE() << id_ << ": " << r.message;
  }

 private:
  WorkerState* st_;
  size_t index_;
  std::string id_;
};

}  // namespace

int worker_main(const Registry& reg, const WorkerOptions& opt, const char* argv0) {
  Suite suite(reg, opt.suite);
  std::ifstream in(opt.ids_file);
  if (!in) {
    std::fprintf(stderr, "opcts worker: cannot read %s\n", opt.ids_file.c_str());
    return 2;
  }
  std::vector<std::string> ids;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) ids.push_back(line);

  static WorkerState state{&suite, ReferenceCache(opt.exec.ref_cache_dir, opt.exec.ref_cache_max_bytes), opt.device,
                           opt.result_fd, opt.exec};
  int argc = 1;
  char* argv[] = {const_cast<char*>(argv0), nullptr};
  testing::InitGoogleTest(&argc, argv);
  // The supervisor prints progress; the worker's own console output would only repeat it.
  delete testing::UnitTest::GetInstance()->listeners().Release(
      testing::UnitTest::GetInstance()->listeners().default_result_printer());
  for (size_t i = opt.start; i < ids.size(); ++i) {
    const std::string& id = ids[i];
    // One test suite per case: GoogleTest runs a suite's tests together, so suites named by
    // impl would run every case of one impl before the next impl's and defeat the
    // ReferenceCache, which keeps one problem's inputs and reference for its impls in a row.
    const std::string suite_name = "case" + std::to_string(i);
    const std::string& test_name = id;
    testing::RegisterTest(suite_name.c_str(), test_name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                          [i, id]() -> testing::Test* { return new CaseTest(&state, i, id); });
  }
  // Outcomes travel on the result fd; the exit code only says whether the worker finished.
  const int rc = RUN_ALL_TESTS();
  (void)rc;
  return 0;
}

}  // namespace opcts
