// Planted scaled_mm bugs: where each can show, and the inputs it hands an impl.
#include "refimpl/scaled_mm_planted.hpp"

#include <cmath>

namespace opcts::scaled_mm {

namespace {

// Elements of a bf16 / fp16 / fp32 output that the bias check needs to see a 2^-8 slope: its
// noise is about λ·(spacing/2)/√(elements), and λ·2^-9/√64 is 2^-6.9 of the ~2^-7 the bug gives.
constexpr int64_t kSlopeElements = 64;

// Whether the results reach the output's range limits (saturating e4m3fn output scales,
// fp16 outputs of data shifted up), where a wrong scale is clipped away (satfinite) or lost in
// ±inf: a doubled or scaled result may compare equal there.
bool saturates(const Problem& p) {
  return (p.out == DType::e4m3fn && p.out_scale > 1) || (p.out == DType::fp16 && p.scale_exp > 0);
}

// The scale tensor's element `index` times `factor`, in its own dtype (fp32, e8m0fnu, ue4m3).
void scale_by(HostTensor& t, int64_t index, double factor) {
  const double v = t.get(index);
  t.set(index, v * factor);
}

}  // namespace

std::string_view to_string(PlantedBug b) {
  switch (b) {
    case PlantedBug::none: return "none";
    case PlantedBug::block_scale_doubled: return "block_scale_doubled";
    case PlantedBug::k_block_scale_zeroed: return "k_block_scale_zeroed";
    case PlantedBug::no_out_scale: return "no_out_scale";
    case PlantedBug::scale_error: return "scale_error";
    case PlantedBug::no_bias: return "no_bias";
    case PlantedBug::half_k: return "half_k";
    case PlantedBug::out_times_2: return "out_times_2";
  }
  return "?";
}

const std::vector<PlantedBug>& planted_bugs() {
  static const std::vector<PlantedBug> all = {PlantedBug::block_scale_doubled, PlantedBug::k_block_scale_zeroed,
                                              PlantedBug::no_out_scale,        PlantedBug::scale_error,
                                              PlantedBug::no_bias,             PlantedBug::half_k,
                                              PlantedBug::out_times_2};
  return all;
}

std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug) {
  if (!p.expect_error.empty()) return "planted impls run valid problems only";
  if (p.m * p.n == 0 || p.k == 0) return "an empty product has nothing to get wrong";
  const int64_t blk = scale_block_k(p);
  switch (bug) {
    case PlantedBug::none: return "not a planted bug";
    case PlantedBug::block_scale_doubled:
      return blk ? "" : "no block scales (one scale along K)";
    case PlantedBug::k_block_scale_zeroed:
      return blk && p.k > blk ? "" : "fewer than two K blocks of scales";
    case PlantedBug::no_out_scale:
      return p.out == DType::e4m3fn && p.out_scale != 1.0 ? "" : "no output scale other than 1 to ignore";
    case PlantedBug::scale_error:
      if (p.block_scaled()) return "e8m0 / ue4m3 scales cannot be off by 2^-8";
      if (p.out == DType::e4m3fn) return "an e4m3fn output's rounding (2^-4) hides a 2^-8 scale error in the bias check";
      if (saturates(p)) return "results at the output's range limits (saturation, overflow) hide a scale error";
      return p.m * p.n >= kSlopeElements ? "" : "too few elements for the bias check to see a 2^-8 slope";
    case PlantedBug::no_bias: return p.bias ? "" : "no bias to drop";
    case PlantedBug::half_k: return p.k >= 32 ? "" : "K too short to halve";
    case PlantedBug::out_times_2:
      return saturates(p) ? "results at the output's range limits (saturation, overflow) hide a doubling" : "";
  }
  return "";
}

TensorMap planted_inputs(const Problem& p, const TensorMap& inputs, PlantedBug bug) {
  TensorMap in = inputs;
  HostTensor& as = in.at("a_scale");
  switch (bug) {
    case PlantedBug::none: break;
    case PlantedBug::block_scale_doubled: scale_by(as, scale_index(p, 'a', 0, 0), 2.0); break;
    case PlantedBug::k_block_scale_zeroed:
      // fp32 and ue4m3 scales become 0; e8m0, which has no zero, its smallest value 2^-127.
      for (int64_t r = 0; r < p.m; ++r) scale_by(as, scale_index(p, 'a', r, 0), 0.0);
      break;
    case PlantedBug::no_out_scale: in.at("out_scale").set(0, 1.0); break;
    case PlantedBug::scale_error:
      for (const char* name : {"a_scale", "b_scale"}) {
        HostTensor& t = in.at(name);
        for (int64_t i = 0; i < t.numel(); ++i) scale_by(t, i, 1 + 0x1p-8);
      }
      break;
    case PlantedBug::no_bias: in.erase("bias"); break;
    case PlantedBug::half_k: {
      HostTensor& a = in.at("a");
      for (int64_t r = 0; r < p.m; ++r)
        for (int64_t k = p.k / 2; k < p.k; ++k) a.set(r * p.k + k, 0.0);
      break;
    }
    case PlantedBug::out_times_2:
      if (in.count("global_scale")) scale_by(in.at("global_scale"), 0, 2.0);
      else
        for (int64_t i = 0; i < as.numel(); ++i) scale_by(as, i, 2.0);
      break;
  }
  return in;
}

}  // namespace opcts::scaled_mm
