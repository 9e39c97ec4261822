// cuda.cublaslt and cuda.mx_kernel: harness glue that uploads codes and scales, launches the scaled GEMM and downloads D.
//
// Planted (Impl::planted, must FAIL): cuda.cublaslt_<bug> makes the same cuBLASLt call with
// the bug applied to the inputs it is given (refimpl/scaled_mm_planted.hpp: a block scale
// doubled, one K block's scales zeroed, the output scale dropped, every scale off by 2^-8, the
// bias dropped, half of K dropped, the result doubled), so the suite proves it catches each
// under the arch's accumulator model of cuBLASLt itself.
#include <cuda_runtime_api.h>

#include <optional>

#include "device_impl/cuda/device_buffer.hpp"
#include "device_impl/cuda/device_memory.hpp"
#include "device_impl/cuda/scaled_mm_kernels.hpp"
#include "device_impl/cuda/scaled_mm_prepared.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "refimpl/scaled_mm.hpp"
#include "refimpl/scaled_mm_planted.hpp"

namespace opcts {

void register_cuda_scaled_mm(Registry& reg);

namespace {

using scaled_mm::Problem;
using scaled_mm::Recipe;

std::optional<cuda::MmElem> elem_of(DType t) {
  switch (t) {
    case DType::e4m3fn: return cuda::MmElem::e4m3;
    case DType::e5m2: return cuda::MmElem::e5m2;
    case DType::e2m1fn: return cuda::MmElem::e2m1;
    default: return std::nullopt;  // FNUZ: AMD formats
  }
}

cuda::MmOut out_of(DType t) {
  switch (t) {
    case DType::bf16: return cuda::MmOut::bf16;
    case DType::fp16: return cuda::MmOut::fp16;
    case DType::fp32: return cuda::MmOut::fp32;
    default: return cuda::MmOut::e4m3;
  }
}

cuda::MmScaleMode mode_of(const Problem& p, char which) {
  switch (p.recipe) {
    case Recipe::tensorwise: return cuda::MmScaleMode::scalar_f32;
    case Recipe::rowwise: return cuda::MmScaleMode::outer_vec_f32;
    case Recipe::blockwise_1x128_1x128: return cuda::MmScaleMode::vec128_f32;
    case Recipe::blockwise_1x128_128x128:
      return which == 'a' ? cuda::MmScaleMode::vec128_f32 : cuda::MmScaleMode::blk128x128_f32;
    case Recipe::mxfp8:
    case Recipe::mxfp4: return cuda::MmScaleMode::vec32_ue8m0;
    case Recipe::nvfp4: return cuda::MmScaleMode::vec16_ue4m3;
  }
  return cuda::MmScaleMode::scalar_f32;
}

// The capability a recipe needs on the arch (cases/archs.yaml).
const char* recipe_cap(Recipe r) {
  switch (r) {
    case Recipe::tensorwise:
    case Recipe::rowwise: return "fp8_ocp";
    case Recipe::blockwise_1x128_128x128:
    case Recipe::blockwise_1x128_1x128: return "blockwise_scaled_mm";
    case Recipe::mxfp8:
    case Recipe::mxfp4: return "mx_block_scaled_mma";
    case Recipe::nvfp4: return "nvfp4";
  }
  return "";
}

// The scale tensor the kernel reads has exactly the scales of the recipe's layout, in its
// dtype: the kernel cannot see buffer sizes, so the glue checks them (torch._scaled_mm does too).
void check_scale(const Problem& p, const HostTensor& s, char which) {
  const std::string nm = which == 'a' ? "a_scale" : "b_scale";
  const quant::Scheme sch = which == 'a' ? p.a_scheme() : p.b_scheme();
  const int64_t R = which == 'a' ? p.m : p.n;
  const DType want = quant::scale_dtype(sch);
  if (s.dtype() != want)
    throw InvalidArgument(nm, "scales must be " + std::string(name(want)) + ", not " + std::string(name(s.dtype())));
  const quant::ScaleGrid g = quant::scale_grid(sch, R, p.k);
  const bool swz = (which == 'a' ? p.a_scale_layout() : p.b_scale_layout()) == quant::ScaleLayout::swizzled;
  const int64_t count = swz ? static_cast<int64_t>(quant::swizzled_size(static_cast<size_t>(g.rows), static_cast<size_t>(g.cols)))
                            : g.rows * g.cols;
  if (s.numel() != count)
    throw InvalidArgument(nm, "expected " + std::to_string(count) + " scales, got " + std::to_string(s.numel()));
}

}  // namespace

PreparedScaledMm prepare_scaled_mm(const scaled_mm::Problem& p, const TensorMap& in) {
  const HostTensor& a = in.at("a");
  const HostTensor& b = in.at("b");
  check_scale(p, in.at("a_scale"), 'a');
  check_scale(p, in.at("b_scale"), 'b');
  // D rows padded to 16 bytes: cuBLASLt needs an aligned leading dimension (numerics.md §3).
  const int64_t per16 = std::max<int64_t>(1, 16 / storage_bytes(p.out));
  const int64_t ldd = (p.n + per16 - 1) / per16 * per16;
  PreparedScaledMm r{cuda::DeviceBuffer::upload(a), cuda::DeviceBuffer::upload(b), cuda::DeviceBuffer::upload(in.at("a_scale")),
                     cuda::DeviceBuffer::upload(in.at("b_scale")),
                     std::nullopt, std::nullopt, cuda::DeviceBuffer(storage_bytes_for(p.out, p.m * ldd)), {}};
  if (in.count("out_scale")) r.out_scale.emplace(cuda::DeviceBuffer::upload(in.at("out_scale")));
  if (in.count("bias")) r.bias.emplace(cuda::DeviceBuffer::upload(in.at("bias")));
  // Poison D with NaN bytes (0xFF is NaN in bf16, fp16, fp32 and e4m3fn) so that a kernel
  // that skips an element cannot pass.
  if (r.d.bytes()) cuda::check(cudaMemset(r.d.get(), 0xFF, r.d.bytes()), "cudaMemset");

  cuda::ScaledMmParams& k = r.params;
  k.m = p.m;
  k.n = p.n;
  k.k = p.k;
  k.a_elem = *elem_of(p.a_elem);
  k.b_elem = *elem_of(p.b_elem);
  k.a_k_major = p.a_layout == scaled_mm::Layout::row;
  k.b_k_major = p.b_layout == scaled_mm::Layout::col;
  k.lda = k.a_k_major ? a.strides()[0] : a.strides()[1];
  k.ldb = k.b_k_major ? b.strides()[0] : b.strides()[1];
  k.a_scale_mode = mode_of(p, 'a');
  k.b_scale_mode = mode_of(p, 'b');
  k.global_scale = in.count("global_scale") ? static_cast<float>(in.at("global_scale").get(0)) : 1.0f;
  k.out = out_of(p.out);
  k.ldd = ldd;
  k.fast_accum = p.fast_accum;
  k.a = r.a.get();
  k.b = r.b.get();
  k.a_scale = r.a_scale.get();
  k.b_scale = r.b_scale.get();
  k.d_scale = r.out_scale ? static_cast<const float*>(r.out_scale->get()) : nullptr;
  k.bias = r.bias ? r.bias->get() : nullptr;
  k.d = r.d.get();
  return r;
}

void launch_scaled_mm(const PreparedScaledMm& m, bool cublaslt, CUstream_st* stream) {
  try {
    if (cublaslt) cuda::scaled_mm_cublaslt(m.params, stream);
    else cuda::scaled_mm_mx_kernel(m.params, stream);
  } catch (const cuda::MmArgumentError& e) {
    throw InvalidArgument(e.argument, e.what());
  } catch (const cuda::MmLibraryRefusal& e) {
    throw Unsupported(std::string(cublaslt ? "cuda.cublaslt" : "cuda.mx_kernel") + ": cuBLASLt status " +
                      std::to_string(e.status) + ": " + e.what());
  }
}

namespace {

enum class Backend { cublaslt, mx_kernel };

class CudaScaledMm final : public Impl {
 public:
  explicit CudaScaledMm(Backend b, scaled_mm::PlantedBug bug = scaled_mm::PlantedBug::none)
      : backend_(b), bug_(bug), name_(b == Backend::cublaslt ? "cuda.cublaslt" : "cuda.mx_kernel") {
    if (bug != scaled_mm::PlantedBug::none) name_ += "_" + std::string(scaled_mm::to_string(bug));
  }
  std::string_view family() const override { return "scaled_mm"; }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "cuda"; }
  bool planted() const override { return bug_ != scaled_mm::PlantedBug::none; }

  Support supports(const opcts::Problem& pp, const ArchInfo& arch) const override {
    const auto& p = pp.as<Problem>();
    if (planted())
      if (const std::string why = scaled_mm::planted_bug_cannot_show(p, bug_); !why.empty())
        return Support::no(name_ + ": " + why);
    if (!elem_of(p.a_elem) || !elem_of(p.b_elem))
      return Support::no(std::string(name()) + ": FNUZ elements (" + std::string(opcts::name(p.a_elem)) + ", " +
                         std::string(opcts::name(p.b_elem)) + ") are AMD gfx942 formats; CUDA has no FNUZ matmul");
    // Codes, scales (a few percent at most) and D with its rows padded to 16 bytes.
    const double bytes = static_cast<double>(storage_bytes_for(p.a_elem, p.m * p.k) + storage_bytes_for(p.b_elem, p.n * p.k) +
                                             storage_bytes_for(p.out, p.m * (p.n + 16))) * 1.05;
    if (const Support fits = cuda::fits_device_memory(bytes, name()); !fits.ok) return fits;
    // The kernel interface reads VEC32_UE8M0 / VEC16_UE4M3 scales in cuBLAS's swizzled layout
    // only (scaled_mm_kernels.hpp); a row-major case is a layout these impls do not take.
    if (p.block_scaled() && p.scale_layout != quant::ScaleLayout::swizzled)
      return Support::no(std::string(name()) + ": VEC32_UE8M0 / VEC16_UE4M3 scales are read only in the swizzled layout");
    if (backend_ == Backend::mx_kernel) return Support::yes();
    const std::string cap = recipe_cap(p.recipe);
    if (!arch.has(cap))
      return Support::no("cuda.cublaslt: " + std::string(to_string(p.recipe)) + " needs capability '" + cap + "', which " +
                         arch.name + " lacks");
    if (p.a_elem == DType::e5m2 && p.b_elem == DType::e5m2)
      return Support::no("cuda.cublaslt: no e5m2 × e5m2 kernel (status 15 on sm90; PyTorch raises ValueError)");
    const bool tn = p.a_layout == scaled_mm::Layout::row && p.b_layout == scaled_mm::Layout::col;
    if (!tn && p.expect_error != "layout" && arch.compute_major > 0 && arch.compute_major < 10)
      return Support::no("cuda.cublaslt: FP8 matmul takes only the TN layout below sm_100 (status 15 on sm90; "
                         "spec/pytorch-tests.md §1.2)");
    return Support::yes();
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& given, const RunContext& ctx) const override {
    const auto& p = pp.as<Problem>();
    // The operator's argument contract (torch._scaled_mm, cuBLASLt) binds every impl, also
    // a kernel that could compute the product anyway.
    if (const auto v = scaled_mm::contract_violation(p)) throw InvalidArgument(v->argument, v->why);
    const TensorMap planted_in = planted() ? scaled_mm::planted_inputs(p, given, bug_) : TensorMap{};
    const TensorMap& in = planted() ? planted_in : given;
    cuda::check(cudaSetDevice(ctx.device < 0 ? 0 : ctx.device), "cudaSetDevice");
    auto prepared = prepare_scaled_mm(p, in);
    launch_scaled_mm(prepared, backend_ == Backend::cublaslt, nullptr);
    cuda::check(cudaDeviceSynchronize(), "scaled_mm");
    TensorMap out;
    HostTensor& d = out.emplace("d", HostTensor(p.out, {p.m, p.n})).first->second;
    const int64_t row_bytes = storage_bytes_for(p.out, p.n);
    if (d.nbytes())
      cuda::check(cudaMemcpy2D(d.data(), static_cast<size_t>(row_bytes), prepared.d.get(),
                               static_cast<size_t>(storage_bytes_for(p.out, prepared.params.ldd)),
                               static_cast<size_t>(row_bytes), static_cast<size_t>(p.m), cudaMemcpyDeviceToHost),
                  "cudaMemcpy2D D2H");
    return out;
  }

 private:
  Backend backend_;
  scaled_mm::PlantedBug bug_;
  std::string name_;
};

}  // namespace

void register_cuda_scaled_mm(Registry& reg) {
  reg.add(std::make_unique<CudaScaledMm>(Backend::cublaslt));
  reg.add(std::make_unique<CudaScaledMm>(Backend::mx_kernel));
  for (scaled_mm::PlantedBug b : scaled_mm::planted_bugs()) reg.add(std::make_unique<CudaScaledMm>(Backend::cublaslt, b));
}

}  // namespace opcts
