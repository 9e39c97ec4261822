// int4_mm problems prepared for the kernels outside the ABI backend (the benchmark, the kernel tests).
#include "families/int4_mm/cuda/int4_mm_prepared.hpp"

#include "core/abi_impl.hpp"
#include "families/int4_mm/cuda/int4_mm_launch.hpp"

namespace opcts {

cuda::Int4MmParams int4_params(const int4_mm::Problem& p, const TensorMap& in, cuda::Int4Plant plant) {
  AbiTensors t;
  std::vector<const HostTensor*> order;
  for (const auto& [name, x] : in) {
    t.add(name, x, false);
    order.push_back(&x);
  }
  for (size_t i = 0; i < order.size(); ++i) t.descriptors()[i].data = const_cast<std::byte*>(order[i]->data());
  const auto c = abi_struct<opcts_int4_mm_params>(int4_mm::abi_params(p));
  return cuda::int4_kernel_params(c, t.descriptors().data(), static_cast<int32_t>(t.size()), plant);
}

PreparedInt4Mm prepare_int4_mm(const int4_mm::Problem& p, const TensorMap& in, bool gemv, cuda::Int4Plant plant) {
  PreparedInt4Mm r{cuda::DeviceBuffer::upload(in.at("x")),
                   cuda::DeviceBuffer::upload(in.at("weight")),
                   std::nullopt,
                   std::nullopt,
                   std::nullopt,
                   cuda::DeviceBuffer(static_cast<size_t>(storage_bytes_for(p.dtype, p.m * p.n))),
                   int4_params(p, in, plant)};
  cuda::Int4MmParams& k = r.params;
  k.x = r.x.get();
  k.weight = r.weight.get();
  if (k.scales) {
    r.scales.emplace(cuda::DeviceBuffer::upload(in.at(p.tinygemm() ? "scale_and_zero" : "scales")));
    k.scales = r.scales->get();
  }
  if (k.zeros) {
    r.zeros.emplace(cuda::DeviceBuffer::upload(in.at("qzeros")));
    k.zeros = r.zeros->get();
  }
  k.y = r.y.get();
  if (gemv) {
    k.workspace_bytes = cuda::int4_gemv_workspace_bytes(k);
    r.workspace.emplace(static_cast<size_t>(k.workspace_bytes));
    k.workspace = r.workspace->get();
  }
  return r;
}

void launch_int4_mm(const PreparedInt4Mm& m, bool gemv, CUstream_st* stream) {
  if (gemv) cuda::int4_gemv(m.params, stream);
  else cuda::int4_mm(m.params, stream);
}

}  // namespace opcts
