// The Python plugin host (plugins/python, docs/python.md) end to end: `--plugin FILE.py` and
// `--plugin py:package.module` register `@opcts.impl` functions through the plugin ABI; the
// numpy examples pass the host smoke tier; each fault of a Python impl gets the verdict a C
// plugin's gets (tests/python_plugins/faults.py); a module that fails to import stops the run
// with its traceback's last lines; the module is imported once per process, never per case.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "app/plugins.hpp"
#include "core/result.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using testutil::exits_with;
using testutil::sh;

const std::string kOpcts = OPCTS_BINARY;
const std::string kSource = OPCTS_SOURCE_DIR;
const std::string kFaults = kSource + "/tests/python_plugins/faults.py";

#if OPCTS_HAVE_PYTHON
#define REQUIRE_PYTHON_HOST()
#else
#define REQUIRE_PYTHON_HOST() GTEST_SKIP() << "built without the Python plugin host (no Python development files)"
#endif

std::map<std::string, ResultRecord> run_records(const std::string& args, testutil::Shell* shell) {
  const auto dir = testutil::temp_dir();
  const auto r =
      sh(kOpcts + " run --arch host --tier smoke --reruns 0 --no-ref-cache " + args + " --results " + dir + "/r.jsonl");
  if (shell) *shell = r;
  std::map<std::string, ResultRecord> out;
  for (auto& rec : read_results_file(dir + "/r.jsonl")) out[rec.id] = rec;
  return out;
}

TEST(PythonPlugin, PathsAndPrefixesNameAPythonModule) {
  EXPECT_TRUE(is_python_plugin("my_kernels.py"));
  EXPECT_TRUE(is_python_plugin("/a/b/k.py"));
  EXPECT_TRUE(is_python_plugin("py:package.module"));
  EXPECT_FALSE(is_python_plugin("libmine.so"));
  EXPECT_FALSE(is_python_plugin("py"));
  EXPECT_FALSE(is_python_plugin("a.pyc"));
}

// np.sdpa declares its invariance through @opcts.impl(invariant=...) (the descriptor's callback
// through the Python host): under --invariance its batches of two run again as entry 0 alone and
// reversed, and hold the same bytes.
TEST(PythonPlugin, ThePythonFrontDoorDeclaresInvarianceAndItIsChecked) {
  REQUIRE_PYTHON_HOST();
  testutil::Shell shell;
  const auto recs = run_records("--invariance --plugin " + kSource +
                                    "/plugins/python/examples/numpy_sdpa.py --filter 'sdpa.np_sdpa/*_b2_*' "
                                    "--filter 'sdpa.np_sdpa/*_b1_*'",
                                &shell);
  EXPECT_EQ(shell.status, 0) << shell.output;
  // A batch of two is checked (no note); a batch of one cannot be cut, which its note says — and
  // only for an axis the impl declared, so the note proves the declaration reached the descriptor.
  int checked = 0, declared_uncut = 0;
  for (const auto& [id, rec] : recs) {
    EXPECT_TRUE(rec.outcome == Outcome::PASS || rec.outcome == Outcome::SKIP) << id << ": " << rec.message;
    if (rec.outcome != Outcome::PASS) continue;
    const bool noted = rec.message.find("invariance not checked") != std::string::npos;
    if (id.find("_b2_") != std::string::npos) checked += !noted;
    if (id.find("_b1_") != std::string::npos)
      declared_uncut +=
          rec.message.find("invariance not checked: batch_size: a batch of one entry") != std::string::npos;
  }
  EXPECT_GT(checked, 5) << shell.output;
  EXPECT_GT(declared_uncut, 0) << shell.output;
}

// Recorded and replayed (--capture: on the host, the same buffers called again with the case's
// inputs copied in), the numpy impls compute from what the buffers hold: every replay passes.
TEST(PythonPlugin, TheNumpyExamplesComputeFromTheirBuffersUnderCapture) {
  REQUIRE_PYTHON_HOST();
  testutil::Shell shell;
  const auto recs =
      run_records("--capture --plugin " + kSource + "/plugins/python/examples/numpy_cast.py --plugin " + kSource +
                      "/plugins/python/examples/numpy_sdpa.py --filter 'cast.np_*' " + "--filter 'sdpa.np_sdpa/*_b2_*'",
                  &shell);
  EXPECT_EQ(shell.status, 0) << shell.output;
  int passed = 0;
  for (const auto& [id, rec] : recs) {
    EXPECT_TRUE(rec.outcome == Outcome::PASS || rec.outcome == Outcome::SKIP) << id << ": " << rec.message;
    passed += rec.outcome == Outcome::PASS;
  }
  EXPECT_GT(passed, 10) << shell.output;
}

// @opcts.impl(tactics=...) lists tactics through the Python host's list_tactics (ABI 1.11): each
// is a case of its own, and its run finds the tactic in ctx.tactic — the right one passes, the
// fast but wrong one FAILs alone, the one raising TacticUnavailable is a SKIP quoting it; a tactics
// function that raises makes its problem an ERROR quoting the exception (tests/python_plugins/tactics.py).
TEST(PythonPlugin, APythonImplsTacticsAreCasesThatReachItsRun) {
  REQUIRE_PYTHON_HOST();
  const auto dir = testutil::temp_dir();
  const auto shell = sh(kOpcts + " run --arch host --tier full --reruns 0 --plugin " + kSource +
                        "/tests/python_plugins/tactics.py --filter 'cast.pytactic_decode/e4m3fn_to_fp32_allcodes/*'" +
                        " --results " + dir + "/r.jsonl");
  std::map<std::string, ResultRecord> recs;
  for (auto& rec : read_results_file(dir + "/r.jsonl")) recs[rec.id] = rec;
  const std::string id = "cast.pytactic_decode/e4m3fn_to_fp32_allcodes/";
  ASSERT_EQ(recs.size(), 3u) << shell.output;
  EXPECT_EQ(recs.at(id + "table").outcome, Outcome::PASS) << recs.at(id + "table").message;
  EXPECT_EQ(recs.at(id + "flushed").outcome, Outcome::FAIL) << recs.at(id + "flushed").message;
  EXPECT_EQ(recs.at(id + "absent").outcome, Outcome::SKIP);
  EXPECT_NE(recs.at(id + "absent").message.find("no such tactic on this machine"), std::string::npos)
      << recs.at(id + "absent").message;
  // A tactics function that raises: the problem's one case is an ERROR quoting the exception.
  const auto raised = sh(kOpcts + " run --arch host --tier full --reruns 0 --plugin " + kSource +
                         "/tests/python_plugins/tactics.py --filter 'cast.pytactic_unlisted/e4m3fn_to_fp32_allcodes'" +
                         " --results " + dir + "/raised.jsonl");
  const auto unlisted = read_results_file(dir + "/raised.jsonl");
  ASSERT_EQ(unlisted.size(), 1u) << raised.output;
  EXPECT_EQ(unlisted[0].outcome, Outcome::ERROR) << unlisted[0].message;
  EXPECT_NE(unlisted[0].message.find("ValueError: no tactics for this shape"), std::string::npos)
      << unlisted[0].message;
}

TEST(PythonPlugin, TheNumpyExamplesPassTheHostSmokeTier) {
  REQUIRE_PYTHON_HOST();
  testutil::Shell shell;
  const auto recs = run_records("--plugin " + kSource + "/plugins/python/examples/numpy_cast.py --plugin " + kSource +
                                    "/plugins/python/examples/numpy_sdpa.py --filter 'cast.np_*' --filter 'sdpa.np_*'",
                                &shell);
  EXPECT_EQ(shell.status, 0) << shell.output;
  std::map<std::string, int> pass, skip;
  for (const auto& [id, rec] : recs) {
    EXPECT_TRUE(rec.outcome == Outcome::PASS || rec.outcome == Outcome::SKIP) << id << ": " << rec.message;
    if (rec.outcome == Outcome::PASS) ++pass[rec.family];
    if (rec.outcome == Outcome::SKIP) {
      ++skip[rec.family];
      // A Python impl declares plugin ABI 1.0: the varlen (1.1), paged (1.2), chunked-local (1.4)
      // sink (1.5), ALiBi (1.6), dbias and query-broadcast mask (1.7: _dbias, _amask…k, _bmask…k)
      // block-sparse (1.8: _blk) and fp8 (1.9: _fp8) cases SKIP saying so.
      static const std::regex per_key("_[ab]mask[bh]*k(_|$)");
      const bool packed = id.find("_varlen") != std::string::npos || id.find("_paged") != std::string::npos ||
                          id.find("_chunk") != std::string::npos || id.find("_sink") != std::string::npos ||
                          id.find("_alibi") != std::string::npos || id.find("_dbias") != std::string::npos ||
                          id.find("_blk") != std::string::npos || id.find("_fp8") != std::string::npos ||
                          std::regex_search(id, per_key);
      if (packed) EXPECT_NE(rec.message.find("needs plugin ABI 1."), std::string::npos) << id << ": " << rec.message;
      else EXPECT_EQ(rec.message, "np.sdpa: computes the forward only") << id;
    }
  }
  EXPECT_GE(pass["cast"], 70) << "every cast of the smoke tier, bit for bit";
  EXPECT_EQ(skip["cast"], 0);
  EXPECT_GE(pass["sdpa"], 130) << shell.output;
  // Negative cases (softcap < 0, window_left < -1, window_right < -1) pass by raising
  // opcts.InvalidArgument naming the argument.
  for (const std::string id : {"sdpa.np_sdpa/bf16_b1_hq4_hkv2_sq16_sk16_d64_nomask_capm30",
                               "sdpa.np_sdpa/bf16_b1_hq4_hkv2_sq16_sk16_d64_nomask_winm2x0",
                               "sdpa.np_sdpa/bf16_b1_hq4_hkv2_sq16_sk16_d64_nomask_win8xm5"}) {
    ASSERT_TRUE(recs.count(id)) << id;
    EXPECT_EQ(recs.at(id).outcome, Outcome::PASS) << id << ": " << recs.at(id).message;
  }
}

TEST(PythonPlugin, APackageModuleLoadsByItsDottedName) {
  REQUIRE_PYTHON_HOST();
  const auto env = "PYTHONPATH=" + kSource + "/tests/python_plugins ";
  const auto dir = testutil::temp_dir();
  const auto r = sh(env + kOpcts + " run --arch host --tier smoke --reruns 0 --plugin py:opcts_testpkg.kernels" +
                    " --filter 'cast.pypkg_*' --results " + dir + "/r.jsonl");
  EXPECT_EQ(r.status, 0) << r.output;
  int passed = 0;
  for (const auto& rec : read_results_file(dir + "/r.jsonl")) passed += rec.outcome == Outcome::PASS;
  EXPECT_EQ(passed, 1) << r.output;  // e8m0fnu_to_fp32_allcodes; the rest SKIP with the lambda's reason
}

// What a C plugin gets for each fault (tests/test_plugins.cpp, tests/test_cli.cpp), a Python impl
// gets too; the built-in cases run between them.
TEST(PythonPlugin, EachFaultIsOneCasesVerdict) {
  REQUIRE_PYTHON_HOST();
  struct Row {
    std::string impl;
    Outcome outcome;
    std::vector<std::string> says;
  };
  const std::vector<Row> rows = {
      {"raises",
       Outcome::ERROR,
       {"pyfault.raises: ZeroDivisionError: division by zero", "faults.py:19 in raises: helper(1)",
        "faults.py:13 in helper: return x / 0"}},
      {"unsupported", Outcome::ERROR, {"pyfault.unsupported: this library refuses e4m3fn"}},
      {"segfault", Outcome::CRASH, {"signal 11"}},
      {"lazy", Outcome::FAIL, {"never written?"}},
      {"scribble", Outcome::FAIL, {"pyfault.scribble wrote into its input 'x'"}},
      {"outside", Outcome::FAIL, {"pyfault.outside wrote outside its output", "past the end of 'y'"}},
      {"exit", Outcome::ERROR, {"SystemExit: 3"}},
      {"skipper", Outcome::SKIP, {"pyfault.skipper: no problem of host"}},
      // A supports() that raises is the impl's bug: an ERROR per case, never a SKIP.
      {"badsupports", Outcome::ERROR, {"supports() raised AttributeError", "in broken_supports"}},
  };
  std::string filters = " --filter 'cast.host_cvt/fp32_to_e4m3fn_*'";
  for (const Row& row : rows) filters += " --filter 'cast.pyfault_" + row.impl + "/fp32_to_e4m3fn_*'";
  testutil::Shell shell;
  const auto recs = run_records("--plugin " + kFaults + filters, &shell);
  EXPECT_EQ(shell.status, 1) << shell.output;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.impl);
    int seen = 0;
    for (const auto& [id, rec] : recs) {
      if (rec.impl != "pyfault." + row.impl) continue;
      ++seen;
      EXPECT_EQ(rec.outcome, row.outcome) << id << ": " << rec.message;
      for (const auto& s : row.says) EXPECT_NE(rec.message.find(s), std::string::npos) << rec.message;
    }
    EXPECT_EQ(seen, 2) << shell.output;  // satfinite and nonsaturating
  }
  int built_in = 0;
  for (const auto& [id, rec] : recs)
    if (rec.impl == "host.cvt") {
      EXPECT_EQ(rec.outcome, Outcome::PASS) << id;
      ++built_in;
    }
  EXPECT_EQ(built_in, 2) << "the built-in cases ran beside the crashes";
}

// A failure's repro line names the module by its absolute path (a bare "faults.py" is a file
// in the folder the run started from) and reproduces the case from another folder.
TEST(PythonPlugin, TheReproLineRunsFromAnotherFolder) {
  REQUIRE_PYTHON_HOST();
  const auto dir = testutil::temp_dir();
  sh(std::string("cd ") + kSource + "/tests/python_plugins && " + kOpcts +
     " run --arch host --tier smoke --reruns 0 --no-ref-cache --plugin faults.py"
     " --filter 'cast.pyfault_lazy/fp32_to_e4m3fn_satfinite_*' --results " +
     dir + "/r.jsonl");
  const auto recs = read_results_file(dir + "/r.jsonl");
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_NE(recs[0].repro.find("--plugin '" + kFaults + "'"), std::string::npos) << recs[0].repro;
  EXPECT_TRUE(exits_with(sh("cd / && " + recs[0].repro), 1, "never written?"));
}

// A loop in Python and C code that never gives the GIL back: the worker is killed at --timeout.
TEST(PythonPlugin, AHangAndAHeldGilAreTimeouts) {
  REQUIRE_PYTHON_HOST();
  testutil::Shell shell;
  const auto recs = run_records("--timeout 2 --plugin " + kFaults +
                                    " --filter 'cast.pyfault_hang/fp32_to_e4m3fn_satfinite_*'"
                                    " --filter 'cast.pyfault_gil/fp32_to_e4m3fn_satfinite_*'"
                                    " --filter 'cast.host_cvt/fp32_to_e4m3fn_satfinite_*'",
                                &shell);
  EXPECT_EQ(shell.status, 1) << shell.output;
  ASSERT_EQ(recs.size(), 3u) << shell.output;
  for (const auto& [id, rec] : recs)
    EXPECT_EQ(rec.outcome, rec.impl == "host.cvt" ? Outcome::PASS : Outcome::TIMEOUT) << id << ": " << rec.message;
}

TEST(PythonPlugin, AModuleThatFailsToImportStopsTheRunWithItsTraceback) {
  REQUIRE_PYTHON_HOST();
  const std::string broken = kSource + "/tests/python_plugins/broken_import.py";
  for (const std::string cmd : {" run --arch host --tier smoke --filter 'cast.host_cvt/*'", " list --arch host"}) {
    const auto r = sh(kOpcts + cmd + " --plugin " + broken);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("plugin " + broken + " is not used: importing " + broken +
                            " raised NameError: name 'no_such_name' is not defined"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("broken_import.py\", line 7, in build_table"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("host.cvt"), std::string::npos) << "nothing ran";
  }
  EXPECT_TRUE(exits_with(sh(kOpcts + " list --arch host --plugin /no/such/kernels.py"), 2,
                         "no such Python file: /no/such/kernels.py"));
  EXPECT_TRUE(exits_with(sh(kOpcts + " list --arch host --plugin py:no_such_package.kernels"), 2,
                         "ModuleNotFoundError: No module named 'no_such_package'"));
  // --plugin-optional: left out with a warning, the built-ins run.
  EXPECT_TRUE(
      exits_with(sh(kOpcts + " list --arch host --tier smoke --filter 'cast.host_cvt/*' --plugin-optional " + broken),
                 0, "optional plugin left out"));
}

// The interpreter and the module: once per process that loads plugins (probes, workers), never
// per case. (--shrink-seconds 0: the run's last step would run the sampled failures again, in
// the parent process, which this count of one run a case does not expect.)
TEST(PythonPlugin, TheModuleIsImportedOncePerWorkerNeverPerCase) {
  REQUIRE_PYTHON_HOST();
  const auto dir = testutil::temp_dir();
  const std::string log = dir + "/imports.log";
  const auto r = sh("OPCTS_TEST_PY_LOG=" + log + " " + kOpcts +
                    " run --arch host --tier smoke --reruns 0 --no-ref-cache --shrink-seconds 0 --plugin " + kFaults +
                    " --filter 'cast.pyfault_counted/*' --results " + dir + "/r.jsonl");
  std::ifstream in(log);
  std::map<std::string, int> imports, runs;
  for (std::string what, pid; in >> what >> pid;) ++(what == "import" ? imports : runs)[pid];
  int cases = 0;
  for (const auto& rec : read_results_file(dir + "/r.jsonl")) cases += rec.outcome != Outcome::SKIP;
  int ran = 0;
  for (const auto& [pid, n] : runs) {
    EXPECT_EQ(imports[pid], 1) << "worker " << pid;
    ran += n;
  }
  EXPECT_EQ(ran, cases) << r.output;
  EXPECT_GE(cases, 70);
  EXPECT_LT(imports.size(), static_cast<size_t>(cases) / 4) << "probes and workers, not one a case";
}

}  // namespace
}  // namespace opcts
