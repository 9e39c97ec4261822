// The runtime-name mapping: the one file that differs between the CUDA and the HIP build of
// opcts's GPU code. Everything else (the kernels, the ABI backend, the rows' callbacks) keeps
// CUDA's spelling and includes this header (kernels through gpu.hpp), so nvcc and g++ build it
// against the CUDA runtime and hipcc, or g++ with OPCTS_GPU_RUNTIME_HIP=1 (the HIP backend's
// host code, cmake/hip.cmake), against HIP's.
//
// Under CUDA it only includes the CUDA runtime's API and names what the backend reports per
// runtime (kRuntime). Under HIP it maps the runtime calls and types (cudaX -> hipX, CUstream_st ->
// ihipStream_t, the struct hipStream_t points to), the way ggml's vendors/hip.h does, and:
//   - the legacy default stream: HIP 5.2 has no hipStreamLegacy; its null stream is the blocking
//     stream every blocking stream waits for and that waits for them (HIP programming guide,
//     "Stream synchronization"), which is what the backend synchronises;
//   - the errors that leave a context unusable (is_sticky_error): HIP 5.2 has no
//     IllegalInstruction, MisalignedAddress, InvalidPc or HardwareStackError codes;
//   - a device missing: hipErrorNoDevice, and hipErrorInsufficientDriver where no amdgpu/KFD
//     driver is loaded, both "no ROCm device found";
//   - vendor libraries (cuBLAS, cuBLASLt, cuDNN): absent, so a call through OPCTS_CUDA_VENDOR
//     throws naming it (only cuda.* rows that the HIP build never runs make such calls).
// Sources: HIP 5.2 headers (/usr/include/hip/hip_runtime_api.h); HIP programming guide.
#pragma once

#if defined(__HIPCC__)
#define OPCTS_GPU_HIP 1
#include <hip/hip_runtime.h>  // hipcc: the whole runtime first (its vector types differ with the API header alone)
#elif defined(OPCTS_GPU_RUNTIME_HIP) && OPCTS_GPU_RUNTIME_HIP
#define OPCTS_GPU_HIP 1
#if !defined(__HIP_PLATFORM_AMD__) && !defined(__HIP_PLATFORM_HCC__)
#define __HIP_PLATFORM_AMD__ 1  // g++ compiling the HIP backend's host code
#endif
#include <hip/hip_runtime_api.h>
#else
#define OPCTS_GPU_HIP 0
#include <cuda_runtime_api.h>
#endif

#include <stdexcept>
#include <string>

#if OPCTS_GPU_HIP
#define CUstream_st ihipStream_t
#define cudaStream_t hipStream_t
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaGetLastError hipGetLastError
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaMemGetInfo hipMemGetInfo
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocAsync hipMallocAsync
#define cudaFreeAsync hipFreeAsync
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy2DAsync hipMemcpy2DAsync
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamLegacy (static_cast<hipStream_t>(nullptr))
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocMapped (hipHostMallocMapped | hipHostMallocCoherent)  // the gate spins on it (end of file)
#define cudaHostGetDevicePointer hipHostGetDevicePointer
#define cudaFreeHost hipHostFree
#define cudaGraph_t hipGraph_t  // --capture's recordings (gpu/cuda/abi_backend.cpp)
#define cudaGraphExec_t hipGraphExec_t
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamCaptureModeGlobal hipStreamCaptureModeGlobal
#define cudaGraphGetNodes hipGraphGetNodes
#define cudaGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaGraphDestroy hipGraphDestroy
#endif

namespace opcts::gpu {

/// The runtime this build's GPU code runs on, in a user's words: the backend's name ("cuda",
/// "hip"), the runtime's, what a machine without its device lacks, the file its kernel driver
/// makes and what its absence means; and whether the backend SKIPs its rows on a machine with
/// no device (HIP: a ROCm build is run on machines without AMD GPUs, CI's among them) or leaves
/// the run to report the runtime's error (CUDA, as it always did).
struct Runtime {
  const char* backend;
  const char* name;
  const char* no_device;
  const char* driver_file;
  const char* no_driver;
  bool skips_without_device;
};
#if OPCTS_GPU_HIP
inline constexpr Runtime kRuntime{"hip", "HIP", "no ROCm device found", "/dev/kfd", "no amdgpu (KFD) driver is loaded",
                                  true};
#else
inline constexpr Runtime kRuntime{
    "cuda", "CUDA", "no NVIDIA GPU found", "/proc/driver/nvidia/version", "no NVIDIA driver is loaded", false};
#endif

/// Whether `e` leaves the context unusable (the worker must restart: DeviceLost).
inline bool is_sticky_error(cudaError_t e) {
  switch (e) {
#if OPCTS_GPU_HIP
    case hipErrorIllegalAddress:
    case hipErrorLaunchFailure:
    case hipErrorAssert:
    case hipErrorECCNotCorrectable:
    case hipErrorLaunchTimeOut: return true;
#else
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout: return true;
#endif
    default: return false;
  }
}

/// Where a vendor library of the CUDA build is called under HIP (OPCTS_CUDA_VENDOR).
[[noreturn]] inline void vendor_missing(const char* call) {
  throw std::runtime_error(std::string("not in a HIP build (a CUDA vendor library): ") + call);
}

}  // namespace opcts::gpu

/// A call into a CUDA vendor library (cuBLAS, cuBLASLt, cuDNN) or a kernel file that is
/// cuda_only in gpu/portable/kernels.txt: the call itself under CUDA; under HIP a throw naming it,
/// and nothing of it is referenced (HIP's build links none of those). OPCTS_CUDA_VENDOR_OR gives
/// `value` under HIP instead, for a query such as "does the vendor path take this?".
#if OPCTS_GPU_HIP
#define OPCTS_CUDA_VENDOR(call) ::opcts::gpu::vendor_missing(#call)
#define OPCTS_CUDA_VENDOR_OR(call, value) (value)
#else
#define OPCTS_CUDA_VENDOR(call) (call)
#define OPCTS_CUDA_VENDOR_OR(call, value) (call)
#endif

// The stream gate's flags (gpu/cuda/stream_gate.cu) are host memory a kernel spins on while the
// host writes it. HIP's mapped host memory is coarse-grained (cached by the device) unless asked
// to be coherent, so a spinning kernel need not see the release until its timeout: under HIP
// cudaHostAllocMapped is hipHostMallocMapped | hipHostMallocCoherent (fine-grained; HIP
// programming guide, "Coherency controls").
