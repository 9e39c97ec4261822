// The opcts command line as data: every subcommand's options (CLI11), parsed apart from running
// anything, so that main() dispatches and the CLI fuzz target (fuzz/fuzz_cli.cpp) parses alone.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "app/cli_commands.hpp"
#include "runner/worker.hpp"

namespace opcts::cli {

/// What the command line said: the values of every subcommand's options and, once parsed,
/// which subcommand was given (the pointer whose `*p` is true).
struct CommandLine {
  Selection sel;
  bool verbose = false, count_only = false, coverage = false;
  std::string fields_of;
  RunFlags rf;
  std::string resources_out;
  std::string repro_id, repro_json;
  int repro_device = -1;
  std::vector<std::string> merge_inputs;
  std::string merge_junit, merge_summary, merge_results, merge_junit_properties = "lean";
  bool prefer_later = false;
  std::vector<std::string> view_inputs;
  std::string matrix_md, times_out, times_arch, html_out, html_title = "opcts report", tightness_md;
  std::vector<std::string> gate_inputs;
  std::vector<std::string> ctest_archs;
  CtestPlan ctest_plan;
  int probe_device = -1;
  std::string probe_out;
  int gate_min_run = 1;
  bool gate_require_measured = false;
  std::string cache_dir;
  int cache_sample = 16;
  std::string sample_family;
  uint64_t sample_seed = 0;
  int64_t sample_count = 0;
  double shrink_seconds = 120;
  std::vector<std::string> pp_plugins;  // __plugin-probe
  std::string pp_arch, pp_cases_dir, pp_ids;
  int pp_answer_fd = 4, pp_device = 0;
  bool pp_tactics = false;  // __plugin-probe --tactics: list_tactics of the ids' problems
  WorkerOptions wo;
  CLI::App *list = nullptr, *run = nullptr, *resources = nullptr, *repro = nullptr, *report = nullptr, *merge = nullptr,
           *matrix = nullptr, *times = nullptr, *html = nullptr, *tightness = nullptr, *gate_cmd = nullptr,
           *ctest = nullptr, *worker = nullptr, *manifest = nullptr, *manifest_lint = nullptr, *probe = nullptr,
           *probe_accumulators = nullptr, *cache = nullptr, *cache_verify = nullptr, *plugin_probe = nullptr,
           *sample = nullptr, *shrink = nullptr;
};

/// The CLI11 app whose options write into `cl` (which must outlive it). Its parse() throws
/// CLI::ParseError on a usage error and for --help; app.exit(e) prints either.
std::unique_ptr<CLI::App> make_cli(CommandLine& cl);

/// `opcts --version`'s text: version, commit, build options, CUDA/cuDNN/HIP as built, and the
/// cases folder this binary reads by default (app/cli_version.cpp).
std::string version_text();

/// The checks a parsed command makes of its options before it reads or writes any file:
/// --tier and --shard (resolve_shard, so `auto` reads the environment), and run's flags
/// (check_run_flags). Throws std::invalid_argument naming the option.
void check_options(const CommandLine& cl);

/// --timeout positive, --reruns from 0 to kMaxReruns, --ref-cache-max-gib positive, --min-run >= 0.
void check_run_flags(const RunFlags& f);

}  // namespace opcts::cli
