// The opcts command line's options and the checks made of them before a command runs.
#include "app/cli_parse.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "judge/manifest.hpp"
#include "reports/junit.hpp"
#include "runner/execute.hpp"
#include "runner/shard_plan.hpp"

namespace opcts::cli {

namespace {

// --help shows each option's default; an empty list ("[]"), a required option's placeholder
// and a -1 that means "not given" (--device) say nothing a reader needs, so they show none.
void tidy_defaults(CLI::App* app) {
  for (CLI::Option* o : app->get_options()) {
    const std::string d = o->get_default_str();
    if (d == "[]" || o->get_required() || (d == "-1" && o->get_name() == "--device")) o->default_str("");
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) tidy_defaults(sub);
}

// The case id and where it runs, for the commands that run one case in this process (repro,
// shrink).
void add_one_case(CLI::App* app, CommandLine& cl) {
  app->add_option("id", cl.repro_id, "case id")->required();
  app->add_option("--arch", cl.sel.arch, "arch (auto = the GPU present, else host)");
  app->add_option("--device", cl.repro_device, "GPU ordinal");
  app->add_option("--plugin", cl.sel.plugins, "shared library of impls to load (repeatable)");
  app->add_option("--cases-dir", cl.sel.cases_dir, "folder of archs.yaml, tolerances.yaml, manifests/");
}

}  // namespace

std::unique_ptr<CLI::App> make_cli(CommandLine& cl) {
  auto app = std::make_unique<CLI::App>("opcts: conformance tests for GPU operators against CPU references");
  app->require_subcommand(1);
  // Every option shows its default in --help ("--timeout FLOAT=600"); subcommands inherit this.
  app->option_defaults()->always_capture_default();
  cl.list = app->add_subcommand("list", "list case ids");
  add_selection(cl.list, cl.sel);
  cl.list->add_flag("-v,--verbose", cl.verbose, "show tier, catalog source and whether the case would run or SKIP");
  cl.list->add_flag("--count", cl.count_only, "print only the number of cases");
  // A plant whose bug only a run mode shows SKIPs without it; -v says what a run with it would do.
  cl.list->add_flag("--bitwise", cl.rf.bitwise, "as for run --bitwise: its plants run (-v)");
  cl.list->add_flag("--invariance", cl.rf.invariance, "as for run --invariance: its plants run (-v)");
  cl.list->add_flag("--capture", cl.rf.capture, "as for run --capture: its plants run (-v)");
  cl.list->add_flag("--coverage", cl.coverage,
                    "print, per family, the edge classes the selected problems reach (grids, edges and samples) "
                    "and those none reaches, as Markdown (docs/coverage.md)");
  cl.list->add_option(
      "--fields", cl.fields_of,
      "print a family's problem fields (YAML keys, forms, id spelling) instead; 'all' for every family");

  cl.sample =
      app->add_subcommand("sample", "print the problem ids a family's samples: blocks draw, without running them");
  cl.sample->add_option("--family", cl.sample_family, "the family whose catalogs' samples: blocks draw")->required();
  cl.sample->add_option("--seed", cl.sample_seed, "draw with this seed instead of each block's own");
  cl.sample->add_option("--count", cl.sample_count, "draw this many problems a block instead of its counts")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  cl.sample->add_option("--cases-dir", cl.sel.cases_dir, "folder of built-in catalogs");
  cl.sample->add_option("--catalog", cl.sel.catalogs, "extra catalog file or folder (repeatable)");
  cl.sample->add_flag("-v,--verbose", cl.verbose, "show each draw's block, index, tier and catalog line");

  cl.run = app->add_subcommand("run", "run cases in worker processes and write reports");
  add_selection(cl.run, cl.sel);
  cl.run->add_option("--junit", cl.rf.junit, "JUnit XML report path");
  cl.run->add_option("--junit-properties", cl.rf.junit_properties,
                     "lean: a passing testcase carries id, impl and tier, a failure also its message, worst elements "
                     "and repro; all: every field of the record (--results always keeps everything)");
  cl.run->add_option("--results", cl.rf.results, "results file (one JSON line per case)");
  cl.run->add_option("--summary", cl.rf.summary, "Markdown summary path");
  cl.run->add_option("--device", cl.rf.device, "GPU ordinal (default: CTest's resource allocation, else 0)");
  cl.run->add_option("--timeout", cl.rf.timeout, "seconds one case may take before it is TIMEOUT");
  cl.run->add_flag("--allow-arch-mismatch", cl.rf.allow_arch_mismatch,
                   "run a GPU arch's cases on a GPU of another arch");
  cl.run->add_flag("--allow-empty", cl.rf.allow_empty, "succeed when the selection holds no case (else an error)");
  cl.run->add_option("--reruns", cl.rf.reruns,
                     "re-run an unexpected failure this often; differing outcomes make it FLAKE (manifest flaky "
                     "entries may set their own)");
  cl.run->add_option("--artifacts", cl.rf.artifacts,
                     "folder for failure artifacts (default: artifacts/ next to --results)");
  cl.run->add_flag("--bitwise", cl.rf.bitwise,
                   "run each case twice; deterministic impls must give identical output bytes");
  cl.run->add_flag("--invariance", cl.rf.invariance,
                   "check the axes each impl declares its outputs invariant over (a batch entry alone, the batch "
                   "reversed, the batch in its other layout, its other tactics): the shared elements must hold "
                   "identical bytes");
  cl.run->add_flag("--capture", cl.rf.capture,
                   "record each run (a CUDA graph on the GPU; on the host, the same buffers called again) on other "
                   "inputs, copy the case's into its buffers and replay it twice: the replay is judged, and must not "
                   "keep the capture-time result or differ from a plain run");
  cl.run->add_option(
      "--sanitize", cl.rf.sanitize,
      "memcheck, racecheck, synccheck or initcheck: each case runs alone under compute-sanitizer's tool; "
      "an error it reports FAILs the case (failure kind sanitizer, its first report in the message)");
  cl.run->add_option("--sanitizer", cl.rf.sanitizer,
                     "the compute-sanitizer executable (default: $OPCTS_SANITIZER, else found on PATH or in "
                     "/usr/local/cuda/bin)");
  cl.run->add_option("--ref-cache", cl.rf.ref_cache,
                     "on-disk reference cache folder (default: $XDG_CACHE_HOME/opcts or ~/.cache/opcts)");
  cl.run->add_flag("--no-ref-cache", cl.rf.no_ref_cache, "compute every reference; neither read nor write the cache");
  cl.run->add_option("--ref-cache-max-gib", cl.rf.ref_cache_max_gib,
                     "size cap of the reference cache in GiB (default 4); the least recently used references go first");
  cl.run->add_option("--min-run", cl.rf.min_run,
                     "the run fails when fewer cases ran than this (neither SKIP nor MISSING; default 1); a shard "
                     "leaves it to `opcts gate`");
  cl.run
      ->add_option("--shrink-seconds", cl.rf.shrink_seconds,
                   "after the run, shrink each unexpected failure on a sampled problem to the smallest problem "
                   "that fails the same way, in this much wall time in all (default 30; 0: off); the summary "
                   "lists them")
      ->check(CLI::Range(0.0, 86400.0));
  cl.run->add_option("--resume", cl.rf.resume,
                     "continue a stopped or killed run from its results file: cases with a record there do not run "
                     "again (the same selection; --results defaults to this file)");

  cl.resources = app->add_subcommand(
      "resources", "write a CTest resource spec (JSON) with the CUDA devices found, else the AMD GPUs");
  cl.resources->add_option("--out", cl.resources_out, "file to write (default: stdout)");

  cl.repro = app->add_subcommand("repro", "run one case in this process and print its statistics");
  add_one_case(cl.repro, cl);
  cl.repro->add_option("--manifest", cl.sel.manifest, "manifest file");
  cl.repro->add_option("--json", cl.repro_json, "also write the result line to this file");
  cl.repro->add_flag("--bitwise", cl.rf.bitwise, "as for run --bitwise: the determinism checks");
  cl.repro->add_flag("--invariance", cl.rf.invariance, "as for run --invariance: the invariance checks");
  cl.repro->add_flag("--capture", cl.rf.capture, "as for run --capture: the run recorded and replayed");

  cl.shrink = app->add_subcommand("shrink", "shrink a failing case to the smallest problem that fails the same way");
  add_one_case(cl.shrink, cl);
  cl.shrink->add_option("--seconds", cl.shrink_seconds, "wall time the candidates may take")
      ->check(CLI::Range(1.0, 86400.0));

  cl.report = app->add_subcommand("report", "work with reports");
  cl.report->require_subcommand(1);
  cl.merge = cl.report->add_subcommand("merge", "join shard reports (JUnit .xml, results .jsonl, or folders)");
  cl.merge->add_option("inputs", cl.merge_inputs, "reports or folders")->required();
  cl.merge->add_option("--junit", cl.merge_junit, "merged JUnit path");
  cl.merge->add_option("--summary", cl.merge_summary, "Markdown summary path");
  cl.merge->add_option("--results", cl.merge_results, "merged results (JSON lines) path");
  cl.merge->add_option("--junit-properties", cl.merge_junit_properties, "lean or all, as run --junit-properties");
  cl.merge->add_flag(
      "--prefer-later", cl.prefer_later,
      "of two differing results of a case, keep the later (a later argument; in a folder, a later path), "
      "e.g. a retried shard's, instead of refusing to merge");
  cl.matrix = cl.report->add_subcommand("matrix", "enablement matrix family × impl × arch (Markdown)");
  cl.matrix->add_option("inputs", cl.view_inputs, "reports or folders")->required();
  cl.matrix->add_option("--markdown", cl.matrix_md, "write the Markdown here (default: stdout)");
  cl.times = cl.report->add_subcommand("times", "per-arch test-times files ({case id: seconds}) for --times");
  cl.times->add_option("inputs", cl.view_inputs, "reports or folders")->required();
  cl.times->add_option("--out", cl.times_out, "times file; {arch} is replaced by each arch (cases/times/{arch}.json)")
      ->required();
  cl.times->add_option("--arch", cl.times_arch, "only this arch's results");
  cl.html = cl.report->add_subcommand("html", "one self-contained HTML report");
  cl.html->add_option("inputs", cl.view_inputs, "reports or folders")->required();
  cl.html->add_option("--out", cl.html_out, "HTML path")->required();
  cl.html->add_option("--title", cl.html_title, "page title");
  cl.tightness =
      cl.report->add_subcommand("tightness", "error ÷ bound per family, impl and output over passing cases (Markdown)");
  cl.tightness->add_option("inputs", cl.view_inputs, "reports or folders")->required();
  cl.tightness->add_option("--markdown", cl.tightness_md, "write the Markdown here (default: stdout)");
  cl.gate_cmd = app->add_subcommand(
      "gate",
      "judge reports against the selection their runs recorded, or with --arch against a plan made now "
      "(exit 0 passed, 1 failed, 2 error; docs/gate.md)");
  add_selection(cl.gate_cmd, cl.sel);
  cl.gate_cmd->add_option("reports", cl.gate_inputs, "reports (JUnit .xml, results .jsonl) or folders")->required();
  cl.gate_cmd->add_flag("--prefer-later", cl.prefer_later, "as report merge --prefer-later");
  cl.gate_cmd->add_option("--min-run", cl.gate_min_run,
                          "fail when fewer cases ran (neither SKIP nor MISSING; default 1)");
  cl.gate_cmd->add_flag(
      "--require-measured-models", cl.gate_require_measured,
      "fail cases judged under a provisional accumulator model (an arch whose manifest measured none)");

  cl.cache = app->add_subcommand("cache", "work with the on-disk reference cache");
  cl.cache->require_subcommand(1);
  cl.cache_verify =
      cl.cache->add_subcommand("verify",
                               "recompute a sample of cached references and compare them bit "
                               "for bit; wrong or unreadable entries are removed (exit 1 on any wrong one)");
  cl.cache_verify->add_option("--ref-cache", cl.cache_dir,
                              "cache folder (default: $XDG_CACHE_HOME/opcts or ~/.cache/opcts)");
  cl.cache_verify->add_option("--sample", cl.cache_sample,
                              "entries to recompute, chosen at random (0: every one; default 16)");

  cl.manifest = app->add_subcommand("manifest", "work with arch manifests");
  cl.manifest->require_subcommand(1);
  cl.manifest_lint = cl.manifest->add_subcommand(
      "lint", "report stale, shadowed or malformed entries of an arch's manifest (exit 1 on any)");
  cl.manifest_lint->add_option("--arch", cl.sel.arch, "arch whose manifest is checked")->required();
  cl.manifest_lint->add_option("--cases-dir", cl.sel.cases_dir, "folder of archs.yaml, tolerances.yaml, manifests/");
  cl.manifest_lint->add_option("--manifest", cl.sel.manifest,
                               "manifest file (default: <cases-dir>/manifests/<arch>.yaml)");
  cl.manifest_lint->add_option("--plugin", cl.sel.plugins, "shared library of impls to load (repeatable)");

  cl.probe = app->add_subcommand("probe", "measure properties of the device's impls");
  cl.probe->require_subcommand(1);
  cl.probe_accumulators = cl.probe->add_subcommand(
      "accumulators",
      "measure how each scaled GEMM path of the arch accumulates; print manifest tolerance: entries "
      "(exit 1 when a path fits no model or none was measured)");
  cl.probe_accumulators
      ->add_option("--arch", cl.sel.arch, "arch whose impls are probed (auto = the GPU present, else host)")
      ->capture_default_str();
  cl.probe_accumulators->add_option("--device", cl.probe_device,
                                    "GPU ordinal (default: CTest's resource allocation, else 0)");
  cl.probe_accumulators->add_option("--filter", cl.sel.filters,
                                    "glob over impl names to probe (repeatable; default: all)");
  cl.probe_accumulators->add_option("--cases-dir", cl.sel.cases_dir,
                                    "folder of archs.yaml, tolerances.yaml, manifests/");
  cl.probe_accumulators->add_option("--manifest", cl.sel.manifest,
                                    "manifest whose models are printed beside the measured ones (default: the arch's)");
  cl.probe_accumulators->add_option("--plugin", cl.sel.plugins, "shared library of impls to load (repeatable)");
  cl.probe_accumulators->add_option("--out", cl.probe_out, "file to write the entries to (default: stdout)");

  cl.ctest = app->add_subcommand("ctest-tests", "write the CTest script of shard tests (used by the build)");
  add_selection(cl.ctest, cl.sel);
  cl.ctest->add_option("--archs", cl.ctest_archs, "archs, ';' or ',' separated")->delimiter(';')->required();
  cl.ctest->add_option("--shards", cl.ctest_plan.shards, "shards per arch and family (1 to 1024)");
  cl.ctest->add_option("--exe", cl.ctest_plan.exe, "opcts binary the tests run")->required();
  cl.ctest->add_option("--reports-dir", cl.ctest_plan.reports_dir, "where shard reports go")->required();
  cl.ctest->add_option("--out", cl.ctest_plan.out, "script to write")->required();
  cl.ctest->add_option("--timeout", cl.ctest_plan.timeout, "per-case timeout passed to run");
  cl.ctest->add_flag("--bitwise", cl.ctest_plan.bitwise, "the shards run with --bitwise (determinism checks)");
  cl.ctest->add_flag("--invariance", cl.ctest_plan.invariance,
                     "the shards run with --invariance (the impls' invariance claims)");
  cl.ctest->add_flag("--capture", cl.ctest_plan.capture,
                     "the shards run with --capture (each run recorded and replayed on fresh inputs)");
  cl.ctest->add_option("--memcheck-slices", cl.ctest_plan.memcheck_slices,
                       "N > 0: each CUDA arch gets a test (labels memcheck, nightly) running today's slice, "
                       "shard (days since 1970 mod N) + 1 of N, under --sanitize memcheck (0 to 1024; 0: none)");

  tidy_defaults(app.get());

  cl.worker = app->add_subcommand("__worker", "internal: the worker process");
  cl.worker->group("");  // hidden from --help
  cl.worker->add_option("--arch", cl.wo.suite.arch)->required();
  cl.worker->add_option("--cases-dir", cl.wo.suite.cases_dir)->required();
  cl.worker->add_option("--manifest", cl.wo.suite.manifest);
  cl.worker->add_option("--ids", cl.wo.ids_file)->required();
  cl.worker->add_option("--start", cl.wo.start);
  cl.worker->add_option("--count", cl.wo.count);
  cl.worker->add_option("--device", cl.wo.device);
  cl.worker->add_option("--result-fd", cl.wo.result_fd);
  for (const ExecFlag& f : kExecFlags)  // runner/execute.hpp: the table the supervisor writes from
    std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(member), bool ExecOptions::*>)
            cl.worker->add_flag(f.flag, cl.wo.exec.*member);
          else cl.worker->add_option(f.flag, cl.wo.exec.*member);
        },
        f.field);
  cl.worker->add_option("--plugin", cl.wo.suite.plugins);

  // The plugin probe (app/plugin_probe.hpp): loads plugins, or asks their supports().
  cl.plugin_probe =
      app->add_subcommand("__plugin-probe", "internal: load plugins or ask their impls in a probe process");
  cl.plugin_probe->group("");
  cl.plugin_probe->add_option("--plugin", cl.pp_plugins)->required();
  cl.plugin_probe->add_option("--answer-fd", cl.pp_answer_fd);
  cl.plugin_probe->add_option("--arch", cl.pp_arch);
  cl.plugin_probe->add_option("--cases-dir", cl.pp_cases_dir);
  cl.plugin_probe->add_option("--ids", cl.pp_ids);
  cl.plugin_probe->add_option("--device", cl.pp_device);
  cl.plugin_probe->add_flag("--tactics", cl.pp_tactics);
  return app;
}

void check_run_flags(const RunFlags& f) {
  if (!(f.timeout > 0) || !std::isfinite(f.timeout))
    throw std::invalid_argument("--timeout must be a positive number of seconds");
  if (!(f.ref_cache_max_gib > 0) || !(f.ref_cache_max_gib <= 1 << 20))
    throw std::invalid_argument("--ref-cache-max-gib must be a positive number of GiB (at most 1048576)");
  parse_junit_detail(f.junit_properties);
  if (f.reruns < 0 || f.reruns > kMaxReruns)
    throw std::invalid_argument("--reruns must be from 0 to " + std::to_string(kMaxReruns) + ", not " +
                                std::to_string(f.reruns));
  if (f.min_run < 0) throw std::invalid_argument("--min-run must be 0 or more, not " + std::to_string(f.min_run));
  const std::string tools[] = {"memcheck", "racecheck", "synccheck", "initcheck"};
  if (!f.sanitize.empty() && std::find(std::begin(tools), std::end(tools), f.sanitize) == std::end(tools))
    throw std::invalid_argument("--sanitize must be memcheck, racecheck, synccheck or initcheck, not '" + f.sanitize +
                                "'");
  if (!f.sanitizer.empty() && f.sanitize.empty()) throw std::invalid_argument("--sanitizer needs --sanitize TOOL");
}

void check_options(const CommandLine& cl) {
  const bool selects =
      (cl.list && *cl.list) || (cl.run && *cl.run) || (cl.gate_cmd && *cl.gate_cmd) || (cl.ctest && *cl.ctest);
  if (selects) {
    parse_tier(cl.sel.tier);
    parse_shard(resolve_shard(cl.sel.shard));
  }
  if (cl.run && *cl.run) check_run_flags(cl.rf);
}

}  // namespace opcts::cli
