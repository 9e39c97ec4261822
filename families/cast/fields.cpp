// The cast problem's field table: YAML keys, id tokens and their order.
//
// Ids: FROM_to_TO[_ROUNDING]_OVERFLOW_INPUT, with the e8m0 rounding only for an e8m0fnu target,
// no policy when decoding, and the count glued to `random`:
// "fp16_to_e4m3fn_satfinite_exhaustive", "fp32_to_e8m0fnu_ceil_nonsaturating_edges",
// "fp32_to_e5m2_satfinite_random4000000", "e2m1fn_to_fp32_allcodes".
#include "families/cast/cast.hpp"

namespace opcts::cast {

namespace {

using kit::Choice;
using kit::Field;

Field<Problem> to_field() {
  Field<Problem> f;
  f.key = "to";
  f.doc = "the target dtype (a narrow format, or fp32 when decoding)";
  f.id = "to_DTYPE";
  f.required = true;
  f.read = [](Problem& p, const YAML::Node& m) { p.to = parse_dtype(kit::field_as_scalar(m["to"])); };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    t.emplace_back("to");
    t.emplace_back(name(p.to));
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    if (in.take("'to'") != "to") throw std::invalid_argument("expected FROM_to_TO");
    p.to = parse_dtype(in.take("the target dtype"));
  };
  return f;
}

// e8m0 rounding, written only for e8m0fnu targets (where it is required in the id).
Field<Problem> rounding_field() {
  Field<Problem> f = kit::enum_choice<Problem>("rounding", &Problem::rounding);
  f.doc += " (e8m0fnu targets only; default rne)";
  f.write = [w = f.write](const Problem& p, std::vector<std::string>& t) {
    if (p.to == DType::e8m0fnu) w(p, t);
  };
  f.scan = [s = f.scan](Problem& p, kit::IdReader& in) {
    if (p.to == DType::e8m0fnu) s(p, in);
  };
  return f;
}

// The overflow policy, left out of decoding ids (decoding is exact).
Field<Problem> overflow_field() {
  Field<Problem> f = kit::choice<Problem>(
      "overflow", &Problem::overflow,
      {{Overflow::satfinite, "satfinite", "satfinite"}, {Overflow::nonsaturating, "nonsaturating", "nonsaturating"}});
  f.doc += " (default satfinite)";
  f.write = [w = f.write](const Problem& p, std::vector<std::string>& t) {
    if (!p.decoding()) w(p, t);
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    if (p.decoding()) return;
    if (in.take_seq("satfinite")) p.overflow = Overflow::satfinite;
    else if (in.take_seq("nonsaturating")) p.overflow = Overflow::nonsaturating;
    else throw std::invalid_argument("token '" + in.peek() + "': expected satfinite or nonsaturating");
  };
  return f;
}

// The input set; a random one carries its count in the same token ("random4000000").
Field<Problem> input_field() {
  Field<Problem> f;
  f.key = "input";
  f.doc = "exhaustive | all_codes | edges | random (with count)";
  f.id = "{exhaustive|allcodes|edges|randomN}";
  f.required = true;
  f.read = [](Problem& p, const YAML::Node& m) {
    const std::string s = kit::field_as_scalar(m["input"]);
    if (s == "exhaustive") p.input = Input::exhaustive;
    else if (s == "all_codes" || s == "allcodes") p.input = Input::all_codes;
    else if (s == "edges") p.input = Input::edges;
    else if (s == "random") p.input = Input::random;
    else throw std::invalid_argument("unknown input '" + s + "' (expected exhaustive, all_codes, edges, random)");
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    switch (p.input) {
      case Input::exhaustive: t.emplace_back("exhaustive"); break;
      case Input::all_codes: t.emplace_back("allcodes"); break;
      case Input::edges: t.emplace_back("edges"); break;
      case Input::random: t.push_back("random" + std::to_string(p.count)); break;
    }
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    if (const auto n = in.take_prefixed("random")) {
      p.input = Input::random;
      p.count = kit::parse_int_token(*n);
    } else if (in.take_seq("exhaustive")) {
      p.input = Input::exhaustive;
    } else if (in.take_seq("allcodes")) {
      p.input = Input::all_codes;
    } else if (in.take_seq("edges")) {
      p.input = Input::edges;
    } else {
      throw std::invalid_argument("token '" + in.peek() + "': expected exhaustive, allcodes, edges or randomN");
    }
  };
  return f;
}

Field<Problem> count_field() {
  Field<Problem> f;
  f.key = "count";
  f.doc = "N: how many random inputs, 0 or more (random only; 0: an empty tensor)";
  f.read = [](Problem& p, const YAML::Node& m) {
    if (const YAML::Node v = m["count"]) p.count = kit::field_as_value<int64_t>(v);
  };
  return f;
}

}  // namespace

const kit::FieldTable<Problem>& fields() {
  static const kit::FieldTable<Problem> table(
      "cast",
      {kit::dtype_bare<Problem>("from", &Problem::from, "fp32 | fp16 | bf16, or a narrow format when decoding"),
       to_field(), rounding_field(), overflow_field(), input_field(), count_field()},
      [](const Problem& p) { p.validate(); });
  return table;
}

}  // namespace opcts::cast
