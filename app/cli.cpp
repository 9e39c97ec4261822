// opcts: the command line — list, run, repro, gate, report merge/matrix/times/html/tightness, resources, manifest lint,
// probe accumulators, ctest-tests and the worker.
#include <cstdio>
#include <sstream>

#include "app/builtins.hpp"
#include "app/cli_commands.hpp"
#include "app/cli_parse.hpp"
#include "app/cli_suggest.hpp"
#include "app/plugin_probe.hpp"
#include "core/allocator.hpp"
#include "runner/worker.hpp"

using namespace opcts;
using namespace opcts::cli;

namespace {

// Runs the parsed command; returns its exit code.
int dispatch(CommandLine& cl, const char* argv0) {
  check_options(cl);
  if (*cl.list)
    return cl.fields_of.empty() ? cmd_list(cl.sel, cl.verbose, cl.count_only, cl.coverage, cl.rf)
                                : cmd_list_fields(cl.fields_of);
  if (*cl.run) return cmd_run(cl.sel, cl.rf, argv0);
  if (*cl.sample) {
    SampleOverride o;
    if (cl.sample->count("--seed")) o.seed = cl.sample_seed;
    if (cl.sample->count("--count")) o.count = cl.sample_count;
    return cmd_sample(cl.sel, cl.sample_family, o, cl.verbose);
  }
  if (*cl.repro) return cmd_repro(cl.repro_id, cl.sel, cl.repro_device, cl.repro_json, cl.rf);
  if (*cl.shrink) return cmd_shrink(cl.repro_id, cl.sel, cl.repro_device, cl.shrink_seconds);
  if (*cl.resources) return cmd_resources(cl.resources_out);
  if (*cl.manifest_lint) return cmd_manifest_lint(cl.sel);
  if (*cl.probe_accumulators) return cmd_probe_accumulators(cl.sel, cl.probe_device, cl.probe_out);
  if (*cl.merge)
    return cmd_merge(cl.merge_inputs, cl.merge_junit, cl.merge_summary, cl.merge_results, cl.prefer_later,
                     cl.merge_junit_properties);
  if (*cl.matrix) return cmd_report_matrix(cl.view_inputs, cl.matrix_md);
  if (*cl.times) return cmd_report_times(cl.view_inputs, cl.times_out, cl.times_arch);
  if (*cl.html) return cmd_report_html(cl.view_inputs, cl.html_out, cl.html_title);
  if (*cl.tightness) return cmd_report_tightness(cl.view_inputs, cl.tightness_md);
  if (*cl.gate_cmd)
    return cmd_gate(cl.sel, cl.gate_inputs, cl.gate_cmd->count("--arch") > 0, cl.gate_cmd->count("--tier") > 0,
                    cl.prefer_later, cl.gate_min_run, cl.gate_require_measured);
  if (*cl.cache_verify) return cmd_cache_verify(cl.cache_dir, cl.cache_sample);
  if (*cl.plugin_probe) {
    if (cl.pp_ids.empty()) {
      if (cl.pp_plugins.size() != 1) throw std::invalid_argument("__plugin-probe loads one --plugin at a time");
      return plugin_probe_main(cl.pp_plugins.front(), cl.pp_answer_fd);
    }
    if (cl.pp_tactics) return tactics_probe_main(loaded_registry_for(cl.pp_plugins), cl.pp_ids, cl.pp_answer_fd);
    return supports_probe_main(loaded_registry_for(cl.pp_plugins), cl.pp_arch, cl.pp_cases_dir, cl.pp_ids,
                               cl.pp_answer_fd, cl.pp_device);
  }
  if (*cl.ctest) {
    for (auto& a : cl.ctest_archs) {
      std::stringstream ss(a);
      for (std::string x; std::getline(ss, x, ',');)
        if (!x.empty()) cl.ctest_plan.archs.push_back(x);
    }
    return cmd_ctest_tests(cl.sel, cl.ctest_plan);
  }
  if (*cl.worker) {
    cl.wo.suite.load_catalogs = false;
    return worker_main(loaded_registry_for(cl.wo.suite.plugins), cl.wo);
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  opcts::keep_freed_memory();  // workers, forked or started from here, inherit or repeat it
  CommandLine cl;
  const auto app = make_cli(cl);
  app->set_version_flag(
      "--version", [] { return version_text(); }, "print the version, commit, build options and the cases folder");
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as the commands' own errors do.
    const int rc = app->exit(e);
    if (rc == 0) return 0;
    if (const std::string hint = suggestion(*app, std::vector<std::string>(argv + 1, argv + argc)); !hint.empty())
      std::fprintf(stderr, "opcts: %s\n", hint.c_str());
    return 2;
  }
  try {
    return dispatch(cl, argv[0]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opcts: error: %s\n", e.what());
    return 2;
  }
}
