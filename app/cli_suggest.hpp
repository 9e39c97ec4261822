// "Did you mean ...?" for a mistyped subcommand or flag: the closest names the command line knows.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace opcts::cli {

/// Levenshtein distance between two names (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b);

/// The closest of `known` to `word` when it is close enough to be a typo (at most 2 edits, and
/// fewer than half the word), else "".
std::string closest_name(const std::string& word, const std::vector<std::string>& known);

/// For a command line CLI11 refused: walks `args` (argv without the program) through `app`'s
/// subcommands and returns "unknown subcommand 'lst' of opcts; did you mean 'list'?" or
/// "unknown option --filtr of opcts run; did you mean --filter?" for the first word no
/// subcommand or option of its command knows, or "" when nothing is close to a known name.
std::string suggestion(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace opcts::cli
