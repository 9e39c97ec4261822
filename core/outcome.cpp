// Names and classes of outcomes.
#include "core/outcome.hpp"

#include <array>
#include <utility>

namespace opcts {

namespace {
constexpr std::array<std::pair<Outcome, std::string_view>, 11> kNames{{
    {Outcome::PASS, "PASS"},
    {Outcome::FAIL, "FAIL"},
    {Outcome::ERROR, "ERROR"},
    {Outcome::CRASH, "CRASH"},
    {Outcome::TIMEOUT, "TIMEOUT"},
    {Outcome::SKIP, "SKIP"},
    {Outcome::XFAIL, "XFAIL"},
    {Outcome::XPASS, "XPASS"},
    {Outcome::FLAKE, "FLAKE"},
    {Outcome::MISTRUSTED, "MISTRUSTED"},
    {Outcome::MISSING, "MISSING"},
}};
}  // namespace

std::string_view to_string(Outcome o) {
  for (const auto& [k, v] : kNames)
    if (k == o) return v;
  return "?";
}

std::optional<Outcome> parse_outcome(std::string_view s) {
  for (const auto& [k, v] : kNames)
    if (v == s) return k;
  return std::nullopt;
}

bool is_failure(Outcome o) {
  return o == Outcome::FAIL || o == Outcome::ERROR || o == Outcome::CRASH || o == Outcome::TIMEOUT;
}

bool is_gate_failure(Outcome o) {
  return is_failure(o) || o == Outcome::XPASS || o == Outcome::FLAKE || o == Outcome::MISTRUSTED ||
         o == Outcome::MISSING;
}

}  // namespace opcts
