// cuda.flash and cuda.math: harness glue that uploads, launches opcts's SDPA kernels and downloads.
#include <cuda_runtime_api.h>

#include "device_impl/cuda/cuda_impls.hpp"
#include "device_impl/cuda/device_buffer.hpp"
#include "device_impl/cuda/device_memory.hpp"
#include "device_impl/cuda/sdpa_kernels.hpp"
#include "refimpl/sdpa.hpp"

namespace opcts {

namespace {

cuda::SdpaDType to_kernel(DType t) {
  switch (t) {
    case DType::fp16: return cuda::SdpaDType::fp16;
    case DType::bf16: return cuda::SdpaDType::bf16;
    case DType::fp32: return cuda::SdpaDType::fp32;
    default: throw std::invalid_argument("sdpa kernels take fp16, bf16 or fp32");
  }
}

cuda::SdpaMask to_kernel(sdpa::Mask m) {
  switch (m) {
    case sdpa::Mask::none: return cuda::SdpaMask::none;
    case sdpa::Mask::causal_upper_left: return cuda::SdpaMask::causal_upper_left;
    case sdpa::Mask::causal_lower_right: return cuda::SdpaMask::causal_lower_right;
  }
  return cuda::SdpaMask::none;
}

// Kernel parameters of a problem with null pointers (enough for support checks).
cuda::SdpaParams params_of(const sdpa::Problem& p) {
  cuda::SdpaParams k{};
  k.dtype = to_kernel(p.dtype);
  k.batch = p.batch;
  k.heads_q = p.heads_q;
  k.heads_kv = p.heads_kv;
  k.seq_q = p.seq_q;
  k.seq_k = p.seq_k;
  k.head_dim = p.head_dim;
  k.scale = static_cast<float>(p.effective_scale());
  k.mask = to_kernel(p.mask);
  k.q_strides = k.o_strides = cuda::contiguous_bhsd(p.heads_q, p.seq_q, p.head_dim);
  k.k_strides = k.v_strides = cuda::contiguous_bhsd(p.heads_kv, p.seq_k, p.head_dim);
  return k;
}

enum class Kernel { flash, math };

class CudaSdpa final : public Impl {
 public:
  explicit CudaSdpa(Kernel k) : kernel_(k) {}
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override { return kernel_ == Kernel::flash ? "cuda.flash" : "cuda.math"; }
  std::string_view backend() const override { return "cuda"; }
  std::vector<std::string> required_caps() const override {
    // flash uses mma.sync m16n8k16 with bf16 operands (sm_80+); math needs only cuBLAS.
    if (kernel_ == Kernel::flash) return {"mma_sync_bf16"};
    return {};
  }

  Support supports(const Problem& pp, const ArchInfo&) const override {
    const auto& p = dynamic_cast<const sdpa::Problem&>(pp);
    if (kernel_ == Kernel::flash) {
      const char* why = nullptr;
      if (!cuda::sdpa_flash_supports(params_of(p), &why)) return Support::no(std::string("cuda.flash: ") + why);
    }
    // math also holds S (P in place): B·Hq·Sq·Sk elements of the input dtype, counted at 4 bytes.
    const double scores = kernel_ == Kernel::math ? 4.0 * p.batch * p.heads_q * p.seq_q * p.seq_k : 0;
    return cuda::fits_device_memory(builtin_registry().family("sdpa")->device_bytes(p) + scores, name());
  }

  TensorMap run(const Problem& pp, const TensorMap& in, const RunContext& ctx) const override {
    const auto& p = dynamic_cast<const sdpa::Problem&>(pp);
    cuda::check(cudaSetDevice(ctx.device < 0 ? 0 : ctx.device), "cudaSetDevice");
    TensorMap out;
    HostTensor& o = out.emplace("O", HostTensor(p.dtype, sdpa::q_shape(p))).first->second;
    HostTensor& lse = out.emplace("lse", HostTensor(DType::fp32, sdpa::lse_shape(p))).first->second;
    const auto q = cuda::DeviceBuffer::upload(in.at("q"));
    const auto k = cuda::DeviceBuffer::upload(in.at("k"));
    const auto v = cuda::DeviceBuffer::upload(in.at("v"));
    // Poison the outputs with NaN bytes so a kernel that skips an element cannot pass.
    cuda::DeviceBuffer o_dev(o.nbytes()), lse_dev(lse.nbytes());
    cuda::check(cudaMemset(o_dev.get(), 0xFF, o_dev.bytes()), "cudaMemset");
    cuda::check(cudaMemset(lse_dev.get(), 0xFF, lse_dev.bytes()), "cudaMemset");
    cuda::SdpaParams kp = params_of(p);
    kp.q = q.get();
    kp.k = k.get();
    kp.v = v.get();
    kp.o = o_dev.get();
    kp.lse = static_cast<float*>(lse_dev.get());
    if (kernel_ == Kernel::flash)
      cuda::sdpa_flash_forward(kp, nullptr);
    else
      cuda::sdpa_math_forward(kp, nullptr);
    cuda::check(cudaDeviceSynchronize(), kernel_ == Kernel::flash ? "sdpa_flash_forward" : "sdpa_math_forward");
    o_dev.download(o);
    lse_dev.download(lse);
    return out;
  }

 private:
  Kernel kernel_;
};

}  // namespace

void register_cuda_sdpa(Registry& reg) {
  reg.add(std::make_unique<CudaSdpa>(Kernel::flash));
  reg.add(std::make_unique<CudaSdpa>(Kernel::math));
}

}  // namespace opcts
