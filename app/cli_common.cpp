// Option sets and helpers shared by the opcts subcommands.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
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
#include "app/cli_commands.hpp"
#include "core/errors.hpp"
#include "core/yaml_util.hpp"
#include "judge/gate.hpp"
#include "numerics/rng.hpp"
#include "reports/html.hpp"
#include "reports/junit.hpp"
#include "reports/matrix.hpp"
#include "reports/merge.hpp"
#include "reports/summary.hpp"
#include "reports/times.hpp"
#include "runner/device_probe.hpp"
#include "runner/execute.hpp"
#include "runner/ref_disk_cache.hpp"
#include "runner/shard_cases.hpp"
#include "runner/supervisor.hpp"
#include "runner/worker.hpp"

namespace fs = std::filesystem;

namespace opcts::cli {

void add_selection(CLI::App* app, Selection& s) {
  app->add_option("--arch", s.arch, "arch to plan for (sm80, sm90, host, ...; auto = the GPU present, else host)");
  app->add_option("--tier", s.tier, "smoke, default or full (each includes the tiers before it)");
  app->add_option("--family", s.families, "family to select (repeatable; default: all)");
  app->add_option("--filter", s.filters,
                  "glob over case ids or impl names to include (repeatable; 'aten.*' selects an impl prefix)");
  app->add_option("--exclude", s.excludes, "glob over case ids or impl names to leave out (repeatable)");
  app->add_option("--catalog", s.catalogs, "extra catalog file or folder (repeatable)");
  app->add_option("--shard", s.shard,
                  "i/N: run shard i of N (1-based); auto: from OPCTS_SHARD_INDEX/OPCTS_SHARD_COUNT, Kubernetes' "
                  "JOB_COMPLETION_INDEX with OPCTS_SHARD_COUNT, Slurm's SLURM_ARRAY_TASK_ID/_COUNT, or GitLab's "
                  "CI_NODE_INDEX/CI_NODE_TOTAL, else 1/1");
  app->add_option("--times", s.times, "test-times file (JSON {case id: seconds}) for balancing shards");
  app->add_option("--cases-dir", s.cases_dir, "folder of built-in catalogs, archs.yaml, tolerances.yaml, manifests/");
  app->add_option("--manifest", s.manifest, "manifest file (default: <cases-dir>/manifests/<arch>.yaml)");
  app->add_flag("--include-planted", s.include_planted,
                "add the cases of planted-bug impls, which prove the suite catches their bug (they must FAIL)");
  app->add_option("--plugin", s.plugins,
                  "shared library of impls (include/opcts/plugin.h), or a Python module (FILE.py, py:package.module: "
                  "docs/python.md), to load (repeatable); one that cannot be used is an "
                  "error (exit 2)");
  app->add_option("--plugin-optional", s.optional_plugins,
                  "as --plugin, but one that cannot be used is left out with a warning (the reports say so)");
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
  registry_for(s.plugins, s.optional_plugins);  // probes the plugins, once per process
  o.plugins = loaded_plugins();                 // what the workers load
  return o;
}

std::vector<Case> unsharded(const Suite& suite, const Selection& s) {
  for (const auto& f : s.families)
    if (!registry_for(s.plugins, s.optional_plugins).family(f)) {
      std::string known;
      for (const Family* fam : registry_for(s.plugins, s.optional_plugins).families())
        known += (known.empty() ? "" : ", ") + std::string(fam->name());
      throw std::invalid_argument("--family: unknown family '" + f + "' (known: " + known + ")");
    }
  auto cases = select_cases(suite.all_cases(), parse_tier(s.tier), s.filters, s.excludes);
  if (!s.families.empty())
    std::erase_if(cases, [&](const Case& c) {
      return std::find(s.families.begin(), s.families.end(), c.family->name()) == s.families.end();
    });
  return cases;
}

namespace {

// The variable's value, "" when unset. Set but empty is a CI variable that did not expand (a
// matrix key misspelled): taking it as "not set" would make every shard run everything, as 1/1.
std::string env_of(const char* name) {
  const char* v = std::getenv(name);
  if (v && !*v)
    throw std::invalid_argument(std::string("--shard auto: ") + name +
                                " is set but empty (a CI variable that did not expand?)");
  return v ? v : "";
}

// A non-negative integer variable, or throws naming it.
long env_index(const char* name, const std::string& v) {
  size_t used = 0;
  long n = -1;
  try {
    n = std::stol(v, &used);
  } catch (const std::exception&) {
  }
  if (used != v.size() || n < 0)
    throw std::invalid_argument(std::string("--shard auto: ") + name + "=" + v + " is not a non-negative integer");
  return n;
}

// "i/N" checked by parse_shard, or throws naming where it came from.
std::string checked(const std::string& spec, const std::string& from) {
  try {
    parse_shard(spec);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--shard auto: " + from + ": " + e.what());
  }
  return spec;
}

}  // namespace

std::string resolve_shard(const std::string& shard) {
  if (shard != "auto") return shard;
  const std::string oi = env_of("OPCTS_SHARD_INDEX"), on = env_of("OPCTS_SHARD_COUNT");
  const std::string jci = env_of("JOB_COMPLETION_INDEX");
  // Kubernetes' Indexed Job: JOB_COMPLETION_INDEX from 0, the count from OPCTS_SHARD_COUNT
  // (the Job's `completions`, which Kubernetes does not pass on).
  if (oi.empty() && !jci.empty()) {
    if (on.empty())
      throw std::invalid_argument(
          "--shard auto: JOB_COMPLETION_INDEX is set but OPCTS_SHARD_COUNT is not "
          "(set it to the Indexed Job's completions)");
    return checked(std::to_string(env_index("JOB_COMPLETION_INDEX", jci) + 1) + "/" + on,
                   "JOB_COMPLETION_INDEX=" + jci + ", OPCTS_SHARD_COUNT=" + on);
  }
  if (!oi.empty() || !on.empty()) {
    if (oi.empty() || on.empty())
      throw std::invalid_argument(std::string("--shard auto: ") +
                                  (oi.empty() ? "OPCTS_SHARD_INDEX" : "OPCTS_SHARD_COUNT") + " is not set but " +
                                  (oi.empty() ? "OPCTS_SHARD_COUNT" : "OPCTS_SHARD_INDEX") + " is");
    return checked(oi + "/" + on, "OPCTS_SHARD_INDEX=" + oi + ", OPCTS_SHARD_COUNT=" + on);
  }
  // A Slurm job array (sbatch --array=MIN-MAX[:STEP]): the task's place in the array, from 1.
  const std::string sid = env_of("SLURM_ARRAY_TASK_ID"), scount = env_of("SLURM_ARRAY_TASK_COUNT");
  if (!sid.empty() || !scount.empty()) {
    if (sid.empty() || scount.empty())
      throw std::invalid_argument(
          std::string("--shard auto: ") + (sid.empty() ? "SLURM_ARRAY_TASK_ID" : "SLURM_ARRAY_TASK_COUNT") +
          " is not set but " + (sid.empty() ? "SLURM_ARRAY_TASK_COUNT" : "SLURM_ARRAY_TASK_ID") + " is");
    const std::string smin = env_of("SLURM_ARRAY_TASK_MIN"), sstep = env_of("SLURM_ARRAY_TASK_STEP");
    const long id = env_index("SLURM_ARRAY_TASK_ID", sid);
    const long min = smin.empty() ? 0 : env_index("SLURM_ARRAY_TASK_MIN", smin);
    const long step = sstep.empty() ? 1 : std::max(1L, env_index("SLURM_ARRAY_TASK_STEP", sstep));
    const std::string from = "SLURM_ARRAY_TASK_ID=" + sid +
                             ", SLURM_ARRAY_TASK_MIN=" + (smin.empty() ? "unset" : smin) +
                             ", SLURM_ARRAY_TASK_COUNT=" + scount;
    if (id < min || (id - min) % step != 0)
      throw std::invalid_argument("--shard auto: " + from + ": the task is not in the array MIN, MIN+STEP, ...");
    return checked(std::to_string((id - min) / step + 1) + "/" + scount, from);
  }
  const std::string gi = env_of("CI_NODE_INDEX"), gn = env_of("CI_NODE_TOTAL");
  if (!gi.empty() || !gn.empty()) {
    if (gi.empty() || gn.empty())
      throw std::invalid_argument(std::string("--shard auto: ") + (gi.empty() ? "CI_NODE_INDEX" : "CI_NODE_TOTAL") +
                                  " is not set but " + (gi.empty() ? "CI_NODE_TOTAL" : "CI_NODE_INDEX") + " is");
    return checked(gi + "/" + gn, "CI_NODE_INDEX=" + gi + ", CI_NODE_TOTAL=" + gn);
  }
  return "1/1";
}

std::vector<Case> selected(const Suite& suite, const Selection& s) {
  auto cases = unsharded(suite, s);
  return shard_cases(cases, parse_shard(resolve_shard(s.shard)), s.times, suite.arch().backend != "host");
}

std::string self_exe(const char* argv0) {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

}  // namespace opcts::cli
