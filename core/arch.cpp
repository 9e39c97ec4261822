// Loading cases/archs.yaml.
#include "core/arch.hpp"

#include <stdexcept>
#include <tuple>
#include <utility>

#include "core/yaml_util.hpp"

namespace opcts {

namespace {

// "MAJOR.MINOR" of compute_capability, each 0..99.
std::pair<int, int> compute_capability(const std::string& path, const YAML::Node& v) {
  const std::string cc = require_scalar(path, v, "'compute_capability'").Scalar();
  const auto dot = cc.find('.');
  const auto number = [](const std::string& s) {
    return !s.empty() && s.size() <= 2 && s.find_first_not_of("0123456789") == std::string::npos ? std::stoi(s) : -1;
  };
  const int major = dot == std::string::npos ? -1 : number(cc.substr(0, dot));
  const int minor = dot == std::string::npos ? -1 : number(cc.substr(dot + 1));
  if (major < 0 || minor < 0)
    yaml_fail(path, v, "'compute_capability' must be MAJOR.MINOR (e.g. \"9.0\"), not '" + cc + "'");
  return {major, minor};
}

}  // namespace

ArchTable ArchTable::load(const std::string& path) {
  const YAML::Node root = load_yaml_file(path);
  check_keys(path, root, {"archs"});
  if (!root["archs"]) yaml_fail(path, root, "expected a map 'archs:'");
  const YAML::Node archs = require_map(path, root["archs"], "'archs'");
  if (archs.size() == 0) yaml_fail(path, archs, "'archs' lists no arch");
  ArchTable t;
  for (const auto& kv : archs) {
    const YAML::Node& n = kv.second;
    ArchInfo a;
    a.name = kv.first.Scalar();
    if (a.name.empty() || a.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      yaml_fail(path, kv.first, "arch name '" + a.name + "' must be lower-case letters, digits and '_'");
    check_keys(path, n, {"backend", "description", "caps", "compute_capability", "smem_per_block_kib", "warp_size"});
    if (!n["backend"]) yaml_fail(path, n, "arch '" + a.name + "' needs 'backend:' (cuda, hip or host)");
    a.backend = text_of(path, n, "backend");
    if (a.backend != "cuda" && a.backend != "hip" && a.backend != "host")
      yaml_fail(path, n["backend"], "backend must be cuda, hip or host, not '" + a.backend + "'");
    a.description = n["description"] ? text_of(path, n, "description") : "";
    if (n["caps"])
      for (const auto& c : require_list(path, n["caps"], "'caps'")) {
        const std::string cap = require_scalar(path, c, "a capability").Scalar();
        if (!a.caps.insert(cap).second) yaml_fail(path, c, "capability '" + cap + "' is listed twice");
      }
    if (n["compute_capability"])
      std::tie(a.compute_major, a.compute_minor) = compute_capability(path, n["compute_capability"]);
    // Shared memory per block: 0 (unknown) up to 1 MiB, well above any GPU's 228 KiB.
    if (n["smem_per_block_kib"])
      a.smem_per_block_kib = static_cast<int>(int_of(path, n, "smem_per_block_kib", 0, 1024));
    if (n["warp_size"]) {
      a.warp_size = static_cast<int>(int_of(path, n, "warp_size", 0, 64));
      if (a.warp_size != 0 && a.warp_size != 32 && a.warp_size != 64)
        yaml_fail(path, n["warp_size"], "'warp_size' must be 32 or 64 (0: not a GPU)");
    }
    t.archs_[a.name] = std::move(a);
  }
  return t;
}

const ArchInfo& ArchTable::get(const std::string& name) const {
  auto it = archs_.find(name);
  if (it == archs_.end()) {
    std::string known;
    for (const auto& [k, v] : archs_) known += (known.empty() ? "" : " ") + k;
    throw std::invalid_argument("unknown arch '" + name + "' (known: " + known + ")");
  }
  return it->second;
}

std::vector<std::string> ArchTable::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : archs_) out.push_back(k);
  return out;
}

}  // namespace opcts
