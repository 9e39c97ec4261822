// A run stopped by SIGTERM/SIGINT or killed by SIGKILL keeps what it finished, leaves no worker
// behind and no report that passes, and `--resume` completes it to the outcomes of a whole run.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "core/result.hpp"
#include "reports/junit.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::sh;
using testutil::Shell;

const std::string& kA = testutil::kTinyA;
const std::string& kB = testutil::kTinyB;
const std::string& kC = testutil::kTinyC;

std::map<std::string, Outcome> outcomes_of(const std::vector<ResultRecord>& records) {
  std::map<std::string, Outcome> m;
  for (const auto& r : records) m[r.id] = r.outcome;
  return m;
}

// The processes whose environment holds OPCTS_TEST_TAG=<tag>: the run and its workers.
std::vector<pid_t> tagged(const std::string& tag) {
  const std::string needle = "OPCTS_TEST_TAG=" + tag + std::string(1, '\0');
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    const std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if ((env + std::string(1, '\0')).find(needle) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

class StopResume : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testutil::temp_dir();
    tag_ = std::to_string(getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::ofstream(dir_ + "/mine.yaml") << testutil::kTinyCatalog;
  }
  // The run's command line, writing its reports in `out`.
  std::string run_args(const std::string& out) const {
    return std::string(OPCTS_BINARY) + " run --arch host --tier smoke --no-ref-cache --catalog " + dir_ +
           "/mine.yaml --filter " + testutil::kTinyFilter + " --junit " + out + "/j.xml --results " + out +
           "/r.jsonl --summary " + out + "/s.md";
  }
  std::string gate_cmd(const std::string& report) const {
    return std::string(OPCTS_BINARY) + " gate --arch host --tier smoke --catalog " + dir_ + "/mine.yaml --filter " +
           testutil::kTinyFilter + " " + report;
  }
  // Starts the run in the background with the third case hanging, and waits until the first two
  // are in the results file: the run is mid-way, its worker busy with the third case.
  pid_t start_and_wait_for_two() {
    const std::string cmd = "exec env OPCTS_TEST_TAG=" + tag_ + " OPCTS_FAULT_HANG='*sq5_sk7*' " + run_args(dir_) +
                            " --timeout 600 >" + dir_ + "/log.txt 2>&1";
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      // The run has planned (its header is printed after it cleared the earlier reports).
      std::ifstream log(dir_ + "/log.txt");
      if (std::string((std::istreambuf_iterator<char>(log)), {}).find("opcts: arch host") == std::string::npos) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      std::ifstream in(dir_ + "/r.jsonl");
      int lines = 0;
      for (std::string l; std::getline(in, l);) lines += !l.empty() && l.rfind(kHeaderLinePrefix, 0) != 0;
      if (lines >= 2) return pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the run did not finish two cases in time";
    return pid;
  }
  // Waits (up to 10 s) until no process of this test's run is left.
  void expect_no_survivor() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!tagged(tag_).empty() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(tagged(tag_).empty()) << "a worker outlived its supervisor";
  }
  // Resumes the run without the hang; it must end as an uninterrupted run does. The finished
  // cases do not run again: a crash planted in them would show.
  void resume_matches_a_whole_run() {
    const Shell resumed = sh("OPCTS_FAULT_CRASH='*sq3_sk5*' " + run_args(dir_) + " --resume " + dir_ + "/r.jsonl");
    EXPECT_EQ(resumed.status, 0) << resumed.output;
    const std::string whole = dir_ + "/whole";
    fs::create_directories(whole);
    const Shell ref = sh(run_args(whole));
    ASSERT_EQ(ref.status, 0) << ref.output;
    const auto want = outcomes_of(read_results_file(whole + "/r.jsonl"));
    EXPECT_EQ(outcomes_of(read_results_file(dir_ + "/r.jsonl")), want);
    EXPECT_EQ(outcomes_of(read_junit(dir_ + "/j.xml")), want);
    EXPECT_EQ(sh(gate_cmd(dir_ + "/j.xml")).status, 0);
  }
  std::string dir_, tag_;
};

class StopBySignal : public StopResume, public ::testing::WithParamInterface<int> {};

TEST_P(StopBySignal, WritesWhatFinishedMarksTheRestMissingAndResumes) {
  const int sig = GetParam();
  const pid_t pid = start_and_wait_for_two();
  ASSERT_EQ(kill(pid, sig), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::ifstream log(dir_ + "/log.txt");
  const std::string out((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << out;
  expect_no_survivor();
  const std::map<std::string, Outcome> want{{kA, Outcome::PASS}, {kB, Outcome::PASS}, {kC, Outcome::MISSING}};
  EXPECT_EQ(outcomes_of(read_results_file(dir_ + "/r.jsonl")), want);
  EXPECT_EQ(outcomes_of(read_junit(dir_ + "/j.xml")), want);
  std::ifstream summary(dir_ + "/s.md");
  EXPECT_NE(std::string((std::istreambuf_iterator<char>(summary)), std::istreambuf_iterator<char>()).find("MISSING"),
            std::string::npos);
  for (const std::string report : {"/j.xml", "/r.jsonl"}) {
    const Shell g = sh(gate_cmd(dir_ + report));
    EXPECT_EQ(g.status, 1) << g.output;
    EXPECT_NE(g.output.find("MISSING " + kC), std::string::npos) << g.output;
  }
  resume_matches_a_whole_run();
}

// SIGHUP (a closed terminal), SIGQUIT (Ctrl-\\) and SIGPIPE (a reader of the output gone) once
// ended the run by their default action and left the JUnit all MISSING (issue 33).
INSTANTIATE_TEST_SUITE_P(TermIntHupQuitPipe, StopBySignal,
                         ::testing::Values(SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE));

TEST_F(StopResume, SigkillKeepsTheStreamedResultsAndNoReportPasses) {
  // An earlier, complete run's reports at the same paths must not survive to pass the gate.
  ASSERT_EQ(sh(run_args(dir_)).status, 0);
  ASSERT_EQ(sh(gate_cmd(dir_ + "/j.xml")).status, 0);
  const pid_t pid = start_and_wait_for_two();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  expect_no_survivor();  // PR_SET_PDEATHSIG: the hung worker dies with its supervisor
  EXPECT_EQ(outcomes_of(read_results_file(dir_ + "/r.jsonl")),
            (std::map<std::string, Outcome>{{kA, Outcome::PASS}, {kB, Outcome::PASS}}));
  // The JUnit is the one the run started with: nothing finished, every case MISSING.
  for (const auto& [id, o] : outcomes_of(read_junit(dir_ + "/j.xml"))) EXPECT_EQ(o, Outcome::MISSING) << id;
  for (const std::string report : {"/j.xml", "/r.jsonl"}) {
    const Shell g = sh(gate_cmd(dir_ + report));
    EXPECT_EQ(g.status, 1) << g.output;
    EXPECT_NE(g.output.find("MISSING " + kC), std::string::npos) << g.output;
  }
  resume_matches_a_whole_run();
}

TEST_F(StopResume, ResumeRefusesAnotherSelection) {
  std::ofstream(dir_ + "/other.jsonl")
      << "{\"id\":\"sdpa.host_flash/fp32_b1_hq2_hkv1_sq9_sk9_d8_nomask\",\"arch\":\"host\","
         "\"outcome\":\"PASS\",\"raw_outcome\":\"PASS\"}\n";
  const Shell r = sh(run_args(dir_) + " --resume " + dir_ + "/other.jsonl");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("not in this selection"), std::string::npos) << r.output;
}

// Two runs given the same reports once both ran and one's records replaced the other's (48 of
// 89 lost, both exit 0): the second is refused while the first holds them.
TEST_F(StopResume, ASecondRunOnTheSameReportsIsRefused) {
  const pid_t pid = start_and_wait_for_two();
  const Shell second = sh(run_args(dir_));
  EXPECT_EQ(second.status, 2) << second.output;
  EXPECT_NE(second.output.find("is being written by another opcts run (pid " + std::to_string(pid)), std::string::npos)
      << second.output;
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  expect_no_survivor();
  // The first run's records are its own: A and B finished, C MISSING.
  EXPECT_EQ(outcomes_of(read_results_file(dir_ + "/r.jsonl")),
            (std::map<std::string, Outcome>{{kA, Outcome::PASS}, {kB, Outcome::PASS}, {kC, Outcome::MISSING}}));
  // Once it is gone, the paths are free again.
  EXPECT_EQ(sh(run_args(dir_)).status, 0);
}

// A stop once dropped the results the worker had already sent but the supervisor had not read
// (26 finished cases became MISSING). Here the supervisor is frozen (SIGSTOP) while its worker
// finishes every case into the pipe, then stopped: every case finished is in the reports.
TEST_F(StopResume, AStopKeepsEveryResultAlreadySent) {
  testutil::write(dir_, "eight.yaml", testutil::kEightCatalog);
  const std::string trace = dir_ + "/trace.txt";
  const std::string cmd = "exec env OPCTS_TEST_TAG=" + tag_ + " OPCTS_TRACE_INPUTS=" + trace + " " + OPCTS_BINARY +
                          " run --arch host --tier smoke --no-ref-cache --catalog " + dir_ + "/eight.yaml --filter " +
                          testutil::kTinyFilter + " --results " + dir_ + "/r.jsonl --junit " + dir_ + "/j.xml >" +
                          dir_ + "/log.txt 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto problems_made = [&] {
    std::ifstream in(trace);
    int n = 0;
    for (std::string l; std::getline(in, l);) n += !l.empty();
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (problems_made() < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(kill(pid, SIGSTOP), 0);  // the worker goes on; its results wait in the pipe
  while (problems_made() < 8 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(problems_made(), 8);
  // The last case's result written: the worker has exited (a zombie the frozen supervisor has
  // not reaped), so everything it sent is in the pipe, however slow the machine.
  const auto workers_done = [&] {
    std::ifstream kids("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    for (std::string kid; kids >> kid;) {
      std::ifstream stat("/proc/" + kid + "/stat");
      std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      const size_t close = text.rfind(')');  // the state follows the parenthesised command name
      if (close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z') return false;
    }
    return true;
  };
  while (!workers_done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(workers_done()) << "the worker never finished its cases";
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  expect_no_survivor();
  const auto junit = outcomes_of(read_junit(dir_ + "/j.xml"));
  EXPECT_EQ(junit.size(), 8u);
  for (const auto& [id, o] : junit) EXPECT_EQ(o, Outcome::PASS) << id << ": finished before the stop, yet lost";
  EXPECT_EQ(outcomes_of(read_results_file(dir_ + "/r.jsonl")), junit);
}

// A stop early in a run (here as soon as it holds its report paths, then later and later while
// it loads) once left the previous run's passing reports (before ~0.2 s) or an empty "0 cases —
// no gate failures" one (until ~0.7 s). Now the run installs its handlers first and replaces
// the reports at once: whatever the moment, it exits 128 + 15 and no report passes the gate.
// The stopped runs hang in their first case (OPCTS_FAULT_HANG), so that the later stops still
// find a run in progress however fast it loads and runs its cases.
TEST_F(StopResume, AStopWhileLoadingLeavesNoReportThatPasses) {
  ASSERT_EQ(sh(run_args(dir_)).status, 0);
  const std::string gate_dir = std::string(OPCTS_BINARY) + " gate " + dir_ + "/";
  ASSERT_EQ(sh(gate_dir + "j.xml").status, 0) << "the earlier run's reports pass";
  for (const int delay_ms : {0, 10, 30, 60, 100, 200, 400}) {
    SCOPED_TRACE(std::to_string(delay_ms) + " ms after the run locked its reports");
    fs::remove(dir_ + "/r.jsonl.lock");
    const std::string cmd = "OPCTS_FAULT_HANG='*' exec " + run_args(dir_) + " >" + dir_ + "/log.txt 2>&1";
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!fs::exists(dir_ + "/r.jsonl.lock") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    ASSERT_TRUE(fs::exists(dir_ + "/r.jsonl.lock")) << "the run never locked its reports";
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "ended by the signal's default action";
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
    for (const char* report : {"j.xml", "r.jsonl"}) {
      const Shell g = sh(gate_dir + report);
      EXPECT_EQ(g.status, 1) << report << "\n" << g.output;
    }
    std::ifstream summary(dir_ + "/s.md");
    const std::string md((std::istreambuf_iterator<char>(summary)), std::istreambuf_iterator<char>());
    EXPECT_EQ(md.find("no gate failures"), std::string::npos) << md;
  }
}

// A results disk that filled mid-run lost finished records and left the JUnit and summary on a
// healthy disk all MISSING. Now the run stops at the first record it cannot keep and writes
// every finished one to the reports it still can (OPCTS_FAULT_DISK_FULL: the results file's
// disk holds its header and one record).
TEST_F(StopResume, AFullResultsDiskStopsWithEveryFinishedRecordInTheJunit) {
  const std::string whole = dir_ + "/whole";
  fs::create_directories(whole);
  ASSERT_EQ(sh(run_args(whole)).status, 0);
  std::ifstream in(whole + "/r.jsonl");
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  ASSERT_EQ(header.rfind(kHeaderLinePrefix, 0), 0u);
  const size_t room = header.size() + 1 + first.size() + 1 + first.size() / 2;
  const Shell r = sh("OPCTS_FAULT_DISK_FULL=" + dir_ + "/r.jsonl:" + std::to_string(room) + " " + run_args(dir_));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cannot append a result"), std::string::npos) << r.output;
  const auto junit = outcomes_of(read_junit(dir_ + "/j.xml"));
  EXPECT_EQ(junit.at(kA), Outcome::PASS) << r.output;
  EXPECT_EQ(junit.at(kB), Outcome::PASS) << "finished, though its line did not fit: " << r.output;
  std::ifstream summary(dir_ + "/s.md");
  const std::string md((std::istreambuf_iterator<char>(summary)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("PASS"), std::string::npos) << md;
}

TEST_F(StopResume, ResumeRefusesTwoDifferentRecordsOfOneCase) {
  const std::string rec = "{\"arch\":\"host\",\"id\":\"" + kA + "\",\"outcome\":\"";
  std::ofstream(dir_ + "/two.jsonl") << rec << "PASS\",\"raw_outcome\":\"PASS\"}\n"
                                     << rec << "FAIL\",\"raw_outcome\":\"FAIL\",\"message\":\"mismatch\"}\n";
  const Shell r = sh(run_args(dir_) + " --resume " + dir_ + "/two.jsonl");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("two different records of case '" + kA + "' (PASS and FAIL)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace opcts
