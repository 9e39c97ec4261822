// The atomic scatter kernels (cuda.atomic, cuda.warp_aggregated and their planted variants) and the index check every
// indexing impl runs first.
#include "families/indexing/cuda/indexing_device.cuh"

namespace opcts::cuda {

namespace {

using idx::acc_t;
using idx::kThreads;

// The problem's scalars, as the kernels read them.
struct Shape {
  int64_t terms, m, n, inner, numel;
  bool per_element;
  double alpha;
};

Shape shape_of(const IndexingArgs& a) {
  return {a.term_count(), a.m, a.n, a.inner, a.outer * a.n * a.inner, a.per_element_index, a.alpha};
}

// Term t's destination in out and its value (alpha·source rounded once to T, as PyTorch's
// index_add forms it in the tensor's type).
template <class T, class I>
__device__ __forceinline__ int64_t destination_of(const Shape& s, const I* index, int64_t t) {
  const layout::Term term = layout::term_of(t, s.m, s.inner);
  const auto i = static_cast<int64_t>(s.per_element ? index[t] : index[term.j]);
  return layout::destination(term, i, s.n, s.inner);
}

template <class T>
__device__ __forceinline__ acc_t<T> term_value(const Shape& s, const T* terms, int64_t t) {
  const acc_t<T> v = idx::widen(terms[t]);
  return s.alpha == 1 ? v : static_cast<acc_t<T>>(v * static_cast<acc_t<T>>(s.alpha));
}

template <class T, class I>
__global__ void atomic_kernel(Shape s, const T* __restrict__ terms, const I* __restrict__ index,
                              const T* __restrict__ self, T* out, AtomicPlant plant) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < s.terms;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = destination_of<T>(s, index, t);
    const T v = idx::narrow<T>(term_value(s, terms, t));
    if (plant == AtomicPlant::store) out[e] = idx::narrow<T>(idx::widen(self[e]) + idx::widen(v));
    else idx::atomic_add(out, e, s.numel, v, plant == AtomicPlant::pair_past_end);
  }
}

// Every warp walks the terms in uniform steps, so its ballots and shuffles see all lanes.
// `store` (planted): the leader stores self + the group's sum instead of adding it.
template <class T, class I>
__global__ void warp_aggregated_kernel(Shape s, const T* __restrict__ terms, const I* __restrict__ index,
                                       const T* __restrict__ self, T* out, bool store) {
  const int lane = static_cast<int>(threadIdx.x) % idx::kWarpSize;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x; base < s.terms;
       base += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = base + threadIdx.x;
    const bool valid = t < s.terms;
    const int64_t key = valid ? destination_of<T>(s, index, t) : -1;
    const acc_t<T> value = valid ? term_value(s, terms, t) : acc_t<T>(0);
    for (idx::LaneMask pending = idx::warp_ballot(valid); pending;) {
      const int leader = idx::lowest_lane(pending);
      const int64_t leader_key = idx::warp_shfl(key, leader);
      const idx::LaneMask same = idx::warp_ballot(valid && key == leader_key);
      acc_t<T> sum = 0;  // the group's terms in lane order
      for (idx::LaneMask b = same; b; b &= b - 1) sum += idx::warp_shfl(value, idx::lowest_lane(b));
      if (lane == leader) {
        if (store) out[leader_key] = idx::narrow<T>(idx::widen(self[leader_key]) + idx::widen(idx::narrow<T>(sum)));
        else idx::atomic_add(out, leader_key, s.numel, idx::narrow<T>(sum), false);
      }
      pending &= ~same;
    }
  }
}

template <class I>
__global__ void find_bad_kernel(const I* __restrict__ index, int64_t count, int64_t n, unsigned long long* first) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const auto v = static_cast<int64_t>(index[i]);
    if (v < 0 || v >= n) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

void copy_self(const IndexingArgs& a, cudaStream_t stream) {
  const auto bytes = static_cast<size_t>(a.outer * a.n * a.inner * idx::value_bytes(a.value));
  if (bytes)
    idx::check(cudaMemcpyAsync(a.out, a.self, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync (self → out)");
}

}  // namespace

int64_t first_bad_index(const IndexingArgs& a) {
  const int64_t count = a.index_numel();
  if (count == 0) return -1;
  cudaStream_t s = nullptr;
  idx::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (index check)");
  unsigned long long first = ~0ull;
  unsigned long long* d = nullptr;
  cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&d), sizeof first, s);
  if (e == cudaSuccess) e = cudaMemcpyAsync(d, &first, sizeof first, cudaMemcpyHostToDevice, s);
  if (e == cudaSuccess) {
    if (a.index_type == IdxIndex::int32)
      find_bad_kernel<<<idx::blocks_for(count), kThreads, 0, s>>>(static_cast<const int32_t*>(a.index), count, a.n, d);
    else
      find_bad_kernel<<<idx::blocks_for(count), kThreads, 0, s>>>(static_cast<const long long*>(a.index), count, a.n,
                                                                  d);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(&first, d, sizeof first, cudaMemcpyDeviceToHost, s);
  if (d) (void)cudaFreeAsync(d, s);
  const cudaError_t sync = cudaStreamSynchronize(s);
  (void)cudaStreamDestroy(s);
  idx::check(e != cudaSuccess ? e : sync, "index check");
  return first == ~0ull ? -1 : static_cast<int64_t>(first);
}

namespace {

// out = self, then `launch(T{}, I{}, shape)` enqueues the kernel of the problem's types.
template <class Launch>
void scatter_with(const IndexingArgs& a, CUstream_st* stream, const char* what, Launch launch) {
  copy_self(a, stream);
  const Shape s = shape_of(a);
  if (s.terms == 0) return;
  idx::with_types(a.value, a.index_type, [&](auto tv, auto iv) { launch(tv, iv, s); });
  idx::check(cudaGetLastError(), what);
}

}  // namespace

void scatter_atomic(const IndexingArgs& a, AtomicPlant plant, CUstream_st* stream) {
  scatter_with(a, stream, "atomic scatter kernel", [&](auto tv, auto iv, const Shape& s) {
    using T = decltype(tv);
    using I = decltype(iv);
    atomic_kernel<T, I><<<idx::blocks_for(s.terms), kThreads, 0, stream>>>(
        s, static_cast<const T*>(a.terms), static_cast<const I*>(a.index), static_cast<const T*>(a.self),
        static_cast<T*>(a.out), plant);
  });
}

void scatter_warp_aggregated(const IndexingArgs& a, bool store, CUstream_st* stream) {
  scatter_with(a, stream, "warp-aggregated scatter kernel", [&](auto tv, auto iv, const Shape& s) {
    using T = decltype(tv);
    using I = decltype(iv);
    warp_aggregated_kernel<T, I><<<idx::blocks_for(s.terms), kThreads, 0, stream>>>(
        s, static_cast<const T*>(a.terms), static_cast<const I*>(a.index), static_cast<const T*>(a.self),
        static_cast<T*>(a.out), store);
  });
}

}  // namespace opcts::cuda
