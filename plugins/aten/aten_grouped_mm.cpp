// aten.grouped_mm: torch._grouped_mm (bf16) and torch._scaled_grouped_mm (e4m3fn with rowwise
// fp32 scales), the MoE GEMMs, in the four modes of families/grouped_mm/grouped_mm.hpp. mat2 is opcts's
// Bᵀ (K contiguous) transposed in place: B [G, K, N] or [K, N] column-major, as PyTorch's tests
// build it. offs are opcts's int32 cumulative end offsets, PyTorch's convention. PyTorch leaves the
// rows (columns) past offs[G-1] of its output undefined; the ABI wants them untouched, so only the
// groups' region is copied into opcts's output (a device-side select against offs[G-1], no sync).
#include "aten_common.hpp"

namespace opcts_aten {
namespace {

const opcts_grouped_mm_params& params_of(const void* p) { return *static_cast<const opcts_grouped_mm_params*>(p); }

int32_t supports(const void*, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  const opcts_grouped_mm_params& p = params_of(params);
  const std::string v = "PyTorch " + torch_version();
  if (p.recipe == OPCTS_GROUPED_MXFP8 && arch->compute_major < 10)
    return skip(reason, size, v + "'s _scaled_grouped_mm takes MXFP8 on sm100 and later only");
  if (p.recipe == OPCTS_GROUPED_MXFP8) return skip(reason, size, "the adapter does not pass MXFP8 grouped scales yet");
  if (p.recipe == OPCTS_GROUPED_ROWWISE_FNUZ && !has_cap(*arch, "fp8_fnuz"))
    return skip(reason, size, v + "'s _scaled_grouped_mm takes e4m3fnuz where the GPU computes in FNUZ (gfx942) only");
  if (p.recipe != OPCTS_GROUPED_BF16 && p.recipe != OPCTS_GROUPED_ROWWISE && p.recipe != OPCTS_GROUPED_ROWWISE_FNUZ)
    return skip(reason, size, "recipe " + std::to_string(p.recipe) + " is not one the adapter knows");
  return 1;
}

// PyTorch's wording (aten/src/ATen/native/cuda/GroupMM / ScaledGroupMM checks) for the
// arguments opcts's negative cases break: an offs of the wrong length fails "matrix batch sizes
// have to match"; a scale of the wrong length "... for arg 0" (scale_a) or "arg 1" (scale_b).
// "Expected mat_b shape to be divisible by 16" prints mat_b's shape; run() names the dimension.
const std::initializer_list<Phrase> kPhrases = {{"matrix batch sizes have to match", "offs"},
                                                {"offs", "offs"},
                                                {"for arg 0", "scale_a"},
                                                {"for arg 1", "scale_b"},
                                                {"strides should be multiple of 16 bytes", "K"}};

// Which of mat_b's dims PyTorch found off a multiple of 16 ([G, K, N], [K, N]; 2d_2d [k, N]).
const char* mat_b_dim(const opcts_grouped_mm_params& p) { return p.n % 16 != 0 ? "N" : "K"; }

void run_grouped(const opcts_run_args* args, const opcts_grouped_mm_params& p) {
  const int dev = args->device;
  const at::Tensor a = wrap(need(args, "a"), dev), b = wrap(need(args, "b"), dev).transpose(-2, -1);
  const opcts_tensor* offs_t = find(args, "offs");
  const at::Tensor offs = offs_t ? wrap(*offs_t, dev) : at::Tensor();
  const c10::IValue offs_arg = offs.defined() ? c10::IValue(offs) : c10::IValue();
  at::Tensor res;
  if (p.recipe == OPCTS_GROUPED_BF16) {
    res = call("aten::_grouped_mm", "",
               {{"self", a}, {"mat2", b}, {"offs", offs_arg}, {"out_dtype", static_cast<int64_t>(at::kBFloat16)}})
              .at(0)
              .toTensor();
  } else {
    at::Tensor sa = wrap(need(args, "a_scale"), dev), sb = wrap(need(args, "b_scale"), dev);
    if (p.mode == OPCTS_GROUPED_2D_2D) {  // 2d-2d: one scale per row of each group's A, flattened
      sa = sa.reshape({-1});
      sb = sb.reshape({-1});
    }
    res = call("aten::_scaled_grouped_mm", "",
               {{"self", a},
                {"mat2", b},
                {"scale_a", sa},
                {"scale_b", sb},
                {"offs", offs_arg},
                {"out_dtype", static_cast<int64_t>(at::kBFloat16)},
                {"use_fast_accum", false}})
              .at(0)
              .toTensor();
  }
  at::Tensor out = wrap(need(args, "out"), dev);
  if (p.mode == OPCTS_GROUPED_2D_3D || p.mode == OPCTS_GROUPED_3D_2D) {
    // The split dimension: rows of out (2d_3d) or its columns (3d_2d); keep what lies past the
    // last group's end as opcts left it.
    const int64_t dim = p.mode == OPCTS_GROUPED_2D_3D ? 0 : out.dim() - 1;
    const at::Tensor end = offs.narrow(0, offs.size(0) - 1, 1).to(at::kLong);
    at::Tensor inside = at::arange(out.size(dim), offs.options().dtype(at::kLong)) < end;
    inside = dim == 0 ? inside.unsqueeze(1) : inside.unsqueeze(0);
    out.copy_(at::where(inside, res, out));
  } else {
    out.copy_(res);
  }
}

opcts_status run(const void*, const opcts_run_args* args, opcts_report* report) {
  const opcts_grouped_mm_params& p = params_of(args->params);
  return guarded_run(args, report, kPhrases, [&] {
    try {
      run_grouped(args, p);
    } catch (const c10::Error& e) {
      const std::string m = e.what_without_backtrace();
      if (m.find("mat_b shape to be divisible by 16") != std::string::npos)
        throw Refusal(OPCTS_INVALID_ARGUMENT, mat_b_dim(p), "PyTorch " + torch_version() + " refused it: " + m);
      throw refusal(m, kPhrases);
    }
  });
}

}  // namespace

std::vector<ImplSpec> grouped_mm_impls() {
  return {{"grouped_mm", "aten.grouped_mm", supports, run, nullptr, nullptr}};
}

}  // namespace opcts_aten
