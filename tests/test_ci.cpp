// CTest and CI glue: the ci/ templates parse and call only commands and flags that exist, the
// CTest glue's error test shows the real error, the test presets refuse an empty selection,
// and `--shard auto` reads the CI engines' variables.
#include <gtest/gtest.h>
#include <chrono>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.hpp"
#include "core/yaml_util.hpp"
#include "runner/suite.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::read_file;
using testutil::sh;
using testutil::Shell;

const fs::path kSource = OPCTS_SOURCE_DIR;

// Every string of a YAML document, depth first (the scripts of a CI file are among them).
void strings_of(const YAML::Node& n, std::string& out) {
  if (n.IsScalar()) out += n.Scalar() + "\n";
  if (n.IsSequence())
    for (const auto& x : n) strings_of(x, out);
  if (n.IsMap())
    for (const auto& kv : n) strings_of(kv.second, out);
}

// The options `opcts <subcommand...> --help` lists.
std::set<std::string> options_of(const std::string& subcommand) {
  const Shell r = sh(std::string(OPCTS_BINARY) + " " + subcommand + " --help");
  EXPECT_EQ(r.status, 0) << subcommand << ": " << r.output;
  std::set<std::string> out;
  const std::regex flag(R"((^|[\s,\[])(--[a-z][a-z0-9-]*))");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), flag), end; it != end; ++it) out.insert((*it)[2]);
  return out;
}

// Checks every opcts, cmake --preset and scripts/ call in a CI file's text: the subcommand and
// each of its flags exist, presets are configure or build presets, scripts are there.
void check_commands(const std::string& file, std::string text) {
  text = std::regex_replace(text, std::regex(R"(\\\n)"), " ");  // shell line continuations
  size_t opcts_calls = 0;
  std::istringstream lines(text);
  const auto presets = nlohmann::json::parse(read_file(kSource / "CMakePresets.json"));
  std::set<std::string> preset_names;
  for (const auto& p : presets["configurePresets"]) preset_names.insert(p["name"].get<std::string>());
  for (std::string line; std::getline(lines, line);) {
    for (size_t at = line.find("bin/opcts "); at != std::string::npos; at = line.find("bin/opcts ", at + 1)) {
      std::string cmd = line.substr(at + 10);
      cmd = cmd.substr(0, cmd.find_first_of("'|;&>"));
      std::istringstream words(cmd);
      std::vector<std::string> w;
      for (std::string x; words >> x;) w.push_back(x);
      ASSERT_FALSE(w.empty()) << file << ": " << line;
      const std::string sub = w[0] == "report" && w.size() > 1 ? "report " + w[1] : w[0];
      const auto known = options_of(sub);
      for (const auto& x : w)
        if (x.rfind("--", 0) == 0)
          EXPECT_TRUE(known.count(x.substr(0, x.find('=')))) << file << ": opcts " << sub << " has no option " << x;
      ++opcts_calls;
    }
    std::smatch m;
    for (std::string rest = line; std::regex_search(rest, m, std::regex(R"(--preset\s+([a-z0-9_-]+))"));
         rest = m.suffix())
      EXPECT_TRUE(preset_names.count(m[1])) << file << ": no preset " << m[1];
    for (std::string rest = line; std::regex_search(rest, m, std::regex(R"((scripts/[a-z0-9_-]+\.sh))"));
         rest = m.suffix())
      EXPECT_TRUE(fs::exists(kSource / std::string(m[1]))) << file << ": no " << m[1];
  }
  EXPECT_GE(opcts_calls, 3u) << file << ": expected opcts run, report merge and gate";
  for (const char* must : {"opcts run", "--shard auto", "opcts report merge", "--prefer-later", "opcts gate"})
    EXPECT_NE(text.find(must), std::string::npos) << file << " lacks '" << must << "'";
}

TEST(CiTemplates, GithubActionsShardsMergesAndGates) {
  const std::string path = (kSource / "ci/github-actions.yml").string();
  const YAML::Node w = load_yaml_file(path);
  const YAML::Node shard = w["jobs"]["shard"];
  ASSERT_TRUE(shard.IsMap());
  const size_t n = shard["strategy"]["matrix"]["shard"].size();
  EXPECT_EQ(std::to_string(n), shard["env"]["OPCTS_SHARD_COUNT"].Scalar());
  EXPECT_EQ(shard["env"]["OPCTS_SHARD_INDEX"].Scalar(), "${{ matrix.shard }}");
  const YAML::Node gate = w["jobs"]["gate"];
  EXPECT_EQ(gate["needs"].Scalar(), "shard");
  EXPECT_EQ(gate["if"].Scalar(), "always()");
  bool uploads_always = false;
  for (const auto& step : shard["steps"])
    uploads_always =
        uploads_always || (step["uses"] && step["uses"].Scalar().rfind("actions/upload-artifact", 0) == 0 &&
                           step["if"] && step["if"].Scalar() == "always()");
  EXPECT_TRUE(uploads_always) << "a failing shard must still upload its reports and failure artifacts";
  std::string text;
  strings_of(w, text);
  EXPECT_NE(text.find(">> \"$GITHUB_STEP_SUMMARY\""), std::string::npos);
  check_commands(path, text);
}

// A cases folder with the real archs and tolerances, an empty host manifest and the three
// tiny problems of testutil::kTinyCatalog: what the templates' commands run over on the host. The
// real tolerances name sdpa's dbias and fp8 q, k, v, which a rule may only name where a loaded
// case has them: one such problem each, the dbias one at the full tier, which the templates' smoke
// runs do not select, and the fp8 one at the smoke tier, the one problem host.normalised_p_fp8
// (cuDNN's fp8 arithmetic) takes: an impl that runs no case of a selection fails the gate.
// host.flash runs all four problems, host.normalised_p_fp8 one and SKIPs three: kTinyCiRecords.
constexpr size_t kTinyCiRecords = 8;
std::string tiny_cases_dir(const std::string& dir) {
  const std::string cases = dir + "/cases";
  fs::create_directories(cases + "/manifests");
  fs::copy_file(kSource / "cases/archs.yaml", cases + "/archs.yaml");
  fs::copy_file(kSource / "cases/tolerances.yaml", cases + "/tolerances.yaml");
  testutil::write(cases + "/manifests", "host.yaml", "arch: host\n");
  testutil::write(cases, "sdpa.yaml", testutil::kTinyCatalog);
  testutil::write(cases, "sdpa_dbias.yaml",
                  "family: sdpa\ngrids:\n  - name: dbias\n    tier: full\n    why: the tolerances' dbias rules\n"
                  "    axes: {dtype: [bf16], heads: [2], seq: [8], head_dim: [16], attn_mask: [additive],\n"
                  "           dbias: [true], direction: [backward]}\n");
  testutil::write(
      cases, "sdpa_fp8.yaml",
      "family: sdpa\ngrids:\n  - name: fp8\n    tier: smoke\n    why: the tolerances' fp8 rules\n"
      "    axes: {dtype: [bf16], heads: [2], seq: [8], head_dim: [16], fp8: [{tensors: qkv, out: e4m3fn}]}\n");
  return cases;
}

// Runs a template's opcts commands as its engine would, on the host: `scripts` in order, in
// `dir`, with `env` (the engine's variables) and this build's opcts for build/{cuda,host}/bin/opcts.
Shell run_template_commands(const std::string& dir, const std::string& env, const std::vector<std::string>& scripts) {
  std::string all;
  for (const std::string& s : scripts)
    all +=
        std::regex_replace(s, std::regex(R"((^|[^/])build/(cuda|host)/bin/opcts)"), std::string("$1") + OPCTS_BINARY) +
        "\n";
  testutil::write(dir, "steps.sh", "set -e\n" + all);
  // The engine's shard variables only as the caller sets them (set but empty is an error).
  return sh("cd " + dir + " && env -u OPCTS_SHARD_INDEX -u OPCTS_SHARD_COUNT -u CI_NODE_INDEX -u CI_NODE_TOTAL " +
            "OPCTS_ARCH=host OPCTS_TIER=smoke OPCTS_CASES_DIR=" + dir + "/cases " + env + " bash steps.sh");
}

// The GitHub Actions template's shard, merge and gate commands run on the host: four shards
// (one empty), their artifacts downloaded as the merge job gets them (a folder per artifact),
// then merge, step summary and gate pass; with one shard's reports lost the gate fails.
TEST(CiTemplates, GithubActionsCommandsRunMergeAndGateOnTheHost) {
  const std::string dir = testutil::temp_dir();
  tiny_cases_dir(dir);
  const YAML::Node w = load_yaml_file((kSource / "ci/github-actions.yml").string());
  const auto step = [&](const char* job, const std::string& name) {
    for (const auto& s : w["jobs"][job]["steps"])
      if (s["name"] && s["name"].Scalar() == name) return s["run"].Scalar();
    ADD_FAILURE() << "no step '" << name << "' in job " << job;
    return std::string();
  };
  const std::string count = w["jobs"]["shard"]["env"]["OPCTS_SHARD_COUNT"].Scalar();
  for (int i = 1; i <= std::stoi(count); ++i) {
    const std::string shard = dir + "/shard" + std::to_string(i);
    fs::create_directories(shard);
    fs::create_directory_symlink(dir + "/cases", shard + "/cases");
    const Shell r =
        run_template_commands(shard, "OPCTS_SHARD_INDEX=" + std::to_string(i) + " OPCTS_SHARD_COUNT=" + count,
                              {step("shard", "Run the shard")});
    ASSERT_EQ(r.status, 0) << r.output;
    fs::create_directories(dir + "/reports");
    fs::rename(shard + "/reports", dir + "/reports/opcts-shard-" + std::to_string(i));
  }
  const std::string merge_and_gate = "GITHUB_STEP_SUMMARY=" + dir + "/step_summary.md";
  const Shell ok = run_template_commands(dir, merge_and_gate, {step("gate", "Merge"), step("gate", "Gate")});
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_EQ(read_results_file(dir + "/merged/results.jsonl").size(), kTinyCiRecords);
  EXPECT_NE(read_file(dir + "/step_summary.md").find("PASS"), std::string::npos);
  // A shard whose reports are lost: its cases are MISSING to the gate.
  for (int i = 1; i <= std::stoi(count); ++i) {
    const fs::path shard = dir + "/reports/opcts-shard-" + std::to_string(i);
    if (fs::exists(shard / ("shard" + std::to_string(i) + ".jsonl")) &&
        !read_results_file((shard / ("shard" + std::to_string(i) + ".jsonl")).string()).empty()) {
      fs::remove_all(shard);
      break;
    }
  }
  const Shell lost = run_template_commands(dir, merge_and_gate, {step("gate", "Merge"), step("gate", "Gate")});
  EXPECT_NE(lost.status, 0) << lost.output;
  EXPECT_NE(lost.output.find("MISSING"), std::string::npos) << lost.output;
}

// The GitLab template's shard scripts (`parallel:` sets CI_NODE_INDEX/CI_NODE_TOTAL; the
// artifacts of every shard land in one reports/ folder), then the gate job's, on the host.
TEST(CiTemplates, GitlabCommandsRunMergeAndGateOnTheHost) {
  const std::string dir = testutil::temp_dir();
  tiny_cases_dir(dir);
  const YAML::Node g = load_yaml_file((kSource / "ci/gitlab-ci.yml").string());
  const auto opcts_lines = [&](const char* job) {
    std::vector<std::string> out;
    for (const auto& line : g[job]["script"])
      if (line.Scalar().find("bin/opcts") != std::string::npos) out.push_back(line.Scalar());
    return out;
  };
  const int total = g["opcts-shard"]["parallel"].as<int>();
  for (int i = 1; i <= total; ++i) {
    const Shell r =
        run_template_commands(dir, "CI_NODE_INDEX=" + std::to_string(i) + " CI_NODE_TOTAL=" + std::to_string(total),
                              opcts_lines("opcts-shard"));
    ASSERT_EQ(r.status, 0) << r.output;
  }
  const Shell ok = run_template_commands(dir, "", opcts_lines("opcts-gate"));
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_EQ(read_results_file(dir + "/merged/results.jsonl").size(), kTinyCiRecords);
}

TEST(CiTemplates, GitlabParallelShardsWithJunitReports) {
  const std::string path = (kSource / "ci/gitlab-ci.yml").string();
  const YAML::Node g = load_yaml_file(path);
  const YAML::Node shard = g["opcts-shard"];
  ASSERT_TRUE(shard.IsMap());
  EXPECT_GE(shard["parallel"].as<int>(), 2);
  EXPECT_EQ(shard["artifacts"]["when"].Scalar(), "always");
  EXPECT_TRUE(shard["artifacts"]["reports"]["junit"].IsScalar());
  EXPECT_EQ(g["opcts-gate"]["needs"][0].Scalar(), "opcts-shard");
  std::set<std::string> stages;
  for (const auto& s : g["stages"]) stages.insert(s.Scalar());
  for (const char* job : {"opcts-shard", "opcts-gate"}) EXPECT_TRUE(stages.count(g[job]["stage"].Scalar())) << job;
  std::string text;
  strings_of(g, text);
  check_commands(path, text);
}

TEST(CiTemplates, JenkinsfilePublishesJunitAndGates) {
  const fs::path path = kSource / "ci/Jenkinsfile";
  const std::string text = read_file(path);
  // Balanced braces and parentheses outside strings and comments: a cheap syntax check.
  int braces = 0, parens = 0;
  bool in_single = false, in_double = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!in_single && !in_double && c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    if (c == '\'' && !in_double) in_single = !in_single;
    if (c == '"' && !in_single) in_double = !in_double;
    if (in_single || in_double) continue;
    braces += (c == '{') - (c == '}');
    parens += (c == '(') - (c == ')');
    ASSERT_GE(braces, 0) << "at byte " << i;
  }
  EXPECT_EQ(braces, 0);
  EXPECT_EQ(parens, 0);
  EXPECT_FALSE(in_single || in_double);
  EXPECT_NE(text.find("junit testResults:"), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(values ('[0-9]+'(, '[0-9]+')*))")));
  const size_t shards = std::count(m[1].first, m[1].second, ',') + 1;
  EXPECT_NE(text.find("OPCTS_SHARD_COUNT = '" + std::to_string(shards) + "'"), std::string::npos);
  check_commands(path.string(), text);
}

// Each task of the Slurm array runs its own shard (SLURM_ARRAY_TASK_ID from --array=1-N, with
// SLURM_ARRAY_TASK_MIN and _COUNT as sbatch sets them), then the gate mode merges and gates;
// the file's commands and flags exist, its array length is its shard count.
TEST(CiTemplates, SlurmArrayShardsMergesAndGates) {
  const fs::path path = kSource / "ci/slurm.sh";
  const std::string text = read_file(path);
  check_commands(path.string(), text);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(#SBATCH --array=1-([0-9]+))")));
  const int tasks = std::stoi(m[1]);
  EXPECT_EQ(sh("bash -n " + path.string()).status, 0);
  const std::string dir = testutil::temp_dir();
  tiny_cases_dir(dir);
  testutil::write(dir, "slurm.sh",
                  std::regex_replace(text, std::regex(R"(build/cuda/bin/opcts)"), std::string(OPCTS_BINARY)));
  const std::string env = "cd " + dir +
                          " && env -u OPCTS_SHARD_INDEX -u OPCTS_SHARD_COUNT -u CI_NODE_INDEX -u CI_NODE_TOTAL "
                          "OPCTS_ARCH=host OPCTS_TIER=smoke OPCTS_CASES_DIR=" +
                          dir + "/cases ";
  size_t cases = 0;
  std::string nonempty;
  for (int i = 1; i <= tasks; ++i) {
    const std::string id = std::to_string(i);
    const Shell r = sh(env + "SLURM_ARRAY_TASK_ID=" + id + " SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=" +
                       std::to_string(tasks) + " bash slurm.sh shard");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("shard " + id + "/" + std::to_string(tasks)), std::string::npos) << r.output;
    const size_t n = read_results_file(dir + "/reports/shard" + id + ".jsonl").size();
    if (n && nonempty.empty()) nonempty = id;
    cases += n;
  }
  EXPECT_EQ(cases, kTinyCiRecords);  // each case in exactly one task's shard
  const Shell ok = sh(env + "bash slurm.sh gate");
  EXPECT_EQ(ok.status, 0) << ok.output;
  // A task whose reports are lost: its cases are MISSING to the gate.
  ASSERT_FALSE(nonempty.empty());
  fs::remove(dir + "/reports/shard" + nonempty + ".jsonl");
  fs::remove(dir + "/reports/shard" + nonempty + ".xml");
  fs::remove_all(dir + "/merged");
  const Shell lost = sh(env + "bash slurm.sh gate");
  EXPECT_NE(lost.status, 0) << lost.output;
  EXPECT_NE(lost.output.find("MISSING"), std::string::npos) << lost.output;
}

// Each index of the Kubernetes Indexed Job runs its own shard (JOB_COMPLETION_INDEX from 0 with
// OPCTS_SHARD_COUNT = completions), the suspended gate Job merges and gates.
TEST(CiTemplates, KubernetesIndexedJobShardsMergesAndGates) {
  const std::string path = (kSource / "ci/kubernetes-job.yaml").string();
  const YAML::Node list = load_yaml_file(path);
  std::vector<YAML::Node> indexed, others;
  for (const auto& item : list["items"])
    if (item["kind"].Scalar() == "Job") (item["spec"]["completionMode"] ? indexed : others).push_back(YAML::Node(item));
  ASSERT_EQ(indexed.size(), 1u);
  ASSERT_EQ(others.size(), 1u);
  const YAML::Node shards = indexed[0], gate = others[0];
  EXPECT_EQ(shards["spec"]["completionMode"].Scalar(), "Indexed");
  EXPECT_TRUE(gate["spec"]["suspend"].as<bool>()) << "the gate must wait until the shards are done";
  const int n = shards["spec"]["completions"].as<int>();
  EXPECT_EQ(shards["spec"]["parallelism"].as<int>(), n);
  const YAML::Node shard_c = shards["spec"]["template"]["spec"]["containers"][0];
  std::map<std::string, std::string> env;
  for (const auto& e : shard_c["env"]) env[e["name"].Scalar()] = e["value"].Scalar();
  EXPECT_EQ(env.at("OPCTS_SHARD_COUNT"), std::to_string(n));
  EXPECT_EQ(shard_c["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 1);
  std::string text;
  strings_of(list, text);
  check_commands(path, text);
  const std::string dir = testutil::temp_dir();
  tiny_cases_dir(dir);
  const auto script = [](const YAML::Node& job) {
    return std::regex_replace(job["spec"]["template"]["spec"]["containers"][0]["command"][2].Scalar(),
                              std::regex(R"(/usr/bin/opcts)"), std::string(OPCTS_BINARY));
  };
  const std::string env_line = "cd " + dir +
                               " && mkdir -p reports && env -u OPCTS_SHARD_INDEX -u CI_NODE_INDEX -u CI_NODE_TOTAL "
                               "OPCTS_ARCH=host OPCTS_TIER=smoke OPCTS_SHARD_COUNT=" +
                               std::to_string(n) + " OPCTS_CASES_DIR=" + dir + "/cases ";
  size_t cases = 0;
  for (int i = 0; i < n; ++i) {
    const Shell r =
        sh(env_line + "JOB_COMPLETION_INDEX=" + std::to_string(i) + " bash -c " + shell_quote(script(shards)));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("shard " + std::to_string(i + 1) + "/" + std::to_string(n)), std::string::npos) << r.output;
    cases += read_results_file(dir + "/reports/shard" + std::to_string(i) + ".jsonl").size();
  }
  EXPECT_EQ(cases, kTinyCiRecords);
  const Shell ok = sh(env_line + "bash -c " + shell_quote(script(gate)));
  EXPECT_EQ(ok.status, 0) << ok.output;
}

// When `opcts ctest-tests` fails as ctest starts, one test fails and its output is the real
// error, with no cmake needed on the machine (tests/../cmake/ctest_shards.cmake).
TEST(CtestGlue, AFailingPlanIsOneFailingTestShowingTheError) {
  const std::string dir = testutil::temp_dir();
  testutil::write(dir, "CTestTestfile.cmake", std::string("include(\"") + OPCTS_SHARDS_SCRIPT + "\")\n");
  const Shell r =
      sh("cd " + dir + " && OPCTS_CASES_DIR=" + dir + "/no_such_cases ctest --output-on-failure --no-tests=error");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("opcts.ctest_glue_error"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Unable to find executable"), std::string::npos) << r.output;
  // Printed as ctest starts (CMake wraps the warning's lines) and by the failing test itself.
  EXPECT_NE(r.output.find("opcts ctest-tests failed (2)"), std::string::npos) << r.output;
  EXPECT_NE(
      r.output.find("opcts: error: no cases folder at " + dir + "/no_such_cases (--cases-dir, else $OPCTS_CASES_DIR"),
      std::string::npos)
      << r.output;
}

// One host smoke shard of a bad plugin's cases, planned by `ctest-tests` with `flag` or without it
// and run by ctest: its result with the flag, then without.
std::pair<Shell, Shell> shard_with_and_without(const std::string& plugin, const std::string& filter,
                                               const std::string& flag) {
  EXPECT_NE(read_file(OPCTS_SHARDS_SCRIPT).find("\"" + flag + "\""), std::string::npos) << OPCTS_SHARDS_SCRIPT;
  const std::string dir = testutil::temp_dir();
  std::vector<Shell> results;
  for (const bool with : {true, false}) {
    const std::string sub = dir + (with ? "/with" : "/without");
    fs::create_directories(sub);
    const Shell glue =
        sh(std::string(OPCTS_BINARY) + " ctest-tests --archs host --tier smoke --shards 1 --exe " + OPCTS_BINARY +
           " --reports-dir " + sub + "/reports --out " + sub + "/tests.cmake --plugin " +
           std::string(OPCTS_BAD_PLUGIN_DIR) + "/" + plugin + " --filter '" + filter + "'" + (with ? " " + flag : ""));
    EXPECT_EQ(glue.status, 0) << glue.output;
    testutil::write(sub, "CTestTestfile.cmake", "include(\"" + sub + "/tests.cmake\")\n");
    results.push_back(sh("cd " + sub + " && ctest --output-on-failure --no-tests=error"));
  }
  return {results[0], results[1]};
}

// The CTest shards check determinism (OPCTS_CTEST_BITWISE, on by default): an impl that claims
// determinism and gives other bytes on a second run (tests/plugins/bad_plugin.c, unstable: every
// result within its bound) fails its shard; the same shards without --bitwise pass it.
TEST(CtestGlue, ShardsRunTheDeterminismChecksAndFailAnImplThatBreaksItsClaim) {
  const auto [with, without] = shard_with_and_without("unstable.so", "scatter_add.bad_unstable_scatter/*", "--bitwise");
  EXPECT_NE(with.status, 0) << with.output;
  EXPECT_NE(with.output.find("differs between two runs of a deterministic impl"), std::string::npos) << with.output;
  EXPECT_EQ(without.status, 0) << without.output;
}

// The CTest shards hold the impls to their invariance claims too (OPCTS_CTEST_INVARIANCE, on by
// default): each shard test's command line carries --invariance when asked, and only then.
TEST(CtestGlue, ShardsRunTheInvarianceChecksWhenAsked) {
  EXPECT_NE(read_file(OPCTS_SHARDS_SCRIPT).find("\"--invariance\""), std::string::npos) << OPCTS_SHARDS_SCRIPT;
  const std::string dir = testutil::temp_dir();
  for (const bool invariance : {false, true}) {
    const std::string out = dir + (invariance ? "/with.cmake" : "/without.cmake");
    const Shell glue =
        sh(std::string(OPCTS_BINARY) + " ctest-tests --archs host --tier smoke --shards 2 --exe " + OPCTS_BINARY +
           " --reports-dir " + dir + "/reports --out " + out + (invariance ? " --invariance" : ""));
    ASSERT_EQ(glue.status, 0) << glue.output;
    const std::string tests = read_file(out);
    EXPECT_NE(tests.find("shard1of2"), std::string::npos) << tests;
    EXPECT_EQ(tests.find("--invariance") != std::string::npos, invariance) << tests;
  }
}

// The CTest shards record and replay every run (OPCTS_CTEST_CAPTURE, on by default): a plugin that
// keeps its result with its buffers' addresses (tests/plugins/bad_plugin.c, replay_cache: a plain
// run of one case is right) fails its shard as stale_capture; the same shard without --capture
// passes it. One case: the next case's buffers may land at the addresses the last one freed, where
// the kept result is another problem's (a plain run's failure, and this plugin's real bug).
TEST(CtestGlue, ShardsRecordAndReplayEachRunAndFailAKeptResult) {
  const auto [with, without] =
      shard_with_and_without("replay_cache.so", "scatter_add.bad_replay_cache/fp32_i64_n37_m301_uniform", "--capture");
  EXPECT_NE(with.status, 0) << with.output;
  EXPECT_NE(with.output.find("gave the very bytes it gave on the inputs it was recorded with"), std::string::npos)
      << with.output;
  EXPECT_EQ(without.status, 0) << without.output;
}

// The nightly memcheck slice (--memcheck-slices N): one test per CUDA arch, none for the host or
// a HIP arch, running the day's shard under --sanitize memcheck, labelled so that `ctest -L sm90`
// (a regex over labels) leaves it out; the build asks for it.
TEST(CtestGlue, NightlyMemcheckSliceIsTheDaysShardOutsideTheArchLabel) {
  EXPECT_NE(read_file(OPCTS_SHARDS_SCRIPT).find("\"--memcheck-slices\""), std::string::npos) << OPCTS_SHARDS_SCRIPT;
  const std::string dir = testutil::temp_dir();
  const auto plan = [&](int slices) {
    const Shell r =
        sh(std::string(OPCTS_BINARY) + " ctest-tests --archs host,sm90,gfx942 --tier smoke --shards 2 --exe " +
           OPCTS_BINARY + " --reports-dir " + dir + "/reports --out " + dir + "/tests.cmake --memcheck-slices " +
           std::to_string(slices));
    EXPECT_EQ(r.status, 0) << r.output;
    return read_file(dir + "/tests.cmake");
  };
  const auto day = [] { return std::chrono::system_clock::now().time_since_epoch() / std::chrono::hours(24); };
  const auto before = day();
  const std::string text = plan(7);
  const auto after = day();  // ctest-tests ran between the two (a midnight may pass)
  std::vector<std::string> memcheck;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.find("memcheck") != std::string::npos) memcheck.push_back(line);
  ASSERT_EQ(memcheck.size(), 2u) << text;  // add_test and its properties, for sm90 alone
  bool today = false;
  for (auto d = before; d <= after; ++d) {
    const std::string i = std::to_string(d % 7 + 1);
    today = today || memcheck[0].find("add_test(opcts.sm90.memcheck.slice" + i + "of7 ") == 0 &&
                         memcheck[0].find(" --shard " + i + "/7 --sanitize memcheck ") != std::string::npos;
  }
  EXPECT_TRUE(today) << memcheck[0];
  EXPECT_NE(memcheck[1].find("LABELS \"memcheck;nightly\""), std::string::npos) << memcheck[1];
  EXPECT_NE(memcheck[1].find("RESOURCE_GROUPS \"gpus:1\""), std::string::npos) << memcheck[1];
  EXPECT_NE(text.find("opcts.sm90.cast.shard2of2"), std::string::npos) << text;  // the shards stay
  EXPECT_EQ(plan(0).find("memcheck"), std::string::npos);
}

TEST(CtestGlue, TestPresetsAndReadmeRefuseAnEmptySelection) {
  const auto presets = nlohmann::json::parse(read_file(kSource / "CMakePresets.json"));
  ASSERT_FALSE(presets["testPresets"].empty());
  for (const auto& p : presets["testPresets"]) EXPECT_EQ(p["execution"]["noTestsAction"], "error") << p["name"];
  size_t recipes = 0;
  for (const fs::path page : {kSource / "README.md", kSource / "docs/ci.md", kSource / "docs/amd.md"}) {
    std::istringstream text(read_file(page));
    for (std::string line; std::getline(text, line);)
      if (line.rfind("ctest ", 0) == 0) {
        ++recipes;
        EXPECT_NE(line.find("--no-tests=error"), std::string::npos) << page << ": " << line;
      }
  }
  EXPECT_GE(recipes, 2u);
}

TEST(ShardAuto, ReadsTheCiEnginesVariables) {
  const std::string list = std::string(OPCTS_BINARY) + " list --arch host --tier smoke --family cast --shard ";
  const Shell want = sh("env -u CI_NODE_INDEX -u CI_NODE_TOTAL " + list + "2/3");
  ASSERT_EQ(want.status, 0) << want.output;
  EXPECT_EQ(sh("OPCTS_SHARD_INDEX=2 OPCTS_SHARD_COUNT=3 " + list + "auto").output, want.output);
  EXPECT_EQ(sh("env -u OPCTS_SHARD_INDEX -u OPCTS_SHARD_COUNT CI_NODE_INDEX=2 CI_NODE_TOTAL=3 " + list + "auto").output,
            want.output);
  const Shell none =
      sh("env -u OPCTS_SHARD_INDEX -u OPCTS_SHARD_COUNT -u CI_NODE_INDEX -u CI_NODE_TOTAL " + list + "auto");
  EXPECT_EQ(none.output, sh(list + "1/1").output);
  const Shell half =
      sh("env -u OPCTS_SHARD_COUNT -u CI_NODE_INDEX -u CI_NODE_TOTAL OPCTS_SHARD_INDEX=2 " + list + "auto");
  EXPECT_EQ(half.status, 2);
  EXPECT_NE(half.output.find("OPCTS_SHARD_COUNT is not set"), std::string::npos) << half.output;
  const Shell bad = sh("OPCTS_SHARD_INDEX=4 OPCTS_SHARD_COUNT=3 " + list + "auto");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("OPCTS_SHARD_INDEX=4"), std::string::npos) << bad.output;
  // Set but empty (a CI variable that did not expand) once meant 1/1: every shard ran everything.
  const Shell empty =
      sh("env -u CI_NODE_INDEX -u CI_NODE_TOTAL OPCTS_SHARD_INDEX= OPCTS_SHARD_COUNT= " + list + "auto");
  EXPECT_EQ(empty.status, 2) << empty.output;
  EXPECT_NE(empty.output.find("OPCTS_SHARD_INDEX is set but empty"), std::string::npos) << empty.output;
}

// Slurm job arrays (the task's place in --array=MIN-MAX:STEP) and Kubernetes Indexed Jobs
// (JOB_COMPLETION_INDEX from 0, the count from OPCTS_SHARD_COUNT) pick the same shard as i/N.
TEST(ShardAuto, ReadsSlurmArraysAndKubernetesIndexedJobs) {
  const std::string clean =
      "env -u OPCTS_SHARD_INDEX -u OPCTS_SHARD_COUNT -u CI_NODE_INDEX -u CI_NODE_TOTAL "
      "-u JOB_COMPLETION_INDEX -u SLURM_ARRAY_TASK_ID -u SLURM_ARRAY_TASK_COUNT "
      "-u SLURM_ARRAY_TASK_MIN -u SLURM_ARRAY_TASK_STEP ";
  const std::string list = std::string(OPCTS_BINARY) + " list --arch host --tier smoke --family cast --shard ";
  const Shell want = sh(clean + list + "2/3");
  ASSERT_EQ(want.status, 0) << want.output;
  ASSERT_NE(want.output, sh(clean + list + "1/3").output);
  // --array=1-3, --array=0-2 and --array=10-14:2 (tasks 10, 12, 14): the second task each time.
  EXPECT_EQ(sh(clean + "SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=3 " + list + "auto").output,
            want.output);
  EXPECT_EQ(sh(clean + "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_COUNT=3 " + list + "auto").output,
            want.output);
  EXPECT_EQ(
      sh(clean + "SLURM_ARRAY_TASK_ID=12 SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_STEP=2 SLURM_ARRAY_TASK_COUNT=3 " +
         list + "auto")
          .output,
      want.output);
  EXPECT_EQ(sh(clean + "JOB_COMPLETION_INDEX=1 OPCTS_SHARD_COUNT=3 " + list + "auto").output, want.output);
  const Shell no_count = sh(clean + "JOB_COMPLETION_INDEX=1 " + list + "auto");
  EXPECT_EQ(no_count.status, 2);
  EXPECT_NE(no_count.output.find("JOB_COMPLETION_INDEX is set but OPCTS_SHARD_COUNT is not"), std::string::npos)
      << no_count.output;
  const Shell past = sh(clean + "JOB_COMPLETION_INDEX=3 OPCTS_SHARD_COUNT=3 " + list + "auto");
  EXPECT_EQ(past.status, 2);
  EXPECT_NE(past.output.find("JOB_COMPLETION_INDEX=3"), std::string::npos) << past.output;
  const Shell half = sh(clean + "SLURM_ARRAY_TASK_ID=2 " + list + "auto");
  EXPECT_EQ(half.status, 2);
  EXPECT_NE(half.output.find("SLURM_ARRAY_TASK_COUNT is not set"), std::string::npos) << half.output;
  const Shell off_step = sh(clean +
                            "SLURM_ARRAY_TASK_ID=11 SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_STEP=2 "
                            "SLURM_ARRAY_TASK_COUNT=3 " +
                            list + "auto");
  EXPECT_EQ(off_step.status, 2) << off_step.output;
}

// `list -v` answers for every case, on any machine: a GPU arch listed where there is no GPU (a
// CI planner) gets each impl's own answer, "undecided here: <why>" where the impl cannot tell
// without its device, instead of stopping at the first CUDA row (it exited 2 at scaled_mm).
TEST(ListVerbose, EveryCaseGetsAnAnswerWithoutTheGpu) {
  const std::string list = std::string(OPCTS_BINARY) + " list --arch sm90 --tier smoke";
  const Shell count = sh(list + " --count 2>/dev/null");
  ASSERT_EQ(count.status, 0) << count.output;
  const Shell v = sh(list + " -v 2>/dev/null");
  ASSERT_EQ(v.status, 0) << v.output.substr(0, 2000);
  std::istringstream lines(v.output);
  size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const auto tab = line.rfind('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    const std::string what = line.substr(tab + 1);
    EXPECT_TRUE(what.rfind("run", 0) == 0 || what.rfind("SKIP: ", 0) == 0 || what.rfind("undecided here: ", 0) == 0)
        << line;
  }
  EXPECT_EQ(std::to_string(n) + "\n", count.output);
}

TEST(Bounds, ShardsAndRerunsAreBounded) {
  const std::string opcts = OPCTS_BINARY;
  for (const std::string shard : {"1/100000000", "1/2147483647", "1/1025"}) {
    const Shell r = sh(opcts + " list --arch host --tier smoke --shard " + shard);
    EXPECT_EQ(r.status, 2) << shard;
    EXPECT_NE(r.output.find("at most 1024"), std::string::npos) << r.output;
  }
  const Shell reruns = sh(opcts + " run --arch host --tier smoke --family cast --reruns 100000000");
  EXPECT_EQ(reruns.status, 2);
  EXPECT_NE(reruns.output.find("--reruns must be from 0 to 100"), std::string::npos) << reruns.output;
  const Shell ctest = sh(opcts + " ctest-tests --archs host --shards 5000 --exe x --reports-dir y --out " +
                         testutil::temp_dir() + "/t.cmake");
  EXPECT_EQ(ctest.status, 2);
  EXPECT_NE(ctest.output.find("--shards must be from 1 to 1024"), std::string::npos) << ctest.output;
}

}  // namespace
}  // namespace opcts
