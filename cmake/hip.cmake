# HIP: the portable kernels of gpu/cuda/ and families/*/cuda/ (listed by their paths in
# gpu/portable/kernels.txt) built with hipcc for OPCTS_HIP_ARCHS, from the same files
# nvcc builds (gpu/portable/gpu.hpp).
#
# Compiled and archived into libopcts_hip_kernels.a, and linked with libamdhip64 into
# opcts_hip_link_check (a program that takes each entry point's address and runs no kernel: the
# build runs it, no ROCm device needed). The hipcc call is a custom command, not CMake's HIP
# language: CMake 3.25 looks for hip-lang under /usr/lib/cmake, where Debian's libamdhip64-dev
# does not put it.
#
# With OPCTS_HIP=ON in a build without CUDA (the hip preset), opcts also gets the HIP backend
# (OPCTS_HAVE_HIP_BACKEND, opcts_add_hip_backend): the GPU glue's files (cmake/gpu_sources.cmake),
# the same ones opcts_cuda builds, compiled by the C++ compiler against HIP's runtime API
# (OPCTS_GPU_RUNTIME_HIP=1: gpu/portable/runtime.hpp) and linked with the kernels' archive and
# libamdhip64; the hip.* rows then run where a ROCm device is found and SKIP ("no ROCm device
# found") elsewhere. AUTO (CI's run-tests.sh and run-suite.sh) builds the kernels only, so that
# no binary of those builds needs libamdhip64 where it runs; a build with CUDA keeps the CUDA
# backend (one GPU backend a binary: the kernels of both live in namespace opcts::cuda).
set(OPCTS_HIP AUTO CACHE STRING "Build the portable kernels with hipcc: AUTO (when hipcc is found), ON or OFF")
set_property(CACHE OPCTS_HIP PROPERTY STRINGS AUTO ON OFF)
set(OPCTS_HIP_ARCHS "gfx90a;gfx940" CACHE STRING "AMD targets the portable kernels are built for (hipcc --offload-arch)")
# The kernels' optimisation. -O3 for a build that runs them; run-tests.sh (CI, no AMD device)
# asks for -O0: its HIP objects are a compile check that nothing runs, and at -O3 the register
# allocation of the flash kernels, which spill past 256 VGPRs on gfx90a, is most of the HIP build
# (sdpa_flash.cu for gfx90a: 82 s at -O3, 84 s at -O2, 104 s at -O1, 5 s at -O0, measured here).
# A cache variable: a build folder run-tests.sh or run-suite.sh configured (both the same way,
# scripts/common.sh) keeps -O0 until configured with -DOPCTS_HIP_OPT=-O3, which a HIP backend
# that runs the objects will want (the configure line says which).
set(OPCTS_HIP_OPT -O3 CACHE STRING "hipcc optimisation of the portable kernels (-O3; -O0 for a compile check)")

set(OPCTS_HAVE_HIP OFF)
if(NOT OPCTS_HIP STREQUAL "OFF")
  find_program(OPCTS_HIPCC hipcc)
  # rocPRIM (header-only, librocprim-dev): cuda.sorted's sort, scan and segmented reduction
  # under HIP (gpu/portable/device_prims.cuh); without it indexing_sorted.cu would not
  # compile, so it is required with hipcc.
  find_path(OPCTS_ROCPRIM_INCLUDE_DIR rocprim/rocprim.hpp)
  if(OPCTS_HIPCC AND OPCTS_ROCPRIM_INCLUDE_DIR)
    set(OPCTS_HAVE_HIP ON)
  elseif(OPCTS_HIP STREQUAL "ON")
    message(FATAL_ERROR "OPCTS_HIP=ON but hipcc (${OPCTS_HIPCC}) or rocPRIM (${OPCTS_ROCPRIM_INCLUDE_DIR}) was not found "
                        "(apt-get install hipcc librocprim-dev, or set OPCTS_HIPCC / OPCTS_ROCPRIM_INCLUDE_DIR)")
  elseif(OPCTS_HIPCC)
    message(STATUS "opcts: hipcc found but not rocPRIM (apt-get install librocprim-dev): HIP kernels OFF")
  endif()
endif()
set(OPCTS_HAVE_HIP_BACKEND OFF)
if(OPCTS_HAVE_HIP AND OPCTS_HIP STREQUAL "ON")
  if(OPCTS_HAVE_CUDA)
    message(STATUS "opcts: HIP backend OFF: this build has CUDA's (configure with OPCTS_CUDA=OFF, the hip preset)")
  else()
    set(OPCTS_HAVE_HIP_BACKEND ON)
  endif()
endif()
message(STATUS "opcts: HIP kernels ${OPCTS_HAVE_HIP} (${OPCTS_HIP_ARCHS}, ${OPCTS_HIP_OPT}), HIP backend ${OPCTS_HAVE_HIP_BACKEND}")

# The portable kernel files, from gpu/portable/kernels.txt.
function(opcts_hip_portable_files out)
  file(STRINGS ${CMAKE_SOURCE_DIR}/gpu/portable/kernels.txt lines REGEX "^portable ")
  set(files "")
  foreach(l IN LISTS lines)
    string(REGEX REPLACE "^portable +" "" f "${l}")
    list(APPEND files ${f})
  endforeach()
  set(${out} ${files} PARENT_SCOPE)
endfunction()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/gpu/portable/kernels.txt)

if(OPCTS_HAVE_HIP)
  opcts_hip_portable_files(OPCTS_HIP_KERNEL_FILES)
  set(arch_flags "")
  foreach(a IN LISTS OPCTS_HIP_ARCHS)
    list(APPEND arch_flags --offload-arch=${a})
  endforeach()
  set(rocprim_flags "")  # /usr/include (Debian's) is searched already: naming it breaks libstdc++'s include_next
  if(NOT OPCTS_ROCPRIM_INCLUDE_DIR STREQUAL "/usr/include")
    set(rocprim_flags -isystem ${OPCTS_ROCPRIM_INCLUDE_DIR})
  endif()
  set(dir ${CMAKE_BINARY_DIR}/hip)
  set(objects "")
  foreach(f IN LISTS OPCTS_HIP_KERNEL_FILES)
    set(src ${CMAKE_SOURCE_DIR}/${f})
    get_filename_component(name ${f} NAME)  # kernel file names are unique across folders
    set(obj ${dir}/${name}.o)
    add_custom_command(OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
      COMMAND ${CMAKE_CXX_COMPILER_LAUNCHER} ${OPCTS_HIPCC} -x hip -std=c++17 ${OPCTS_HIP_OPT} -Wall ${arch_flags}
              -I${CMAKE_SOURCE_DIR} ${rocprim_flags} -MD -MF ${obj}.d -c ${src} -o ${obj}
      DEPENDS ${src} DEPFILE ${obj}.d
      COMMENT "hipcc ${OPCTS_HIP_OPT} ${f} (${OPCTS_HIP_ARCHS})" VERBATIM)
    list(APPEND objects ${obj})
  endforeach()
  set(OPCTS_HIP_KERNEL_LIBRARY ${dir}/libopcts_hip_kernels.a)
  add_custom_command(OUTPUT ${OPCTS_HIP_KERNEL_LIBRARY}
    COMMAND ${CMAKE_COMMAND} -E rm -f ${OPCTS_HIP_KERNEL_LIBRARY}
    COMMAND ${CMAKE_AR} qc ${OPCTS_HIP_KERNEL_LIBRARY} ${objects}
    DEPENDS ${objects} COMMENT "archive libopcts_hip_kernels.a" VERBATIM)
  set(link_check ${CMAKE_BINARY_DIR}/bin/opcts_hip_link_check)
  add_custom_command(OUTPUT ${link_check}
    COMMAND ${OPCTS_HIPCC} -x hip -std=c++17 ${arch_flags} -I${CMAKE_SOURCE_DIR}
            -c ${CMAKE_SOURCE_DIR}/gpu/hip/link_check.cpp -o ${dir}/link_check.o
    COMMAND ${OPCTS_HIPCC} ${arch_flags} ${dir}/link_check.o ${OPCTS_HIP_KERNEL_LIBRARY} -o ${link_check}
    COMMAND ${link_check}
    DEPENDS ${OPCTS_HIP_KERNEL_LIBRARY} ${CMAKE_SOURCE_DIR}/gpu/hip/link_check.cpp
    COMMENT "link opcts_hip_link_check against libamdhip64" VERBATIM)
  add_custom_target(opcts_hip_kernels ALL DEPENDS ${OPCTS_HIP_KERNEL_LIBRARY} ${link_check})
endif()

# opcts_hip: the HIP backend (the GPU glue against HIP), where OPCTS_HAVE_HIP_BACKEND.
function(opcts_add_hip_backend)
  if(NOT OPCTS_HAVE_HIP_BACKEND)
    return()
  endif()
  find_library(OPCTS_AMDHIP64_LIBRARY amdhip64 REQUIRED)
  opcts_gpu_glue_sources(hip sources)
  add_library(opcts_hip STATIC ${sources})
  target_compile_definitions(opcts_hip PRIVATE OPCTS_GPU_RUNTIME_HIP=1 __HIP_PLATFORM_AMD__=1)
  target_compile_options(opcts_hip PRIVATE -Wall -Wextra)
  add_dependencies(opcts_hip opcts_hip_kernels)
  target_link_libraries(opcts_hip PUBLIC opcts_refimpl ${OPCTS_HIP_KERNEL_LIBRARY} ${OPCTS_AMDHIP64_LIBRARY})
endfunction()
