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


void add_selection(CLI::App* app, Selection& s) {
  app->add_option("--arch", s.arch, "arch to plan for (sm80, sm90, host, ...; auto = the GPU present, else host)");
  app->add_option("--tier", s.tier, "smoke, default or full (each includes the tiers before it)");
  app->add_option("--family", s.families, "family to select (repeatable; default: all)");
  app->add_option("--filter", s.filters, "glob over case ids or impl names to include (repeatable; 'aten.*' selects an impl prefix)");
  app->add_option("--exclude", s.excludes, "glob over case ids or impl names to leave out (repeatable)");
  app->add_option("--catalog", s.catalogs, "extra catalog file or folder (repeatable)");
  app->add_option("--shard", s.shard,
                  "i/N: run shard i of N (1-based); auto: from OPCTS_SHARD_INDEX/OPCTS_SHARD_COUNT or GitLab's "
                  "CI_NODE_INDEX/CI_NODE_TOTAL, else 1/1");
  app->add_option("--times", s.times, "test-times file (JSON {case id: seconds}) for balancing shards");
  app->add_option("--cases-dir", s.cases_dir, "folder of built-in catalogs, archs.yaml, tolerances.yaml, manifests/");
  app->add_option("--manifest", s.manifest, "manifest file (default: <cases-dir>/manifests/<arch>.yaml)");
  app->add_flag("--include-planted", s.include_planted,
                "add the cases of planted-bug impls, which prove the suite catches their bug (they must FAIL)");
  app->add_option("--plugin", s.plugins,
                  "shared library of impls (include/opcts/plugin.h) to load (repeatable); one that cannot be used is an "
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
      for (const Family* fam : registry_for(s.plugins, s.optional_plugins).families()) known += (known.empty() ? "" : ", ") + std::string(fam->name());
      throw std::invalid_argument("--family: unknown family '" + f + "' (known: " + known + ")");
    }
  auto cases = select_cases(suite.all_cases(), parse_tier(s.tier), s.filters, s.excludes);
  if (!s.families.empty())
    std::erase_if(cases, [&](const Case& c) {
      return std::find(s.families.begin(), s.families.end(), c.family->name()) == s.families.end();
    });
  return cases;
}

std::string resolve_shard(const std::string& shard) {
  if (shard != "auto") return shard;
  for (const auto& [index, count] : {std::pair{"OPCTS_SHARD_INDEX", "OPCTS_SHARD_COUNT"}, {"CI_NODE_INDEX", "CI_NODE_TOTAL"}}) {
    const char* iv = std::getenv(index);
    const char* nv = std::getenv(count);
    if (!iv && !nv) continue;
    if (!iv || !nv)
      throw std::invalid_argument(std::string("--shard auto: ") + (!iv ? index : count) + " is not set but " +
                                  (!iv ? count : index) + " is");
    const std::string i = iv, n = nv;
    // Set but empty is a CI variable that did not expand (a matrix key misspelled): taking it
    // as "not set" would make every shard run everything, as 1/1.
    if (i.empty() || n.empty())
      throw std::invalid_argument(std::string("--shard auto: ") + (i.empty() ? index : count) +
                                  " is set but empty (a CI variable that did not expand?)");
    const std::string spec = i + "/" + n;
    try {
      parse_shard(spec);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--shard auto: ") + index + "=" + i + ", " + count + "=" + n + ": " + e.what());
    }
    return spec;
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
