// host.flash: an independent CPU flash-attention forward with a flash kernel's numerics.
//
// Keys are visited in tiles of kTile with a running max m, running sum l and an fp32
// accumulator (FlashAttention-2, Dao 2023, Algorithm 1): per tile, scores in fp32, the
// unnormalised probabilities rounded to the input dtype (a tensor-core P·V takes them in
// that dtype), the accumulator rescaled by exp(m_old − m_new). Final O = acc / l rounded
// to the dtype; logsumexp = m + log(l). It shares no code with refimpl's reference.
#include <algorithm>
#include <cmath>
#include <limits>

#include "device_impl/host/host_impls.hpp"
#include "refimpl/sdpa.hpp"

namespace opcts {

namespace {

constexpr int64_t kTile = 64;

class HostSdpaFlash final : public Impl {
 public:
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override { return "host.flash"; }
  std::string_view backend() const override { return "host"; }

  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }

  TensorMap run(const Problem& pp, const TensorMap& in, const RunContext&) const override {
    const auto& p = dynamic_cast<const sdpa::Problem&>(pp);
    const int64_t B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, Sq = p.seq_q, Sk = p.seq_k, D = p.head_dim;
    const int64_t group = Hq / Hkv;
    const DType t = p.dtype;
    const float scale = static_cast<float>(p.effective_scale());
    const auto decode = [](const HostTensor& x) {
      const auto d = x.to_f64();
      return std::vector<float>(d.begin(), d.end());
    };
    const std::vector<float> q = decode(in.at("q")), k = decode(in.at("k")), v = decode(in.at("v"));

    TensorMap out;
    HostTensor& o = out.emplace("O", HostTensor(t, sdpa::q_shape(p))).first->second;
    HostTensor& lse = out.emplace("lse", HostTensor(DType::fp32, sdpa::lse_shape(p))).first->second;

#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t bh = 0; bh < B * Hq; ++bh) {
      for (int64_t i = 0; i < Sq; ++i) {
        const int64_t b = bh / Hq, h = bh % Hq, hk = h / group;
        const float* qi = q.data() + (bh * Sq + i) * D;
        const float* kb = k.data() + (b * Hkv + hk) * Sk * D;
        const float* vb = v.data() + (b * Hkv + hk) * Sk * D;
        const int64_t n = p.keys_of_row(i);
        std::vector<float> acc(D, 0.0f), s(kTile);
        float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
        for (int64_t j0 = 0; j0 < n; j0 += kTile) {
          const int64_t jn = std::min(kTile, n - j0);
          float tile_max = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < jn; ++j) {
            float dot = 0.0f;
            for (int64_t d = 0; d < D; ++d) dot += qi[d] * kb[(j0 + j) * D + d];
            s[j] = dot * scale;
            tile_max = std::max(tile_max, s[j]);
          }
          const float m_new = std::max(m, tile_max);
          const float correction = std::exp(m - m_new);  // exp(-inf) = 0 on the first tile
          l *= correction;
          for (int64_t d = 0; d < D; ++d) acc[d] *= correction;
          for (int64_t j = 0; j < jn; ++j) {
            const float pj = std::exp(s[j] - m_new);
            l += pj;
            const float pr = static_cast<float>(round_to(t, pj));
            for (int64_t d = 0; d < D; ++d) acc[d] += pr * vb[(j0 + j) * D + d];
          }
          m = m_new;
        }
        const int64_t row = bh * Sq + i;
        for (int64_t d = 0; d < D; ++d) o.set(row * D + d, n > 0 ? acc[d] / l : 0.0);
        lse.set(row, n > 0 ? m + std::log(l) : -std::numeric_limits<double>::infinity());
      }
    }
    return out;
  }
};

}  // namespace

void register_host_sdpa(Registry& reg) { reg.add(std::make_unique<HostSdpaFlash>()); }

}  // namespace opcts
