// cast reference: opcts's own codec (numerics/codec.hpp) applied to every input value.
#include "families/cast/cast.hpp"

namespace opcts::cast {

HostTensor reference_output(const Problem& p, const HostTensor& in) {
  HostTensor out(p.to, in.shape());
  const int64_t n = in.numel();
// Chunks of an even size: two threads never write the two nibbles of one 4-bit byte.
#pragma omp parallel for schedule(static, 4096) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const double x = in.get(i);
    if (p.decoding()) out.set(i, x);  // every narrow value is an fp32 value
    else if (p.to == DType::e8m0fnu) out.set_code(i, encode_e8m0(x, p.rounding, p.overflow));
    else out.set_code(i, encode(p.to, x, p.overflow));
  }
  return out;
}

}  // namespace opcts::cast
