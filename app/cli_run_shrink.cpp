// opcts run's shrink step (app/cli_run_shrink.hpp). Samples draw problems nobody wrote down, so
// their failures come at sizes chosen by chance; the smallest problem that fails the same way is
// what a kernel author debugs and what a manifest entry or a hand-written edge should pin.
#include "app/cli_run_shrink.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>

#include "app/builtins.hpp"
#include "runner/shrink.hpp"

namespace opcts::cli {

std::string shrink_sampled_failures(const Suite& run_suite, const std::vector<std::string>& plugins, int device,
                                    const std::vector<Case>& cases, const std::vector<ResultRecord>& records,
                                    double seconds) {
  std::map<std::string, const Case*> by_id;
  for (const Case& c : cases) by_id[c.id] = &c;
  std::vector<std::string> failed;
  for (const ResultRecord& r : records) {
    const auto it = by_id.find(r.id);
    if (r.outcome == Outcome::FAIL && it != by_id.end() && it->second->source.find("(sample ") != std::string::npos)
      failed.push_back(r.id);
  }
  if (failed.empty() || seconds <= 0) return "";
  // Plugin impls run here as `opcts shrink` runs them: loaded into this process.
  Suite suite(loaded_registry_for(plugins), run_suite.options());
  std::string md =
      "\n## Sampled failures, shrunk\n\nEach unexpected failure on a sampled problem, shrunk to the smallest "
      "problem that fails the same way (`opcts shrink`; " +
      std::to_string(static_cast<int>(seconds)) +
      " s in all).\n\n| failing case | shrunk to | candidates run |\n|---|---|---:|\n";
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < failed.size(); ++i) {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double share = (seconds - spent) / static_cast<double>(failed.size() - i);
    std::string shrunk = "(not tried: out of time)", tried = "0";
    if (share > 0) {
      try {
        const ShrinkResult r = shrink_case(suite, failed[i], device, share);
        shrunk = r.shrunk == r.original ? "(nothing smaller fails the same way)" : "`" + r.shrunk + "`";
        tried = std::to_string(r.tried) + (r.out_of_time ? ", out of time" : "");
      } catch (const std::exception& e) {
        shrunk = std::string("(shrink failed: ") + e.what() + ")";
      }
    }
    std::fprintf(stderr, "opcts: shrunk %s: %s\n", failed[i].c_str(), shrunk.c_str());
    md += "| `" + failed[i] + "` | " + shrunk + " | " + tried + " |\n";
  }
  return md;
}

}  // namespace opcts::cli
