// The CUDA scaled_mm rows: the ABI's opcts_scaled_mm_params and tensors as the kernels'
// ScaledMmParams, and the rows' callbacks (families/scaled_mm/cuda/scaled_mm_impls.cpp, CUDA builds only).
#pragma once

#include <cstring>

#include "families/scaled_mm/cuda/scaled_mm_kernels.hpp"
#include "include/opcts/plugin.h"

namespace opcts::cuda {

/// What a scaled_mm row runs (its impl_data): cuBLASLt or opcts's own kernel.
struct ScaledMmRow {
  bool cublaslt;
};

/// The scale mode of operand `which` ('a' or 'b') under the ABI's recipe (plugin.h's layouts).
inline MmScaleMode mm_scale_mode(int32_t recipe, char which) {
  switch (recipe) {
    case OPCTS_MM_TENSORWISE: return MmScaleMode::scalar_f32;
    case OPCTS_MM_ROWWISE: return MmScaleMode::outer_vec_f32;
    case OPCTS_MM_BLOCKWISE_1X128_1X128: return MmScaleMode::vec128_f32;
    case OPCTS_MM_BLOCKWISE_1X128_128X128: return which == 'a' ? MmScaleMode::vec128_f32 : MmScaleMode::blk128x128_f32;
    case OPCTS_MM_MXFP8:
    case OPCTS_MM_MXFP4: return MmScaleMode::vec32_ue8m0;
    default: return MmScaleMode::vec16_ue4m3;
  }
}

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
/// output (ldd = N); the caller pads it where a kernel needs aligned rows.
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
  k.a_scale_mode = mm_scale_mode(c.recipe, 'a');
  k.b_scale_mode = mm_scale_mode(c.recipe, 'b');
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
void scaled_mm_row_prepare(const void* impl,
                           const void* params);  // rows.hpp PrepareFn: cuBLASLt's handle and heuristic

}  // namespace opcts::cuda
