// Turning result records into per-arch test-times files.
#include "reports/times.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

namespace opcts {

std::map<std::string, std::map<std::string, double>> times_by_arch(const std::vector<ResultRecord>& records) {
  std::map<std::string, std::map<std::string, double>> out;
  for (const auto& r : records) {
    const double s = r.outcome == Outcome::SKIP ? 0.0 : r.ms / 1000.0;
    if (std::isfinite(s) && s >= 0) out[r.arch][r.id] = s;
  }
  return out;
}

std::string times_json(const std::map<std::string, double>& times) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [id, s] : times) j[id] = s;
  return j.dump(1) + "\n";
}

std::string times_path(const std::string& out, const std::string& arch) {
  std::string p = out;
  for (auto pos = p.find("{arch}"); pos != std::string::npos; pos = p.find("{arch}", pos + arch.size()))
    p.replace(pos, 6, arch);
  return p;
}

}  // namespace opcts
