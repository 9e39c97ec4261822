// cast problems: validation, ids and the number of values a problem converts.
#include <charconv>
#include <stdexcept>

#include "families/cast/cast.hpp"

namespace opcts::cast {

namespace {

bool is_wide(DType t) { return t == DType::fp32 || t == DType::fp16 || t == DType::bf16; }
bool is_narrow(DType t) { return !is_wide(t) && t != DType::fp64; }
bool has_overflow_code(DType t) {
  const auto& i = dtype_info(t);
  return !i.is_integer && i.format.specials != Specials::finite;
}

}  // namespace

bool Problem::decoding() const { return is_narrow(from); }

void Problem::validate() const {
  if (decoding()) {
    if (to != DType::fp32)
      throw std::invalid_argument("decoding a narrow format goes to fp32, not " + std::string(name(to)));
    if (input != Input::all_codes) throw std::invalid_argument("decoding takes input all_codes");
    return;
  }
  if (!is_wide(from)) throw std::invalid_argument("from must be fp32, fp16, bf16 or a narrow format");
  if (!is_narrow(to)) throw std::invalid_argument("to must be a narrow format when from is " + std::string(name(from)));
  if (overflow == Overflow::nonsaturating && !has_overflow_code(to))
    throw std::invalid_argument(std::string(name(to)) + " has no Inf or NaN code: only overflow satfinite applies");
  if (to != DType::e8m0fnu && rounding != ScaleRounding::rne)
    throw std::invalid_argument("rounding applies to e8m0fnu targets only (others round to nearest even)");
  if (input == Input::exhaustive && from == DType::fp32)
    throw std::invalid_argument("exhaustive input needs a 16-bit from (fp16, bf16)");
  if (input == Input::all_codes) throw std::invalid_argument("all_codes is for decoding a narrow from");
  if (input != Input::exhaustive && from != DType::fp32)
    throw std::invalid_argument("edges and random inputs are fp32 values (from: fp32)");
  if (input == Input::random && count < 0) throw std::invalid_argument("random input needs a count (0 or more)");
}

std::string problem_id(const Problem& p) { return fields().id(p); }
Problem parse_problem_id(std::string_view id) { return fields().parse_id(id); }

int64_t input_count(const Problem& p) {
  switch (p.input) {
    case Input::exhaustive:
    case Input::all_codes: return int64_t{1} << dtype_info(p.from).bits;
    case Input::edges: return static_cast<int64_t>(edge_values(p.to).size());
    case Input::random: return p.count;
  }
  return 0;
}

}  // namespace opcts::cast
