// The edge classes of docs/coverage.md that sdpa's problems reach (`opcts list --coverage`).
#include <algorithm>
#include <string>
#include <vector>

#include "families/sdpa/sdpa.hpp"

namespace opcts::sdpa {

std::vector<std::string> edge_classes() {
  return {"fully-masked row",
          "masked-value isolation",
          "extreme logits",
          "partial tiles",
          "causal alignment",
          "window bounds",
          "chunk boundaries",
          "sink-only row",
          "GQA ratio",
          "GQA ratio not a power of two",
          "zero-size dimensions",
          "launch-grid limits",
          "32-bit offset overflow",
          "strides and alignment",
          "overflow and saturation",
          "backward",
          "ragged batch",
          "empty sequence in a batch",
          "padding rows between sequences",
          "partial last page",
          "shared prefix pages",
          "32,768 pages or more"};
}

std::vector<std::string> edge_classes_of(const Problem& p) {
  if (p.packed()) {
    // A packed batch reaches what its sequences reach, as dense problems, and its own classes:
    // sequences of different lengths (boundaries off a tile, alignments per sequence) and a
    // sequence with no query or no key between others.
    std::vector<std::string> seen;
    for (int64_t b = 0; b < p.batch; ++b)
      for (std::string& c : edge_classes_of(p.sequence(b))) seen.push_back(std::move(c));
    if (p.seqlens_q != std::vector<int64_t>(p.seqlens_q.size(), p.seq_q) ||
        p.seqlens_k != std::vector<int64_t>(p.seqlens_k.size(), p.seq_k))
      seen.push_back("ragged batch");
    for (int64_t b = 0; b < p.batch; ++b)
      if (p.seqlens_q[b] == 0 || p.seqlens_k[b] == 0) seen.push_back("empty sequence in a batch");
    // Rows after a sequence's keys that its segment of cu_seqlens_k holds but seqused_k excludes.
    if (p.varlen() && p.pad_k > 0 && p.batch > 0) seen.push_back("padding rows between sequences");
    if (p.paged()) {
      // A sequence whose keys end inside a page (its tail slots must not be read), and block
      // indices past 2^15 (a 16-bit page index, or a table read as int16, overflows there).
      for (int64_t lk : p.seqlens_k)
        if (lk % p.page_size != 0) seen.push_back("partial last page");
      const PagedGeometry g = paged_geometry(p);
      if (g.num_pages >= 32768) seen.push_back("32,768 pages or more");
      if (g.shared > 0 && p.batch > 1) seen.push_back("shared prefix pages");
      const double cache = static_cast<double>(g.num_pages) * p.page_size * p.heads_kv * p.head_dim;
      if (cache >= 0x1p31) seen.push_back("32-bit offset overflow");
    }
    std::vector<std::string> out;
    for (const std::string& c : edge_classes())
      if (std::find(seen.begin(), seen.end(), c) != seen.end()) out.push_back(c);
    return out;
  }
  std::vector<std::string> out;
  bool empty_row = false;
  for (int64_t i = 0; i < p.seq_q && !empty_row; ++i) empty_row = p.keys_of_row(i) == 0;
  if (empty_row && p.seq_k > 0) out.push_back("fully-masked row");
  if (p.poison_masked) out.push_back("masked-value isolation");
  // Logits far from the 1/√D scale's: a softcap, or a scale that makes rows near one-hot.
  if (p.softcap > 0 || p.effective_scale() >= 1) out.push_back("extreme logits");
  // A 64-key or 64-row tile (the flash kernels' blocks) left partial, or a head dim that is
  // not a power of two.
  const bool pow2_d = p.head_dim > 0 && (p.head_dim & (p.head_dim - 1)) == 0;
  if (p.seq_q % 64 != 0 || p.seq_k % 64 != 0 || !pow2_d) out.push_back("partial tiles");
  if (p.mask != Mask::none && p.seq_q != p.seq_k) out.push_back("causal alignment");
  if (p.window_left >= 0 || p.window_right >= 0) out.push_back("window bounds");
  // Chunked-local attention over more keys than a chunk: some row's range is cut at a chunk's first key.
  if (p.chunk > 0 && p.seq_k > p.chunk) out.push_back("chunk boundaries");
  // A row whose softmax holds the sink alone (no key, or every key masked by the attn_mask's rows
  // i ≡ 3 mod 8): O = 0 and lse = sink, where a row without a sink has lse = -inf.
  if (p.sinks && p.seq_q > 0 &&
      ((empty_row && p.seq_k > 0) || (p.mask_tensor != MaskTensor::none && p.mask_per_query && p.seq_q > 3)))
    out.push_back("sink-only row");
  if (p.heads_kv > 0 && p.heads_q != p.heads_kv && p.heads_q % p.heads_kv == 0) {
    out.push_back("GQA ratio");
    const int64_t r = p.heads_q / p.heads_kv;
    if ((r & (r - 1)) != 0) out.push_back("GQA ratio not a power of two");
  }
  if (p.batch == 0 || p.seq_q == 0 || p.seq_k == 0) out.push_back("zero-size dimensions");
  if (p.batch * p.heads_q > 65535) out.push_back("launch-grid limits");
  const double q = static_cast<double>(p.batch) * p.heads_q * p.seq_q * p.head_dim;
  const double scores = static_cast<double>(p.seq_q) * p.seq_k;
  if (q >= 0x1p31 || (p.mask_tensor != MaskTensor::none && scores >= 0x1p32)) out.push_back("32-bit offset overflow");
  if (p.layout == Layout::bshd || p.head_dim % 8 != 0 || p.head_dim_v % 8 != 0) out.push_back("strides and alignment");
  // An fp8 O whose o_scale is not the default's (which keeps |O·o_scale| well inside 448): the
  // catalog gives one only where O·o_scale passes 448 (cases/sdpa_fp8.yaml fp8_out_saturating).
  if (p.fp8_out && p.fp8_out_scale != static_cast<int64_t>(kFp8OutScale)) out.push_back("overflow and saturation");
  if (p.direction == Direction::backward) out.push_back("backward");
  return out;
}

}  // namespace opcts::sdpa
