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

  // The invariance contracts' batch (Family::batch_entries, with_batch): the count field
  // batch_field() names, cut where batch_uncuttable says nothing against it.
  int64_t batch_entries(const Problem& pp, std::string& why) const final {
    if (!batch_field()) return Family::batch_entries(pp, why);
    why = batch_uncuttable(get(pp));
    return why.empty() ? get(pp).*batch_field() : 0;
  }
  ProblemPtr with_batch(const Problem& pp, int64_t entries) const final {
    if (!batch_field()) return Family::with_batch(pp, entries);
    P p = get(pp);
    p.*batch_field() = entries;
    return make_problem(std::move(p));
  }

 protected:
  static const P& get(const Problem& p) { return p.as<P>(); }
  /// The problem's batch count for the invariance contracts (sdpa's batch, scaled_mm's m), or
  /// null: no batch axis. Every input that depends on it must hold one slice per entry along its
  /// leading dimension (Family::batch_entries).
  virtual int64_t P::*batch_field() const { return nullptr; }
  /// Why p's batch cannot be cut (swizzled scales, a column-major A), or "".
  virtual std::string batch_uncuttable(const P&) const { return {}; }
};

}  // namespace opcts
