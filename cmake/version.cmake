# `opcts --version`: the version, the commit (cmake/commit.cmake, at build time) and the build's
# options and what it found (CUDA, cuDNN, HIP), in generated/opcts_build_info.hpp.
set(OPCTS_BUILD_INFO_VERSION "${PROJECT_VERSION}")
if(OPCTS_HAVE_CUDA)
  list(JOIN CMAKE_CUDA_ARCHITECTURES "," cuda_archs)
  set(OPCTS_BUILD_INFO_CUDA "CUDA ${CUDAToolkit_VERSION} (sm ${cuda_archs}; OPCTS_CUDA=${OPCTS_CUDA})")
else()
  set(OPCTS_BUILD_INFO_CUDA "not built (OPCTS_CUDA=${OPCTS_CUDA}): CUDA impls are SKIP")
endif()
if(OPCTS_HAVE_CUDNN)
  set(OPCTS_BUILD_INFO_CUDNN "found (${OPCTS_CUDNN_LIBRARY})")
else()
  set(OPCTS_BUILD_INFO_CUDNN "not found: cuda.cudnn is SKIP")
endif()
if(OPCTS_HAVE_HIP_BACKEND)
  set(OPCTS_BUILD_INFO_HIP "HIP backend for ${OPCTS_HIP_ARCHS} at ${OPCTS_HIP_OPT} (OPCTS_HIP=${OPCTS_HIP}); hip.* rows run on a ROCm device")
elseif(OPCTS_HAVE_HIP)
  set(OPCTS_BUILD_INFO_HIP "compile check for ${OPCTS_HIP_ARCHS} at ${OPCTS_HIP_OPT} (OPCTS_HIP=${OPCTS_HIP}); hip.* rows are SKIP")
else()
  set(OPCTS_BUILD_INFO_HIP "not built (OPCTS_HIP=${OPCTS_HIP})")
endif()
# Only what changes the binary: OPCTS_ARCHS, OPCTS_TIER and OPCTS_SHARDS shape the CTest glue,
# which run-suite.sh sets per run, and must not recompile anything.
set(OPCTS_BUILD_INFO_OPTIONS "${CMAKE_BUILD_TYPE}, ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}, \
OPCTS_WITH_TORCH=${OPCTS_WITH_TORCH}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/build_info.hpp.in ${CMAKE_BINARY_DIR}/generated/opcts_build_info.hpp @ONLY)
add_custom_target(opcts_commit
  COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -DOUT=${CMAKE_BINARY_DIR}/generated/opcts_commit.hpp
          -P ${CMAKE_SOURCE_DIR}/cmake/commit.cmake
  BYPRODUCTS ${CMAKE_BINARY_DIR}/generated/opcts_commit.hpp
  COMMENT "opcts: the commit for --version" VERBATIM)
add_dependencies(opcts opcts_commit)
add_dependencies(opcts_app opcts_commit)  # app/build_version.cpp: the commit a run's selection records
target_include_directories(opcts PRIVATE ${CMAKE_BINARY_DIR}/generated)
