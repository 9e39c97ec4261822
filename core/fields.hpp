// The family kit: one typed field table per problem type, from which the YAML parser, the case
// id printer and parser, the field list of error messages and `opcts list --fields` all derive.
//
// A row names one YAML key and says how its value reaches the problem's members (`read`, given
// the whole map, so that alias forms can check their rivals), which
// id tokens it writes (`write`) and how it reads them back (`scan`). Rows are listed in id order;
// `read` runs in the same order, so a row may look at members set by earlier rows (a default
// that depends on the recipe, a token written only for one output dtype). A row without a key is
// id-only; one without `write`/`scan` is YAML-only (an alias form such as `nk: {n, k}`).
//
// Id tokens are joined with '_' and use only [a-z0-9]: numbers through num_token (shortest
// round-trip decimal, 'p' for '.', 'm' for '-'), so every id is a valid GoogleTest name. parse_id
// re-renders what it read and refuses any id that is not the canonical spelling of its problem,
// so the round trip id → problem → id is exact for every family.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/abi_enum.hpp"
#include "core/yaml_util.hpp"
#include "numerics/dtype.hpp"

namespace opcts::kit {

/// The tokens of an id's problem part, read left to right. Errors name the token.
class IdReader {
 public:
  explicit IdReader(std::string_view id);
  bool done() const { return pos_ >= tokens_.size(); }
  /// The next token ("" when done).
  const std::string& peek() const;
  /// Consumes the next token; throws std::invalid_argument saying what was expected when done.
  std::string take(std::string_view what);
  /// Consumes the next tokens when they spell `name` (which may hold '_'); true if it did.
  bool take_seq(std::string_view name);
  /// The rest of the next token after `prefix`, consumed, when the token starts with it and
  /// has more after it; nullopt (nothing consumed) otherwise.
  std::optional<std::string> take_prefixed(std::string_view prefix);
  /// Everything left, joined with '_' (for a trailing free-form token such as an argument name).
  std::string take_rest();
  size_t position() const { return pos_; }

 private:
  std::vector<std::string> tokens_;
  size_t pos_ = 0;
};

/// Shortest round-trip decimal of x with 'p' for '.', 'm' for '-' and no '+'.
std::string num_token(double x);
/// Inverse of num_token; throws std::invalid_argument.
double parse_num_token(std::string_view t);
/// Decimal integer with 'm' for a leading '-'.
std::string int_token(int64_t v);
/// Inverse of int_token (no sign other than a leading 'm'); throws std::invalid_argument.
int64_t parse_int_token(std::string_view t);

/// One row of a field table (see the file comment).
template <class P>
struct Field {
  std::string key;  // YAML key; "" for an id-only row
  std::string doc;  // the value's form, for errors and `opcts list --fields` ("N or {q: N, kv: N}")
  std::string id;   // how the id spells it, for `opcts list --fields` ("hqN_hkvN"; "" if none)
  bool required = false;
  std::function<void(P&, const YAML::Node&)> read;                 // the problem's whole map
  std::function<void(const P&, std::vector<std::string>&)> write;  // appends this row's tokens
  std::function<void(P&, IdReader&)> scan;                         // reads them back (may read none)
};

/// A problem type's rows and what derives from them.
template <class P>
class FieldTable {
 public:
  /// `validate` checks the whole problem (throws std::invalid_argument naming the field);
  /// `check_yaml`, when given, checks what only a YAML problem says (e.g. sdpa's
  /// expect_error, which the id leaves to the argument contract), after validate.
  FieldTable(std::string family, std::vector<Field<P>> rows, std::function<void(const P&)> validate,
             std::function<void(const P&, const YAML::Node&)> check_yaml = {})
      : family_(std::move(family)),
        rows_(std::move(rows)),
        validate_(std::move(validate)),
        check_yaml_(std::move(check_yaml)) {}

  /// Parses a YAML map: unknown keys and missing required ones are errors listing the
  /// fields; each row reads its value; then the problem is validated. Throws
  /// std::runtime_error naming the field (the catalog loader adds file and line).
  P parse_yaml(const YAML::Node& n) const {
    if (!n.IsMap()) throw std::runtime_error("a " + family_ + " problem must be a map of " + key_list());
    for (const auto& kv : n) {
      const auto key = kv.first.as<std::string>();
      bool known = false;
      for (const auto& r : rows_) known = known || (!r.key.empty() && r.key == key);
      if (!known) {
        std::vector<std::string> keys;
        for (const auto& r : rows_)
          if (!r.key.empty()) keys.push_back(r.key);
        const std::string near = closest_key(key, keys);
        throw std::runtime_error("unknown " + family_ + " field '" + key + "'" +
                                 (near.empty() ? "" : " (did you mean '" + near + "'?)") + " (expected " + key_list() +
                                 ")");
      }
    }
    P p{};
    for (const auto& r : rows_) {
      if (r.key.empty() || !r.read) continue;
      if (r.required && !n[r.key]) throw std::runtime_error("missing field '" + r.key + "' (" + r.doc + ")");
      try {
        r.read(p, n);
      } catch (const YAML::Exception& e) {
        throw std::runtime_error("field '" + r.key + "': " + e.msg + " (expected " + r.doc + ")");
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error("field '" + r.key + "': " + e.what());
      }
    }
    try {
      validate_(p);
      if (check_yaml_) check_yaml_(p, n);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
    return p;
  }

  /// The problem part of a case id: every row's tokens in table order, joined with '_'.
  std::string id(const P& p) const {
    std::vector<std::string> tokens;
    for (const auto& r : rows_)
      if (r.write) r.write(p, tokens);
    std::string out;
    for (const auto& t : tokens) out += (out.empty() ? "" : "_") + t;
    return out;
  }

  /// Inverse of id(); throws std::invalid_argument naming the token it cannot read, or the
  /// canonical id when `text` is another spelling of a valid problem.
  P parse_id(std::string_view text) const {
    const std::string where = family_ + " id '" + std::string(text) + "'";
    IdReader in(text);
    P p{};
    try {
      for (const auto& r : rows_)
        if (r.scan) r.scan(p, in);
      if (!in.done()) throw std::invalid_argument("unexpected token '" + in.peek() + "' (expected " + id_form() + ")");
      validate_(p);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + ": " + e.what());
    }
    const std::string canonical = id(p);
    if (canonical != text)
      throw std::invalid_argument(where + " is not canonical: the problem's id is '" + canonical + "'");
    return p;
  }

  /// "dtype, batch, heads, ...": the YAML keys in table order.
  std::string key_list() const {
    std::string s;
    for (const auto& r : rows_)
      if (!r.key.empty()) s += (s.empty() ? "" : ", ") + r.key;
    return s;
  }

  /// The id's form, token patterns in order ("DTYPE_bN_hqN_hkvN...").
  std::string id_form() const {
    std::string s;
    for (const auto& r : rows_)
      if (!r.id.empty()) s += (s.empty() ? "" : "_") + r.id;
    return s;
  }

  /// One line per YAML field: key, required or not, the value's form and its id spelling.
  std::string describe() const {
    std::string s = family_ + " fields (YAML key: value form; id spelling):\n";
    for (const auto& r : rows_) {
      if (r.key.empty()) continue;
      s += "  " + r.key + (r.required ? " (required)" : "") + ": " + r.doc;
      s += r.id.empty() ? "; not in the id\n" : "; id " + r.id + "\n";
    }
    s += "id: " + id_form() + "\n";
    return s;
  }

  const std::string& family() const { return family_; }

 private:
  std::string family_;
  std::vector<Field<P>> rows_;
  std::function<void(const P&)> validate_;
  std::function<void(const P&, const YAML::Node&)> check_yaml_;
};

// YAML value helpers (the node is the field's value, not its map).

/// The scalar text of a value; throws std::invalid_argument when it is a map or list (the
/// table's parser prefixes the field's name; `what` names a nested key, "" for the field itself).
inline std::string field_as_scalar(const YAML::Node& v, const std::string& what = "") {
  if (!v.IsScalar())
    throw std::invalid_argument((what.empty() ? "" : what + ": ") + "expected a single value, not " + one_line(v));
  return v.Scalar();
}

/// A value as T; the error says what it holds and what was expected ("bad conversion" does not).
template <class T>
T field_as_value(const YAML::Node& v, const std::string& what = "") {
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    throw std::invalid_argument((what.empty() ? "" : what + ": ") + "cannot read '" +
                                (v.IsScalar() ? v.Scalar() : one_line(v)) + "' as " +
                                (std::is_same_v<T, bool>       ? "true or false"
                                 : std::is_integral_v<T>       ? "an integer"
                                 : std::is_floating_point_v<T> ? "a number"
                                                               : "text"));
  }
}

// --- Row builders for the common kinds -----------------------------------------------------

/// One (value, YAML name, id token) of an enumerated field; an empty id token writes nothing
/// (the default, left out of ids).
template <class E>
struct Choice {
  E value;
  std::string yaml;
  std::string id;
};

/// The YAML names of choices, "a | b | c".
template <class E>
std::string choice_doc(const std::vector<Choice<E>>& cs) {
  std::string s;
  for (const auto& c : cs) s += (s.empty() ? "" : " | ") + c.yaml;
  return s;
}

/// An enumerated member. Id: the choice's token, left out for the choice whose token is empty
/// (the default); with no such choice the id always holds one. YAML names and tokens may hold '_'.
template <class P, class E>
Field<P> choice(std::string key, E P::*member, std::vector<Choice<E>> choices, bool required = false) {
  Field<P> f;
  f.key = key;
  f.doc = choice_doc(choices);
  bool optional = false;
  for (const auto& c : choices) {
    if (!c.id.empty()) f.id += (f.id.empty() ? "" : "|") + c.id;
    optional = optional || c.id.empty();
  }
  if (optional) f.id = "[" + f.id + "]";
  else if (f.id.find('|') != std::string::npos) f.id = "{" + f.id + "}";
  f.required = required;
  f.read = [key, member, choices](P& p, const YAML::Node& m) {
    const YAML::Node v = m[key];
    if (!v) return;
    const auto s = field_as_scalar(v);
    for (const auto& c : choices)
      if (c.yaml == s) {
        p.*member = c.value;
        return;
      }
    throw std::invalid_argument("unknown value '" + s + "' (expected " + choice_doc(choices) + ")");
  };
  f.write = [member, choices](const P& p, std::vector<std::string>& t) {
    for (const auto& c : choices)
      if (c.value == p.*member) {
        if (!c.id.empty()) t.push_back(c.id);
        return;
      }
  };
  f.scan = [member, choices](P& p, IdReader& in) {
    // Longest id first, so "causal_lr" is not read as "causal".
    const Choice<E>* best = nullptr;
    for (const auto& c : choices)
      if (!c.id.empty() && (!best || c.id.size() > best->id.size())) {
        IdReader probe = in;
        if (probe.take_seq(c.id)) best = &c;
      }
    if (best) {
      in.take_seq(best->id);
      p.*member = best->value;
      return;
    }
    for (const auto& c : choices)
      if (c.id.empty()) {
        p.*member = c.value;
        return;
      }
    std::string ids;
    for (const auto& c : choices) ids += (ids.empty() ? "" : ", ") + c.id;
    throw std::invalid_argument("token '" + in.peek() + "': expected " + ids);
  };
  return f;
}

/// A negative case's planted defect, YAML key `defect`: the choice with an empty token is the
/// default (no defect, left out of ids); each other one is in the id as `defect_<token>`, last
/// but for expect_error (id pattern [defect_D]).
template <class P, class E>
Field<P> defect_choice(E P::*member, std::vector<Choice<E>> choices) {
  for (auto& c : choices)
    if (!c.id.empty()) c.id = "defect_" + c.id;
  Field<P> f = choice<P, E>("defect", member, std::move(choices));
  f.id = "[defect_D]";
  return f;
}

/// The choices of an ABI enum, from its one name table (core/abi_enum.hpp), in the table's order.
template <class E>
std::vector<Choice<E>> choices_of() {
  std::vector<Choice<E>> cs;
  for (const auto& n : names_of<E>()) cs.push_back({n.value, std::string(n.yaml), std::string(n.id)});
  return cs;
}

/// An enumerated member of an ABI enum: choice() over the enum's name table.
template <class P, class E>
Field<P> enum_choice(std::string key, E P::*member, bool required = false) {
  return choice<P, E>(std::move(key), member, choices_of<E>(), required);
}

/// A dtype member written as its bare name (id token = the dtype's name).
template <class P>
Field<P> dtype_bare(std::string key, DType P::*member, std::string doc, bool required = true) {
  Field<P> f;
  f.key = key;
  f.doc = std::move(doc);
  f.id = "DTYPE";
  f.required = required;
  f.read = [key, member](P& p, const YAML::Node& m) {
    if (const YAML::Node v = m[key]) p.*member = parse_dtype(field_as_scalar(v));
  };
  f.write = [member](const P& p, std::vector<std::string>& t) { t.emplace_back(name(p.*member)); };
  f.scan = [member](P& p, IdReader& in) { p.*member = parse_dtype(in.take("a dtype")); };
  return f;
}

/// An integer member always in the id as `<prefix><N>` ('m' for minus).
template <class P>
Field<P> int_always(std::string key, int64_t P::*member, std::string prefix, std::string doc, bool required) {
  Field<P> f;
  f.key = key;
  f.doc = std::move(doc);
  f.id = prefix + "N";
  f.required = required;
  f.read = [key, member](P& p, const YAML::Node& m) {
    if (const YAML::Node v = m[key]) p.*member = field_as_value<int64_t>(v);
  };
  f.write = [member, prefix](const P& p, std::vector<std::string>& t) { t.push_back(prefix + int_token(p.*member)); };
  f.scan = [member, prefix](P& p, IdReader& in) {
    const auto rest = in.take_prefixed(prefix);
    if (!rest) throw std::invalid_argument("token '" + in.peek() + "': expected " + prefix + "N");
    p.*member = parse_int_token(*rest);
  };
  return f;
}

/// An integer member always in the id as `<key><N>`, given in YAML under `key` or, with its
/// partner, as `alias: {a: A, b: B}` (pair_alias: a grid axis value that sets both, such as a
/// weight's shape `nk: {n: 4096, k: 4096}`); exactly one of the two forms.
template <class P>
Field<P> int_paired(std::string key, int64_t P::*member, std::string alias, std::string partner) {
  Field<P> f =
      int_always<P>(key, member, key, "N (or give " + key + " and " + partner + " together as " + alias + ")", false);
  f.read = [key, member, alias, partner](P& p, const YAML::Node& m) {
    const std::string both = alias + ": {" + key + ", " + partner + "}";
    if (m[alias]) {
      if (m[key])
        throw std::invalid_argument("give " + key + " and " + partner + " either alone or as " + both + ", not both");
      return;
    }
    if (!m[key]) throw std::invalid_argument("missing (give " + key + ", or " + both + ")");
    p.*member = field_as_value<int64_t>(m[key]);
  };
  return f;
}

/// The YAML-only row `alias: {a: A, b: B}` that sets two int_paired members at once.
template <class P>
Field<P> pair_alias(std::string alias, std::string key_a, int64_t P::*a, std::string key_b, int64_t P::*b) {
  Field<P> f;
  f.key = alias;
  f.doc = "{" + key_a + ": N, " + key_b + ": N}, in place of " + key_a + " and " + key_b;
  f.read = [alias, key_a, a, key_b, b](P& p, const YAML::Node& m) {
    const YAML::Node v = m[alias];
    if (!v) return;
    if (!v.IsMap() || !v[key_a] || !v[key_b] || v.size() != 2)
      throw std::invalid_argument("expected {" + key_a + ": N, " + key_b + ": N}");
    p.*a = field_as_value<int64_t>(v[key_a], key_a);
    p.*b = field_as_value<int64_t>(v[key_b], key_b);
  };
  return f;
}

/// An integer member in the id as `<prefix><N>` only when it differs from `def`.
template <class P, class I>
Field<P> int_unless(std::string key, I P::*member, I def, std::string prefix, std::string doc) {
  Field<P> f;
  f.key = key;
  f.doc = std::move(doc);
  f.id = "[" + prefix + "N]";
  f.read = [key, member](P& p, const YAML::Node& m) {
    if (const YAML::Node v = m[key]) p.*member = static_cast<I>(field_as_value<int64_t>(v));
  };
  f.write = [member, def, prefix](const P& p, std::vector<std::string>& t) {
    if (p.*member != def) t.push_back(prefix + int_token(static_cast<int64_t>(p.*member)));
  };
  f.scan = [member, prefix](P& p, IdReader& in) {
    if (const auto rest = in.take_prefixed(prefix)) p.*member = static_cast<I>(parse_int_token(*rest));
  };
  return f;
}

/// A real-number member in the id as `<prefix><X>` (`letter` names X in the id pattern) only
/// when `shown(p)` holds: when it is not its default, or where the problem needs it spelled out.
template <class P>
Field<P> num_when(std::string key, double P::*member, std::string prefix, const std::string& letter, std::string doc,
                  std::function<bool(const P&)> shown) {
  Field<P> f;
  f.key = key;
  f.doc = std::move(doc);
  f.id = "[" + prefix + letter + "]";
  f.read = [key, member](P& p, const YAML::Node& m) {
    if (const YAML::Node v = m[key]) p.*member = field_as_value<double>(v);
  };
  f.write = [member, prefix, shown](const P& p, std::vector<std::string>& t) {
    if (shown(p)) t.push_back(prefix + num_token(p.*member));
  };
  f.scan = [member, prefix](P& p, IdReader& in) {
    if (const auto rest = in.take_prefixed(prefix)) p.*member = parse_num_token(*rest);
  };
  return f;
}

/// A boolean member written as `token` when true.
template <class P>
Field<P> flag(std::string key, bool P::*member, std::string token) {
  Field<P> f;
  f.key = key;
  f.doc = "true | false";
  f.id = "[" + token + "]";
  f.read = [key, member](P& p, const YAML::Node& m) {
    if (const YAML::Node v = m[key]) p.*member = field_as_value<bool>(v);
  };
  f.write = [member, token](const P& p, std::vector<std::string>& t) {
    if (p.*member) t.push_back(token);
  };
  f.scan = [member, token](P& p, IdReader& in) { p.*member = in.take_seq(token); };
  return f;
}

/// A negative case's expected refusal: `expect_error: ARG` names the argument every impl must
/// refuse (Family::expected_error); in the id as `expect_<ARG>`, last, since ARG may hold '_'.
/// `arguments` lists the names, for the field's doc.
template <class P>
Field<P> expect_argument(std::string P::*member, const std::string& arguments) {
  Field<P> f;
  f.key = "expect_error";
  f.doc = "the argument impls must refuse (" + arguments + "): a negative case";
  f.id = "[expect_ARGUMENT]";
  f.read = [member](P& p, const YAML::Node& m) {
    if (const YAML::Node v = m["expect_error"]) p.*member = field_as_scalar(v);
  };
  f.write = [member](const P& p, std::vector<std::string>& t) {
    if (!(p.*member).empty()) t.push_back("expect_" + p.*member);
  };
  f.scan = [member](P& p, IdReader& in) {
    if (!in.take_seq("expect")) return;
    p.*member = in.take_rest();
    if ((p.*member).empty()) throw std::invalid_argument("expect_ needs an argument name");
  };
  return f;
}

}  // namespace opcts::kit
