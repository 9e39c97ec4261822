// opcts list, run, repro and resources: planning cases and running them in workers.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "app/build_version.hpp"
#include "app/builtins.hpp"
#include "app/cli_commands.hpp"
#include "app/cli_parse.hpp"
#include "app/cli_run_shrink.hpp"
#include "core/digest.hpp"
#include "core/errors.hpp"
#include "core/yaml_util.hpp"
#include "judge/gate.hpp"
#include "judge/run_selection.hpp"
#include "numerics/rng.hpp"
#include "reports/coverage.hpp"
#include "reports/html.hpp"
#include "reports/junit.hpp"
#include "reports/matrix.hpp"
#include "reports/merge.hpp"
#include "reports/output_files.hpp"
#include "reports/output_lock.hpp"
#include "reports/results_stream.hpp"
#include "reports/summary.hpp"
#include "reports/times.hpp"
#include "runner/device_probe.hpp"
#include "runner/execute.hpp"
#include "runner/path_search.hpp"
#include "runner/ref_disk_cache.hpp"
#include "runner/run.hpp"
#include "runner/shard_cases.hpp"
#include "runner/shard_plan.hpp"
#include "runner/stop_signal.hpp"
#include "runner/supervisor.hpp"
#include "runner/worker.hpp"

namespace fs = std::filesystem;

namespace opcts::cli {

int cmd_list(const Selection& s, bool verbose, bool count_only, bool coverage, const RunFlags& modes) {
  const std::string arch = resolve_arch(s.arch, 0);
  SuiteOptions so = suite_options(s, arch);
  so.bitwise = modes.bitwise;
  so.invariance = modes.invariance;
  so.capture = modes.capture;
  Suite suite(registry_for(s.plugins, s.optional_plugins), so);
  const auto cases = selected(suite, s);
  if (coverage) {
    // Per impl, what it runs here (not what it SKIPs): plugin impls' supports asked in a probe.
    ask_supports({self_exe(""), arch, so.cases_dir, so.plugins, 0}, cases);
    std::cout << coverage_markdown(
        opcts::coverage(cases, [&](const Case& c) { return !suite.pre_run(c).has_value(); }));
    return 0;
  }
  if (count_only) {
    std::cout << cases.size() << "\n";
    return 0;
  }
  if (verbose) ask_supports({self_exe(""), arch, so.cases_dir, so.plugins, 0}, cases);
  for (const auto& c : cases) {
    if (!verbose) {
      std::cout << c.id << "\n";
      continue;
    }
    // An impl that cannot answer here (a CUDA row asked on a machine without the GPU or its
    // driver) is the impl's answer to report, not a reason to stop listing the other cases.
    std::string what;
    try {
      const auto pre = suite.pre_run(c);
      const ManifestEntry* xf = suite.manifest().find(EntryKind::xfail, c.id);
      what = pre  ? std::string(to_string(pre->outcome)) + ": " + pre->reason
             : xf ? "run, xfail (" + xf->source + "): " + xf->reason
                  : "run";
    } catch (const std::exception& e) {
      const ManifestEntry* skip = suite.manifest().find(EntryKind::skip, c.id);  // SKIP whatever the impl says
      what = skip ? "SKIP: manifest skip (" + skip->source + "): " + skip->reason
                  : std::string("undecided here: ") + e.what();
    }
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

// --sanitize's executable: --sanitizer, else $OPCTS_SANITIZER, else compute-sanitizer on PATH or
// in /usr/local/cuda/bin (where the CUDA toolkit puts it). A name without '/' is looked up on
// PATH. Throws naming what was tried.
std::string find_sanitizer(const std::string& given) {
  const char* env = std::getenv("OPCTS_SANITIZER");
  const std::string want = !given.empty() ? given : env && *env ? std::string(env) : std::string("compute-sanitizer");
  const auto runnable = [](const std::string& p) { return ::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p); };
  if (want.find('/') != std::string::npos) {
    if (runnable(want)) return want;
    throw std::invalid_argument("--sanitize: cannot run the sanitizer '" + want + "'");
  }
  std::vector<std::string> dirs = path_dirs();
  if (given.empty() && !(env && *env)) dirs.push_back("/usr/local/cuda/bin");
  for (const std::string& dir : dirs)
    if (runnable(dir + "/" + want)) return dir + "/" + want;
  throw std::invalid_argument("--sanitize: '" + want + "' is not on PATH" +
                              (given.empty() && !(env && *env) ? " or in /usr/local/cuda/bin" : "") +
                              " (give --sanitizer PATH or set OPCTS_SANITIZER)");
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

// A failure's reason on one line, each part said once: the manifest's word on it (an unmet
// xfail, a planted bug not caught) and the impl's message, cut at 300 characters.
std::string failure_text(const ResultRecord& r) {
  if (r.outcome == Outcome::XPASS) return r.expectation;
  std::string msg = r.message.substr(0, r.message.find('\n'));
  if (msg.size() > 300) msg = msg.substr(0, 300) + "...";
  if (r.expectation.empty() || r.expectation.find(msg) != std::string::npos)
    return r.expectation.empty() ? msg : r.expectation;
  if (msg.empty() || msg.find(r.expectation) != std::string::npos) return msg.empty() ? r.expectation : msg;
  return r.expectation + ": " + msg;
}

// The progress line and each failure as it arrives (stderr). The ETA weighs the cases by the
// shard planner's cost estimates (a problem's reference once, each impl's device time;
// estimate_seconds), so a run whose large problems come last does not promise an early end. In
// a log that is no terminal a line is printed every 100 cases and, between them, every 30 s
// (heartbeat_period), so a CI job that kills a step after minutes without output never kills a slow
// shard that is still working.
class Progress {
 public:
  // 30 s; OPCTS_HEARTBEAT_SECONDS sets another period (the tests use 1).
  static std::chrono::seconds heartbeat_period() {
    const char* v = std::getenv("OPCTS_HEARTBEAT_SECONDS");
    const int s = v ? std::atoi(v) : 0;
    return std::chrono::seconds(s > 0 ? s : 30);
  }

  Progress(const Suite& suite, const std::vector<Case>& cases)
      : tty_(isatty(STDERR_FILENO)), period_(heartbeat_period()) {
    const bool on_gpu = suite.arch().backend != "host";
    std::map<std::string, bool> problem_seen;
    for (const auto& c : cases) {
      if (suite.skip_reason(c)) continue;
      const Cost cost = c.family->cost(*c.problem);
      const double ref = estimate_seconds(cost.flops, cost.bytes, false);
      const double dev = on_gpu ? std::max(0.0, estimate_seconds(cost.flops, cost.bytes, true) - ref) : ref;
      bool& seen = problem_seen[std::string(c.family->name()) + "/" + std::string(split_case_id(c.id).problem_id)];
      const double est = dev + (seen ? 0.0 : ref) + 1e-3;  // + a worker's fixed cost per case
      seen = true;
      estimate_[c.id] = est;
      total_est_ += est;
    }
    total_ = cases.size();  // until the first record says how many run
    if (!tty_) heartbeat_ = std::thread([this] { beat(); });
  }
  ~Progress() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void operator()(const ResultRecord& r, size_t done, size_t total) {
    std::lock_guard lock(mu_);
    done_ = done;
    total_ = total;
    if (const auto it = estimate_.find(r.id); it != estimate_.end()) done_est_ += it->second;
    if (is_gate_failure(r.outcome)) {
      ++failures_;
      std::fprintf(stderr, "%s%s %s: %s\n  repro: %s\n", tty_ ? "\r\033[K" : "",
                   std::string(to_string(r.outcome)).c_str(), r.id.c_str(), failure_text(r).c_str(), r.repro.c_str());
    }
    if (tty_ || done == total || done % 100 == 0) print(done < total);
  }

 private:
  // Called with mu_ held.
  void print(bool more) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    // Seconds left: the estimated cost not yet done, at the rate the done cost took.
    const double left = done_est_ > 0 ? el * std::max(0.0, total_est_ - done_est_) / done_est_
                        : done_ > 0   ? el / static_cast<double>(done_) * static_cast<double>(total_ - done_)
                                      : 0.0;
    std::fprintf(stderr, "%s[%zu/%zu] %zu failures, %.0f s elapsed, ~%.0f s left%s", tty_ ? "\r" : "", done_, total_,
                 failures_, el, left, tty_ && more ? "" : "\n");
    last_print_ = std::chrono::steady_clock::now();
  }

  void beat() {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; }))
      if (total_ > 0 && done_ < total_ && std::chrono::steady_clock::now() - last_print_ >= period_) print(true);
  }

  const bool tty_;
  const std::chrono::seconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread heartbeat_;
  bool stop_ = false;
  std::map<std::string, double> estimate_;
  double total_est_ = 0, done_est_ = 0;
  size_t done_ = 0, total_ = 0, failures_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now(), last_print_ = t0_;
};

// The reports a run starts with, so that no report of an earlier run at these paths can pass
// for this one: every case the run has not finished is MISSING ("not run yet"), and the
// records --resume carries are there as they were. A run killed by SIGKILL leaves these (and
// the streamed results), which the gate fails.
std::vector<ResultRecord> starting_records(const Suite& suite, const std::vector<Case>& cases,
                                           const std::map<std::string, ResultRecord>& carried, int device) {
  std::vector<ResultRecord> out;
  for (const auto& c : cases) {
    if (const auto it = carried.find(c.id); it != carried.end()) {
      out.push_back(it->second);
      continue;
    }
    ResultRecord r = base_record(suite, c, device);
    r.outcome = r.raw_outcome = Outcome::MISSING;
    r.message = "not run yet: the run is in progress, or ended before it finished this case";
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

std::vector<ResultRecord> carried_list(const std::map<std::string, ResultRecord>& carried) {
  std::vector<ResultRecord> out;
  for (const auto& [id, r] : carried) out.push_back(r);
  return out;
}

// The run's reports: all or none when they can be; when that fails (a full disk under one of
// them), each one alone, so that every report that can still be written holds every finished
// record. Returns what failed ("" when nothing did).
std::string write_reports(const RunFlags& f, const std::vector<ResultRecord>& records, const std::string& arch,
                          const RunSelection& sel, const std::string& summary) {
  std::vector<std::pair<std::string, std::string>> files;
  if (!f.results.empty()) files.emplace_back(f.results, results_text(records, sel.header_line()));
  if (!f.junit.empty())
    files.emplace_back(f.junit,
                       junit_xml(records, "opcts." + arch, parse_junit_detail(f.junit_properties), {sel.json()}));
  if (!f.summary.empty()) files.emplace_back(f.summary, summary);
  try {
    write_files(files);
    return "";
  } catch (const std::exception& all) {
    std::string failed;
    for (const auto& file : files) {
      try {
        write_files({file});
      } catch (const std::exception& e) {
        failed += (failed.empty() ? "" : "; ") + std::string(e.what());
      }
    }
    return failed.empty() ? std::string(all.what()) : failed;
  }
}

// The summary with what the gate found wrong with the run as a whole (no case names it).
std::string summary_with(const std::vector<ResultRecord>& records, const std::vector<std::string>& problems) {
  std::string md = summary_markdown(records);
  if (problems.empty()) return md;
  std::string block = "> **The gate fails this run:**\n";
  for (const auto& p : problems) block += "> - " + markdown_cell(p) + "\n";
  const auto at = md.find("\n\n");
  return at == std::string::npos ? block + "\n" + md : md.substr(0, at + 2) + block + "\n" + md.substr(at + 2);
}

// What a report says before the run has planned its cases (or when it never does): a
// selection in state "started", and in the JUnit and the summary one MISSING record, so that no
// reader takes an empty report for a green one.
std::string placeholder_summary(const RunSelection& sel) {
  return "# opcts results\n\n**The run has not planned its cases** (it is loading, or it stopped or failed before "
         "it planned them): no verdict.\n" +
         (sel.error.empty() ? std::string() : "\nIt failed: " + markdown_cell(sel.error) + "\n");
}

ResultRecord not_planned_record(const RunSelection& sel) {
  ResultRecord r;
  r.id = "opcts.run/not_planned";
  r.family = "opcts";
  r.impl = "run";
  r.arch = sel.arch;
  r.outcome = r.raw_outcome = Outcome::MISSING;
  r.message = sel.error.empty() ? "the run has not planned its cases (loading, or ended before it planned them)"
                                : "the run ended before it planned its cases: " + sel.error;
  return r;
}

void write_placeholder(const RunFlags& f, const std::vector<ResultRecord>& resumed, const RunSelection& sel) {
  std::vector<std::pair<std::string, std::string>> files;
  if (!f.results.empty()) files.emplace_back(f.results, results_text(resumed, sel.header_line()));
  if (!f.junit.empty())
    files.emplace_back(f.junit, junit_xml({not_planned_record(sel)}, "opcts." + sel.arch,
                                          parse_junit_detail(f.junit_properties), {sel.json()}));
  if (!f.summary.empty()) files.emplace_back(f.summary, placeholder_summary(sel));
  write_files(files);
}

// The selection as the reports record it, before the plan.
RunSelection selection_of(const Selection& s, const std::string& arch, const RunFlags& f) {
  RunSelection sel;
  sel.opcts_version = opcts_version();
  sel.opcts_commit = opcts_commit();
  sel.ref_digest = ref_build_digest();
  sel.arch = arch;
  sel.tier = s.tier;
  sel.shard = s.shard;
  sel.families = s.families;
  sel.filters = s.filters;
  sel.excludes = s.excludes;
  sel.include_planted = s.include_planted;
  sel.bitwise = f.bitwise;
  sel.invariance = f.invariance;
  sel.capture = f.capture;
  sel.cases_dir = s.cases_dir;
  for (const auto& p : s.plugins) sel.plugins.push_back({p, file_digest(p), false, "", {}});
  for (const auto& p : s.optional_plugins) sel.plugins.push_back({p, file_digest(p), true, "", {}});
  return sel;
}

// The catalog files a run reads: every catalog of the cases folder and each --catalog (a
// folder: its catalogs), as load_catalogs finds them.
std::vector<SelectedFile> catalog_files(const Selection& s) {
  std::vector<std::string> paths{s.cases_dir};
  paths.insert(paths.end(), s.catalogs.begin(), s.catalogs.end());
  std::vector<SelectedFile> out;
  for (const auto& p : paths) {
    std::vector<std::string> files;
    if (fs::is_directory(p)) {
      for (const auto& de : fs::directory_iterator(p)) {
        const auto ext = de.path().extension();
        const auto name = de.path().filename();
        if (de.is_regular_file() && (ext == ".yaml" || ext == ".yml") && name != "archs.yaml" &&
            name != "tolerances.yaml")
          files.push_back(de.path().string());
      }
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(p);
    }
    for (const auto& file : files) out.push_back({file, file_digest(file)});
  }
  return out;
}

}  // namespace

int cmd_run(const Selection& sel, const RunFlags& flags, const char* argv0) {
  RunFlags f = flags;
  if (f.results.empty()) f.results = f.resume;  // a resumed run goes on in the file it resumes
  check_run_flags(f);
  check_distinct_outputs({{"--junit", f.junit}, {"--results", f.results}, {"--summary", f.summary}});
  // --resume may continue in the results file it reads, never in the JUnit or summary.
  check_distinct_outputs({{"--resume", f.resume}, {"--junit", f.junit}, {"--summary", f.summary}});
  // From here a signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE) is a stop request: no
  // default action can end the process between here and the last report.
  const StopOnSignals stop_on_signals;
  // One writer per report: a second run given these paths is refused before it touches them.
  const OutputLock lock({f.results, f.junit, f.summary});
  const std::vector<ResultRecord> resumed =
      f.resume.empty() ? std::vector<ResultRecord>{} : read_results_file(f.resume);
  // No report of an earlier run at these paths may outlive this one's start, even if it is
  // stopped or fails while the suite loads: replaced now by reports that say the run has not
  // planned yet (the results keep what --resume carries), then by every planned case MISSING.
  Selection s = sel;
  RunSelection selection = selection_of(s, s.arch, f);
  write_placeholder(f, resumed, selection);
  std::string arch;
  int device = 0;
  SuiteOptions so;
  std::unique_ptr<Suite> suite_ptr;
  std::vector<Case> cases;
  try {
    device = resolve_device(f.device);
    arch = resolve_arch(sel.arch, device);
    s.shard = resolve_shard(sel.shard);
    selection.arch = arch;
    selection.shard = s.shard;
    so = suite_options(s, arch);  // probes the plugins: one that cannot be used throws here
    so.bitwise = f.bitwise;
    so.invariance = f.invariance;
    so.capture = f.capture;
    suite_ptr = std::make_unique<Suite>(registry_for(s.plugins, s.optional_plugins), so);
    check_arch_matches(*suite_ptr, device, f.allow_arch_mismatch);
    if (suite_ptr->arch().backend == "cuda") use_cuda_device(device);  // skip checks read this GPU's free memory
    cases = selected(*suite_ptr, s);
    // A filter typo must not gate green: an empty selection is an error unless allowed
    // (CTest shards allow it: a small tier may leave a shard empty; the gate over all shards
    // still fails a selection where nothing ran, --min-run).
    if (cases.empty() && !f.allow_empty)
      throw std::invalid_argument("no case of arch " + arch + " matches the selection (tier " + s.tier +
                                  (s.filters.empty() ? "" : ", --filter " + s.filters.front()) + ", shard " + s.shard +
                                  "); pass --allow-empty if that is expected");
    // Plugin impls' supports(), asked in a probe process (app/plugin_probe.hpp).
    ask_supports({self_exe(argv0), arch, so.cases_dir, so.plugins, device}, cases);
  } catch (const std::exception& e) {
    selection.error = e.what();
    for (auto& p : selection.plugins)
      for (const auto& st : plugin_statuses())
        if (st.path == p.path && st.optional == p.optional) p.error = st.error;
    try {
      write_placeholder(f, resumed, selection);
    } catch (const std::exception&) {
    }
    throw;
  }
  const Suite& suite = *suite_ptr;
  for (auto& p : selection.plugins)
    for (const auto& st : plugin_statuses())
      if (st.path == p.path && st.optional == p.optional) {
        p.error = st.error;
        for (const auto& d : st.impls) p.impls.push_back(d.name);
      }
  if (!suite.manifest().path().empty())
    selection.manifests.push_back({suite.manifest().path(), file_digest(suite.manifest().path())});
  selection.catalogs = catalog_files(s);
  {
    std::vector<std::string> planned, all;
    for (const auto& c : cases) planned.push_back(c.id);
    for (const auto& c : unsharded(suite, s)) all.push_back(c.id);
    selection.planned = planned.size();
    selection.planned_digest = ids_digest(planned);
    selection.selected = all.size();
    selection.selected_digest = ids_digest(all);
    std::set<std::string> planted;
    for (const auto& c : cases)
      if (c.impl->planted()) planted.insert(std::string(c.impl->name()));
    selection.planted.assign(planted.begin(), planted.end());
    selection.state = RunState::planned;
  }
  const auto carried = resumed_records(suite, cases, resumed);
  size_t skipped = 0, done_before = 0;
  for (const auto& c : cases) {
    const bool skip = suite.pre_run(c).has_value();
    skipped += skip;
    done_before += !skip && carried.count(c.id);
  }
  const std::string dev = suite.arch().backend == "host" ? "host" : "GPU " + std::to_string(device);
  const std::string resumed_note = done_before ? ", " + std::to_string(done_before) + " done before (--resume)" : "";
  std::fprintf(stderr, "opcts: arch %s on %s, %zu cases (%zu to run, %zu skipped%s), shard %s, tier %s\n", arch.c_str(),
               dev.c_str(), cases.size(), cases.size() - skipped - done_before, skipped, resumed_note.c_str(),
               s.shard.c_str(), s.tier.c_str());

  RunRequest req{SupervisorOptions{so, self_exe(argv0), "", device, f.timeout}, f.reruns};
  // Failure artifacts go next to the reports unless --artifacts names a folder.
  const std::string report = !f.results.empty() ? f.results : f.junit;
  req.supervise.exec.artifacts_dir = !f.artifacts.empty() ? f.artifacts
                                     : report.empty()     ? std::string()
                                                          : (fs::path(report).parent_path() / "artifacts").string();
  req.supervise.exec.bitwise = f.bitwise;
  req.supervise.exec.invariance = f.invariance;
  req.supervise.exec.capture = f.capture;
  req.supervise.exec.ref_cache_dir = f.no_ref_cache         ? std::string()
                                     : !f.ref_cache.empty() ? f.ref_cache
                                                            : default_ref_cache_dir();
  req.supervise.exec.ref_cache_max_bytes = static_cast<std::uint64_t>(f.ref_cache_max_gib * double(1 << 30));
  req.resumed = carried_list(carried);
  if (!f.sanitize.empty()) {
    req.supervise.sanitize = {f.sanitize, find_sanitizer(f.sanitizer)};
    // Under the sanitizer some run calls wait for the device: the workers hold no stream
    // (gpu/cuda/abi_backend.cpp), which a plain run checks. A value set by hand stays.
    ::setenv("OPCTS_STREAM_GATE_MS", "0", 0);
  }

  // The results file streams each finished record; one it cannot take (a full disk) stops the
  // run: the JUnit and summary, elsewhere, then hold every record finished.
  ResultsStream stream(f.results, req.resumed, selection.header_line(),
                       [](const std::string&) { request_stop(kStopResultsUnwritable); });
  {
    const auto start = starting_records(suite, cases, carried, device);
    std::vector<std::pair<std::string, std::string>> files;
    if (!f.junit.empty())
      files.emplace_back(f.junit,
                         junit_xml(start, "opcts." + arch, parse_junit_detail(f.junit_properties), {selection.json()}));
    if (!f.summary.empty()) files.emplace_back(f.summary, summary_markdown(start));
    write_files(files);
  }
  req.on_record = [&](const ResultRecord& r) { stream.append(r); };
  Progress progress(suite, cases);
  RunResult result = run_cases(suite, cases, req, std::ref(progress));
  const auto& records = result.records;
  // The run as a whole: coverage needs every shard, so a shard leaves it to `opcts gate`.
  const bool whole = parse_shard(s.shard).count == 1;
  if (whole)
    check_coverage(records, &suite.manifest(), static_cast<size_t>(f.min_run), result.verdict,
                   {selection.planted.begin(), selection.planted.end()});
  selection.state = result.stopped_by ? RunState::stopped : RunState::finished;
  const std::string summary = summary_with(records, result.verdict.problems);
  std::string unwritten = write_reports(f, records, arch, selection, summary);
  // Then, the reports written, each sampled failure shrunk; the summary gains its table.
  if (!result.stopped_by && unwritten.empty()) {
    const std::string shrunk = shrink_sampled_failures(suite, s.plugins, device, cases, records, f.shrink_seconds);
    if (!shrunk.empty() && !f.summary.empty()) {
      try {
        write_files({{f.summary, summary + shrunk}});
      } catch (const std::exception& e) {
        unwritten = e.what();
      }
    }
  }

  for (const ManifestEntry& e : result.verdict.stale)
    std::fprintf(stderr, "opcts: stale manifest entry %s (%s '%s'): matches no case of %s; remove it\n",
                 e.source.c_str(), std::string(to_string(e.kind)).c_str(), e.match.c_str(), arch.c_str());

  std::map<Outcome, size_t> counts;
  for (const auto& r : records) ++counts[r.outcome];
  std::printf(
      "opcts %s: %zu PASS, %zu FAIL, %zu ERROR, %zu CRASH, %zu TIMEOUT, %zu SKIP, %zu XFAIL, %zu XPASS, "
      "%zu FLAKE, %zu MISTRUSTED, %zu MISSING\n",
      arch.c_str(), counts[Outcome::PASS], counts[Outcome::FAIL], counts[Outcome::ERROR], counts[Outcome::CRASH],
      counts[Outcome::TIMEOUT], counts[Outcome::SKIP], counts[Outcome::XFAIL], counts[Outcome::XPASS],
      counts[Outcome::FLAKE], counts[Outcome::MISTRUSTED], counts[Outcome::MISSING]);
  if (!unwritten.empty())
    std::fprintf(stderr,
                 "opcts: error: a report could not be written: %s; every other report holds every finished "
                 "record\n",
                 unwritten.c_str());
  if (result.stopped_by == kStopResultsUnwritable) {
    std::fprintf(stderr,
                 "opcts: error: stopped: the results file %s could not be written (a full disk?); %zu cases "
                 "not run are MISSING in the reports that could be written\n",
                 f.results.c_str(), counts[Outcome::MISSING]);
    return 2;
  }
  if (result.stopped_by) {
    std::fprintf(stderr,
                 "opcts: stopped by %s: %zu cases not run are MISSING in the reports; "
                 "`opcts run ... --resume %s` continues\n",
                 stop_description(result.stopped_by).c_str(), counts[Outcome::MISSING],
                 f.results.empty() ? "RESULTS" : shell_quote(f.results).c_str());
    return 128 + result.stopped_by;  // as a shell reports a command ended by that signal
  }
  if (!unwritten.empty()) return 2;
  // The exit code is the gate's verdict (judge/gate.hpp), so a shard fails exactly when
  // `opcts gate` would: e.g. FLAKE (or a failure) under a manifest `flaky` entry is a note.
  for (const auto& n : result.verdict.notes)
    std::fprintf(stderr, "opcts: note: %s %s: %s\n", std::string(to_string(n.outcome)).c_str(), n.id.c_str(),
                 n.why.c_str());
  for (const auto& p : result.verdict.problems) std::fprintf(stderr, "opcts: gate: %s\n", p.c_str());
  for (const auto& n : result.verdict.run_notes) std::fprintf(stderr, "opcts: note: %s\n", n.c_str());
  if (!whole)
    std::fprintf(stderr,
                 "opcts: shard %s: whether enough cases ran and every impl was tested is for `opcts gate` "
                 "over all shards' reports\n",
                 s.shard.c_str());
  return result.verdict.passed() ? 0 : 1;
}

// Writes a CTest resource spec file (version 1.0) with one `gpus` resource per CUDA device (else AMD GPU),
// one slot each, so `ctest -j N --resource-spec-file gpus.json` gives each GPU shard its GPU.
int cmd_resources(const std::string& out) {
  // CUDA devices, else AMD GPUs in KFD order (ROCm's device ids, as HIP_VISIBLE_DEVICES counts them).
  const int cuda = cuda_device_count();
  const int n = cuda > 0 ? cuda : amd_device_count();
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = 0; i < n; ++i) gpus.push_back({{"id", std::to_string(i)}, {"slots", 1}});
  if (n == 0) {
    std::string why;
    detect_arch(0, &why);
    std::fprintf(stderr, "opcts resources: no CUDA or AMD GPU found (%s); the gpus list is empty\n", why.c_str());
  }
  const nlohmann::json spec = {{"version", {{"major", 1}, {"minor", 0}}}, {"local", {{{"gpus", gpus}}}}};
  const std::string text = spec.dump(2) + "\n";
  if (out.empty()) std::fputs(text.c_str(), stdout);
  else write_text_file(out, text);
  return 0;
}

int cmd_repro(const std::string& id, const Selection& s, int device_flag, const std::string& json_out,
              const RunFlags& modes) {
  const int device = resolve_device(device_flag);
  const std::string arch = resolve_arch(s.arch, device);
  // The case runs in this process, its plugin's code included: repro is for debugging it.
  SuiteOptions so{s.cases_dir, s.catalogs, arch, s.manifest};
  so.plugins = s.plugins;
  so.bitwise = modes.bitwise, so.invariance = modes.invariance, so.capture = modes.capture;
  ExecOptions exec;
  exec.bitwise = modes.bitwise, exec.invariance = modes.invariance, exec.capture = modes.capture;
  Suite suite(loaded_registry_for(s.plugins), so);
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
    r = execute_case(suite, c, device, cache, exec);
  } catch (const DeviceLost& e) {
    std::printf("CRASH  device context lost: %s\n", e.what());
    return 1;
  }
  judge(suite, r);
  for (const auto& o : r.outputs) {
    std::printf(
        "output %-4s %-12s max_abs_err %.6g  max_rel_err %.6g  bound %.6g  lowp_err %.6g  mismatches %lld/%lld"
        "  err/bound %.3g\n",
        o.out.c_str(), o.metric.c_str(), o.max_abs_err, o.max_rel_err, o.bound, o.lowp_err,
        static_cast<long long>(o.mismatches), static_cast<long long>(o.elements), o.max_ratio);
    if (o.has_slope())
      std::printf("slope  %-4s %.6g in [%.6g, %.6g]%s\n", o.out.c_str(), o.slope, o.slope_lo, o.slope_hi,
                  o.biased() ? "  BIASED" : "");
  }
  for (const auto& w : r.worst) {
    std::string idx;
    for (auto i : w.index) idx += (idx.empty() ? "" : ",") + std::to_string(i);
    std::printf("worst  %s[%s] got %.9g want %.9g\n", w.out.c_str(), idx.c_str(), w.got, w.want);
  }
  std::printf("%s  %.1f ms%s%s\n", std::string(to_string(r.outcome)).c_str(), r.ms, r.message.empty() ? "" : "  ",
              r.message.c_str());
  if (!r.expectation.empty()) std::printf("expect %s\n", r.expectation.c_str());
  if (!json_out.empty()) write_text_file(json_out, to_json_line(r) + "\n");
  return is_gate_failure(r.outcome) ? 1 : 0;
}

}  // namespace opcts::cli
