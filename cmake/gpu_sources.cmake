# The GPU glue's sources, one list for both runtimes: every .cpp of gpu/cuda/ and of each wing's
# cuda/ (the rows' callbacks, the ABI backend, the prepared launches) but the rows (every build,
# CMakeLists.txt's opcts_cuda_rows) and the vendor adapters (cuBLASLt, cuBLAS, cuDNN: plain C++ in
# the CUDA kernels' library). opcts_cuda builds the list with the CUDA runtime, opcts_hip
# (cmake/hip.cmake) the same files against HIP (gpu/portable/runtime.hpp, the one file that
# differs by runtime), less the cuDNN glue, which calls a vendor library with no HIP build.
#
# Both lists are written at configure time to gpu_glue_sources/<runtime>.txt in the build folder:
# tests/test_gpu_backend_sources.cpp holds them to that (the same files but the vendor glue).
set(OPCTS_GPU_VENDOR_REGEX "/(scaled_mm_cublaslt|grouped_mm_cublas|sdpa_cudnn)\\.cpp$")
set(OPCTS_GPU_CUDNN_GLUE_REGEX "/sdpa_cudnn_impls\\.cpp$")
set(OPCTS_GPU_ROWS_REGEX "/(rows|[a-z0-9_]+_rows)\\.cpp$")

# opcts_gpu_glue_sources(cuda|hip OUT): the glue's sources for that runtime, as absolute paths.
function(opcts_gpu_glue_sources runtime out)
  file(GLOB files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/gpu/cuda/*.cpp ${CMAKE_SOURCE_DIR}/families/*/cuda/*.cpp)
  list(FILTER files EXCLUDE REGEX "${OPCTS_GPU_VENDOR_REGEX}")
  list(FILTER files EXCLUDE REGEX "${OPCTS_GPU_ROWS_REGEX}")
  if(runtime STREQUAL "hip")
    list(FILTER files EXCLUDE REGEX "${OPCTS_GPU_CUDNN_GLUE_REGEX}")
  endif()
  set(${out} ${files} PARENT_SCOPE)
endfunction()

foreach(runtime cuda hip)
  opcts_gpu_glue_sources(${runtime} files)
  set(text "")
  foreach(f IN LISTS files)
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${f})
    string(APPEND text "${rel}\n")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/gpu_glue_sources/${runtime}.txt "${text}")
endforeach()
