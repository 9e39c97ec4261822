// Standalone check of the flash SDPA kernels (sdpa_flash.cu, sdpa_flash_backward.cu) against a
// naive fp64 CPU attention on the same rounded inputs: forward O/lse and backward dQ/dK/dV
// over masks, windows, softcap, GQA, head dims, BSHD, empty sizes, fully masked rows and
// NaN-poisoned unseen K/V rows; planted variants must be caught. No harness: it needs only
// opcts_cuda_kernels, so it runs on a GPU machine while the harness is in flux. Compiled by
// nvcc (host fp16/bf16 conversions). Exit code 1 on any failure.
//
// The backward of every case runs on each path of sdpa_flash_backward, selected through its
// environment switches, and each is checked and reported on its own:
//   tc    the default (the tensor-core kernel where it applies, else the FMA kernel; the
//         line says "tc" or "fma-fallback"),
//   occ2  OPCTS_FLASH_BWD_TC_OCC2=1 (the two-blocks-per-SM tensor-core variant, D 96/128;
//         run only where it differs from tc),
//   fma   OPCTS_FLASH_BWD_FMA=1 (the FMA kernel, always).
// Usage: opcts_sdpa_flash_check [--bench] [--paths=tc,occ2,fma] [--only=SUBSTRING]
//   --paths  the backward paths to run (default all three); --paths=fma bypasses a tensor-
//            core kernel that faults (a fault ends the process);
//   --only   runs only the cases whose name contains SUBSTRING;
//   --bench  after the checks, prints forward and backward TFLOP/s (backward per path).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device_impl/cuda/sdpa_kernels.hpp"

namespace opcts::cuda {
// Defined in sdpa_flash_backward.cu, not in the header: whether sdpa_flash_backward runs the
// tensor-core kernel for these parameters under the current environment.
bool sdpa_flash_backward_uses_tensor_cores(const SdpaBackwardParams& p);
}  // namespace opcts::cuda

using namespace opcts::cuda;

namespace {

struct Case {
  const char* name;
  SdpaDType dt;
  int64_t B, Hq, Hkv, Sq, Sk, Dqk, Dv;
  SdpaMask mask = SdpaMask::none;
  int64_t wl = -1, wr = -1;
  float softcap = 0;
  SdpaMaskTensor mk = SdpaMaskTensor::none;
  bool mb = false, mh = false;
  bool bshd = false, poison = false, bwd = true;
  SdpaPlant plant = SdpaPlant::none;
};

uint16_t enc(SdpaDType dt, double x) {
  if (dt == SdpaDType::fp16) {
    __half h = __double2half(x);
    uint16_t r;
    std::memcpy(&r, &h, 2);
    return r;
  }
  __nv_bfloat16 h = __double2bfloat16(x);
  uint16_t r;
  std::memcpy(&r, &h, 2);
  return r;
}
double dec(SdpaDType dt, uint16_t b) {
  if (dt == SdpaDType::fp16) {
    __half h;
    std::memcpy(&h, &b, 2);
    return __half2float(h);
  }
  __nv_bfloat16 h;
  std::memcpy(&h, &b, 2);
  return __bfloat162float(h);
}

struct Tensor {  // logical [B, H, S, D] in double (rounded values), stored with strides
  int64_t B, H, S, D;
  std::vector<double> x;
  Tensor(int64_t b, int64_t h, int64_t s, int64_t d) : B(b), H(h), S(s), D(d), x(size_t(b * h * s * d)) {}
  double& at(int64_t b, int64_t h, int64_t s, int64_t d) { return x[size_t(((b * H + h) * S + s) * D + d)]; }
  SdpaStrides strides(bool bshd) const { return bshd ? contiguous_bshd(H, S, D) : contiguous_bhsd(H, S, D); }
  std::vector<uint16_t> store(SdpaDType dt, bool bshd) const {
    std::vector<uint16_t> r(x.size());
    const SdpaStrides st = strides(bshd);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s = 0; s < S; ++s)
          for (int64_t d = 0; d < D; ++d)
            r[size_t(b * st.batch + h * st.head + s * st.seq + d)] = enc(dt, x[size_t(((b * H + h) * S + s) * D + d)]);
    return r;
  }
  void load(SdpaDType dt, bool bshd, const std::vector<uint16_t>& r) {
    const SdpaStrides st = strides(bshd);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s = 0; s < S; ++s)
          for (int64_t d = 0; d < D; ++d)
            at(b, h, s, d) = dec(dt, r[size_t(b * st.batch + h * st.head + s * st.seq + d)]);
  }
};

void ck(cudaError_t e, const char* w) {
  if (e != cudaSuccess) {
    std::printf("CUDA error %s: %s\n", w, cudaGetErrorString(e));
    std::exit(2);
  }
}

template <typename V>
void* up(const std::vector<V>& v) {
  void* p = nullptr;
  ck(cudaMalloc(&p, std::max<size_t>(v.size() * sizeof(V), 16)), "malloc");
  if (!v.empty()) ck(cudaMemcpy(p, v.data(), v.size() * sizeof(V), cudaMemcpyHostToDevice), "h2d");
  return p;
}
void* poisoned(size_t bytes) {
  void* p = nullptr;
  ck(cudaMalloc(&p, std::max<size_t>(bytes, 16)), "malloc");
  ck(cudaMemset(p, 0xFF, std::max<size_t>(bytes, 16)), "memset");
  return p;
}
template <typename V>
std::vector<V> down(void* p, size_t n) {
  std::vector<V> v(n);
  if (n) ck(cudaMemcpy(v.data(), p, n * sizeof(V), cudaMemcpyDeviceToHost), "d2h");
  return v;
}

struct Err {
  double max_err = 0, max_ref = 0;
  int64_t bad_nan = 0;
  void add(double got, double ref) {
    if (std::isnan(got) != std::isnan(ref) || (std::isinf(ref) && got != ref) || (std::isinf(got) && got != ref)) {
      ++bad_nan;
      return;
    }
    if (!std::isfinite(ref)) return;
    max_err = std::max(max_err, std::fabs(got - ref));
    max_ref = std::max(max_ref, std::fabs(ref));
  }
  double rel() const { return max_err / std::max(1.0, max_ref); }
};

// Backward paths: the environment each one runs under.
enum class Path { tc, occ2, fma };
const char* path_name(Path p) { return p == Path::tc ? "tc" : p == Path::occ2 ? "occ2" : "fma"; }
void set_path(Path p) {
  setenv("OPCTS_FLASH_BWD_FMA", p == Path::fma ? "1" : "0", 1);
  setenv("OPCTS_FLASH_BWD_TC_OCC2", p == Path::occ2 ? "1" : "0", 1);
}
std::vector<Path> g_paths = {Path::tc, Path::occ2, Path::fma};

bool run_case(const Case& c) {
  std::mt19937_64 rng(1234 + c.Sq * 7 + c.Sk * 13 + c.Dqk);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_real_distribution<double> ud(0, 1);
  const SdpaDType dt = c.dt;
  Tensor q(c.B, c.Hq, c.Sq, c.Dqk), k(c.B, c.Hkv, c.Sk, c.Dqk), v(c.B, c.Hkv, c.Sk, c.Dv), dO(c.B, c.Hq, c.Sq, c.Dv);
  for (auto* t : {&q, &k, &v, &dO})
    for (auto& e : t->x) e = dec(dt, enc(dt, nd(rng)));
  // Interval visibility (the contract), unseen keys, mask tensor.
  const int64_t off = c.Sk - c.Sq;
  auto vis_iv = [&](int64_t i, int64_t j) {
    if (c.mask == SdpaMask::causal_upper_left && j > i) return false;
    if (c.mask == SdpaMask::causal_lower_right && j > i + off) return false;
    if (c.wl >= 0 && j < i + off - c.wl) return false;
    if (c.wr >= 0 && j > i + off + c.wr) return false;
    return true;
  };
  const int64_t Bm = c.mb ? c.B : 1, Hm = c.mh ? c.Hq : 1;
  std::vector<double> mval(size_t(Bm * Hm * c.Sq * c.Sk), 0.0);  // additive value or 1/0
  for (int64_t e = 0; e < int64_t(mval.size()); ++e) {
    const int64_t row = (e / std::max<int64_t>(c.Sk, 1)) % std::max<int64_t>(c.Sq, 1);
    const bool keep = row % 8 != 3 && ud(rng) < 0.8;
    if (c.mk == SdpaMaskTensor::boolean) mval[size_t(e)] = keep ? 1 : 0;
    else mval[size_t(e)] = keep ? dec(dt, enc(dt, nd(rng))) : -INFINITY;
  }
  const SdpaStrides ms{c.mb ? Hm * c.Sq * c.Sk : 0, c.mh ? c.Sq * c.Sk : 0, c.Sk};
  if (c.poison) {
    for (int64_t j = 0; j < c.Sk; ++j) {
      bool seen = false;
      for (int64_t i = 0; i < c.Sq && !seen; ++i) seen = vis_iv(i, j);
      if (seen) continue;
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t h = 0; h < c.Hkv; ++h) {
          for (int64_t d = 0; d < c.Dqk; ++d) k.at(b, h, j, d) = NAN;
          for (int64_t d = 0; d < c.Dv; ++d) v.at(b, h, j, d) = NAN;
        }
    }
  }
  const double scale = 1.0 / std::sqrt(double(c.Dqk));
  // fp64 reference.
  Tensor O(c.B, c.Hq, c.Sq, c.Dv), dQ(c.B, c.Hq, c.Sq, c.Dqk), dK(c.B, c.Hkv, c.Sk, c.Dqk), dV(c.B, c.Hkv, c.Sk, c.Dv);
  std::vector<double> lse(size_t(c.B * c.Hq * c.Sq));
  const int64_t group = c.Hq / std::max<int64_t>(c.Hkv, 1);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < c.Sq; ++i) {
        std::vector<double> s(size_t(c.Sk)), der(size_t(c.Sk), 1.0);
        std::vector<char> vis(size_t(c.Sk));
        double m = -INFINITY;
        for (int64_t j = 0; j < c.Sk; ++j) {
          bool ok = vis_iv(i, j);
          double add = 0;
          if (ok && c.mk != SdpaMaskTensor::none) {
            const double mv = mval[size_t(b * ms.batch + h * ms.head + i * ms.seq + j)];
            if (c.mk == SdpaMaskTensor::boolean) ok = mv != 0;
            else if (mv == -INFINITY) ok = false;
            else add = mv;
          }
          vis[size_t(j)] = ok;
          if (!ok) continue;
          double dot = 0;
          for (int64_t d = 0; d < c.Dqk; ++d) dot += q.at(b, h, i, d) * k.at(b, hk, j, d);
          double x = dot * scale;
          if (c.softcap > 0) {
            const double th = std::tanh(x / c.softcap);
            x = c.softcap * th;
            der[size_t(j)] = 1 - th * th;
          }
          s[size_t(j)] = x + add;
          m = std::max(m, s[size_t(j)]);
        }
        double& L = lse[size_t((b * c.Hq + h) * c.Sq + i)];
        if (m == -INFINITY) {
          L = -INFINITY;
          continue;  // O, dQ rows 0
        }
        double l = 0;
        for (int64_t j = 0; j < c.Sk; ++j)
          if (vis[size_t(j)]) l += std::exp(s[size_t(j)] - m);
        L = m + std::log(l);
        std::vector<double> P(size_t(c.Sk), 0.0), dP(size_t(c.Sk), 0.0);
        double Drow = 0;
        for (int64_t j = 0; j < c.Sk; ++j) {
          if (!vis[size_t(j)]) continue;
          P[size_t(j)] = std::exp(s[size_t(j)] - L);
          for (int64_t d = 0; d < c.Dv; ++d) {
            O.at(b, h, i, d) += P[size_t(j)] * v.at(b, hk, j, d);
            dP[size_t(j)] += dO.at(b, h, i, d) * v.at(b, hk, j, d);
          }
          Drow += P[size_t(j)] * dP[size_t(j)];
        }
        for (int64_t j = 0; j < c.Sk; ++j) {
          if (!vis[size_t(j)]) continue;
          const double ds = P[size_t(j)] * (dP[size_t(j)] - Drow) * der[size_t(j)];
          for (int64_t d = 0; d < c.Dqk; ++d) {
            dQ.at(b, h, i, d) += scale * ds * k.at(b, hk, j, d);
            dK.at(b, hk, j, d) += scale * ds * q.at(b, h, i, d);
          }
          for (int64_t d = 0; d < c.Dv; ++d) dV.at(b, hk, j, d) += P[size_t(j)] * dO.at(b, h, i, d);
        }
      }
    }

  // Device.
  SdpaParams p{};
  p.dtype = dt;
  p.batch = c.B; p.heads_q = c.Hq; p.heads_kv = c.Hkv; p.seq_q = c.Sq; p.seq_k = c.Sk;
  p.head_dim = c.Dqk; p.head_dim_v = c.Dv;
  p.scale = float(scale); p.softcap = c.softcap; p.mask = c.mask;
  p.window_left = c.wl; p.window_right = c.wr; p.mask_kind = c.mk; p.mask_strides = ms;
  p.q_strides = q.strides(c.bshd); p.k_strides = k.strides(c.bshd);
  p.v_strides = v.strides(c.bshd); p.o_strides = O.strides(c.bshd);
  p.plant = c.plant;
  std::vector<void*> bufs;
  p.q = up(q.store(dt, c.bshd)); p.k = up(k.store(dt, c.bshd)); p.v = up(v.store(dt, c.bshd));
  bufs = {const_cast<void*>(p.q), const_cast<void*>(p.k), const_cast<void*>(p.v)};
  if (c.mk == SdpaMaskTensor::boolean) {
    std::vector<uint8_t> mb(mval.size());
    for (size_t e = 0; e < mval.size(); ++e) mb[e] = mval[e] != 0;
    p.attn_mask = up(mb);
  } else if (c.mk == SdpaMaskTensor::additive) {
    std::vector<uint16_t> ma(mval.size());
    for (size_t e = 0; e < mval.size(); ++e) ma[e] = enc(dt, mval[e]);
    p.attn_mask = up(ma);
  }
  if (p.attn_mask) bufs.push_back(const_cast<void*>(p.attn_mask));
  p.o = poisoned(O.x.size() * 2);
  p.lse = static_cast<float*>(poisoned(lse.size() * 4));
  bufs.push_back(p.o);
  bufs.push_back(p.lse);
  const char* why = nullptr;
  if (!sdpa_flash_supports(p, &why)) {
    std::printf("FAIL %-44s unsupported: %s\n", c.name, why);
    return false;
  }
  sdpa_flash_forward(p, nullptr);
  ck(cudaDeviceSynchronize(), "forward");
  Tensor Og(c.B, c.Hq, c.Sq, c.Dv);
  Og.load(dt, c.bshd, down<uint16_t>(p.o, O.x.size()));
  const auto lg = down<float>(p.lse, lse.size());
  Err eo, el;
  for (size_t e = 0; e < O.x.size(); ++e) eo.add(Og.x[e], O.x[e]);
  for (size_t e = 0; e < lse.size(); ++e) el.add(lg[e], lse[e]);
  const double tol = dt == SdpaDType::bf16 ? 2e-2 : 4e-3;
  bool ok = eo.bad_nan == 0 && el.bad_nan == 0 && eo.rel() <= tol && el.max_err <= 2e-3 * std::max(1.0, el.max_ref);
  char line[512];
  std::snprintf(line, sizeof line, "O %.2e lse %.2e nan %lld/%lld", eo.rel(), el.max_err,
                        (long long)eo.bad_nan, (long long)el.bad_nan);
  const bool planted = c.plant != SdpaPlant::none;
  // A planted case with a backward is judged per backward path (forward and backward
  // together: a backward-only plant leaves the forward correct).
  bool pass = planted ? (c.bwd || !ok) : ok;
  std::printf("%s %-44s fwd: %s%s\n", pass ? "PASS" : "FAIL", c.name, line,
              !planted ? "" : c.bwd ? (ok ? " (plant: see bwd)" : " (plant caught by fwd)")
                                    : (ok ? " (plant NOT caught)" : " (plant caught)"));
  if (c.bwd) {
    SdpaBackwardParams bp{};
    bp.fwd = p;
    bp.d_o = up(dO.store(dt, c.bshd));
    bp.d_q = poisoned(dQ.x.size() * 2);
    bp.d_k = poisoned(dK.x.size() * 2);
    bp.d_v = poisoned(dV.x.size() * 2);
    bp.do_strides = O.strides(c.bshd);
    bp.dq_strides = q.strides(c.bshd);
    bp.dk_strides = k.strides(c.bshd);
    bp.dv_strides = v.strides(c.bshd);
    for (void* b : {const_cast<void*>(bp.d_o), bp.d_q, bp.d_k, bp.d_v}) bufs.push_back(b);
    if (!sdpa_flash_backward_supports(bp, &why)) {
      std::printf("FAIL %-44s bwd unsupported: %s\n", c.name, why);
      for (void* b : bufs) cudaFree(b);
      return false;
    }
    set_path(Path::tc);
    const bool tc_used = sdpa_flash_backward_uses_tensor_cores(bp);
    const bool occ2_differs = tc_used && (c.Dqk == 96 || c.Dqk == 128);
    for (Path path : g_paths) {
      if (path == Path::occ2 && !occ2_differs) continue;
      set_path(path);
      // Poison again: every path must write every output element.
      ck(cudaMemset(bp.d_q, 0xFF, dQ.x.size() * 2), "memset");
      ck(cudaMemset(bp.d_k, 0xFF, dK.x.size() * 2), "memset");
      ck(cudaMemset(bp.d_v, 0xFF, dV.x.size() * 2), "memset");
      sdpa_flash_backward(bp, nullptr);
      ck(cudaDeviceSynchronize(), "backward");
      Tensor g1(c.B, c.Hq, c.Sq, c.Dqk), g2(c.B, c.Hkv, c.Sk, c.Dqk), g3(c.B, c.Hkv, c.Sk, c.Dv);
      g1.load(dt, c.bshd, down<uint16_t>(bp.d_q, dQ.x.size()));
      g2.load(dt, c.bshd, down<uint16_t>(bp.d_k, dK.x.size()));
      g3.load(dt, c.bshd, down<uint16_t>(bp.d_v, dV.x.size()));
      Err e1, e2, e3;
      for (size_t e = 0; e < dQ.x.size(); ++e) e1.add(g1.x[e], dQ.x[e]);
      for (size_t e = 0; e < dK.x.size(); ++e) e2.add(g2.x[e], dK.x[e]);
      for (size_t e = 0; e < dV.x.size(); ++e) e3.add(g3.x[e], dV.x[e]);
      const double bt = dt == SdpaDType::bf16 ? 3e-2 : 8e-3;
      const bool bok = ok && e1.bad_nan + e2.bad_nan + e3.bad_nan == 0 && e1.rel() <= bt &&
                       e2.rel() <= bt && e3.rel() <= bt;
      const bool bpass = planted ? !bok : bok;
      pass = pass && bpass;
      const char* kernel = path == Path::fma ? "fma" : tc_used ? "tc" : "fma-fallback";
      std::printf("%s %-44s bwd %-4s [%-12s] dQ %.2e dK %.2e dV %.2e nan %lld%s\n", bpass ? "PASS" : "FAIL",
                  c.name, path_name(path), kernel, e1.rel(), e2.rel(), e3.rel(),
                  (long long)(e1.bad_nan + e2.bad_nan + e3.bad_nan),
                  planted ? (bok ? " (plant NOT caught)" : " (plant caught)") : "");
    }
    set_path(Path::tc);
  }
  for (void* b : bufs) cudaFree(b);
  return pass;
}

void bench(SdpaDType dt, int64_t B, int64_t Hq, int64_t Hkv, int64_t S, int64_t D, SdpaMask mask) {
  SdpaParams p{};
  p.dtype = dt; p.batch = B; p.heads_q = Hq; p.heads_kv = Hkv; p.seq_q = S; p.seq_k = S;
  p.head_dim = D; p.head_dim_v = D; p.scale = float(1 / std::sqrt(double(D))); p.mask = mask;
  p.window_left = p.window_right = -1;
  p.q_strides = p.o_strides = contiguous_bhsd(Hq, S, D);
  p.k_strides = p.v_strides = contiguous_bhsd(Hkv, S, D);
  const size_t nq = size_t(B * Hq * S * D), nk = size_t(B * Hkv * S * D);
  void *q = poisoned(nq * 2), *k = poisoned(nk * 2), *v = poisoned(nk * 2), *o = poisoned(nq * 2),
       *lse = poisoned(size_t(B * Hq * S) * 4), *dO = poisoned(nq * 2);
  {  // small random inputs: realistic exponents (all-zero inputs would make every P equal)
    std::mt19937_64 rng(7);
    std::normal_distribution<double> nd(0, 1);
    std::vector<uint16_t> h(std::max(nq, nk));
    for (void* t : {q, k, v, dO}) {
      const size_t n = (t == k || t == v) ? nk : nq;
      for (size_t e = 0; e < n; ++e) h[e] = enc(dt, nd(rng));
      ck(cudaMemcpy(t, h.data(), n * 2, cudaMemcpyHostToDevice), "h2d");
    }
  }
  p.q = q; p.k = k; p.v = v; p.o = o; p.lse = static_cast<float*>(lse);
  SdpaBackwardParams bp{};
  bp.fwd = p;
  void *dq = poisoned(nq * 2), *dk = poisoned(nk * 2), *dv = poisoned(nk * 2);
  bp.d_o = dO; bp.d_q = dq; bp.d_k = dk; bp.d_v = dv;
  bp.do_strides = bp.dq_strides = p.q_strides;
  bp.dk_strides = bp.dv_strides = p.k_strides;
  const double flops = 4.0 * B * Hq * double(S) * S * D * (mask == SdpaMask::none ? 1 : 0.5);
  char shape[160];
  std::snprintf(shape, sizeof shape, "%s B%lld Hq%lld Hkv%lld S%lld D%lld %s", dt == SdpaDType::bf16 ? "bf16" : "fp16",
                (long long)B, (long long)Hq, (long long)Hkv, (long long)S, (long long)D,
                mask == SdpaMask::none ? "nomask" : mask == SdpaMask::causal_lower_right ? "causal_lr" : "causal_ul");
  auto timeit = [&](auto&& call) {  // seconds per call: one warm-up, then ~0.2 s of calls
    call();
    ck(cudaDeviceSynchronize(), "bench");
    auto t0 = std::chrono::steady_clock::now();
    call();
    ck(cudaDeviceSynchronize(), "bench");
    const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int reps = std::max(2, std::min(50, int(0.2 / std::max(one, 1e-6))));
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) call();
    ck(cudaDeviceSynchronize(), "bench");
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  const double tf = timeit([&] { sdpa_flash_forward(p, nullptr); });
  std::printf("BENCH fwd      %s: %.3f ms, %.1f TFLOP/s\n", shape, tf * 1e3, flops / tf * 1e-12);
  for (Path path : g_paths) {
    if (path == Path::occ2 && D != 96 && D != 128) continue;
    set_path(path);
    const bool tc = sdpa_flash_backward_uses_tensor_cores(bp);
    const double tb = timeit([&] { sdpa_flash_backward(bp, nullptr); });
    std::printf("BENCH bwd %-4s %s: %.3f ms, %.1f TFLOP/s [%s]\n", path_name(path), shape, tb * 1e3,
                flops * 2.5 / tb * 1e-12, tc ? "tc" : "fma");
  }
  set_path(Path::tc);
  for (void* b : {q, k, v, o, lse, dO, dq, dk, dv}) cudaFree(b);
}

}  // namespace

int main(int argc, char** argv) {
  bool do_bench = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--bench") {
      do_bench = true;
    } else if (arg.rfind("--only=", 0) == 0) {
      only = arg.substr(7);
    } else if (arg.rfind("--paths=", 0) == 0) {
      g_paths.clear();
      std::string list = arg.substr(8) + ",";
      for (size_t pos = 0, next; (next = list.find(',', pos)) != std::string::npos; pos = next + 1) {
        const std::string name = list.substr(pos, next - pos);
        if (name == "tc") g_paths.push_back(Path::tc);
        else if (name == "occ2") g_paths.push_back(Path::occ2);
        else if (name == "fma") g_paths.push_back(Path::fma);
        else if (!name.empty()) {
          std::printf("unknown path '%s' (tc, occ2, fma)\n", name.c_str());
          return 2;
        }
      }
    } else {
      std::printf("usage: %s [--bench] [--paths=tc,occ2,fma] [--only=SUBSTRING]\n", argv[0]);
      return 2;
    }
  }
  const auto bf = SdpaDType::bf16, hf = SdpaDType::fp16;
  const auto UL = SdpaMask::causal_upper_left, LR = SdpaMask::causal_lower_right;
  const auto BOOL = SdpaMaskTensor::boolean, ADD = SdpaMaskTensor::additive;
  std::vector<Case> cs;
  auto add = [&](Case c) { cs.push_back(c); };
  add({"bf16 d64 nomask", bf, 2, 4, 4, 128, 128, 64, 64});
  add({"fp16 d128 gqa4 causal_lr sq200 sk333", hf, 1, 8, 2, 200, 333, 128, 128, LR});
  add({"bf16 d80 gqa3 causal_ul", bf, 1, 6, 2, 100, 100, 80, 80, UL});
  add({"bf16 d96 window(32,16) sq130 sk257", bf, 1, 2, 1, 130, 257, 96, 96, SdpaMask::none, 32, 16});
  add({"bf16 d32 causal_lr window(17,-1) poison", bf, 1, 2, 2, 256, 256, 32, 32, LR, 17, -1, 0, SdpaMaskTensor::none, false, false, false, true});
  add({"fp16 d64 bool per_head gqa2", hf, 2, 4, 2, 77, 150, 64, 64, SdpaMask::none, -1, -1, 0, BOOL, false, true});
  add({"bf16 d128 additive per_batch", bf, 2, 2, 2, 64, 96, 128, 128, SdpaMask::none, -1, -1, 0, ADD, true, false});
  add({"bf16 d128 bool bcast causal_lr window(40,0) poison", bf, 1, 2, 1, 150, 180, 128, 128, LR, 40, 0, 0, BOOL, false, false, false, true});
  add({"bf16 d256 softcap30", bf, 1, 2, 2, 128, 128, 256, 256, SdpaMask::none, -1, -1, 30.f});
  add({"fp16 d256 softcap5 additive causal_ul", hf, 1, 2, 1, 70, 70, 256, 256, UL, -1, -1, 5.f, ADD});
  add({"bf16 mla d192v128 gqa4 causal_lr", bf, 1, 4, 1, 96, 96, 192, 128, LR});
  add({"fp16 d192 window(10,10)", hf, 1, 2, 2, 100, 90, 192, 192, SdpaMask::none, 10, 10});
  add({"fp16 d64 bshd window(8,8) gqa2", hf, 2, 4, 2, 65, 130, 64, 64, SdpaMask::none, 8, 8, 0, SdpaMaskTensor::none, false, false, true});
  add({"bf16 d80 bshd bool per_batch+head softcap", bf, 2, 2, 1, 50, 70, 80, 80, SdpaMask::none, -1, -1, 20.f, BOOL, true, true, true});
  add({"fp16 d128 causal_lr sq100>sk40 empty rows poison", hf, 1, 2, 2, 100, 40, 128, 128, LR, -1, -1, 0, SdpaMaskTensor::none, false, false, false, true});
  add({"bf16 d64 causal_ul window(0,-1) sk>sq all empty", bf, 1, 1, 1, 64, 80, 64, 64, UL, 0, -1});
  add({"bf16 d64 window(0,0) diag only poison", bf, 1, 1, 1, 64, 200, 64, 64, SdpaMask::none, 0, 0, 0, SdpaMaskTensor::none, false, false, false, true});
  add({"bf16 sq0", bf, 2, 2, 2, 0, 64, 64, 64});
  add({"bf16 sk0", bf, 2, 2, 2, 33, 0, 64, 64});
  add({"bf16 b0", bf, 0, 2, 2, 33, 64, 64, 64});
  add({"fp16 d32 gqa8 long", hf, 1, 8, 1, 300, 700, 32, 32, LR, 100, -1});
  // Tensor-core backward coverage (Dqk == Dv in {32, 64, 96, 128}, no softcap / mask tensor):
  // tile edges (Sq, Sk not multiples of 64), both causal alignments with Sq < Sk and Sq > Sk,
  // windows crossing tiles, GQA ratios, BSHD, exact 64-multiples, several query tiles.
  add({"bf16 d128 causal_ul sq300 sk200", bf, 1, 2, 2, 300, 200, 128, 128, UL});
  add({"fp16 d128 causal_ul sq130 sk260 gqa2", hf, 1, 4, 2, 130, 260, 128, 128, UL});
  add({"bf16 d128 causal_lr sq256 sk256 exact", bf, 1, 2, 1, 256, 256, 128, 128, LR});
  add({"fp16 d64 nomask sq64 sk64", hf, 1, 1, 1, 64, 64, 64, 64});
  add({"bf16 d64 causal_lr sq333 sk129 gqa3 bshd", bf, 2, 6, 2, 333, 129, 64, 64, LR, -1, -1, 0, SdpaMaskTensor::none, false, false, true});
  add({"fp16 d96 causal_lr gqa3 sq190 sk250", hf, 1, 6, 2, 190, 250, 96, 96, LR});
  add({"bf16 d128 bshd window(100,0) gqa2 poison", bf, 1, 4, 2, 257, 300, 128, 128, SdpaMask::none, 100, 0, 0, SdpaMaskTensor::none, false, false, true, true});
  add({"fp16 d128 window(-1,30) causal_ul sq200 sk90", hf, 1, 2, 2, 200, 90, 128, 128, UL, -1, 30});
  add({"bf16 d32 window(5,70) sq150 sk400", bf, 2, 2, 1, 150, 400, 32, 32, SdpaMask::none, 5, 70});
  add({"fp16 d64 causal_ul sq1 sk300", hf, 1, 2, 2, 1, 300, 64, 64, UL});
  add({"bf16 d128 nomask sq5 sk1", bf, 1, 2, 1, 5, 1, 128, 128});
  add({"bf16 d96 gqa8 causal_lr sq512 sk512", bf, 1, 8, 1, 512, 512, 96, 96, LR});
  // Planted: must be caught.
  Case c1{"PLANT window_off_by_one", bf, 1, 2, 1, 130, 257, 96, 96, SdpaMask::none, 32, 16};
  c1.plant = SdpaPlant::window_off_by_one; add(c1);
  Case c2{"PLANT gqa_modulo", hf, 1, 8, 2, 64, 64, 64, 64, LR};
  c2.plant = SdpaPlant::gqa_modulo; c2.bwd = false; add(c2);
  Case c3{"PLANT drop_rowsum", hf, 1, 4, 2, 64, 64, 64, 64, LR};
  c3.plant = SdpaPlant::drop_rowsum; add(c3);
  Case c3b{"PLANT drop_rowsum d128 nomask", bf, 1, 2, 1, 100, 150, 128, 128};
  c3b.plant = SdpaPlant::drop_rowsum; add(c3b);
  Case c1b{"PLANT window_off_by_one d128", bf, 1, 2, 2, 200, 200, 128, 128, LR, 20, -1};
  c1b.plant = SdpaPlant::window_off_by_one; add(c1b);
  Case c4{"PLANT masked_row_nan", hf, 1, 2, 2, 100, 40, 128, 128, LR};
  c4.plant = SdpaPlant::masked_row_nan; c4.bwd = false; add(c4);
  int fails = 0, run = 0;
  for (const Case& c : cs) {
    if (!only.empty() && std::string(c.name).find(only) == std::string::npos) continue;
    ++run;
    try {
      fails += !run_case(c);
    } catch (const std::exception& e) {
      std::printf("FAIL %-44s exception: %s\n", c.name, e.what());
      ++fails;
    }
  }
  std::printf("%d of %d cases failed\n", fails, run);
  if (do_bench) {
    bench(SdpaDType::bf16, 1, 32, 8, 4096, 128, SdpaMask::causal_lower_right);
    bench(SdpaDType::bf16, 1, 32, 8, 4096, 128, SdpaMask::none);
    bench(SdpaDType::bf16, 2, 16, 16, 4096, 128, SdpaMask::causal_lower_right);
    bench(SdpaDType::bf16, 2, 16, 16, 4096, 64, SdpaMask::none);
    bench(SdpaDType::bf16, 1, 16, 16, 4096, 256, SdpaMask::causal_lower_right);
  }
  return fails ? 1 : 0;
}
