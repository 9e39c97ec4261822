// cuda.int4_gemv, cuda.int4_mm and their planted variants: harness glue that uploads the packed weight, launches, checks y's guard bands and downloads y.
//
// Thin on purpose: the kernels' launchers check every argument (int4_mm_args.cu) from the sizes
// read here off the tensors handed in; this file only maps problems to the parameter struct.
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "core/errors.hpp"
#include "core/family.hpp"
#include "device_impl/cuda/device_memory.hpp"
#include "device_impl/cuda/int4_mm_prepared.hpp"

namespace opcts {

void register_cuda_int4_mm(Registry& reg);

namespace {

using int4_mm::Format;
using int4_mm::Problem;

constexpr uint8_t kCanary = 0x5A;

cuda::Int4Format format_of(Format f) {
  switch (f) {
    case Format::tinygemm: return cuda::Int4Format::tinygemm;
    case Format::tinygemm_unpacked: return cuda::Int4Format::tinygemm_unpacked;
    case Format::awq: return cuda::Int4Format::awq;
    case Format::gptq: return cuda::Int4Format::gptq;
    case Format::q4_0: return cuda::Int4Format::q4_0;
  }
  return cuda::Int4Format::tinygemm;
}

}  // namespace

cuda::Int4MmParams int4_params(const int4_mm::Problem& p, const TensorMap& in, cuda::Int4Plant plant) {
  cuda::Int4MmParams k;
  k.m = p.m;
  k.n = p.n;
  k.k = p.k;
  k.group_size = p.group;
  k.inner_k_tiles = p.inner_k_tiles;
  k.format = format_of(p.format);
  k.act = p.dtype == DType::bf16 ? cuda::Int4Act::bf16 : cuda::Int4Act::fp16;
  k.plant = plant;
  const HostTensor& x = in.at("x");
  k.x = x.data();
  k.x_rows = x.dim(0);
  k.x_cols = x.dim(1);
  k.weight = in.at("weight").data();
  k.weight_bytes = static_cast<int64_t>(in.at("weight").nbytes());
  if (const char* s = p.tinygemm() ? "scale_and_zero" : p.format == Format::q4_0 ? nullptr : "scales") {
    k.scales = in.at(s).data();
    k.scale_groups = in.at(s).dim(0);
    k.scale_cols = in.at(s).dim(1);
  }
  if (in.count("qzeros")) {
    k.zeros = in.at("qzeros").data();
    k.zero_groups = in.at("qzeros").dim(0);
    k.zero_cols = in.at("qzeros").dim(1);
  }
  k.ldy = p.n;
  return k;
}

PreparedInt4Mm prepare_int4_mm(const int4_mm::Problem& p, const TensorMap& in, bool gemv, cuda::Int4Plant plant) {
  const int64_t y_bytes = storage_bytes_for(p.dtype, p.m * p.n);
  PreparedInt4Mm r{cuda::DeviceBuffer::upload(in.at("x")), cuda::DeviceBuffer::upload(in.at("weight")), std::nullopt,
                   std::nullopt, std::nullopt, cuda::DeviceBuffer(static_cast<size_t>(y_bytes + 2 * kInt4GuardBytes)),
                   int4_params(p, in, plant)};
  // Canary in the guards, NaN bytes (0xFF is NaN in bf16 and fp16) in y itself, so that a kernel
  // that skips an element cannot pass and one that writes past y is seen.
  cuda::check(cudaMemset(r.y.get(), kCanary, r.y.bytes()), "cudaMemset");
  cuda::check(cudaMemset(static_cast<uint8_t*>(r.y.get()) + kInt4GuardBytes, 0xFF, static_cast<size_t>(y_bytes)), "cudaMemset");
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
  k.y = static_cast<uint8_t*>(r.y.get()) + kInt4GuardBytes;
  if (gemv) {
    const int64_t bytes = cuda::int4_gemv_workspace_bytes(k);
    r.workspace.emplace(static_cast<size_t>(bytes));
    k.workspace = r.workspace->get();
    k.workspace_bytes = bytes;
  }
  return r;
}

void launch_int4_mm(const PreparedInt4Mm& m, bool gemv, CUstream_st* stream) {
  try {
    if (gemv) cuda::int4_gemv(m.params, stream);
    else cuda::int4_mm(m.params, stream);
  } catch (const cuda::Int4ArgumentError& e) {
    throw InvalidArgument(e.argument, e.what());
  }
}

HostTensor download_int4_y(const PreparedInt4Mm& m, DType dtype) {
  std::vector<uint8_t> all(m.y.bytes());
  if (!all.empty()) cuda::check(cudaMemcpy(all.data(), m.y.get(), all.size(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  const size_t y_bytes = all.size() - 2 * kInt4GuardBytes;
  for (size_t i = 0; i < all.size(); ++i) {
    const bool guard = i < kInt4GuardBytes || i >= kInt4GuardBytes + y_bytes;
    if (guard && all[i] != kCanary)
      throw std::runtime_error("the kernel wrote outside y: guard byte " +
                               (i < kInt4GuardBytes ? std::to_string(kInt4GuardBytes - i) + " before its start"
                                                    : std::to_string(i - kInt4GuardBytes - y_bytes) + " past its end"));
  }
  HostTensor y(dtype, {m.params.m, m.params.n});
  std::memcpy(y.data(), all.data() + kInt4GuardBytes, y_bytes);
  return y;
}

namespace {

enum class Kind { gemv, mm };

class CudaInt4 final : public Impl {
 public:
  CudaInt4(Kind kind, cuda::Int4Plant plant) : kind_(kind), plant_(plant) {}
  std::string_view family() const override { return "int4_mm"; }
  std::string_view name() const override {
    switch (plant_) {
      case cuda::Int4Plant::none: return kind_ == Kind::gemv ? "cuda.int4_gemv" : "cuda.int4_mm";
      case cuda::Int4Plant::group0_scale: return "cuda.int4_gemv_group0_scale";
      case cuda::Int4Plant::nibble_swap: return "cuda.int4_gemv_nibble_swap";
      case cuda::Int4Plant::gptq_z: return "cuda.int4_gemv_gptq_z";
      case cuda::Int4Plant::zero_before_scale: return "cuda.int4_mm_zero_before_scale";
      case cuda::Int4Plant::drop_partial_k: return "cuda.int4_mm_drop_partial_k";
    }
    return "?";
  }
  std::string_view backend() const override { return "cuda"; }
  std::vector<std::string> required_caps() const override { return {"mma_sync_bf16"}; }
  bool planted() const override { return plant_ != cuda::Int4Plant::none; }

  Support supports(const opcts::Problem& pp, const ArchInfo&) const override {
    const auto& p = pp.as<Problem>();
    const std::string me(name());
    if (planted()) {
      const std::string why = int4_mm::planted_bug_cannot_show(p, planted_bug());
      if (!why.empty()) return Support::no(me + ": " + why);
    }
    if (kind_ == Kind::gemv && p.m > cuda::kInt4GemvMaxM)
      return Support::no(me + ": the gemv takes M <= 16 (cuda.int4_mm takes larger M)");
    const bool takes = kind_ == Kind::gemv ? cuda::int4_gemv_takes(format_of(p.format), p.group)
                                           : cuda::int4_mm_takes(format_of(p.format), p.group);
    if (!takes && p.expect_error.empty())  // a negative case goes to the kernel, which must refuse it
      return Support::no(me + ": does not take " + std::string(int4_mm::to_string(p.format)) + " with group size " +
                         std::to_string(p.group));
    // The buffers, y's guards, and the gemv's fp32 partial sums (a few K slices of M·N).
    const double workspace = kind_ == Kind::gemv ? 128.0 * static_cast<double>(p.m * p.n) : 0.0;
    return cuda::fits_device_memory(family_def().device_bytes(p) * 1.1 + workspace, name());
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& in, const RunContext& ctx) const override {
    const auto& p = pp.as<Problem>();
    cuda::check(cudaSetDevice(ctx.device < 0 ? 0 : ctx.device), "cudaSetDevice");
    const PreparedInt4Mm prepared = prepare_int4_mm(p, in, kind_ == Kind::gemv, plant_);
    launch_int4_mm(prepared, kind_ == Kind::gemv, nullptr);
    cuda::check(cudaDeviceSynchronize(), "int4_mm");
    TensorMap out;
    out.emplace("y", download_int4_y(prepared, p.dtype));
    return out;
  }

 private:
  int4_mm::PlantedBug planted_bug() const {
    switch (plant_) {
      case cuda::Int4Plant::group0_scale: return int4_mm::PlantedBug::group0_scale;
      case cuda::Int4Plant::nibble_swap: return int4_mm::PlantedBug::nibble_swap;
      case cuda::Int4Plant::gptq_z: return int4_mm::PlantedBug::gptq_z;
      case cuda::Int4Plant::zero_before_scale: return int4_mm::PlantedBug::zero_before_scale;
      default: return int4_mm::PlantedBug::drop_partial_k;
    }
  }

  Kind kind_;
  cuda::Int4Plant plant_;
};

}  // namespace

void register_cuda_int4_mm(Registry& reg) {
  reg.add(std::make_unique<CudaInt4>(Kind::gemv, cuda::Int4Plant::none));
  reg.add(std::make_unique<CudaInt4>(Kind::mm, cuda::Int4Plant::none));
  for (auto plant : {cuda::Int4Plant::group0_scale, cuda::Int4Plant::nibble_swap, cuda::Int4Plant::gptq_z})
    reg.add(std::make_unique<CudaInt4>(Kind::gemv, plant));
  for (auto plant : {cuda::Int4Plant::zero_before_scale, cuda::Int4Plant::drop_partial_k})
    reg.add(std::make_unique<CudaInt4>(Kind::mm, plant));
}

}  // namespace opcts
