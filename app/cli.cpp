// opcts: the command line (CLI11) — list, run, repro, gate, report merge/matrix/times/html/tightness, resources, ctest-tests and the worker.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>

#include "app/builtins.hpp"
#include "app/cli_commands.hpp"
#include "runner/worker.hpp"

using namespace opcts;
using namespace opcts::cli;

int main(int argc, char** argv) {
  CLI::App app{"opcts: conformance tests for GPU operators against CPU references"};
  app.require_subcommand(1);
  Selection sel;
  bool verbose = false, count_only = false;
  auto* list = app.add_subcommand("list", "list case ids");
  add_selection(list, sel);
  list->add_flag("-v,--verbose", verbose, "show tier, catalog source and whether the case would run or SKIP");
  list->add_flag("--count", count_only, "print only the number of cases");
  std::string fields_of;
  list->add_option("--fields", fields_of, "print a family's problem fields (YAML keys, forms, id spelling) instead; 'all' for every family");

  RunFlags rf;
  auto* run = app.add_subcommand("run", "run cases in worker processes and write reports");
  add_selection(run, sel);
  run->add_option("--junit", rf.junit, "JUnit XML report path");
  run->add_option("--results", rf.results, "results file (one JSON line per case)");
  run->add_option("--summary", rf.summary, "Markdown summary path");
  run->add_option("--device", rf.device, "GPU ordinal (default: CTest's resource allocation, else 0)");
  run->add_option("--timeout", rf.timeout, "seconds one case may take before it is TIMEOUT");
  run->add_flag("--allow-arch-mismatch", rf.allow_arch_mismatch, "run a GPU arch's cases on a GPU of another arch");
  run->add_flag("--allow-empty", rf.allow_empty, "succeed when the selection holds no case (else an error)");
  run->add_option("--reruns", rf.reruns, "re-run an unexpected failure this often; differing outcomes make it FLAKE (manifest flaky entries may set their own)");
  run->add_option("--artifacts", rf.artifacts, "folder for failure artifacts (default: artifacts/ next to --results)");
  run->add_flag("--bitwise", rf.bitwise, "run each case twice; deterministic impls must give identical output bytes");
  run->add_option("--ref-cache", rf.ref_cache, "on-disk reference cache folder (default: $XDG_CACHE_HOME/opcts or ~/.cache/opcts)");
  run->add_flag("--no-ref-cache", rf.no_ref_cache, "compute every reference; neither read nor write the cache");

  std::string resources_out;
  auto* resources = app.add_subcommand("resources", "write a CTest resource spec (JSON) with the CUDA devices found");
  resources->add_option("--out", resources_out, "file to write (default: stdout)");

  std::string repro_id, repro_json;
  int repro_device = -1;
  auto* repro = app.add_subcommand("repro", "run one case in this process and print its statistics");
  repro->add_option("id", repro_id, "case id")->required();
  repro->add_option("--arch", sel.arch, "arch (auto = the GPU present, else host)");
  repro->add_option("--device", repro_device, "GPU ordinal");
  repro->add_option("--plugin", sel.plugins, "shared library of impls to load (repeatable)");
  repro->add_option("--cases-dir", sel.cases_dir, "folder of archs.yaml, tolerances.yaml, manifests/");
  repro->add_option("--manifest", sel.manifest, "manifest file");
  repro->add_option("--json", repro_json, "also write the result line to this file");

  auto* report = app.add_subcommand("report", "work with reports");
  report->require_subcommand(1);
  std::vector<std::string> merge_inputs;
  std::string merge_junit, merge_summary, merge_results;
  auto* merge = report->add_subcommand("merge", "join shard reports (JUnit .xml, results .jsonl, or folders)");
  merge->add_option("inputs", merge_inputs, "reports or folders")->required();
  merge->add_option("--junit", merge_junit, "merged JUnit path");
  merge->add_option("--summary", merge_summary, "Markdown summary path");
  merge->add_option("--results", merge_results, "merged results (JSON lines) path");
  std::vector<std::string> view_inputs;
  std::string matrix_md, times_out, times_arch, html_out, html_title = "opcts report";
  auto* matrix = report->add_subcommand("matrix", "enablement matrix family × impl × arch (Markdown)");
  matrix->add_option("inputs", view_inputs, "reports or folders")->required();
  matrix->add_option("--markdown", matrix_md, "write the Markdown here (default: stdout)");
  auto* times = report->add_subcommand("times", "per-arch test-times files ({case id: seconds}) for --times");
  times->add_option("inputs", view_inputs, "reports or folders")->required();
  times->add_option("--out", times_out, "times file; {arch} is replaced by each arch (cases/times/{arch}.json)")
      ->required();
  times->add_option("--arch", times_arch, "only this arch's results");
  auto* html = report->add_subcommand("html", "one self-contained HTML report");
  html->add_option("inputs", view_inputs, "reports or folders")->required();
  html->add_option("--out", html_out, "HTML path")->required();
  html->add_option("--title", html_title, "page title");
  std::string tightness_md;
  auto* tight = report->add_subcommand("tightness", "error ÷ bound per family, impl and output over passing cases (Markdown)");
  tight->add_option("inputs", view_inputs, "reports or folders")->required();
  tight->add_option("--markdown", tightness_md, "write the Markdown here (default: stdout)");
  std::vector<std::string> gate_inputs;
  auto* gate_cmd = app.add_subcommand("gate", "judge reports of one arch against its manifest and plan (exit 1 on anything unexpected)");
  add_selection(gate_cmd, sel);
  gate_cmd->add_option("reports", gate_inputs, "reports (JUnit .xml, results .jsonl) or folders")->required();

  std::vector<std::string> ctest_archs;
  int ctest_shards = 4;
  std::string ctest_exe, ctest_reports, ctest_out;
  double ctest_timeout = 600;
  auto* ctest = app.add_subcommand("ctest-tests", "write the CTest script of shard tests (used by the build)");
  add_selection(ctest, sel);
  ctest->add_option("--archs", ctest_archs, "archs, ';' or ',' separated")->delimiter(';')->required();
  ctest->add_option("--shards", ctest_shards, "shards per arch");
  ctest->add_option("--exe", ctest_exe, "opcts binary the tests run")->required();
  ctest->add_option("--reports-dir", ctest_reports, "where shard reports go")->required();
  ctest->add_option("--out", ctest_out, "script to write")->required();
  ctest->add_option("--timeout", ctest_timeout, "per-case timeout passed to run");

  WorkerOptions wo;
  auto* worker = app.add_subcommand("__worker", "internal: the worker process");
  worker->group("");  // hidden from --help
  worker->add_option("--arch", wo.suite.arch)->required();
  worker->add_option("--cases-dir", wo.suite.cases_dir)->required();
  worker->add_option("--manifest", wo.suite.manifest);
  worker->add_option("--ids", wo.ids_file)->required();
  worker->add_option("--start", wo.start);
  worker->add_option("--device", wo.device);
  worker->add_option("--result-fd", wo.result_fd);
  worker->add_option("--artifacts", wo.exec.artifacts_dir);
  worker->add_option("--ref-cache", wo.exec.ref_cache_dir);
  worker->add_flag("--bitwise", wo.exec.bitwise);
  worker->add_option("--plugin", wo.suite.plugins);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as the commands' own errors do.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (*list) return fields_of.empty() ? cmd_list(sel, verbose, count_only) : cmd_list_fields(fields_of);
    if (*run) return cmd_run(sel, rf, argv[0]);
    if (*repro) return cmd_repro(repro_id, sel, repro_device, repro_json);
    if (*resources) return cmd_resources(resources_out);
    if (*merge) return cmd_merge(merge_inputs, merge_junit, merge_summary, merge_results);
    if (*matrix) return cmd_report_matrix(view_inputs, matrix_md);
    if (*times) return cmd_report_times(view_inputs, times_out, times_arch);
    if (*html) return cmd_report_html(view_inputs, html_out, html_title);
    if (*tight) return cmd_report_tightness(view_inputs, tightness_md);
    if (*gate_cmd) return cmd_gate(sel, gate_inputs, gate_cmd->count("--tier") > 0);
    if (*ctest) {
      std::vector<std::string> archs;
      for (auto& a : ctest_archs) {
        std::stringstream ss(a);
        for (std::string x; std::getline(ss, x, ',');)
          if (!x.empty()) archs.push_back(x);
      }
      return cmd_ctest_tests(sel, archs, ctest_shards, ctest_exe, ctest_reports, ctest_out, ctest_timeout);
    }
    if (*worker) {
      wo.suite.load_catalogs = false;
      return worker_main(registry_for(wo.suite.plugins), wo, argv[0]);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opcts: error: %s\n", e.what());
    return 2;
  }
  return 2;
}
