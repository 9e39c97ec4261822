// The opcts subcommands: shared option sets and one function per command (app/cli*.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "runner/suite.hpp"

namespace opcts::cli {

// Options shared by list, run and ctest-tests.
struct Selection {
  std::string arch = "auto";
  std::string tier = "default";
  std::vector<std::string> filters, excludes, catalogs;
  std::vector<std::string> families;  // empty: every family
  std::string shard = "1/1";
  std::string times;
  std::string cases_dir = default_cases_dir();
  std::string manifest;
  bool include_planted = false;
  std::vector<std::string> plugins;           // --plugin: an error when it cannot be used
  std::vector<std::string> optional_plugins;  // --plugin-optional: left out with a warning when it cannot
};

/// Adds the selection options (--arch --tier --family --filter --exclude --catalog --shard
/// --times --cases-dir --manifest --include-planted --plugin --plugin-optional) to a subcommand.
void add_selection(CLI::App* app, Selection& s);
/// The GPU of this process: --device, else CTest's resource allocation
/// (CTEST_RESOURCE_GROUP_0_GPUS = "id:N,slots:1"), else 0.
int resolve_device(int flag);
/// `auto` becomes the arch of the GPU present (detect_arch), else the name is kept.
std::string resolve_arch(const std::string& arch, int device);
SuiteOptions suite_options(const Selection& s, const std::string& arch);
/// --shard as "i/N": itself, or for `auto` the CI engine's shard from the environment, the
/// first of: OPCTS_SHARD_INDEX and OPCTS_SHARD_COUNT (set them from a GitHub Actions matrix or
/// a Jenkins parallel stage); Kubernetes' JOB_COMPLETION_INDEX (from 0) with OPCTS_SHARD_COUNT
/// (an Indexed Job's completions); Slurm's SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT
/// (with SLURM_ARRAY_TASK_MIN and _STEP: the task's place in the array); GitLab's
/// CI_NODE_INDEX and CI_NODE_TOTAL (`parallel:`); else "1/1". Both variables of a pair or
/// neither; throws std::invalid_argument naming them.
std::string resolve_shard(const std::string& shard);
/// The selection's cases before sharding: tier, families, filters.
std::vector<Case> unsharded(const Suite& suite, const Selection& s);
/// The cases of the selection: tier, families, filters, then the shard (resolve_shard).
std::vector<Case> selected(const Suite& suite, const Selection& s);
/// This binary's path (workers are the same binary).
std::string self_exe(const char* argv0);

struct RunFlags {
  std::string junit, results, summary;
  int device = -1;
  double timeout = 600;
  bool allow_arch_mismatch = false;
  bool allow_empty = false;
  int reruns = 1;           // reruns of an unexpected failure (a manifest flaky entry may set its own)
  std::string artifacts;    // failure artifacts folder ("" = next to --results)
  bool bitwise = false;     // run deterministic impls twice, require identical bytes
  bool invariance = false;  // check the impls' invariance claims (runner/invariance.hpp)
  bool capture = false;     // record each run and replay it on fresh inputs (runner/capture.hpp)
  std::string ref_cache;    // on-disk reference cache ("" = the default folder)
  bool no_ref_cache = false;
  double ref_cache_max_gib = 4;           // the reference cache's size cap (kDefaultRefCacheMaxBytes)
  std::string resume;                     // results of a killed run to continue ("" = a fresh run)
  std::string junit_properties = "lean";  // lean | all (reports/junit.hpp: JunitDetail)
  int min_run = 1;                        // the gate fails when fewer cases ran (neither SKIP nor MISSING)
  double shrink_seconds = 30;             // wall time for shrinking the sampled failures after the run (0: off)
  std::string sanitize;                   // compute-sanitizer tool each case runs under ("" = none)
  std::string sanitizer;                  // its executable ("" = $OPCTS_SANITIZER, PATH, /usr/local/cuda/bin)
};

/// `modes`: its bitwise, invariance and capture flags (the run modes whose plants then run).
int cmd_list(const Selection& s, bool verbose, bool count_only, bool coverage = false, const RunFlags& modes = {});
/// Prints the field table of `family` ("all": of every family).
int cmd_list_fields(const std::string& family);
int cmd_run(const Selection& s, const RunFlags& f, const char* argv0);
/// opcts sample: the problem ids the `samples:` blocks of `family` draw (in the cases folder and
/// --catalog files), one a line, each block under `o`; with `verbose` each draw's block, index,
/// tier and source before its id. Exit 1 when the family has no samples: block.
int cmd_sample(const Selection& s, const std::string& family, const SampleOverride& o, bool verbose);
/// `modes`: the run modes (--bitwise, --invariance, --capture) the case runs under, as a run's
/// repro line passes them on: a failure of one is reproduced only with it.
int cmd_repro(const std::string& id, const Selection& s, int device_flag, const std::string& json_out,
              const RunFlags& modes = {});
/// opcts shrink: runs the failing case `id` and smaller problems in this process for at most
/// `seconds` (runner/shrink.hpp) and prints each smaller id that fails the same way, then the
/// smallest with its repro line. Exit 0 when it shrank, 1 when nothing smaller fails the same
/// way; a case that does not fail throws std::invalid_argument.
int cmd_shrink(const std::string& id, const Selection& s, int device_flag, double seconds);
int cmd_resources(const std::string& out);
/// opcts manifest lint: prints each entry of the arch's manifest (and its extends chain) that
/// matches no case of the arch (stale) or only cases an earlier entry decides (shadowed), over
/// the full tier with planted impls; exit 1 when there is one. A malformed file throws (file:line).
int cmd_manifest_lint(const Selection& s);
/// `prefer_later`: of two differing records of a case, keep the later (load_reports).
/// Throws std::invalid_argument when no output (--junit, --summary, --results) is given.
int cmd_merge(const std::vector<std::string>& inputs, const std::string& junit, const std::string& summary,
              const std::string& results, bool prefer_later, const std::string& junit_properties = "lean");
/// `opcts gate REPORTS...`: with `against_plan` (--arch given) the reports are judged against
/// the plan and manifest the selection options make now (`tier_given`: --tier was on the
/// command line; otherwise the plan takes the reports' tier); without it, against the
/// selections the reports carry (docs/gate.md). Either way the run's coverage (`min_run`,
/// impls that ran nothing) is checked; with `require_measured_models`, cases judged under a
/// provisional accumulator model fail (check_measured_models). Exit 0 passed, 1 failed.
int cmd_gate(const Selection& s, const std::vector<std::string>& inputs, bool against_plan, bool tier_given,
             bool prefer_later, int min_run, bool require_measured_models = false);
/// `opcts cache verify`: recomputes `sample` entries of the reference cache (0: all) and
/// compares them bit for bit (runner/ref_cache_verify.hpp); exit 1 when one differs.
int cmd_cache_verify(const std::string& dir, int sample);
int cmd_report_matrix(const std::vector<std::string>& inputs, const std::string& markdown);
int cmd_report_times(const std::vector<std::string>& inputs, const std::string& out, const std::string& arch);
int cmd_report_html(const std::vector<std::string>& inputs, const std::string& out, const std::string& title);
/// Error ÷ bound per family, impl and output over passing cases (reports/tightness.hpp), as
/// Markdown to stdout or `markdown`.
int cmd_report_tightness(const std::vector<std::string>& inputs, const std::string& markdown);
/// opcts probe accumulators (app/cli_probe.cpp): runs runner/accumulator_probe.hpp's experiments on every
/// scaled_mm impl of the arch's backend (filters: impl globs) and prints the manifest tolerance: entries of
/// the models read off, beside today's; 0 when every probed path fit a model, 1 otherwise or when none ran.
int cmd_probe_accumulators(const Selection& s, int device_flag, const std::string& out);
/// What `opcts ctest-tests` writes (cmake/ctest_shards.cmake runs it when ctest starts).
struct CtestPlan {
  std::vector<std::string> archs;  ///< archs to plan shard tests for
  int shards = 4;                  ///< shard tests per arch and family (1 to kMaxShards)
  std::string exe;                 ///< the opcts binary the tests run
  std::string reports_dir;         ///< JUnit and results files go to <reports_dir>/<arch>/
  std::string out;                 ///< the CTest script to write
  double timeout = 600;            ///< per-case timeout of `opcts run`, seconds
  /// Each shard test runs `opcts run --bitwise` (every deterministic() claim and the second-seed
  /// check).
  bool bitwise = false;
  /// Each shard test runs `opcts run --invariance` (every invariance claim an impl declares).
  bool invariance = false;
  /// Each shard test runs `opcts run --capture` (every run recorded and replayed on fresh inputs).
  bool capture = false;
  /// > 0: each CUDA arch also gets opcts.<arch>.memcheck.slice<i>of<N>, labelled `memcheck` and
  /// `nightly` only (never the arch, so `ctest -L sm90` leaves it out): the tier's shard i of N
  /// under `--sanitize memcheck`, i = (days since 1970-01-01 UTC when ctest starts) mod N + 1, so
  /// N nightly runs cover the tier once.
  int memcheck_slices = 0;
};
/// The shard test for `slices` nightly slices on day `days_since_epoch` (UTC): its 1-based index.
int memcheck_slice_of_day(int64_t days_since_epoch, int slices);
int cmd_ctest_tests(const Selection& s, const CtestPlan& plan);

}  // namespace opcts::cli
