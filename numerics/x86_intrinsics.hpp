// <immintrin.h> on x86 (OPCTS_X86 1), nothing elsewhere (OPCTS_X86 0). Include it before any
// header that includes <immintrin.h> itself (Eigen): GCC 12's avx512fintrin.h trips
// -Wmaybe-uninitialized on its own _mm512_undefined_* (GCC bug 105593, fixed in 13), and the
// warning is located in that header, so it is silenced for the header alone, once. Declares no
// symbol (the per-ISA objects of refimpl/isa include it).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#define OPCTS_X86 1
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning (the fuzz build)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#else
#define OPCTS_X86 0
#endif
