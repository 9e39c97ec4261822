// Strict YAML loading and typed readers whose errors carry file, line and column.
#include "core/yaml_util.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include <yaml-cpp/eventhandler.h>

#include "core/read_file.hpp"

namespace opcts {

namespace {

// 1-based line and column of a node; 1:1 for a node without a place (never for a loaded one).
std::pair<int, int> place(const YAML::Node& n) {
  if (!n.IsDefined()) return {1, 1};
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return {1, 1};
  return {m.line + 1, m.column + 1};
}

std::string at(const std::string& path, const YAML::Mark& m) {
  if (m.is_null()) return path + ":1:1";
  return path + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

std::string kind_of(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "empty";
  if (n.IsScalar()) {
    const std::string s = n.Scalar();
    return "the text '" + (s.size() > 60 ? s.substr(0, 60) + "..." : s) + "'";
  }
  return n.IsMap() ? "a map" : "a list";
}

// An explicit tag ("!!binary", "!!str", "!local") asks yaml-cpp for a type it does not apply:
// `family: !!binary cast` would read as the text 'cast' and the tag be silently dropped. No
// input of ours needs one, so each is an error at its node. yaml-cpp marks an untagged plain
// node "?" and an untagged quoted scalar "!" (the YAML spec's non-specific tags).
void check_tag(const std::string& path, const YAML::Node& n) {
  const std::string& tag = n.Tag();
  if (tag.empty() || tag == "?" || tag == "!") return;
  std::string shown = tag;
  if (const std::string core = "tag:yaml.org,2002:"; shown.rfind(core, 0) == 0)
    shown = "!!" + shown.substr(core.size());
  yaml_fail(path, n, "YAML tag '" + shown + "' is not accepted (opcts reads plain values; a tag would be ignored)");
}

// Tags, duplicate keys, non-text keys and depth, in every node of a document. An alias is
// the node it names (same place), so each node is checked once: a "billion laughs" document
// costs its size, not its expansion.
void check_tree(const std::string& path, const YAML::Node& n, int depth, std::set<std::tuple<int, int, int>>& seen) {
  check_tag(path, n);
  if (!n.IsMap() && !n.IsSequence()) return;
  if (depth > kMaxYamlDepth) yaml_fail(path, n, "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  const auto [line, col] = place(n);
  if (!seen.emplace(line, col, static_cast<int>(n.Type())).second) return;
  if (n.IsSequence()) {
    for (const auto& item : n) check_tree(path, item, depth + 1, seen);
    return;
  }
  std::map<std::string, YAML::Node> keys;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) yaml_fail(path, kv.first, "a key must be plain text, not " + kind_of(kv.first));
    check_tag(path, kv.first);
    const std::string key = kv.first.Scalar();
    if (const auto it = keys.find(key); it != keys.end()) {
      const auto [l, c] = place(it->second);
      yaml_fail(path, kv.first,
                "duplicate key '" + key + "' (first at line " + std::to_string(l) + ", column " + std::to_string(c) +
                    "); a later one would be ignored");
    }
    keys.emplace(key, kv.first);
    check_tree(path, kv.second, depth + 1, seen);
  }
}

// yaml-cpp's events for a document, all ignored (the first document, already loaded).
struct IgnoreEvents : YAML::EventHandler {
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Stops the parse at the first node of a document, with its place.
struct StopAtFirstNode : IgnoreEvents {
  struct Found {
    YAML::Mark mark;
  };
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { throw Found{m}; }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { throw Found{m}; }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override {
    throw Found{m};
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    throw Found{m};
  }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    throw Found{m};
  }
};

// The place of the first node of a second document of `text`, if it has one. Only the start
// of that document is parsed: yaml-cpp 0.7's LoadAll can allocate without bound building some
// documents after a first (fuzz_manifest found one: a line ',' and then a flow map with '?').
std::optional<YAML::Mark> second_document(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  IgnoreEvents first;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  StopAtFirstNode next;
  try {
    parser.HandleNextDocument(next);
  } catch (const StopAtFirstNode::Found& f) {
    return f.mark;
  }
  return std::nullopt;
}

YAML::Node load_strict(const std::string& text, const std::string& path) {
  YAML::Node doc;
  std::optional<YAML::Mark> second;
  try {
    doc = YAML::Load(text);
    second = second_document(text);
  } catch (const YAML::Exception& e) {
    throw YamlError(at(path, e.mark) + ": " + e.msg);
  }
  if (second)
    throw YamlError(at(path, *second) +
                    ": a second YAML document ('---'); a file holds one, and a second would be ignored");
  if (!doc.IsDefined() || doc.IsNull()) throw YamlError(path + ":1:1: empty file (no YAML content)");
  std::set<std::tuple<int, int, int>> seen;
  check_tree(path, doc, 0, seen);
  return doc;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

YAML::Node require_kind(const std::string& path, const YAML::Node& n, const std::string& what, bool ok,
                        const char* kind) {
  if (!ok) yaml_fail(path, n, what + " must be " + kind + ", not " + kind_of(n));
  return n;
}

// map[key], which must be present.
YAML::Node value_of(const std::string& path, const YAML::Node& map, const char* key) {
  const YAML::Node v = map[key];
  if (!v) yaml_fail(path, map, std::string("missing '") + key + "'");
  return v;
}

}  // namespace

std::string where(const std::string& path, const YAML::Node& n) { return path + ":" + std::to_string(place(n).first); }

std::string where_col(const std::string& path, const YAML::Node& n) {
  const auto [line, col] = place(n);
  return path + ":" + std::to_string(line) + ":" + std::to_string(col);
}

void yaml_fail(const std::string& path, const YAML::Node& n, const std::string& what) {
  throw YamlError(where_col(path, n) + ": " + what);
}

YAML::Node load_yaml_file(const std::string& path) {
  std::string text;
  try {
    text = read_file_limited(path, kMaxYamlBytes, "a YAML input");
  } catch (const std::runtime_error& e) {
    // "path: why" as "path:1:1: why", the place every YamlError starts with.
    const std::string what = e.what();
    throw YamlError(path + ":1:1: " + (what.rfind(path + ": ", 0) == 0 ? what.substr(path.size() + 2) : what));
  }
  return load_strict(text, path);
}

YAML::Node load_yaml_text(const std::string& text, const std::string& path) { return load_strict(text, path); }

std::string one_line(const YAML::Node& n) {
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

std::string closest_key(const std::string& key, const std::vector<std::string>& allowed) {
  std::string closest;
  size_t best = 3;  // a misspelling is at most two edits away
  for (const std::string& a : allowed)
    if (const size_t d = edit_distance(key, a); d < best && d < a.size()) {
      best = d;
      closest = a;
    }
  return closest;
}

void check_keys(const std::string& path, const YAML::Node& map, std::initializer_list<const char*> allowed) {
  if (!map.IsMap()) yaml_fail(path, map, "expected a map, not " + kind_of(map));
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) yaml_fail(path, kv.first, "a key must be plain text, not " + kind_of(kv.first));
    const std::string key = kv.first.Scalar();
    if (std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; })) continue;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    const std::string closest = closest_key(key, std::vector<std::string>(allowed.begin(), allowed.end()));
    yaml_fail(path, kv.first,
              "unknown key '" + key + "'" + (closest.empty() ? "" : " (did you mean '" + closest + "'?)") +
                  " (expected one of: " + list + ")");
  }
}

YAML::Node require_map(const std::string& path, const YAML::Node& n, const std::string& what) {
  return require_kind(path, n, what, n.IsMap(), "a map");
}

YAML::Node require_list(const std::string& path, const YAML::Node& n, const std::string& what) {
  return require_kind(path, n, what, n.IsSequence(), "a list");
}

YAML::Node require_scalar(const std::string& path, const YAML::Node& n, const std::string& what) {
  return require_kind(path, n, what, n.IsScalar(), "a single value");
}

std::string text_of(const std::string& path, const YAML::Node& map, const char* key) {
  const YAML::Node v = value_of(path, map, key);
  return require_scalar(path, v, std::string("'") + key + "'").Scalar();
}

bool bool_of(const std::string& path, const YAML::Node& map, const char* key) {
  const YAML::Node v = value_of(path, map, key);
  bool b = false;
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b))
    yaml_fail(path, v, std::string("'") + key + "' must be true or false, not " + kind_of(v));
  return b;
}

long long int_of(const std::string& path, const YAML::Node& map, const char* key, long long lo, long long hi) {
  const YAML::Node v = value_of(path, map, key);
  long long x = 0;
  const bool is_int = v.IsScalar() && YAML::convert<long long>::decode(v, x);
  if (!is_int || x < lo || x > hi)
    yaml_fail(path, v,
              std::string("'") + key + "' must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
                  ", not " + kind_of(v));
  return x;
}

double number_of(const std::string& path, const YAML::Node& map, const char* key) {
  const YAML::Node v = value_of(path, map, key);
  double x = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, x) || !std::isfinite(x))
    yaml_fail(path, v, std::string("'") + key + "' must be a finite number, not " + kind_of(v));
  return x;
}

}  // namespace opcts
