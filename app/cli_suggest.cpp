// "Did you mean ...?" for a mistyped subcommand or flag (cli_suggest.hpp).
#include "app/cli_suggest.hpp"

#include <algorithm>
#include <numeric>

namespace opcts::cli {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest_name(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& k : known) {
    const size_t d = edit_distance(word, k);
    if (d < best_d) best_d = d, best = k;
  }
  // A prefix ("--inc" of "--include-planted") is a typo too, whatever its length.
  for (const auto& k : known)
    if (word.size() >= 3 && k.rfind(word, 0) == 0) return k;
  return best_d <= 2 && 2 * best_d < word.size() ? best : "";
}

namespace {

std::string command_path(const CLI::App* app) {
  std::string path;
  for (; app && app->get_parent(); app = app->get_parent()) path = app->get_name() + (path.empty() ? "" : " " + path);
  return path.empty() ? "opcts" : "opcts " + path;  // the top app's name is argv[0], a path
}

std::vector<std::string> long_options(const CLI::App* app) {
  std::vector<std::string> out{"--help"};
  for (const CLI::Option* o : app->get_options())
    for (const auto& n : o->get_lnames()) out.push_back("--" + n);
  return out;
}

std::vector<std::string> subcommand_names(const CLI::App* app) {
  std::vector<std::string> out;
  for (const CLI::App* s : app->get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); }))
    out.push_back(s->get_name());
  return out;
}

}  // namespace

std::string suggestion(const CLI::App& top, const std::vector<std::string>& args) {
  const CLI::App* app = &top;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.rfind("--", 0) == 0) {
      const std::string name = a.substr(0, a.find('='));
      const CLI::Option* o = app->get_option_no_throw(name);
      if (!o) {
        const std::string near = closest_name(name, long_options(app));
        return near.empty() ? ""
                            : "unknown option " + name + " of " + command_path(app) + "; did you mean " + near + "?";
      }
      if (a.find('=') == std::string::npos && o->get_type_size_max() > 0) ++i;  // its value
      continue;
    }
    if (a.rfind('-', 0) == 0) continue;  // a short flag (-v)
    const auto subs = subcommand_names(app);
    if (std::find(subs.begin(), subs.end(), a) != subs.end()) {
      app = app->get_subcommand(a);
      continue;
    }
    if (!subs.empty() && app->get_require_subcommand_min() > 0) {
      const std::string near = closest_name(a, subs);
      return near.empty() ? ""
                          : "unknown subcommand '" + a + "' of " + command_path(app) + "; did you mean '" + near + "'?";
    }
  }
  return "";
}

}  // namespace opcts::cli
