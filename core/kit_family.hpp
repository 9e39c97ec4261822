// A Family whose YAML parser, id printer and id parser all come from one field table (core/fields.hpp).
#pragma once

#include <string>
#include <string_view>

#include "core/family.hpp"
#include "core/fields.hpp"

namespace opcts {

/// The part of a family that its field table derives; the family adds cost, outputs, inputs
/// and references. P is the family's plain aggregate problem type.
template <class P>
class KitFamily : public Family {
 public:
  /// The problem type's rows (built once; see core/fields.hpp).
  virtual const kit::FieldTable<P>& fields() const = 0;

  ProblemPtr parse(const YAML::Node& n) const final { return make_problem(fields().parse_yaml(n)); }
  std::string problem_id(const Problem& p) const final { return fields().id(p.as<P>()); }
  ProblemPtr parse_id(std::string_view id) const final { return make_problem(fields().parse_id(id)); }
  std::string describe_fields() const final { return fields().describe(); }
  bool equal(const Problem& a, const Problem& b) const final { return a.as<P>() == b.as<P>(); }

 protected:
  static const P& get(const Problem& p) { return p.as<P>(); }
};

}  // namespace opcts
