// The CUDA scaled_mm rows: the ABI's opcts_scaled_mm_params and tensors as the kernels'
// ScaledMmParams, and the rows' callbacks (families/scaled_mm/cuda/scaled_mm_impls.cpp, CUDA builds only).
#pragma once

#include <cstring>

#include "core/abi_enum.hpp"
#include "families/scaled_mm/cuda/scaled_mm_kernels.hpp"
#include "families/scaled_mm/scaled_mm.hpp"
#include "include/opcts/plugin.h"

namespace opcts::cuda {

/// What a scaled_mm row runs (its impl_data): cuBLASLt or opcts's own kernel.
struct ScaledMmRow {
  bool cublaslt;
};

/// The scale modes of A and B under each recipe (plugin.h's layouts): the kernels' vocabulary
/// is per operand, so a table, checked to cover every recipe.
struct MmScaleModes {
  MmScaleMode a, b;
};
inline constexpr EnumMap<scaled_mm::Recipe, MmScaleModes, 7> kMmScaleModes{{
    {scaled_mm::Recipe::tensorwise, {MmScaleMode::scalar_f32, MmScaleMode::scalar_f32}},
    {scaled_mm::Recipe::rowwise, {MmScaleMode::outer_vec_f32, MmScaleMode::outer_vec_f32}},
    {scaled_mm::Recipe::blockwise_1x128_128x128, {MmScaleMode::vec128_f32, MmScaleMode::blk128x128_f32}},
    {scaled_mm::Recipe::blockwise_1x128_1x128, {MmScaleMode::vec128_f32, MmScaleMode::vec128_f32}},
    {scaled_mm::Recipe::mxfp8, {MmScaleMode::vec32_ue8m0, MmScaleMode::vec32_ue8m0}},
    {scaled_mm::Recipe::mxfp4, {MmScaleMode::vec32_ue8m0, MmScaleMode::vec32_ue8m0}},
    {scaled_mm::Recipe::nvfp4, {MmScaleMode::vec16_ue4m3, MmScaleMode::vec16_ue4m3}},
}};
static_assert(covers(kMmScaleModes), "every scaled_mm::Recipe has its scale modes");

/// The element type of an ABI dtype; false for one CUDA has no matmul for (FNUZ: AMD's).
inline bool mm_elem_of(opcts_dtype t, MmElem* e) {
  switch (t.code) {
    case OPCTS_DL_FLOAT8_E4M3FN: *e = MmElem::e4m3; return true;
    case OPCTS_DL_FLOAT8_E5M2: *e = MmElem::e5m2; return true;
    case OPCTS_DL_FLOAT4_E2M1FN: *e = MmElem::e2m1; return true;
    default: return false;
  }
}

inline MmOut mm_out_of(opcts_dtype t) {
  if (t.code == OPCTS_DL_BFLOAT) return MmOut::bf16;
  if (t.code == OPCTS_DL_FLOAT) return t.bits == 16 ? MmOut::fp16 : MmOut::fp32;
  return MmOut::e4m3;
}

/// The kernel parameters of an ABI call: sizes, element types, layouts, scale modes from the
/// parameter struct; pointers from the tensors (a, b, a_scale, b_scale, out_scale, bias, d) when
/// given; global_scale is read by the caller (a device tensor here). D is the contiguous [M, N]
/// output (ldd = N); the caller pads it where a kernel needs aligned rows. Throws AbiValueError
/// naming "recipe" for a recipe the ABI does not name.
inline ScaledMmParams mm_kernel_params(const opcts_scaled_mm_params& c, const opcts_tensor* t = nullptr,
                                       int32_t n = 0) {
  ScaledMmParams k;
  k.m = c.m;
  k.n = c.n;
  k.k = c.k;
  mm_elem_of(c.a_elem, &k.a_elem);
  mm_elem_of(c.b_elem, &k.b_elem);
  k.a_k_major = c.a_row_major != 0;
  k.b_k_major = c.b_col_major != 0;
  k.lda = c.lda;
  k.ldb = c.ldb;
  const MmScaleModes modes = map_enum(kMmScaleModes, from_abi<scaled_mm::Recipe>(c.recipe, "recipe"));
  k.a_scale_mode = modes.a;
  k.b_scale_mode = modes.b;
  k.out = mm_out_of(c.out);
  k.ldd = c.n;
  k.fast_accum = c.fast_accum != 0;
  for (int32_t i = 0; i < n; ++i) {
    const char* nm = t[i].name;
    void* d = t[i].data;
    if (std::strcmp(nm, "a") == 0) k.a = d;
    else if (std::strcmp(nm, "b") == 0) k.b = d;
    else if (std::strcmp(nm, "a_scale") == 0) k.a_scale = d;
    else if (std::strcmp(nm, "b_scale") == 0) k.b_scale = d;
    else if (std::strcmp(nm, "out_scale") == 0) k.d_scale = static_cast<const float*>(d);
    else if (std::strcmp(nm, "bias") == 0) k.bias = d;
    else if (std::strcmp(nm, "d") == 0) k.d = d;
  }
  return k;
}

int32_t scaled_mm_row_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size);
opcts_status scaled_mm_row_run(const void* impl, const opcts_run_args* args, opcts_report* report);
void scaled_mm_row_prepare(const void* impl, const void* params,
                           const char* tactic);  // rows.hpp PrepareFn: cuBLASLt's handle and heuristic

}  // namespace opcts::cuda
