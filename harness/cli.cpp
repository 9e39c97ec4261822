// opcts: the command line (CLI11) — list, run, repro, gate, report merge/matrix/times/html, ctest-tests and the worker.
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
#include <sstream>

#include "harness/errors.hpp"
#include "harness/execute.hpp"
#include "harness/ref_disk_cache.hpp"
#include "harness/rng.hpp"
#include "harness/supervisor.hpp"
#include "harness/worker.hpp"
#include "harness/yaml_util.hpp"
#include "reports/gate.hpp"
#include "reports/html.hpp"
#include "reports/junit.hpp"
#include "reports/matrix.hpp"
#include "reports/merge.hpp"
#include "reports/summary.hpp"
#include "reports/times.hpp"
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
  int reruns = 1;             // reruns of an unexpected failure (a manifest flaky entry may set its own)
  std::string artifacts;      // failure artifacts folder ("" = next to --results)
  bool bitwise = false;       // run deterministic impls twice, require identical bytes
  std::string ref_cache;      // on-disk reference cache ("" = the default folder)
  bool no_ref_cache = false;
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

// An unexpected failure (a gate failure no xfail entry expects) is run again, as deqp-runner
// does: --reruns times, or as often as a manifest `flaky` entry says. Reruns stop at the first
// outcome that differs from the first run's: the case becomes FLAKE, its message lists every
// outcome and the first failure's message, and the record keeps the first failure's
// statistics. A failure that repeats on every rerun stays what it was.
void rerun_failures(const Suite& suite, const SupervisorOptions& so, int default_reruns,
                    std::vector<ResultRecord>& ran) {
  std::vector<size_t> pending;
  std::map<size_t, int> budget;
  std::map<size_t, std::vector<Outcome>> seen;
  for (size_t i = 0; i < ran.size(); ++i) {
    const Outcome o = ran[i].raw_outcome;
    if (!is_gate_failure(o) || suite.manifest().find(EntryKind::xfail, ran[i].id)) continue;
    const ManifestEntry* e = suite.manifest().find(EntryKind::flaky, ran[i].id);
    const int n = e && e->reruns > 0 ? e->reruns : default_reruns;
    if (n <= 0) continue;
    pending.push_back(i);
    budget[i] = n;
    seen[i] = {o};
  }
  if (!pending.empty()) std::fprintf(stderr, "opcts: re-running %zu failed cases\n", pending.size());
  for (int round = 1; !pending.empty(); ++round) {
    std::vector<std::string> ids;
    for (size_t i : pending) ids.push_back(ran[i].id);
    const auto again = supervise(so, ids, nullptr);
    std::vector<size_t> still;
    for (size_t k = 0; k < pending.size(); ++k) {
      const size_t i = pending[k];
      seen[i].push_back(again[k].raw_outcome);
      if (again[k].raw_outcome != ran[i].raw_outcome) {
        ResultRecord& r = ran[i];
        std::string outcomes;
        for (Outcome o : seen[i]) outcomes += (outcomes.empty() ? "" : ", ") + std::string(to_string(o));
        const ManifestEntry* e = suite.manifest().find(EntryKind::flaky, r.id);
        r.message = "flaky: runs gave " + outcomes + (e ? " (known flaky, " + e->source + ": " + e->reason + ")" : "") +
                    "; first " + std::string(to_string(r.raw_outcome)) + ": " + r.message;
        r.raw_outcome = r.outcome = Outcome::FLAKE;
        std::fprintf(stderr, "FLAKE %s: %s\n", r.id.c_str(), r.message.substr(0, 300).c_str());
      } else if (round < budget[i]) {
        still.push_back(i);
      }
    }
    pending = std::move(still);
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
  if (suite.arch().backend == "cuda") use_cuda_device(device);  // skip checks read this GPU's free memory
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
  // Failure artifacts go next to the reports unless --artifacts names a folder.
  const std::string report = !f.results.empty() ? f.results : f.junit;
  so.exec.artifacts_dir = !f.artifacts.empty() ? f.artifacts
                          : report.empty()     ? std::string()
                                               : (fs::path(report).parent_path() / "artifacts").string();
  so.exec.bitwise = f.bitwise;
  so.exec.ref_cache_dir = f.no_ref_cache ? std::string() : !f.ref_cache.empty() ? f.ref_cache : default_ref_cache_dir();
  const auto t0 = std::chrono::steady_clock::now();
  size_t failures = 0;
  auto progress = [&](const ResultRecord& r, size_t done) {
    const ManifestEntry* xf = suite.manifest().find(EntryKind::xfail, r.id);
    const Outcome o = apply_expectation(r.raw_outcome, xf);
    if (is_gate_failure(o)) {
      ++failures;
      const std::string why = o == Outcome::XPASS ? "passed under strict xfail " + xf->source + ": remove the entry"
                                                  : r.message.substr(0, 300);
      std::fprintf(stderr, "%s%s %s: %s\n  repro: %s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "",
                   std::string(to_string(o)).c_str(), r.id.c_str(), why.c_str(),
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
  rerun_failures(suite, so, f.reruns, ran);

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
  std::printf("opcts %s: %zu PASS, %zu FAIL, %zu ERROR, %zu CRASH, %zu TIMEOUT, %zu SKIP, %zu XFAIL, %zu XPASS, "
              "%zu FLAKE, %zu MISTRUSTED\n",
              arch.c_str(), counts[Outcome::PASS], counts[Outcome::FAIL], counts[Outcome::ERROR],
              counts[Outcome::CRASH], counts[Outcome::TIMEOUT], counts[Outcome::SKIP], counts[Outcome::XFAIL],
              counts[Outcome::XPASS], counts[Outcome::FLAKE], counts[Outcome::MISTRUSTED]);
  // The exit code is the gate's verdict (reports/gate.hpp), so a shard fails exactly when
  // `opcts gate` would: e.g. FLAKE (or a failure) under a manifest `flaky` entry is a note.
  std::vector<std::string> planned;
  for (const auto& c : cases) planned.push_back(c.id);
  const GateVerdict verdict = gate(records, suite.manifest(), planned, all_ids);
  for (const auto& n : verdict.notes)
    std::fprintf(stderr, "opcts: note: %s %s: %s\n", std::string(to_string(n.outcome)).c_str(), n.id.c_str(),
                 n.why.c_str());
  return verdict.passed() ? 0 : 1;
}

// Writes a CTest resource spec file (version 1.0) with one `gpus` resource per CUDA device,
// one slot each, so `ctest -j N --resource-spec-file gpus.json` gives each GPU shard its GPU.
int cmd_resources(const std::string& out) {
  const int n = cuda_device_count();
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = 0; i < n; ++i) gpus.push_back({{"id", std::to_string(i)}, {"slots", 1}});
  if (n == 0) {
    std::string why;
    detect_arch(0, &why);
    std::fprintf(stderr, "opcts resources: no CUDA device found (%s); the gpus list is empty\n", why.c_str());
  }
  const nlohmann::json spec = {{"version", {{"major", 1}, {"minor", 0}}}, {"local", {{{"gpus", gpus}}}}};
  const std::string text = spec.dump(2) + "\n";
  if (out.empty())
    std::fputs(text.c_str(), stdout);
  else
    write_text_file(out, text);
  return 0;
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

// Judges merged reports of one arch against its manifest and plan (the tier/filter/shard
// selection): exit 1 naming each offending case, 0 when the arch is green.
int cmd_gate(const Selection& s, const std::vector<std::string>& inputs) {
  if (s.arch == "auto") throw std::invalid_argument("gate needs --arch");
  Suite suite(suite_options(s, s.arch));
  std::vector<ResultRecord> records;
  size_t other = 0;
  for (auto& r : load_reports(inputs)) {
    if (r.arch.empty() || r.arch == s.arch) records.push_back(std::move(r));
    else ++other;
  }
  if (other) std::fprintf(stderr, "opcts gate: ignoring %zu results of other archs\n", other);
  std::vector<std::string> planned, all_ids;
  for (const auto& c : selected(suite, s)) planned.push_back(c.id);
  for (const auto& c : suite.all_cases()) all_ids.push_back(c.id);
  const GateVerdict v = gate(records, suite.manifest(), planned, all_ids);
  std::fputs(format_verdict(v, s.arch).c_str(), stdout);
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

  CLI11_PARSE(app, argc, argv);
  try {
    if (*list) return cmd_list(sel, verbose, count_only);
    if (*run) return cmd_run(sel, rf, argv[0]);
    if (*repro) return cmd_repro(repro_id, sel, repro_device, repro_json);
    if (*resources) return cmd_resources(resources_out);
    if (*merge) return cmd_merge(merge_inputs, merge_junit, merge_summary, merge_results);
    if (*matrix) return cmd_report_matrix(view_inputs, matrix_md);
    if (*times) return cmd_report_times(view_inputs, times_out, times_arch);
    if (*html) return cmd_report_html(view_inputs, html_out, html_title);
    if (*gate_cmd) return cmd_gate(sel, gate_inputs);
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
