// opcts probe accumulators: measures how each scaled GEMM path of the arch accumulates and prints manifest entries.
//
// Every scaled_mm impl of the arch's backend (built in or a plugin's; planted ones left out) is
// run on the experiments of runner/accumulator_probe.hpp, one problem per fp8 recipe with and
// without fast_accum: M experiment rows, N = 16, K = 1024, e4m3fn elements, fp32 output, every
// scale 1, B's columns all equal. The answers give an AccumulatorModel per path, printed as the
// manifest `tolerance:` entries that state it (first match wins, so fast_accum's come first),
// beside the model the arch's manifest and tolerance table give the impl today.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include "app/builtins.hpp"
#include "app/cli_commands.hpp"
#include "core/glob.hpp"
#include "families/scaled_mm/scaled_mm.hpp"
#include "runner/accumulator_probe.hpp"
#include "runner/device_probe.hpp"
#include "runner/suite.hpp"

namespace opcts::cli {

namespace {

// The fp8 recipes whose elements and scales the experiments can be written in (fp4 recipes'
// e2m1 elements cannot hold them) and whether cuBLASLt takes fast_accum with them.
struct ProbeRecipe {
  scaled_mm::Recipe recipe;
  bool fast_accum;
};
std::vector<ProbeRecipe> probe_recipes() {
  using scaled_mm::Recipe;
  std::vector<ProbeRecipe> v;
  for (Recipe r : {Recipe::tensorwise, Recipe::rowwise, Recipe::blockwise_1x128_128x128, Recipe::blockwise_1x128_1x128,
                   Recipe::mxfp8})
    for (bool fast : {false, true}) {
      scaled_mm::Problem p;
      p.recipe = r;
      p.fast_accum = fast;
      p.out = DType::fp32;
      p.m = 16, p.n = 16, p.k = kProbeK;
      try {
        p.validate();
      } catch (const std::invalid_argument&) {
        continue;  // fast_accum with block scales: no library takes it
      }
      v.push_back({r, fast});
    }
  return v;
}

std::string label(const ProbeRecipe& r) {
  return std::string(scaled_mm::to_string(r.recipe)) + (r.fast_accum ? " fast_accum" : "");
}

// The problem that holds `rows` experiments (M rounded up to 16, extra rows all zero).
scaled_mm::Problem probe_problem(const ProbeRecipe& r, int64_t rows) {
  scaled_mm::Problem p;
  p.recipe = r.recipe;
  p.fast_accum = r.fast_accum;
  p.out = DType::fp32;
  p.m = (rows + 15) / 16 * 16;
  p.n = 16;
  p.k = kProbeK;
  p.validate();
  return p;
}

// A ProbeRun over one impl and recipe: writes A, B and unit scales into the family's own
// inputs of the problem, runs the impl, reads column 0 (every column must agree).
ProbeRun scaled_mm_run(const Suite& suite, const Impl& impl, const ProbeRecipe& r, int device) {
  return [&suite, &impl, r, device](const ProbeBatch& b) {
    const int64_t rows = static_cast<int64_t>(b.a.size());
    const scaled_mm::Problem sp = probe_problem(r, rows);
    const ProblemPtr p = make_problem(sp);
    const Support s = impl.supports(*p, suite.arch());
    if (!s.ok) throw std::runtime_error("does not take " + scaled_mm::problem_id(sp) + ": " + s.reason);
    TensorMap in = scaled_mm::make_inputs(sp, 0);
    HostTensor& a = in.at("a");
    HostTensor& bt = in.at("b");
    for (int64_t i = 0; i < a.numel(); ++i) a.set(i, 0.0);
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t k = 0; k < sp.k; ++k) a.set(m * sp.k + k, b.a[static_cast<size_t>(m)][static_cast<size_t>(k)]);
    for (int64_t n = 0; n < sp.n; ++n)
      for (int64_t k = 0; k < sp.k; ++k) bt.set(n * sp.k + k, b.b[static_cast<size_t>(k)]);
    for (const char* name : {"a_scale", "b_scale"}) {
      HostTensor& t = in.at(name);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, 1.0);
    }
    const ArchInfo& arch = suite.arch();
    const TensorMap out = impl.run(*p, in, RunContext{&arch, device});
    const std::vector<double> d = out.at("d").to_f64();
    std::vector<double> sums(static_cast<size_t>(rows));
    for (int64_t m = 0; m < rows; ++m) {
      double v = d[static_cast<size_t>(m * sp.n)];
      for (int64_t n = 1; n < sp.n; ++n)
        if (d[static_cast<size_t>(m * sp.n + n)] != v) v = NAN;  // columns of one B must agree
      sums[static_cast<size_t>(m)] = v;
    }
    return sums;
  };
}

// The model the arch's tolerance table and manifest give an impl on a problem today.
std::string current_model(const Suite& suite, const Impl& impl, const ProbeRecipe& r) {
  const scaled_mm::Problem sp = probe_problem(r, 16);
  const Family& f = *suite.registry().family("scaled_mm");
  const std::string id = case_id(f, impl, *make_problem(sp));
  try {
    const Tolerance t = suite.tolerances().resolve("scaled_mm", "d", DType::fp32, std::string(impl.name()),
                                                   suite.arch().name, id, &suite.manifest());
    return to_string(t.accumulator) + " (" + t.source + ")";
  } catch (const std::exception& e) {
    return std::string("none: ") + e.what();
  }
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

// "cuda.cublaslt" -> "scaled_mm.cuda_cublaslt*" (the id's impl token; `*` keeps its planted twins).
std::string impl_glob(const Impl& impl) {
  std::string n(impl.name());
  for (char& c : n)
    if (c == '.') c = '_';
  return "scaled_mm." + n + "*";
}

}  // namespace

int cmd_probe_accumulators(const Selection& sel, int device_flag, const std::string& out_path) {
  const int device = resolve_device(device_flag);
  const std::string arch = resolve_arch(sel.arch, device);
  use_cuda_device(device);
  // The impls run in this process, plugins' included (loaded here, as `opcts repro` does).
  SuiteOptions o{sel.cases_dir, sel.catalogs, arch, sel.manifest};
  o.plugins = sel.plugins;
  o.load_catalogs = false;
  const Suite suite(loaded_registry_for(sel.plugins), o);
  std::ostringstream head, body;
  const std::string where = suite.arch().backend == "host" ? "the host device" : "GPU " + std::to_string(device);
  head << "# opcts probe accumulators: arch " << arch << " on " << where << ", " << today() << "\n"
       << "# How each scaled_mm path sums K products (runner/accumulator_probe.hpp): paste the entries\n"
       << "# under `tolerance:` in the arch's manifest; the first matching entry wins.\n";
  int measured = 0, failed = 0;
  // Longer names first: an impl's glob (`cuda_cublaslt*`, which keeps its planted twins) also
  // matches the names it prefixes (`host_emulated*` matches host_emulated_hopper), and the
  // first matching entry wins.
  std::vector<const Impl*> impls = suite.registry().impls_of("scaled_mm");
  std::stable_sort(impls.begin(), impls.end(),
                   [](const Impl* a, const Impl* b) { return a->name().size() > b->name().size(); });
  for (const Impl* impl : impls) {
    if (impl->planted() || impl->backend() != suite.arch().backend) continue;
    if (!sel.filters.empty()) {
      bool hit = false;
      for (const auto& g : sel.filters) hit = hit || glob_match(g, std::string(impl->name()));
      if (!hit) continue;
    }
    // recipe label -> model text; grouped below into one entry per model.
    std::map<bool, std::map<std::string, std::vector<std::string>>> by_model;  // fast_accum -> model -> recipes
    for (const ProbeRecipe& r : probe_recipes()) {
      head << "#\n# " << impl->name() << " " << label(r) << "\n";
      head << "#   today: " << current_model(suite, *impl, r) << "\n";
      try {
        const ProbeFinding f = probe_accumulator(scaled_mm_run(suite, *impl, r, device));
        for (const auto& e : f.evidence) head << "#   " << e << "\n";
        if (!f.model) {
          head << "#   no model: " << f.unexplained << "\n";
          ++failed;
          continue;
        }
        head << "#   measured: " << to_string(*f.model) << "\n";
        by_model[r.fast_accum][to_string(*f.model)].push_back(std::string(scaled_mm::to_string(r.recipe)));
        ++measured;
      } catch (const std::exception& e) {
        head << "#   not probed: " << e.what() << "\n";
      }
    }
    // fast_accum entries first: a case id with _fastacc_ must meet its own entry before the general one.
    for (bool fast : {true, false})
      for (const auto& [model, recipes] : by_model[fast]) {
        const bool all = by_model[fast].size() == 1;
        std::vector<std::string> globs;
        if (all) globs.push_back(fast ? "*_fastacc_*" : "*");
        else
          for (const auto& rc : recipes) globs.push_back(rc + (fast ? "_*_fastacc_*" : "_*"));
        std::string list;
        for (const auto& rc : recipes) list += (list.empty() ? "" : ", ") + rc;
        for (const auto& g : globs)
          body << "  - match: \"" << impl_glob(*impl) << "/" << g << "\"\n"
               << "    accumulator: " << model << "\n"
               << "    reason: \"measured by opcts probe accumulators on " << arch << " (" << where << ", " << today()
               << "): " << list << (fast ? " with fast_accum" : "") << "\"\n";
      }
  }
  const std::string text = head.str() + "tolerance:\n" + body.str();
  if (out_path.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    std::ofstream f(out_path);
    f << text;
    if (!f.flush()) throw std::runtime_error("cannot write " + out_path);
  }
  std::fprintf(stderr, "opcts probe accumulators: %d paths measured, %d without a model\n", measured, failed);
  return failed ? 1 : measured ? 0 : 1;
}

}  // namespace opcts::cli
