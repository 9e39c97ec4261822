// Case ids, tiers and the family/impl registry.
#include "core/family.hpp"

#include <algorithm>
#include <stdexcept>

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

std::string case_id_from_problem_id(const Family& f, const Impl& impl, std::string_view problem_id) {
  return std::string(f.name()) + "." + id_token(impl.name()) + "/" + std::string(problem_id);
}

uint64_t case_seed(const Family& f, const Problem& p) { return seed_of(std::string(f.name()) + "/" + f.problem_id(p)); }

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
