// The runner end to end with the real opcts binary: crash and hang isolation, complete reports,
// manifest expectations, sharding that covers every case exactly once.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/builtins.hpp"
#include "core/result.hpp"
#include "reports/junit.hpp"
#include "runner/supervisor.hpp"
#include "tests/test_util.hpp"

#include <thread>

namespace opcts {
namespace {

namespace fs = std::filesystem;

using testutil::contains_all;
using testutil::sh;
using testutil::Shell;

// Each case's outcome, by id.
using Outcomes = std::map<std::string, Outcome>;

class Supervisor : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("opcts_sup_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A catalog of three tiny problems in a folder of its own (passed with --catalog);
    // --filter keeps the run to these cases.
    std::ofstream(dir_ / "mine.yaml") << testutil::kTinyCatalog;
  }
  std::string run_cmd(const std::string& extra, const std::string& env = "") {
    return env + " " + OPCTS_BINARY + " run --arch host --tier smoke --catalog " + (dir_ / "mine.yaml").string() +
           " --filter " + testutil::kTinyFilter + " --junit " + (dir_ / "j.xml").string() + " --results " +
           (dir_ / "r.jsonl").string() + " " + extra;
  }
  Outcomes outcomes() {
    Outcomes m;
    for (const auto& r : read_results_file((dir_ / "r.jsonl").string())) m[r.id] = r.outcome;
    return m;
  }
  fs::path dir_;
};

const std::string& kA = testutil::kTinyA;
const std::string& kB = testutil::kTinyB;
const std::string& kC = testutil::kTinyC;

TEST_F(Supervisor, AllPass) {
  const Shell r = sh(run_cmd(""));
  EXPECT_EQ(r.status, 0) << r.output;
  const auto o = outcomes();
  ASSERT_EQ(o.size(), 3u) << r.output;
  for (const auto& [id, out] : o) EXPECT_EQ(out, Outcome::PASS) << id;
  EXPECT_EQ(read_junit((dir_ / "j.xml").string()).size(), 3u);
}

// The impls of one problem run one after another in a worker, so its inputs and reference
// are made once (GoogleTest groups tests by suite; a suite per impl once broke this).
TEST_F(Supervisor, ImplsOfAProblemShareItsInputs) {
  std::ofstream(dir_ / "mm.yaml") << R"(family: scaled_mm
grids:
  - name: tiny
    tier: smoke
    axes:
      recipe: [tensorwise]
      m: [3, 5]
    fixed: {n: 16, k: 32}
)";
  const std::string trace = (dir_ / "inputs.txt").string();
  const Shell r = sh("OPCTS_TRACE_INPUTS=" + trace + " " + OPCTS_BINARY + " run --arch host --tier smoke --catalog " +
                     (dir_ / "mm.yaml").string() + " --filter 'scaled_mm.*_tn_m[35]_n16_k32_*' --include-planted" +
                     " --no-ref-cache --reruns 0 --results " + (dir_ / "r.jsonl").string());
  size_t host_impls = 0;
  for (const Impl* impl : builtin_registry().impls_of("scaled_mm")) host_impls += impl->backend() == "host";
  ASSERT_GE(host_impls, 4u);
  ASSERT_EQ(read_results_file((dir_ / "r.jsonl").string()).size(), 2 * host_impls) << r.output;  // 2 problems
  std::ifstream in(trace);
  std::vector<std::string> made;
  for (std::string line; std::getline(in, line);) made.push_back(line);
  EXPECT_EQ(made.size(), 2u) << "inputs made once per problem, not per case";
}

TEST_F(Supervisor, GateTakesThePlanFromTheReportsTier) {
  ASSERT_EQ(sh(run_cmd("")).status, 0);
  const std::string gate = std::string(OPCTS_BINARY) + " gate --arch host --catalog " + (dir_ / "mine.yaml").string() +
                           " --filter " + testutil::kTinyFilter + " ";
  // The run was at the smoke tier; without --tier the gate plans that tier, not the default.
  const Shell ok = sh(gate + (dir_ / "r.jsonl").string());
  EXPECT_EQ(ok.status, 0) << ok.output;
  // One case missing from the reports is MISSING (the header line, the run's selection, kept).
  std::ifstream in(dir_ / "r.jsonl");
  std::string header, first, line, rest;
  std::getline(in, header);
  std::getline(in, first);
  rest = header + "\n";
  while (std::getline(in, line)) rest += line + "\n";
  std::ofstream(dir_ / "partial.jsonl") << rest;
  const Shell missing = sh(gate + (dir_ / "partial.jsonl").string());
  EXPECT_EQ(missing.status, 1) << missing.output;
  EXPECT_NE(missing.output.find("MISSING"), std::string::npos) << missing.output;
}

TEST_F(Supervisor, CrashCostsOnlyTheCaseInFlight) {
  const Shell r = sh(run_cmd("", "OPCTS_FAULT_CRASH='*sq4_sk6*'"));
  EXPECT_EQ(r.status, 1) << r.output;
  // kC passes: a new worker resumed after the crash.
  EXPECT_EQ(outcomes(), (Outcomes{{kA, Outcome::PASS}, {kB, Outcome::CRASH}, {kC, Outcome::PASS}})) << r.output;
  const auto j = read_junit((dir_ / "j.xml").string());
  ASSERT_EQ(j.size(), 3u);
  for (const auto& rec : j)
    if (rec.id == kB) EXPECT_NE(rec.message.find("signal 11"), std::string::npos) << rec.message;
  EXPECT_NE(r.output.find("opcts repro '" + kB + "' --arch host"), std::string::npos) << r.output;
}

TEST_F(Supervisor, HangBecomesTimeout) {
  const Shell r = sh(run_cmd("--timeout 2", "OPCTS_FAULT_HANG='*sq3_sk5*'"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(outcomes(), (Outcomes{{kA, Outcome::TIMEOUT}, {kB, Outcome::PASS}, {kC, Outcome::PASS}})) << r.output;
}

TEST_F(Supervisor, ManifestXfailSkipAndXpass) {
  std::ofstream(dir_ / "host.yaml") << "arch: host\n"
                                       "skip:\n  - match: '*sq5_sk7*'\n    reason: testing skip\n"
                                       "xfail:\n  - match: '*sq4_sk6*'\n    reason: known crash\n    expect: CRASH\n"
                                       "  - match: '*sq3_sk5*'\n    reason: fixed already\n    expect: FAIL\n"
                                       "    outputs: {O: [exceeds_bound]}\n";
  const Shell r = sh(run_cmd("--manifest " + (dir_ / "host.yaml").string(), "OPCTS_FAULT_CRASH='*sq4_sk6*'"));
  EXPECT_EQ(r.status, 1) << r.output;  // the XPASS fails the run
  EXPECT_EQ(outcomes(), (Outcomes{{kA, Outcome::XPASS}, {kB, Outcome::XFAIL}, {kC, Outcome::SKIP}})) << r.output;
}

TEST_F(Supervisor, FlakyEntryRerunsAndAStableFailureStays) {
  // The crash is injected on every run of kB, so reruns cannot rescue it: still CRASH. Under a
  // `flaky` entry the gate (judge/gate.hpp), and so the run's exit code, notes it as known flaky.
  std::ofstream(dir_ / "host.yaml")
      << "arch: host\nflaky:\n  - match: '*sq4_sk6*'\n    reason: seen flaking\n    reruns: 2\n";
  const Shell r = sh(run_cmd("--manifest " + (dir_ / "host.yaml").string(), "OPCTS_FAULT_CRASH='*sq4_sk6*'"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(outcomes().at(kB), Outcome::CRASH);
  EXPECT_NE(r.output.find("known flaky"), std::string::npos) << r.output;
}

TEST_F(Supervisor, FlakyEntryMakesACrashThenPassAFlakeThatDoesNotFailTheRun) {
  std::ofstream(dir_ / "host.yaml") << "arch: host\nflaky:\n  - match: '*sq4_sk6*'\n    reason: seen flaking\n";
  const std::string env = "OPCTS_FAULT_CRASH='*sq4_sk6*' OPCTS_FAULT_ONCE=" + (dir_ / "crashed").string();
  const Shell r = sh(run_cmd("--manifest " + (dir_ / "host.yaml").string(), env));
  EXPECT_EQ(r.status, 0) << r.output;
  const auto o = outcomes();
  EXPECT_EQ(o.at(kA), Outcome::PASS);
  EXPECT_EQ(o.at(kC), Outcome::PASS);
  for (const auto& rec : read_results_file((dir_ / "r.jsonl").string()))
    if (rec.id == kB) {
      EXPECT_EQ(rec.outcome, Outcome::FLAKE);
      EXPECT_TRUE(contains_all(rec.message, {"runs gave CRASH, PASS", "first CRASH: worker killed by signal 11"}));
      EXPECT_NE(rec.expectation.find("known flaky"), std::string::npos) << rec.expectation;
    }
  EXPECT_EQ(read_junit((dir_ / "j.xml").string()).size(), 3u);
}

TEST_F(Supervisor, AnUnlistedFlakeFailsTheRun) {
  // No manifest entry: the default single rerun still tells the flake from a failure.
  const std::string env = "OPCTS_FAULT_CRASH='*sq4_sk6*' OPCTS_FAULT_ONCE=" + (dir_ / "crashed").string();
  const Shell r = sh(run_cmd("", env));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(outcomes().at(kB), Outcome::FLAKE);
  EXPECT_NE(r.output.find("FLAKE " + kB), std::string::npos) << r.output;
}

TEST_F(Supervisor, NoRerunsKeepsTheFirstOutcome) {
  const std::string env = "OPCTS_FAULT_CRASH='*sq4_sk6*' OPCTS_FAULT_ONCE=" + (dir_ / "crashed").string();
  const Shell r = sh(run_cmd("--reruns 0", env));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(outcomes().at(kB), Outcome::CRASH);
}

TEST_F(Supervisor, AnIndexOutsideThePlanIsAnErrorOfThatWorker) {
  // The worker announces case 2^64 - 1 for kB: the supervisor must not index its plan with it.
  const Shell r = sh(run_cmd("--reruns 0", "OPCTS_FAULT_PROTOCOL='*sq4_sk6*'"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(outcomes(), (Outcomes{{kA, Outcome::PASS}, {kB, Outcome::ERROR}, {kC, Outcome::PASS}})) << r.output;
  for (const auto& rec : read_results_file((dir_ / "r.jsonl").string()))
    if (rec.id == kB) EXPECT_NE(rec.message.find("outside the plan"), std::string::npos) << rec.message;
}

// Two supervisors of one process share its PID, as shards in two containers or PID namespaces
// may: a case list named after the PID in a shared folder would be one file for both.
TEST_F(Supervisor, TwoSupervisorsWithOnePidKeepTheirOwnCaseLists) {
  SupervisorOptions opt;
  opt.suite.cases_dir = testutil::cases_dir().string();
  opt.suite.arch = "host";
  opt.self_exe = OPCTS_BINARY;
  opt.scratch_parent = dir_.string();
  const std::vector<std::vector<std::string>> lists{{kA, kB}, {kC, kB, kA}};
  std::vector<Supervised> got(lists.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < lists.size(); ++t)
    threads.emplace_back([&, t] { got[t] = supervise(opt, lists[t], nullptr); });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < lists.size(); ++t) {
    EXPECT_EQ(got[t].stopped_by, 0);
    ASSERT_EQ(got[t].records.size(), lists[t].size());
    for (size_t i = 0; i < lists[t].size(); ++i) {
      ASSERT_TRUE(got[t].records[i]) << t << " " << i;
      EXPECT_EQ(got[t].records[i]->id, lists[t][i]);
      EXPECT_EQ(got[t].records[i]->raw_outcome, Outcome::PASS) << got[t].records[i]->message;
    }
  }
  // Each scratch folder is gone with its supervisor.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().rfind("opcts-run-", 0), std::string::npos) << e.path();
}

TEST_F(Supervisor, ResourcesWritesACtestResourceSpec) {
  const Shell r = sh(std::string(OPCTS_BINARY) + " resources --out " + (dir_ / "gpus.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(dir_ / "gpus.json");
  const auto spec = nlohmann::json::parse(in);
  EXPECT_EQ(spec["version"]["major"], 1);
  EXPECT_EQ(spec["version"]["minor"], 0);
  ASSERT_EQ(spec["local"].size(), 1u);
  const auto& gpus = spec["local"][0]["gpus"];
  ASSERT_TRUE(gpus.is_array());
  for (size_t i = 0; i < gpus.size(); ++i) {
    EXPECT_EQ(gpus[i]["id"], std::to_string(i));
    EXPECT_EQ(gpus[i]["slots"], 1);
  }
  // Why, in every build: "no NVIDIA GPU found: ..." with CUDA, "built without CUDA" without it.
  if (gpus.empty()) {
    EXPECT_NE(r.output.find("no CUDA or AMD GPU found ("), std::string::npos) << r.output;
    EXPECT_TRUE(r.output.find("(no NVIDIA GPU found: ") != std::string::npos ||
                r.output.find("(built without CUDA") != std::string::npos)
        << r.output;
  }
}

TEST_F(Supervisor, ShardsCoverEveryCaseOnce) {
  std::multiset<std::string> seen;
  for (int i = 1; i <= 3; ++i) {
    const Shell r =
        sh(std::string(OPCTS_BINARY) + " list --arch sm90 --tier default --shard " + std::to_string(i) + "/3");
    ASSERT_EQ(r.status, 0) << r.output;
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);) seen.insert(line);
  }
  const Shell all = sh(std::string(OPCTS_BINARY) + " list --arch sm90 --tier default");
  std::istringstream in(all.output);
  std::multiset<std::string> want;
  for (std::string line; std::getline(in, line);) want.insert(line);
  EXPECT_GE(want.size(), 1000u);
  EXPECT_EQ(seen, want);
}

TEST_F(Supervisor, MalformedCatalogNamesFileAndLine) {
  std::ofstream(dir_ / "bad.yaml")
      << "family: sdpa\nedges:\n  - name: x\n    why: y\n    problem: {dtype: bf17, heads: 1, seq: 1, head_dim: 8}\n";
  const Shell r = sh(std::string(OPCTS_BINARY) + " list --arch host --catalog " + (dir_ / "bad.yaml").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains_all(r.output, {"bad.yaml:5", "bf17"}));
}

}  // namespace
}  // namespace opcts

namespace opcts {
namespace {

// The worker's argv carries every ExecOptions field a run sets, from the one table the worker's
// command line also reads (runner/execute.hpp kExecFlags); defaults travel as nothing or as the
// default number.
TEST(WorkerArgs, CarryEveryExecOptionsField) {
  ExecOptions e;
  e.artifacts_dir = "/tmp/a";
  e.bitwise = true;
  e.ref_cache_dir = "/tmp/c";
  e.ref_cache_max_bytes = 12345;
  EXPECT_EQ(exec_worker_args(e), (std::vector<std::string>{"--artifacts", "/tmp/a", "--bitwise", "--ref-cache",
                                                           "/tmp/c", "--ref-cache-max-bytes", "12345"}));
  const std::vector<std::string> plain = exec_worker_args(ExecOptions{});
  EXPECT_EQ(plain, (std::vector<std::string>{"--ref-cache-max-bytes", std::to_string(kDefaultRefCacheMaxBytes)}));
  // Each row names a distinct flag.
  std::set<std::string> flags;
  for (const ExecFlag& f : kExecFlags) EXPECT_TRUE(flags.insert(f.flag).second) << f.flag;
}

}  // namespace
}  // namespace opcts
