// Writing one failed case's artifact folder.
#include "runner/artifacts.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "numerics/npy.hpp"

namespace opcts {

namespace fs = std::filesystem;

std::string sanitize_id(const std::string& id) {
  std::string s = id;
  for (char& ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                    ch == '_' || ch == '-';
    if (!ok) ch = '_';
  }
  return s;
}

std::string write_failure_artifacts(const std::string& dir, const ResultRecord& r, const TensorMap& inputs,
                                    const References& refs, const TensorMap& outputs) {
  const fs::path d = fs::path(dir) / sanitize_id(r.id);
  std::error_code ec;
  fs::create_directories(d, ec);
  if (ec) throw std::runtime_error(d.string() + ": " + ec.message());
  std::string truncated;
  auto note = [&](const std::string& file, bool cut, int64_t numel) {
    if (cut)
      truncated += file + ": first " + std::to_string(kArtifactMaxElements) + " of " + std::to_string(numel) +
                   " elements, written 1-D\n";
  };
  for (const auto& [name, t] : inputs) {
    const std::string f = "in_" + sanitize_id(name) + ".npy";
    note(f, write_tensor_npy((d / f).string(), t, kArtifactMaxElements), t.numel());
  }
  for (const auto& [name, t] : outputs) {
    const std::string f = "out_" + sanitize_id(name) + ".npy";
    note(f, write_tensor_npy((d / f).string(), t, kArtifactMaxElements), t.numel());
    if (auto it = refs.exact.find(name); it != refs.exact.end()) {
      const std::string rf = "ref_" + sanitize_id(name) + ".npy";
      const std::vector<int64_t> shape = static_cast<int64_t>(it->second.size()) == t.numel()
                                             ? t.shape()
                                             : std::vector<int64_t>{static_cast<int64_t>(it->second.size())};
      note(rf, write_values_npy((d / rf).string(), it->second, shape, kArtifactMaxElements),
           static_cast<int64_t>(it->second.size()));
    }
  }
  {
    std::ofstream f(d / "repro.txt");
    f << "case     " << r.id << "\n"
      << "outcome  " << to_string(r.raw_outcome) << "\n"
      << "repro    " << r.repro << "\n"
      << "seed     " << r.seed << "\n"
      << "arch     " << r.arch << "\n"
      << "device   " << r.device << "\n"
      << "message  " << r.message << "\n"
      << "dtypes   in_*/out_* hold fp64 as <f8, fp32 as <f4, fp16 as <f2; bf16, fp8, fp6, fp4, e8m0 and int4 as "
         "their decoded values in <f4; ref_* is the fp64 reference (<f8)\n";
    if (!truncated.empty()) f << "capped\n" << truncated;
    if (!f) throw std::runtime_error((d / "repro.txt").string() + ": cannot write");
  }
  {
    std::ofstream f(d / "worst.txt");
    f << "# output[index] got want abs_err\n";
    for (const auto& w : r.worst) {
      f << w.out << "[";
      for (size_t i = 0; i < w.index.size(); ++i) f << (i ? "," : "") << w.index[i];
      f.precision(9);
      f << "] " << w.got << " " << w.want << " " << std::abs(w.got - w.want) << "\n";
    }
    for (const auto& o : r.outputs)
      f << "# " << o.out << ": " << o.metric << ", " << o.mismatches << "/" << o.elements << " mismatches, max abs err "
        << o.max_abs_err << ", bound " << o.bound << "\n";
  }
  return d.string();
}

}  // namespace opcts
