// The varlen layout's problem arithmetic: packed token counts, cu_seqlens and each sequence as
// the dense problem it is (sdpa.hpp, "Varlen").
#include <numeric>

#include "families/sdpa/sdpa.hpp"

namespace opcts::sdpa {

int64_t Problem::total_q() const {
  return packed() ? std::accumulate(seqlens_q.begin(), seqlens_q.end(), int64_t{0}) : batch * seq_q;
}

int64_t Problem::total_k() const {
  if (!packed()) return batch * seq_k;
  return std::accumulate(seqlens_k.begin(), seqlens_k.end(), int64_t{0}) + (varlen() ? batch * pad_k : 0);
}

std::vector<int64_t> cu_seqlens(const std::vector<int64_t>& lens) {
  std::vector<int64_t> cu(lens.size() + 1, 0);
  for (size_t b = 0; b < lens.size(); ++b) cu[b + 1] = cu[b] + lens[b];
  return cu;
}

std::vector<int64_t> cu_seqlens_k(const Problem& p) {
  std::vector<int64_t> rows = p.seqlens_k;
  for (int64_t& r : rows) r += p.pad_k;
  return cu_seqlens(rows);
}

Problem Problem::sequence(int64_t b) const {
  Problem s = *this;
  s.batch = 1;
  if (packed()) {
    s.seq_q = seqlens_q.at(static_cast<size_t>(b));
    s.seq_k = seqlens_k.at(static_cast<size_t>(b));
    s.layout = Layout::bshd;
    s.seqlens_q.clear();
    s.seqlens_k.clear();
    s.page_size = 0;
    s.kv_layout = KvLayout::nhd;
    s.shared_prefix = 0;
    s.pad_k = 0;
    s.corrupt = Corrupt::none;  // the packed inputs' negative case: the sequence itself is whole
  }
  return s;
}

}  // namespace opcts::sdpa
