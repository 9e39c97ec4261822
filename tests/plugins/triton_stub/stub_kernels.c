/* The stand-in launcher and loader of triton_launch.h: never run (the object only proves that
 * plugins/triton/triton_plugin.c compiles against include/opcts/plugin.h). */
#include "triton_launch.h"

CUresult sdpa_fwd_stub(CUstream stream, CUdeviceptr Q, CUdeviceptr K, CUdeviceptr V, CUdeviceptr O, CUdeviceptr LSE,
                       int64_t sqb, int64_t sqh, int64_t sqs, int64_t skb, int64_t skh, int64_t sks, int64_t svb,
                       int64_t svh, int64_t svs, int64_t sob, int64_t soh, int64_t sos, int32_t Hq, int32_t group,
                       int32_t Sq, int32_t Sk, int32_t D, int32_t scale_bits, int32_t mask, int32_t grid_m,
                       int32_t grid_bh) {
  (void)stream, (void)Q, (void)K, (void)V, (void)O, (void)LSE, (void)sqb, (void)sqh, (void)sqs, (void)skb;
  (void)skh, (void)sks, (void)svb, (void)svh, (void)svs, (void)sob, (void)soh, (void)sos, (void)Hq, (void)group;
  (void)Sq, (void)Sk, (void)D, (void)scale_bits, (void)mask, (void)grid_m, (void)grid_bh;
  return CUDA_ERROR_NOT_SUPPORTED;
}

void load_sdpa_fwd_stub(void) {}
