// opcts: the command line (CLI11) — list, run, repro, report merge, ctest-tests and the worker.
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
#include <sstream>

#include "harness/errors.hpp"
#include "harness/execute.hpp"
#include "harness/rng.hpp"
#include "harness/supervisor.hpp"
#include "harness/worker.hpp"
#include "harness/yaml_util.hpp"
#include "reports/junit.hpp"
#include "reports/merge.hpp"
#include "reports/summary.hpp"
#include "sharding/shard_cases.hpp"

namespace fs = std::filesystem;
using namespace opcts;

namespace {

// Options shared by list, run and ctest-tests.
struct Selection {
  std::string arch = "auto";
  std::string tier = "default";
  std::vector<std::string> filters, excludes, catalogs;
  std::string shard = "1/1";
  std::string times;
  std::string cases_dir = default_cases_dir();
  std::string manifest;
  bool include_planted = false;
};

void add_selection(CLI::App* app, Selection& s) {
  app->add_option("--arch", s.arch, "arch to plan for (sm80, sm90, host, ...; auto = the GPU present, else host)");
  app->add_option("--tier", s.tier, "smoke, default or full (each includes the tiers before it)");
  app->add_option("--filter", s.filters, "glob over case ids to include (repeatable)");
  app->add_option("--exclude", s.excludes, "glob over case ids to leave out (repeatable)");
  app->add_option("--catalog", s.catalogs, "extra catalog file or folder (repeatable)");
  app->add_option("--shard", s.shard, "i/N: run shard i of N (1-based)");
  app->add_option("--times", s.times, "test-times file (JSON {case id: seconds}) for balancing shards");
  app->add_option("--cases-dir", s.cases_dir, "folder of built-in catalogs, archs.yaml, tolerances.yaml, manifests/");
  app->add_option("--manifest", s.manifest, "manifest file (default: <cases-dir>/manifests/<arch>.yaml)");
  app->add_flag("--include-planted", s.include_planted,
                "add the cases of planted-bug impls, which prove the suite catches their bug (they must FAIL)");
}

// The GPU of this process: --device, else CTest's resource allocation
// (CTEST_RESOURCE_GROUP_0_GPUS = "id:N,slots:1"), else 0.
int resolve_device(int flag) {
  if (flag >= 0) return flag;
  if (const char* g = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS")) {
    const std::string s(g);
    const auto p = s.find("id:");
    if (p != std::string::npos) return std::atoi(s.c_str() + p + 3);
  }
  return 0;
}

std::string resolve_arch(const std::string& arch, int device) {
  if (arch != "auto") return arch;
  return detect_arch(device);
}

SuiteOptions suite_options(const Selection& s, const std::string& arch) {
  SuiteOptions o{s.cases_dir, s.catalogs, arch, s.manifest};
  o.include_planted = s.include_planted;
  return o;
}

std::vector<Case> selected(const Suite& suite, const Selection& s) {
  auto cases = select_cases(suite.all_cases(), parse_tier(s.tier), s.filters, s.excludes);
  return shard_cases(cases, parse_shard(s.shard), s.times, suite.arch().backend != "host");
}

std::string self_exe(const char* argv0) {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

int cmd_list(const Selection& s, bool verbose, bool count_only) {
  const std::string arch = resolve_arch(s.arch, 0);
  Suite suite(suite_options(s, arch));
  const auto cases = selected(suite, s);
  if (count_only) {
    std::cout << cases.size() << "\n";
    return 0;
  }
  for (const auto& c : cases) {
    if (!verbose) {
      std::cout << c.id << "\n";
      continue;
    }
    const auto skip = suite.skip_reason(c);
    const ManifestEntry* xf = suite.manifest().find(EntryKind::xfail, c.id);
    const std::string what = skip ? "SKIP: " + *skip : xf ? "run, xfail (" + xf->source + "): " + xf->reason : "run";
    std::cout << c.id << "\t" << to_string(c.tier) << "\t" << c.source << "\t" << what << "\n";
  }
  return 0;
}

struct RunFlags {
  std::string junit, results, summary;
  int device = -1;
  double timeout = 600;
  bool allow_arch_mismatch = false;
  bool allow_empty = false;
};

// Fails before any case runs when a report could not be written afterwards: creates the
// folder and a probe file next to each path.
void check_writable(const std::string& path, const char* flag) {
  if (path.empty()) return;
  const fs::path p(path);
  if (fs::is_directory(p)) throw std::invalid_argument(std::string(flag) + " " + path + ": is a directory");
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path probe = dir / (".opcts_probe_" + std::to_string(getpid()));
  if (!std::ofstream(probe)) throw std::invalid_argument(std::string(flag) + " " + path + ": cannot write in " + dir.string());
  fs::remove(probe, ec);
}

// Makes sure a GPU manifest is not judged on a GPU of another arch.
void check_arch_matches(const Suite& suite, int device, bool allow) {
  if (suite.arch().backend == "host") return;
  std::string why;
  const std::string found = detect_arch(device, &why);
  if (found == suite.arch().name || allow) return;
  throw std::invalid_argument("--arch " + suite.arch().name + " but this machine's device " + std::to_string(device) +
                              " is " + found + " (" + why + "); pass --allow-arch-mismatch to run anyway");
}

// A failure under a manifest `flaky` entry is run again up to `reruns` times (default 2);
// if a rerun passes, the case is PASS and its message keeps the first failure, so a known
// flake neither fails the run nor hides what it did.
void rerun_flaky(const Suite& suite, const SupervisorOptions& so, std::vector<ResultRecord>& ran) {
  for (auto& r : ran) {
    const ManifestEntry* e = suite.manifest().find(EntryKind::flaky, r.id);
    if (!e || !is_failure(r.raw_outcome)) continue;
    const int reruns = e->reruns > 0 ? e->reruns : 2;
    for (int k = 1; k <= reruns; ++k) {
      const ResultRecord again = supervise(so, {r.id}, nullptr).front();
      if (again.raw_outcome == Outcome::PASS) {
        const std::string first = std::string(to_string(r.raw_outcome)) + ": " + r.message;
        r = again;
        r.message = "flaky (" + e->source + "): passed on rerun " + std::to_string(k) + " after " + first;
        break;
      }
    }
  }
}

int cmd_run(const Selection& s, const RunFlags& f, const char* argv0) {
  const int device = resolve_device(f.device);
  const std::string arch = resolve_arch(s.arch, device);
  if (!(f.timeout > 0) || !std::isfinite(f.timeout))
    throw std::invalid_argument("--timeout must be a positive number of seconds");
  check_writable(f.junit, "--junit");
  check_writable(f.results, "--results");
  check_writable(f.summary, "--summary");
  Suite suite(suite_options(s, arch));
  check_arch_matches(suite, device, f.allow_arch_mismatch);
  const auto cases = selected(suite, s);
  // A filter typo must not gate green: an empty selection is an error unless allowed
  // (CTest shards allow it: a small tier may leave a shard empty).
  if (cases.empty() && !f.allow_empty)
    throw std::invalid_argument("no case of arch " + arch + " matches the selection (tier " + s.tier +
                                (s.filters.empty() ? "" : ", --filter " + s.filters.front()) +
                                ", shard " + s.shard + "); pass --allow-empty if that is expected");
  std::vector<ResultRecord> records;
  std::vector<std::string> to_run;
  std::map<std::string, const Case*> by_id;
  for (const auto& c : cases) {
    by_id[c.id] = &c;
    if (auto why = suite.skip_reason(c)) {
      ResultRecord r;
      r.id = c.id;
      r.family = std::string(c.family->name());
      r.impl = std::string(c.impl->name());
      r.arch = arch;
      r.device = suite.arch().backend == "host" ? -1 : device;
      r.outcome = r.raw_outcome = Outcome::SKIP;
      r.message = *why;
      records.push_back(std::move(r));
    } else {
      to_run.push_back(c.id);
    }
  }
  const std::string dev = suite.arch().backend == "host" ? "host" : "GPU " + std::to_string(device);
  std::fprintf(stderr, "opcts: arch %s on %s, %zu cases (%zu to run, %zu skipped), shard %s, tier %s\n",
               arch.c_str(), dev.c_str(), cases.size(), to_run.size(), records.size(), s.shard.c_str(),
               s.tier.c_str());

  const std::string work = f.results.empty() ? fs::temp_directory_path().string()
                                             : (fs::path(f.results).parent_path().empty() ? std::string(".")
                                                : fs::path(f.results).parent_path().string());
  fs::create_directories(work);
  SupervisorOptions so{suite_options(s, arch), self_exe(argv0), work, device, f.timeout};
  const auto t0 = std::chrono::steady_clock::now();
  size_t failures = 0;
  auto progress = [&](const ResultRecord& r, size_t done) {
    const ManifestEntry* xf = suite.manifest().find(EntryKind::xfail, r.id);
    const Outcome o = apply_expectation(r.raw_outcome, xf);
    if (is_gate_failure(o)) {
      ++failures;
      const std::string why = o == Outcome::XPASS ? "passed under strict xfail " + xf->source + ": remove the entry"
                                                  : r.message.substr(0, 300);
      std::fprintf(stderr, "%s %s: %s\n  repro: %s\n", std::string(to_string(o)).c_str(), r.id.c_str(), why.c_str(),
                   repro_command(r.id, arch, s.manifest).c_str());
    }
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (isatty(STDERR_FILENO) || done == to_run.size() || done % 100 == 0)
      std::fprintf(stderr, "%s[%zu/%zu] %zu failures, %.0f s elapsed, ~%.0f s left%s",
                   isatty(STDERR_FILENO) ? "\r" : "", done, to_run.size(), failures, el,
                   el / static_cast<double>(done) * static_cast<double>(to_run.size() - done),
                   isatty(STDERR_FILENO) && done < to_run.size() ? "" : "\n");
  };
  auto ran = supervise(so, to_run, progress);
  rerun_flaky(suite, so, ran);

  for (auto& r : ran) {
    const Case& c = *by_id.at(r.id);
    const ManifestEntry* xf = suite.manifest().find(EntryKind::xfail, r.id);
    r.outcome = apply_expectation(r.raw_outcome, xf);
    if (r.outcome == Outcome::XFAIL || r.outcome == Outcome::XPASS)
      r.message = "xfail (" + xf->source + "): " + xf->reason + (r.message.empty() ? "" : " — " + r.message);
    r.family = std::string(c.family->name());
    r.impl = std::string(c.impl->name());
    r.arch = arch;
    records.push_back(std::move(r));
  }
  for (auto& r : records) {
    const Case& c = *by_id.at(r.id);
    r.tier = std::string(to_string(c.tier));
    r.seed = seed_hex(case_seed(*c.family, *c.problem));
    r.repro = repro_command(r.id, arch, s.manifest);
  }
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.id < b.id; });

  if (!f.results.empty()) {
    std::string lines;
    for (const auto& r : records) lines += to_json_line(r) + "\n";
    write_text_file(f.results, lines);
  }
  if (!f.junit.empty()) write_junit(records, f.junit, "opcts." + arch);
  if (!f.summary.empty()) write_text_file(f.summary, summary_markdown(records));

  std::vector<std::string> all_ids;
  for (const auto& c : suite.all_cases()) all_ids.push_back(c.id);
  for (const ManifestEntry* e : suite.manifest().stale(all_ids))
    std::fprintf(stderr, "opcts: stale manifest entry %s (%s '%s'): matches no case of %s; remove it\n",
                 e->source.c_str(), std::string(to_string(e->kind)).c_str(), e->match.c_str(), arch.c_str());

  std::map<Outcome, size_t> counts;
  for (const auto& r : records) ++counts[r.outcome];
  size_t gate = 0;
  for (const auto& [o, n] : counts)
    if (is_gate_failure(o)) gate += n;
  std::printf("opcts %s: %zu PASS, %zu FAIL, %zu ERROR, %zu CRASH, %zu TIMEOUT, %zu SKIP, %zu XFAIL, %zu XPASS\n",
              arch.c_str(), counts[Outcome::PASS], counts[Outcome::FAIL], counts[Outcome::ERROR],
              counts[Outcome::CRASH], counts[Outcome::TIMEOUT], counts[Outcome::SKIP], counts[Outcome::XFAIL],
              counts[Outcome::XPASS]);
  return gate ? 1 : 0;
}

int cmd_repro(const std::string& id, const Selection& s, int device_flag, const std::string& json_out) {
  const int device = resolve_device(device_flag);
  const std::string arch = resolve_arch(s.arch, device);
  SuiteOptions so = suite_options(s, arch);
  Suite suite(so);
  const Case c = case_from_id(suite.registry(), id);
  if (c.impl->backend() != suite.arch().backend)
    throw std::invalid_argument("impl " + std::string(c.impl->name()) + " runs on " + std::string(c.impl->backend()) +
                                " archs, not on " + arch + " (" + suite.arch().backend + ")");
  std::printf("case   %s\narch   %s (device %d)\nseed   %s\n", c.id.c_str(), arch.c_str(), device,
              seed_hex(case_seed(*c.family, *c.problem)).c_str());
  if (auto why = suite.skip_reason(c)) {
    std::printf("SKIP   %s\n", why->c_str());
    return 0;
  }
  ReferenceCache cache;
  ResultRecord r;
  try {
    r = execute_case(suite, c, device, cache);
  } catch (const DeviceLost& e) {
    std::printf("CRASH  device context lost: %s\n", e.what());
    return 1;
  }
  r.outcome = apply_expectation(r.raw_outcome, suite.manifest().find(EntryKind::xfail, c.id));
  for (const auto& o : r.outputs)
    std::printf("output %-4s %-12s max_abs_err %.6g  max_rel_err %.6g  bound %.6g  lowp_err %.6g  mismatches %lld/%lld\n",
                o.out.c_str(), o.metric.c_str(), o.max_abs_err, o.max_rel_err, o.bound, o.lowp_err,
                static_cast<long long>(o.mismatches), static_cast<long long>(o.elements));
  for (const auto& w : r.worst) {
    std::string idx;
    for (auto i : w.index) idx += (idx.empty() ? "" : ",") + std::to_string(i);
    std::printf("worst  %s[%s] got %.9g want %.9g\n", w.out.c_str(), idx.c_str(), w.got, w.want);
  }
  std::printf("%s  %.1f ms%s%s\n", std::string(to_string(r.outcome)).c_str(), r.ms, r.message.empty() ? "" : "  ",
              r.message.c_str());
  if (!json_out.empty()) write_text_file(json_out, to_json_line(r) + "\n");
  return is_gate_failure(r.outcome) ? 1 : 0;
}

int cmd_merge(const std::vector<std::string>& inputs, const std::string& junit, const std::string& summary,
              const std::string& results) {
  const auto records = load_reports(inputs);
  // An empty merge usually means the shards never wrote their reports: never a green gate.
  if (records.empty()) throw std::runtime_error("no results found in the given reports");
  if (!junit.empty()) write_junit(records, junit, "opcts");
  if (!summary.empty()) write_text_file(summary, summary_markdown(records));
  if (!results.empty()) {
    std::string lines;
    for (const auto& r : records) lines += to_json_line(r) + "\n";
    write_text_file(results, lines);
  }
  std::printf("merged %zu results\n", records.size());
  return 0;
}

// Writes the CTest script of the shard tests: one test per arch and shard, labelled with
// the arch, gpu or cpu, and the families the shard holds; GPU shards ask for one GPU.
int cmd_ctest_tests(const Selection& s, const std::vector<std::string>& archs, int shards, const std::string& exe,
                    const std::string& reports_dir, const std::string& out, double timeout) {
  std::ostringstream cm;
  cm << "# Generated by opcts ctest-tests; do not edit.\n";
  for (const auto& arch : archs) {
    Suite suite(suite_options(s, arch));
    const bool gpu = suite.arch().backend != "host";
    const auto cases = select_cases(suite.all_cases(), parse_tier(s.tier), s.filters, s.excludes);
    const auto fams = shard_families(cases, shards, s.times, gpu);
    for (int i = 1; i <= shards; ++i) {
      const std::string name = "opcts." + arch + ".shard" + std::to_string(i) + "of" + std::to_string(shards);
      const std::string stem = reports_dir + "/" + arch + "/shard" + std::to_string(i) + "of" + std::to_string(shards);
      cm << "add_test(" << name << " \"" << exe << "\" run --arch " << arch << " --tier " << s.tier << " --shard " << i
         << "/" << shards << " --allow-empty --junit \"" << stem << ".xml\" --results \"" << stem
         << ".jsonl\" --timeout " << timeout;
      for (const auto& c : s.catalogs) cm << " --catalog \"" << c << "\"";
      if (!s.times.empty()) cm << " --times \"" << s.times << "\"";
      cm << ")\n";
      std::string labels = arch + ";" + (gpu ? "gpu" : "cpu");
      for (const auto& fam : fams[i - 1]) labels += ";" + fam;
      cm << "set_tests_properties(" << name << " PROPERTIES LABELS \"" << labels << "\" ENVIRONMENT \"OPCTS_CASES_DIR="
         << s.cases_dir << "\"" << (gpu ? " RESOURCE_GROUPS \"gpus:1\"" : "") << ")\n";
    }
  }
  write_text_file(out, cm.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"opcts: conformance tests for GPU operators against CPU references"};
  app.require_subcommand(1);
  Selection sel;
  bool verbose = false, count_only = false;
  auto* list = app.add_subcommand("list", "list case ids");
  add_selection(list, sel);
  list->add_flag("-v,--verbose", verbose, "show tier, catalog source and whether the case would run or SKIP");
  list->add_flag("--count", count_only, "print only the number of cases");

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

  std::string repro_id, repro_json;
  int repro_device = -1;
  auto* repro = app.add_subcommand("repro", "run one case in this process and print its statistics");
  repro->add_option("id", repro_id, "case id")->required();
  repro->add_option("--arch", sel.arch, "arch (auto = the GPU present, else host)");
  repro->add_option("--device", repro_device, "GPU ordinal");
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

  CLI11_PARSE(app, argc, argv);
  try {
    if (*list) return cmd_list(sel, verbose, count_only);
    if (*run) return cmd_run(sel, rf, argv[0]);
    if (*repro) return cmd_repro(repro_id, sel, repro_device, repro_json);
    if (*merge) return cmd_merge(merge_inputs, merge_junit, merge_summary, merge_results);
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
      return worker_main(wo, argv[0]);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opcts: error: %s\n", e.what());
    return 2;
  }
  return 2;
}
