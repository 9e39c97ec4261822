// The int4_mm problem as the plugin ABI's opcts_int4_mm_params (include/opcts/plugin.h).
#include "core/abi_impl.hpp"
#include "families/int4_mm/int4_mm.hpp"

namespace opcts::int4_mm {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_int4_mm_params c{};
  c.struct_size = sizeof c;
  c.dtype = abi_dtype(p.dtype);
  c.m = p.m;
  c.n = p.n;
  c.k = p.k;
  c.group_size = p.group;
  switch (p.format) {
    case Format::tinygemm: c.format = OPCTS_INT4_TINYGEMM; break;
    case Format::tinygemm_unpacked: c.format = OPCTS_INT4_TINYGEMM_UNPACKED; break;
    case Format::awq: c.format = OPCTS_INT4_AWQ; break;
    case Format::gptq: c.format = OPCTS_INT4_GPTQ; break;
    case Format::q4_0: c.format = OPCTS_INT4_Q4_0; break;
  }
  c.inner_k_tiles = p.inner_k_tiles;
  return abi_bytes(c);
}

}  // namespace opcts::int4_mm
