// cuda.gather (index_select) and its planted 32-bit-offset variant: one thread per out element, the element's bytes
// copied.
#include "families/indexing/cuda/indexing_device.cuh"

namespace opcts::cuda {

namespace {

template <class W, class I>
__global__ void gather_kernel(const W* __restrict__ in, const I* __restrict__ index, W* out, int64_t outer, int64_t n,
                              int64_t m, int64_t inner, bool offsets32) {
  const int64_t total = outer * m * inner;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const layout::Term t = layout::term_of(i, m, inner);
    out[i] = in[layout::gather_offset(t.o, static_cast<int64_t>(index[t.j]), t.k, n, inner, offsets32)];
  }
}

template <class W>
void launch(const IndexingArgs& a, bool offsets32, cudaStream_t stream) {
  const int blocks = idx::blocks_for(a.outer * a.m * a.inner);
  if (a.index_type == IdxIndex::int32)
    gather_kernel<W, int32_t>
        <<<blocks, idx::kThreads, 0, stream>>>(static_cast<const W*>(a.input), static_cast<const int32_t*>(a.index),
                                               static_cast<W*>(a.out), a.outer, a.n, a.m, a.inner, offsets32);
  else
    gather_kernel<W, long long>
        <<<blocks, idx::kThreads, 0, stream>>>(static_cast<const W*>(a.input), static_cast<const long long*>(a.index),
                                               static_cast<W*>(a.out), a.outer, a.n, a.m, a.inner, offsets32);
}

}  // namespace

void gather(const IndexingArgs& a, bool offsets32, CUstream_st* stream) {
  if (a.outer * a.m * a.inner == 0) return;
  switch (idx::value_bytes(a.value)) {
    case 8: launch<unsigned long long>(a, offsets32, stream); break;
    case 4: launch<unsigned>(a, offsets32, stream); break;
    default: launch<unsigned short>(a, offsets32, stream); break;
  }
  idx::check(cudaGetLastError(), "gather kernel");
}

}  // namespace opcts::cuda
