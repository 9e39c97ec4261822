// The case model: problems, families, impls, cases, and the registry that holds them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "core/arch.hpp"
#include "core/invariance.hpp"
#include "core/reduction.hpp"
#include "core/result.hpp"
#include "numerics/tensor.hpp"

namespace YAML {
class Node;
}

namespace opcts {

/// Any family's problem: an immutable value of the family's own plain aggregate (sdpa::Problem,
/// scaled_mm::Problem, ...), type-erased so that the runner holds problems without knowing
/// their families. `as<P>()` gives the aggregate back. Any aggregate converts implicitly (a
/// copy), so a test can hand `sdpa::Problem{...}` to a Family or Impl directly.
class Problem {
 public:
  template <class P, std::enable_if_t<!std::is_same_v<std::decay_t<P>, Problem>, int> = 0>
  Problem(P p) : value_(std::make_shared<const P>(std::move(p))), type_(&typeid(P)) {}  // implicit: see above
  /// The aggregate; throws std::logic_error when the problem is of another type (a family
  /// handed another family's problem: a bug in the caller).
  template <class P>
  const P& as() const {
    if (*type_ != typeid(P))
      throw std::logic_error(std::string("a problem of type ") + type_->name() + " read as " + typeid(P).name());
    return *static_cast<const P*>(value_.get());
  }

 private:
  std::shared_ptr<const void> value_;
  const std::type_info* type_;
};
using ProblemPtr = std::shared_ptr<const Problem>;

/// A shared problem holding a copy of `p`.
template <class P>
ProblemPtr make_problem(P p) {
  return std::make_shared<const Problem>(std::move(p));
}

/// Work of a problem, for shard balancing: floating-point operations and bytes moved.
struct Cost {
  double flops = 0;
  double bytes = 0;
};

/// Whether an impl runs a problem on an arch; `reason` says why not.
struct Support {
  bool ok = true;
  std::string reason;
  // The impl could not answer at all (a plugin's supports() that crashed or hung, asked in a
  // probe process: app/plugin_probe.hpp): the case is an ERROR with `reason`, not a SKIP.
  bool error = false;
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
  static Support failed(std::string why) { return {false, std::move(why), true}; }
};

/// An output a family produces and compares: its name and dtype (for the tolerance table), its
/// shape as stored (row-major, contiguous; backends allocate it for the impls they run), and the
/// length of its rows for the ref_relative metric's per-row bound (consecutive runs of `row`
/// elements in storage order, e.g. sdpa's tiles of 16 query rows of O; 0: the whole output is
/// one row). `misalign_bytes` (a multiple of the element size) asks the ABI backends to place
/// the tensor that many bytes past an aligned base, e.g. 2 for a 16-bit tensor whose base is 2-
/// but not 4-byte aligned.
struct OutputSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  int64_t row = 0;
  int64_t misalign_bytes = 0;
};

/// A reduction output's conservation check (judge/conservation.hpp): its elements summed over
/// each group of `group` consecutive elements in storage order (a destination row; the last
/// group may be shorter; 0: the whole output is one group) and over the whole output, against
/// the fp64 sums of the exact values (self plus every term summed into the group). Σ got − sum
/// must lie in [−below, above] for every group and for the whole output; the reference derives
/// both sides from the accumulation model like its per-element bounds, output roundings
/// included, so one element's lost term, within its own bound, still moves its group's sum.
struct Conservation {
  int64_t group = 0;
  std::vector<double> sum, below, above;  // per group
  double total_sum = 0, total_below = 0, total_above = 0;
  bool operator==(const Conservation&) const = default;
};

/// An output's error-energy check (judge/error_energy.hpp): the errors x = got − want of its
/// elements modelled as x = Σ_k G_k·z_k + f — each source k a set of independent mean-zero
/// roundings (z_k's coordinates 1-sub-Gaussian once G_k carries their variance proxies: b²/3
/// for a rounding uniform on [−b, b], a² for an error bounded by a) — and f bounded outright.
/// The statistic is the weighted norm ‖x‖_w = √(Σ_i w_i·x_i²) with weights fixed by the
/// reference (empty: all 1), so a source is summarised by upper bounds of tr C, tr C² and ‖C‖
/// for C = W^½·G_k·G_kᵀ·W^½, and f by ‖f‖_w; the judge derives the limit of ‖x‖_w from them
/// (Hsu, Kakade and Zhang's tail bound for quadratic forms of sub-Gaussian vectors, Minkowski
/// across the sources).
struct ErrorEnergy {
  struct Source {
    double trace = 0, trace_sq = 0, spectral = 0;
    bool operator==(const Source&) const = default;
  };
  std::vector<Source> sources;
  double fixed = 0;            // ‖f‖_w
  std::vector<double> weight;  // w_i per element in storage order, or empty
  bool operator==(const ErrorEnergy&) const = default;
};

/// How an output was judged: the key its tolerance rule's accumulation selects (bound_key(output,
/// accumulation): which of the reference's bounds and energy checks applied), the rule's
/// ref_relative factor, and the limit its error-energy check had (judge/error_energy.hpp; 0 for
/// none).
struct JudgedUnder {
  std::string key;
  double factor = 1;
  double energy_limit = 0;
};
/// What a planted impl's blind spot is derived from (Impl::blind_spot): the case's inputs, its
/// reference, and how each output was judged.
struct References;
struct CaseEvidence {
  const TensorMap& inputs;
  const References& refs;
  std::map<std::string, JudgedUnder> judged_under;  // by output name
};

/// The fp64 reference and, for the ref_relative metric, a same-precision reference; for the
/// bounded metric either a per-element bound the family derives for the one arithmetic it
/// allows (`bound`), or each element's reduction statistics, from which each impl's accumulator
/// model gives the bound (`reduction`; judge/accumulator.hpp: the reference knows no impl's model);
/// for ref_relative, `bound` is the rounding model's floor where the same-precision statistic
/// says little.
struct References {
  std::map<std::string, std::vector<double>> exact;
  std::map<std::string, std::vector<double>> lowp;
  std::map<std::string, std::vector<double>> bound;
  std::map<std::string, ReductionStats> reduction;
  // Where an element's error may be larger below the reference than above it (or the other
  // way): `bound` then allows got − want up to bound[i] above and `bound_below` down to
  // −bound_below[i] below, under the same key (a sum of one-signed terms whose 16-bit counter
  // stalls may lose mass down to its stall point, families/indexing/bound.cpp). Absent: `bound`
  // holds both sides.
  std::map<std::string, std::vector<double>> bound_below;
  // A reduction output's conservation check, under the same keys as `bound`
  // (judge/conservation.hpp).
  std::map<std::string, Conservation> conservation;
  // An output's error-energy check, under the same keys as `bound` (judge/error_energy.hpp).
  std::map<std::string, ErrorEnergy> energy;
};

/// The key of References::bound that holds output `output`'s bound under an accumulation
/// model an impl declares (cases/tolerances.yaml or a manifest tolerance entry,
/// `accumulation:`): "<output>@<accumulation>", e.g. "lse@online_block64" or "out@per_add";
/// plain "<output>" when `accumulation` is empty (the bound for an impl that declares none).
/// References write their bounds under it and the comparison looks them up by it.
std::string bound_key(std::string_view output, std::string_view accumulation);

/// The sub-problem an axis cuts from a case (Family::invariance_cut), or why there is none.
struct InvarianceCut {
  std::string why_not;  // non-empty: this problem cannot be cut along the axis (then nothing else is set)
  ProblemPtr problem;   // the sub-problem
  std::string what;     // "entry 0 run alone (a batch of 1)": how the message names the sub-problem
  /// Each input of the sub-problem built from the case's: its runs. An input not listed is the
  /// sub-problem's own (make_inputs: cu_seqlens, which follow from the sub-problem).
  std::map<std::string, std::vector<SharedRun>> inputs;
  /// Each output whose shared elements must hold the case's bytes: its runs. Outputs not listed
  /// are not compared (a sum over the batch: dsinks, a broadcast dbias).
  std::map<std::string, std::vector<SharedRun>> outputs;
  /// No cut, for the reason given.
  static InvarianceCut none(std::string why) {
    InvarianceCut c;
    c.why_not = std::move(why);
    return c;
  }
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
  /// Names the reference's algorithm for the on-disk reference cache: bump it whenever
  /// `reference` (or `make_inputs`) changes, so stale cached references are recomputed.
  virtual std::string reference_version() const { return "1"; }
  /// Device memory a run needs (inputs plus outputs), for the fits-in-memory SKIP.
  virtual double device_bytes(const Problem& p) const { return cost(p).bytes; }
  /// The problem's fields, one per line (`opcts list --fields FAMILY`; core/fields.hpp).
  virtual std::string describe_fields() const = 0;
  /// The family's parameter struct of the plugin ABI (include/opcts/plugin.h,
  /// opcts_<family>_params) for a problem, as bytes; empty when the family has none (then no
  /// ABI impl can be registered for it).
  virtual std::vector<unsigned char> abi_params(const Problem&) const { return {}; }
  /// The plugin ABI minor version a problem needs (include/opcts/plugin.h OPCTS_PLUGIN_ABI_MINOR:
  /// what a later header appended, such as sdpa's varlen layout), and what it is, for the SKIP
  /// of an impl that declares an earlier one (core/abi_impl.cpp).
  virtual uint32_t abi_minor(const Problem&) const { return 0; }
  virtual std::string abi_minor_feature(const Problem&) const { return {}; }
  /// Whether two problems of this family are the same value (every field equal).
  virtual bool equal(const Problem& a, const Problem& b) const = 0;
  /// The edge classes where shipped kernels broke (docs/coverage.md) that apply to this family,
  /// in report order; empty when the family declares none. `opcts list --coverage` counts the
  /// selected problems that reach each and lists those none reaches.
  virtual std::vector<std::string> edge_classes() const { return {}; }
  /// The classes of edge_classes() that `p` reaches (a negative case's "invalid arguments" is
  /// the caller's, from expected_error).
  virtual std::vector<std::string> edge_classes_of(const Problem&) const { return {}; }
  /// How `axis` cuts p for the invariance contracts (core/invariance.hpp): the sub-problem, and
  /// which of its inputs' and outputs' elements are the case's (`inputs`: the case's, which give
  /// the tensors' shapes), or why_not. By default batch_size runs the first entry of
  /// batch_entries alone and batch_position the batch reversed, cutting each input and output
  /// that leads with the batch; packing has no cut (a family with two batch layouts overrides).
  virtual InvarianceCut invariance_cut(const Problem& p, const TensorMap& inputs, InvarianceAxis axis) const;
  /// The batch of a problem for the invariance contracts (core/invariance.hpp): how many
  /// entries it has along the axis with_batch cuts (sdpa: batch entries; the GEMMs: rows of A),
  /// or 0 with the reason in `why` where this problem's batch cannot be cut (a scale layout that
  /// does not lead with the rows, a family without a batch). Nonzero only
  /// where each input either holds one slice per entry along its leading dimension or does not
  /// depend on the batch at all (the runner tells them apart by the batch of one's shapes, so an
  /// input of one slice per 128 entries would pass for one that does not depend on it).
  virtual int64_t batch_entries(const Problem&, std::string& why) const {
    why = "the family declares no batch axis";
    return 0;
  }
  /// p with `entries` entries along that axis, every other field p's. Each input and output of
  /// p whose leading dimension is the batch has it cut there; the others are the same tensors.
  virtual ProblemPtr with_batch(const Problem& p, int64_t entries) const;
};

/// An output whose guard bytes a run changed (core/output_guard.hpp): which, and what changed.
struct GuardBreach {
  std::string output;
  std::string message;  // "<impl> wrote outside its output: bytes [+0, +2) past the end of 'out' ..."
};

/// What an impl is given besides the problem.
struct RunContext {
  const ArchInfo* arch = nullptr;
  int device = -1;  // GPU ordinal; -1 on the host device
  // Where the run may say which of the harness's own checks did not apply to it (the CUDA
  // backend's stream check when the run waited for the device); a passing record carries it as
  // its message (runner/execute.cpp). Null: nobody asks.
  std::string* note = nullptr;
  // Where an ABI backend reports outputs written outside (guard bytes changed): with this set it
  // returns the outputs anyway, so that their values are judged too (runner/execute.cpp records
  // a written_outside failure per output); null: it throws ContractBreach.
  std::vector<GuardBreach>* breaches = nullptr;
  // The tactic the case runs (Impl::tactics, the case id's last part); "" for an impl without.
  std::string_view tactic;
};

/// What `opcts run --capture` gets from an impl (Impl::run_captured, runner/capture.hpp): its run
/// recorded once with the capture-time inputs in its input buffers — a CUDA graph's capture on
/// the GPU backends — and replayed: once on those inputs, then twice after the case's inputs were
/// copied into the same buffers (each replay into outputs poisoned afresh).
struct CapturedRun {
  TensorMap at_capture;     // the replay on the capture-time inputs
  TensorMap first, second;  // the two replays on the case's inputs
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
  /// Problem-dependent support (dtype, head dim, ...), given the arch. Not asked before a
  /// negative case (Family::expected_error), which must reach run so that the impl's own refusal
  /// is judged; a decline there only turns a refusal that is not the contract's into a SKIP
  /// (runner/execute.cpp). So supports declines what the impl does not implement, never an
  /// argument the contract says run must refuse.
  virtual Support supports(const Problem& p, const ArchInfo& arch) const = 0;
  /// Why this impl cannot run anything in this build ("built without CUDA"), "" when it can:
  /// the one decline a negative case honours before it runs.
  virtual std::string unavailable() const { return {}; }
  /// Why `p` must never reach this impl at all, or "": a problem that needs a later plugin ABI
  /// minor version than the impl declares (an old plugin would misread it). Unlike supports(),
  /// this holds for negative cases too (runner/suite.cpp).
  virtual std::string abi_gap(const Problem&) const { return {}; }
  /// Runs the problem; returns the outputs named by Family::outputs. Throws on errors.
  virtual TensorMap run(const Problem& p, const TensorMap& inputs, const RunContext& ctx) const = 0;
  /// A deliberately wrong impl that proves the suite catches a bug class; its cases exist only
  /// when asked for (--include-planted) and must FAIL.
  virtual bool planted() const { return false; }
  /// Same inputs give the same output bytes on every run of this problem (`opcts run
  /// --bitwise` checks it). True unless the impl reduces in a run-dependent order on it
  /// (atomics, split-K with atomics), which may depend on the problem (direction, sizes) and on
  /// the tactic the case runs (`tactic`: one of tactics(p), "" for an impl without).
  virtual bool deterministic(const Problem&, std::string_view tactic) const {
    (void)tactic;
    return true;
  }
  /// For a planted impl whose bug is a determinism claim it breaks: only `opcts run --bitwise`
  /// can show it, so without --bitwise its cases SKIP (instead of passing as XPASS).
  virtual bool bug_needs_bitwise() const { return false; }
  /// The axes over which this impl's outputs are invariant bit for bit on p
  /// (core/invariance.hpp; `opcts run --invariance` checks them). None by default.
  virtual std::vector<InvarianceAxis> invariant_axes(const Problem&) const { return {}; }
  /// For a planted impl whose bug breaks an invariance claim: only `opcts run --invariance` can
  /// show it, so without it its cases SKIP.
  virtual bool bug_needs_invariance() const { return false; }
  /// --capture (CapturedRun): the run recorded with `capture_inputs` in its input buffers and
  /// replayed on them, then twice on `inputs` copied into the same buffers. This default is the
  /// host's equivalent of a graph: run is called on buffers that hold `capture_inputs`, then twice
  /// more on the very same buffers (same addresses) rewritten with `inputs`, so that whatever an
  /// impl keys on a buffer's address instead of its contents shows as a replayed graph's baked
  /// value would. Throws ContractBreach(wrote_input) for an impl that wrote into its buffers, and
  /// what run throws.
  virtual CapturedRun run_captured(const Problem& p, const TensorMap& capture_inputs, const TensorMap& inputs,
                                   const RunContext& ctx) const;
  /// For a planted impl whose bug only a recorded and replayed run shows (a value kept from
  /// capture): only `opcts run --capture` can show it, so without it its cases SKIP.
  virtual bool bug_needs_capture() const { return false; }
  /// For a planted impl whose case passed: why the suite's bound may not see its bug on `p`
  /// although the bug changes the output (a reason derived from the arithmetic, such as a bias
  /// check whose noise band reaches past the bug's slope), or "" where it should have been caught.
  /// Derived from the problem and the case's evidence — never from what the impl returned. A
  /// PASS is XPASS all the same; reports list it apart with this reason.
  virtual std::string blind_spot(const Problem&, const CaseEvidence&) const { return {}; }
  /// The tactics this impl can run p with — a library's algorithms or engine configs, a kernel's
  /// variants — first the one it picks by default; empty for an impl with one way (its cases have
  /// no tactic part). Each becomes a case of its own, `<case id>/<tactic>`, which RunContext::tactic
  /// hands to run: a manifest entry can xfail one tactic, and tactic_tier decides which run at a
  /// tier. Names are tactic names (is_tactic_name) that depend on the problem only, never on the
  /// machine or the build, so case ids stay stable: a tactic the device turns out not to offer is
  /// declined at run time (TacticUnavailable: a SKIP naming it).
  virtual std::vector<std::string> tactics(const Problem&) const { return {}; }
  /// Called once before tactics() is asked of `problems` (every problem of this impl's family
  /// the suite plans), so that an impl whose answers cost a process (a plugin's, asked in a probe)
  /// can ask them all at once.
  virtual void plan_tactics(const std::vector<const Problem*>& problems) const { (void)problems; }

  /// The family this impl belongs to, bound by Registry::add (impls never look it up
  /// globally). Throws std::logic_error before registration.
  const Family& family_def() const;

 private:
  friend class Registry;
  const Family* family_ = nullptr;
};

enum class Tier { smoke, default_, full };
std::string_view to_string(Tier t);
/// "smoke", "default" or "full"; throws std::invalid_argument.
Tier parse_tier(std::string_view s);

/// family + impl + problem, with the tier and the catalog place it came from.
struct Case {
  std::string id;  // "<family>.<impl with '.'→'_'>/<problem id>[/<tactic>]"
  const Family* family = nullptr;
  const Impl* impl = nullptr;
  ProblemPtr problem;
  Tier tier = Tier::full;
  std::string source;  // "cases/sdpa.yaml:12 (grid llama3_8b_prefill)"
  std::string why;     // an edge's reason, if any
  std::string tactic;  // one of impl->tactics(*problem), or "" for an impl without tactics
};

/// The case id of a problem under an impl.
std::string case_id(const Family& f, const Impl& impl, const Problem& p);
/// The same from the problem's id already rendered (f.problem_id(p)), for loaders that hold it;
/// a tactic (Impl::tactics) is appended after a '/'.
std::string case_id_from_problem_id(const Family& f, const Impl& impl, std::string_view problem_id,
                                    std::string_view tactic = {});

/// A case id's parts: "<family>.<impl token>/<problem id>[/<tactic>]" (a problem id holds no '/').
struct CaseIdParts {
  std::string_view family, impl_token, problem_id, tactic;
};
/// Splits a case id; throws std::invalid_argument naming it where it has no '.' before a '/'.
CaseIdParts split_case_id(std::string_view id);

/// The tactics the suite makes cases of for `impl` on `p`: Impl::tactics, or none for a negative
/// problem (Family::expected_error), which is judged on the impl's refusal alone — one case,
/// whose run gets no tactic.
std::vector<std::string> tactics_of(const Impl& impl, const Problem& p);

/// A tactic's name: 1 to 32 of [a-z0-9_], beginning with a letter ("h0", "split_k4", "fma").
bool is_tactic_name(std::string_view s);

/// The tier from which tactic `index` of `count` (Impl::tactics' order) of a problem of tier
/// `problem_tier` runs: the first (the impl's own pick) with the problem; at the default tier one
/// more, which rotates over the problems (index 1 + FNV-1a(problem id) mod (count - 1)), so the
/// catalog's problems of one impl cover its other tactics between them; every tactic at full.
Tier tactic_tier(Tier problem_tier, size_t index, size_t count, std::string_view problem_id);
/// The seed of a problem: every impl of one problem sees the same inputs.
uint64_t case_seed(const Family& f, const Problem& p);
/// The seed of the inputs `opcts run --capture` records an impl's run with (Impl::run_captured)
/// before it copies the case's own in: another draw of the same problem.
uint64_t capture_seed(const Family& f, const Problem& p);

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

}  // namespace opcts
