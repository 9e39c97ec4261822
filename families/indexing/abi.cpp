// The indexing problems as the plugin ABI's opcts_scatter_add_params, opcts_index_add_params and
// opcts_index_select_params.
#include "core/abi_impl.hpp"
#include "families/indexing/indexing.hpp"

namespace opcts::indexing {

namespace {

template <class C>
C common(const Problem& p) {
  C c{};
  c.struct_size = sizeof c;
  c.dtype = abi_dtype(p.dtype);
  c.index = abi_dtype(p.index_dtype);
  c.outer = p.outer;
  c.n = p.n;
  c.m = p.m;
  c.inner = p.inner;
  return c;
}

}  // namespace

std::vector<unsigned char> abi_params(const Problem& p) {
  switch (p.op) {
    case Op::scatter_add: return abi_bytes(common<opcts_scatter_add_params>(p));
    case Op::index_add: {
      auto c = common<opcts_index_add_params>(p);
      c.alpha = p.alpha;
      return abi_bytes(c);
    }
    case Op::index_select: return abi_bytes(common<opcts_index_select_params>(p));
  }
  return {};
}

}  // namespace opcts::indexing
