// One table of an enum's spellings, from which its to_string, its parser and its list of values
// all derive: a switch for to_string beside an if-chain (or a value list) for the parser can
// drift apart when an enumerator is added, a table cannot.
//
//   constexpr Spellings<Tier, 3> kTiers{{{Tier::smoke, "smoke"}, {Tier::default_, "default"}, {Tier::full, "full"}}};
//   std::string_view to_string(Tier t) { return kTiers.of(t); }
//
// For a harness enum that no plugin sees; an enum the plugin ABI carries has its name table in
// core/abi_enum.hpp instead.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace opcts {

/// One enumerator and how it is spelled.
template <class E>
struct Spelling {
  E value;
  std::string_view text;
};

/// An enum's N spellings, one per enumerator, in the order its value list gives them.
template <class E, std::size_t N>
struct Spellings {
  Spelling<E> rows[N];

  /// The spelling of e; "?" for a value outside the table (an enum cast from a corrupt integer).
  constexpr std::string_view of(E e) const {
    for (const auto& r : rows)
      if (r.value == e) return r.text;
    return "?";
  }
  /// The enumerator spelled exactly `text`, or nullopt.
  constexpr std::optional<E> parse(std::string_view text) const {
    for (const auto& r : rows)
      if (r.text == text) return r.value;
    return std::nullopt;
  }
  /// The spellings in the table's order for an error message, ", " between them but before the
  /// last, which follows `last_separator` (" or " in prose: "smoke, default or full").
  std::string joined(std::string_view last_separator) const {
    std::string s;
    for (std::size_t i = 0; i < N; ++i) {
      if (i) s += i + 1 == N ? last_separator : std::string_view(", ");
      s += rows[i].text;
    }
    return s;
  }
  /// Every enumerator, in the table's order.
  std::vector<E> values() const {
    std::vector<E> v;
    for (const auto& r : rows) v.push_back(r.value);
    return v;
  }
};

}  // namespace opcts
