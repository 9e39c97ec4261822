// The indexing problems as the plugin ABI's opcts_scatter_add_params, opcts_index_add_params and opcts_index_select_params.
#include <cstring>

#include "core/abi_impl.hpp"
#include "refimpl/indexing.hpp"

namespace opcts::indexing {

namespace {

template <class C>
std::vector<unsigned char> bytes_of(const C& c) {
  std::vector<unsigned char> b(sizeof c);
  std::memcpy(b.data(), &c, sizeof c);
  return b;
}

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
    case Op::scatter_add: return bytes_of(common<opcts_scatter_add_params>(p));
    case Op::index_add: {
      auto c = common<opcts_index_add_params>(p);
      c.alpha = p.alpha;
      return bytes_of(c);
    }
    case Op::index_select: return bytes_of(common<opcts_index_select_params>(p));
  }
  return {};
}

}  // namespace opcts::indexing
