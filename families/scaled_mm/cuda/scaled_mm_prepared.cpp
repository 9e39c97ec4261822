// scaled_mm problems prepared for the kernels outside the ABI backend (the benchmark).
#include "families/scaled_mm/cuda/scaled_mm_prepared.hpp"

#include <algorithm>

#include "core/abi_impl.hpp"
#include "families/scaled_mm/cuda/scaled_mm_launch.hpp"

namespace opcts {

PreparedScaledMm prepare_scaled_mm(const scaled_mm::Problem& p, const TensorMap& in) {
  const auto c = abi_struct<opcts_scaled_mm_params>(scaled_mm::abi_params(p));
  // D rows padded to 16 bytes: cuBLASLt needs an aligned leading dimension (cublasLtMatmul FP8 requirements).
  const int64_t per16 = std::max<int64_t>(1, 16 / storage_bytes(p.out));
  const int64_t ldd = (p.n + per16 - 1) / per16 * per16;
  PreparedScaledMm r{cuda::DeviceBuffer::upload(in.at("a")),
                     cuda::DeviceBuffer::upload(in.at("b")),
                     cuda::DeviceBuffer::upload(in.at("a_scale")),
                     cuda::DeviceBuffer::upload(in.at("b_scale")),
                     std::nullopt,
                     std::nullopt,
                     cuda::DeviceBuffer(storage_bytes_for(p.out, p.m * ldd)),
                     cuda::mm_kernel_params(c)};
  cuda::ScaledMmParams& k = r.params;
  k.ldd = ldd;
  k.a = r.a.get();
  k.b = r.b.get();
  k.a_scale = r.a_scale.get();
  k.b_scale = r.b_scale.get();
  if (in.count("out_scale")) {
    r.out_scale.emplace(cuda::DeviceBuffer::upload(in.at("out_scale")));
    k.d_scale = static_cast<const float*>(r.out_scale->get());
  }
  if (in.count("bias")) {
    r.bias.emplace(cuda::DeviceBuffer::upload(in.at("bias")));
    k.bias = r.bias->get();
  }
  if (in.count("global_scale")) k.global_scale = static_cast<float>(in.at("global_scale").get(0));
  k.d = r.d.get();
  return r;
}

void launch_scaled_mm(const PreparedScaledMm& m, bool cublaslt, CUstream_st* stream) {
  if (cublaslt) OPCTS_CUDA_VENDOR(cuda::scaled_mm_cublaslt(m.params, stream));
  else cuda::scaled_mm_mx_kernel(m.params, stream);
}

}  // namespace opcts
