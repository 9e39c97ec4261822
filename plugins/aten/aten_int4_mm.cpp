// aten.weight_int4pack_mm: torch._weight_int4pack_mm (aten::_weight_int4pack_mm, the tinygemm
// kernel) on the tiled tinygemm weight — opcts's bytes read as the int32 tensor
// [N/8, K/(16·ikt), 32, ikt/2] PyTorch's CUDA kernel takes — and on the unpacked uint8 [N, K/2]
// weight through torch._convert_weight_to_int4pack first, as users call it. w = (q − 8)·scale +
// zero with scale_and_zero [K/g, N, 2] (families/int4_mm/int4_pack.hpp). AWQ, GPTQ and Q4_0 have no
// PyTorch kernel: SKIP.
#include "aten_common.hpp"

namespace opcts_aten {
namespace {

const opcts_int4_mm_params& params_of(const void* p) { return *static_cast<const opcts_int4_mm_params*>(p); }

int32_t supports(const void*, const void* params, const opcts_arch*, char* reason, size_t size) {
  const opcts_int4_mm_params& p = params_of(params);
  const std::string v = "PyTorch " + torch_version();
  if (p.format != OPCTS_INT4_TINYGEMM && p.format != OPCTS_INT4_TINYGEMM_UNPACKED)
    return skip(reason, size, v + " has no CUDA kernel for this packing (only tinygemm's _weight_int4pack_mm)");
  if (!is(p.dtype, OPCTS_DL_BFLOAT, 16))
    return skip(reason, size, v + "'s CUDA _weight_int4pack_mm takes bf16 activations only");
  return 1;
}

// PyTorch's own checks (aten/src/ATen/native/cuda/int4mm.cu) name qGroupSize and qScaleAndZeros;
// a refusal in other words is reported as PyTorch gave it (an ERROR on a negative case).
// First match wins: the check that K is a whole number of groups names qGroupSize too.
const std::initializer_list<Phrase> kPhrases = {{"isEvenDivisor(kTiles * kKTileSize, qGroupSize)", "K"},
                                                {"kKTileSize", "K"},
                                                {"qGroupSize", "group_size"},
                                                {"qScaleAndZeros", "scale_and_zero"}};

// The unpacked format leaves innerKTiles to whoever packs it: the largest PyTorch takes that
// divides K into whole tiles (K % (16 · innerKTiles) == 0), else the problem's.
int64_t inner_k_tiles_for(const opcts_int4_mm_params& p) {
  for (int64_t t : {8, 4, 2})
    if (p.k % (16 * t) == 0) return t;
  return p.inner_k_tiles;
}

opcts_status run(const void*, const opcts_run_args* args, opcts_report* report) {
  const opcts_int4_mm_params& p = params_of(args->params);
  return guarded_run(args, report, kPhrases, [&] {
    const int dev = args->device;
    const opcts_tensor& w = need(args, "weight");
    at::Tensor packed;
    if (p.format == OPCTS_INT4_TINYGEMM) {
      if (w.ndim < 4) throw Refusal(OPCTS_INTERNAL, "", "the tiled tinygemm weight has fewer than 4 dimensions");
      packed = wrap_as(w, dev, at::kInt, {w.shape[0], w.shape[1], w.shape[2], w.shape[3]});
    } else {
      const at::Tensor bytes = wrap_as(w, dev, at::kByte, {p.n, p.k / 2});
      packed = call("aten::_convert_weight_to_int4pack", "", {{"self", bytes}, {"innerKTiles", inner_k_tiles_for(p)}})
                   .at(0)
                   .toTensor();
    }
    const auto r = call("aten::_weight_int4pack_mm", "",
                        {{"self", wrap(need(args, "x"), dev)},
                         {"mat2", packed},
                         {"qGroupSize", p.group_size},
                         {"qScaleAndZeros", wrap(need(args, "scale_and_zero"), dev)}});
    wrap(need(args, "y"), dev).copy_(r.at(0).toTensor());
  });
}

}  // namespace

std::vector<ImplSpec> int4_mm_impls() {
  return {{"int4_mm", "aten.weight_int4pack_mm", supports, run, nullptr, nullptr}};
}

}  // namespace opcts_aten
