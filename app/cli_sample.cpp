// opcts sample: the problem ids a family's `samples:` blocks draw (runner/catalog_sample.hpp).
#include <iostream>

#include "app/builtins.hpp"
#include "app/cli_commands.hpp"
#include "runner/catalog.hpp"

namespace opcts::cli {

int cmd_sample(const Selection& s, const std::string& family, const SampleOverride& o, bool verbose) {
  std::vector<std::string> paths{s.cases_dir};
  paths.insert(paths.end(), s.catalogs.begin(), s.catalogs.end());
  const auto draws = sample_catalogs(builtin_registry(), paths, family, o);
  if (draws.empty()) {
    std::cerr << "opcts sample: no catalog of " << s.cases_dir << (s.catalogs.empty() ? "" : " or --catalog")
              << " has a samples: block for family '" << family << "'\n";
    return 1;
  }
  for (const auto& d : draws) {
    if (verbose)
      std::cout << d.block << "\t" << d.draw.index << "\t" << to_string(d.draw.tier) << "\t" << d.source << "\t";
    std::cout << d.problem_id << "\n";
  }
  return 0;
}

}  // namespace opcts::cli
