// Reading YAML inputs strictly, with errors that name the file, line and column.
//
// Every YAML file opcts reads (catalogs, manifests, tolerances, archs) goes through
// load_yaml_file, which refuses what yaml-cpp would let slip: an empty file, a second
// document, a key given twice in one map (yaml-cpp keeps the first and drops the rest
// from lookups), keys that are not plain text, nesting deeper than any input needs. The
// readers below turn a value of the wrong kind (a scalar where a list is due, text where a
// number is due, a number out of range) into a YamlError at that value.
#pragma once

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace opcts {

/// "path:line" of a node (yaml-cpp marks are 0-based; lines here are 1-based): where an entry
/// comes from, as reports print it.
std::string where(const std::string& path, const YAML::Node& n);

/// "path:line:column" of a node (1-based), the start of every YamlError message.
std::string where_col(const std::string& path, const YAML::Node& n);

/// An error in a YAML input; the message starts with "path:line:column: ".
struct YamlError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws YamlError("path:line:column: what") at node `n`.
[[noreturn]] void yaml_fail(const std::string& path, const YAML::Node& n, const std::string& what);

/// The deepest nesting of maps and lists a YAML input may have (ours need fewer than 10).
inline constexpr int kMaxYamlDepth = 64;

/// Loads a YAML file of exactly one document, strictly (see the file comment). Throws
/// YamlError with file, line and column: a parse error, "empty file", a second document, a
/// duplicate key (at the second), a key that is a map or list, nesting past kMaxYamlDepth.
YAML::Node load_yaml_file(const std::string& path);

/// The same checks on YAML text (`path` names it in errors): for fuzz targets and tests.
YAML::Node load_yaml_text(const std::string& text, const std::string& path);

/// A node on one line (flow style), for error messages.
std::string one_line(const YAML::Node& n);

/// The key of `allowed` closest to `key` when it is a likely misspelling (at most two edits, and
/// fewer than the key's length), or "".
std::string closest_key(const std::string& key, const std::vector<std::string>& allowed);

/// Rejects keys of a map that are not in `allowed` (a typo must not pass silently), naming
/// the closest allowed key when one is a likely misspelling ("did you mean 'family'?").
/// Throws YamlError at the map when it is not a map, at the key otherwise.
void check_keys(const std::string& path, const YAML::Node& map, std::initializer_list<const char*> allowed);

/// `n` itself (a handle, returned by value: safe in a range-for over a temporary) when it is a
/// map / a list / a scalar; otherwise a YamlError at it saying that `what` (e.g. "'grids'")
/// must be one, and what it is instead. A key without a value is null, marked where yaml-cpp
/// puts it: at the next line.
YAML::Node require_map(const std::string& path, const YAML::Node& n, const std::string& what);
YAML::Node require_list(const std::string& path, const YAML::Node& n, const std::string& what);
YAML::Node require_scalar(const std::string& path, const YAML::Node& n, const std::string& what);

/// map[key] as text: a scalar, else a YamlError at the value.
std::string text_of(const std::string& path, const YAML::Node& map, const char* key);
/// map[key] as true/false; a YamlError at the value otherwise.
bool bool_of(const std::string& path, const YAML::Node& map, const char* key);
/// map[key] as an integer in [lo, hi]; a YamlError at the value otherwise.
long long int_of(const std::string& path, const YAML::Node& map, const char* key, long long lo, long long hi);
/// map[key] as a finite number; a YamlError at the value otherwise.
double number_of(const std::string& path, const YAML::Node& map, const char* key);

/// n[field] converted to T; the error names the field and its text ("bad conversion" does not).
template <typename T>
T field_as(const YAML::Node& n, const char* field) {
  try {
    return n[field].as<T>();
  } catch (const YAML::Exception&) {
    throw std::runtime_error(
        std::string("field '") + field + "': cannot read '" +
        (n[field].IsScalar() ? n[field].Scalar() : std::string("<") + (n[field].IsMap() ? "map" : "list") + ">") +
        "' as " +
        (std::is_same_v<T, bool>       ? "true or false"
         : std::is_integral_v<T>       ? "an integer"
         : std::is_floating_point_v<T> ? "a number"
                                       : "text"));
  }
}

}  // namespace opcts
