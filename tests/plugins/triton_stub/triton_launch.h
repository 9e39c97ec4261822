/* A stand-in for the triton_launch.h plugins/triton/build.sh generates, so that CI compiles
 * plugins/triton/triton_plugin.c without Triton or a GPU: one launcher of the shape Triton 3.6's
 * AOT compiler writes for sdpa_fwd.py's signature (the stream; Q K V O LSE; 12 int64 strides; Hq,
 * group, Sq, Sk, D, the scale's bits, mask, grid_m, grid_bh as int32) and its loader. */
#include <cuda.h>
#include <stdint.h>

CUresult sdpa_fwd_stub(CUstream stream, CUdeviceptr Q, CUdeviceptr K, CUdeviceptr V, CUdeviceptr O, CUdeviceptr LSE,
                       int64_t sqb, int64_t sqh, int64_t sqs, int64_t skb, int64_t skh, int64_t sks, int64_t svb,
                       int64_t svh, int64_t svs, int64_t sob, int64_t soh, int64_t sos, int32_t Hq, int32_t group,
                       int32_t Sq, int32_t Sk, int32_t D, int32_t scale_bits, int32_t mask, int32_t grid_m,
                       int32_t grid_bh);
void load_sdpa_fwd_stub(void);
typedef __typeof__(&sdpa_fwd_stub) sdpa_launch;
#define OPCTS_TRITON_BLOCK_M 64
#define OPCTS_TRITON_CC 90
