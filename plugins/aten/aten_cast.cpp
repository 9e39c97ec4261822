// aten.cast: Tensor.to(dtype) (aten::_to_copy) between fp32/fp16/bf16/fp64 and PyTorch's fp8
// dtypes (e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, e8m0fnu), judged under PyTorch's own policy so that a
// policy difference is never reported as a kernel bug: PyTorch rounds to nearest even and does not
// saturate (e4m3fn overflow is NaN, e5m2 overflow Inf; c10/util/Float8_*.h), so only opcts's
// nonsaturating problems run, and e8m0 targets only with round-to-nearest (c10's
// fp8e8m0fnu_from_fp32_value). Formats PyTorch has no element dtype for (ue4m3, fp6, fp4 codes,
// int4) SKIP.
#include "aten_common.hpp"

namespace opcts_aten {
namespace {

const opcts_cast_params& params_of(const void* p) { return *static_cast<const opcts_cast_params*>(p); }

bool has_dtype(opcts_dtype t) {
  try {
    (void)scalar_type(t);
    return t.bits >= 8;
  } catch (const Refusal&) {
    return false;
  }
}

bool narrow(opcts_dtype t) { return t.bits == 8 && t.code != OPCTS_DL_INT && t.code != OPCTS_DL_UINT; }

int32_t supports(const void*, const void* params, const opcts_arch*, char* reason, size_t size) {
  const opcts_cast_params& p = params_of(params);
  const std::string v = "PyTorch " + torch_version();
  if (!has_dtype(p.from) || !has_dtype(p.to)) return skip(reason, size, v + " has no element dtype for this format");
  if (narrow(p.to) && p.satfinite)
    return skip(
        reason, size,
        v + "'s .to(float8) does not saturate (its policy: NaN or Inf on overflow); run the nonsaturating cases");
  if (p.to.code == OPCTS_DL_FLOAT8_E8M0FNU && p.e8m0_rounding != OPCTS_E8M0_RNE)
    return skip(reason, size, v + "'s .to(float8_e8m0fnu) rounds to nearest only");
  return 1;
}

opcts_status run(const void*, const opcts_run_args* args, opcts_report* report) {
  const opcts_cast_params& p = params_of(args->params);
  return guarded_run(args, report, {}, [&] {
    const at::Tensor x = wrap(need(args, "x"), args->device);
    wrap(need(args, "y"), args->device).copy_(x.to(scalar_type(p.to)));
  });
}

}  // namespace

std::vector<ImplSpec> cast_impls() { return {{"cast", "aten.cast", supports, run, nullptr, nullptr}}; }

}  // namespace opcts_aten
