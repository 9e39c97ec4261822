// aten.scaled_mm: torch._scaled_mm (aten::_scaled_mm) with each scale recipe it takes:
// tensorwise (fp32 scalars), rowwise (fp32 [M, 1] and [1, N]), blockwise 1x128 / 128x128 (fp32,
// DeepSeek-V3's recipe, outer-dim-major), and on sm100+ MX / NVFP4 block scales in cuBLAS's
// swizzled layout. mat1 is opcts's A [M, K] row-major; mat2 is B [K, N] column-major, which is
// opcts's Bᵀ [N, K] transposed in place (no copy): the only layout _scaled_mm's cuBLASLt path
// takes (TN), so other layouts SKIP. The output comes back in PyTorch's memory and is copied into d.
#include <sstream>

#include "aten_common.hpp"

namespace opcts_aten {
namespace {

const opcts_scaled_mm_params& params_of(const void* p) { return *static_cast<const opcts_scaled_mm_params*>(p); }

bool fp8(opcts_dtype t) { return t.code == OPCTS_DL_FLOAT8_E4M3FN || t.code == OPCTS_DL_FLOAT8_E5M2; }

int32_t supports(const void*, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  const opcts_scaled_mm_params& p = params_of(params);
  const std::string v = "PyTorch " + torch_version();
  if (p.n % 16 != 0)
    return skip(reason, size,
                v + "'s _scaled_mm needs both dims of mat2 divisible by 16 (N = " + std::to_string(p.n) + ")");
  if (!p.a_row_major || !p.b_col_major)
    return skip(reason, size, v + "'s _scaled_mm takes A row-major and B column-major only (cuBLASLt's fp8 TN)");
  switch (p.recipe) {
    case OPCTS_MM_TENSORWISE:
    case OPCTS_MM_ROWWISE:
    case OPCTS_MM_BLOCKWISE_1X128_128X128:
    case OPCTS_MM_BLOCKWISE_1X128_1X128:
      if (!fp8(p.a_elem) || !fp8(p.b_elem))
        return skip(reason, size, v + "'s _scaled_mm takes these recipes on fp8 operands");
      if (p.a_elem.code == OPCTS_DL_FLOAT8_E5M2 && p.b_elem.code == OPCTS_DL_FLOAT8_E5M2)
        return skip(reason, size,
                    v + "'s _scaled_mm refuses two e5m2 operands (\"Multiplication of two Float8_e5m2 matrices is not "
                        "supported\")");
      return 1;
    case OPCTS_MM_MXFP8:
    case OPCTS_MM_MXFP4:
    case OPCTS_MM_NVFP4:
      if (arch->compute_major < 10)
        return skip(reason, size, v + "'s _scaled_mm takes MX and NVFP4 block scales on sm100 and later only");
      if (p.scale_layout != OPCTS_MM_SCALES_SWIZZLED)
        return skip(reason, size, v + "'s _scaled_mm takes block scales in cuBLAS's swizzled layout only");
      if (p.recipe != OPCTS_MM_MXFP8) return skip(reason, size, "the adapter does not pass packed fp4 operands yet");
      return 1;
  }
  return skip(reason, size, "unknown recipe");
}

// Refusals PyTorch words for opcts's negative cases (families/scaled_mm/scaled_mm.hpp's contract), first
// match wins. PyTorch refuses a malformed scale tensor as an "Invalid scaling configuration"
// without naming which one: that is reported as "scale", neither a_scale nor b_scale. K is the
// only dimension opcts's valid problems leave off a multiple of 16 (N is SKIPped below).
const std::initializer_list<Phrase> kPhrases = {
    {"Invalid scaling configuration", "scale"}, {"must be divisible by 16", "K"}, {"to be divisible by 16", "K"}};

std::string described(const char* name, const at::Tensor& t) {
  std::ostringstream s;
  s << name << " " << t.sizes() << " strides " << t.strides() << " " << t.scalar_type();
  return s.str();
}

opcts_status run(const void*, const opcts_run_args* args, opcts_report* report) {
  const opcts_scaled_mm_params& p = params_of(args->params);
  return guarded_run(args, report, kPhrases, [&] {
    const int dev = args->device;
    const at::Tensor a = wrap(need(args, "a"), dev), b = wrap(need(args, "b"), dev).t();
    at::Tensor sa = wrap(need(args, "a_scale"), dev), sb = wrap(need(args, "b_scale"), dev);
    // The scales as _scaled_mm reads them: a's per its rows, b's in B's [K, N] orientation.
    if (p.recipe == OPCTS_MM_ROWWISE && p.m * p.n > 0) {
      if (sa.numel() == p.m) sa = sa.reshape({p.m, 1});  // [M, 1]
      if (sb.numel() == p.n) sb = sb.reshape({1, p.n});  // [1, N]
    } else if (p.recipe == OPCTS_MM_BLOCKWISE_1X128_128X128 || p.recipe == OPCTS_MM_BLOCKWISE_1X128_1X128) {
      sb = sb.t();
    }
    NamedArgs named = {{"self", a},
                       {"mat2", b},
                       {"scale_a", sa},
                       {"scale_b", sb},
                       {"out_dtype", static_cast<int64_t>(scalar_type(p.out))},
                       {"use_fast_accum", p.fast_accum != 0}};
    if (p.bias) named.emplace_back("bias", wrap(need(args, "bias"), dev));
    if (const opcts_tensor* os = find(args, "out_scale")) named.emplace_back("scale_result", wrap(*os, dev));
    std::vector<c10::IValue> r;
    try {
      r = call("aten::_scaled_mm", "", named);
    } catch (const c10::Error& e) {
      // What PyTorch was handed, for a refusal whose wording names no tensor.
      throw refusal(std::string(e.what_without_backtrace()) + " [" + described("scale_a", sa) + "; " +
                        described("scale_b", sb) + "]",
                    kPhrases);
    }
    wrap(need(args, "d"), dev).copy_(r.at(0).toTensor());
  });
}

}  // namespace

std::vector<ImplSpec> scaled_mm_impls() { return {{"scaled_mm", "aten.scaled_mm", supports, run, nullptr, nullptr}}; }

}  // namespace opcts_aten
