// host.cvt: the cast family on the CPU with integer bit manipulation (numerics/minifloat_bits.hpp).
//
// Independent of the reference (numerics/codec.cpp works in double with frexp/nearbyint), so
// the two check each other. host.cvt_ties_up is the same code rounding ties away from zero:
// a planted bug the suite must catch.
#include <bit>
#include <cmath>

#include "families/cast/cast.hpp"
#include "gpu/host/host_impls.hpp"
#include "numerics/minifloat_formats.hpp"

namespace opcts {

// ScaleRounding and bits::ScaleRound are one vocabulary: the ABI's e8m0 constants.
static_assert(bits::kFloor == abi_value(ScaleRounding::floor) && bits::kCeil == abi_value(ScaleRounding::ceil) &&
              bits::kRne == abi_value(ScaleRounding::rne));

namespace {

using bits::MiniFormat;

// fp32 bits of input element i (16-bit inputs widen exactly).
uint32_t fp32_bits_of(const HostTensor& x, int64_t i) {
  const uint64_t c = x.code(i);
  switch (x.dtype()) {
    case DType::fp32: return static_cast<uint32_t>(c);
    case DType::bf16: return static_cast<uint32_t>(c) << 16;
    case DType::fp16: return bits::decode_to_fp32(static_cast<uint32_t>(c), bits::mini_format(DType::fp16));
    default: throw std::invalid_argument("host.cvt encodes from fp32, fp16 or bf16");
  }
}

uint32_t int4_code(float x, bool is_signed) {
  if (std::isnan(x)) return 0;
  const float lo = is_signed ? -8.f : 0.f, hi = is_signed ? 7.f : 15.f;
  const float r = std::rint(std::fmin(std::fmax(x, lo), hi));  // rint: ties to even
  return static_cast<uint32_t>(static_cast<int>(r)) & 0xFu;
}

class HostCvt final : public Impl {
 public:
  explicit HostCvt(bool ties_up) : ties_up_(ties_up) {}
  std::string_view family() const override { return "cast"; }
  std::string_view name() const override { return ties_up_ ? "host.cvt_ties_up" : "host.cvt"; }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return ties_up_; }
  Support supports(const Problem& pp, const ArchInfo&) const override {
    const auto& p = pp.as<cast::Problem>();
    if (ties_up_ && (p.decoding() || p.to == DType::e8m0fnu || dtype_info(p.to).is_integer))
      return Support::no("host.cvt_ties_up plants its bug in encoding to fp8/fp6/fp4 only");
    // Its cases must FAIL; random inputs hit an exact tie only by chance.
    if (ties_up_ && p.input == cast::Input::random)
      return Support::no("host.cvt_ties_up: random inputs need not hold an exact tie");
    return Support::yes();
  }

  TensorMap run(const Problem& pp, const TensorMap& in, const RunContext&) const override {
    const auto& p = pp.as<cast::Problem>();
    const HostTensor& x = in.at("x");
    TensorMap out;
    HostTensor& y = out.emplace("y", HostTensor(p.to, x.shape())).first->second;
    const int64_t n = x.numel();
    const bool sat = p.overflow == Overflow::satfinite;
    const auto& to_info = dtype_info(p.to);
    // Chunks of an even size: two threads never write the two nibbles of one byte.
#pragma omp parallel for schedule(static, 4096) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      if (p.decoding()) {
        const auto c = static_cast<uint32_t>(x.code(i));
        uint32_t f;
        if (p.from == DType::e8m0fnu) f = bits::decode_e8m0_to_fp32(c);
        else if (dtype_info(p.from).is_integer)
          f = std::bit_cast<uint32_t>(static_cast<float>(decode_int4(c, dtype_info(p.from).is_signed)));
        else f = bits::decode_to_fp32(c, bits::mini_format(p.from));
        y.set_code(i, f);
        continue;
      }
      const uint32_t u = fp32_bits_of(x, i);
      uint32_t code;
      if (p.to == DType::e8m0fnu) {
        code = bits::encode_e8m0_fp32(u, static_cast<bits::ScaleRound>(abi_value(p.rounding)), sat);
      } else if (to_info.is_integer) {
        code = int4_code(std::bit_cast<float>(u), to_info.is_signed);
      } else {
        code = bits::encode_fp32(u, bits::mini_format(p.to), sat, ties_up_);
      }
      y.set_code(i, code);
    }
    return out;
  }

 private:
  bool ties_up_;
};

}  // namespace

void register_host_cast(Registry& reg) {
  reg.add(std::make_unique<HostCvt>(false));
  reg.add(std::make_unique<HostCvt>(true));
}

}  // namespace opcts
