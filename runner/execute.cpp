// One case end to end inside a worker (or `opcts repro`).
#include "runner/execute.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include <cstdlib>
#include <fstream>
#include "judge/compare.hpp"
#include "judge/conservation.hpp"
#include "judge/error_energy.hpp"
#include "runner/artifacts.hpp"
#include "runner/capture.hpp"
#include "runner/invariance.hpp"
#include "runner/output_bytes.hpp"

#include "core/errors.hpp"
#include "judge/trust.hpp"
#include "numerics/rng.hpp"
#include "runner/ref_disk_cache.hpp"
#include "runner/run.hpp"

namespace opcts {

const ReferenceCache::Entry& ReferenceCache::get(const Case& c, bool* fresh) {
  const std::string key = std::string(c.family->name()) + "/" + c.family->problem_id(*c.problem);
  if (fresh) *fresh = !last_ || last_->key != key;
  if (!last_ || last_->key != key) {
    last_.reset();  // free the old buffers before making the new ones
    const auto t0 = std::chrono::steady_clock::now();
    auto e = std::make_unique<Entry>();
    e->key = key;
    e->inputs = c.family->make_inputs(*c.problem, case_seed(*c.family, *c.problem));
    const auto t_inputs = std::chrono::steady_clock::now();
    e->inputs_ms = std::chrono::duration<double, std::milli>(t_inputs - t0).count();
    // Test hook: one line per problem whose inputs were made, so a test can prove that the
    // impls of a problem share them (tests/test_supervisor.cpp).
    if (const char* trace = std::getenv("OPCTS_TRACE_INPUTS"); trace && *trace)
      std::ofstream(trace, std::ios::app) << key << "\n";
    const std::string disk_key = disk_.enabled() ? RefDiskCache::key(*c.family, *c.problem, e->inputs) : std::string();
    if (auto stored = disk_.load(disk_key)) {
      e->refs = std::move(*stored);
      ++stats_.loaded;
    } else {
      e->refs = c.family->reference(*c.problem, e->inputs);
      disk_.store(disk_key, e->refs);
      ++stats_.computed;
    }
    e->ref_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_inputs).count();
    stats_.ref_ms += e->inputs_ms + e->ref_ms;
    for (const auto& [name, t] : e->inputs) e->input_fingerprints.emplace_back(name, fingerprint(t));
    last_ = std::move(e);
  }
  return *last_;
}

// A field added to ExecOptions must get its row in kExecFlags, or workers never see it.
static_assert(sizeof(ExecOptions) == 2 * sizeof(std::string) + 2 * sizeof(std::uint64_t),
              "ExecOptions changed: give the new field its row in kExecFlags (runner/execute.hpp)");

std::vector<std::string> exec_worker_args(const ExecOptions& e) {
  std::vector<std::string> args;
  for (const ExecFlag& f : kExecFlags) {
    if (const auto* text = std::get_if<std::string ExecOptions::*>(&f.field)) {
      if (!(e.*(*text)).empty()) args.insert(args.end(), {f.flag, e.*(*text)});
    } else if (const auto* flag = std::get_if<bool ExecOptions::*>(&f.field)) {
      if (e.*(*flag)) args.emplace_back(f.flag);
    } else {
      args.insert(args.end(), {f.flag, std::to_string(e.*std::get<std::uint64_t ExecOptions::*>(f.field))});
    }
  }
  return args;
}

namespace {

// The value at `key`, or null: a reference a family does not give for an output.
template <typename Map>
const typename Map::mapped_type* found(const Map& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

// A tolerance's source ("<dir>/tolerances.yaml:412, manifest <dir>/sm90.yaml:37") as a record
// names it: each part's file name and line ("tolerances.yaml:412, sm90.yaml:37"), which the
// record's selection (its cases folder and file digests) makes unambiguous.
std::string rule_of(const std::string& source) {
  std::string rule, part;
  std::istringstream parts(source);
  while (std::getline(parts, part, ',')) {
    const size_t start = part.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    part = part.substr(start);
    if (part.rfind("manifest ", 0) == 0) part = part.substr(9);
    const size_t slash = part.find_last_of('/');
    rule += (rule.empty() ? "" : ", ") + (slash == std::string::npos ? part : part.substr(slash + 1));
  }
  return rule;
}

std::string describe_failure(const ResultRecord& r, const std::vector<GuardBreach>& breaches) {
  std::ostringstream m;
  for (const GuardBreach& b : breaches) m << b.message << "; ";
  for (const auto& o : r.outputs) {
    const std::string rule = o.rule.empty() ? "" : " [rule " + o.rule + "]";
    if (o.biased())
      m << o.out << ": biased: the error's slope against the value is " << o.slope << ", outside [" << o.slope_lo
        << ", " << o.slope_hi << "] (a relative error common to all elements)" << rule << "; ";
    if (o.conservation_off)
      m << o.out << ": not conserved: " << o.conservation_off
        << " sum(s) outside the reference's interval (destination rows, whole output), first " << o.conservation << rule
        << "; ";
    if (o.energy_ratio > 1)
      m << o.out << ": excess error energy: the root of its summed squared errors is " << o.energy_ratio
        << " x the limit a correct kernel's modelled roundings reach (judge/error_energy.hpp)" << rule << "; ";
    if (!o.mismatches) continue;
    m << o.out << ": " << o.mismatches << "/" << o.elements << " mismatches, max abs err " << o.max_abs_err;
    // `bounded` compares each element with its own bound: the largest one says little. The
    // error is taken over finite pairs, so when it is within the bound the mismatches are
    // NaN or inf where the reference holds another value.
    if (o.metric == "bounded") m << " (per-element bounds, largest " << o.bound << ")";
    else if (o.max_abs_err <= o.bound)
      m << " (finite elements within bound " << o.bound << "; the mismatches are NaN/inf)";
    else m << " > bound " << o.bound;
    if (o.metric == "ref_relative") m << " (same-precision reference err " << o.lowp_err << ")";
    m << rule;
    m << "; ";
  }
  if (!r.worst.empty()) {
    const auto& w = r.worst.front();
    m << "worst " << w.out << "[";
    for (size_t i = 0; i < w.index.size(); ++i) m << (i ? "," : "") << w.index[i];
    m << "] got " << w.got << " want " << w.want;
  }
  return m.str();
}

// What the worst element's position says besides got and want: the input at the same index
// where an input has the output's shape (cast's x: which value was converted), and a hint when
// the output still holds the poison every output arrives filled with (0xFF bytes), which decodes
// to a plain number in some formats (-6 in e2m1fn) and reads as a wrong answer.
std::string worst_context(const std::vector<WorstElement>& worst, const TensorMap& inputs, const TensorMap& outputs) {
  if (worst.empty()) return "";
  const WorstElement& w = worst.front();
  const auto out = outputs.find(w.out);
  if (out == outputs.end() || w.index.size() != out->second.shape().size()) return "";
  const HostTensor& y = out->second;
  int64_t linear = 0;
  for (size_t k = 0; k < w.index.size(); ++k) linear = linear * y.dim(k) + w.index[k];
  if (linear < 0 || linear >= y.numel()) return "";
  std::ostringstream m;
  m.precision(9);
  for (const auto& [name, x] : inputs)
    if (x.shape() == y.shape()) m << " from " << name << " = " << x.get(linear);
  const int bits = dtype_info(y.dtype()).bits;
  if (y.code(linear) == (bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1))
    m << " (the bits the output arrived with, all ones: never written?)";
  return m.str();
}

// A negative case: the impl must refuse the invalid argument itself, with InvalidArgument
// naming it. Its supports() is asked only after another refusal: a decline there means the impl
// does not implement the problem's (valid) rest — a recipe, a layout, an M — so the refusal it
// gave says nothing of the argument and the case is a SKIP; an impl that accepts the invalid
// problem FAILs whatever its supports() says. The Suite never lets supports() skip a negative
// case before it runs (Suite::skip_reason), which would hide the refusal the case is about.
void judge_refusal(const Suite& suite, const Case& c, int device, const std::string& expected, ResultRecord& r) {
  std::string refusal, said;  // the failure's message, and what the impl said instead of the expected refusal
  try {
    const TensorMap inputs = c.family->make_inputs(*c.problem, case_seed(*c.family, *c.problem));
    RunContext ctx;
    ctx.arch = &suite.arch(), ctx.device = device, ctx.tactic = c.tactic;
    c.impl->run(*c.problem, inputs, ctx);
    r.raw_outcome = Outcome::FAIL;
    r.message = "accepted an invalid '" + expected + "': expected InvalidArgument naming it";
    r.failures = {{"", FailureKind::accepted_invalid, 0, 0}};
    return;
  } catch (const InvalidArgument& e) {
    if (e.argument == expected) {
      r.raw_outcome = Outcome::PASS;
      return;
    }
    said = e.what();
    refusal = "refused the wrong argument: " + said;
  } catch (const DeviceLost&) {
    throw;
  } catch (const std::exception& e) {
    said = e.what();
    refusal = "expected InvalidArgument naming '" + expected + "', got: " + said;
  }
  const Support s = c.impl->supports(*c.problem, suite.arch());
  if (!s.ok) {
    r.raw_outcome = Outcome::SKIP;
    r.message = s.reason + " (a negative case for '" + expected +
                "', refused for what the impl does not implement: " + said + ")";
    return;
  }
  r.raw_outcome = Outcome::FAIL;
  r.message = refusal;
  r.failures = {{"", FailureKind::wrong_refusal, 0, 0}};
}

// Runs the impl and refuses one that wrote into its inputs (every impl, built in or plugin:
// the inputs are the reference's, and a kernel that scribbles on them may still match it).
// `run_ms`, when given, gets the impl's own time (the checks are the harness's); `made`, when
// given, holds the inputs' fingerprints taken when they were made (else they are taken here).
TensorMap run_checked(const Impl& impl, const Problem& p, const TensorMap& inputs, const RunContext& ctx,
                      double* run_ms = nullptr, const std::vector<std::pair<std::string, uint64_t>>* made = nullptr) {
  std::vector<std::pair<std::string, uint64_t>> taken;
  if (!made)
    for (const auto& [name, t] : inputs) taken.emplace_back(name, fingerprint(t));
  const auto& before = made ? *made : taken;
  const auto t0 = std::chrono::steady_clock::now();
  TensorMap out = impl.run(p, inputs, ctx);
  if (run_ms) *run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& [name, h] : before)
    if (fingerprint(inputs.at(name)) != h)
      throw ContractBreach(FailureKind::wrote_input,
                           std::string(impl.name()) + " wrote into its input '" + name + "' (inputs are read-only)");
  return out;
}

constexpr uint64_t kSecondSeed = 0x5eed5eed5eed5eedull;

}  // namespace

ResultRecord execute_case(const Suite& suite, const Case& c, int device, ReferenceCache& cache,
                          const ExecOptions& opts) {
  ResultRecord r = base_record(suite, c, device);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string expected = c.family->expected_error(*c.problem);
  if (!expected.empty()) {
    judge_refusal(suite, c, device, expected, r);
    r.outcome = r.raw_outcome;
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }
  try {
    bool fresh = false;
    const auto& ref = cache.get(c, &fresh);
    if (fresh) {
      r.inputs_ms = ref.inputs_ms;
      r.ref_ms = ref.ref_ms;
    }
    std::string note;                   // a check of the backend's that did not apply (RunContext::note)
    std::vector<GuardBreach> breaches;  // outputs written outside: judged with their values
    RunContext ctx;
    ctx.arch = &suite.arch(), ctx.device = device, ctx.note = &note, ctx.breaches = &breaches, ctx.tactic = c.tactic;
    CaseEvidence evidence{ref.inputs, ref.refs, {}};  // for a planted pass's blind spot
    TensorMap out = run_checked(*c.impl, *c.problem, ref.inputs, ctx, &r.device_ms, &ref.input_fingerprints);
    // --capture: the run recorded on other inputs and replayed on the case's; the first replay
    // is what gets judged (runner/capture.hpp). After a run that wrote outside an output, whose
    // breach is recorded already, there is nothing more to learn from its recording.
    if (opts.capture && breaches.empty()) {
      RunContext rec = ctx;
      rec.breaches = nullptr;  // a replay's breach is thrown (ContractBreach)
      out = check_capture(*c.family, *c.impl, *c.problem, ref.inputs, out, rec, note);
    }
    const auto t_compare = std::chrono::steady_clock::now();
    bool ok = true;
    for (const auto& spec : c.family->outputs(*c.problem)) {
      auto it = out.find(spec.name);
      if (it == out.end()) throw std::runtime_error("impl returned no output '" + spec.name + "'");
      const Tolerance tol =
          suite.tolerances().resolve(r.family, spec.name, spec.dtype, r.impl, r.arch, c.id, &suite.manifest());
      const std::string key = bound_key(spec.name, tol.accumulation);
      evidence.judged_under[spec.name] = {key, tol.factor};
      const std::vector<double>* bound = found(ref.refs.bound, key);
      if (!tol.accumulation.empty() && !bound)
        throw std::runtime_error("output '" + spec.name + "': the reference gives no bound for accumulation '" +
                                 tol.accumulation + "' (" + tol.source + ")");
      if (tol.provisional)
        r.provisional += (r.provisional.empty() ? "" : "; ") + spec.name + ": " + to_string(tol.accumulator) + " (" +
                         tol.source + ")";
      const std::vector<double>& want = ref.refs.exact.at(spec.name);
      OutputStats s = compare_output(spec.name, it->second,
                                     {.want = want,
                                      .lowp = found(ref.refs.lowp, spec.name),
                                      .bound = bound,
                                      .row = spec.row,
                                      .reduction = found(ref.refs.reduction, spec.name),
                                      .bound_below = found(ref.refs.bound_below, key)},
                                     tol, r.worst);
      s.rule = rule_of(tol.source);
      // A reduction output's conservation check, under the same model as its bound.
      if (const auto cs = ref.refs.conservation.find(bound_key(spec.name, tol.accumulation));
          tol.metric == Metric::bounded && cs != ref.refs.conservation.end()) {
        double floor = tol.atol;
        if (tol.atol_eps != 0) {
          double max_ref = 0;
          for (double w : want)
            if (std::isfinite(w)) max_ref = std::max(max_ref, std::fabs(w));
          floor += tol.atol_eps * dtype_info(spec.dtype).epsilon * max_ref;
        }
        const ConservationStats c = check_conservation(spec.name, it->second, cs->second, tol.factor, floor);
        s.conservation_off = c.groups_off + (c.total_off ? 1 : 0);
        s.conservation = c.first;
      }
      // The error-energy check of an output whose impl declares the model it is derived from.
      if (const auto en = ref.refs.energy.find(key); en != ref.refs.energy.end()) {
        const ErrorEnergyStats energy = check_error_energy(spec.name, it->second, want, en->second);
        s.energy_ratio = energy.ratio();
        evidence.judged_under[spec.name].energy_limit = energy.limit;
      }
      ok = ok && s.mismatches == 0 && !s.biased() && s.conservation_off == 0 && !(s.energy_ratio > 1);
      for (Failure& f : output_failures(s)) r.failures.push_back(std::move(f));
      for (const GuardBreach& b : breaches)
        if (b.output == spec.name) r.failures.push_back({spec.name, FailureKind::written_outside, 0, 0});
      r.outputs.push_back(std::move(s));
    }
    ok = ok && breaches.empty();
    ctx.breaches = nullptr;  // the --bitwise reruns below throw a breach (ContractBreach)
    // Worst elements: special-value mismatches first, then by error.
    std::stable_sort(r.worst.begin(), r.worst.end(), [](const WorstElement& a, const WorstElement& b) {
      const double ea = std::isfinite(a.got - a.want) ? std::fabs(a.got - a.want) : INFINITY;
      const double eb = std::isfinite(b.got - b.want) ? std::fabs(b.got - b.want) : INFINITY;
      return ea > eb;
    });
    if (r.worst.size() > 5) r.worst.resize(5);
    r.compare_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_compare).count();
    r.raw_outcome = ok ? Outcome::PASS : Outcome::FAIL;
    if (!ok) r.message = describe_failure(r, breaches) + worst_context(r.worst, ref.inputs, out);
    // Trust check: within tolerance is not enough when the output is (mostly) zeros.
    for (const auto& o : r.outputs) {
      if (!ok) break;
      const auto why = trust_check(o);
      if (why) {
        r.raw_outcome = Outcome::MISTRUSTED;
        r.message = "mistrusted: " + *why;
        ok = false;
      }
    }
    if (ok && opts.bitwise && c.impl->deterministic(*c.problem, c.tactic)) {
      const TensorMap again = run_checked(*c.impl, *c.problem, ref.inputs, ctx, nullptr, &ref.input_fingerprints);
      const std::string diff = first_bit_difference(
          out, again, [](const std::string& at, const std::string& first, const std::string& then) {
            return "--bitwise: " + at + " differs between two runs of a deterministic impl: " + first + " then " + then;
          });
      if (!diff.empty()) {
        r.raw_outcome = Outcome::FAIL;
        r.message = diff;
        r.failures = {{"", FailureKind::nondeterministic, 0, 0}};
        r.worst.clear();  // the comparison's, which passed: the message names the first difference
        ok = false;
      }
    }
    // A result kept from an earlier call (a cache keyed on the problem, not on the data) passes
    // any single comparison: the inputs of another seed must give other bytes.
    if (ok && opts.bitwise) {
      const TensorMap other = c.family->make_inputs(*c.problem, case_seed(*c.family, *c.problem) ^ kSecondSeed);
      if (!same_bytes(other, ref.inputs)) {
        const TensorMap out2 = run_checked(*c.impl, *c.problem, other, ctx);
        if (same_bytes(out, out2) && !constant_outputs(out)) {
          r.raw_outcome = Outcome::FAIL;
          r.message =
              "--bitwise: the inputs of a second seed gave the very same output bytes (a result reused "
              "from an earlier call?)";
          r.failures = {{"", FailureKind::reused_result, 0, 0}};
          r.worst.clear();  // the comparison's, which passed: nothing of this failure
        }
      }
    }
    // The invariance contracts the impl declares: its rows of a sub-problem the family cuts from
    // this case (a batch of one, the batch reversed, the other layout), and its outputs with its
    // other tactics, must hold the very same bytes.
    if (ok && r.raw_outcome == Outcome::PASS && opts.invariance) {
      const InvarianceVerdict iv =
          check_invariance(*c.family, *c.impl, suite.arch(), *c.problem, c.tactic, ref.inputs, out,
                           [&](const Problem& sub, const TensorMap& in, std::string_view tactic) {
                             RunContext sub_ctx = ctx;
                             sub_ctx.tactic = tactic;
                             return run_checked(*c.impl, sub, in, sub_ctx);
                           });
      if (!iv.failure.empty()) {
        r.raw_outcome = Outcome::FAIL;
        r.message = iv.failure;
        r.failures = {{iv.failed_output, FailureKind::not_invariant, 0, 0}};
        r.worst.clear();  // the comparison's, which passed: the message names the first difference
        ok = false;
      }
      for (const std::string& n : iv.not_checked)
        note += (note.empty() ? "" : "; ") + std::string("invariance not checked: ") + n;
    }
    // A pass that one of the backend's checks did not cover says which (a failure's message is
    // its failure: the manifest's message patterns match it, so nothing is added there).
    if (r.raw_outcome == Outcome::PASS && !note.empty()) r.message = note;
    // A planted impl's pass: where the bound may not see its bug, derived from the case's inputs
    // and reference (Impl::blind_spot; only passes need it, and some derivations cost a run). A
    // derivation that throws derives nothing: the pass stays an XPASS without a reason.
    if (r.planted && r.raw_outcome == Outcome::PASS) {
      try {
        r.blind_spot = c.impl->blind_spot(*c.problem, evidence);
      } catch (const std::exception&) {
        r.blind_spot.clear();
      }
    }
    if ((r.raw_outcome == Outcome::FAIL || r.raw_outcome == Outcome::MISTRUSTED) && !opts.artifacts_dir.empty()) {
      try {
        write_failure_artifacts(opts.artifacts_dir, r, ref.inputs, ref.refs, out);
      } catch (const std::exception& e) {
        r.message += std::string(" (artifacts not written: ") + e.what() + ")";
      }
    }
  } catch (const DeviceLost&) {
    throw;
  } catch (const TacticUnavailable& e) {
    r.raw_outcome = Outcome::SKIP;
    // An ABI impl's message arrives prefixed with its name (throw_abi_status): said once here.
    const std::string who = std::string(c.impl->name()) + ": ";
    std::string why = e.what();
    if (why.rfind(who, 0) == 0) why.erase(0, who.size());
    r.message = who + "tactic " + c.tactic + " not offered here: " + why;
  } catch (const ContractBreach& e) {
    cache.forget();  // the inputs may be written over: the next impl gets them made afresh
    r.raw_outcome = Outcome::FAIL;
    r.message = e.what();
    r.failures = {{e.output, e.kind, 0, 0}};
    r.worst.clear();  // a breach in a rerun follows a comparison that passed: nothing of it
  } catch (const std::exception& e) {
    r.raw_outcome = Outcome::ERROR;
    r.message = e.what();
  }
  r.outcome = r.raw_outcome;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace opcts
