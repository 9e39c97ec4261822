// Fuzzes ToleranceTable::load (judge/tolerance.hpp) and resolve() over the rules it read,
// with and without a manifest override. Checks: no crash, UB, leak or unexpected exception;
// every loaded rule has a family and finite, non-negative bounds, ref_relative/bounded rules
// a positive factor, and rtol only under allclose; resolve() of a rule's own family, output
// and dtype finds a rule (it may only throw std::runtime_error when none covers the output).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.hpp"
#include "judge/manifest.hpp"
#include "judge/tolerance.hpp"

namespace {

const opcts::Manifest& override_manifest() {
  static const opcts::Manifest m = opcts::Manifest::load(
      opcts_fuzz::write_file("override.yaml", "tolerance:\n  - {match: '*', reason: fuzz, factor: 3, atol: 0.5}\n"));
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opcts;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const Manifest& manifest = override_manifest();
  const std::string path = opcts_fuzz::write_file("tolerances.yaml", bytes);
  ToleranceTable t;
  if (!opcts_fuzz::accepts([&] { t = ToleranceTable::load(path); })) return 0;

  for (const auto& r : t.rules()) {
    for (double v : {r.tol.atol, r.tol.rtol, r.tol.factor, r.tol.atol_eps})
      if (!std::isfinite(v) || v < 0) opcts_fuzz::fail("rule at " + r.tol.source + " has a bad bound");
    if ((r.tol.metric == Metric::ref_relative || r.tol.metric == Metric::bounded) && !(r.tol.factor > 0))
      opcts_fuzz::fail("rule at " + r.tol.source + " has no positive factor");
    if (r.tol.metric != Metric::allclose && r.tol.rtol != 0)
      opcts_fuzz::fail("rule at " + r.tol.source + " has rtol outside allclose");
    for (const auto& d : r.dtypes) {
      DType dt{};
      try {
        dt = parse_dtype(d);
      } catch (const std::exception& e) {
        opcts_fuzz::fail("rule at " + r.tol.source + " holds dtype '" + d + "' that does not parse: " + e.what());
      }
      const std::string impl = r.impl.empty() ? "host.flash" : r.impl;
      const std::string arch = r.arch.empty() ? "host" : r.arch;
      for (const Manifest* m : {static_cast<const Manifest*>(nullptr), &manifest}) {
        // The rule's own impl/arch globs used as names match themselves unless they hold
        // glob metacharacters, so resolve may legitimately find nothing then.
        opcts_fuzz::accepts(
            [&] { (void)t.resolve(r.family, r.output.empty() ? "O" : r.output, dt, impl, arch, "x.y/z", m); });
      }
    }
    opcts_fuzz::accepts(
        [&] { (void)t.resolve(r.family, r.output, DType::fp32, "host.flash", "host", "id", &manifest); });
  }
  return 0;
}
