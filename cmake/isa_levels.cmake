# The references' GEMM (refimpl/isa/gemm_kernel.cpp) once per x86-64 ISA level, linked into
# opcts_refimpl; refimpl/gemm.cpp dispatches on the CPU found (refimpl/gemm.hpp says why).
# Each level renames Eigen's namespace (-DEigen=opcts_eigen_<level>) so that no template
# instance is shared between levels; tests/check_isa_objects.cmake proves that no symbol
# escapes a level's namespaces. On other processors every level is built without -march
# (the same code four times, and the dispatcher picks base).
set(OPCTS_ISA_LEVELS base v2 v3 v4)
function(opcts_add_isa_kernels target)
  set(objects "")
  foreach(level IN LISTS OPCTS_ISA_LEVELS)
    set(lib opcts_gemm_${level})
    add_library(${lib} OBJECT ${CMAKE_SOURCE_DIR}/refimpl/isa/gemm_kernel.cpp)
    target_include_directories(${lib} PRIVATE ${CMAKE_SOURCE_DIR})
    target_link_libraries(${lib} PRIVATE OpenMP::OpenMP_CXX Eigen3::Eigen)
    target_compile_definitions(${lib} PRIVATE OPCTS_ISA=${level} Eigen=opcts_eigen_${level})
    target_compile_options(${lib} PRIVATE -Wall -Wextra)
    if(NOT level STREQUAL "base" AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
      target_compile_options(${lib} PRIVATE -march=x86-64-${level})
    endif()
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${lib}>)
    list(APPEND objects $<TARGET_OBJECTS:${lib}>)
  endforeach()
  set(OPCTS_ISA_OBJECTS "${objects}" PARENT_SCOPE)
endfunction()
