// opcts_hip_link_check: links the HIP build of the portable kernels (libopcts_hip_kernels.a)
// with libamdhip64 and names every host entry point, so an undefined symbol (a portable file
// calling into a CUDA-only one) fails the build. Runs no kernel: prints the entry points' count.
#include "gpu/portable/gpu.hpp"

#include <cstdio>

#include "families/cast/cuda/cast_kernels.hpp"
#include "families/grouped_mm/cuda/grouped_mm_args.cuh"
#include "families/indexing/cuda/indexing_kernels.hpp"
#include "families/int4_mm/cuda/int4_mm_kernels.hpp"
#include "families/scaled_mm/cuda/scaled_mm_kernels.hpp"
#include "families/sdpa/cuda/sdpa_kernels.hpp"
#include "gpu/cuda/stream_gate_kernels.hpp"

int main() {
  namespace k = opcts::cuda;
  const void* entries[] = {
      reinterpret_cast<const void*>(&k::cvt_encode),
      reinterpret_cast<const void*>(&k::cvt_decode),
      reinterpret_cast<const void*>(&k::cvt_encode_ties_up),
      reinterpret_cast<const void*>(&k::cvt_pack_nibbles),
      reinterpret_cast<const void*>(&k::cvt_unpack_nibbles),
      reinterpret_cast<const void*>(&k::first_bad_index),
      reinterpret_cast<const void*>(&k::scatter_atomic),
      reinterpret_cast<const void*>(&k::scatter_warp_aggregated),
      reinterpret_cast<const void*>(&k::gather),
      reinterpret_cast<const void*>(&k::scatter_sorted),
      reinterpret_cast<const void*>(&k::scaled_mm_mx_kernel),
      reinterpret_cast<const void*>(&k::sdpa_check_arguments),
      reinterpret_cast<const void*>(&k::sdpa_bool_mask_to_additive),
      reinterpret_cast<const void*>(&k::sdpa_flash_supports),
      reinterpret_cast<const void*>(&k::sdpa_flash_forward),
      reinterpret_cast<const void*>(&k::sdpa_flash_backward_supports),
      reinterpret_cast<const void*>(&k::sdpa_flash_backward),
      reinterpret_cast<const void*>(&k::sdpa_flash_backward_deterministic),
      reinterpret_cast<const void*>(&k::sdpa_flash_decode_supports),
      reinterpret_cast<const void*>(&k::sdpa_flash_decode_scratch_bytes),
      reinterpret_cast<const void*>(&k::sdpa_flash_decode_forward),
      reinterpret_cast<const void*>(&k::int4_gemv),
      reinterpret_cast<const void*>(&k::int4_gemv_takes),
      reinterpret_cast<const void*>(&k::int4_gemv_workspace_bytes),
      reinterpret_cast<const void*>(&k::int4_mm),
      reinterpret_cast<const void*>(&k::int4_mm_takes),
      reinterpret_cast<const void*>(&k::grouped_mm_kernel),
      reinterpret_cast<const void*>(&k::grouped_kernel_takes),
      reinterpret_cast<const void*>(&k::grouped::validate),
      reinterpret_cast<const void*>(&k::grouped::find_offs_fault),
      reinterpret_cast<const void*>(&k::grouped::find_offs_fault_device),
      reinterpret_cast<const void*>(&k::grouped::refuse_offs),
  };
  k::StreamGate* gate = nullptr;  // its constructor is an entry point too
  if (gate) gate->release();
  std::printf("opcts_hip_link_check: %zu entry points linked\n", sizeof entries / sizeof entries[0]);
  return 0;
}
