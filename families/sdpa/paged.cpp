// The paged layout's cache geometry (sdpa.hpp, PagedGeometry): pages per sequence, the pages no
// sequence owns, the block table's width, and where a key token lives in the cache.
#include <algorithm>

#include "families/sdpa/sdpa.hpp"

namespace opcts::sdpa {

PagedGeometry paged_geometry(const Problem& p) {
  PagedGeometry g;
  const int64_t ps = std::max<int64_t>(p.page_size, 1);
  g.shared = p.batch > 0 ? p.shared_prefix / ps : 0;
  g.owned = g.shared;
  for (int64_t lk : p.seqlens_k) {
    const int64_t n = (lk + ps - 1) / ps;
    g.pages.push_back(n);
    g.owned += std::max<int64_t>(n - g.shared, 0);
    g.max_pages_per_seq = std::max(g.max_pages_per_seq, n);
  }
  // Unowned pages (NaN) where a kernel that reads a wrong page may land; at least one, so that
  // every unused block-table entry can point at one.
  g.num_pages = g.owned + g.owned / 4 + 1;
  g.max_pages_per_seq = std::max<int64_t>(g.max_pages_per_seq, 1);
  return g;
}

int64_t cache_index(const Problem& p, int64_t page, int64_t slot, int64_t h, int64_t d, int64_t dim) {
  if (p.kv_layout == KvLayout::hnd) return ((page * p.heads_kv + h) * p.page_size + slot) * dim + d;
  return ((page * p.page_size + slot) * p.heads_kv + h) * dim + d;
}

}  // namespace opcts::sdpa
