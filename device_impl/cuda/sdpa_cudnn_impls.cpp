// cuda.cudnn (family sdpa): harness glue for the cuDNN 9 backend-graph SDPA (sdpa_cudnn.hpp).
// Uploads q, k, v (+ dO, + attn_mask), runs the forward (and, for direction backward, the
// forward then the backward graph) and downloads O and lse, or dQ, dK and dV.
//
// Errors: the adapter's SdpaCudnnArgumentError becomes InvalidArgument naming the argument;
// SdpaCudnnRefusal (cuDNN said NOT_SUPPORTED, or no engine config finalized) becomes Unsupported,
// an ERROR of the case unless a manifest expects it. What the adapter cannot express at all
// (version gates, bottom-right masks with Sq > Sk, softcap with masks, ...) is a SKIP from
// supports(), with the reason.
//
// Boolean masks are converted here to additive 0 / -inf masks in the input dtype (exact: s + 0 = s,
// s + -inf = -inf for finite s), which is what PyTorch does before calling cuDNN.
#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>

#include "device_impl/cuda/cuda_impls.hpp"
#include "device_impl/cuda/device_buffer.hpp"
#include "device_impl/cuda/device_memory.hpp"
#include "device_impl/cuda/sdpa_cudnn.hpp"
#include "device_impl/cuda/sdpa_params.hpp"
#include "core/errors.hpp"
#include "refimpl/sdpa.hpp"

namespace opcts {

namespace {

std::string version_text() {
  const int64_t v = cuda::sdpa_cudnn_version();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

// Kernel parameters with null pointers (enough for support checks). A boolean mask is presented
// as additive, since run() converts it.
cuda::SdpaParams params_of(const sdpa::Problem& p) {
  cuda::SdpaParams k = sdpa_kernel_params(p);
  if (k.mask_kind == cuda::SdpaMaskTensor::boolean) k.mask_kind = cuda::SdpaMaskTensor::additive;
  return k;
}

// The attn_mask input as an additive mask in the input dtype, and its strides.
HostTensor additive_mask(const sdpa::Problem& p, const HostTensor& m, cuda::SdpaStrides* strides) {
  if (m.shape().size() != 4 || m.dim(2) != p.seq_q || m.dim(3) != p.seq_k)
    throw InvalidArgument("attn_mask", "expected [B or 1, Hq or 1, Sq, Sk]");
  const int64_t bm = m.dim(0), hm = m.dim(1);
  if ((bm != 1 && bm != p.batch) || (hm != 1 && hm != p.heads_q))
    throw InvalidArgument("attn_mask", "batch and head dims must be 1 or B / Hq");
  *strides = {bm == 1 ? 0 : hm * p.seq_q * p.seq_k, hm == 1 ? 0 : p.seq_q * p.seq_k, p.seq_k};
  HostTensor out(p.dtype, m.shape());
  const bool boolean = p.mask_tensor == sdpa::MaskTensor::boolean;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < m.numel(); ++i) {
    const double x = m.get(i);
    out.set(i, boolean ? (x != 0 ? 0.0 : neg_inf) : x);
  }
  return out;
}

class CudnnSdpa final : public Impl {
 public:
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override { return "cuda.cudnn"; }
  std::string_view backend() const override { return "cuda"; }
  std::vector<std::string> required_caps() const override { return {"mma_sync_bf16"}; }  // sm80+
  // Both directions, as measured: on the H200 with cuDNN 9.14 (smoke tier, --bitwise with
  // every impl declared deterministic) no passing case differed by a byte, backward included.
  // The engine cuDNN's heuristics pick for the composite graph is not ours to inspect; should
  // one sum dQ with atomics on longer rows, `opcts run --bitwise` on the default tier shows it.
  bool deterministic(const Problem&) const override { return true; }

  Support supports(const Problem& pp, const ArchInfo& arch) const override {
    const auto& p = pp.as<sdpa::Problem>();
    // A negative case runs so that run() refuses it with InvalidArgument naming the argument.
    if (sdpa::contract_violation(p)) return Support::yes();
    if (p.dtype != DType::fp16 && p.dtype != DType::bf16)
      return Support::no("cuda.cudnn: cuDNN SDPA takes fp16/bf16 only");
    // cuDNN's tensor descriptors need positive dimensions (CUDNN_STATUS_BAD_PARAM otherwise);
    // PyTorch returns empty outputs before it calls cuDNN. The result of an empty problem is
    // then not cuDNN's, so the case does not run here (cuda.flash and cuda.math run it).
    if (p.batch == 0 || p.seq_q == 0 || p.seq_k == 0)
      return Support::no("cuda.cudnn: cuDNN descriptors take no zero-size dimension (B, Sq or Sk = 0)");
    if (arch.compute_major > 0 && arch.compute_major < 8) return Support::no("cuda.cudnn: cuDNN fp16/bf16 SDPA needs sm80+");
    std::string why;
    if (!cuda::sdpa_cudnn_supports(params_of(p), p.direction == sdpa::Direction::backward, &why))
      return Support::no("cuda.cudnn (cuDNN " + version_text() + "): " + why);
    // Backward scratch: softmax_sum and dQ_accum (fp32), plus dO and the gradients.
    double extra = 0;
    if (p.direction == sdpa::Direction::backward)
      extra = 4.0 * p.batch * p.heads_q * p.seq_q * (1 + p.head_dim) +
              2.0 * 2.0 * (p.batch * p.heads_q * p.seq_q * (p.head_dim + p.head_dim_v));
    return cuda::fits_device_memory(family_def().device_bytes(pp) + extra, name());
  }

  TensorMap run(const Problem& pp, const TensorMap& in, const RunContext& ctx) const override {
    const auto& p = pp.as<sdpa::Problem>();
    sdpa::check_contract(p);  // InvalidArgument naming the argument (negative cases)
    cuda::check(cudaSetDevice(ctx.device < 0 ? 0 : ctx.device), "cudaSetDevice");
    try {
      return run_impl(p, in);
    } catch (const cuda::SdpaCudnnArgumentError& e) {
      throw InvalidArgument(e.argument, e.what());
    } catch (const cuda::SdpaCudnnRefusal& e) {
      throw Unsupported(std::string(e.what()) + " [cuDNN " + version_text() + "]");
    }
  }

 private:
  static TensorMap run_impl(const sdpa::Problem& p, const TensorMap& in) {
    cuda::SdpaParams kp = params_of(p);
    const HostTensor& qh = in.at("q");
    const HostTensor& kh = in.at("k");
    const HostTensor& vh = in.at("v");
    const int64_t esize = 2;
    auto expect = [&](const HostTensor& t, const char* name, int64_t h, int64_t s, int64_t d) {
      if (t.dtype() != p.dtype) throw InvalidArgument(name, "dtype differs from the problem's");
      if (static_cast<int64_t>(t.nbytes()) != p.batch * h * s * d * esize)
        throw InvalidArgument(name, "size does not match the problem's shape");
    };
    expect(qh, "q", p.heads_q, p.seq_q, p.head_dim);
    expect(kh, "k", p.heads_kv, p.seq_k, p.head_dim);
    expect(vh, "v", p.heads_kv, p.seq_k, p.head_dim_v);
    const auto q = cuda::DeviceBuffer::upload(qh);
    const auto k = cuda::DeviceBuffer::upload(kh);
    const auto v = cuda::DeviceBuffer::upload(vh);
    std::unique_ptr<cuda::DeviceBuffer> mask;
    if (p.mask_tensor != sdpa::MaskTensor::none) {
      mask = std::make_unique<cuda::DeviceBuffer>(cuda::DeviceBuffer::upload(additive_mask(p, in.at("attn_mask"), &kp.mask_strides)));
      kp.attn_mask = mask->get();
    }
    // O has q's storage shape with the last dim Dv; lse is [B, Hq, Sq].
    std::vector<int64_t> o_shape = qh.shape();
    o_shape.back() = p.head_dim_v;
    HostTensor o(p.dtype, o_shape);
    HostTensor lse(DType::fp32, sdpa::lse_shape(p));
    // Poison the outputs with NaN bytes so an element cuDNN skips cannot pass.
    cuda::DeviceBuffer o_dev(o.nbytes()), lse_dev(lse.nbytes());
    cuda::check(cudaMemset(o_dev.get(), 0xFF, o_dev.bytes()), "cudaMemset");
    cuda::check(cudaMemset(lse_dev.get(), 0xFF, lse_dev.bytes()), "cudaMemset");
    kp.q = q.get();
    kp.k = k.get();
    kp.v = v.get();
    kp.o = o_dev.get();
    kp.lse = static_cast<float*>(lse_dev.get());
    cuda::sdpa_cudnn_forward(kp, nullptr);
    cuda::check(cudaDeviceSynchronize(), "sdpa_cudnn_forward");

    TensorMap out;
    if (p.direction == sdpa::Direction::forward) {
      o_dev.download(o);
      lse_dev.download(lse);
      out.emplace("O", std::move(o));
      out.emplace("lse", std::move(lse));
      return out;
    }
    const HostTensor& doh = in.at("dO");
    if (doh.nbytes() != o.nbytes()) throw InvalidArgument("dO", "size does not match O's");
    const auto d_o = cuda::DeviceBuffer::upload(doh);
    HostTensor dq(p.dtype, qh.shape()), dk(p.dtype, kh.shape()), dv(p.dtype, vh.shape());
    cuda::DeviceBuffer dq_dev(dq.nbytes()), dk_dev(dk.nbytes()), dv_dev(dv.nbytes());
    for (auto* b : {&dq_dev, &dk_dev, &dv_dev}) cuda::check(cudaMemset(b->get(), 0xFF, b->bytes()), "cudaMemset");
    cuda::SdpaBackwardParams bp{};
    bp.fwd = kp;
    bp.d_o = d_o.get();
    bp.d_q = dq_dev.get();
    bp.d_k = dk_dev.get();
    bp.d_v = dv_dev.get();
    bp.do_strides = kp.o_strides;
    bp.dq_strides = kp.q_strides;
    bp.dk_strides = kp.k_strides;
    bp.dv_strides = kp.v_strides;
    cuda::sdpa_cudnn_backward(bp, nullptr);
    cuda::check(cudaDeviceSynchronize(), "sdpa_cudnn_backward");
    dq_dev.download(dq);
    dk_dev.download(dk);
    dv_dev.download(dv);
    out.emplace("dQ", std::move(dq));
    out.emplace("dK", std::move(dk));
    out.emplace("dV", std::move(dv));
    return out;
  }
};

}  // namespace

void register_cuda_sdpa_cudnn(Registry& reg) { reg.add(std::make_unique<CudnnSdpa>()); }

}  // namespace opcts
