// Loading cases/archs.yaml.
#include "core/arch.hpp"

#include <stdexcept>

#include "core/yaml_util.hpp"

namespace opcts {

ArchTable ArchTable::load(const std::string& path) {
  const YAML::Node root = load_yaml_file(path);
  if (!root.IsMap() || !root["archs"] || !root["archs"].IsMap()) yaml_fail(path, root, "expected a map 'archs:'");
  ArchTable t;
  for (const auto& kv : root["archs"]) {
    const YAML::Node& n = kv.second;
    check_keys(path, n, {"backend", "description", "caps", "compute_capability", "smem_per_block_kib", "warp_size"});
    ArchInfo a;
    a.name = kv.first.as<std::string>();
    try {
      a.backend = n["backend"].as<std::string>();
      if (a.backend != "cuda" && a.backend != "hip" && a.backend != "host")
        yaml_fail(path, n["backend"], "backend must be cuda, hip or host");
      a.description = n["description"] ? n["description"].as<std::string>() : "";
      if (n["caps"])
        for (const auto& c : n["caps"]) a.caps.insert(c.as<std::string>());
      if (n["compute_capability"]) {
        const auto cc = n["compute_capability"].as<std::string>();
        const auto dot = cc.find('.');
        if (dot == std::string::npos) yaml_fail(path, n["compute_capability"], "expected MAJOR.MINOR");
        a.compute_major = std::stoi(cc.substr(0, dot));
        a.compute_minor = std::stoi(cc.substr(dot + 1));
      }
      a.smem_per_block_kib = n["smem_per_block_kib"] ? n["smem_per_block_kib"].as<int>() : 0;
      a.warp_size = n["warp_size"] ? n["warp_size"].as<int>() : 0;
    } catch (const YAML::Exception& e) {
      yaml_fail(path, n, "arch '" + a.name + "': " + e.msg);
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
