// opcts_bench_suite (issue 16 item 4): a fixed slice of each family run in this process on one
// arch's impls, printed side by side in one run:
//   - cases/s and the split of case time: inputs, reference, device (the impl's run), comparison,
//     and the harness's own (the rest of execute_case: checks, records), from the result
//     records' phases (core/result.hpp);
//   - the reference's GFLOP/s (the problem's flops, Family::cost, over its reference time)
//     against the best fp64 GEMM of the references' own GEMM on this CPU, measured here;
//   - "gemm share": the time the reference's own products (ref::gemm_flops, fp64 and fp32)
//     would take at this CPU's GEMM rates, over its reference time: near 1, the reference is
//     its products at the CPU's peak (and does more flops than the problem: statistics, bounds,
//     a same-precision pipeline); well below 1, the rest of it (elementwise passes, softmax,
//     dequantization) is what to make faster;
//   - the harness overhead per case with a no-op impl (it returns zeros; target <= 0.2 ms);
//   - the plugin ABI's no-ops, beside it: a C no-op through the host ABI backend ("C abi") and a
//     Python one through the Python plugin host (bench/python_noop.py, "py abi": the problem
//     object and a numpy view of each output, nothing written), each case's time less inputs,
//     reference and comparison, and their difference ("py-C", issue 36's target <= 0.1 ms);
//   - what `opcts run --capture` adds to a case ("capture +ms": the same case run again with it,
//     its inputs and reference cached, less the plain case's own time without them), and that
//     over the impl's plain run ("x device": the recording and two replays, the plain run they
//     are compared with, the byte comparisons);
//   - per impl with tactics (Impl::tactics): its problems, the tactics it lists per problem (the
//     full tier's cases) and the cases the default tier runs of them, per problem;
//   - the suite's load time (bench/suite_load.hpp).
// The slice: the first --per-family problems (in id order) of each family's default tier that
// every impl of the arch runs (no SKIP, no negative cases), all their impls.
//
// Usage: opcts_bench_suite [--arch host|sm90|...] [--per-family 6] [--device 0] [--family F]... [--python-noop FILE.py]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "app/builtins.hpp"
#include "app/plugins.hpp"
#include "bench/gemm_peak.hpp"
#include "bench/suite_load.hpp"
#include "core/allocator.hpp"
#include "runner/execute.hpp"

namespace {

using namespace opcts;

// Returns zeros of the family's outputs: what a case costs the harness when the impl costs nothing.
class NoopImpl : public Impl {
 public:
  explicit NoopImpl(std::string family) : family_(std::move(family)), name_("host.bench_noop_" + family_) {}
  std::string_view family() const override { return family_; }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  TensorMap run(const Problem& p, const TensorMap&, const RunContext&) const override {
    TensorMap out;
    for (const auto& spec : family_def().outputs(p)) out.emplace(spec.name, HostTensor(spec.dtype, spec.shape));
    return out;
  }

 private:
  std::string family_, name_;
};

// The plugin ABI's no-op: returns at once, writing nothing.
opcts_status c_noop_run(const void*, const opcts_run_args*, opcts_report*) { return OPCTS_OK; }

struct Split {
  int cases = 0;
  double ms = 0, inputs = 0, ref = 0, device = 0, compare = 0, flops = 0;
  double gemm_f64 = 0, gemm_f32 = 0;  // the references' own products (ref::gemm_flops)
  double overhead() const { return ms - inputs - ref - device - compare; }
  void add(const ResultRecord& r) {
    ++cases;
    ms += r.ms;
    inputs += r.inputs_ms;
    ref += r.ref_ms;
    device += r.device_ms;
    compare += r.compare_ms;
  }
};

std::string fmt_ms(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%9.3f", ms);
  return b;
}

// Per impl with tactics: problems, tactics listed per problem (the full tier's cases) and what
// the default tier runs of them.
void print_tactics(const Suite& suite) {
  struct Count {
    std::set<std::string> problems;
    int full = 0, at_default = 0;
  };
  std::map<std::string, Count> by_impl;
  for (const auto& c : suite.all_cases()) {
    if (c.tactic.empty()) continue;
    Count& n = by_impl[std::string(c.impl->name())];
    n.problems.insert(std::string(split_case_id(c.id).problem_id));
    ++n.full;
    n.at_default += c.tier <= Tier::default_;
  }
  if (by_impl.empty()) return;
  std::printf("\n%-36s %8s %10s %12s %12s\n", "impl with tactics", "problems", "tactics", "per problem",
              "default/prob");
  for (const auto& [impl, n] : by_impl) {
    const double p = static_cast<double>(n.problems.size());
    std::printf("%-36s %8zu %10d %12.2f %12.2f\n", impl.c_str(), n.problems.size(), n.full, n.full / p,
                n.at_default / p);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"a fixed slice of each family: cases/s, the split of case time, reference GFLOP/s, harness overhead"};
  std::string arch = "host", cases_dir = default_cases_dir();
  int per_family = 6, device = -1;
  app.add_option("--arch", arch, "arch whose impls run (host: the host device; sm90 on an H200)");
  app.add_option("--per-family", per_family, "problems per family");
  app.add_option("--device", device, "GPU ordinal (default: 0 for a GPU arch, -1 for host)");
  app.add_option("--cases-dir", cases_dir, "folder of built-in catalogs");
  std::vector<std::string> only;
  app.add_option("--family", only, "families to run (repeatable; default: all)");
  std::string python_noop = OPCTS_BENCH_PYTHON_NOOP;
  app.add_option("--python-noop", python_noop, "the Python no-op impls (bench/python_noop.py)");
  CLI11_PARSE(app, argc, argv);
  keep_freed_memory();  // as the opcts CLI does

  Registry reg;
  register_builtins(reg);
  std::vector<std::string> names;  // the C no-ops' descriptors point at these
  names.reserve(2 * builtin_registry().families().size());
  for (const Family* f : builtin_registry().families()) {
    reg.add(std::make_unique<NoopImpl>(std::string(f->name())));
    opcts_impl_desc d{};
    d.struct_size = sizeof d;
    d.family = names.emplace_back(f->name()).c_str();
    d.name = names.emplace_back("bench.c_noop_" + std::string(f->name())).c_str();
    d.backend = "host";
    d.run = c_noop_run;
    reg.add(std::make_unique<AbiImpl>(d, &host_abi_backend()));
  }
  const std::string py_error = load_plugin(reg, python_noop);
  if (!py_error.empty()) std::printf("no Python no-op (py abi: -): %s\n", py_error.c_str());

  opcts_bench::print_load(("suite load, " + arch).c_str(),
                          opcts_bench::time_load(builtin_registry(), cases_dir, arch, {}, 2));
  std::printf("the references' GEMM on this CPU (dispatcher: %s):\n",
              std::string(ref::to_string(ref::gemm_isa_level())).c_str());
  const double best_gemm = opcts_bench::print_gemm_levels(1536, 2);
  const double best_gemm32 = opcts_bench::gemm_gflops<float>(ref::gemm_isa_level(), 1536, 2);
  std::printf("fp32 GEMM 1536^3 at %-10s %7.1f GFLOP/s\n", std::string(ref::to_string(ref::gemm_isa_level())).c_str(),
              best_gemm32);

  SuiteOptions opt;
  opt.cases_dir = cases_dir;
  opt.arch = arch;
  const Suite suite(reg, opt);
  if (device < 0 && suite.arch().backend != "host") device = 0;
  const SuiteOptions host_opt{cases_dir, {}, "host"};
  const Suite host_suite(reg, host_opt);  // the no-op impls are host impls

  // Problems of the default tier in id order, by family, with the cases of each.
  std::map<std::string, std::map<std::string, std::vector<const Case*>>> problems;
  for (const auto& c : suite.all_cases()) {
    if (c.tier > Tier::default_ || !c.family->expected_error(*c.problem).empty()) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), c.family->name()) == only.end()) continue;
    if (std::string_view(c.impl->name()).starts_with("host.bench_noop_") ||
        std::string_view(c.impl->name()).starts_with("bench."))
      continue;
    problems[std::string(c.family->name())][c.family->problem_id(*c.problem)].push_back(&c);
  }
  std::printf("\n%-14s %5s %8s | %9s %9s %9s %9s %9s | %9s %6s %6s | %9s %9s %9s %9s | %11s %8s\n", "family", "cases",
              "cases/s", "inputs", "reference", "device", "compare", "harness", "ref GF/s", "/best", "gemm", "noop ms",
              "C abi ms", "py abi ms", "py-C ms", "capture +ms", "x device");
  ExecOptions capture;
  capture.capture = true;
  for (const auto& [fam, by_problem] : problems) {
    Split s, noop;
    std::vector<double> c_abi, py_abi;  // an ABI no-op's case less inputs, reference and comparison
    double capture_extra = 0;           // summed over the cases: --capture's time beyond the plain case's
    int taken = 0;
    for (const auto& [pid, cases] : by_problem) {
      if (taken == per_family) break;
      bool runs = true;
      for (const Case* c : cases) runs = runs && !suite.skip_reason(*c) && !c->impl->planted();
      if (!runs) continue;
      ++taken;
      ReferenceCache cache;  // cold per problem: its first case makes inputs and references
      for (const Case* c : cases) {
        const ref::GemmFlops f0 = ref::gemm_flops();
        const ResultRecord r = execute_case(suite, *c, device, cache);
        if (r.ref_ms > 0) {
          s.flops += c->family->cost(*c->problem).flops;
          const ref::GemmFlops f1 = ref::gemm_flops();  // the impls here never call ref::gemm
          s.gemm_f64 += static_cast<double>(f1.f64 - f0.f64);
          s.gemm_f32 += static_cast<double>(f1.f32 - f0.f32);
        }
        s.add(r);
        const ResultRecord rc = execute_case(suite, *c, device, cache, capture);  // inputs, reference: cached
        capture_extra += (rc.ms - rc.inputs_ms - rc.ref_ms) - (r.ms - r.inputs_ms - r.ref_ms);
      }
      Case nc = *cases.front();
      nc.impl = reg.impl("host.bench_noop_" + fam);
      nc.id = case_id(*nc.family, *nc.impl, *nc.problem);
      noop.add(execute_case(host_suite, nc, -1, cache));  // inputs and references shared: the harness alone
      // The ABI no-ops, C and Python, alternated over repeats (a fraction of a millisecond each;
      // medians, as a shared machine's other work lands on a few of them).
      constexpr int kRepeats = 20;
      const Impl* c_impl = reg.impl("bench.c_noop_" + fam);
      const Impl* py_impl = reg.impl("bench.py_noop_" + fam);
      for (int rep = 0; rep < kRepeats; ++rep)
        for (const Impl* impl : {c_impl, py_impl}) {
          if (!impl || !impl->supports(*nc.problem, host_suite.arch()).ok) continue;
          Case ac = nc;
          ac.impl = impl;
          ac.id = case_id(*ac.family, *ac.impl, *ac.problem);
          const ResultRecord r = execute_case(host_suite, ac, -1, cache);
          (impl == c_impl ? c_abi : py_abi).push_back(r.ms - r.inputs_ms - r.ref_ms - r.compare_ms);
        }
    }
    if (!s.cases) continue;
    const double gflops = s.ref > 0 ? s.flops / (s.ref * 1e-3) / 1e9 : 0;
    // Seconds the references' products take at the measured rates, over the reference seconds.
    const double gemm_s =
        (best_gemm > 0 ? s.gemm_f64 / (best_gemm * 1e9) : 0) + (best_gemm32 > 0 ? s.gemm_f32 / (best_gemm32 * 1e9) : 0);
    // An ABI no-op's case: its time less inputs, reference and comparison (the harness and the call).
    const double none = std::numeric_limits<double>::quiet_NaN();
    const auto abi_ms = [&](std::vector<double> x) {
      if (x.empty()) return none;
      std::nth_element(x.begin(), x.begin() + x.size() / 2, x.end());
      return x[x.size() / 2];
    };
    const auto cell = [](double ms) { return std::isnan(ms) ? std::string("        -") : fmt_ms(ms); };
    const double c_ms = abi_ms(c_abi), py_ms = abi_ms(py_abi);
    std::printf(
        "%-14s %5d %8.1f | %7.2fms %7.2fms %7.2fms %7.2fms %7.3fms | %9.1f %6.2f %6.2f | %9.3f %s %s %s | %9.2fms "
        "%8.2f\n",
        fam.c_str(), s.cases, s.cases / (s.ms * 1e-3), s.inputs / s.cases, s.ref / s.cases, s.device / s.cases,
        s.compare / s.cases, s.overhead() / s.cases, gflops, best_gemm > 0 ? gflops / best_gemm : 0.0,
        s.ref > 0 ? gemm_s / (s.ref * 1e-3) : 0.0, noop.overhead() / noop.cases, cell(c_ms).c_str(),
        cell(py_ms).c_str(), cell(py_ms - c_ms).c_str(), capture_extra / s.cases,
        s.device > 0 ? capture_extra / s.device : 0.0);
  }
  std::printf(
      "(per-case means; harness = case time minus the four phases; /best: the problem's flops a second over the "
      "best fp64 GEMM's; gemm: the references' own products at the measured fp64/fp32 GEMM rates over their time; "
      "noop ms: the harness per case with a no-op impl, target <= 0.2 ms; C abi / py abi ms: the median case of the "
      "plugin ABI's C and Python no-ops less inputs, reference and comparison; py-C ms: the Python plugin host's cost "
      "a case, "
      "target <= 0.1 ms; capture +ms: what --capture adds to a case, x device: that over the plain run's device "
      "time)\n");
  print_tactics(suite);
  return 0;
}
