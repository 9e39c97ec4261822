// AMD GPU discovery through the KFD topology in sysfs (kfd_probe.hpp).
#include "runner/kfd_probe.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace opcts {

std::string gfx_name(long version) {
  if (version <= 0) return "";
  std::ostringstream s;
  s << "gfx" << std::dec << (version / 10000) % 100 << std::hex << (version / 100) % 100 << version % 100;
  return s.str();
}

std::vector<std::string> kfd_gpu_archs(const std::string& topology) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<long, std::string>> nodes;
  for (const auto& e : fs::directory_iterator(topology, ec)) {
    const std::string id = e.path().filename().string();
    if (id.empty() || !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    std::ifstream in(e.path() / "properties");
    std::string key;
    long value = 0;
    for (std::string line; std::getline(in, line);) {
      std::istringstream ls(line);
      if (ls >> key >> value && key == "gfx_target_version") break;
      value = 0;
    }
    if (const std::string name = gfx_name(value); !name.empty()) nodes.emplace_back(std::stol(id), name);
  }
  std::sort(nodes.begin(), nodes.end());
  std::vector<std::string> out;
  for (auto& [id, name] : nodes) out.push_back(std::move(name));
  return out;
}

}  // namespace opcts
