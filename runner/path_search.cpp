// $PATH's folders (runner/path_search.hpp).
#include "runner/path_search.hpp"

#include <algorithm>
#include <cstdlib>

namespace opcts {

std::vector<std::string> path_dirs() {
  std::vector<std::string> dirs;
  const char* path = std::getenv("PATH");
  const std::string all = path ? path : "";
  for (size_t at = 0; at <= all.size();) {
    const size_t colon = std::min(all.find(':', at), all.size());
    if (colon > at) dirs.push_back(all.substr(at, colon - at));
    at = colon + 1;
  }
  return dirs;
}

}  // namespace opcts
