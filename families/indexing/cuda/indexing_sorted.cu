// cuda.sorted and its planted variants: destinations sorted with CUB (rocPRIM under HIP), each destination's terms
// summed by its segmented reduction, added to self once.
//
// The device-wide calls go through gpu/portable/device_prims.cuh (CUB or rocPRIM).
// Scratch (cudaMallocAsync on the stream, freed there), for N terms: keys and positions,
// double-buffered by the radix sort (the sort's input buffers then hold the run-length
// encoding's unique keys and counts), segment offsets, the terms in the accumulator type in
// sorted order and the segment sums. The number of segments stays on the device (reading it
// would mean waiting for the stream), so the offsets and the reduction span N segments, the
// ones past the last run empty.
#include "gpu/portable/device_prims.cuh"

#include <algorithm>
#include <vector>

#include "families/indexing/cuda/indexing_device.cuh"
#include "gpu/cuda/stream_scratch.cuh"

namespace opcts::cuda {

namespace {

using idx::acc_t;
using idx::kThreads;
namespace prims = gpu::prims;

template <class I>
__global__ void keys_kernel(int64_t terms, int64_t m, int64_t n, int64_t inner, bool per_element,
                            const I* __restrict__ index, unsigned long long* keys, unsigned* positions) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < terms;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const layout::Term term = layout::term_of(t, m, inner);
    const auto i = static_cast<int64_t>(per_element ? index[t] : index[term.j]);
    keys[t] = static_cast<unsigned long long>(layout::destination(term, i, n, inner));
    positions[t] = static_cast<unsigned>(t);
  }
}

// The terms in sorted order, in the accumulator type (alpha·source formed there).
template <class T>
__global__ void gather_terms_kernel(int64_t terms, const unsigned* __restrict__ positions, const T* __restrict__ src,
                                    double alpha, acc_t<T>* values) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < terms;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const acc_t<T> v = idx::widen(src[positions[p]]);
    values[p] = alpha == 1 ? v : static_cast<acc_t<T>>(v * static_cast<acc_t<T>>(alpha));
  }
}

// out[key] = RN(self[key] + sum) for every run (the runs past *runs are empty).
template <class T>
__global__ void finish_kernel(int64_t terms, const int* __restrict__ runs,
                              const unsigned long long* __restrict__ unique, const acc_t<T>* __restrict__ sums,
                              const T* __restrict__ self, T* out) {
  const int64_t count = *runs;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < count && r < terms;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const auto e = static_cast<int64_t>(unique[r]);
    out[e] = idx::narrow<T>(idx::widen(self[e]) + sums[r]);
  }
}

// Planted (racy): each sorted term added to its segment's sum with an atomic, in whatever
// order the threads come: the segment of position p is the last run starting at or before it.
template <class A>
__global__ void racy_sums_kernel(int64_t terms, const unsigned* __restrict__ offsets, const A* __restrict__ values,
                                 A* sums) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < terms;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t lo = 0, hi = terms;  // offsets[lo] <= p < offsets[hi]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (offsets[mid] <= static_cast<unsigned>(p)) lo = mid;
      else hi = mid;
    }
    if constexpr (std::is_same_v<A, long long>)
      atomicAdd(reinterpret_cast<unsigned long long*>(sums + lo), static_cast<unsigned long long>(values[p]));
    else atomicAdd(sums + lo, values[p]);
  }
}

// Planted (dtype_acc): one thread per run sums its terms in order, rounding to T after every add.
template <class T>
__global__ void dtype_acc_kernel(int64_t terms, const int* __restrict__ runs,
                                 const unsigned long long* __restrict__ unique, const unsigned* __restrict__ offsets,
                                 const acc_t<T>* __restrict__ values, const T* __restrict__ self, T* out) {
  const int64_t count = *runs;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < count && r < terms;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const auto e = static_cast<int64_t>(unique[r]);
    T acc = self[e];
    for (unsigned p = offsets[r]; p < offsets[r + 1]; ++p) acc = idx::narrow<T>(idx::widen(acc) + values[p]);
    out[e] = acc;
  }
}

int key_bits(int64_t numel) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) < numel) ++bits;
  return bits;
}

template <class T, class I>
void sorted(const IndexingArgs& a, SortedPlant plant, cudaStream_t stream) {
  using A = acc_t<T>;
  const int64_t n_terms = a.term_count();
  const auto N = static_cast<size_t>(n_terms);
  StreamScratch scratch(stream);
  auto* keys_in = scratch.alloc_n<unsigned long long>(N + 16, "sorted scratch");
  auto* keys_out = scratch.alloc_n<unsigned long long>(N + 16, "sorted scratch");
  auto* pos_in = scratch.alloc_n<unsigned>(N + 1 + 16, "sorted scratch");
  auto* pos_out = scratch.alloc_n<unsigned>(N + 16, "sorted scratch");
  auto* offsets = scratch.alloc_n<unsigned>(N + 1 + 16, "sorted scratch");
  auto* runs = scratch.alloc_n<int>(1 + 16, "sorted scratch");
  auto* values = scratch.alloc_n<A>(N + 16, "sorted scratch");
  auto* sums = scratch.alloc_n<A>(N + 16, "sorted scratch");
  const int blocks = idx::blocks_for(n_terms);

  keys_kernel<I><<<blocks, kThreads, 0, stream>>>(n_terms, a.m, a.n, a.inner, a.per_element_index,
                                                  static_cast<const I*>(a.index), keys_in, pos_in);
  idx::check(cudaGetLastError(), "sorted: keys kernel");
  const int end_bit = key_bits(a.outer * a.n * a.inner);
  auto* unique = keys_in;  // free once sorted
  auto* counts = pos_in;   // N + 1 entries, zero past the runs
  size_t bytes_sort = 0, bytes_rle = 0, bytes_scan = 0, bytes_reduce = 0;
  idx::check(prims::sort_pairs(nullptr, bytes_sort, keys_in, keys_out, pos_in, pos_out, n_terms, 0, end_bit, stream),
             "sort (size)");
  idx::check(prims::run_length_encode(nullptr, bytes_rle, keys_out, unique, counts, runs, n_terms, stream),
             "rle (size)");
  idx::check(prims::exclusive_sum(nullptr, bytes_scan, counts, offsets, n_terms + 1, stream), "scan (size)");
  idx::check(prims::segmented_sum(nullptr, bytes_reduce, values, sums, n_terms, offsets, offsets + 1, stream),
             "reduce (size)");
  const size_t temp_bytes = std::max(std::max(bytes_sort, bytes_rle), std::max(bytes_scan, bytes_reduce));
  void* temp = scratch.alloc_n<unsigned char>(temp_bytes + 16, "sorted scratch");

  idx::check(prims::sort_pairs(temp, bytes_sort, keys_in, keys_out, pos_in, pos_out, n_terms, 0, end_bit, stream),
             "sort");
  idx::check(cudaMemsetAsync(counts, 0, (N + 1) * sizeof(unsigned), stream), "cudaMemsetAsync (counts)");
  idx::check(prims::run_length_encode(temp, bytes_rle, keys_out, unique, counts, runs, n_terms, stream), "rle");
  idx::check(prims::exclusive_sum(temp, bytes_scan, counts, offsets, n_terms + 1, stream), "scan");
  gather_terms_kernel<T>
      <<<blocks, kThreads, 0, stream>>>(n_terms, pos_out, static_cast<const T*>(a.terms), a.alpha, values);
  idx::check(cudaGetLastError(), "sorted: gather kernel");

  const auto* self = static_cast<const T*>(a.self);
  T* out = static_cast<T*>(a.out);
  if (plant == SortedPlant::dtype_acc) {
    dtype_acc_kernel<T><<<blocks, kThreads, 0, stream>>>(n_terms, runs, unique, offsets, values, self, out);
    idx::check(cudaGetLastError(), "sorted: dtype_acc kernel");
    return;
  }
  if (plant == SortedPlant::racy) {
    idx::check(cudaMemsetAsync(sums, 0, N * sizeof(A), stream), "cudaMemsetAsync (sums)");
    racy_sums_kernel<A><<<blocks, kThreads, 0, stream>>>(n_terms, offsets, values, sums);
    idx::check(cudaGetLastError(), "sorted: racy kernel");
  } else {
    idx::check(prims::segmented_sum(temp, bytes_reduce, values, sums, n_terms, offsets, offsets + 1, stream), "reduce");
  }
  finish_kernel<T><<<blocks, kThreads, 0, stream>>>(n_terms, runs, unique, sums, self, out);
  idx::check(cudaGetLastError(), "sorted: finish kernel");
}

}  // namespace

void scatter_sorted(const IndexingArgs& a, SortedPlant plant, CUstream_st* stream) {
  const auto bytes = static_cast<size_t>(a.outer * a.n * a.inner * idx::value_bytes(a.value));
  if (bytes)
    idx::check(cudaMemcpyAsync(a.out, a.self, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync (self → out)");
  if (a.term_count() == 0) return;
  if (a.term_count() >= (int64_t{1} << 32) - 1) throw std::runtime_error("cuda.sorted keeps term positions in 32 bits");
  idx::with_types(a.value, a.index_type,
                  [&](auto tv, auto iv) { sorted<decltype(tv), decltype(iv)>(a, plant, stream); });
}

}  // namespace opcts::cuda
