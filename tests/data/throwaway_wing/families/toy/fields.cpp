// The toy problem's field table: n and shift, always in the id ("n4097_s3", "n1_sm2").
#include "families/toy/toy.hpp"

namespace opcts::toy {

const kit::FieldTable<Problem>& fields() {
  static const kit::FieldTable<Problem> table(
      "toy",
      {kit::int_always<Problem>("n", &Problem::n, "n", "N, the elements of x and y", true),
       kit::int_always<Problem>("shift", &Problem::shift, "s", "N, y = x * 2^N (m for minus in the id)", true)},
      validate);
  return table;
}

}  // namespace opcts::toy
