// The device-wide primitives cuda.sorted uses (radix sort of key/value pairs, run-length
// encoding, exclusive sum, segmented sum), one call each for nvcc and hipcc: CUB under CUDA,
// rocPRIM under HIP (Debian 12 has librocprim-dev 5.3 but no hipCUB, whose CUB spelling would
// otherwise serve). Host code. Every call has CUB's two-phase protocol: with temp == nullptr it
// only sets `bytes` to the scratch it needs; then it runs on `stream`. Returns the runtime's error.
// The input arguments are passed through as the caller's pointer types (CUB instantiates its
// kernels for them). Sources: CUB's device-wide API (cub/device/*.cuh); rocPRIM 5.3's rocprim/device/*.hpp
// (radix_sort_pairs, run_length_encode, exclusive_scan, segmented_reduce: the same arguments, in
// another order, with the operator and the initial value explicit).
#pragma once

#include "gpu/portable/gpu.hpp"

#include <cstddef>
#include <cstdint>

#if OPCTS_GPU_HIP
#include <rocprim/rocprim.hpp>
#else
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#endif

namespace opcts::gpu::prims {

/// Sorts n (key, value) pairs by bits [begin_bit, end_bit) of the key, stably: keys_in → keys_out,
/// values_in → values_out.
template <class K, class V>
cudaError_t sort_pairs(void* temp, size_t& bytes, const K* keys_in, K* keys_out, const V* values_in, V* values_out,
                       int64_t n, int begin_bit, int end_bit, cudaStream_t stream) {
#if OPCTS_GPU_HIP
  return rocprim::radix_sort_pairs(temp, bytes, keys_in, keys_out, values_in, values_out, static_cast<size_t>(n),
                                   static_cast<unsigned>(begin_bit), static_cast<unsigned>(end_bit), stream);
#else
  return cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, values_in, values_out, n, begin_bit, end_bit,
                                         stream);
#endif
}

/// The runs of equal keys among in[0, n): unique[r] and counts[r] for r < *runs.
template <class In, class K, class C, class R>
cudaError_t run_length_encode(void* temp, size_t& bytes, In in, K* unique, C* counts, R* runs, int64_t n,
                              cudaStream_t stream) {
#if OPCTS_GPU_HIP
  return rocprim::run_length_encode(temp, bytes, in, static_cast<unsigned>(n), unique, counts, runs, stream);
#else
  return cub::DeviceRunLengthEncode::Encode(temp, bytes, in, unique, counts, runs, n, stream);
#endif
}

/// out[i] = Σ_{j < i} in[j] for i < n (out[0] = 0).
template <class In, class T>
cudaError_t exclusive_sum(void* temp, size_t& bytes, In in, T* out, int64_t n, cudaStream_t stream) {
#if OPCTS_GPU_HIP
  return rocprim::exclusive_scan(temp, bytes, in, out, T{0}, static_cast<size_t>(n), rocprim::plus<T>(), stream);
#else
  return cub::DeviceScan::ExclusiveSum(temp, bytes, in, out, n, stream);
#endif
}

/// out[s] = Σ in[begin[s] .. end[s]) for s < segments (0 for an empty segment).
template <class In, class T, class Offsets>
cudaError_t segmented_sum(void* temp, size_t& bytes, In in, T* out, int64_t segments, Offsets begin, Offsets end,
                          cudaStream_t stream) {
#if OPCTS_GPU_HIP
  return rocprim::segmented_reduce(temp, bytes, in, out, static_cast<unsigned>(segments), begin, end,
                                   rocprim::plus<T>(), T{0}, stream);
#else
  return cub::DeviceSegmentedReduce::Sum(temp, bytes, in, out, segments, begin, end, stream);
#endif
}

}  // namespace opcts::gpu::prims
