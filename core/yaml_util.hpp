// Small helpers for reading YAML with errors that name the file and line.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include <yaml-cpp/yaml.h>

namespace opcts {

/// "path:line" of a node (yaml-cpp marks are 0-based; lines here are 1-based).
inline std::string where(const std::string& path, const YAML::Node& n) {
  return path + ":" + std::to_string(n.Mark().line + 1);
}

/// An error in a YAML input; the message starts with "path:line: ".
struct YamlError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void yaml_fail(const std::string& path, const YAML::Node& n, const std::string& what) {
  throw YamlError(where(path, n) + ": " + what);
}

/// Loads a YAML file, turning yaml-cpp's parse errors into YamlError with file:line.
inline YAML::Node load_yaml_file(const std::string& path) {
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw YamlError(path + ": cannot open file");
  } catch (const YAML::Exception& e) {
    throw YamlError(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

/// n[field] converted to T; the error names the field and its text ("bad conversion" does not).
template <typename T>
T field_as(const YAML::Node& n, const char* field) {
  try {
    return n[field].as<T>();
  } catch (const YAML::Exception&) {
    throw std::runtime_error(std::string("field '") + field + "': cannot read '" +
                             (n[field].IsScalar() ? n[field].Scalar() : std::string("<") + (n[field].IsMap() ? "map" : "list") + ">") +
                             "' as " + (std::is_same_v<T, bool>        ? "true or false"
                                         : std::is_integral_v<T>       ? "an integer"
                                         : std::is_floating_point_v<T> ? "a number"
                                                                       : "text"));
  }
}

/// A node on one line (flow style), for error messages.
inline std::string one_line(const YAML::Node& n) {
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

/// Rejects keys of a map that are not in `allowed` (a typo must not pass silently).
inline void check_keys(const std::string& path, const YAML::Node& map, std::initializer_list<const char*> allowed) {
  if (!map.IsMap()) yaml_fail(path, map, "expected a map");
  for (const auto& kv : map) {
    const auto key = kv.first.as<std::string>();
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      yaml_fail(path, kv.first, "unknown key '" + key + "' (expected one of: " + list + ")");
    }
  }
}

}  // namespace opcts
