// opcts report merge/matrix/times/html/tightness, gate and ctest-tests: views and verdicts of reports.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "app/builtins.hpp"
#include "app/cli_commands.hpp"
#include "core/errors.hpp"
#include "core/yaml_util.hpp"
#include "judge/gate.hpp"
#include "judge/run_selection.hpp"
#include "numerics/rng.hpp"
#include "reports/html.hpp"
#include "reports/junit.hpp"
#include "reports/matrix.hpp"
#include "reports/merge.hpp"
#include "reports/output_files.hpp"
#include "reports/results_stream.hpp"
#include "reports/summary.hpp"
#include "reports/tightness.hpp"
#include "reports/times.hpp"
#include "runner/execute.hpp"
#include "runner/ref_cache_verify.hpp"
#include "runner/ref_disk_cache.hpp"
#include "runner/shard_cases.hpp"
#include "runner/supervisor.hpp"
#include "runner/worker.hpp"

namespace opcts::cli {

int cmd_merge(const std::vector<std::string>& inputs, const std::string& junit, const std::string& summary,
              const std::string& results, bool prefer_later, const std::string& junit_properties) {
  // A merge that writes nothing would succeed having done nothing: a CI step that forgot its
  // output flag must fail, not gate on files that were never written.
  if (junit.empty() && summary.empty() && results.empty())
    throw std::invalid_argument("report merge writes nothing: give --junit, --summary or --results");
  const JunitDetail detail = parse_junit_detail(junit_properties);
  check_distinct_outputs({{"--junit", junit}, {"--summary", summary}, {"--results", results}});
  const LoadedReports loaded = load_reports_with_selections(inputs, prefer_later);
  const auto& records = loaded.records;
  // An empty merge usually means the shards never wrote their reports: never a green gate.
  if (records.empty()) throw std::runtime_error("no results found in the given reports");
  // Every shard's selection travels on, so that `opcts gate` of the merged report still knows
  // what should have run (and which shards it holds).
  std::vector<std::string> selections;
  std::string headers;
  for (const auto& rs : loaded.selections) {
    selections.push_back(rs.selection.json());
    headers += (headers.empty() ? "" : "\n") + rs.selection.header_line();
  }
  std::vector<std::pair<std::string, std::string>> files;
  if (!junit.empty()) files.emplace_back(junit, junit_xml(records, "opcts", detail, selections));
  if (!summary.empty()) files.emplace_back(summary, summary_markdown(records));
  if (!results.empty()) files.emplace_back(results, results_text(records, headers));
  write_files(files);  // all or none: a full disk leaves every old file as it was
  std::printf("merged %zu results (%zu run selections)\n", records.size(), loaded.selections.size());
  return 0;
}

// Judges reports: against the selections they carry (no flags), or against the plan and
// manifest the options make now (--arch); then the run as a whole.
int cmd_gate(const Selection& sel, const std::vector<std::string>& inputs, bool against_plan, bool tier_given,
             bool prefer_later, int min_run, bool require_measured_models) {
  if (min_run < 0) throw std::invalid_argument("--min-run must be 0 or more, not " + std::to_string(min_run));
  const LoadedReports loaded = load_reports_with_selections(inputs, prefer_later);
  std::vector<std::pair<RunSelection, std::string>> selections;
  std::set<std::string> archs;
  for (const auto& rs : loaded.selections) {
    selections.emplace_back(rs.selection, rs.file);
    archs.insert(rs.selection.arch);
  }
  GateVerdict v;
  std::string label;
  if (!against_plan) {
    v = gate_as_judged(loaded.records);
    check_selections(selections, loaded.records, v);
    std::set<std::string> planted;
    for (const auto& [sel, file] : selections) planted.insert(sel.planted.begin(), sel.planted.end());
    check_coverage(loaded.records, nullptr, static_cast<size_t>(min_run), v, planted);
    if (require_measured_models) check_measured_models(loaded.records, v);
    for (const auto& a : archs) label += (label.empty() ? "" : ",") + a;
    if (label.empty()) label = "(no selection)";
  } else {
    if (sel.arch == "auto") throw std::invalid_argument("gate against a plan needs --arch");
    Selection s = sel;
    Suite suite(registry_for(s.plugins, s.optional_plugins), suite_options(s, s.arch));
    std::vector<ResultRecord> records;
    size_t other = 0;
    for (const auto& r : loaded.records) {
      if (r.arch.empty() || r.arch == s.arch) records.push_back(r);
      else ++other;
    }
    if (other) std::fprintf(stderr, "opcts gate: ignoring %zu results of other archs\n", other);
    // Without --tier the plan is the tier the reports were run at (the widest one they hold),
    // so gating a smoke run does not call the default tier's cases MISSING.
    if (!tier_given) {
      Tier widest = Tier::smoke;
      for (const auto& r : records)
        if (!r.tier.empty()) widest = std::max(widest, parse_tier(r.tier));
      s.tier = std::string(to_string(widest));
    }
    std::vector<std::string> planned, all_ids;
    for (const auto& c : selected(suite, s)) planned.push_back(c.id);
    for (const auto& c : suite.all_cases()) all_ids.push_back(c.id);
    v = gate(records, suite.manifest(), planned, all_ids);
    if (!selections.empty()) check_selections(selections, records, v);
    std::set<std::string> planted;
    for (const auto& c : suite.all_cases())
      if (c.impl->planted()) planted.insert(std::string(c.impl->name()));
    check_coverage(records, &suite.manifest(), static_cast<size_t>(min_run), v, planted);
    if (require_measured_models) check_measured_models(records, v);
    label = s.arch;
  }
  std::fputs(format_verdict(v, label).c_str(), stdout);
  return v.passed() ? 0 : 1;
}

// report matrix / times / html: views of merged reports of one or more archs.
int cmd_report_matrix(const std::vector<std::string>& inputs, const std::string& markdown) {
  const std::string md = matrix_markdown(enablement_matrix(load_reports(inputs)));
  if (markdown.empty()) std::fputs(md.c_str(), stdout);
  else write_text_file(markdown, md);
  return 0;
}

int cmd_report_times(const std::vector<std::string>& inputs, const std::string& out, const std::string& arch) {
  auto by_arch = times_by_arch(load_reports(inputs));
  if (!arch.empty()) {
    if (!by_arch.count(arch)) throw std::runtime_error("no results of arch " + arch + " in the given reports");
    by_arch = {{arch, by_arch.at(arch)}};
  }
  if (by_arch.size() > 1 && out.find("{arch}") == std::string::npos)
    throw std::invalid_argument("reports hold " + std::to_string(by_arch.size()) +
                                " archs: put {arch} in --out (e.g. cases/times/{arch}.json) or pass --arch");
  for (const auto& [a, times] : by_arch) {
    write_text_file(times_path(out, a), times_json(times));
    std::printf("%s: %zu case times -> %s\n", a.c_str(), times.size(), times_path(out, a).c_str());
  }
  return by_arch.empty() ? 1 : 0;
}

int cmd_report_html(const std::vector<std::string>& inputs, const std::string& out, const std::string& title) {
  const auto records = load_reports(inputs);
  if (records.empty()) throw std::runtime_error("no results found in the given reports");
  write_text_file(out, html_report(records, title));
  std::printf("wrote %s (%zu results)\n", out.c_str(), records.size());
  return 0;
}

int cmd_report_tightness(const std::vector<std::string>& inputs, const std::string& markdown) {
  const auto records = load_reports(inputs);
  if (records.empty()) throw std::runtime_error("no results found in the given reports");
  const std::string md = tightness_report_markdown(records);
  if (markdown.empty()) std::fputs(md.c_str(), stdout);
  else write_text_file(markdown, md);
  return 0;
}

// Writes the CTest script of the shard tests: per arch and family, `shards` tests
// opcts.<arch>.<family>.shard<i>of<N>, labelled with the arch, gpu or cpu, and the family,
// so `ctest -L sm90 -L scaled_mm` runs exactly that family; GPU shards ask for one GPU.
int memcheck_slice_of_day(int64_t days_since_epoch, int slices) {
  return static_cast<int>(days_since_epoch % slices) + 1;
}

int cmd_ctest_tests(const Selection& s, const CtestPlan& plan) {
  if (plan.shards < 1 || plan.shards > kMaxShards)
    throw std::invalid_argument("--shards must be from 1 to " + std::to_string(kMaxShards) + ", not " +
                                std::to_string(plan.shards));
  if (plan.memcheck_slices < 0 || plan.memcheck_slices > kMaxShards)
    throw std::invalid_argument("--memcheck-slices must be from 0 to " + std::to_string(kMaxShards) + ", not " +
                                std::to_string(plan.memcheck_slices));
  // The selection every test repeats after its own arguments.
  std::ostringstream common;
  for (const auto& c : s.catalogs) common << " --catalog \"" << c << "\"";
  for (const auto& p : s.plugins) common << " --plugin \"" << p << "\"";
  for (const auto& p : s.optional_plugins) common << " --plugin-optional \"" << p << "\"";
  for (const auto& f : s.filters) common << " --filter \"" << f << "\"";
  for (const auto& x : s.excludes) common << " --exclude \"" << x << "\"";
  if (!s.times.empty()) common << " --times \"" << s.times << "\"";
  const auto add_test = [&](std::ostringstream& cm, const std::string& name, const std::string& arch,
                            const std::string& stem, const std::string& args, const std::string& labels, bool gpu) {
    cm << "add_test(" << name << " \"" << plan.exe << "\" run --arch " << arch << " --tier " << s.tier << args
       << " --allow-empty --junit \"" << stem << ".xml\" --results \"" << stem << ".jsonl\" --timeout " << plan.timeout
       << common.str() << ")\n";
    cm << "set_tests_properties(" << name << " PROPERTIES LABELS \"" << labels
       << "\" ENVIRONMENT \"OPCTS_CASES_DIR=" << s.cases_dir << "\"" << (gpu ? " RESOURCE_GROUPS \"gpus:1\"" : "")
       << ")\n";
  };
  const auto days =
      std::chrono::duration_cast<std::chrono::hours>(std::chrono::system_clock::now().time_since_epoch()).count() / 24;
  std::ostringstream cm;
  cm << "# Generated by opcts ctest-tests; do not edit.\n";
  for (const auto& arch : plan.archs) {
    Suite suite(registry_for(s.plugins, s.optional_plugins), suite_options(s, arch));
    const bool gpu = suite.arch().backend != "host";
    std::set<std::string> fams;
    for (const auto& c : unsharded(suite, s)) fams.insert(std::string(c.family->name()));
    for (const auto& fam : fams) {
      for (int i = 1; i <= plan.shards; ++i) {
        const std::string part = fam + ".shard" + std::to_string(i) + "of" + std::to_string(plan.shards);
        const std::string args = " --family " + fam + " --shard " + std::to_string(i) + "/" +
                                 std::to_string(plan.shards) + (plan.bitwise ? " --bitwise" : "") +
                                 (plan.invariance ? " --invariance" : "") + (plan.capture ? " --capture" : "");
        add_test(cm, "opcts." + arch + "." + part, arch, plan.reports_dir + "/" + arch + "/" + part, args,
                 arch + ";" + (gpu ? "gpu" : "cpu") + ";" + fam, gpu);
      }
    }
    // compute-sanitizer is NVIDIA's: the nightly slice exists for CUDA archs only.
    if (plan.memcheck_slices > 0 && suite.arch().backend == "cuda") {
      const int i = memcheck_slice_of_day(days, plan.memcheck_slices);
      const std::string part = "memcheck.slice" + std::to_string(i) + "of" + std::to_string(plan.memcheck_slices);
      add_test(cm, "opcts." + arch + "." + part, arch, plan.reports_dir + "/" + arch + "/" + part,
               " --shard " + std::to_string(i) + "/" + std::to_string(plan.memcheck_slices) + " --sanitize memcheck",
               "memcheck;nightly", true);
    }
  }
  write_text_file(plan.out, cm.str());
  return 0;
}

int cmd_cache_verify(const std::string& dir_flag, int sample) {
  if (sample < 0)
    throw std::invalid_argument("--sample must be 0 (every entry) or more, not " + std::to_string(sample));
  const std::string dir = dir_flag.empty() ? default_ref_cache_dir() : dir_flag;
  if (dir.empty())
    throw std::invalid_argument("no reference cache folder: pass --ref-cache (no $XDG_CACHE_HOME or $HOME)");
  if (!std::filesystem::is_directory(dir)) throw std::invalid_argument("--ref-cache " + dir + ": no such folder");
  const CacheVerdict v = verify_ref_cache(builtin_registry(), RefDiskCache(dir), static_cast<size_t>(sample));
  for (const auto& line : v.lines) std::printf("%s\n", line.c_str());
  std::printf(
      "cache verify %s: %zu files, %zu of this build (references %s), %zu recomputed: %zu differ, %zu "
      "unreadable%s\n",
      dir.c_str(), v.files, v.this_build, ref_build_digest().c_str(), v.checked, v.mismatched, v.unreadable,
      v.passed() ? "" : " — the cache served wrong references; those entries are removed");
  return v.passed() ? 0 : 1;
}

}  // namespace opcts::cli
