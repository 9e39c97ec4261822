// opcts list, run, repro and resources: planning cases and running them in workers.
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

#include "app/builtins.hpp"
#include "core/errors.hpp"
#include "runner/execute.hpp"
#include "runner/device_probe.hpp"
#include "runner/ref_disk_cache.hpp"
#include "core/rng.hpp"
#include "runner/supervisor.hpp"
#include "runner/worker.hpp"
#include "core/yaml_util.hpp"
#include "runner/gate.hpp"
#include "reports/html.hpp"
#include "reports/junit.hpp"
#include "reports/matrix.hpp"
#include "reports/merge.hpp"
#include "reports/summary.hpp"
#include "reports/times.hpp"
#include "runner/shard_cases.hpp"
#include "app/cli_commands.hpp"

namespace fs = std::filesystem;

namespace opcts::cli {

int cmd_list(const Selection& s, bool verbose, bool count_only) {
  const std::string arch = resolve_arch(s.arch, 0);
  Suite suite(builtin_registry(), suite_options(s, arch));
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



int cmd_list_fields(const std::string& family) {
  const Registry& reg = builtin_registry();
  bool any = false;
  for (const Family* f : reg.families()) {
    if (family != "all" && f->name() != family) continue;
    std::cout << (any ? "\n" : "") << f->describe_fields();
    any = true;
  }
  if (!any) {
    std::string known;
    for (const Family* f : reg.families()) known += (known.empty() ? "" : ", ") + std::string(f->name());
    throw std::invalid_argument("--fields: unknown family '" + family + "' (known: " + known + ", or all)");
  }
  return 0;
}

namespace {

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

}  // namespace

int cmd_run(const Selection& s, const RunFlags& f, const char* argv0) {
  const int device = resolve_device(f.device);
  const std::string arch = resolve_arch(s.arch, device);
  if (!(f.timeout > 0) || !std::isfinite(f.timeout))
    throw std::invalid_argument("--timeout must be a positive number of seconds");
  check_writable(f.junit, "--junit");
  check_writable(f.results, "--results");
  check_writable(f.summary, "--summary");
  Suite suite(builtin_registry(), suite_options(s, arch));
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
      const std::string why = o != Outcome::XPASS ? r.message.substr(0, 300)
                              : xf->planted      ? "planted bug NOT caught: " + xf->source + " passed"
                                                 : "passed under strict xfail " + xf->source + ": remove the entry";
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
  // The exit code is the gate's verdict (runner/gate.hpp), so a shard fails exactly when
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
  Suite suite(builtin_registry(), so);
  const Case c = case_from_id(suite.registry(), id);
  if (c.impl->backend() != suite.arch().backend)
    throw std::invalid_argument("impl " + std::string(c.impl->name()) + " runs on " + std::string(c.impl->backend()) +
                                " archs, not on " + arch + " (" + suite.arch().backend + ")");
  const std::string on = suite.arch().backend == "host" ? "the host" : "GPU " + std::to_string(device);
  std::printf("case   %s\narch   %s on %s\nseed   %s\n", c.id.c_str(), arch.c_str(), on.c_str(),
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

}  // namespace opcts::cli
