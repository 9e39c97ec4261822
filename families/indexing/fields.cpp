// The field tables of scatter_add, index_add and index_select: YAML keys, id tokens and their order.
//
// Id: DTYPE_iIDX_[bOUTER_]nN_mM_[hINNER_]DIST, then when they apply ones | positive (fill),
// alphaA (index_add), misalign, badpastend | badneg | badwrap32 and expect_index:
// "fp32_i64_n100_m1305301_uniform", "bf16_i64_n128256_m8192_h128_zipf",
// "fp16_i32_n33_m64_alllast_ones_misalign", "fp32_i64_n37_m301_uniform_badneg_expect_index".
// One problem type serves the three families; each table stamps its family's op on the
// problem it reads (through its first row) and refuses a problem of another op.
#include "families/indexing/indexing.hpp"

namespace opcts::indexing {

namespace {

using kit::Choice;
using kit::Field;

// The value dtype, which also stamps the table's op on the problem (every table starts with it).
Field<Problem> dtype_row(Op op) {
  Field<Problem> f = kit::dtype_bare<Problem>("dtype", &Problem::dtype, "fp64 | fp32 | fp16 | bf16 | int32 | int64");
  f.read = [read = f.read, op](Problem& p, const YAML::Node& m) {
    p.op = op;
    read(p, m);
  };
  f.scan = [scan = f.scan, op](Problem& p, kit::IdReader& in) {
    p.op = op;
    scan(p, in);
  };
  return f;
}

Field<Problem> index_row() {
  Field<Problem> f = kit::choice<Problem>("index", &Problem::index_dtype,
                                          {{DType::int32, "int32", "i32"}, {DType::int64, "int64", "i64"}});
  f.doc += " (default int64)";
  return f;
}

Field<Problem> dist_row() {
  return kit::choice<Problem>("dist", &Problem::dist,
                              {{Dist::uniform, "uniform", "uniform"},
                               {Dist::sorted, "sorted", "sorted"},
                               {Dist::all_first, "all_first", "allfirst"},
                               {Dist::all_last, "all_last", "alllast"},
                               {Dist::zipf, "zipf", "zipf"},
                               {Dist::routed, "routed", "routed"},
                               {Dist::strided, "strided", "strided"}},
                              true);
}

Field<Problem> fill_row() {
  return kit::choice<Problem>(
      "fill", &Problem::fill,
      {{Fill::normal, "normal", ""}, {Fill::ones, "ones", "ones"}, {Fill::positive, "positive", "positive"}});
}

// alpha, in the id as alpha<number> when it is not 1.
Field<Problem> alpha_row() {
  return kit::num_when<Problem>(
      "alpha", &Problem::alpha, "alpha", "A",
      "A: the factor of source (default 1; at most 8 significant bits, a power of two for fp64)",
      [](const Problem& p) { return p.alpha != 1; });
}

Field<Problem> bad_index_row() {
  Field<Problem> f = kit::choice<Problem>("bad_index", &Problem::bad_index,
                                          {{BadIndex::none, "none", ""},
                                           {BadIndex::past_end, "past_end", "badpastend"},
                                           {BadIndex::negative, "negative", "badneg"},
                                           {BadIndex::wraps32, "wraps32", "badwrap32"}});
  f.doc += " (a negative case, with expect_error: index)";
  return f;
}

kit::FieldTable<Problem> make_table(Op op) {
  std::vector<Field<Problem>> rows = {
      dtype_row(op),
      index_row(),
      kit::int_unless<Problem, int64_t>("outer", &Problem::outer, 1, "b",
                                        "B: the size of the dims before dim (default 1)"),
      kit::int_always<Problem>("n", &Problem::n, "n",
                               op == Op::index_select ? "N: input's size along dim" : "N: self's size along dim", true),
      kit::int_always<Problem>("m", &Problem::m, "m",
                               op == Op::scatter_add ? "M: index's and src's size along dim" : "M: the index's length",
                               true),
      kit::int_unless<Problem, int64_t>("inner", &Problem::inner, 1, "h",
                                        "H: the size of the dims after dim (default 1)"),
      dist_row(),
  };
  if (op != Op::index_select) rows.push_back(fill_row());
  if (op == Op::index_add) rows.push_back(alpha_row());
  rows.push_back(kit::flag<Problem>("misalign", &Problem::misalign, "misalign"));
  rows.push_back(bad_index_row());
  rows.push_back(kit::expect_argument<Problem>(&Problem::expect_error, "index"));
  return kit::FieldTable<Problem>(std::string(to_string(op)), std::move(rows), [op](const Problem& p) {
    if (p.op != op)
      throw std::invalid_argument("a " + std::string(to_string(p.op)) + " problem in the " +
                                  std::string(to_string(op)) + " table");
    p.validate();
  });
}

}  // namespace

const kit::FieldTable<Problem>& fields(Op op) {
  static const kit::FieldTable<Problem> scatter = make_table(Op::scatter_add);
  static const kit::FieldTable<Problem> add = make_table(Op::index_add);
  static const kit::FieldTable<Problem> select = make_table(Op::index_select);
  switch (op) {
    case Op::scatter_add: return scatter;
    case Op::index_add: return add;
    case Op::index_select: return select;
  }
  return scatter;
}

}  // namespace opcts::indexing
