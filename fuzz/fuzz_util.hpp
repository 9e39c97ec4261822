// Shared by the fuzz targets: a per-process temp folder, writing the input to a file in it,
// and running a parser so that its documented exceptions count as a clean rejection.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "core/yaml_util.hpp"

namespace opcts_fuzz {

/// A folder of this process ($TMPDIR/opcts-fuzz-XXXXXX), removed at exit; libFuzzer's
/// -fork/-jobs workers each get their own.
inline const std::filesystem::path& tmp_dir() {
  static const std::filesystem::path dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/opcts-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("opcts fuzz: mkdtemp");
      std::abort();
    }
    static std::filesystem::path keep = tmpl;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(keep, ec);
    });
    return keep;
  }();
  return dir;
}

/// Writes `bytes` to `<tmp_dir>/<name>` (truncating) and returns the path.
inline std::string write_file(const std::string& name, std::string_view bytes) {
  const auto path = (tmp_dir() / name).string();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::perror(("opcts fuzz: writing " + path).c_str());
    std::abort();
  }
  return path;
}

/// Runs `fn`; the exceptions the parsers document (YamlError, std::runtime_error,
/// std::invalid_argument, YAML::Exception) mean "input rejected" and return false. Any other
/// exception escapes, and libFuzzer reports it as a crash (uncaught exception -> abort).
template <typename Fn>
bool accepts(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const opcts::YamlError&) {
  } catch (const YAML::Exception&) {
  } catch (const std::invalid_argument&) {
  } catch (const std::runtime_error&) {
  }
  return false;
}

/// Grid points a catalog's text asks for (the product of its axes' lengths, over its grids).
/// A few kilobytes of YAML can ask for 10^6 points (the loader's cap), which loads correctly
/// but slowly: targets skip such inputs so that a bounded CI run cannot time out on them.
inline double grid_points(std::string_view bytes) {
  double total = 0;
  try {
    const YAML::Node root = YAML::Load(std::string(bytes));
    if (!root.IsMap() || !root["grids"] || !root["grids"].IsSequence()) return 0;
    for (const auto& g : root["grids"]) {
      if (!g.IsMap() || !g["axes"] || !g["axes"].IsMap()) continue;
      double points = 1;
      for (const auto& kv : g["axes"]) points *= kv.second.IsSequence() ? static_cast<double>(kv.second.size()) : 1.0;
      total += points;
    }
  } catch (const YAML::Exception&) {
  }
  return total;
}

/// Aborts with a message: an invariant the target checks does not hold.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "opcts fuzz: invariant violated: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace opcts_fuzz
