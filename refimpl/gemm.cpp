// The GEMM dispatcher: the best ISA level of the CPU found, or the one asked for.
#include "refimpl/gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <type_traits>

#include "core/spellings.hpp"
#include "refimpl/isa/gemm_levels.hpp"

namespace opcts::ref {

namespace {

// The psABI levels by their features (x86-64 psABI §3.1.1), spelled as features because clang
// 14 (the fuzz build) does not know __builtin_cpu_supports("x86-64-vN"); cx16, lahf, lzcnt,
// movbe, f16c and xsave have no builtin name in both compilers and come with the rest on every
// CPU that has the features checked.
bool cpu_has(IsaLevel l) {
#if defined(__x86_64__) && defined(__GNUC__)
  const bool v2 = __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("sse3") &&
                  __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1") &&
                  __builtin_cpu_supports("sse4.2");
  const bool v3 = v2 && __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
                  __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("fma");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  switch (l) {
    case IsaLevel::base: return true;
    case IsaLevel::v2: return v2;
    case IsaLevel::v3: return v3;
    case IsaLevel::v4: return v4;
  }
  return false;
#else
  return l == IsaLevel::base;
#endif
}

IsaLevel best_level() {
  IsaLevel best = IsaLevel::base;
  for (IsaLevel l : supported_isa_levels()) best = l;
  return best;
}

IsaLevel checked(IsaLevel l) {
  if (!cpu_has(l)) throw std::invalid_argument("this CPU does not support ISA level " + std::string(to_string(l)));
  return l;
}

// -1 until the first gemm (or set_gemm_isa_level) decides.
std::atomic<int> g_level{-1};

// gemm_flops()'s counts (relaxed: a tally, read between references).
std::atomic<uint64_t> g_flops_f64{0}, g_flops_f32{0};

}  // namespace

constexpr Spellings<IsaLevel, 4> kIsaLevels{
    {{IsaLevel::base, "base"}, {IsaLevel::v2, "x86-64-v2"}, {IsaLevel::v3, "x86-64-v3"}, {IsaLevel::v4, "x86-64-v4"}}};

std::string_view to_string(IsaLevel l) { return kIsaLevels.of(l); }

IsaLevel parse_isa_level(std::string_view s) {
  // "v2" for "x86-64-v2": the level without its 7-letter "x86-64-" prefix.
  for (const auto& [l, text] : kIsaLevels.rows)
    if (s == text || (l != IsaLevel::base && s == text.substr(7))) return l;
  throw std::invalid_argument("unknown ISA level '" + std::string(s) + "' (expected " + kIsaLevels.joined(", ") + ")");
}

std::vector<IsaLevel> supported_isa_levels() {
  std::vector<IsaLevel> out;
  for (IsaLevel l : kIsaLevels.values())
    if (cpu_has(l)) out.push_back(l);
  return out;
}

IsaLevel gemm_isa_level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    const char* env = std::getenv("OPCTS_REF_ISA");
    l = static_cast<int>(env && *env ? checked(parse_isa_level(env)) : best_level());
    g_level.store(l, std::memory_order_relaxed);
  }
  return static_cast<IsaLevel>(l);
}

void set_gemm_isa_level(IsaLevel l) { g_level.store(static_cast<int>(checked(l)), std::memory_order_relaxed); }

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c, int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = 0 (or C unchanged); no kernel sees a zero-width operand
    for (int64_t i = 0; i < m && !accumulate; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  const isa::GemmArgs<T> g{m, n, k, a.data, a.ld, a.transposed, b.data, b.ld, b.transposed, c, ldc, accumulate};
  void (*fn)(const isa::GemmArgs<T>&) = nullptr;
  switch (gemm_isa_level()) {
#define OPCTS_ISA_CASE(L)                                           \
  case IsaLevel::L:                                                 \
    if constexpr (std::is_same_v<T, double>) fn = isa::L::gemm_f64; \
    else fn = isa::L::gemm_f32;                                     \
    break;
    OPCTS_ISA_CASE(base)
    OPCTS_ISA_CASE(v2)
    OPCTS_ISA_CASE(v3)
    OPCTS_ISA_CASE(v4)
#undef OPCTS_ISA_CASE
  }
  fn(g);
  (std::is_same_v<T, double> ? g_flops_f64 : g_flops_f32)
      .fetch_add(2 * static_cast<uint64_t>(m) * static_cast<uint64_t>(n) * static_cast<uint64_t>(k),
                 std::memory_order_relaxed);
}

GemmFlops gemm_flops() {
  return {g_flops_f64.load(std::memory_order_relaxed), g_flops_f32.load(std::memory_order_relaxed)};
}

template void gemm<double>(int64_t, int64_t, int64_t, GemmOperand<double>, GemmOperand<double>, double*, int64_t, bool);
template void gemm<float>(int64_t, int64_t, int64_t, GemmOperand<float>, GemmOperand<float>, float*, int64_t, bool);

}  // namespace opcts::ref
