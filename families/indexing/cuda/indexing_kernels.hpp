// Launch interface of the scatter_add / index_add / index_select kernels (no harness types): device pointers of
// contiguous [outer, n, inner] views.
//
// Semantics: families/indexing/indexing.hpp (the plugin ABI's opcts_*_params). Every launcher enqueues
// on the stream it is given (scratch through cudaMallocAsync there) and throws
// std::runtime_error naming the CUDA call that failed; none synchronises.
#pragma once

#include <cstdint>

struct CUstream_st;

namespace opcts::cuda {

enum class IdxValue { fp64, fp32, fp16, bf16, int32, int64 };
enum class IdxIndex { int32, int64 };

/// One problem. scatter_add: per_element_index (index [outer, m, inner]), terms src;
/// index_add: index [m], terms alpha·source; index_select: input, index [m]. out is
/// [outer, n, inner] (or [outer, m, inner] for index_select) and may be 2-byte aligned only.
struct IndexingArgs {
  IdxValue value = IdxValue::fp32;
  IdxIndex index_type = IdxIndex::int64;
  bool per_element_index = false;
  int64_t outer = 0, n = 0, m = 0, inner = 0;
  double alpha = 1;
  const void* self = nullptr;   // accumulating ops
  const void* terms = nullptr;  // src / source
  const void* input = nullptr;  // index_select
  const void* index = nullptr;
  void* out = nullptr;
  int64_t index_numel() const { return per_element_index ? outer * m * inner : m; }
  int64_t term_count() const { return outer * m * inner; }
};

/// The first position of the index holding a value outside [0, n), or -1. Runs on a private
/// stream of its own and waits for it: the impl must answer with a status when its run returns,
/// while the stream it was handed is held until then. Reads the index only.
int64_t first_bad_index(const IndexingArgs& a);

/// What a planted atomic kernel does wrong: pair_past_end drops the ends check of the paired
/// 16-bit path (the pair reaches the element past the end, or before the start); store writes
/// self + the term instead of adding it (the last of the duplicates wins).
enum class AtomicPlant { none, pair_past_end, store };

/// cuda.atomic: out = self, then one atomicAdd per term into out (16-bit types through
/// PyTorch's paired fast path: a __half2 / __nv_bfloat162 atomic with 0 for the neighbour,
/// the scalar atomic at the tensor's ends).
void scatter_atomic(const IndexingArgs& a, AtomicPlant plant, CUstream_st* stream);

/// cuda.warp_aggregated: lanes of a warp sharing a destination sum their terms in fp32 (fp64,
/// int64) in lane order and the lowest of them adds the sum with one atomic (the MI300
/// opportunistic fast atomics). `store` (planted): the lowest lane stores self + the sum instead
/// of adding it (the last group of the duplicates wins).
void scatter_warp_aggregated(const IndexingArgs& a, bool store, CUstream_st* stream);

/// What a planted sorted impl does wrong: racy sums the sorted terms with fp32 atomics (not
/// deterministic, while the row declares it is); dtype_acc sums each destination's terms in
/// the destination's 16-bit dtype, in order (while the impl declares fp32 accumulation).
enum class SortedPlant { none, racy, dtype_acc };

/// cuda.sorted: destinations sorted with CUB's radix sort (stable: each destination's terms in
/// index order), run-length encoded, summed per destination by CUB's segmented reduction in
/// fp32 (fp64, integers exactly) and added to self once, rounded once. Deterministic.
/// Needs term_count() < 2^32.
void scatter_sorted(const IndexingArgs& a, SortedPlant plant, CUstream_st* stream);

/// cuda.gather: out[o, j, k] = input[o, index[j], k] with 64-bit offsets, bit-exact; the planted
/// `offsets32` computes them in 32-bit unsigned arithmetic (wrapping past 2^32 elements).
void gather(const IndexingArgs& a, bool offsets32, CUstream_st* stream);

}  // namespace opcts::cuda
