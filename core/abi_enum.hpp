// One vocabulary per problem: an enumerated field of a family's problem is one C++ enum whose
// values are the plugin ABI's constants (include/opcts/plugin.h), with one name table that the
// field table's choices, the id tokens, to_string and the ABI checks all read.
//
//   enum class Format : int32_t { tinygemm = OPCTS_INT4_TINYGEMM, ... };
//   inline constexpr std::array<EnumName<Format>, 5> kFormatNames{{{Format::tinygemm, "tinygemm", "tinygemm"}, ...}};
//   constexpr const auto& enum_names(Format) { return kFormatNames; }  // found by ADL
//
// Writing a parameter struct is abi_value(p.format); reading one back (a plugin or a corrupted
// struct may send any int32) is from_abi<Format>(c.format, "format"), which refuses a value the
// enum does not name with std::invalid_argument naming the field. Where a kernel's enum differs
// on purpose (fewer cases, or two problems one kernel), an EnumMap lists every enumerator, and
// static_assert(covers(map)) holds it to the name table at compile time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace opcts {

/// One enumerator of an ABI enum: its value, its YAML name and its id token ("" for the
/// default, left out of ids).
template <class E>
struct EnumName {
  E value;
  std::string_view yaml;
  std::string_view id;
};

/// The name table of E (declared next to E as `enum_names(E)`, found by argument lookup).
template <class E>
constexpr const auto& names_of() {
  return enum_names(E{});
}

/// The ABI constant an enumerator stands for.
template <class E>
constexpr int32_t abi_value(E e) {
  static_assert(std::is_enum_v<E> && std::is_same_v<std::underlying_type_t<E>, int32_t>,
                "an ABI enum is an enum class over int32_t whose values are the ABI's constants");
  return static_cast<int32_t>(e);
}

/// Whether v is the ABI value of an enumerator of E.
template <class E>
constexpr bool abi_names(int32_t v) {
  for (const auto& n : names_of<E>())
    if (abi_value(n.value) == v) return true;
  return false;
}

/// A parameter struct's value that its enum does not name; `field` is the struct's member.
struct AbiValueError : std::invalid_argument {
  AbiValueError(std::string field_name, const std::string& what)
      : std::invalid_argument(what), field(std::move(field_name)) {}
  std::string field;
};

/// The enumerator of ABI value v; throws AbiValueError naming `field` for a value E does not
/// name (a plugin or a corrupted struct can send one).
template <class E>
E from_abi(int32_t v, std::string_view field) {
  if (abi_names<E>(v)) return static_cast<E>(v);
  std::string known;
  for (const auto& n : names_of<E>())
    known += (known.empty() ? "" : ", ") + std::string(n.yaml) + " = " + std::to_string(abi_value(n.value));
  throw AbiValueError(std::string(field),
                      std::string(field) + " = " + std::to_string(v) + " is not a value the ABI names (" + known + ")");
}

/// The YAML name of an enumerator ("" for a value outside the table).
template <class E>
constexpr std::string_view enum_name(E e) {
  for (const auto& n : names_of<E>())
    if (n.value == e) return n.yaml;
  return {};
}

/// A kernel's enum K spelled with the same ABI constants as E (kernel headers include
/// include/opcts/, not core/): e's value as K.
template <class K, class E>
constexpr K as_kernel(E e) {
  static_assert(std::is_same_v<std::underlying_type_t<K>, int32_t>, "a kernel enum of ABI constants is over int32_t");
  return static_cast<K>(abi_value(e));
}

/// The id token of an enumerator ("" for the default, or for a value outside the table).
template <class E>
constexpr std::string_view enum_id(E e) {
  for (const auto& n : names_of<E>())
    if (n.value == e) return n.id;
  return {};
}

/// Whether E's name table lists the values 0, 1, ..., N-1 in order (where an enum indexes a
/// table or its order is compared, a static_assert says so).
template <class E>
constexpr bool abi_dense() {
  int32_t i = 0;
  for (const auto& n : names_of<E>())
    if (abi_value(n.value) != i++) return false;
  return true;
}

/// Whether every value of E's name table appears once (two names for one constant would make
/// from_abi and the id ambiguous).
template <class E>
constexpr bool abi_distinct() {
  const auto& t = names_of<E>();
  for (std::size_t i = 0; i < t.size(); ++i)
    for (std::size_t j = i + 1; j < t.size(); ++j)
      if (t[i].value == t[j].value || t[i].yaml == t[j].yaml) return false;
  return true;
}

/// A mapping from an ABI enum to another vocabulary (a kernel's enum that deliberately differs),
/// one row per enumerator in the name table's order: static_assert(covers(map)).
template <class E, class T, std::size_t N>
using EnumMap = std::array<std::pair<E, T>, N>;

template <class E, class T, std::size_t N>
constexpr bool covers(const EnumMap<E, T, N>& map) {
  const auto& t = names_of<E>();
  if (t.size() != N) return false;
  for (std::size_t i = 0; i < N; ++i)
    if (map[i].first != t[i].value) return false;
  return true;
}

/// The row of e in a covering map.
template <class E, class T, std::size_t N>
constexpr T map_enum(const EnumMap<E, T, N>& map, E e) {
  for (const auto& [from, to] : map)
    if (from == e) return to;
  throw std::invalid_argument("an enumerator missing from its map");  // covers(map) rules it out
}

}  // namespace opcts
