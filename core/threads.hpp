// The number of threads an OpenMP parallel region would use, in builds with and without OpenMP.
//
// The fuzz project (fuzz/CMakeLists.txt) compiles the refimpls and host impls without OpenMP,
// where their pragmas are ignored and omp_* functions do not link: code that sizes its work by
// the thread count asks here.
#pragma once

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace opcts {

/// omp_get_max_threads(), or 1 without OpenMP.
inline int max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace opcts
