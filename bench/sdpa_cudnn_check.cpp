// Standalone check of the cuDNN SDPA adapter (device_impl/cuda/sdpa_cudnn.hpp) against a naive
// fp64 CPU attention that follows the contract in sdpa_kernels.hpp: a few small shapes with
// causal (both alignments), windows, GQA, Dv != Dqk, softcap, an additive mask, BSHD strides and
// fp16, forward and backward. For the GPU machine, where the full suite may not build yet.
// Prints the loaded cuDNN version, then one line per case: max |err| / max |ref| per output,
// or what cuDNN refused and why. Exit status 1 when a case that ran is off by more than 3%.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cudnn_version.h>

#include "device_impl/cuda/sdpa_cudnn.hpp"

using namespace opcts::cuda;

namespace {

uint16_t to_bits(float f, SdpaDType t) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (t == SdpaDType::bf16) return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
  // fp16, round to nearest even (normal range only; inputs are N(0,1))
  const uint32_t sign = (u >> 16) & 0x8000;
  int e = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
  uint32_t m = u & 0x7FFFFF;
  if ((u & 0x7FFFFFFF) == 0x7F800000) return static_cast<uint16_t>(sign | 0x7C00);
  if (e <= 0) return static_cast<uint16_t>(sign);
  uint32_t r = (static_cast<uint32_t>(e) << 10) | (m >> 13);
  const uint32_t rest = m & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (r & 1))) ++r;
  return static_cast<uint16_t>(sign | r);
}

double from_bits(uint16_t b, SdpaDType t) {
  if (t == SdpaDType::bf16) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int e = (b >> 10) & 0x1F, m = b & 0x3FF;
  const double s = (b & 0x8000) ? -1 : 1;
  if (e == 0x1F) return m ? std::nan("") : s * INFINITY;
  if (e == 0) return s * std::ldexp(m, -24);
  return s * std::ldexp(1024 + m, e - 25);
}

struct Case {
  const char* name;
  SdpaDType dtype;
  int64_t b, hq, hkv, sq, sk, d, dv;
  SdpaMask mask;
  int64_t wl, wr;
  float softcap;
  bool bias, bshd;
  bool masked_row = false;  // additive mask row 0 all -inf: the contract wants O = 0, lse = -inf
};

struct Buf {
  std::vector<uint16_t> h;
  void* d = nullptr;
  explicit Buf(size_t n) : h(n) { cudaMalloc(&d, n * 2); }
  ~Buf() { cudaFree(d); }
  void up() { cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice); }
  void down() { cudaMemcpy(h.data(), d, h.size() * 2, cudaMemcpyDeviceToHost); }
};

bool visible(const Case& c, int64_t i, int64_t j) {
  const int64_t off = c.sk - c.sq;
  if (c.mask == SdpaMask::causal_upper_left && j > i) return false;
  if (c.mask == SdpaMask::causal_lower_right && j > i + off) return false;
  if (c.wl >= 0 && j < i + off - c.wl) return false;
  if (c.wr >= 0 && j > i + off + c.wr) return false;
  return true;
}

double rel_err(const std::vector<double>& ref, const std::vector<double>& got, bool* nan) {
  double emax = 0, rmax = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i]) && !std::isnan(ref[i])) *nan = true;
    if (std::isinf(ref[i]) && got[i] == ref[i]) continue;
    emax = std::max(emax, std::fabs(got[i] - ref[i]));
    rmax = std::max(rmax, std::fabs(ref[i]));
  }
  return emax / std::max(rmax, 1e-12);
}

int run_case(const Case& c) {
  const int64_t B = c.b, Hq = c.hq, Hk = c.hkv, Sq = c.sq, Sk = c.sk, D = c.d, Dv = c.dv;
  auto st = [&](int64_t h, int64_t s, int64_t d) { return c.bshd ? contiguous_bshd(h, s, d) : contiguous_bhsd(h, s, d); };
  SdpaParams p{};
  p.dtype = c.dtype;
  p.batch = B; p.heads_q = Hq; p.heads_kv = Hk; p.seq_q = Sq; p.seq_k = Sk; p.head_dim = D; p.head_dim_v = Dv;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  p.softcap = c.softcap;
  p.mask = c.mask;
  p.window_left = c.wl; p.window_right = c.wr;
  p.mask_kind = c.bias ? SdpaMaskTensor::additive : SdpaMaskTensor::none;
  p.mask_strides = {0, 0, Sk};  // [1, 1, Sq, Sk] broadcast
  p.q_strides = st(Hq, Sq, D); p.o_strides = st(Hq, Sq, Dv);
  p.k_strides = st(Hk, Sk, D); p.v_strides = st(Hk, Sk, Dv);
  std::string why;
  if (!sdpa_cudnn_supports(p, true, &why)) {
    std::printf("%-34s SKIP  %s\n", c.name, why.c_str());
    return 0;
  }
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  Buf q(B * Hq * Sq * D), k(B * Hk * Sk * D), v(B * Hk * Sk * Dv), o(B * Hq * Sq * Dv), dO(B * Hq * Sq * Dv),
      dq(B * Hq * Sq * D), dk(B * Hk * Sk * D), dv(B * Hk * Sk * Dv), mask(Sq * Sk);
  for (auto* b : {&q, &k, &v, &dO}) for (auto& x : b->h) x = to_bits(nd(rng), c.dtype);
  for (auto& x : mask.h) x = to_bits(nd(rng), c.dtype);
  if (c.masked_row)
    for (int64_t j = 0; j < Sk; ++j) mask.h[j] = to_bits(-INFINITY, c.dtype);
  for (auto* b : {&q, &k, &v, &dO, &mask}) b->up();
  float* lse_d = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&lse_d), B * Hq * Sq * 4);
  auto at = [](const SdpaStrides& s, int64_t b, int64_t h, int64_t i) { return b * s.batch + h * s.head + i * s.seq; };

  // fp64 reference (contract of sdpa_kernels.hpp)
  std::vector<double> O(B * Hq * Sq * Dv, 0), L(B * Hq * Sq), dQ(q.h.size(), 0), dK(k.h.size(), 0), dV(v.h.size(), 0);
  const int64_t g = Hq / Hk;
  std::vector<double> S(Sq * Sk), P(Sq * Sk), U(Sq * Sk);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / g;
      for (int64_t i = 0; i < Sq; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < Sk; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += from_bits(q.h[at(p.q_strides, b, h, i) + d], c.dtype) * from_bits(k.h[at(p.k_strides, b, kh, j) + d], c.dtype);
          s *= p.scale;
          U[i * Sk + j] = s / (c.softcap > 0 ? c.softcap : 1);
          if (c.softcap > 0) s = c.softcap * std::tanh(s / c.softcap);
          if (c.bias) s += from_bits(mask.h[i * Sk + j], c.dtype);
          if (!visible(c, i, j)) s = -INFINITY;
          S[i * Sk + j] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < Sk; ++j) sum += mx == -INFINITY ? 0 : std::exp(S[i * Sk + j] - mx);
        const double lse = sum > 0 ? mx + std::log(sum) : -INFINITY;
        L[(b * Hq + h) * Sq + i] = lse;
        for (int64_t j = 0; j < Sk; ++j) P[i * Sk + j] = sum > 0 ? std::exp(S[i * Sk + j] - lse) : 0;
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < Sk; ++j) acc += P[i * Sk + j] * from_bits(v.h[at(p.v_strides, b, kh, j) + d], c.dtype);
          O[at(p.o_strides, b, h, i) + d] = acc;
        }
      }
      // backward
      for (int64_t i = 0; i < Sq; ++i) {
        double Di = 0;
        for (int64_t d = 0; d < Dv; ++d) Di += from_bits(dO.h[at(p.o_strides, b, h, i) + d], c.dtype) * O[at(p.o_strides, b, h, i) + d];
        for (int64_t j = 0; j < Sk; ++j) {
          const double pij = P[i * Sk + j];
          if (pij == 0) continue;
          double dp = 0;
          for (int64_t d = 0; d < Dv; ++d)
            dp += from_bits(dO.h[at(p.o_strides, b, h, i) + d], c.dtype) * from_bits(v.h[at(p.v_strides, b, kh, j) + d], c.dtype);
          double ds = pij * (dp - Di);
          if (c.softcap > 0) { const double t = std::tanh(U[i * Sk + j]); ds *= 1 - t * t; }
          ds *= p.scale;
          for (int64_t d = 0; d < D; ++d) {
            dQ[at(p.q_strides, b, h, i) + d] += ds * from_bits(k.h[at(p.k_strides, b, kh, j) + d], c.dtype);
            dK[at(p.k_strides, b, kh, j) + d] += ds * from_bits(q.h[at(p.q_strides, b, h, i) + d], c.dtype);
          }
          for (int64_t d = 0; d < Dv; ++d) dV[at(p.v_strides, b, kh, j) + d] += pij * from_bits(dO.h[at(p.o_strides, b, h, i) + d], c.dtype);
        }
      }
    }

  p.q = q.d; p.k = k.d; p.v = v.d; p.o = o.d; p.lse = lse_d; p.attn_mask = c.bias ? mask.d : nullptr;
  SdpaBackwardParams bp{};
  bp.fwd = p; bp.d_o = dO.d; bp.d_q = dq.d; bp.d_k = dk.d; bp.d_v = dv.d;
  bp.do_strides = p.o_strides; bp.dq_strides = p.q_strides; bp.dk_strides = p.k_strides; bp.dv_strides = p.v_strides;
  std::string fwd_desc, bwd_desc, stage = "forward";
  try {
    auto fp = SdpaCudnnPlan::forward(p);
    fwd_desc = fp->description();
    fp->run(p, nullptr);
    cudaDeviceSynchronize();
    stage = "backward";
    auto bpl = SdpaCudnnPlan::backward(bp);
    bwd_desc = bpl->description();
    bpl->run(bp, nullptr);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
  } catch (const SdpaCudnnRefusal& e) {
    std::printf("%-34s REFUSED (%s, status %d): %s\n", c.name, stage.c_str(), e.status, e.what());
    if (stage == "forward") {
      cudaFree(lse_d);
      return 0;
    }
    // the forward ran: still report it below with the backward missing
  } catch (const std::exception& e) {
    std::printf("%-34s ERROR (%s): %s\n", c.name, stage.c_str(), e.what());
    cudaFree(lse_d);
    return 1;
  }
  std::vector<float> lse_h(B * Hq * Sq);
  cudaMemcpy(lse_h.data(), lse_d, lse_h.size() * 4, cudaMemcpyDeviceToHost);
  cudaFree(lse_d);
  for (auto* b : {&o, &dq, &dk, &dv}) b->down();
  auto dec = [&](const Buf& b) { std::vector<double> r(b.h.size()); for (size_t i = 0; i < r.size(); ++i) r[i] = from_bits(b.h[i], c.dtype); return r; };
  bool nan = false;
  const double eo = rel_err(O, dec(o), &nan);
  std::vector<double> lg(lse_h.begin(), lse_h.end());
  const double el = rel_err(L, lg, &nan);
  double eq = -1, ek = -1, ev = -1;
  if (!bwd_desc.empty()) {
    eq = rel_err(dQ, dec(dq), &nan);
    ek = rel_err(dK, dec(dk), &nan);
    ev = rel_err(dV, dec(dv), &nan);
  }
  const double worst = std::max({eo, el, eq, ek, ev});
  const bool ok = !nan && worst <= 0.03;
  std::printf("%-34s %s O %.2e lse %.2e dQ %.2e dK %.2e dV %.2e%s | fwd: %s | bwd: %s\n", c.name, ok ? "OK  " : "FAIL", eo,
              el, eq, ek, ev, nan ? " NaN" : "", fwd_desc.c_str(), bwd_desc.empty() ? "-" : bwd_desc.c_str());
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  const int64_t v = sdpa_cudnn_version();
  std::printf("cuDNN runtime version %lld (%lld.%lld.%lld), built against %d\n", static_cast<long long>(v),
              static_cast<long long>(v / 10000), static_cast<long long>(v / 100 % 100), static_cast<long long>(v % 100),
              CUDNN_VERSION);
  const auto bf = SdpaDType::bf16;
  const auto none = SdpaMask::none, ul = SdpaMask::causal_upper_left, lr = SdpaMask::causal_lower_right;
  const Case cases[] = {
      {"mha_none_s128_d64", bf, 2, 4, 4, 128, 128, 64, 64, none, -1, -1, 0, false, false},
      {"gqa8_2_causal_lr_sq128_sk256_d128", bf, 1, 8, 2, 128, 256, 128, 128, lr, -1, -1, 0, false, false},
      {"causal_ul_s192_d64 (sk%128!=0)", bf, 1, 4, 4, 192, 192, 64, 64, ul, -1, -1, 0, false, false},
      {"causal_ul_sq64_sk256", bf, 1, 2, 2, 64, 256, 64, 64, ul, -1, -1, 0, false, false},
      {"window64_0_s256 (TL)", bf, 1, 2, 2, 256, 256, 64, 64, none, 64, 0, 0, false, false},
      {"window32_16_sq128_sk384 (BR)", bf, 1, 2, 1, 128, 384, 64, 64, none, 32, 16, 0, false, false},
      {"causal_lr+window48_sq128_sk256", bf, 1, 2, 2, 128, 256, 64, 64, lr, 48, -1, 0, false, false},
      {"window128_128_s1280 (9.14.0 bug)", bf, 1, 2, 2, 1280, 1280, 64, 64, none, 128, 128, 0, false, false},
      {"dqk128_dv64_none", bf, 1, 4, 2, 128, 128, 128, 64, none, -1, -1, 0, false, false},
      {"softcap30_none", bf, 1, 2, 2, 128, 128, 64, 64, none, -1, -1, 30.f, false, false},
      {"bias_causal_ul_s128", bf, 1, 2, 2, 128, 128, 64, 64, ul, -1, -1, 0, true, false},
      {"bshd_gqa4_1_causal_lr_s256", bf, 2, 4, 1, 256, 256, 64, 64, lr, -1, -1, 0, false, true},
      {"window128_-1_s2048 (9.14.0 trigger)", bf, 1, 2, 2, 2048, 2048, 64, 64, none, 128, -1, 0, false, false},
      {"window200_-1_sq256_sk1536 (BR)", bf, 1, 2, 2, 256, 1536, 64, 64, none, 200, -1, 0, false, false},
      {"bias_row0_all_-inf_s128", bf, 1, 2, 2, 128, 128, 64, 64, none, -1, -1, 0, true, false, true},
      {"fp16_causal_lr_sq100_sk300_d96", SdpaDType::fp16, 1, 2, 2, 100, 300, 96, 96, lr, -1, -1, 0, false, false},
  };
  int bad = 0;
  for (const Case& c : cases) bad += run_case(c);
  std::printf("%d case(s) off\n", bad);
  return bad ? 1 : 0;
}
