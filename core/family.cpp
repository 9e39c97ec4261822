// Case ids, tiers and the family/impl registry.
#include "core/family.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "core/errors.hpp"

#include "core/spellings.hpp"
#include "numerics/rng.hpp"

namespace opcts {

constexpr Spellings<Tier, 3> kTiers{{{Tier::smoke, "smoke"}, {Tier::default_, "default"}, {Tier::full, "full"}}};

std::string_view to_string(Tier t) { return kTiers.of(t); }

Tier parse_tier(std::string_view s) {
  if (const auto t = kTiers.parse(s)) return *t;
  throw std::invalid_argument("unknown tier '" + std::string(s) + "' (expected " + kTiers.joined(" or ") + ")");
}

std::string bound_key(std::string_view output, std::string_view accumulation) {
  std::string key(output);
  if (!accumulation.empty()) key.append("@").append(accumulation);
  return key;
}

namespace {
std::string id_token(std::string_view impl_name) {
  std::string t(impl_name);
  std::replace(t.begin(), t.end(), '.', '_');
  return t;
}
}  // namespace

std::string case_id(const Family& f, const Impl& impl, const Problem& p) {
  return case_id_from_problem_id(f, impl, f.problem_id(p));
}

std::string case_id_from_problem_id(const Family& f, const Impl& impl, std::string_view problem_id,
                                    std::string_view tactic) {
  std::string id = std::string(f.name()) + "." + id_token(impl.name()) + "/" + std::string(problem_id);
  if (!tactic.empty()) id.append("/").append(tactic);
  return id;
}

CaseIdParts split_case_id(std::string_view id) {
  const auto slash = id.find('/');
  const auto dot = id.find('.');
  if (slash == std::string_view::npos || dot == std::string_view::npos || dot > slash)
    throw std::invalid_argument("case id '" + std::string(id) + "': expected <family>.<impl>/<problem>[/<tactic>]");
  CaseIdParts parts{id.substr(0, dot), id.substr(dot + 1, slash - dot - 1), id.substr(slash + 1), {}};
  if (const auto second = parts.problem_id.find('/'); second != std::string_view::npos) {
    parts.tactic = parts.problem_id.substr(second + 1);
    parts.problem_id = parts.problem_id.substr(0, second);
  }
  return parts;
}

std::vector<std::string> tactics_of(const Impl& impl, const Problem& p) {
  if (!impl.family_def().expected_error(p).empty()) return {};
  return impl.tactics(p);
}

bool is_tactic_name(std::string_view s) {
  if (s.empty() || s.size() > 32 || s[0] < 'a' || s[0] > 'z') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

Tier tactic_tier(Tier problem_tier, size_t index, size_t count, std::string_view problem_id) {
  if (index == 0) return problem_tier;
  const size_t rotating = 1 + static_cast<size_t>(seed_of(std::string(problem_id)) % (count - 1));
  return std::max(problem_tier, index == rotating ? Tier::default_ : Tier::full);
}

uint64_t case_seed(const Family& f, const Problem& p) { return seed_of(std::string(f.name()) + "/" + f.problem_id(p)); }

uint64_t capture_seed(const Family& f, const Problem& p) { return case_seed(f, p) ^ 0xca97ca97ca97ca97ull; }

namespace {

// Refuses an impl that wrote into the buffers it was handed (`what` they held: the inputs copied
// in last).
void check_buffers(const Impl& impl, const TensorMap& buffers, const TensorMap& what) {
  for (const auto& [name, t] : what)
    if (fingerprint(buffers.at(name)) != fingerprint(t))
      throw ContractBreach(FailureKind::wrote_input,
                           std::string(impl.name()) + " wrote into its input '" + name + "' (inputs are read-only)");
}

}  // namespace

CapturedRun Impl::run_captured(const Problem& p, const TensorMap& capture_inputs, const TensorMap& inputs,
                               const RunContext& ctx) const {
  TensorMap buffers = capture_inputs;  // the recording's buffers: their addresses never change below
  CapturedRun r;
  r.at_capture = run(p, buffers, ctx);
  check_buffers(*this, buffers, capture_inputs);
  for (auto& [name, t] : buffers) {
    const HostTensor& fresh = inputs.at(name);
    if (fresh.dtype() != t.dtype() || fresh.shape() != t.shape() || fresh.nbytes() != t.nbytes())
      throw std::logic_error("run_captured: input '" + name + "' has another layout in the case's inputs");
    std::memcpy(t.data(), fresh.data(), t.nbytes());
  }
  r.first = run(p, buffers, ctx);
  r.second = run(p, buffers, ctx);
  check_buffers(*this, buffers, inputs);
  return r;
}

void Registry::add(std::unique_ptr<Family> f) {
  if (family(f->name())) throw std::logic_error("family registered twice: " + std::string(f->name()));
  families_.push_back(std::move(f));
}

const Family& Impl::family_def() const {
  if (!family_) throw std::logic_error("impl " + std::string(name()) + " is not registered");
  return *family_;
}

void Registry::add(std::unique_ptr<Impl> i) {
  if (impl(i->name())) throw std::logic_error("impl registered twice: " + std::string(i->name()));
  const Family* f = family(i->family());
  if (!f) throw std::logic_error("impl " + std::string(i->name()) + " of unknown family " + std::string(i->family()));
  i->family_ = f;
  impls_.push_back(std::move(i));
}

const Family* Registry::family(std::string_view name) const {
  for (const auto& f : families_)
    if (f->name() == name) return f.get();
  return nullptr;
}

const Impl* Registry::impl(std::string_view name) const {
  for (const auto& i : impls_)
    if (i->name() == name) return i.get();
  return nullptr;
}

const Impl* Registry::impl_by_id_token(std::string_view token) const {
  for (const auto& i : impls_)
    if (id_token(i->name()) == token) return i.get();
  return nullptr;
}

std::vector<const Family*> Registry::families() const {
  std::vector<const Family*> out;
  for (const auto& f : families_) out.push_back(f.get());
  return out;
}

std::vector<const Impl*> Registry::impls_of(std::string_view family) const {
  std::vector<const Impl*> out;
  for (const auto& i : impls_)
    if (i->family() == family) out.push_back(i.get());
  return out;
}

ProblemPtr Family::with_batch(const Problem&, int64_t) const {
  throw std::logic_error(std::string(name()) + ": with_batch on a family whose batch_entries is 0");
}

}  // namespace opcts
