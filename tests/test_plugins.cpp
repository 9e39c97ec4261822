// The plugin ABI end to end: the example plugin's impls listed, run and judged like built-in
// ones; every way a plugin can go wrong stops the run naming it (unless it is optional); a crash
// inside a plugin's supports() is one ERROR, inside its run a CRASH of that case only; an impl
// that writes into its input FAILs.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "app/plugins.hpp"
#include "core/result.hpp"
#include "reports/junit.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using testutil::contains_all;
using testutil::sh;

const std::string kOpcts = OPCTS_BINARY;
const std::string kExample = OPCTS_EXAMPLE_PLUGIN;
std::string bad(const char* name) { return std::string(OPCTS_BAD_PLUGIN_DIR) + "/" + name + ".so"; }

// A host run of the example plugin's smoke cases that `filters` (--filter options) select: its
// output (the run must exit 0) and the records of its results file.
struct ExampleRun {
  std::string output;
  std::vector<ResultRecord> records;
};
ExampleRun run_example(const std::string& filters) {
  const auto dir = testutil::temp_dir();
  const auto r = sh(kOpcts + " run --arch host --tier smoke --plugin " + kExample + " " + filters + " --results " +
                    dir + "/r.jsonl");
  EXPECT_EQ(r.status, 0) << r.output;
  return {r.output, read_results_file(dir + "/r.jsonl")};
}

TEST(Plugins, TheExampleRegistersItsImplsNextToTheBuiltIns) {
  Registry reg;
  register_builtins(reg);
  const size_t before = reg.impls_of("sdpa").size();
  EXPECT_EQ(load_plugin(reg, kExample), "");
  EXPECT_EQ(reg.impls_of("sdpa").size(), before + 1);
  const Impl* sdpa = reg.impl("example.sdpa");
  ASSERT_NE(sdpa, nullptr);
  EXPECT_EQ(sdpa->backend(), "host");
  EXPECT_EQ(&sdpa->family_def(), reg.family("sdpa"));
  ASSERT_NE(reg.impl("example.scaled_mm"), nullptr);
  // A second load of the same plugin would register the same names: refused as a whole.
  const std::string again = load_plugin(reg, kExample);
  EXPECT_NE(again.find("another impl has this name"), std::string::npos) << again;
}

TEST(Plugins, ExampleCasesRunAndPassOnTheHost) {
  const ExampleRun r = run_example("--filter 'sdpa.example_sdpa/*' --filter 'scaled_mm.example_scaled_mm/*'");
  int pass = 0, skip = 0, negative = 0;
  for (const auto& rec : r.records) {
    EXPECT_TRUE(rec.outcome == Outcome::PASS || rec.outcome == Outcome::SKIP) << rec.id << ": " << rec.message;
    pass += rec.outcome == Outcome::PASS;
    skip += rec.outcome == Outcome::SKIP;
    negative += rec.id.find("_expect_") != std::string::npos && rec.outcome == Outcome::PASS;
  }
  EXPECT_GT(pass, 30) << r.output;
  EXPECT_GT(skip, 0);  // backward, recipes it does not take: SKIP with a reason, never gone
  EXPECT_GT(negative, 0) << "the plugin's own argument checks pass the negative cases";
  const auto list =
      sh(kOpcts + " list --arch host --tier smoke --plugin " + kExample + " --filter 'sdpa.example_*' -v");
  EXPECT_NE(list.output.find("SKIP: example.sdpa: computes the forward only"), std::string::npos) << list.output;
}

// The example declares the invariance contracts through its descriptor (ABI 1.10): under
// --invariance each dense batch of two or more entries runs again as entry 0 alone and reversed,
// and its rows hold the same bytes; what cannot be cut says so in the passing record.
TEST(Plugins, TheExamplesInvarianceClaimsAreCheckedAndHold) {
  const ExampleRun r =
      run_example("--invariance --filter 'sdpa.example_sdpa/*' --filter 'scaled_mm.example_scaled_mm/*'");
  int checked = 0, not_checked = 0;
  for (const auto& rec : r.records) {
    EXPECT_TRUE(rec.outcome == Outcome::PASS || rec.outcome == Outcome::SKIP) << rec.id << ": " << rec.message;
    if (rec.outcome != Outcome::PASS || rec.id.find("_expect_") != std::string::npos ||
        rec.id.find("_corrupt_") != std::string::npos)
      continue;
    if (rec.message.find("invariance not checked") == std::string::npos) ++checked;
    else ++not_checked;
  }
  EXPECT_GT(checked, 10) << r.output;
  EXPECT_GT(not_checked, 0) << "batches of one and packed layouts say why";
}

// The example declares plugin ABI 1.3: it runs sdpa's varlen problems, with padding rows
// (seqused_k), and the paged ones, NHD and HND, and refuses each negative case naming the tensor
// (cu_seqlens, seqused_k past its segment or table, a block index out of range). Gating by
// minor is the Python plugin's test (np.sdpa declares 0).
TEST(Plugins, TheExampleRunsVarlenPaddedAndPagedProblemsAndRefusesTheirNegativeCases) {
  const ExampleRun r = run_example("--filter 'sdpa.example_sdpa/*_varlen*' --filter 'sdpa.example_sdpa/*_paged*'");
  int varlen = 0, padded = 0, paged = 0, hnd = 0, negative = 0;
  for (const auto& rec : r.records) {
    EXPECT_TRUE(rec.outcome == Outcome::PASS || rec.outcome == Outcome::SKIP) << rec.id << ": " << rec.message;
    if (rec.outcome != Outcome::PASS) continue;
    const bool paged_id = rec.id.find("_paged") != std::string::npos;
    if (rec.id.find("_corrupt_") != std::string::npos) ++negative;
    else if (paged_id) ++paged, hnd += rec.id.find("_hnd") != std::string::npos;
    else ++varlen, padded += rec.id.find("_padk") != std::string::npos;
  }
  EXPECT_GT(varlen, 5) << r.output;
  EXPECT_GT(padded, 0);
  EXPECT_GT(paged, 5);
  EXPECT_GT(hnd, 0);
  EXPECT_GE(negative, 5);  // cu_seqlens_k, a padded seqused_k, and the paged cu_seqlens_q, block_table, seqused_k
}

// A plugin that cannot be used once printed "going on without it" and exited 0, leaving a green
// or empty report (issue 33). Now it stops list and run with exit 2, naming it and why, unless
// it is marked optional: then the run goes on without it and says so.
TEST(Plugins, EveryWayToFailStopsTheRunUnlessOptional) {
  struct Row {
    std::string path, says;
  };
  const Row rows[] = {
      {"/no/such/plugin.so", "cannot load"},
      {bad("no_entry"), "no entry point 'opcts_plugin_init'"},
      {bad("wrong_abi"), "returned 7 for ABI version 1"},
      {bad("duplicate"), "impl host.flash: another impl has this name"},
      {bad("unknown_family"), "unknown family 'no_such_family'"},
      {bad("crash_init"), "ended the probe process with signal"},
      {kExample + " --plugin " + kExample, "impl example.sdpa: another impl has this name"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.path);
    const std::string list = kOpcts + " list --arch host --tier smoke --filter 'sdpa.host_flash/*' ";
    const auto r = sh(list + "--plugin " + row.path);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_TRUE(contains_all(r.output, {"plugin " + row.path.substr(0, row.path.find(' ')), row.says}));
    EXPECT_EQ(r.output.find("sdpa.host_flash/"), std::string::npos) << "nothing listed";
    const auto dir = testutil::temp_dir();
    const auto run = sh(kOpcts + " run --arch host --tier smoke --filter 'sdpa.host_flash/fp32_*' --plugin " +
                        row.path + " --results " + dir + "/r.jsonl");
    EXPECT_EQ(run.status, 2) << run.output;
    EXPECT_NE(run.output.find(row.says), std::string::npos) << run.output;
    const auto optional = sh(list + "--plugin-optional " + row.path.substr(0, row.path.find(' ')) +
                             (row.path.find(' ') == std::string::npos ? "" : " --plugin " + kExample));
    EXPECT_EQ(optional.status, 0) << optional.output;
    EXPECT_NE(optional.output.find("optional plugin left out"), std::string::npos) << optional.output;
    EXPECT_NE(optional.output.find("sdpa.host_flash/"), std::string::npos) << "built-in cases still listed";
  }
}

// A crash inside a plugin's supports() once killed `opcts run` (rc 139, no message) and left a
// JUnit of 0 tests. supports() is asked in a probe process: the case it crashed on is one ERROR
// naming the signal, the impl's cases not asked yet SKIP saying why, and the run goes on.
TEST(Plugins, ACrashInsideSupportsIsOneErrorNamingTheSignal) {
  const auto dir = testutil::temp_dir();
  testutil::write(dir, "tiny.yaml", testutil::kTinyCatalog);
  const auto r =
      sh(kOpcts + " run --arch host --tier smoke --reruns 0 --no-ref-cache --catalog " + dir + "/tiny.yaml --plugin " +
         bad("crash_supports") + " --filter 'sdpa.bad_crash_supports/fp32_b1_hq2_hkv1_sq*_d8_nomask' --filter " +
         testutil::kTinyFilter + " --results " + dir + "/r.jsonl --junit " + dir + "/j.xml");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("supports() ended the probe process with signal"), std::string::npos) << r.output;
  std::map<std::string, Outcome> got;
  std::string crashed;
  for (const auto& rec : read_junit(dir + "/j.xml")) {
    got[rec.id] = rec.outcome;
    if (rec.id.find("bad_crash_supports/fp32_b1_hq2_hkv1_sq4") != std::string::npos) crashed = rec.message;
  }
  const std::string impl = "sdpa.bad_crash_supports/";
  const auto tail = [](const std::string& id) { return id.substr(id.find('/') + 1); };
  EXPECT_EQ(got.at(impl + tail(testutil::kTinyB)), Outcome::ERROR);
  EXPECT_NE(crashed.find("signal 11"), std::string::npos) << crashed;
  EXPECT_EQ(got.at(impl + tail(testutil::kTinyC)), Outcome::SKIP) << "not asked after the crash";
  EXPECT_EQ(got.at(impl + tail(testutil::kTinyA)), Outcome::FAIL) << "asked before the crash, ran (and scribbled)";
  for (const std::string& id : {testutil::kTinyA, testutil::kTinyB, testutil::kTinyC})
    EXPECT_EQ(got.at(id), Outcome::PASS) << id << ": the built-in impl's cases ran";
}

TEST(Plugins, ACrashInsideRunIsACrashOfThatCaseOnly) {
  const auto dir = testutil::temp_dir();
  const auto r =
      sh(kOpcts + " run --arch host --tier smoke --reruns 0 --plugin " + bad("crash") +
         " --filter 'sdpa.bad_crash/fp32_*' --filter 'sdpa.host_flash/fp32_*' --results " + dir + "/r.jsonl");
  EXPECT_EQ(r.status, 1) << r.output;
  int crashed = 0, passed = 0;
  for (const auto& rec : read_results_file(dir + "/r.jsonl")) {
    if (rec.impl == "bad.crash" && rec.outcome != Outcome::SKIP) {
      EXPECT_EQ(rec.outcome, Outcome::CRASH) << rec.id;
      ++crashed;
    }
    passed += rec.impl == "host.flash" && rec.outcome == Outcome::PASS;
  }
  EXPECT_GT(crashed, 1);
  EXPECT_GT(passed, crashed) << "the built-in cases between the crashes still ran";
}

TEST(Plugins, AnImplThatWritesIntoItsInputFailsNamingIt) {
  const auto dir = testutil::temp_dir();
  const auto r = sh(kOpcts + " run --arch host --tier smoke --reruns 0 --plugin " + bad("scribble") +
                    " --filter 'sdpa.bad_scribble/fp32_*' --results " + dir + "/r.jsonl");
  EXPECT_EQ(r.status, 1) << r.output;
  int failed = 0;
  for (const auto& rec : read_results_file(dir + "/r.jsonl"))
    if (rec.outcome != Outcome::SKIP) {
      EXPECT_EQ(rec.outcome, Outcome::FAIL) << rec.id;
      EXPECT_NE(rec.message.find("bad.scribble wrote into its input 'q'"), std::string::npos) << rec.message;
      ++failed;
    }
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace opcts
