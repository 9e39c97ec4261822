// The case model: problems, families, impls, cases, and the registry that holds them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harness/arch.hpp"
#include "harness/compare.hpp"
#include "harness/tensor.hpp"

namespace YAML {
class Node;
}

namespace opcts {

/// Base of every family's problem type; each family downcasts to its own aggregate.
struct Problem {
  virtual ~Problem() = default;
};
using ProblemPtr = std::shared_ptr<const Problem>;

/// Work of a problem, for shard balancing: floating-point operations and bytes moved.
struct Cost {
  double flops = 0;
  double bytes = 0;
};

/// Whether an impl runs a problem on an arch; `reason` says why not.
struct Support {
  bool ok = true;
  std::string reason;
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

/// An output a family produces and compares: its name and dtype (for the tolerance table), and
/// the length of its rows for the ref_relative metric's per-row bound (consecutive runs of
/// `row` elements in storage order, e.g. sdpa's tiles of 16 query rows of O; 0: the whole
/// output is one row).
struct OutputSpec {
  std::string name;
  DType dtype;
  int64_t row = 0;
};

/// The fp64 reference and, for the ref_relative metric, a same-precision reference; a
/// per-element absolute error bound the family derives from its error model (bounded: the
/// whole accumulation bound; ref_relative: where the same-precision statistic says little).
struct References {
  std::map<std::string, std::vector<double>> exact;
  std::map<std::string, std::vector<double>> lowp;
  std::map<std::string, std::vector<double>> bound;
};

/// One operator family: owns its problem type, YAML parser, stable id, inputs, reference.
class Family {
 public:
  virtual ~Family() = default;
  virtual std::string_view name() const = 0;
  /// Parses one problem from a YAML map (a catalog edge's `problem:` or one grid point).
  /// Throws std::runtime_error naming the field (the caller adds file and line).
  virtual ProblemPtr parse(const YAML::Node& node) const = 0;
  /// The problem part of a case id: readable, stable, a valid gtest name, globbable.
  virtual std::string problem_id(const Problem& p) const = 0;
  /// Inverse of problem_id; throws std::invalid_argument naming the bad token.
  virtual ProblemPtr parse_id(std::string_view id) const = 0;
  virtual Cost cost(const Problem& p) const = 0;
  virtual std::vector<OutputSpec> outputs(const Problem& p) const = 0;
  /// Inputs from the counter-based RNG; a pure function of (problem, seed).
  virtual TensorMap make_inputs(const Problem& p, uint64_t seed) const = 0;
  virtual References reference(const Problem& p, const TensorMap& inputs) const = 0;
  /// For a negative case: the argument whose refusal (InvalidArgument) is the right result.
  /// The case then PASSes when the impl throws InvalidArgument naming that argument, and
  /// FAILs when it runs or blames another one. Empty for ordinary problems.
  virtual std::string expected_error(const Problem&) const { return {}; }
  /// Trust check (benchdnn's zero_trust_percent): the fraction of an output's elements that
  /// may be exactly zero whatever the reference holds. The case is MISTRUSTED when the output
  /// has more zeros than max(this, the reference's own zero fraction) + 1% (harness/trust.hpp).
  virtual double max_zero_fraction(const Problem&, const std::string& /*output*/) const { return 0.3; }
  /// Names the reference's algorithm for the on-disk reference cache: bump it whenever
  /// `reference` (or `make_inputs`) changes, so stale cached references are recomputed.
  virtual std::string reference_version() const { return "1"; }
  /// Device memory a run needs (inputs plus outputs), for the fits-in-memory SKIP.
  virtual double device_bytes(const Problem& p) const { return cost(p).bytes; }
};

/// What an impl is given besides the problem.
struct RunContext {
  const ArchInfo* arch = nullptr;
  int device = -1;  // GPU ordinal; -1 on the host device
};

/// One implementation of a family on one backend.
class Impl {
 public:
  virtual ~Impl() = default;
  virtual std::string_view family() const = 0;
  /// "cuda.flash": backend, a dot, the implementation.
  virtual std::string_view name() const = 0;
  /// "cuda", "hip" or "host": the impl runs on archs of this backend.
  virtual std::string_view backend() const = 0;
  /// Capabilities (archs.yaml) the impl needs on every problem.
  virtual std::vector<std::string> required_caps() const { return {}; }
  /// Problem-dependent support (dtype, head dim, ...), given the arch.
  virtual Support supports(const Problem& p, const ArchInfo& arch) const = 0;
  /// Runs the problem; returns the outputs named by Family::outputs. Throws on errors.
  virtual TensorMap run(const Problem& p, const TensorMap& inputs, const RunContext& ctx) const = 0;
  /// A deliberately wrong impl that proves the suite catches a bug class; its cases exist only
  /// when asked for (--include-planted) and must FAIL.
  virtual bool planted() const { return false; }
  /// Same inputs give the same output bytes on every run of this problem (`opcts run
  /// --bitwise` checks it). True unless the impl reduces in a run-dependent order on it
  /// (atomics, split-K with atomics), which may depend on the problem (direction, sizes).
  virtual bool deterministic(const Problem&) const { return true; }
};

enum class Tier { smoke, default_, full };
std::string_view to_string(Tier t);
/// "smoke", "default" or "full"; throws std::invalid_argument.
Tier parse_tier(std::string_view s);

/// family + impl + problem, with the tier and the catalog place it came from.
struct Case {
  std::string id;  // "<family>.<impl with '.'→'_'>/<problem id>"
  const Family* family = nullptr;
  const Impl* impl = nullptr;
  ProblemPtr problem;
  Tier tier = Tier::full;
  std::string source;  // "cases/sdpa.yaml:12 (grid llama3_8b_prefill)"
  std::string why;     // an edge's reason, if any
};

/// The case id of a problem under an impl.
std::string case_id(const Family& f, const Impl& impl, const Problem& p);
/// The seed of a problem: every impl of one problem sees the same inputs.
uint64_t case_seed(const Family& f, const Problem& p);

/// Every family and impl this build has. Registration is explicit (register_builtins),
/// so nothing depends on static initialisation order in static libraries.
class Registry {
 public:
  void add(std::unique_ptr<Family> f);
  void add(std::unique_ptr<Impl> i);
  const Family* family(std::string_view name) const;
  const Impl* impl(std::string_view name) const;
  /// The impl whose id spelling ("cuda_flash") matches.
  const Impl* impl_by_id_token(std::string_view token) const;
  std::vector<const Family*> families() const;
  std::vector<const Impl*> impls_of(std::string_view family) const;

 private:
  std::vector<std::unique_ptr<Family>> families_;
  std::vector<std::unique_ptr<Impl>> impls_;
};

/// The registry with every family and impl compiled into this binary.
const Registry& builtin_registry();

}  // namespace opcts
