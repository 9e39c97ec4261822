// The run's selection as JSON: written into reports, read back by the gate.
#include "judge/run_selection.hpp"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/digest.hpp"
#include "core/family.hpp"
#include "core/glob.hpp"

namespace opcts {

namespace {

using nlohmann::json;

json files_json(const std::vector<SelectedFile>& files) {
  json a = json::array();
  for (const auto& f : files) a.push_back({{"path", f.path}, {"digest", f.digest}});
  return a;
}

std::vector<SelectedFile> files_of(const json& a) {
  std::vector<SelectedFile> out;
  for (const auto& f : a) out.push_back({f.at("path").get<std::string>(), f.value("digest", "")});
  return out;
}

// The selection as JSON; `identity_only`: only what defines the run, files by their digests
// (each shard may run in another folder, or on another machine, from the same files).
json to_json(const RunSelection& s, bool identity_only) {
  json j{{"opcts_version", s.opcts_version},
         {"opcts_commit", s.opcts_commit},
         {"ref_digest", s.ref_digest},
         {"arch", s.arch},
         {"tier", s.tier},
         {"families", s.families},
         {"filters", s.filters},
         {"excludes", s.excludes},
         {"include_planted", s.include_planted},
         {"bitwise", s.bitwise},
         {"invariance", s.invariance},
         {"capture", s.capture}};
  json plugins = json::array();
  if (identity_only) {
    const auto digests = [](const std::vector<SelectedFile>& files) {
      json a = json::array();
      for (const auto& f : files) a.push_back(f.digest);
      return a;
    };
    for (const auto& p : s.plugins) plugins.push_back({{"digest", p.digest}, {"optional", p.optional}});
    j.update({{"plugins", plugins}, {"manifests", digests(s.manifests)}, {"catalogs", digests(s.catalogs)}});
    return j;
  }
  for (const auto& p : s.plugins)
    plugins.push_back(
        {{"path", p.path}, {"digest", p.digest}, {"optional", p.optional}, {"error", p.error}, {"impls", p.impls}});
  j.update({{"cases_dir", s.cases_dir},
            {"plugins", plugins},
            {"manifests", files_json(s.manifests)},
            {"catalogs", files_json(s.catalogs)},
            {"planted", s.planted},
            {"state", std::string(to_string(s.state))},
            {"shard", s.shard},
            {"planned", s.planned},
            {"planned_digest", s.planned_digest},
            {"selected", s.selected},
            {"selected_digest", s.selected_digest},
            {"error", s.error}});
  return j;
}

}  // namespace

std::string_view to_string(RunState s) {
  switch (s) {
    case RunState::started: return "started";
    case RunState::planned: return "planned";
    case RunState::finished: return "finished";
    case RunState::stopped: return "stopped";
  }
  return "?";
}

std::string RunSelection::key() const { return digest_of(to_json(*this, true).dump()); }

std::pair<int, int> RunSelection::shard_of() const {
  const auto slash = shard.find('/');
  try {
    if (slash != std::string::npos) return {std::stoi(shard.substr(0, slash)), std::stoi(shard.substr(slash + 1))};
  } catch (const std::exception&) {
  }
  return {1, 1};
}

std::string RunSelection::describe() const {
  std::string s = arch + " " + tier;
  std::string more;
  const auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    more += std::string(more.empty() ? "" : "; ") + what;
    for (const auto& x : v) more += " '" + x + "'";
  };
  list("families", families);
  list("filters", filters);
  list("excludes", excludes);
  for (const auto& p : plugins) more += std::string(more.empty() ? "" : "; ") + "plugin " + p.path;
  return more.empty() ? s : s + " (" + more + ")";
}

bool RunSelection::covers(const ResultRecord& r) const {
  if (r.arch != arch) return false;
  if (!families.empty() && std::find(families.begin(), families.end(), r.family) == families.end()) return false;
  try {
    if (!r.tier.empty() && parse_tier(r.tier) > parse_tier(tier)) return false;
  } catch (const std::exception&) {
    return false;
  }
  const auto matches = [&](const std::string& glob) { return glob_match(glob, r.id) || glob_match(glob, r.impl); };
  bool in = filters.empty();
  for (const auto& f : filters) in = in || matches(f);
  for (const auto& x : excludes) in = in && !matches(x);
  return in;
}

std::string RunSelection::json() const { return to_json(*this, false).dump(); }

std::string RunSelection::header_line() const {
  return nlohmann::json{{"opcts_selection", to_json(*this, false)}}.dump();
}

RunSelection RunSelection::parse(const std::string& text) {
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.contains("opcts_selection")) j = j.at("opcts_selection");
    RunSelection s;
    const std::string state = j.at("state").get<std::string>();
    bool known = false;
    for (RunState st : {RunState::started, RunState::planned, RunState::finished, RunState::stopped})
      if (state == to_string(st)) s.state = st, known = true;
    if (!known) throw std::runtime_error("state '" + state + "' is none of started, planned, finished, stopped");
    s.opcts_version = j.value("opcts_version", "");
    s.opcts_commit = j.value("opcts_commit", "");
    s.ref_digest = j.value("ref_digest", "");
    s.arch = j.at("arch").get<std::string>();
    s.tier = j.at("tier").get<std::string>();
    s.shard = j.value("shard", "1/1");
    s.families = j.value("families", std::vector<std::string>{});
    s.filters = j.value("filters", std::vector<std::string>{});
    s.excludes = j.value("excludes", std::vector<std::string>{});
    s.include_planted = j.value("include_planted", false);
    s.bitwise = j.value("bitwise", false);
    s.invariance = j.value("invariance", false);
    s.capture = j.value("capture", false);
    s.cases_dir = j.value("cases_dir", "");
    for (const auto& p : j.value("plugins", nlohmann::json::array()))
      s.plugins.push_back({p.at("path").get<std::string>(), p.value("digest", ""), p.value("optional", false),
                           p.value("error", ""), p.value("impls", std::vector<std::string>{})});
    s.manifests = files_of(j.value("manifests", nlohmann::json::array()));
    s.catalogs = files_of(j.value("catalogs", nlohmann::json::array()));
    s.planted = j.value("planted", std::vector<std::string>{});
    s.planned = j.value("planned", std::size_t{0});
    s.selected = j.value("selected", std::size_t{0});
    s.planned_digest = j.value("planned_digest", "");
    s.selected_digest = j.value("selected_digest", "");
    s.error = j.value("error", "");
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("the run's selection: ") + e.what());
  }
}

std::string ids_digest(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  std::string all;
  for (const auto& id : ids) all += id + "\n";
  return digest_of(all);
}

}  // namespace opcts
