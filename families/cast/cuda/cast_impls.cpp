// The CUDA cast rows' callbacks: the ABI's x / y descriptors onto the conversion kernels (cast_cvt.cu).
#include "gpu/portable/runtime.hpp"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "core/abi_enum.hpp"
#include "families/cast/cast.hpp"
#include "families/cast/cuda/cast_kernels.hpp"
#include "families/cast/cuda/cast_launch.hpp"

namespace opcts::cuda {

namespace {

// The kernels' e8m0 rounding of each ScaleRounding: CUDA has none to nearest.
constexpr EnumMap<ScaleRounding, std::optional<CvtScaleRound>, 3> kCvtRoundings{{
    {ScaleRounding::floor, CvtScaleRound::floor},
    {ScaleRounding::ceil, CvtScaleRound::ceil},
    {ScaleRounding::rne, std::nullopt},
}};
static_assert(covers(kCvtRoundings), "every ScaleRounding has its CUDA rounding or none");

/// The kernels' rounding of the struct's; nullopt for rne. Throws AbiValueError naming
/// "e8m0_rounding" for a value the ABI does not name.
std::optional<CvtScaleRound> cvt_rounding(const opcts_cast_params& p) {
  return map_enum(kCvtRoundings, from_abi<ScaleRounding>(p.e8m0_rounding, "e8m0_rounding"));
}

std::optional<CvtNarrow> narrow_of(opcts_dtype t) {
  switch (t.code) {
    case OPCTS_DL_FLOAT8_E4M3FN: return CvtNarrow::e4m3;
    case OPCTS_DL_FLOAT8_E5M2: return CvtNarrow::e5m2;
    case OPCTS_DL_FLOAT8_E8M0FNU: return CvtNarrow::e8m0;
    case OPCTS_DL_FLOAT6_E2M3FN: return CvtNarrow::e2m3;
    case OPCTS_DL_FLOAT6_E3M2FN: return CvtNarrow::e3m2;
    case OPCTS_DL_FLOAT4_E2M1FN: return CvtNarrow::e2m1;
    default: return std::nullopt;  // FNUZ, ue4m3, int4: CUDA has no conversion for them
  }
}

std::optional<CvtWide> wide_of(opcts_dtype t) {
  if (t.code == OPCTS_DL_FLOAT && t.bits == 32) return CvtWide::fp32;
  if (t.code == OPCTS_DL_FLOAT && t.bits == 16) return CvtWide::fp16;
  if (t.code == OPCTS_DL_BFLOAT && t.bits == 16) return CvtWide::bf16;
  return std::nullopt;
}

const char* name_of(opcts_dtype t) {
  switch (t.code) {
    case OPCTS_DL_FLOAT8_E4M3FNUZ: return "e4m3fnuz";
    case OPCTS_DL_FLOAT8_E5M2FNUZ: return "e5m2fnuz";
    case OPCTS_DL_OPCTS_UE4M3: return "ue4m3";
    case OPCTS_DL_INT: return "int4";
    case OPCTS_DL_UINT: return "uint4";
    default: return "this format";
  }
}

int32_t no(char* reason, size_t size, const char* why) {
  std::snprintf(reason, size, "%s", why);
  return 0;
}

const opcts_tensor* find(const opcts_run_args* a, const char* name) {
  for (int32_t i = 0; i < a->n_tensors; ++i)
    if (std::strcmp(a->tensors[i].name, name) == 0) return &a->tensors[i];
  return nullptr;
}

opcts_status internal(opcts_report* r, const std::string& why) {
  std::snprintf(r->message, sizeof r->message, "%s", why.c_str());
  return OPCTS_INTERNAL;
}

// A stream-ordered scratch buffer (one 4-bit code a byte), freed on the same stream.
struct Scratch {
  void* p = nullptr;
  cudaStream_t s;
  Scratch(size_t bytes, cudaStream_t stream) : s(stream) {
    if (bytes && cudaMallocAsync(&p, bytes, s) != cudaSuccess) p = nullptr;
  }
  ~Scratch() {
    if (p) (void)cudaFreeAsync(p, s);
  }
  uint8_t* get() const { return static_cast<uint8_t*>(p); }
};

// Encodes (a wide x) or decodes (a narrow x) on the stream; `ties_up` plants the bug.
opcts_status convert(const opcts_run_args* a, opcts_report* r, bool ties_up) {
  const auto* p = static_cast<const opcts_cast_params*>(a->params);
  const opcts_tensor* x = find(a, "x");
  const opcts_tensor* y = find(a, "y");
  if (!x || !y) return internal(r, "missing the tensors x or y");
  const size_t n = static_cast<size_t>(p->n);
  auto* stream = static_cast<cudaStream_t>(a->stream);
  try {
    if (const auto from = narrow_of(p->from); from && p->to.code == OPCTS_DL_FLOAT) {
      const uint8_t* codes = static_cast<const uint8_t*>(x->data);
      Scratch unpacked(x->packing == OPCTS_PACKING_NIBBLES_LOW_FIRST ? n : 0, stream);
      if (x->packing == OPCTS_PACKING_NIBBLES_LOW_FIRST) {
        if (n && !unpacked.get()) return internal(r, "cudaMallocAsync failed");
        cvt_unpack_nibbles(codes, unpacked.get(), n, stream);
        codes = unpacked.get();
      }
      cvt_decode(*from, codes, static_cast<float*>(y->data), n, stream);
      return OPCTS_OK;
    }
    const auto to = narrow_of(p->to);
    const bool packed = y->packing == OPCTS_PACKING_NIBBLES_LOW_FIRST;
    Scratch bytes(packed ? n : 0, stream);
    if (packed && n && !bytes.get()) return internal(r, "cudaMallocAsync failed");
    uint8_t* out = packed ? bytes.get() : static_cast<uint8_t*>(y->data);
    if (ties_up) {
      cvt_encode_ties_up(*to, p->satfinite != 0, static_cast<const float*>(x->data), out, n, stream);
    } else {
      // rne arrives only for targets other than e8m0, which read no rounding (cvt_supports SKIPs it there).
      const CvtScaleRound rounding = cvt_rounding(*p).value_or(CvtScaleRound::ceil);
      cvt_encode(*wide_of(p->from), *to, p->satfinite != 0, rounding, x->data, out, n, stream);
    }
    if (packed) cvt_pack_nibbles(out, static_cast<uint8_t*>(y->data), n, stream);
  } catch (const AbiValueError& e) {
    std::snprintf(r->argument, sizeof r->argument, "%s", e.field.c_str());
    std::snprintf(r->message, sizeof r->message, "%s", e.what());
    return OPCTS_INVALID_ARGUMENT;
  } catch (const std::exception& e) {
    return internal(r, e.what());
  }
  return OPCTS_OK;
}

}  // namespace

int32_t cvt_supports(const void*, const void* params, const opcts_arch*, char* reason, size_t size) {
  const auto* p = static_cast<const opcts_cast_params*>(params);
  const bool decoding = !wide_of(p->from);
  const opcts_dtype narrow = decoding ? p->from : p->to;
  if (!narrow_of(narrow)) {
    char why[128];
    std::snprintf(why, sizeof why, "CUDA has no conversion intrinsic for %s", name_of(narrow));
    return no(reason, size, why);
  }
  if (p->to.code == OPCTS_DL_FLOAT8_E8M0FNU) {
    std::optional<CvtScaleRound> rounding;
    try {
      rounding = cvt_rounding(*p);
    } catch (const AbiValueError& e) {
      return no(reason, size, e.what());
    }
    if (!rounding) return no(reason, size, "CUDA's e8m0 conversion rounds toward zero or +inf only, not to nearest");
  }
  return 1;
}

opcts_status cvt_run(const void*, const opcts_run_args* args, opcts_report* report) {
  return convert(args, report, false);
}

int32_t cvt_ties_up_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  return cvt_supports(impl, params, arch, reason, size);
}

opcts_status cvt_ties_up_run(const void*, const opcts_run_args* args, opcts_report* report) {
  return convert(args, report, true);
}

opcts_status cvt_sync_in_run(const void*, const opcts_run_args* args, opcts_report* report) {
  const opcts_status s = convert(args, report, false);
  // The plant: its error is ignored, as a launcher that "only waits" would; under capture the
  // wait is refused and the capture invalidated.
  (void)cudaStreamSynchronize(static_cast<cudaStream_t>(args->stream));
  return s;
}

}  // namespace opcts::cuda
