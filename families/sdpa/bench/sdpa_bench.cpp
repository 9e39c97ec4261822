// SDPA forward and backward TFLOP/s of cuda.flash (opcts's kernels) and cuda.cudnn (the cuDNN 9
// backend graph), side by side in one run, on Llama-3-8B prefill: B=1, Hq=32, Hkv=8, S=4096,
// D=128, bf16, causal lower-right and no mask. CUDA events around each call, warmup then the
// median of N. FLOPs: 4·B·Hq·Sq·Sk·D forward (halved for causal), 2.5× that backward (the
// FlashAttention-2 convention). The cuDNN plans are built before timing (like a framework's plan
// cache); the backward of each impl consumes that impl's own forward O and logsumexp.
// Usage: opcts_bench_sdpa [iters=20]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_timing.hpp"
#include "families/sdpa/cuda/sdpa_cudnn.hpp"
#include "families/sdpa/cuda/sdpa_kernels.hpp"

using namespace opcts::cuda;

namespace {

using opcts::bench::ck;
using opcts::bench::time_ms;

void* dalloc_random(size_t elems, unsigned seed) {
  std::vector<uint16_t> h(elems);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : h) {
    float f = nd(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    x = static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
  }
  void* d = nullptr;
  ck(cudaMalloc(&d, elems * 2), "cudaMalloc");
  ck(cudaMemcpy(d, h.data(), elems * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

struct Row {
  std::string impl, mask, dir, result;
};

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  const int64_t B = 1, Hq = 32, Hk = 8, S = 4096, D = 128;
  cudaDeviceProp prop{};
  ck(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const int64_t v = sdpa_cudnn_version();
  std::printf(
      "device %s (sm_%d%d), cuDNN %lld.%lld.%lld; Llama-3-8B prefill B=%lld Hq=%lld Hkv=%lld S=%lld D=%lld bf16, "
      "median of %d after 3 warmups\n",
      prop.name, prop.major, prop.minor, static_cast<long long>(v / 10000), static_cast<long long>(v / 100 % 100),
      static_cast<long long>(v % 100), static_cast<long long>(B), static_cast<long long>(Hq),
      static_cast<long long>(Hk), static_cast<long long>(S), static_cast<long long>(D), iters);

  void* q = dalloc_random(B * Hq * S * D, 1);
  void* k = dalloc_random(B * Hk * S * D, 2);
  void* vv = dalloc_random(B * Hk * S * D, 3);
  void* d_o = dalloc_random(B * Hq * S * D, 4);
  void *o = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  float* lse = nullptr;
  ck(cudaMalloc(&o, B * Hq * S * D * 2), "cudaMalloc");
  ck(cudaMalloc(&dq, B * Hq * S * D * 2), "cudaMalloc");
  ck(cudaMalloc(&dk, B * Hk * S * D * 2), "cudaMalloc");
  ck(cudaMalloc(&dv, B * Hk * S * D * 2), "cudaMalloc");
  ck(cudaMalloc(reinterpret_cast<void**>(&lse), B * Hq * S * 4), "cudaMalloc");

  std::vector<Row> rows;
  for (const SdpaMask mask : {SdpaMask::causal_lower_right, SdpaMask::none}) {
    SdpaParams p{};
    p.dtype = SdpaDType::bf16;
    p.batch = B;
    p.heads_q = Hq;
    p.heads_kv = Hk;
    p.seq_q = S;
    p.seq_k = S;
    p.head_dim = D;
    p.head_dim_v = D;
    p.scale = 1.0f / std::sqrt(static_cast<float>(D));
    p.mask = mask;
    p.window_left = p.window_right = -1;
    p.q = q;
    p.k = k;
    p.v = vv;
    p.o = o;
    p.lse = lse;
    p.q_strides = p.o_strides = contiguous_bhsd(Hq, S, D);
    p.k_strides = p.v_strides = contiguous_bhsd(Hk, S, D);
    SdpaBackwardParams bp{};
    bp.fwd = p;
    bp.d_o = d_o;
    bp.d_q = dq;
    bp.d_k = dk;
    bp.d_v = dv;
    bp.do_strides = bp.dq_strides = p.q_strides;
    bp.dk_strides = bp.dv_strides = p.k_strides;
    const bool causal = mask != SdpaMask::none;
    const double fwd_flops = 4.0 * B * Hq * S * S * D * (causal ? 0.5 : 1.0), bwd_flops = 2.5 * fwd_flops;
    const std::string mname = causal ? "causal_lr" : "none";
    auto fmt = [](double flops, double ms) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%8.1f TFLOP/s  (%.3f ms)", flops / (ms * 1e-3) / 1e12, ms);
      return std::string(buf);
    };
    auto measure = [&](const std::string& impl, const std::string& dir, double flops, const std::function<void()>& fn) {
      try {
        rows.push_back({impl, mname, dir, fmt(flops, time_ms(fn, iters))});
      } catch (const std::exception& e) {
        rows.push_back({impl, mname, dir, std::string("failed: ") + e.what()});
        cudaGetLastError();
      }
    };

    // cuda.flash
    const char* why = nullptr;
    if (!sdpa_flash_supports(p, &why)) {
      rows.push_back({"cuda.flash", mname, "fwd", std::string("unsupported: ") + (why ? why : "?")});
    } else {
      measure("cuda.flash", "fwd", fwd_flops, [&] { sdpa_flash_forward(p, nullptr); });
    }
    if (!sdpa_flash_backward_supports(bp, &why)) {
      rows.push_back({"cuda.flash", mname, "bwd", std::string("unsupported: ") + (why ? why : "?")});
    } else {
      try {
        sdpa_flash_forward(p, nullptr);  // O and logsumexp of the flash forward
        ck(cudaDeviceSynchronize(), "flash forward");
      } catch (const std::exception&) {
      }
      measure("cuda.flash", "bwd", bwd_flops, [&] { sdpa_flash_backward(bp, nullptr); });
    }

    // cuda.cudnn
    std::string why_c;
    if (!sdpa_cudnn_supports(p, true, &why_c)) {
      rows.push_back({"cuda.cudnn", mname, "fwd", "unsupported: " + why_c});
      continue;
    }
    try {
      auto fplan = SdpaCudnnPlan::forward(p);
      std::printf("cuda.cudnn %s fwd plan: %s\n", mname.c_str(), fplan->description().c_str());
      measure("cuda.cudnn", "fwd", fwd_flops, [&] { fplan->run(p, nullptr); });
      ck(cudaDeviceSynchronize(), "cudnn forward");
      auto bplan = SdpaCudnnPlan::backward(bp);
      std::printf("cuda.cudnn %s bwd plan: %s\n", mname.c_str(), bplan->description().c_str());
      fplan->run(p, nullptr);  // O and logsumexp of the cuDNN forward
      measure("cuda.cudnn", "bwd", bwd_flops, [&] { bplan->run(bp, nullptr); });
    } catch (const std::exception& e) {
      rows.push_back({"cuda.cudnn", mname, "fwd/bwd", std::string("failed: ") + e.what()});
    }
  }

  std::printf("\n%-11s %-10s %-4s %s\n", "impl", "mask", "dir", "result");
  for (const Row& r : rows)
    std::printf("%-11s %-10s %-4s %s\n", r.impl.c_str(), r.mask.c_str(), r.dir.c_str(), r.result.c_str());
  for (void* ptr : {q, k, vv, d_o, o, dq, dk, dv, static_cast<void*>(lse)}) cudaFree(ptr);
  return 0;
}
