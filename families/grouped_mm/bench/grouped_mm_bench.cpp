// TFLOP/s of cuda.grouped_kernel and cuda.cublas_grouped on the DeepSeek-V3 MoE forward (2d_3d:
// 256 experts, K 7168, N 2048, 4096 tokens · top-8 = 32768 rows with skewed routing) and
// weight gradient (2d_2d: M 7168, N 2048, ΣK 32768 split the same way), side by side with a loop
// of per-group cuBLAS bf16 GEMMs (cublasGemmEx) timed in the same run. Each output is checked:
// sampled elements judged as the family judges every element (judge/compare.hpp's bounded metric,
// from the wing's reference_element and reduction_shape, under the rule of cases/tolerances.yaml
// that covers the impl), and the bf16 outputs against the loop's (max |x − y| / max |y|, printed).
//
// --check instead runs small problems of every mode and recipe through both impls and checks
// every element, the guard rows/columns past the last offset (still 0xFFFF), bitwise repeat
// runs, the refused arguments (GroupedArgumentError naming the argument, out untouched), and
// that every planted variant is caught. Exit status: 0 when every check passes, 1 otherwise.
//
// Usage: opcts_bench_grouped_mm [--check] [iters=10]. Needs a CUDA GPU (sm_80+).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_timing.hpp"
#include "families/grouped_mm/bench/grouped_mm_problem.hpp"
#include "judge/compare.hpp"
#include "judge/tolerance.hpp"
#include "runner/suite.hpp"

using namespace opcts;
using cuda::GroupedMmParams;
using cuda::GroupedMode;
using cuda::GroupedPlant;
using cuda::GroupedRecipe;

namespace {

using Impl = std::function<void(const GroupedMmParams&)>;

using bench::ck;
using bench::time_ms;

int g_failures = 0;

void fail(const std::string& what) {
  ++g_failures;
  std::printf("FAIL  %s\n", what.c_str());
}

const char* mode_name(GroupedMode m) {
  switch (m) {
    case GroupedMode::m2d_3d: return "2d_3d";
    case GroupedMode::m3d_3d: return "3d_3d";
    case GroupedMode::m2d_2d: return "2d_2d";
    case GroupedMode::m3d_2d: return "3d_2d";
  }
  return "?";
}

const char* recipe_name(GroupedRecipe r) {
  switch (r) {
    case GroupedRecipe::bf16: return "bf16";
    case GroupedRecipe::fp8_rowwise: return "fp8_rowwise";
    case GroupedRecipe::mxfp8: return "mxfp8";
  }
  return "?";
}

Impl kernel(GroupedPlant plant = GroupedPlant::none) {
  return [plant](const GroupedMmParams& p) {
    GroupedMmParams q = p;
    q.plant = plant;
    cuda::grouped_mm_kernel(q, nullptr);
  };
}
Impl cublas_grouped() {
  return [](const GroupedMmParams& p) { cuda::grouped_mm_cublas(p, nullptr, cuda::cublas_grouped_context()); };
}
Impl cublas_loop() {
  return [](const GroupedMmParams& p) { cuda::grouped_mm_cublas_loop(p, nullptr, cuda::cublas_grouped_context()); };
}

// The tolerance the family's comparison gives `impl`'s "out" (cases/tolerances.yaml beside the
// binary, else $OPCTS_CASES_DIR; no arch manifest).
Tolerance tolerance(const std::string& impl) {
  static const ToleranceTable table = ToleranceTable::load(default_cases_dir() + "/tolerances.yaml");
  return table.resolve("grouped_mm", "out", DType::bf16, impl, "", "", nullptr);
}

// One group's output element.
struct Element {
  int64_t g, r, c;
};

// Elements `at` of a problem's output, holding `got` (bf16 codes), compared as the family compares
// an output: the wing's reference of each element and the bounded metric under `impl`'s tolerance.
// "" when they pass, else the failures (describe) and the worst element.
std::string judge(const bench::GroupedProblem& pr, const std::vector<Element>& at, const std::vector<uint16_t>& got,
                  const std::string& impl) {
  const int64_t n = static_cast<int64_t>(at.size());
  ReductionStats st = grouped_mm::reduction_shape(pr.family_problem());
  std::vector<double> want(static_cast<size_t>(n));
  st.abs_sum.resize(want.size()), st.sq_sum.resize(want.size()), st.magnitude.resize(want.size());
  HostTensor out(DType::bf16, {n});
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t i = 0; i < n; ++i) {
    const Element& e = at[static_cast<size_t>(i)];
    const grouped_mm::ElementReference ref = pr.reference(e.g, e.r, e.c);
    const auto u = static_cast<size_t>(i);
    want[u] = ref.want, st.abs_sum[u] = ref.abs_sum, st.sq_sum[u] = ref.sq_sum, st.magnitude[u] = ref.magnitude;
  }
  for (int64_t i = 0; i < n; ++i) out.set_code(i, got[static_cast<size_t>(i)]);
  std::vector<WorstElement> worst;
  const OutputStats s =
      compare_output("out", out, OutputReference{want, nullptr, nullptr, 0, &st}, tolerance(impl), worst, 1);
  const std::string failed = describe(output_failures(s));
  if (failed.empty() || worst.empty()) return failed;
  const Element& e = at[static_cast<size_t>(worst[0].index[0])];
  char buf[160];
  std::snprintf(buf, sizeof buf, "; worst: group %lld (%lld, %lld) = %.8g, reference %.8g", static_cast<long long>(e.g),
                static_cast<long long>(e.r), static_cast<long long>(e.c), worst[0].got, worst[0].want);
  return failed + buf;
}

std::vector<uint16_t> download(const void* d, int64_t elems) {
  std::vector<uint16_t> h(static_cast<size_t>(elems));
  if (elems) ck(cudaMemcpy(h.data(), d, h.size() * 2, cudaMemcpyDeviceToHost), "download");
  return h;
}

// Every element of every group judged as the family judges it, every other element still 0xFFFF.
// Returns "" when both hold, else what failed.
std::string check_all(const bench::GroupedProblem& pr, const std::vector<uint16_t>& out, const std::string& impl) {
  std::vector<char> owned(out.size(), 0);
  std::vector<Element> at;
  std::vector<uint16_t> got;
  for (int64_t g = 0; g < pr.groups(); ++g) {
    int64_t rows = 0, cols = 0, kg = 0;
    pr.group_dims(g, rows, cols, kg);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = pr.out_index(g, r, c);
        owned[static_cast<size_t>(i)] = 1;
        at.push_back({g, r, c});
        got.push_back(out[static_cast<size_t>(i)]);
      }
  }
  std::string bad = judge(pr, at, got, impl);
  int64_t stray = 0;
  for (size_t i = 0; i < out.size(); ++i) stray += !owned[i] && out[i] != 0xFFFF;
  if (stray) bad += (bad.empty() ? "" : ", ") + std::to_string(stray) + " elements owned by no group written";
  return bad;
}

bench::GroupedSpec small_spec(GroupedMode mode, GroupedRecipe recipe, uint64_t seed) {
  const int64_t mult = cuda::grouped_offs_multiple(mode, recipe);
  bench::GroupedSpec s;
  s.mode = mode, s.recipe = recipe, s.seed = seed;
  // Jagged sizes with empty groups first, in the middle and last; a group of exactly 128; 40
  // elements (64 for mx: ΣK must hold whole MX blocks) past the last offset.
  for (int64_t v : {0, 37, 0, 130, 1, 128, 0}) s.sizes.push_back(v ? (v + mult - 1) / mult * mult : 0);
  s.guard = recipe == GroupedRecipe::mxfp8 ? 64 : 40;
  s.groups3d = 3;
  // Neither a multiple of the 64 tile; fp8's N a multiple of 16 (PyTorch's contract).
  s.m = 70, s.n = recipe == GroupedRecipe::fp8_rowwise ? 80 : 67;
  s.k = recipe == GroupedRecipe::mxfp8 ? 96 : recipe == GroupedRecipe::fp8_rowwise ? 112 : 100;
  return s;
}

// `row`: the impl's row name, whose tolerance judges it.
void check_impl(bench::GroupedProblem& pr, const Impl& impl, const std::string& row, const std::string& label,
                bool twice) {
  pr.poison_out();
  try {
    impl(pr.params());
    ck(cudaDeviceSynchronize(), label.c_str());
  } catch (const std::exception& e) {
    fail(label + ": threw " + e.what());
    return;
  }
  const std::vector<uint16_t> out = download(pr.params().out, pr.out_elems());
  const std::string bad = check_all(pr, out, row);
  if (!bad.empty()) fail(label + ": " + bad);
  if (!twice) {
    if (bad.empty()) std::printf("ok    %s\n", label.c_str());
    return;
  }
  pr.poison_out();
  impl(pr.params());
  ck(cudaDeviceSynchronize(), label.c_str());
  const bool same = download(pr.params().out, pr.out_elems()) == out;
  if (!same) fail(label + ": a second run differs bitwise");
  if (bad.empty() && same) std::printf("ok    %s (bitwise repeatable)\n", label.c_str());
}

// The impl must throw GroupedArgumentError naming `arg` and leave out as it was.
void expect_refusal(bench::GroupedProblem& pr, const Impl& impl, GroupedMmParams p, const char* arg,
                    const std::string& label) {
  pr.poison_out();
  try {
    impl(p);
    ck(cudaDeviceSynchronize(), label.c_str());
    fail(label + ": not refused");
    return;
  } catch (const cuda::GroupedArgumentError& e) {
    if (e.argument != arg) {
      fail(label + ": refused naming " + e.argument + ", not " + arg + " (" + e.what() + ")");
      return;
    }
  }
  ck(cudaDeviceSynchronize(), label.c_str());
  const std::vector<uint16_t> out = download(pr.params().out, pr.out_elems());
  if (std::any_of(out.begin(), out.end(), [](uint16_t v) { return v != 0xFFFF; }))
    fail(label + ": refused but wrote out");
  else std::printf("ok    %s (refused: %s)\n", label.c_str(), arg);
}

// Offsets replaced on the device (restored after).
void with_offs(bench::GroupedProblem& pr, const std::vector<int32_t>& offs, const std::function<void()>& fn) {
  auto* d = const_cast<int32_t*>(pr.params().offs);
  ck(cudaMemcpy(d, offs.data(), offs.size() * 4, cudaMemcpyHostToDevice), "offs");
  fn();
  ck(cudaMemcpy(d, pr.offs().data(), offs.size() * 4, cudaMemcpyHostToDevice), "offs");
}

void run_checks() {
  const GroupedMode modes[] = {GroupedMode::m2d_3d, GroupedMode::m3d_3d, GroupedMode::m2d_2d, GroupedMode::m3d_2d};
  const GroupedRecipe recipes[] = {GroupedRecipe::bf16, GroupedRecipe::fp8_rowwise, GroupedRecipe::mxfp8};
  uint64_t seed = 11;
  for (GroupedMode mode : modes)
    for (GroupedRecipe recipe : recipes) {
      bench::GroupedProblem pr(small_spec(mode, recipe, seed++));
      const std::string what = std::string(mode_name(mode)) + " " + recipe_name(recipe);
      check_impl(pr, kernel(), "cuda.grouped_kernel", "cuda.grouped_kernel " + what, true);
      if (recipe == GroupedRecipe::bf16) {
        check_impl(pr, cublas_grouped(), "cuda.cublas_grouped", "cuda.cublas_grouped " + what, true);
        // cuBLAS per group with the grouped call's compute type (CUBLAS_COMPUTE_32F): its tolerance.
        check_impl(pr, cublas_loop(), "cuda.cublas_grouped", "cublas loop " + what, false);
      }
    }

  // Refused arguments, for both impls where they take the recipe.
  for (GroupedRecipe recipe : recipes) {
    bench::GroupedProblem pr(small_spec(GroupedMode::m2d_3d, recipe, seed++));
    std::vector<Impl> impls = {kernel()};
    std::vector<std::string> names = {"cuda.grouped_kernel"};
    if (recipe == GroupedRecipe::bf16) impls.push_back(cublas_grouped()), names.push_back("cuda.cublas_grouped");
    for (size_t i = 0; i < impls.size(); ++i) {
      const std::string tag = names[i] + " 2d_3d " + recipe_name(recipe) + ": ";
      std::vector<int32_t> o = pr.offs();
      std::swap(o[3], o[4]);
      with_offs(pr, o, [&] { expect_refusal(pr, impls[i], pr.params(), "offs", tag + "decreasing offsets"); });
      o = pr.offs();
      o.back() = static_cast<int32_t>(pr.params().a_rows + 1);
      with_offs(pr, o, [&] { expect_refusal(pr, impls[i], pr.params(), "offs", tag + "offset past the rows"); });
      GroupedMmParams p = pr.params();
      p.b_batch += 1;
      expect_refusal(pr, impls[i], p, "groups", tag + "B holds G + 1 groups");
      if (recipe != GroupedRecipe::bf16) {
        p = pr.params();
        p.a_scale_count -= 1;
        expect_refusal(pr, impls[i], p, "scale_a", tag + "one scale_a element short");
      }
      if (recipe == GroupedRecipe::mxfp8) {
        o = pr.offs();
        o[1] += 16;
        with_offs(pr, o,
                  [&] { expect_refusal(pr, impls[i], pr.params(), "offs", tag + "an offset not a multiple of 32"); });
      }
    }
  }
  {
    bench::GroupedProblem pr(small_spec(GroupedMode::m2d_2d, GroupedRecipe::fp8_rowwise, seed++));
    std::vector<int32_t> o = pr.offs();
    o[1] += 8;
    with_offs(pr, o, [&] {
      expect_refusal(pr, kernel(), pr.params(), "offs",
                     "cuda.grouped_kernel 2d_2d fp8_rowwise: K offset not a multiple of 16");
    });
  }

  // Every planted variant caught, each on a problem that shows it.
  struct Planted {
    GroupedPlant plant;
    GroupedMode mode;
    GroupedRecipe recipe;
    const char* name;
  };
  const Planted planted[] = {
      {GroupedPlant::stale_empty_group, GroupedMode::m2d_2d, GroupedRecipe::bf16, "stale_empty_group"},
      {GroupedPlant::write_past_last_offset, GroupedMode::m2d_3d, GroupedRecipe::bf16, "write_past_last_offset"},
      {GroupedPlant::write_past_last_offset, GroupedMode::m3d_2d, GroupedRecipe::bf16, "write_past_last_offset"},
      {GroupedPlant::offsets_as_starts, GroupedMode::m2d_3d, GroupedRecipe::bf16, "offsets_as_starts"},
      {GroupedPlant::next_group_scales, GroupedMode::m2d_3d, GroupedRecipe::fp8_rowwise, "next_group_scales"},
      {GroupedPlant::next_group_scales, GroupedMode::m2d_2d, GroupedRecipe::mxfp8, "next_group_scales"},
      {GroupedPlant::spill_past_n, GroupedMode::m2d_3d, GroupedRecipe::bf16, "spill_past_n"},
  };
  for (const Planted& pl : planted) {
    bench::GroupedSpec spec = small_spec(pl.mode, pl.recipe, seed++);
    if (pl.plant == GroupedPlant::spill_past_n) spec.n = 40;  // one N tile: the spill lands on rows of the same block
    bench::GroupedProblem pr(spec);
    const std::string label =
        std::string("planted ") + pl.name + " " + mode_name(pl.mode) + " " + recipe_name(pl.recipe);
    pr.poison_out();
    kernel(pl.plant)(pr.params());
    ck(cudaDeviceSynchronize(), label.c_str());
    // A planted row is judged as the correct one is (cases/tolerances.yaml: cuda.*).
    const std::string bad = check_all(pr, download(pr.params().out, pr.out_elems()), "cuda.grouped_kernel");
    if (!bad.empty()) std::printf("ok    %s caught (%s)\n", label.c_str(), bad.c_str());
    else fail(label + ": not caught");
  }
}

// 256 experts' shares of 32768 routed rows, skewed as w_g ∝ (rank + 1)^-0.6 (the busiest expert
// about 11× the mean), the ranks shuffled, each a multiple of 32 (every recipe's offsets).
std::vector<int64_t> deepseek_sizes() {
  constexpr int64_t kGroups = 256, kRows = 4096 * 8, kUnit = 32;
  std::vector<double> w(kGroups);
  double sum = 0;
  for (int64_t g = 0; g < kGroups; ++g) sum += w[g] = std::pow(static_cast<double>(g + 1), -0.6);
  std::vector<int64_t> s(kGroups);
  int64_t used = 0;
  for (int64_t g = 0; g < kGroups; ++g) used += s[g] = static_cast<int64_t>(kRows / kUnit * w[g] / sum) * kUnit;
  for (int64_t g = 0; used < kRows; g = (g + 1) % kGroups) s[g] += kUnit, used += kUnit;
  std::mt19937 rng(7);
  std::shuffle(s.begin(), s.end(), rng);
  return s;
}

// `samples` elements drawn from the groups that hold any, judged as the family judges an output
// (judge()): "" when they pass.
std::string check_sampled(const bench::GroupedProblem& pr, int samples, const std::string& impl) {
  std::mt19937_64 rng(3);
  std::vector<Element> at;
  std::vector<uint16_t> got;
  for (int i = 0; i < samples; ++i) {
    int64_t g = 0, rows = 0, cols = 0, kg = 0;
    do {
      g = static_cast<int64_t>(rng() % static_cast<uint64_t>(pr.groups()));
      pr.group_dims(g, rows, cols, kg);
    } while (rows == 0 || cols == 0);
    const int64_t r = static_cast<int64_t>(rng() % rows), c = static_cast<int64_t>(rng() % cols);
    uint16_t v = 0;
    ck(cudaMemcpy(&v, static_cast<const uint16_t*>(pr.params().out) + pr.out_index(g, r, c), 2, cudaMemcpyDeviceToHost),
       "sample");
    at.push_back({g, r, c});
    got.push_back(v);
  }
  return judge(pr, at, got, impl);
}

// max |x − y| / max |y| over two device outputs of `elems` bf16 values, read in chunks.
double max_rel_err(const void* x, const void* y, int64_t elems) {
  constexpr int64_t kChunk = 1 << 26;
  double num = 0, den = 0;
  for (int64_t c0 = 0; c0 < elems; c0 += kChunk) {
    const int64_t n = std::min(kChunk, elems - c0);
    const std::vector<uint16_t> hx = download(static_cast<const uint16_t*>(x) + c0, n),
                                hy = download(static_cast<const uint16_t*>(y) + c0, n);
    for (int64_t i = 0; i < n; ++i) {
      const double a = bench::bf16_value(hx[i]), b = bench::bf16_value(hy[i]);
      num = std::max(num, std::fabs(a - b));
      den = std::max(den, std::fabs(b));
      if (std::isnan(a) != std::isnan(b)) num = INFINITY;
    }
  }
  return den > 0 ? num / den : num;
}

void bench_shape(const char* name, GroupedMode mode, double flops, int iters) {
  for (GroupedRecipe recipe : {GroupedRecipe::bf16, GroupedRecipe::fp8_rowwise, GroupedRecipe::mxfp8}) {
    bench::GroupedSpec spec;
    spec.mode = mode, spec.recipe = recipe, spec.sizes = deepseek_sizes(), spec.seed = 5;
    spec.m = 7168, spec.n = 2048, spec.k = 7168;  // 2d_3d uses n, k; 2d_2d uses m, n
    bench::GroupedProblem pr(spec);
    GroupedMmParams loop_p = pr.params();
    if (recipe == GroupedRecipe::bf16) loop_p.out = pr.extra_out();
    struct Row {
      const char* impl;
      Impl fn;
      const GroupedMmParams* p;
    };
    // The loop first: the impls' outputs are compared with what it wrote.
    std::vector<Row> rows;
    if (recipe == GroupedRecipe::bf16) rows.push_back({"cublas per-group loop", cublas_loop(), &loop_p});
    rows.push_back({"cuda.grouped_kernel", kernel(), &pr.params()});
    if (recipe == GroupedRecipe::bf16) rows.push_back({"cuda.cublas_grouped", cublas_grouped(), &pr.params()});
    for (const Row& row : rows) {
      double ms = 0;
      try {
        ms = time_ms([&] { row.fn(*row.p); }, iters);
      } catch (const std::exception& e) {
        fail(std::string(name) + " " + recipe_name(recipe) + " " + row.impl + ": threw " + e.what());
        continue;
      }
      std::string note;
      if (row.p == &pr.params()) {
        const std::string bad = check_sampled(pr, 256, row.impl);
        note = bad.empty() ? "256 samples pass" : "256 samples: " + bad;
        if (!bad.empty()) fail(std::string(name) + " " + recipe_name(recipe) + " " + row.impl + ": " + note);
        if (recipe == GroupedRecipe::bf16) {
          char buf[64];
          std::snprintf(buf, sizeof buf, ", max rel err vs loop %.2e",
                        max_rel_err(pr.params().out, loop_p.out, pr.out_elems()));
          note += buf;
        }
      }
      std::printf("%-26s %-12s %-22s %9.3f ms %8.1f TFLOP/s  %s\n", name, recipe_name(recipe), row.impl, ms,
                  flops / ms / 1e9, note.c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool check = false;
  int iters = 10;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--check") == 0) check = true;
    else iters = std::max(1, std::atoi(argv[i]));
  }
  int dev = 0;
  ck(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  ck(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  try {
    if (check) {
      run_checks();
    } else {
      const double flops = 2.0 * 32768 * 2048 * 7168;  // both shapes: 2·ΣM·N·K = 2·M·N·ΣK
      bench_shape("DeepSeek-V3 fwd 2d_3d", GroupedMode::m2d_3d, flops, iters);
      bench_shape("DeepSeek-V3 wgrad 2d_2d", GroupedMode::m2d_2d, flops, iters);
    }
  } catch (const std::exception& e) {
    fail(std::string("uncaught: ") + e.what());
  }
  std::printf("%s: %d failure(s)\n", check ? "check" : "bench", g_failures);
  return g_failures ? 1 : 0;
}
