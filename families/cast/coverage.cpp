// The edge classes of docs/coverage.md that cast's problems reach (`opcts list --coverage`).
// What each input kind holds (cast.hpp): `edges` the target's representable values with their
// fp32 neighbours, every tie and one ulp either side, subnormals, half the smallest subnormal,
// the overflow thresholds, ±0, ±Inf and NaN; `exhaustive` every fp16 or bf16 code, which holds
// the narrow formats' ties, subnormals, zeros and specials too; `all_codes` every code of the
// narrow format decoded; `random` random bit patterns (±Inf, NaN, far past every maximum) and
// log-uniform values in the target's range.
#include <string>
#include <vector>

#include "families/cast/cast.hpp"

namespace opcts::cast {

namespace {

// The narrow side of the conversion: the target when encoding, the source when decoding.
DType narrow(const Problem& p) { return p.decoding() ? p.from : p.to; }

bool is_fnuz(DType t) { return t == DType::e4m3fnuz || t == DType::e5m2fnuz; }

}  // namespace

std::vector<std::string> edge_classes() {
  return {"overflow and saturation",      "tie and double rounding", "subnormals",    "signed zero and FNUZ NaN",
          "NaN/Inf through block scales", "scale rounding mode",     "partial tiles", "zero-size dimensions"};
}

std::vector<std::string> edge_classes_of(const Problem& p) {
  std::vector<std::string> out;
  const int64_t n = input_count(p);
  const bool encode = !p.decoding();
  const bool structured = p.input != Input::random;  // edges, exhaustive or all_codes: every special
  const DType t = narrow(p);
  const DTypeInfo& info = dtype_info(t);
  if (encode && n > 0) out.push_back("overflow and saturation");
  if (encode && (p.input == Input::edges || p.input == Input::exhaustive)) out.push_back("tie and double rounding");
  if (structured && n > 0 && !info.is_integer && info.format.mantissa_bits > 0) out.push_back("subnormals");
  if (structured && n > 0 && is_fnuz(t)) out.push_back("signed zero and FNUZ NaN");
  if (structured && n > 0 && t == DType::e8m0fnu) out.push_back("NaN/Inf through block scales");
  if (encode && p.to == DType::e8m0fnu) out.push_back("scale rounding mode");
  // The CUDA kernels run 256 threads a block (families/cast/cuda/cast_cvt.cu), two elements a
  // byte for the 4-bit formats: a count off those leaves the last block or byte partly used.
  if (n % 256 != 0 || (info.bits == 4 && n % 2 != 0)) out.push_back("partial tiles");
  if (n == 0) out.push_back("zero-size dimensions");
  return out;
}

}  // namespace opcts::cast
