// The gate end to end (issue 33): `opcts gate DIR` with no flags gives a run's verdict from the
// selection its reports carry; it fails on a lost shard (also after `report merge`), on a
// plugin the run could not use, and on a selection where nothing ran, which `--allow-empty`
// no longer turns green.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/result.hpp"
#include "reports/junit.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::contains_all;
using testutil::sh;
using testutil::Shell;

const std::string kOpcts = OPCTS_BINARY;

class GateRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testutil::temp_dir();
    testutil::write(dir_, "eight.yaml", testutil::kEightCatalog);
  }
  // A run of the eight cases, shard `i` of `n`, its reports in dir/<out>/.
  Shell run(const std::string& out, int i, int n, const std::string& more = "") const {
    return sh(kOpcts + " run --arch host --tier smoke --no-ref-cache --catalog " + dir_ + "/eight.yaml --filter " +
              testutil::kTinyFilter + " --shard " + std::to_string(i) + "/" + std::to_string(n) + " --results " + dir_ +
              "/" + out + "/r.jsonl --junit " + dir_ + "/" + out + "/j.xml " + more);
  }
  Shell gate(const std::string& what) const { return sh(kOpcts + " gate " + what); }
  std::string dir_;
};

TEST_F(GateRuns, AllShardsPassThreeOfFourFailAlsoMerged) {
  for (int i = 1; i <= 4; ++i) {
    const Shell r = run("shards/s" + std::to_string(i), i, 4);
    ASSERT_EQ(r.status, 0) << r.output;
  }
  const Shell all = gate(dir_ + "/shards");
  EXPECT_EQ(all.status, 0) << all.output;
  EXPECT_NE(all.output.find("gate host: PASSED"), std::string::npos) << all.output;
  const Shell merged =
      sh(kOpcts + " report merge " + dir_ + "/shards --results " + dir_ + "/m/r.jsonl --junit " + dir_ + "/m/j.xml");
  ASSERT_EQ(merged.status, 0) << merged.output;
  EXPECT_EQ(gate(dir_ + "/m/r.jsonl").status, 0);
  EXPECT_EQ(gate(dir_ + "/m/j.xml").status, 0);

  // One shard's reports lost: the gate (of the folder, and of a merge of the rest) names it.
  fs::remove_all(dir_ + "/shards/s3");
  const Shell three = gate(dir_ + "/shards");
  EXPECT_EQ(three.status, 1) << three.output;
  EXPECT_NE(three.output.find("shard 3/4 has no report"), std::string::npos) << three.output;
  ASSERT_EQ(
      sh(kOpcts + " report merge " + dir_ + "/shards --results " + dir_ + "/m3/r.jsonl --junit " + dir_ + "/m3/j.xml")
          .status,
      0);
  for (const char* report : {"/m3/r.jsonl", "/m3/j.xml"}) {
    const Shell g = gate(dir_ + report);
    EXPECT_EQ(g.status, 1) << report << "\n" << g.output;
    EXPECT_NE(g.output.find("shard 3/4 has no report"), std::string::npos) << g.output;
  }
}

TEST_F(GateRuns, ASelectionWhereNothingRunsFails) {
  // Every case of gfx942 SKIPs on this machine: 0 PASS and, once, exit 0 and "no gate failures".
  const Shell r = sh(kOpcts + " run --arch gfx942 --tier smoke --allow-arch-mismatch --results " + dir_ +
                     "/gfx/r.jsonl --summary " + dir_ + "/gfx/s.md");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains_all(r.output, {"0 cases ran", "is not tested"}));
  const Shell g = gate(dir_ + "/gfx");
  EXPECT_EQ(g.status, 1) << g.output;
  EXPECT_NE(g.output.find("0 cases ran"), std::string::npos) << g.output;
  std::ifstream summary(dir_ + "/gfx/s.md");
  const std::string md((std::istreambuf_iterator<char>(summary)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("The gate fails this run"), std::string::npos) << md;

  // --allow-empty lets an empty selection start; it does not make it pass.
  const Shell empty =
      sh(kOpcts + " run --arch host --tier smoke --filter 'nothing.matches/*' --allow-empty --results " + dir_ +
         "/empty/r.jsonl");
  EXPECT_EQ(empty.status, 1) << empty.output;
  EXPECT_EQ(gate(dir_ + "/empty").status, 1);
  // An empty shard passes alone (the others may hold the cases); the gate over all of them decides.
  const Shell shard = sh(kOpcts +
                         " run --arch host --tier smoke --filter 'nothing.matches/*' --allow-empty --shard 2/2 "
                         "--results " +
                         dir_ + "/empty2/r.jsonl");
  EXPECT_EQ(shard.status, 0) << shard.output;
  EXPECT_EQ(gate(dir_ + "/empty2").status, 1);
}

TEST_F(GateRuns, APluginThatCannotLoadFailsTheRunAndTheGate) {
  const Shell r = run("missing", 1, 1, "--plugin /no/such/plugin.so --summary " + dir_ + "/missing/s.md");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains_all(r.output, {"plugin /no/such/plugin.so", "--plugin-optional"}));
  const Shell g = gate(dir_ + "/missing");
  EXPECT_EQ(g.status, 1) << g.output;
  EXPECT_NE(g.output.find("ended before it planned its cases (plugin /no/such/plugin.so"), std::string::npos)
      << g.output;

  // Marked optional, the run goes on without it and says so; the gate notes it.
  const Shell o = run("optional", 1, 1, "--plugin-optional /no/such/plugin.so");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("optional plugin left out"), std::string::npos) << o.output;
  const Shell og = gate(dir_ + "/optional");
  EXPECT_EQ(og.status, 0) << og.output;
  EXPECT_TRUE(
      contains_all(og.output, {"note: selection host smoke", "optional plugin /no/such/plugin.so was not used"}));
}

TEST_F(GateRuns, ReportsWithoutASelectionFail) {
  ASSERT_EQ(run("one", 1, 1).status, 0);
  // The records alone, as an older opcts (or a hand) wrote them: nothing says what should have run.
  std::ofstream(dir_ + "/bare.jsonl") << [&] {
    std::string out;
    for (const auto& r : read_results_file(dir_ + "/one/r.jsonl")) out += to_json_line(r) + "\n";
    return out;
  }();
  const Shell g = gate(dir_ + "/bare.jsonl");
  EXPECT_EQ(g.status, 1) << g.output;
  EXPECT_NE(g.output.find("carry no run selection"), std::string::npos) << g.output;
}

}  // namespace
}  // namespace opcts
