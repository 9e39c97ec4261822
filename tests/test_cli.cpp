// The command line as a user meets it: --version, defaults in --help, suggestions for typos,
// errors that say what to do, the non-TTY heartbeat, repro lines that paste and run.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "app/cli_suggest.hpp"
#include "core/result.hpp"
#include "reports/html.hpp"
#include "runner/suite.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::contains_all;
using testutil::exits_with;
using testutil::sh;
using testutil::Shell;

const std::string kOpcts = OPCTS_BINARY;

// `opcts run --arch host --tier smoke <args>` from folder dir, its results in dir/r.jsonl (no
// reference cache: each test computes its own references).
Shell run_in(const std::string& dir, const std::string& args) {
  return sh("cd " + dir + " && " + kOpcts + " run --arch host --tier smoke " + args +
            " --results r.jsonl --no-ref-cache");
}

TEST(CliVersion, NamesVersionCommitBuildAndCases) {
  const Shell r = sh(kOpcts + " --version");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(^opcts [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-z-]+\))")))
      << r.output;
  for (const char* line : {"\nbuild:  ", "\nCUDA:   ", "\ncuDNN:  ", "\nHIP:    ", "\ncases:  "})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  EXPECT_NE(r.output.find("cases:  " + std::string(OPCTS_BINARY_DIR) + "/share/opcts/cases"), std::string::npos)
      << r.output;
}

TEST(CliHelp, ShowsTheDefaults) {
  const Shell run = sh(kOpcts + " run --help");
  ASSERT_EQ(run.status, 0) << run.output;
  for (const char* want : {"--timeout FLOAT=600", "--reruns INT=1", "--tier TEXT=default", "--arch TEXT=auto",
                           "--shard TEXT=1/1", "--junit-properties TEXT=lean", "--ref-cache-max-gib FLOAT=4"})
    EXPECT_NE(run.output.find(want), std::string::npos) << want << "\n" << run.output;
}

TEST(CliSuggest, EditDistanceAndClosestName) {
  EXPECT_EQ(cli::edit_distance("lst", "list"), 1u);
  EXPECT_EQ(cli::edit_distance("", "abc"), 3u);
  EXPECT_EQ(cli::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(cli::closest_name("--filtr", {"--filter", "--family"}), "--filter");
  EXPECT_EQ(cli::closest_name("--inc", {"--include-planted", "--tier"}), "--include-planted");
  EXPECT_EQ(cli::closest_name("xyzzy", {"list", "run"}), "");
}

TEST(CliSuggest, MistypedSubcommandsAndFlagsGetASuggestion) {
  EXPECT_TRUE(exits_with(sh(kOpcts + " lst --arch host"), 2, "did you mean 'list'?"));
  EXPECT_TRUE(exits_with(sh(kOpcts + " report merg x.jsonl"), 2, "did you mean 'merge'?"));
  const Shell flag = sh(kOpcts + " run --arch host --tier smoke --filtr 'cast.*'");
  EXPECT_EQ(flag.status, 2);
  EXPECT_NE(flag.output.find("unknown option --filtr of opcts run; did you mean --filter?"), std::string::npos)
      << flag.output;
  EXPECT_TRUE(exits_with(sh(kOpcts + " list --tierr=smoke"), 2, "did you mean --tier?"));
}

// No output flag: the merge would write nothing and succeed; it is an error instead.
TEST(CliMerge, WithoutAnOutputIsAnError) {
  const std::string dir = testutil::temp_dir();
  testutil::write(dir, "r.jsonl", to_json_line(testutil::passing_record()) + "\n");
  EXPECT_TRUE(exits_with(sh(kOpcts + " report merge " + dir + "/r.jsonl"), 2,
                         "report merge writes nothing: give --junit, --summary or --results"));
}

// Where there is no NVIDIA GPU, the CUDA runtime's "driver version is insufficient" reads as a
// version problem: opcts says there is no GPU.
TEST(CliNoGpu, ReproAndListSayNoNvidiaGpuFound) {
  if (fs::exists("/proc/driver/nvidia/version")) GTEST_SKIP() << "this machine has an NVIDIA driver";
  const Shell repro = sh(kOpcts + " repro 'sdpa.cuda_flash/bf16_b1_hq4_hkv4_sq6_sk4_d64_causal_lr' --arch sm90");
  EXPECT_EQ(repro.output.find("insufficient"), std::string::npos) << repro.output;
  const Shell version = sh(kOpcts + " --version");
  if (version.output.find("CUDA:   CUDA ") == std::string::npos) GTEST_SKIP() << "built without CUDA: " << repro.output;
  EXPECT_NE(repro.output.find("no NVIDIA GPU found"), std::string::npos) << repro.output;
  const Shell list = sh(kOpcts + " list -v --arch sm90 --tier smoke --family grouped_mm 2>&1");
  EXPECT_EQ(list.output.find("insufficient"), std::string::npos) << list.output.substr(0, 2000);
  EXPECT_NE(list.output.find("no NVIDIA GPU found"), std::string::npos) << list.output.substr(0, 2000);
}

// `list -v` with a run mode's flag shows what a run with it would do: the plants whose bug only that
// mode shows run instead of SKIP (one plant per mode).
TEST(CliList, RunModeFlagsLetTheirPlantsRun) {
  const std::vector<std::pair<std::string, std::string>> plants = {
      {"--bitwise", "scatter_add.host_omp_unstable/*"},
      {"--invariance", "sdpa.host_flash_batch_variant_tiles/*"},
      {"--capture", "scaled_mm.host_emulated_scales_at_capture/*"}};
  for (const auto& [flag, filter] : plants) {
    const std::string list = kOpcts + " list -v --arch host --tier smoke --include-planted --filter '" + filter + "'";
    const Shell without = sh(list), with = sh(list + " " + flag);
    ASSERT_EQ(with.status, 0) << with.output;
    EXPECT_NE(without.output.find("which only opcts run " + flag + " shows"), std::string::npos) << flag;
    EXPECT_EQ(without.output.find("\trun"), std::string::npos) << flag << "\n" << without.output.substr(0, 2000);
    EXPECT_EQ(with.output.find("which only opcts run " + flag + " shows"), std::string::npos) << flag;
    EXPECT_NE(with.output.find("\trun"), std::string::npos) << flag << "\n" << with.output.substr(0, 2000);
  }
}

// No HIP row's SKIP reason cites the project's own issue numbers.
TEST(CliSkipReasons, CiteNoInternalIssue) {
  const Shell list = sh(kOpcts + " list -v --arch gfx942 --tier smoke --filter 'hip.*'");
  ASSERT_EQ(list.status, 0) << list.output.substr(0, 2000);
  EXPECT_NE(list.output.find("SKIP: "), std::string::npos);
  EXPECT_EQ(list.output.find("(issue "), std::string::npos) << list.output.substr(0, 2000);
}

// In a log that is no terminal, a case that runs long still prints a progress line every
// heartbeat (30 s; 1 s here), so a CI step's no-output timeout does not kill a working shard.
TEST(CliProgress, ANonTtyLogGetsAHeartbeat) {
  const std::string dir = testutil::temp_dir();
  const std::string catalog = testutil::write(dir, "tiny.yaml", testutil::kTinyCatalog);
  const Shell r =
      sh("OPCTS_HEARTBEAT_SECONDS=1 OPCTS_FAULT_HANG='*' " + kOpcts + " run --arch host --catalog " + catalog +
         " --filter " + testutil::kTinyFilter + " --timeout 3 --reruns 0 --no-ref-cache < /dev/null");
  size_t beats = 0;
  for (size_t at = r.output.find("[0/3] "); at != std::string::npos; at = r.output.find("[0/3] ", at + 1)) ++beats;
  EXPECT_GE(beats, 2u) << r.output;
  EXPECT_NE(r.output.find("s left"), std::string::npos) << r.output;
}

// A cast failure names the input it converted, and an output the impl never wrote (it keeps the
// all-ones bytes it arrived with; -6 in e2m1fn) says so instead of reading as a wrong number.
TEST(CliFailureText, ShowsTheInputAndAnUnwrittenOutput) {
  const std::string dir = testutil::temp_dir();
  const Shell r = run_in(dir, std::string("--plugin ") + OPCTS_BAD_PLUGIN_DIR +
                                  "/lazy_cast.so --filter 'cast.bad_lazy_cast/fp32_to_e2m1fn*' --reruns 0 --junit j.xml"
                                  " --summary s.md");
  EXPECT_EQ(r.status, 1) << r.output;
  const auto records = read_results_file(dir + "/r.jsonl");
  ASSERT_FALSE(records.empty()) << r.output;
  for (const auto& rec : records) {
    if (rec.outcome != Outcome::FAIL) continue;
    EXPECT_TRUE(contains_all(rec.message, {" got -6 want ", " from x = ", "never written?"}));
  }
  // The console line, the JUnit failure's message and the summary say each fact once: the
  // statistics line is not appended to a message that already gives the error and the bound.
  const auto line = r.output.substr(r.output.find("FAIL cast.bad_lazy_cast/"));
  const std::string first = line.substr(0, line.find('\n'));
  EXPECT_EQ(first.find("max abs err"), first.rfind("max abs err")) << first;
  const std::string xml = testutil::sh("cat " + dir + "/j.xml").output;
  const auto at = xml.find("<failure message=\"");
  ASSERT_NE(at, std::string::npos) << xml.substr(0, 2000);
  const std::string msg = xml.substr(at, xml.find('"', at + 18) - at);
  EXPECT_NE(msg.find("max abs err"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("max abs err"), msg.rfind("max abs err")) << msg;
  const std::string md = testutil::sh("cat " + dir + "/s.md").output;
  for (size_t p = md.find("max abs err"); p != std::string::npos; p = md.find("max abs err", p + 1)) {
    const std::string md_line = md.substr(md.rfind('\n', p) + 1, md.find('\n', p) - md.rfind('\n', p) - 1);
    EXPECT_EQ(md_line.find("max abs err"), md_line.rfind("max abs err")) << md_line;
  }
}

// A failure on a sampled problem is shrunk after the run (--shrink-seconds): the summary names
// the smallest problem that fails the same way; a hand-written problem's failure is not shrunk.
TEST(CliRun, SampledFailuresAreShrunkInTheSummary) {
  const std::string dir = testutil::temp_dir();
  const std::string lazy = std::string(OPCTS_BAD_PLUGIN_DIR) + "/lazy_cast.so";
  // The cast catalog's smoke draw 1 of 'random_encodings' (4-bit e2m1fn: 46,068 values), and a
  // hand-written problem the lazy impl fails as well.
  const Shell r = run_in(dir, "--plugin " + lazy +
                                  " --filter 'cast.bad_lazy_cast/fp32_to_e2m1fn_satfinite_random46068'"
                                  " --filter 'cast.bad_lazy_cast/fp32_to_e2m1fn_satfinite_edges'"
                                  " --reruns 0 --shrink-seconds 60 --summary s.md");
  EXPECT_EQ(r.status, 1) << r.output;
  const std::string md = testutil::sh("cat " + dir + "/s.md").output;
  const auto at = md.find("## Sampled failures, shrunk");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string table = md.substr(at);
  // An output never written fails whatever the count: the count shrinks to one or two values
  // (one 4-bit value leaves half a byte, which may fail another way).
  EXPECT_TRUE(std::regex_search(table, std::regex("\\| `cast\\.bad_lazy_cast/fp32_to_e2m1fn_satfinite_random46068` \\| "
                                                  "`cast\\.bad_lazy_cast/fp32_to_e2m1fn_satfinite_random[12]` \\|")))
      << table;
  EXPECT_EQ(table.find("_edges"), std::string::npos) << table;
  EXPECT_NE(r.output.find("opcts: shrunk cast.bad_lazy_cast/fp32_to_e2m1fn_satfinite_random46068: "), std::string::npos)
      << r.output;
  // Off: no table.
  const Shell off = run_in(dir, "--plugin " + lazy +
                                    " --filter 'cast.bad_lazy_cast/fp32_to_e2m1fn_satfinite_random46068' --reruns 0"
                                    " --shrink-seconds 0 --summary s0.md");
  EXPECT_EQ(testutil::sh("cat " + dir + "/s0.md").output.find("Sampled failures"), std::string::npos);
}

// A failure's repro line starts with a program that runs here: `opcts` only when PATH finds this
// binary, else its absolute path; and it runs from another folder.
TEST(CliRepro, TheLineRunsFromAnotherFolder) {
  const std::string dir = testutil::temp_dir();
  const Shell r = run_in(dir, "--include-planted --filter 'cast.host_cvt_ties_up/*' --reruns 0");
  const auto records = read_results_file(dir + "/r.jsonl");
  ASSERT_FALSE(records.empty()) << r.output;
  const std::string repro = records.front().repro;
  EXPECT_EQ(repro.rfind(fs::canonical(kOpcts).string() + " repro ", 0), 0u) << repro;
  const Shell again = sh("cd / && env -i " + repro);
  EXPECT_NE(again.output.find("case   " + records.front().id), std::string::npos) << again.output;
}

// The planted e4m3fnuz saturation (scaled_mm saturate_at_240: results past 240 clamped to ±240
// where e4m3fn saturates at 448) runs wherever a result rounds past 240 and is caught there, on
// the scaled-up output too, where the accumulation bound is far wider than the range: a result
// beyond ±448 by more than that bound must be ±448 (judge/compare.cpp).
TEST(CliRun, APlantedFnuzSaturationIsCaughtWhereAResultRoundsPast240) {
  const std::string dir = testutil::temp_dir();
  const Shell r = run_in(dir, "--include-planted --filter 'scaled_mm.host_emulated_hopper_saturate_at_240/*'");
  int caught = 0;
  for (const ResultRecord& rec : read_results_file(dir + "/r.jsonl")) {
    if (rec.raw_outcome == Outcome::SKIP) {
      EXPECT_TRUE(rec.message.find("no result reaches 248") != std::string::npos ||
                  rec.message.find("only an e4m3fn output saturates") != std::string::npos ||
                  rec.message.find("no block-scaled") != std::string::npos ||
                  rec.message.find("planted impls run valid problems only") != std::string::npos ||
                  rec.message.find("is an AMD format") != std::string::npos)
          << rec.id << ": " << rec.message;
      continue;
    }
    EXPECT_EQ(rec.outcome, Outcome::XFAIL) << rec.id << ": " << rec.message;
    caught += rec.outcome == Outcome::XFAIL;
    if (rec.id.find("_os64_") != std::string::npos)
      EXPECT_NE(rec.message.find("got -240 want -448"), std::string::npos) << rec.id << ": " << rec.message;
  }
  EXPECT_GE(caught, 4) << r.output;
}

// A planted pass's blind spot comes from the worker, derived from the case's inputs and reference
// (Impl::blind_spot): a pass of host.flash_pv_in_dtype on a short-row problem is XPASS with the
// energy check's derivation in its record and the gate's reason; a caught case carries none.
TEST(CliRun, APlantedPassCarriesTheBlindSpotTheWorkerDerived) {
  const std::string dir = testutil::temp_dir();
  const Shell r = run_in(dir,
                         "--include-planted --reruns 0 --filter "
                         "'sdpa.host_flash_pv_in_dtype/bf16_b1_hq4_hkv2_sq33_sk70_d64_causal_lr' --filter "
                         "'sdpa.host_flash_pv_in_dtype/bf16_b1_hq4_hkv2_sq33_sk70_d64_nomask'");
  int blind = 0, caught = 0;
  for (const ResultRecord& rec : read_results_file(dir + "/r.jsonl")) {
    caught += rec.outcome == Outcome::XFAIL;
    if (rec.outcome == Outcome::XPASS) {
      EXPECT_NE(rec.blind_spot.find("O's energy check: the plant moves it by"), std::string::npos) << rec.blind_spot;
      EXPECT_NE(rec.expectation.find("in a derived blind spot of its checks: O's energy check"), std::string::npos)
          << rec.expectation;
      ++blind;
    } else {
      EXPECT_EQ(rec.blind_spot, "") << rec.id << " " << to_string(rec.outcome);
    }
  }
  EXPECT_EQ(blind, 1) << r.output;
  EXPECT_EQ(caught, 1) << r.output;
}

// Planted impls whose bug only the run mode `flag` shows, run without it and with it: without, each
// case SKIPs saying so (never XPASS); with it, each FAILs with `kind` (XFAIL), its message starting
// with `lead`, or passes (XPASS) carrying a derived blind spot.
struct ModePlants {
  int skipped = 0, caught = 0, blind = 0;
  std::string output;
};
ModePlants run_mode_plants(const std::string& filters, const std::string& flag, FailureKind kind,
                           const std::string& lead) {
  const std::string without = testutil::temp_dir(), with = testutil::temp_dir();
  run_in(without, filters);
  ModePlants m;
  for (const ResultRecord& rec : read_results_file(without + "/r.jsonl")) {
    EXPECT_EQ(rec.outcome, Outcome::SKIP) << rec.id;
    m.skipped += rec.message.find("which only opcts run " + flag + " shows") != std::string::npos;
  }
  m.output = run_in(with, filters + " " + flag).output;
  for (const ResultRecord& rec : read_results_file(with + "/r.jsonl")) {
    if (rec.outcome == Outcome::SKIP) continue;
    if (rec.outcome == Outcome::XPASS) {
      EXPECT_NE(rec.blind_spot, "") << rec.id << ": a pass without a derived reason";
      ++m.blind;
      continue;
    }
    EXPECT_EQ(rec.outcome, Outcome::XFAIL) << rec.id << ": " << rec.message;
    EXPECT_EQ(rec.failures.size(), 1u) << rec.id;
    if (rec.outcome != Outcome::XFAIL || rec.failures.size() != 1) continue;
    EXPECT_EQ(rec.failures[0].kind, kind) << rec.message;
    EXPECT_EQ(rec.message.rfind(lead, 0), 0u) << rec.message;
    // The reference comparison passed: its worst elements would point away from the failure.
    EXPECT_TRUE(rec.worst.empty()) << rec.id;
    ++m.caught;
  }
  return m;
}

// A planted batch-variant impl breaks only its invariance claim: it FAILs as not_invariant,
// naming the axis.
TEST(CliRun, BatchVariantPlantsNeedInvarianceAndFailUnderIt) {
  const ModePlants m = run_mode_plants(
      "--include-planted --reruns 0 --filter 'sdpa.host_flash_batch_variant_tiles/*' "
      "--filter 'scaled_mm.host_emulated_hopper_small_m_steps/*_random'",
      "--invariance", FailureKind::not_invariant, "--invariance batch_size: ");
  EXPECT_GT(m.skipped, 20);
  EXPECT_GT(m.caught, 200) << m.output;
  // A pass is a derived blind spot (the plant changed no compared byte): rows of 33 keys, whose
  // second tile holds one key, mostly.
  EXPECT_LT(m.blind, m.caught / 10);
}

// The packing and tactic axes' plants break only their claims: the varlen layout's own tiles (a
// dense batch packed, or a varlen batch of equal lengths given dense) and split counts whose
// partials associate differently FAIL as not_invariant naming the axis. The split plant passes,
// with that derivation, where every split count rounds to the same bytes (a 16-bit d, exact
// inputs): most of its cases.
TEST(CliRun, PackingAndSplitCountPlantsNeedInvarianceAndFailUnderIt) {
  struct Plant {
    const char* filter;
    const char* lead;
    int skipped, caught;
    bool mostly_caught;
  };
  for (const Plant& p :
       {Plant{"sdpa.host_flash_packed_variant_tiles/*", "--invariance packing: ", 200, 200, true},
        Plant{"scaled_mm.host_emulated_split_k_count_variant/*", "--invariance tactic: ", 100, 5, false}}) {
    const ModePlants m = run_mode_plants(std::string("--include-planted --reruns 0 --filter '") + p.filter + "'",
                                         "--invariance", FailureKind::not_invariant, p.lead);
    EXPECT_GT(m.skipped, p.skipped) << p.filter;
    EXPECT_GE(m.caught, p.caught) << p.filter << "\n" << m.output;
    if (p.mostly_caught) EXPECT_LT(m.blind, m.caught / 10) << p.filter;
  }
}

// A failure only a run mode shows is reproduced with it: the repro line carries the mode, which
// `opcts repro` takes; without it the plant's case SKIPs, saying so.
TEST(CliRun, ARunModesReproLineCarriesTheMode) {
  const std::string dir = testutil::temp_dir();
  run_in(dir,
         "--include-planted --reruns 0 --invariance --filter "
         "'scaled_mm.host_emulated_split_k_count_variant/*_out_fp32_*'");
  for (const ResultRecord& rec : read_results_file(dir + "/r.jsonl")) {
    if (rec.outcome != Outcome::XFAIL) continue;
    const size_t mode = rec.repro.find(" --invariance");
    ASSERT_NE(mode, std::string::npos) << rec.repro;
    const Shell again = sh(rec.repro);
    EXPECT_NE(again.output.find("--invariance tactic: "), std::string::npos) << again.output;
    const Shell without = sh(rec.repro.substr(0, mode));
    EXPECT_NE(without.output.find("which only opcts run --invariance shows"), std::string::npos) << without.output;
    return;
  }
  FAIL() << "no case of the split-count plant was caught";
}

// The scale plant keeps the scales it read at its first call on a pair of buffers: every plain
// run gets buffers of its own, so only --capture (the same buffers refilled) shows it, as a
// replay that differs from the plain run; a pass derives that the capture-time scales change no
// output byte.
TEST(CliRun, ScalesKeptFromCaptureNeedCaptureAndFailUnderIt) {
  const ModePlants m =
      run_mode_plants("--include-planted --reruns 0 --filter 'scaled_mm.host_emulated_scales_at_capture/*'",
                      "--capture", FailureKind::replay_differs, "--capture: ");
  EXPECT_GT(m.skipped, 10);
  EXPECT_GT(m.caught, 10) << m.output;
  EXPECT_LE(m.blind, m.caught / 4) << m.output;
}

// A failure names the tolerance rule that judged each output (file:line of the cases folder),
// in its record and its message; a passing output records its rule too.
TEST(CliRun, AFailureNamesItsToleranceRule) {
  const std::string dir = testutil::temp_dir();
  const Shell r = run_in(dir, "--include-planted --filter 'cast.host_cvt*/*' --reruns 0");
  const auto records = read_results_file(dir + "/r.jsonl");
  const std::regex rule(R"(tolerances\.yaml:[0-9]+)");
  int failed = 0, passed = 0;
  for (const ResultRecord& rec : records) {
    for (const OutputStats& o : rec.outputs) EXPECT_TRUE(std::regex_match(o.rule, rule)) << rec.id << ": " << o.rule;
    if (rec.outputs.empty()) continue;
    if (rec.raw_outcome == Outcome::FAIL) {
      ++failed;
      EXPECT_NE(rec.message.find("[rule tolerances.yaml:"), std::string::npos) << rec.id << ": " << rec.message;
    }
    passed += rec.raw_outcome == Outcome::PASS;
  }
  EXPECT_GT(failed, 0) << r.output;
  EXPECT_GT(passed, 0) << r.output;
}

// The HTML report's error plot: failures against a zero bound (an infinite ratio) and beyond
// the axis get a column of their own instead of piling on its right edge, and a legend names the
// outcomes' colours.
TEST(HtmlErrorPlot, InfiniteRatiosHaveTheirColumnAndALegend) {
  std::vector<ResultRecord> rs;
  for (const auto& [id, ratio, outcome] :
       std::vector<std::tuple<std::string, double, Outcome>>{{"cast.x_y/zero_bound", INFINITY, Outcome::FAIL},
                                                             {"cast.x_y/far", 1e5, Outcome::FAIL},
                                                             {"cast.x_y/edge", 99.0, Outcome::FAIL},
                                                             {"cast.x_y/fine", 0.5, Outcome::PASS}}) {
    ResultRecord r;
    r.id = id;
    r.family = "cast";
    r.arch = "host";
    r.outcome = r.raw_outcome = outcome;
    r.outputs.push_back({"y", "bounded", 10, 1, 1, 0, 0, 1});
    r.outputs.back().max_ratio = ratio;
    rs.push_back(r);
  }
  const std::string html = html_report(rs, "t");
  std::map<std::string, double> x;
  const std::regex dot(R"re(<circle cx="([0-9.]+)" cy="[0-9.]+" r="2.5"[^>]*><title>([^:]+):)re");
  for (std::sregex_iterator it(html.begin(), html.end(), dot), end; it != end; ++it) x[(*it)[2]] = std::stod((*it)[1]);
  ASSERT_EQ(x.size(), 4u) << html.substr(0, 3000);
  const double far_l = 960 - 20 - 60;
  EXPECT_GE(x.at("cast.x_y/zero_bound"), far_l);
  EXPECT_GE(x.at("cast.x_y/far"), far_l);
  EXPECT_LT(x.at("cast.x_y/edge"), far_l - 25);  // 99 is on the axis (up to 1e2)
  EXPECT_LT(x.at("cast.x_y/fine"), x.at("cast.x_y/edge"));
  EXPECT_NE(html.find(">FAIL (3)</text>"), std::string::npos);
  EXPECT_NE(html.find(">PASS (1)</text>"), std::string::npos);
}

}  // namespace
}  // namespace opcts
