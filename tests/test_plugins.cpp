// The plugin ABI end to end: the example plugin's impls listed, run and judged like built-in
// ones; every way a plugin can go wrong gives an error naming it while the run goes on; a crash
// inside a plugin's run is a CRASH of that case only; an impl that writes into its input FAILs.
#include <gtest/gtest.h>

#include <string>

#include "app/builtins.hpp"
#include "app/plugins.hpp"
#include "core/result.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using testutil::sh;

const std::string kOpcts = OPCTS_BINARY;
const std::string kExample = OPCTS_EXAMPLE_PLUGIN;
std::string bad(const char* name) { return std::string(OPCTS_BAD_PLUGIN_DIR) + "/" + name + ".so"; }

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
  const auto dir = testutil::temp_dir();
  const auto r = sh(kOpcts + " run --arch host --tier smoke --plugin " + kExample +
                    " --filter 'sdpa.example_sdpa/*' --filter 'scaled_mm.example_scaled_mm/*' --results " + dir +
                    "/r.jsonl");
  EXPECT_EQ(r.status, 0) << r.output;
  int pass = 0, skip = 0, negative = 0;
  for (const auto& rec : read_results_file(dir + "/r.jsonl")) {
    EXPECT_TRUE(rec.outcome == Outcome::PASS || rec.outcome == Outcome::SKIP) << rec.id << ": " << rec.message;
    pass += rec.outcome == Outcome::PASS;
    skip += rec.outcome == Outcome::SKIP;
    negative += rec.id.find("_expect_") != std::string::npos && rec.outcome == Outcome::PASS;
  }
  EXPECT_GT(pass, 30) << r.output;
  EXPECT_GT(skip, 0);  // backward, recipes it does not take: SKIP with a reason, never gone
  EXPECT_GT(negative, 0) << "the plugin's own argument checks pass the negative cases";
  const auto list = sh(kOpcts + " list --arch host --tier smoke --plugin " + kExample + " --filter 'sdpa.example_*' -v");
  EXPECT_NE(list.output.find("SKIP: example.sdpa: computes the forward only"), std::string::npos) << list.output;
}

TEST(Plugins, EveryWayToFailNamesThePluginAndTheRunGoesOn) {
  struct Row {
    std::string path, says;
  };
  const Row rows[] = {
      {"/no/such/plugin.so", "cannot load"},
      {bad("no_entry"), "no entry point 'opcts_plugin_init'"},
      {bad("wrong_abi"), "returned 7 for ABI version 1"},
      {bad("duplicate"), "impl host.flash: another impl has this name"},
      {bad("unknown_family"), "unknown family 'no_such_family'"},
  };
  for (const Row& row : rows) {
    const auto r = sh(kOpcts + " list --arch host --tier smoke --filter 'sdpa.host_flash/*' --plugin " + row.path);
    EXPECT_EQ(r.status, 0) << row.path << "\n" << r.output;  // the run goes on without it
    EXPECT_NE(r.output.find("plugin " + row.path), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(row.says), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("going on without it"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("sdpa.host_flash/"), std::string::npos) << "built-in cases still listed";
  }
}

TEST(Plugins, ACrashInsideRunIsACrashOfThatCaseOnly) {
  const auto dir = testutil::temp_dir();
  const auto r = sh(kOpcts + " run --arch host --tier smoke --reruns 0 --plugin " + bad("crash") +
                    " --filter 'sdpa.bad_crash/fp32_*' --filter 'sdpa.host_flash/fp32_*' --results " + dir +
                    "/r.jsonl");
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
