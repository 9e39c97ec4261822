// A catalog's `samples:` blocks drawn into problems (runner/catalog_sample.hpp).
#include "runner/catalog_sample.hpp"

#include <algorithm>
#include <array>

#include "numerics/rng.hpp"

namespace opcts {

namespace {

constexpr int64_t kDefaultAttempts = 50;
constexpr std::array<Tier, 3> kTiers{Tier::smoke, Tier::default_, Tier::full};

// One axis: a distribution over a field's values.
struct Axis {
  enum Kind { choice, uniform, log_uniform, divisor_of } kind = choice;
  std::string field;
  std::vector<YAML::Node> choices;
  std::vector<double> cumulative;  // choice: running sums of the weights
  int64_t lo = 0, hi = 0;          // uniform, log_uniform: in units of `step`
  int64_t step = 1;                // uniform, log_uniform: values are multiples of it
  std::string of;                  // divisor_of: the earlier axis
};

int64_t int_of(const std::string& path, const YAML::Node& n, const std::string& what) {
  try {
    return n.as<int64_t>();
  } catch (const YAML::Exception&) {
    yaml_fail(path, n, what + " must be an integer");
  }
}

// [lo, hi] of a `uniform:` or `log_uniform:` value.
std::pair<int64_t, int64_t> range_of(const std::string& path, const YAML::Node& n, const std::string& what) {
  if (!n.IsSequence() || n.size() != 2) yaml_fail(path, n, what + " must be [lo, hi]");
  const int64_t lo = int_of(path, n[0], what + "'s lo"), hi = int_of(path, n[1], what + "'s hi");
  if (lo > hi) yaml_fail(path, n, what + ": lo " + std::to_string(lo) + " is above hi " + std::to_string(hi));
  return {lo, hi};
}

Axis parse_axis(const std::string& path, const std::string& field, const YAML::Node& spec,
                const std::vector<Axis>& before) {
  const std::string what = "axis '" + field + "'";
  if (!spec.IsMap())
    yaml_fail(path, spec,
              what +
                  " must be a distribution: {choice: [...]}, {uniform: [lo, hi]}, "
                  "{log_uniform: [lo, hi]} or {divisor_of: AXIS}");
  check_keys(path, spec, {"choice", "weights", "uniform", "log_uniform", "divisor_of", "step"});
  Axis a;
  a.field = field;
  const int kinds = !!spec["choice"] + !!spec["uniform"] + !!spec["log_uniform"] + !!spec["divisor_of"];
  if (kinds != 1) yaml_fail(path, spec, what + " needs exactly one of choice, uniform, log_uniform, divisor_of");
  if (spec["weights"] && !spec["choice"]) yaml_fail(path, spec["weights"], what + ": weights go with choice");
  if (spec["step"] && !spec["uniform"] && !spec["log_uniform"])
    yaml_fail(path, spec["step"], what + ": step goes with uniform or log_uniform");
  if (spec["step"]) {
    a.step = int_of(path, spec["step"], what + "'s step");
    if (a.step < 1) yaml_fail(path, spec["step"], what + "'s step must be >= 1");
  }
  if (const YAML::Node c = spec["choice"]) {
    a.kind = Axis::choice;
    if (!c.IsSequence() || c.size() == 0) yaml_fail(path, c, what + "'s choice must be a non-empty list");
    for (const auto& v : c) a.choices.push_back(YAML::Clone(v));
    double sum = 0;
    for (size_t i = 0; i < a.choices.size(); ++i) {
      double w = 1;
      if (const YAML::Node ws = spec["weights"]) {
        if (!ws.IsSequence() || ws.size() != c.size())
          yaml_fail(path, ws, what + " has " + std::to_string(c.size()) + " choices and needs as many weights");
        try {
          w = ws[i].as<double>();
        } catch (const YAML::Exception&) {
          yaml_fail(path, ws[i], what + "'s weights must be numbers");
        }
        if (!(w >= 0) || w > 1e12) yaml_fail(path, ws[i], what + "'s weights must be in [0, 1e12]");
      }
      a.cumulative.push_back(sum += w);
    }
    if (!(sum > 0)) yaml_fail(path, spec["weights"], what + "'s weights are all 0");
  } else if (const YAML::Node r = spec["uniform"] ? spec["uniform"] : spec["log_uniform"]) {
    a.kind = spec["uniform"] ? Axis::uniform : Axis::log_uniform;
    const std::string form = what + (spec["uniform"] ? "'s uniform" : "'s log_uniform");
    std::tie(a.lo, a.hi) = range_of(path, r, form);
    // Drawn in units of the step: the multiples of it in [lo, hi].
    a.lo = a.lo >= 0 ? (a.lo + a.step - 1) / a.step : -(-a.lo / a.step);
    a.hi = a.hi >= 0 ? a.hi / a.step : -((-a.hi + a.step - 1) / a.step);
    if (a.lo > a.hi) yaml_fail(path, r, form + " holds no multiple of the step " + std::to_string(a.step));
    if (a.kind == Axis::log_uniform && a.lo < 0) yaml_fail(path, r, form + " needs lo >= 0");
  } else {
    a.kind = Axis::divisor_of;
    a.of = text_of(path, spec, "divisor_of");
    const bool drawn = std::any_of(before.begin(), before.end(), [&](const Axis& b) { return b.field == a.of; });
    if (!drawn)
      yaml_fail(path, spec["divisor_of"], what + " divides '" + a.of + "', which is no axis listed before it");
  }
  return a;
}

// An integer uniform in [lo, hi] from 64 random bits (the high half of r·span: no division,
// no rejection; biased by at most span/2^64).
int64_t uniform_int(uint64_t r, int64_t lo, int64_t hi) {
  const auto span = static_cast<unsigned __int128>(static_cast<uint64_t>(hi - lo)) + 1;
  return lo + static_cast<int64_t>(static_cast<uint64_t>((static_cast<unsigned __int128>(r) * span) >> 64));
}

int floor_log2(int64_t v) { return 63 - __builtin_clzll(static_cast<uint64_t>(v)); }

// A field of a point by its axis name: "seq" or, one level down, "seq.q" (sdpa's {q: N, k: N}).
YAML::Node field_of(const YAML::Node& point, const std::string& field) {
  const auto dot = field.find('.');
  if (dot == std::string::npos) return point[field];
  const YAML::Node outer = point[field.substr(0, dot)];
  return outer && outer.IsMap() ? outer[field.substr(dot + 1)] : YAML::Node();
}

void set_field(YAML::Node& point, const std::string& field, const YAML::Node& v) {
  const auto dot = field.find('.');
  if (dot == std::string::npos) {
    point[field] = v;
    return;
  }
  const std::string head = field.substr(0, dot);
  const YAML::Node old = static_cast<const YAML::Node&>(point)[head];
  YAML::Node outer = old && old.IsMap() ? YAML::Clone(old) : YAML::Node(YAML::NodeType::Map);
  outer[field.substr(dot + 1)] = v;
  point[head] = outer;
}

// Axis `a`'s value for one draw, from 128 random bits; `point` holds the axes drawn before it.
YAML::Node draw_value(const Axis& a, const std::array<uint32_t, 4>& bits, const YAML::Node& point) {
  const uint64_t r0 = uint64_t{bits[0]} << 32 | bits[1], r1 = uint64_t{bits[2]} << 32 | bits[3];
  switch (a.kind) {
    case Axis::choice: {
      // r0's top 53 bits as a double in [0, 1): exact, so the pick is the same on every machine.
      const double u = static_cast<double>(r0 >> 11) * 0x1p-53 * a.cumulative.back();
      const auto at = std::upper_bound(a.cumulative.begin(), a.cumulative.end(), u) - a.cumulative.begin();
      return YAML::Clone(a.choices[std::min<size_t>(at, a.choices.size() - 1)]);
    }
    case Axis::uniform: return YAML::Node(a.step * uniform_int(r0, a.lo, a.hi));
    case Axis::log_uniform: {
      // An octave [2^e, 2^(e+1)) uniformly, then a value inside it (clipped to [lo, hi]):
      // every scale as likely, small sizes well covered. From lo = 0, 0 is an octave of its own
      // (e = −1), as likely as 1 or as 2–3: the empty problem is drawn, not left to a grid.
      const int e =
          static_cast<int>(uniform_int(r0, a.lo == 0 ? -1 : floor_log2(a.lo), a.hi == 0 ? -1 : floor_log2(a.hi)));
      if (e < 0) return YAML::Node(int64_t{0});
      const int64_t lo = std::max(a.lo, int64_t{1} << e);
      const int64_t hi = e >= 62 ? a.hi : std::min(a.hi, (int64_t{1} << (e + 1)) - 1);
      return YAML::Node(a.step * uniform_int(r1, lo, hi));
    }
    case Axis::divisor_of: {
      const YAML::Node of = field_of(point, a.of);
      const int64_t v = of && of.IsScalar() ? of.as<int64_t>() : 0;
      if (v < 1)
        throw std::invalid_argument("'" + a.field + "' divides '" + a.of + "', which drew " + std::to_string(v));
      std::vector<int64_t> divisors, large;
      for (int64_t d = 1; d * d <= v; ++d)
        if (v % d == 0) {
          divisors.push_back(d);
          if (d != v / d) large.push_back(v / d);
        }
      divisors.insert(divisors.end(), large.rbegin(), large.rend());
      return YAML::Node(divisors[static_cast<size_t>(uniform_int(r0, 0, static_cast<int64_t>(divisors.size()) - 1))]);
    }
  }
  return {};
}

// The count of each tier (smoke, default, full), non-decreasing.
std::array<int64_t, 3> counts_of(const std::string& path, const YAML::Node& block, const std::string& what) {
  std::array<int64_t, 3> counts{0, 0, 0};
  const YAML::Node c = block["count"];
  if (!c) yaml_fail(path, block, what + " needs a 'count:' (a number, or {smoke: N, default: N, full: N})");
  if (c.IsScalar()) {
    if (block["tier"] && !block["tier"].IsScalar()) yaml_fail(path, block["tier"], what + "'s tier must be a name");
    Tier from = Tier::default_;
    if (block["tier"]) {
      try {
        from = parse_tier(block["tier"].Scalar());
      } catch (const std::exception& e) {
        yaml_fail(path, block["tier"], e.what());
      }
    }
    const int64_t n = int_of(path, c, what + "'s count");
    for (size_t t = 0; t < kTiers.size(); ++t) counts[t] = kTiers[t] >= from ? n : 0;
  } else if (c.IsMap()) {
    if (block["tier"])
      yaml_fail(path, block["tier"], what + ": give 'tier:' with a single count, not with counts per tier");
    check_keys(path, c, {"smoke", "default", "full"});
    int64_t last = 0;
    for (size_t t = 0; t < kTiers.size(); ++t) {
      const std::string name(to_string(kTiers[t]));
      if (const YAML::Node n = c[name]) {
        counts[t] = int_of(path, n, what + "'s count of " + name);
        if (counts[t] < last)
          yaml_fail(path, n,
                    what + "'s " + name + " count " + std::to_string(counts[t]) + " is below a smaller tier's " +
                        std::to_string(last) + " (a tier holds the smaller tiers' draws)");
      } else {
        counts[t] = last;
      }
      last = counts[t];
    }
  } else {
    yaml_fail(path, c, what + "'s count must be a number or {smoke: N, default: N, full: N}");
  }
  for (size_t t = 0; t < kTiers.size(); ++t)
    if (counts[t] < 0 || counts[t] > kMaxSampleDraws)
      yaml_fail(path, c, what + "'s count must be in [0, " + std::to_string(kMaxSampleDraws) + "]");
  return counts;
}

}  // namespace

int64_t sample_size(const YAML::Node& block) {
  if (!block.IsMap() || !block["count"]) return 0;
  const YAML::Node c = block["count"];
  int64_t n = 0;
  try {
    if (c.IsScalar()) n = c.as<int64_t>();
    if (c.IsMap())
      for (const auto& kv : c) n = std::max(n, kv.second.as<int64_t>());
  } catch (const YAML::Exception&) {
    return 0;
  }
  return std::clamp<int64_t>(n, 0, kMaxSampleDraws);
}

std::vector<SampleDraw> draw_sample(const Family& f, const std::string& path, const YAML::Node& block,
                                    const SampleOverride& override) {
  check_keys(path, block, {"name", "why", "seed", "count", "tier", "attempts", "axes", "fixed", "variants"});
  if (!block["name"] || text_of(path, block, "name").empty()) yaml_fail(path, block, "a sample needs a name");
  const std::string name = text_of(path, block, "name");
  const std::string what = "sample '" + name + "'";
  if (!block["why"]) yaml_fail(path, block, what + " needs a 'why:' saying what its draws are for");
  text_of(path, block, "why");
  if (!block["seed"]) yaml_fail(path, block, what + " needs a 'seed:' (its draws are a pure function of it)");
  uint64_t seed = 0;
  try {
    seed = block["seed"].as<uint64_t>();
  } catch (const YAML::Exception&) {
    yaml_fail(path, block["seed"], what + "'s seed must be a non-negative integer");
  }
  if (override.seed) seed = *override.seed;
  std::array<int64_t, 3> counts = counts_of(path, block, what);
  if (override.count) counts = {*override.count, *override.count, *override.count};
  const int64_t attempts = block["attempts"] ? int_of(path, block["attempts"], what + "'s attempts") : kDefaultAttempts;
  if (attempts < 1 || attempts > 10'000) yaml_fail(path, block["attempts"], what + "'s attempts must be in [1, 10000]");
  if (!block["axes"]) yaml_fail(path, block, what + " needs a map 'axes:'");
  const YAML::Node axes = require_map(path, block["axes"], what + " 'axes'");
  if (axes.size() == 0) yaml_fail(path, axes, what + " has no axes");
  const YAML::Node fixed = block["fixed"] ? require_map(path, block["fixed"], what + " 'fixed'") : YAML::Node();
  std::vector<Axis> ax;
  for (const auto& kv : axes) {
    const std::string field = kv.first.Scalar();
    if (fixed && fixed[field.substr(0, field.find('.'))])
      yaml_fail(path, kv.first, "'" + field + "' is both an axis and in 'fixed' of " + what);
    ax.push_back(parse_axis(path, field, kv.second, ax));
  }

  // The block's Philox key: the family, the block's name and its seed, so two blocks (or two
  // families) with one seed draw apart. Draw i is stream i; attempt t of axis k is block
  // t·(axes) + k of it.
  const uint64_t key = seed_of(std::string(f.name()) + "/" + name + "/" + std::to_string(seed));
  std::vector<SampleDraw> out;
  // `variants`: each draw becomes one problem per combination of these fields' values (sdpa's
  // backward problems with their forward twins), all of which the family must accept.
  std::vector<std::pair<std::string, std::vector<YAML::Node>>> variants;
  size_t combinations = 1;
  if (block["variants"])
    for (const auto& kv : require_map(path, block["variants"], what + " 'variants'")) {
      const std::string field = kv.first.Scalar();
      if (!kv.second.IsSequence() || kv.second.size() == 0)
        yaml_fail(path, kv.second, what + "'s variant '" + field + "' must be a non-empty list");
      const bool drawn = std::any_of(ax.begin(), ax.end(), [&](const Axis& a) { return a.field == field; });
      if (drawn || (fixed && fixed[field]))
        yaml_fail(path, kv.first, "'" + field + "' is both a variant and an axis or fixed field of " + what);
      variants.emplace_back(field, std::vector<YAML::Node>(kv.second.begin(), kv.second.end()));
      combinations *= kv.second.size();
      if (combinations > 64) yaml_fail(path, kv.second, what + " has more than 64 variants a draw");
    }
  Tier tier_of_draw = Tier::full;
  for (int64_t i = 0; i < counts.back(); ++i) {
    for (size_t k = kTiers.size(); k-- > 0;)
      if (i < counts[k]) tier_of_draw = kTiers[k];
    std::string last_error;
    YAML::Node last_point;
    bool drawn = false;
    for (int64_t t = 0; t < attempts && !drawn; ++t) {
      YAML::Node point(YAML::NodeType::Map);
      if (fixed)
        for (const auto& kv : fixed) point[kv.first.Scalar()] = YAML::Clone(kv.second);
      std::vector<SampleDraw> these;
      last_point = point;
      try {
        for (size_t k = 0; k < ax.size(); ++k)
          set_field(point, ax[k].field,
                    draw_value(ax[k], random_block(key, static_cast<uint32_t>(i), t * ax.size() + k), point));
        for (size_t c = 0; c < combinations; ++c) {
          YAML::Node variant = YAML::Clone(point);
          for (size_t v = 0, rest = c; v < variants.size(); rest /= variants[v].second.size(), ++v)
            variant[variants[v].first] = YAML::Clone(variants[v].second[rest % variants[v].second.size()]);
          last_point = variant;
          ProblemPtr p = f.parse(variant);
          these.push_back({variant, std::move(p), tier_of_draw, i});
        }
      } catch (const std::exception& e) {
        last_error = e.what();
        continue;
      }
      for (SampleDraw& d : these) out.push_back(std::move(d));
      drawn = true;
    }
    if (!drawn)
      yaml_fail(path, block,
                what + " draw " + std::to_string(i) + ": the family refused all " + std::to_string(attempts) +
                    " attempts; the last, " + one_line(last_point).substr(0, 200) + ": " + last_error);
  }
  return out;
}

}  // namespace opcts
